"""Where `scripts/setup-env.sh` installs torch from: PyTorch's CPU wheel index or PyPI.

Standard library only: it runs before anything is installed. On Linux, PyPI's ``torch`` wheel is
the CUDA build (several GB of CUDA libraries); a machine without an NVIDIA GPU gets the CPU build
from PyTorch's CPU index instead, as https://pytorch.org/get-started/locally/ gives it for
Linux + pip + CPU (``pip3 install torch --index-url https://download.pytorch.org/whl/cpu``). On
macOS and Windows PyPI's wheel is already the CPU build (same page), so the plain pin is used.

Usage (what setup-env.sh runs)::

    python scripts/torch_source.py                # prints pip's extra arguments for torch
    python scripts/torch_source.py --installed R  # after the install: which torch, from where

The first prints one line (possibly empty) of arguments for ``pip install torch==...`` on stdout
and the reason on stderr. ``PT2AWS_TORCH_CPU_INDEX`` names another CPU index (a mirror).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass

#: PyTorch's CPU wheel index (https://pytorch.org/get-started/locally/, Linux, pip, CPU).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: Seconds the index probe waits: an unreachable index fails here, not after pip's retries.
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class TorchSource:
    """The decision: pip arguments for the torch install and the one-line reason."""

    pip_args: tuple[str, ...]
    reason: str


def nvidia_gpu_present() -> bool:
    """True when ``nvidia-smi -L`` runs and lists at least one GPU (driver loaded, GPU seen)."""
    try:
        result = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):  # not installed, not executable, hung
        return False
    return result.returncode == 0 and any(
        line.startswith("GPU ") for line in result.stdout.splitlines()
    )


def index_reachable(index_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when ``<index_url>/torch/`` answers within ``timeout_s`` seconds.

    One HEAD request (a GET of the first byte where the server refuses HEAD); any network error,
    timeout or HTTP error status counts as unreachable.
    """
    url = index_url.rstrip("/") + "/torch/"
    for method in ("HEAD", "GET"):
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, method=method), timeout=timeout_s
            ) as response:
                response.read(1)
                return response.status < 400
        except urllib.error.HTTPError as err:
            if err.code != 405 or method == "GET":  # 405: HEAD not allowed, try GET
                return False
        except (OSError, ValueError):  # URLError, timeout, refused, a malformed URL
            return False
    return False


def choose(
    platform: str, has_gpu: bool, cpu_index: str, cpu_index_reachable: bool | None
) -> TorchSource:
    """Where to install torch from.

    Args:
        platform: ``sys.platform`` (``linux``, ``darwin``, ``win32``).
        has_gpu: an NVIDIA GPU is present (:func:`nvidia_gpu_present`).
        cpu_index: the CPU wheel index URL.
        cpu_index_reachable: :func:`index_reachable` of ``cpu_index`` (``None``: not probed).

    Returns:
        The pip arguments (empty: the configured indexes, PyPI by default) and the reason.
    """
    if not platform.startswith("linux"):
        return TorchSource((), f"{platform}: PyPI's torch wheel is the CPU build here")
    if has_gpu:
        return TorchSource((), "NVIDIA GPU found (nvidia-smi -L): the CUDA build from PyPI")
    if cpu_index_reachable:
        return TorchSource(
            ("--index-url", cpu_index), f"no NVIDIA GPU: the CPU build from {cpu_index}"
        )
    return TorchSource(
        (),
        f"no NVIDIA GPU, but {cpu_index} is not reachable: the plain pin from the configured "
        "indexes (a local +cpu wheel where one is configured; otherwise PyPI's CUDA build)",
    )


def decide() -> TorchSource:
    """:func:`choose` for this machine (probes the GPU, then the index only when it matters)."""
    cpu_index = os.environ.get("PT2AWS_TORCH_CPU_INDEX") or CPU_INDEX
    on_linux = sys.platform.startswith("linux")
    has_gpu = on_linux and nvidia_gpu_present()
    reachable = index_reachable(cpu_index) if on_linux and not has_gpu else None
    return choose(sys.platform, has_gpu, cpu_index, reachable)


def installed_from(report_path: str) -> str:
    """Where pip took torch from, read from ``pip install --report`` (its ``download_info``)."""
    try:
        with open(report_path, encoding="utf-8") as fh:
            report = json.load(fh)
    except (OSError, ValueError):
        return "unknown (no pip report)"
    for item in report.get("install", []):
        if item.get("metadata", {}).get("name", "").lower() == "torch":
            return item.get("download_info", {}).get("url", "unknown")
    return "already installed (pip installed nothing new)"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--installed"] and len(argv) == 2:
        import torch  # installed by now

        print(
            f"torch {torch.__version__} (CUDA {torch.version.cuda or 'none: CPU build'}) "
            f"from {installed_from(argv[1])}"
        )
        return 0
    if argv:
        print("usage: torch_source.py [--installed PIP_REPORT_JSON]", file=sys.stderr)
        return 2
    source = decide()
    print(f"torch: {source.reason}", file=sys.stderr)
    print(" ".join(source.pip_args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
