"""What capping the instruction set changes: this CPU timed as itself and as weaker CPUs.

ATen, oneDNN and MKL each read an environment variable that caps the instructions they use,
once, when the library starts; so every setting runs in a fresh subprocess::

    python benchmarks/cpu_caps.py                      # every setting, 2 interleaved rounds
    python benchmarks/cpu_caps.py --settings native,avx2 --rounds 3 --json out.json
    python benchmarks/cpu_caps.py --clock cpu --compile-int8   # a busy machine: CPU time, 1 thread

Settings (``SETTINGS``): ``native``; each variable alone (``aten-avx2``, ``onednn-avx2``,
``mkl-avx2``), to see which one changes what; ``avx2`` (all three: an AVX2-only CPU, no
AVX-512, no bf16, no VNNI); ``avx512-no-bf16`` (oneDNN capped to AVX512_CORE_VNNI: an AVX-512
CPU without bf16, such as Cascade Lake or Zen 3's successors before Zen 4).

Workloads, each the median of ``--repeats`` timings inside a process and of the rounds across
processes (rounds interleave the settings, so load drift hits them alike):

* ``mm_fp32``: ``torch.mm`` fp32, (1536 x 384) @ (384 x 1536): MiniLM's FFN at batch 32 x 48;
* ``mm_bf16``: the same in bf16 (oneDNN where it has native bf16, else ATen's fallback);
* ``train_fp32`` / ``train_bf16``: forward + backward of one encoder layer (width 384, 12 heads,
  FFN 1536: MiniLM-L6's layer) on batch 32 x 48, fp32 and under bf16 autocast;
* ``int_mm``: ``torch._int_mm`` int8 x int8 -> int32, the same shape;
* ``int8_ao``: torchao ``Int8DynamicActivationInt8WeightConfig`` linear (eager, not compiled);
  ``int8_ao_compiled``, with ``--compile-int8``: the same, ``torch.compile``d as the ``int8``
  predictor variant runs it (compiling costs 10-60 s per setting and round);
* ``int8_legacy``: ``torch.ao.quantization.quantize_dynamic`` linear (fbgemm);
* ``ort_fp32`` / ``ort_int8``: ONNX Runtime MatMul and DynamicQuantizeLinear + MatMulInteger.

Also printed per setting: ``torch.backends.cpu.get_cpu_capability()`` (ATen's dispatch), whether
oneDNN does bf16 (``torch.ops.mkldnn._is_mkldnn_bf16_supported()``), and the oneDNN kernel that
ran each matmul (``ONEDNN_VERBOSE``). Ratios are ``native`` time / setting time (below 1: slower).
Never pass/fail: a measurement, with the load average beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: Environment of each setting (values as the libraries spell them).
SETTINGS: dict[str, dict[str, str]] = {
    "native": {},
    "aten-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "onednn-avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    "mkl-avx2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    },
    "avx512-no-bf16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"},
}
CAP_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
WORKLOADS = (
    "mm_fp32",
    "mm_bf16",
    "train_fp32",
    "train_bf16",
    "int_mm",
    "int8_ao",
    "int8_legacy",
    "int8_ao_compiled",
    "ort_fp32",
    "ort_int8",
)
M, K, N = 1536, 384, 1536  # tokens (32 x 48), MiniLM width, FFN width


#: The clock of the timings: wall (``perf_counter``) or this process's CPU time (``--clock cpu``,
#: with one thread: what a call costs, little moved by other processes on a shared machine).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _times(fn, repeats: int, clock=time.perf_counter, min_s: float = 0.2) -> list[float]:
    """Seconds per call of ``fn``, one figure per repeat; each repeat makes as many calls as
    fill ``min_s`` seconds by the warm-up call's time (at least one)."""
    start = clock()
    fn()  # warm-up: kernels chosen, caches built
    inner = max(1, int(min_s / max(clock() - start, 1e-6)))
    times = []
    for _ in range(repeats):
        start = clock()
        for _ in range(inner):
            fn()
        times.append((clock() - start) / inner)
    return times


def _encoder(torch):
    layer = torch.nn.TransformerEncoderLayer(384, 12, 1536, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)


