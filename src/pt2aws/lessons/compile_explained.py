"""What ``torch.compile`` does, on a tiny model on CPU (notebook 01, section 2): Dynamo's graphs
and breaks, recompiles, AOTAutograd's graphs, Inductor's kernels, and the bf16 facts."""

from __future__ import annotations

import ast
import inspect
import logging
import math
import textwrap

import torch
import torch.nn.functional as F
from torch import nn


class TinyClassifier(nn.Module):
    """Embedding, one self-attention block, mean pool, head: ``(batch, length)`` int64 ids and a
    0/1 mask -> ``(batch, num_labels)`` logits."""

    def __init__(self, vocab_size: int = 100, dim: int = 32, heads: int = 2, num_labels: int = 2):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab_size, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        keep = attention_mask[:, None, None, :].bool()
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        x = self.norm(x + self.proj(attended.transpose(1, 2).reshape(b, t, d)))
        weights = attention_mask[..., None].to(x.dtype)
        return self.head((x * weights).sum(1) / weights.sum(1))


def step_with_graph_break(model, input_ids, attention_mask, labels):
    """A training-step fragment with a graph break: Python branches on a tensor's value."""
    logits = model(input_ids, attention_mask)
    loss = F.cross_entropy(logits, labels)
    if loss.item() > 5.0:  # .item() hands a number to Python: Dynamo must end the graph here
        loss = loss.clamp(max=5.0)
    accuracy = (logits.argmax(-1) == labels).float().mean()
    return loss, accuracy


def step_without_graph_break(model, input_ids, attention_mask, labels):
    """The same computation kept on tensors (``torch.where``): one graph, no break."""
    logits = model(input_ids, attention_mask)
    loss = F.cross_entropy(logits, labels)
    loss = torch.where(loss > 5.0, loss.clamp(max=5.0), loss)
    accuracy = (logits.argmax(-1) == labels).float().mean()
    return loss, accuracy


def _recorder(graphs: list):
    """A ``torch.compile`` backend that keeps each FX graph Dynamo hands it and runs it as is."""

    def backend(gm: torch.fx.GraphModule, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend


def capture_graphs(fn, *args) -> dict:
    """Compile ``fn`` with a recording backend and call it once: its graphs and breaks."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    graphs = []
    dynamo_log = logging.getLogger("torch._dynamo")
    level = dynamo_log.level
    dynamo_log.setLevel(logging.ERROR)  # the breaks are the lesson: returned, not logged
    try:
        with torch.no_grad():
            torch.compile(fn, backend=_recorder(graphs))(*args)
    finally:
        dynamo_log.setLevel(level)
    reasons = [r.splitlines()[0] for r, n in counters["graph_break"].items() for _ in range(n)]
    return {
        "graph_count": len(graphs),
        "graph_break_count": len(reasons),
        "break_reasons": reasons,
        "graph_code": [gm.code.strip() for gm in graphs],
    }


def graph_breaks() -> dict:
    """:func:`capture_graphs` of the step with a graph break and of the one without."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 100, (4, 16), generator=gen)
    labels = torch.randint(0, 2, (4,), generator=gen)
    args = (TinyClassifier().eval(), ids, torch.ones(4, 16, dtype=torch.long), labels)
    return {
        "with_break": capture_graphs(step_with_graph_break, *args),
        "without_break": capture_graphs(step_without_graph_break, *args),
    }


def count_recompiles(
    lengths, *, batch_size=16, bucketing=False, pad_to_multiple_of=1, dynamic=False
):
    """One epoch of ``epoch_batches`` (shuffled or bucketed), each padded to its longest text
    (rounded up to ``pad_to_multiple_of``), through the compiled tiny model: batches, distinct
    shapes, compiles, pad fraction."""
    from pt2aws.train.distributed import epoch_batches

    batches = epoch_batches(lengths, batch_size, seed=0, bucketing=bucketing)
    multiple = pad_to_multiple_of
    shapes = [
        (len(b), math.ceil(max(lengths[i] for i in b) / multiple) * multiple) for b in batches
    ]
    torch.manual_seed(0)
    graphs = []
    torch._dynamo.reset()
    compiled = torch.compile(TinyClassifier().eval(), backend=_recorder(graphs), dynamic=dynamic)
    with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=len(batches) + 1):
        for rows, padded in shapes:
            compiled(torch.zeros(rows, padded, dtype=torch.long), torch.ones(rows, padded))
    real = sum(lengths[i] for b in batches for i in b)
    return {
        "batches": len(batches),
        "distinct_shapes": len(set(shapes)),
        "compiles": len(graphs),
        "pad_fraction": 1 - real / sum(rows * padded for rows, padded in shapes),
        "padded_lengths": [padded for _, padded in shapes],
    }


