"""What ``torch.compile`` does, on a tiny model on CPU (notebook 01, section 2): Dynamo's graphs
and breaks, recompiles, AOTAutograd's graphs, Inductor's kernels, and the bf16 facts."""

from __future__ import annotations

import ast
import functools
import inspect
import logging
import math
import textwrap

import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.testing import CompileCounter


class TinyClassifier(nn.Module):
    """Embedding, masked mean pool, linear head: ``(batch, length)`` int64 ids and a 0/1 mask ->
    ``(batch, 2)`` logits."""

    def __init__(self, vocab_size: int = 100, dim: int = 32):
        super().__init__()
        self.embed, self.head = nn.Embedding(vocab_size, dim), nn.Linear(dim, 2)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        weights = attention_mask[..., None].float()
        return self.head((self.embed(input_ids) * weights).sum(1) / weights.sum(1))


def clamped_step(model, input_ids, attention_mask, labels, *, graph_break: bool):
    """A training-step fragment that clamps the loss at 5: with a Python branch on its value (a
    graph break), or kept on tensors (``torch.where``: one graph, no break)."""
    logits = model(input_ids, attention_mask)
    loss = F.cross_entropy(logits, labels)
    if graph_break:  # .item() hands a number to Python: Dynamo must end the graph here
        loss = loss.clamp(max=5.0) if loss.item() > 5.0 else loss
    else:
        loss = torch.where(loss > 5.0, loss.clamp(max=5.0), loss)
    return loss, (logits.argmax(-1) == labels).float().mean()


def graph_breaks() -> dict:
    """``torch._dynamo.explain`` of the step with a graph break and of the one without: each's
    ``graph_count``, ``graph_break_count`` and ``break_reasons`` (first lines)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 100, (4, 16), generator=gen)
    labels = torch.randint(0, 2, (4,), generator=gen)
    args = (TinyClassifier().eval(), ids, torch.ones_like(ids), labels)
    dynamo_log, out = logging.getLogger("torch._dynamo"), {}
    level = dynamo_log.level
    dynamo_log.setLevel(logging.ERROR)  # the breaks are the lesson: returned, not logged
    try:
        for name, graph_break in (("with_break", True), ("without_break", False)):
            with torch.no_grad():
                found = torch._dynamo.explain(clamped_step)(*args, graph_break=graph_break)
            out[name] = {
                "graph_count": found.graph_count,
                "graph_break_count": found.graph_break_count,
                "break_reasons": [r.reason.splitlines()[0] for r in found.break_reasons],
            }
    finally:
        dynamo_log.setLevel(level)
    return out


def recompile_table() -> list[dict]:
    """Per setting, one epoch of ``epoch_batches`` (batch 16) of 96 lengths drawn from 6-48
    tokens like tweets, each batch padded to its longest text (rounded up to a multiple),
    through the compiled tiny model: ``batches``, ``distinct_shapes``, ``compiles``,
    ``pad_fraction``, ``padded_lengths``."""
    from pt2aws.train.distributed import epoch_batches

    lengths = torch.randint(6, 49, (96,), generator=torch.Generator().manual_seed(0)).tolist()
    settings = {  # (bucketing, pad to a multiple of, dynamic)
        "shuffled, pad to longest, static shapes": (False, 1, False),
        "shuffled, pad to multiple of 8, static": (False, 8, False),
        "bucketed, pad to longest, static shapes": (True, 1, False),
        "bucketed, pad to multiple of 8, static": (True, 8, False),
        "bucketed, pad to longest, dynamic=None": (True, 1, None),
    }
    rows = []
    for name, (bucketing, multiple, dynamic) in settings.items():
        batches = epoch_batches(lengths, 16, seed=0, bucketing=bucketing)
        shapes = [
            (len(b), math.ceil(max(lengths[i] for i in b) / multiple) * multiple) for b in batches
        ]
        torch.manual_seed(0)
        torch._dynamo.reset()
        counter = CompileCounter()  # a backend that counts the graphs it is given, run eagerly
        compiled = torch.compile(TinyClassifier().eval(), backend=counter, dynamic=dynamic)
        with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=len(batches) + 1):
            for n, length in shapes:
                compiled(torch.zeros(n, length, dtype=torch.long), torch.ones(n, length))
        cells = sum(n * length for n, length in shapes)  # each text is in one batch
        rows.append({
            "setting": name, "batches": len(batches), "distinct_shapes": len(set(shapes)),
            "compiles": counter.frame_count, "pad_fraction": 1 - sum(lengths) / cells,
            "padded_lengths": [length for _, length in shapes],
        })  # fmt: skip
    return rows


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 2))


def aot_graphs() -> dict:
    """``{"forward", "backward"}``: AOTAutograd's ATen graphs (code) of a 2-layer MLP's loss."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    captured, mlp = {}, _mlp()

    def keep(gm, example_inputs, name):
        captured[name] = gm.code.strip()
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    fw, bw = (functools.partial(keep, name=name) for name in ("forward", "backward"))
    backend = aot_autograd(fw_compiler=fw, bw_compiler=bw)
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
    kernels = [lines[i].split(" = ")[0] for i in starts]
    return {"kernels": kernels, "glimpse": glimpse, "lines": len(lines)}


def precision() -> dict:
    """bf16, fp16 and fp32: ``formats`` (``torch.finfo``), ``sum_of_ones`` (1.0 added 1,000
    times: bf16 stops at 256), ``exp_12`` (overflows fp16) and ``one_plus_1e-3``."""
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    out = {"formats": {}, "sum_of_ones": {}, "exp_12": {}, "one_plus_1e-3": {}}
    for name, dtype in dtypes.items():
        fields = ("bits", "max", "smallest_normal", "eps")
        out["formats"][name] = {field: getattr(torch.finfo(dtype), field) for field in fields}
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
    node = ast.parse(source).body[0]
    if docstring or ast.get_docstring(node) is None:
        return source
    lines, doc = source.splitlines(keepends=True), node.body[0]
    return "".join(lines[: doc.lineno - 1] + lines[doc.end_lineno :])