def _ort_sessions(torch, threads: int):
    """Two ONNX Runtime sessions on one fp32 weight: MatMul, and dynamic int8 (ORT's own
    ``quantize_dynamic`` pattern: DynamicQuantizeLinear + MatMulInteger + rescale)."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((K, N)).astype(np.float32)
    w_scale = np.float32(np.abs(w).max() / 127)
    w_q = np.round(w / w_scale).astype(np.int8)
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])
    fp32 = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "fp32",
        [x_info],
        [y_info],
        [numpy_helper.from_array(w, "w")],
    )
    int8 = helper.make_graph(
        [
            helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
            helper.make_node("MatMulInteger", ["xq", "wq", "xz"], ["acc"]),
            helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["xs", "ws"], ["scale"]),
            helper.make_node("Mul", ["accf", "scale"], ["y"]),
        ],
        "int8",
        [x_info],
        [y_info],
        [numpy_helper.from_array(w_q, "wq"), numpy_helper.from_array(np.array(w_scale), "ws")],
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    sessions = {}
    for name, graph in (("ort_fp32", fp32), ("ort_int8", int8)):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        sessions[name] = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    x = rng.standard_normal((M, K)).astype(np.float32)
    return {name: (lambda s=s: s.run(None, {"x": x})) for name, s in sessions.items()}


def child(repeats: int, compile_int8: bool = False, clock: str = "wall") -> dict:
    """Time every workload in this process (its environment is the setting). Returns JSON."""
    import warnings

    import torch

    if clock == "cpu":
        torch.set_num_threads(1)
    tick = CLOCKS[clock]

    warnings.filterwarnings("ignore")
    threads = torch.get_num_threads()
    out: dict = {
        "aten_capability": torch.backends.cpu.get_cpu_capability(),
        "onednn_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
        "threads": threads,
        "seconds": {},
        "errors": {},
    }
    torch.manual_seed(0)
    a, b = torch.randn(M, K), torch.randn(K, N)
    a16, b16 = a.bfloat16(), b.bfloat16()
    enc = _encoder(torch)
    x = torch.randn(32, M // 32, K)

    def train(dtype):
        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
                loss = enc(x).float().pow(2).mean()
            loss.backward()

        return step

    def int8_ao(compiled: bool = False):
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

        lin = torch.nn.Sequential(torch.nn.Linear(K, N))
        quantize_(lin, Int8DynamicActivationInt8WeightConfig())
        call = torch.compile(lin) if compiled else lin
        return lambda: call(a)

    def int8_legacy():
        from torch.ao.quantization import quantize_dynamic

        lin = quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(K, N)), {torch.nn.Linear})
        return lambda: lin(a)

    ai8 = torch.randint(-128, 127, (M, K), dtype=torch.int8)
    bi8 = torch.randint(-128, 127, (K, N), dtype=torch.int8)
    builders = {
        "mm_fp32": lambda: lambda: torch.mm(a, b),
        "mm_bf16": lambda: lambda: torch.mm(a16, b16),
        "train_fp32": lambda: train(None),
        "train_bf16": lambda: train(torch.bfloat16),
        "int_mm": lambda: lambda: torch._int_mm(ai8, bi8),
        "int8_ao": int8_ao,
        "int8_legacy": int8_legacy,
    }
    if compile_int8:  # what the int8 variant serves; compiling costs 10-60 s per process
        builders["int8_ao_compiled"] = lambda: int8_ao(compiled=True)
    for name, build in builders.items():
        try:
            fn = build()
            out["seconds"][name] = _times(fn, min(repeats, 3) if "train" in name else repeats, tick)
        except Exception as err:  # a workload this build cannot run: say so, time the rest
            out["errors"][name] = f"{type(err).__name__}: {err}"[:200]
    try:
        for name, fn in _ort_sessions(torch, threads).items():
            out["seconds"][name] = _times(fn, repeats, tick)
    except Exception as err:
        out["errors"]["ort"] = f"{type(err).__name__}: {err}"[:200]
    return out


def _run_child(setting: str, repeats: int, compile_int8: bool, clock: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CAP_VARIABLES}
    env.update(SETTINGS[setting])
    proc = subprocess.run(
        [sys.executable, __file__, "--child", "--repeats", str(repeats)]
        + (["--compile-int8"] if compile_int8 else [])
        + ["--clock", clock],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        raise RuntimeError(f"setting {setting}: child failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _kernels(setting: str) -> list[str]:
    """oneDNN kernels used for a bf16 mm and an int8 ``_int_mm`` under ``setting``."""
    env = {k: v for k, v in os.environ.items() if k not in CAP_VARIABLES}
    env.update(SETTINGS[setting], ONEDNN_VERBOSE="1", MKL_VERBOSE="1")
    code = (
        "import torch; a = torch.randn(64, 64); torch.mm(a, a); torch.mm(a.bfloat16(), a.bfloat16()); "
        "i = torch.ones(64, 64, dtype=torch.int8); torch._int_mm(i, i)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    found = []
    for line in proc.stdout.splitlines():
        parts = line.split(",")
        if "exec" in parts and len(parts) > 8:
            dtypes = "x".join(d.split(":")[0] for d in parts[8].split()[:2])
            found.append(f"{parts[5]} {parts[6] or '(gemm, no kernel name)'} {dtypes}")
        elif ",info,cpu,isa:" in line:
            found.insert(0, "oneDNN isa: " + line.split("isa:", 1)[1])
        elif line.startswith("MKL_VERBOSE") and " for " in line and "GEMM" not in line:
            found.insert(0, "MKL for " + line.split(" for ", 1)[1].split(",")[0])
    return found or ["no oneDNN primitive ran"]


def cpu_flags() -> str:
    """The ML-relevant flags of ``/proc/cpuinfo`` (x86) and the CPU model."""
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx", "fma")
    model, flags = "unknown", []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            if key.strip() in ("flags", "Features") and not flags:
                flags = [f for f in value.split() if f.startswith(wanted)]
    except OSError:
        pass
    return f"{model}; flags: {' '.join(flags) or '?'}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated names")
    parser.add_argument("--rounds", type=int, default=2, help="processes per setting, interleaved")
    parser.add_argument("--repeats", type=int, default=5, help="timings per workload per process")
    parser.add_argument("--json", default="", help="write every number here")
    parser.add_argument(
        "--compile-int8",
        action="store_true",
        help="also time the torchao int8 linear compiled, as the int8 variant serves it",
    )
    parser.add_argument(
        "--clock",
        choices=tuple(CLOCKS),
        default="wall",
        help="wall: elapsed time, the machine's threads; cpu: this process's CPU time with one "
        "thread (steadier on a busy machine)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.repeats, args.compile_int8, args.clock)))
        return {}
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting(s) {unknown}: choose from {', '.join(SETTINGS)}")
    load_before = os.getloadavg()
    runs: dict[str, list[dict]] = {s: [] for s in settings}
    for round_ in range(args.rounds):
        # odd rounds run the settings in reverse: a load that drifts hits first and last alike
        for setting in settings if round_ % 2 == 0 else settings[::-1]:
            runs[setting].append(_run_child(setting, args.repeats, args.compile_int8, args.clock))
            print(f"round {round_ + 1}/{args.rounds}: {setting} done", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    pooled = {
        s: {w: [t for r in runs[s] for t in r["seconds"].get(w, [])] for w in WORKLOADS}
        for s in settings
    }
    medians = {s: {w: statistics.median(t) for w, t in p.items() if t} for s, p in pooled.items()}
    best = {s: {w: min(t) for w, t in p.items() if t} for s, p in pooled.items()}
    print(f"CPU: {cpu_flags()}")
    print(
        f"clock {args.clock}, threads {runs[settings[0]][0]['threads']}; load average "
        f"{load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; {args.rounds} rounds x {args.repeats} repeats"
    )
    for title, stat in (("median", medians), ("best (min)", best)):
        ref = stat.get("native") or stat[settings[0]]
        print(f"\n{title} ms per call, (x native: above 1 faster than uncapped)")
        print("| setting | ATen ISA | oneDNN bf16 | " + " | ".join(WORKLOADS) + " |")
        print("|---" * (len(WORKLOADS) + 3) + "|")
        for s in settings:
            cells = [
                f"{stat[s][w] * 1e3:.1f} ({ref[w] / stat[s][w]:.2f}x)"
                if w in stat[s] and w in ref
                else "-"
                for w in WORKLOADS
            ]
            first = runs[s][0]
            print(
                f"| {s} | {first['aten_capability']} | {first['onednn_bf16']} | "
                + " | ".join(cells)
                + " |"
            )
    nan = float("nan")
    print("\nwithin a setting, by medians: bf16 / fp32 and int8 / fp32 speed (above 1: faster)")
    for s in settings:
        m = medians[s]
        print(
            f"  {s}: bf16 mm {m['mm_fp32'] / m['mm_bf16']:.2f}x, "
            f"bf16 train step {m['train_fp32'] / m['train_bf16']:.2f}x; int8: "
            f"_int_mm {m['mm_fp32'] / m.get('int_mm', nan):.2f}x, "
            f"torchao {m['mm_fp32'] / m.get('int8_ao', nan):.2f}x "
            f"(compiled {m['mm_fp32'] / m.get('int8_ao_compiled', nan):.2f}x), "
            f"legacy {m['mm_fp32'] / m.get('int8_legacy', nan):.2f}x, ORT int8/fp32 "
            f"{m.get('ort_fp32', nan) / m.get('ort_int8', nan):.2f}x"
        )
    print("\nlibraries (MKL_VERBOSE, ONEDNN_VERBOSE; fp32 mm, bf16 mm, int8 _int_mm):")
    kernels = {s: _kernels(s) for s in settings}
    for s in settings:
        print(f"  {s}: " + "; ".join(kernels[s]))
    errors = {s: r[0]["errors"] for s, r in runs.items() if r[0]["errors"]}
    for s, errs in errors.items():
        print(f"  {s} errors: {errs}")
    result = {
        "cpu": cpu_flags(),
        "settings": {s: SETTINGS[s] for s in settings},
        "load_avg_before": load_before,
        "load_avg_after": load_after,
        "medians_s": medians,
        "best_s": best,
        "runs": runs,
        "onednn_kernels": kernels,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
        print(f"\nwrote {args.json}")
    return result


if __name__ == "__main__":
    main()