def recompile_table() -> list[dict]:
    """:func:`count_recompiles` for the settings worth comparing, one row each, on 96 lengths
    drawn from 6-48 tokens like tweets."""
    lengths = torch.randint(6, 49, (96,), generator=torch.Generator().manual_seed(0)).tolist()
    settings = {
        "shuffled, pad to longest, static shapes": {},
        "shuffled, pad to multiple of 8, static": {"pad_to_multiple_of": 8},
        "bucketed, pad to longest, static shapes": {"bucketing": True},
        "bucketed, pad to multiple of 8, static": {"bucketing": True, "pad_to_multiple_of": 8},
        "bucketed, pad to longest, dynamic=None": {"bucketing": True, "dynamic": None},
    }
    return [
        {"setting": name, **count_recompiles(lengths, **kwargs)}
        for name, kwargs in settings.items()
    ]


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 2))


def aot_graphs() -> dict:
    """``{"forward", "backward"}``: the code of AOTAutograd's ATen graphs of a 2-layer MLP's loss."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    captured, mlp = {}, _mlp()

    def keep(name):
        def compiler(gm, example_inputs):
            captured[name] = gm.code.strip()
            return make_boxed_func(gm.forward)

        return compiler

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))
    loss = torch.compile(lambda x, y: F.cross_entropy(mlp(x), y), backend=backend)
    loss(torch.randn(4, 8), torch.tensor([0, 1, 1, 0])).backward()
    return captured


def inductor_code(max_lines: int = 40) -> dict:
    """What Inductor generates for a 2-layer MLP on CPU: ``kernels`` (names), ``glimpse`` (the
    first kernel's first ``max_lines`` lines) and ``lines``."""
    from torch._inductor.utils import run_and_get_code

    with torch.no_grad():  # a warm FX graph cache still returns the code, in seconds
        _, codes = run_and_get_code(torch.compile(_mlp()), torch.randn(4, 8))
    lines = "\n".join(codes).splitlines()
    starts = [i for i, line in enumerate(lines) if "async_compile.cpp" in line]
    glimpse = "\n".join(lines[starts[0] if starts else 0 :][:max_lines])
    return {
        "kernels": [lines[i].split(" = ")[0] for i in starts],
        "glimpse": glimpse,
        "lines": len(lines),
    }


def precision() -> dict:
    """bf16, fp16 and fp32: ``formats`` (``torch.finfo``), ``sum_of_ones`` (1.0 added 1,000
    times: bf16 stops at 256), ``exp_12`` (overflows fp16) and ``one_plus_1e-3``."""
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    out = {"formats": {}, "sum_of_ones": {}, "exp_12": {}, "one_plus_1e-3": {}}
    for name, dtype in dtypes.items():
        info = torch.finfo(dtype)
        fields = ("bits", "max", "smallest_normal", "eps")
        out["formats"][name] = {field: getattr(info, field) for field in fields}
        total = torch.zeros((), dtype=dtype)
        for _ in range(1000):  # one addition at a time: each rounds to the format
            total = total + 1
        out["sum_of_ones"][name] = float(total)
        out["exp_12"][name] = float(torch.tensor(12.0, dtype=dtype).exp())
        out["one_plus_1e-3"][name] = bool(torch.tensor(1.0, dtype=dtype) + 1e-3 != 1.0)
    return out


def show_source(obj, docstring: bool = True) -> str:
    """The dedented source of a function or class; ``docstring=False`` leaves its docstring out."""
    source = textwrap.dedent(inspect.getsource(obj))
    body = ast.parse(source).body[0].body
    if docstring or not (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
        return source
    lines = source.splitlines(keepends=True)
    return "".join(lines[: body[0].lineno - 1] + lines[body[0].end_lineno :])
