"""Say which torch build the image installed, and whether it is a CUDA build (run at build time).

PyPI's ``torch==2.13.0`` is a CUDA build on both linux/amd64 and linux/arm64 (``2.13.0+cu130``
on aarch64, with about 2.8 GB of NVIDIA wheels); the CPU-only builds come from PyTorch's CPU
index (``TORCH_INDEX_URL`` in the Dockerfile). A serving image for a CPU instance that carries
the CUDA build still works (the GPU libraries are never loaded) but is gigabytes larger, so the
build prints it loudly. Reads the installed files only: importing torch under QEMU user
emulation (an arm64 build on an x86 machine) crashes (container/README.md).

Usage: ``python torch_build.py [--require-cpu]``; exit status 1 with ``--require-cpu`` when the
installed torch is a CUDA build, 2 when torch is not installed.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import platform
import sys
from importlib import metadata
from pathlib import Path

#: Distributions that only a GPU build of torch pulls in (CUDA libraries and Triton).
GPU_PREFIXES = ("nvidia-", "cuda-", "triton")


def read_version_file(path: Path) -> dict[str, str | None]:
    """``__version__`` and ``cuda`` from torch's generated ``torch/version.py``, not imported.

    Returns:
        ``{"version": "2.13.0+cu130", "cuda": "13.0"}`` (``cuda`` None for a CPU build).
    """
    found: dict[str, str | None] = {"version": None, "cuda": None}
    for node in ast.parse(path.read_text()).body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and value is not None:
            key = {"__version__": "version", "cuda": "cuda"}.get(target.id)
            if key:
                found[key] = ast.literal_eval(value)
    return found


def gpu_packages(dists=None) -> list[tuple[str, int]]:
    """Installed GPU-only distributions (:data:`GPU_PREFIXES`) with their installed bytes."""
    rows = []
    for dist in dists if dists is not None else metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith(GPU_PREFIXES):
            size = 0
            for file in dist.files or ():
                path = Path(dist.locate_file(file))
                size += path.stat().st_size if path.is_file() else 0
            rows.append((name, size))
    return sorted(rows)


def describe(version: dict[str, str | None], gpu: list[tuple[str, int]], machine: str) -> str:
    """The build's report: one line for a CPU build, a banner for a CUDA build."""
    if not version["cuda"]:
        return f"torch build: {version['version']} for {machine}, CPU-only"
    total_gb = sum(size for _, size in gpu) / 1e9
    bar = "!" * 78
    return "\n".join(
        [
            bar,
            f"torch build: {version['version']} for {machine} is a CUDA {version['cuda']} build,",
            f"with {len(gpu)} GPU-only packages ({total_gb:.1f} GB installed) that a CPU",
            "instance never loads. The image works, but is that much larger. No CPU-only",
            "torch of this version was found on the indexes this build used: point",
            "TORCH_INDEX_URL at PyTorch's CPU index (https://download.pytorch.org/whl/cpu)",
            "or a mirror of it, or WHEELS_DIR at a folder holding the CPU wheel.",
            bar,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--require-cpu", action="store_true", help="fail on a CUDA build")
    args = parser.parse_args(argv)
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or spec.origin is None:
        print("torch build: torch is not installed", file=sys.stderr)
        return 2
    version = read_version_file(Path(spec.origin).with_name("version.py"))
    print(describe(version, gpu_packages(), platform.machine()), flush=True)
    return 1 if args.require_cpu and version["cuda"] else 0


if __name__ == "__main__":
    sys.exit(main())
