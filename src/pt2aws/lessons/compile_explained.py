"""What ``torch.compile`` does, shown on a tiny model on CPU (notebook 01's lesson).

``torch.compile`` runs three stages (PyTorch 2 docs, "torch.compile" and "Dynamo overview"):

1. **TorchDynamo** reads the Python bytecode of the forward and captures the tensor operations
   into an FX graph. Python it cannot trace (for example a branch on ``loss.item()``) ends the
   graph: a *graph break*; the rest runs eagerly and a new graph starts after it. Each graph is
   guarded on its inputs' shapes; a new padded length fails a guard and *recompiles*.
2. **AOTAutograd** traces the graph once more, through autograd, into a forward and a backward
   graph of ATen operations, so the backward is compiled too.
3. **TorchInductor** turns those graphs into fused kernels: C++/OpenMP on CPU, Triton on GPU.

Each function below returns what one stage produced, as data the notebook prints and the tests
assert; all run on CPU in seconds (Inductor's first C++ compile: 10-70 s on a loaded 2-core
machine, then cached). :func:`precision` adds the bf16-versus-fp32 facts behind autocast.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import logging
import math
import textwrap

import torch
import torch.nn.functional as F
from torch import nn


class TinyClassifier(nn.Module):
    """A sentence classifier in miniature: embedding, one self-attention block, mean pool, head.

    Args:
        vocab_size: token ids are in ``[0, vocab_size)``.
        dim: hidden size; ``heads`` must divide it.
        heads: attention heads.
        num_labels: classes.
    """

    def __init__(self, vocab_size: int = 100, dim: int = 32, heads: int = 2, num_labels: int = 2):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab_size, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``(batch, length)`` int64 ids and 0/1 mask -> ``(batch, num_labels)`` float logits."""
        x = self.embed(input_ids)
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        keep = attention_mask[:, None, None, :].bool()
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        x = self.norm(x + self.proj(attended.transpose(1, 2).reshape(b, t, d)))
        weights = attention_mask[..., None].to(x.dtype)
        return self.head((x * weights).sum(1) / weights.sum(1))


def example_batch(batch_size: int = 4, length: int = 16, seed: int = 0) -> dict:
    """Random ``input_ids`` / ``attention_mask`` (all ones) / ``labels`` for :class:`TinyClassifier`."""
    gen = torch.Generator().manual_seed(seed)
    return {
        "input_ids": torch.randint(0, 100, (batch_size, length), generator=gen),
        "attention_mask": torch.ones(batch_size, length, dtype=torch.long),
        "labels": torch.randint(0, 2, (batch_size,), generator=gen),
    }


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


class _GraphRecorder:
    """A ``torch.compile`` backend that keeps each FX graph Dynamo hands it and runs it as is."""

    def __init__(self):
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def _op_count(gm: torch.fx.GraphModule) -> int:
    return sum(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes)


@contextlib.contextmanager
def _quiet_dynamo():
    """Dynamo's own graph-break warnings off for the duration (the caller reports them)."""
    logger = logging.getLogger("torch._dynamo")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def capture_graphs(fn, *args, dynamic: bool | None = None) -> dict:
    """Compile ``fn`` with a recording backend, call it once, and report what Dynamo captured.

    Args:
        fn: a function or module.
        *args: its arguments.
        dynamic: passed to ``torch.compile``.

    Returns:
        ``graph_count``, ``graph_break_count``, ``break_reasons`` (first line of each),
        ``ops_per_graph`` and ``graph_code`` (the Python code of each FX graph).
    """
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    recorder = _GraphRecorder()
    with torch.no_grad():
        with _quiet_dynamo():  # the breaks are the lesson: returned, not logged as warnings
            torch.compile(fn, backend=recorder, dynamic=dynamic)(*args)
    reasons = [r.splitlines()[0] for r, n in counters["graph_break"].items() for _ in range(n)]
    return {
        "graph_count": len(recorder.graphs),
        "graph_break_count": len(reasons),
        "break_reasons": reasons,
        "ops_per_graph": [_op_count(gm) for gm in recorder.graphs],
        "graph_code": [gm.code.strip() for gm in recorder.graphs],
    }


