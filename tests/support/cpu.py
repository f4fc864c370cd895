"""Made-up CPUs for tests that patch ``pt2aws.env.cpu_features`` (the one CPU answer)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pt2aws.env.cpu import CpuFeatures, features_from


def fake_cpu(
    model: str, arch: str, hardware: Iterable[str], environ: dict | None = None
) -> Callable[[], CpuFeatures]:
    """A stand-in for ``cpu_features``: ``model`` with ``hardware`` (kernel flag names) under the
    caps in ``environ`` (none by default, whatever the test process's environment holds)."""
    features = features_from(arch, hardware, environ=environ or {}, model=model)
    return lambda: features


#: An x86 CPU with AVX2 only: no AVX-512, no bf16, no VNNI.
OLD_X86 = fake_cpu("old x86", "x86_64", {"avx2", "fma"})
