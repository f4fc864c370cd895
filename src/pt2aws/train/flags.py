"""Performance flags, each resolved for this device with its reason: GPUs by rule (bf16 and TF32
on Ampere+, else fp16; compile; fused AdamW); on CPU ``auto`` times bf16 and fused AdamW on the
run's model (compile only via notebook 01's A/B), cached per CPU, torch, threads, model, shape."""

from __future__ import annotations

import copy
import json
import os
import statistics
import time
from pathlib import Path
from typing import NamedTuple

import torch

from pt2aws import env

#: ``auto`` turns a flag on where it measured at least this much faster than without it.
FASTER = 1.05


class Flag(NamedTuple):
    """A resolved performance flag and why."""

    enabled: bool
    reason: str


def cache_file() -> Path:
    """``pt2aws_measured.json`` in ``TORCHINDUCTOR_CACHE_DIR`` (default: torch's own folder)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir()) / "pt2aws_measured.json"


def measure_key(model: str, batch_size: int, max_length, threads: int) -> str:
    """What a measurement holds for: this CPU (caps included), torch, threads, model, shape."""
    return (
        f"{env.cpu_features().description}; torch {torch.__version__}; {threads} threads; "
        f"{model}; batch {batch_size} x {max_length} tokens"
    )


def _cached() -> dict:
    try:
        return json.loads(cache_file().read_text())
    except (OSError, ValueError):
        return {}


def record(flag: str, key: str, ratio: float, how: str) -> dict:
    """Cache ``flag``'s measured speed ratio (on over off) for ``key``; returns the entry."""
    data, path = _cached(), cache_file()
    data.setdefault(key, {})[flag] = entry = {"ratio": ratio, "how": how}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)  # a reader sees the old file or the new one
    return entry


def time_interleaved(arms: dict, what="steps", repeats=3, steps=2) -> tuple[float, str]:
    """``(ratio, how)``: the first arm's median seconds per step (``arm(i)``) over the second's:
    a warm-up and a timed step each (outside 0.5-2x: done), then ``repeats`` alternating blocks of
    ``steps`` steps (A B, B A, ...), as many again within 10% of 1x."""
    names, times, done = list(arms), {}, [0]

    def block(order, n: int) -> float:
        for name in order:
            start = time.perf_counter()
            for k in range(n):
                arms[name](done[0] + k)
            times.setdefault(name, []).append((time.perf_counter() - start) / n)
        done[0] += n
        return statistics.median(times[names[0]]) / statistics.median(times[names[1]])

    block(names, 1)  # a warm-up step each: kernels, allocator, AdamW state
    times.clear()
    ratio = block(names, 1)
    if not 0.5 < ratio < 2.0:
        return ratio, f"1 {what[:-1]} each after a warm-up one, far from 1x, so not repeated"
    times.clear()
    blocks = 0
    while blocks < repeats or (blocks == repeats and abs(ratio - 1) < 0.1):
        for _ in range(repeats):
            ratio = block(names[:: -1 if blocks % 2 == 0 else 1], steps)
            blocks += 1
    again = ", re-measured: close to 1x" if blocks > repeats else ""
    return ratio, f"{blocks} x {steps} {what} each, interleaved, median{again}"


def bf16_probe(model, batches: list[dict], fused: bool) -> tuple[float, str]:
    """Time training steps of copies of ``model`` on ``batches``, fp32 and bf16 (RNG kept). On a
    CPU without native bf16, first the forward and backward of a copy of its largest Linear on
    the first batch's tokens: under half fp32's speed there, no training step is timed (an
    emulated bf16 step takes many fp32 steps' time)."""
    from pt2aws.train.recipe import prepare_model_and_optimizer, train_step

    if not env.cpu_features().bf16_native:
        linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        layer = copy.deepcopy(max(linears, key=lambda m: m.weight.numel()))
        x = torch.randn(batches[0]["input_ids"].numel(), layer.in_features)

        def call(dtype):
            def arm(i):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
                    out = layer(x)
                out.float().sum().backward()

            return arm

        ratio, how = time_interleaved({"fp32": call(None), "bf16": call(1)}, what="Linear calls")
        if ratio < 0.5:
            shape = f"{list(x.shape)} x {list(layer.weight.T.shape)}"
            return ratio, (f"{how} (the model's largest Linear, forward and backward, {shape}); "
                           "no native bf16 here, so no training step was timed")  # fmt: skip
    arms = {}
    for name, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
        prep = prepare_model_and_optimizer(
            copy.deepcopy(model), torch.device("cpu"), amp_dtype=dtype, fused_adamw=fused
        )
        schedule = torch.optim.lr_scheduler.LambdaLR(prep.optimizer, lambda _: 1.0)
        arms[name] = lambda i, p=prep, s=schedule: train_step(p, [batches[i % len(batches)]], s)
    with torch.random.fork_rng(devices=[]):
        return time_interleaved(arms, what="training steps")


def fused_probe(model) -> tuple[float, str]:
    """Time AdamW steps over copies of ``model``'s parameters, for-loop and fused."""
    params = [p.detach().clone().requires_grad_() for p in model.parameters()]
    for p in params:
        p.grad = torch.full_like(p, 1e-3)
    loop = torch.optim.AdamW(params, foreach=False)
    fused = torch.optim.AdamW(params, fused=True)
    arms = {"for-loop": lambda i: loop.step(), "fused": lambda i: fused.step()}
    ratio, how = time_interleaved(arms, what="AdamW steps")
    return ratio, f"{how} (the optimizer step alone: a whole training step gains less)"