def graph_breaks(seed: int = 0) -> dict:
    """Dynamo on the tiny model: the step with a graph break and the same step without it.

    Returns:
        ``{"with_break": ..., "without_break": ...}``, each from :func:`capture_graphs`.
    """
    torch.manual_seed(seed)
    model, batch = TinyClassifier().eval(), example_batch(seed=seed)
    args = (model, batch["input_ids"], batch["attention_mask"], batch["labels"])
    return {
        "with_break": capture_graphs(step_with_graph_break, *args),
        "without_break": capture_graphs(step_without_graph_break, *args),
    }


def example_lengths(n: int = 96, low: int = 6, high: int = 48, seed: int = 0) -> list[int]:
    """``n`` token counts drawn uniformly from ``[low, high]``: stand-ins for tokenized tweets."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high + 1, (n,), generator=gen).tolist()


def _padded(length: int, multiple: int | None) -> int:
    return length if not multiple else math.ceil(length / multiple) * multiple


def count_recompiles(
    lengths: list[int] | None = None,
    *,
    batch_size: int = 16,
    bucketing: bool = False,
    pad_to_multiple_of: int | None = None,
    dynamic: bool | None = False,
    seed: int = 0,
) -> dict:
    """Run one epoch of batches through the compiled tiny model and count the compilations.

    Batches come from :func:`pt2aws.train.distributed.epoch_batches` (shuffled, or bucketed by
    length as ``--length_bucketing`` does), each padded to its longest example, rounded up to
    ``pad_to_multiple_of``. With ``dynamic=False`` every new ``(batch, length)`` shape fails a
    guard and recompiles; ``dynamic=None`` (``torch.compile``'s default) recompiles once with a
    symbolic length when a second length arrives, then reuses that graph.

    Args:
        lengths: tokens per example; default :func:`example_lengths`.
        batch_size: examples per batch.
        bucketing: sort by length within windows (fewer pad tokens, more distinct lengths).
        pad_to_multiple_of: round every padded length up to a multiple (bounds the shapes).
        dynamic: ``torch.compile(dynamic=...)``.
        seed: shuffle seed.

    Returns:
        ``batches``, ``distinct_shapes``, ``compiles`` (graphs compiled), ``pad_fraction`` (pad
        tokens / all tokens) and ``padded_lengths`` (per batch, in order).
    """
    from pt2aws.train.distributed import epoch_batches

    lengths = lengths or example_lengths()
    batches = epoch_batches(lengths, batch_size, seed=seed, bucketing=bucketing)
    shapes = [(len(b), _padded(max(lengths[i] for i in b), pad_to_multiple_of)) for b in batches]
    torch.manual_seed(seed)
    model, recorder = TinyClassifier().eval(), _GraphRecorder()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=recorder, dynamic=dynamic)
    with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=len(batches) + 1):
        for rows, padded in shapes:
            compiled(torch.zeros(rows, padded, dtype=torch.long), torch.ones(rows, padded))
    real = sum(lengths[i] for b in batches for i in b)
    return {
        "batches": len(batches),
        "distinct_shapes": len(set(shapes)),
        "compiles": len(recorder.graphs),
        "pad_fraction": 1 - real / sum(rows * padded for rows, padded in shapes),
        "padded_lengths": [padded for _, padded in shapes],
    }


def recompile_table(lengths: list[int] | None = None, batch_size: int = 16) -> list[dict]:
    """:func:`count_recompiles` for the settings worth comparing, one row each (``setting``)."""
    settings = {
        "shuffled, pad to longest, static shapes": {},
        "shuffled, pad to multiple of 8, static": {"pad_to_multiple_of": 8},
        "bucketed, pad to longest, static shapes": {"bucketing": True},
        "bucketed, pad to multiple of 8, static": {"bucketing": True, "pad_to_multiple_of": 8},
        "bucketed, pad to longest, dynamic=None": {"bucketing": True, "dynamic": None},
    }
    return [
        {"setting": name, **count_recompiles(lengths, batch_size=batch_size, **kwargs)}
        for name, kwargs in settings.items()
    ]


def aot_graphs(seed: int = 0) -> dict:
    """The forward and backward ATen graphs AOTAutograd makes for a 2-layer MLP's loss.

    Returns:
        ``{"forward": code, "backward": code}``: the Python code of each FX graph. The forward
        returns the loss plus the activations the backward needs (saved tensors).
    """
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    captured = {}

    def keep(name):
        def compiler(gm, example_inputs):
            captured[name] = gm.code.strip()
            return make_boxed_func(gm.forward)

        return compiler

    torch.manual_seed(seed)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 2))
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 1, 0])

    def loss_fn(x, y):
        return F.cross_entropy(mlp(x), y)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))
    torch.compile(loss_fn, backend=backend)(x, y).backward()
    return captured


def inductor_code(max_lines: int = 40, seed: int = 0) -> dict:
    """The code TorchInductor generates for a 2-layer MLP on CPU (inference).

    Returns:
        ``code`` (the whole generated Python module, C++ kernels inside), ``kernels`` (names
        of the generated kernels, e.g. ``cpp_fused_gelu_0``), ``glimpse`` (the first
        ``max_lines`` lines of the first kernel's source) and ``lines`` (length of ``code``).
    """
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(seed)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 2))
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False):
        _, codes = run_and_get_code(torch.compile(mlp), torch.randn(4, 8))
    code = "\n".join(codes)
    lines = code.splitlines()
    kernels = [line.split(" = ")[0] for line in lines if "async_compile.cpp" in line]
    start = next((i for i, line in enumerate(lines) if "async_compile.cpp" in line), 0)
    return {
        "code": code,
        "kernels": kernels,
        "glimpse": "\n".join(lines[start : start + max_lines]),
        "lines": len(lines),
    }


def precision() -> dict:
    """bf16 versus fp16 versus fp32: range, precision, and two examples of what that means.

    Returns:
        ``formats``: per dtype, ``bits``, ``max``, ``smallest_normal``, ``eps`` (gap above 1.0),
        from ``torch.finfo``. ``sum_of_ones``: 1.0 added 1,000 times, one addition at a time,
        in each dtype (bf16 stops at 256: above it the gap between numbers is 2, so +1 rounds
        away; this is why weights and optimizer states stay fp32 under autocast).
        ``exp_12``: ``exp(12) = 162,754.8`` in each dtype (overflows fp16, whose max is 65,504;
        bf16 has fp32's 8-bit exponent, so it fits, rounded). ``one_plus_1e-3``: whether
        ``1 + 0.001`` differs from 1.
    """
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    formats, sums, exps, small = {}, {}, {}, {}
    for name, dtype in dtypes.items():
        info = torch.finfo(dtype)
        formats[name] = {
            "bits": info.bits,
            "max": info.max,
            "smallest_normal": info.smallest_normal,
            "eps": info.eps,
        }
        total = torch.zeros((), dtype=dtype)
        one = torch.ones((), dtype=dtype)
        for _ in range(1000):
            total = total + one
        sums[name] = float(total)
        exps[name] = float(torch.tensor(12.0, dtype=dtype).exp())
        small[name] = bool(torch.tensor(1.0, dtype=dtype) + 1e-3 != 1.0)
    return {"formats": formats, "sum_of_ones": sums, "exp_12": exps, "one_plus_1e-3": small}


def show_source(obj, docstring: bool = True) -> str:
    """The source code of a function or class, dedented: what notebook 01 prints.

    Taken from the installed package at run time, so the notebook always shows the code that
    runs, e.g. ``show_source(pt2aws.train.recipe.prepare_model_and_optimizer)``.

    Args:
        obj: a function or class.
        docstring: keep its docstring; ``False`` shows the signature and the code only (what a
            notebook cell has room for when the text around it explains the function).
    """
    source = textwrap.dedent(inspect.getsource(obj))
    if docstring:
        return source
    body = ast.parse(source).body[0].body
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
        return source
    lines = source.splitlines(keepends=True)
    return "".join(lines[: body[0].lineno - 1] + lines[body[0].end_lineno :])


__all__ = [
    "TinyClassifier",
    "aot_graphs",
    "capture_graphs",
    "count_recompiles",
    "graph_breaks",
    "inductor_code",
    "precision",
    "recompile_table",
    "show_source",
]