def measured(flag: str, key: str | None, probe, versus: str, unmeasured: Flag) -> Flag:
    """``flag`` on where it measured ``FASTER`` (cached for ``key``, else ``probe()``, recorded)."""
    found = _cached().get(key, {}).get(flag) if key else None
    cached = f"; cached in {cache_file()}" if found else ""
    if found is None and probe is not None and key:
        found = record(flag, key, *probe())
    if found is None:
        return unmeasured
    ratio = found["ratio"]
    return Flag(ratio >= FASTER, f"measured {ratio:.2f}x {versus} here: {found['how']}{cached}")


def _requested(flag: str, requested: str, possible: bool, lacking: str) -> Flag | None:
    """``on``/``off`` as requested (ValueError for ``on`` where ``lacking``); None for auto."""
    if requested == "on" and not possible:
        raise ValueError(f"--{flag} on: {lacking}; use --{flag} off")
    return None if requested == "auto" else Flag(requested == "on", "requested")


def choose_bf16(device: torch.device, requested: str, probe=None, key=None) -> Flag:
    """``--bf16``: on Ampere+ GPUs, measured on CPU (``probe()``: :func:`bf16_probe`'s result);
    ValueError for ``on`` on a GPU without bf16."""
    cuda = device.type == "cuda"
    has = torch.cuda.is_bf16_supported() if cuda else True
    if forced := _requested("bf16", requested, has, "this GPU has no bf16 (needs Ampere or newer)"):
        return forced
    if cuda:
        return Flag(has, "GPU has bf16" if has else "GPU lacks bf16 (pre-Ampere)")
    native = env.cpu_features().bf16_native
    where = f"CPU {'with' if native else 'without'} native bf16 ({native.reason})"
    unmeasured = Flag(False, f"not measured (no model to time); {where}; --bf16 on forces it")
    return measured("bf16", key, probe, "fp32's speed", unmeasured)


def choose_compile(device: torch.device, requested: str, key=None) -> Flag:
    """``--torch_compile``: on for CUDA; on CPU where notebook 01's A/B measured it faster."""
    if forced := _requested("torch_compile", requested, True, ""):
        return forced
    if device.type == "cuda":
        return Flag(True, "CUDA: inductor kernels pay back the compile time within minutes")
    why = 'not measured on CPU (notebook 01\'s A/B with AB_COMPILE = "on" does); --torch_compile on'
    return measured("torch_compile", key, None, "eager's speed", Flag(False, why))


def choose_fused_adamw(device: torch.device, requested: str, probe=None, key=None) -> Flag:
    """``--fused_adamw`` where torch has it: on for CUDA, measured on CPU (``probe()``:
    :func:`fused_probe`'s result); ValueError for ``on`` where torch has none for ``device``."""
    try:
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1, device=device))], fused=True)
        has = True
    except (RuntimeError, ValueError):
        has = False
    why = f"torch {torch.__version__} {'has' if has else 'lacks'} it on {device.type}"
    if forced := _requested("fused_adamw", requested, has, why):
        return forced
    if device.type == "cuda" or not has:
        return Flag(has, why)
    unmeasured = Flag(True, f"not measured (nothing to time); {why}")
    return measured("fused_adamw", key, probe, "the for-loop AdamW's speed", unmeasured)


def resolve_flags(cfg, device: torch.device, model=None, batches=None) -> dict[str, Flag]:
    """Every flag of ``cfg`` for ``device``, in print order; on CPU ``auto`` times ``model`` on
    ``batches(pad_to_multiple_of_8)``. ValueError: a flag forced ``on`` that cannot be."""
    cuda, key = device.type == "cuda", None
    if model is not None:
        shape = (cfg.per_device_train_batch_size, cfg.max_length, torch.get_num_threads())
        key = measure_key(cfg.model_name_or_path, *shape)
    compiled = choose_compile(device, cfg.torch_compile, key)
    why = "torch.compile: few shapes" if compiled.enabled else "eager CPU: pad to the longest text"
    pad = Flag(cuda or compiled.enabled, "GPU: tensor-core friendly lengths" if cuda else why)
    probe = (lambda: fused_probe(model)) if model is not None else None
    fused = choose_fused_adamw(device, cfg.fused_adamw, probe, key)
    probe = (lambda: bf16_probe(model, batches(pad.enabled), fused.enabled)) if batches else None
    bf16 = choose_bf16(device, cfg.bf16, probe, key)
    fp16 = cuda and cfg.bf16 == "auto" and not bf16.enabled
    ampere = cuda and torch.cuda.get_device_capability(device)[0] >= 8
    tf32 = _requested("tf32", cfg.tf32, ampere, "needs an Ampere or newer GPU") or Flag(
        ampere, "Ampere+ GPU: fp32 matmuls on TF32 cores" if ampere else "no Ampere+ GPU"
    )
    bucketing = "batches of similar length" if cfg.length_bucketing else "shuffled batches"
    return {
        "bf16": bf16,
        "torch_compile": compiled,
        "fused_adamw": fused,
        "tf32": tf32,
        "length_bucketing": Flag(cfg.length_bucketing, f"{bucketing}: --length_bucketing"),
        "pad_to_multiple_of_8": pad,
        "fp16": Flag(fp16, "GPU lacks bf16: fp16 with a GradScaler" if fp16 else "bf16 or fp32"),
    }


def apply_tf32(enabled: bool) -> None:
    """Switch TF32 for CUDA matmuls and cuDNN convolutions."""
    precision = "tf32" if enabled else "ieee"
    torch.backends.cuda.matmul.fp32_precision = precision
    torch.backends.cudnn.conv.fp32_precision = precision
