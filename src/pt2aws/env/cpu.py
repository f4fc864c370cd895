"""What this CPU does natively, as the process will use it: one answer for every bf16/int8 choice.

:func:`cpu_features` combines three things:

1. **The CPU as the kernel presents it.** On aarch64 the ELF auxiliary vector (``getauxval
   (AT_HWCAP)``, ``AT_HWCAP2``; bits from Linux ``arch/arm64/include/uapi/asm/hwcap.h``), never
   the text of ``/proc/cpuinfo``: under QEMU user-mode emulation that file is the *host's* (an x86
   model and flags), while the auxiliary vector describes the emulated CPU. On x86,
   ``torch.cpu.get_capabilities()`` (the cpuinfo library: CPUID, checked against what the OS
   enabled in XCR0), else the ``flags`` of ``/proc/cpuinfo``.
2. **The caps in the environment** that ATen and oneDNN read at start-up, to run this CPU as a
   weaker one (``benchmarks/cpu_caps.py`` measures what each changes):

   * ``ATEN_CPU_CAPABILITY`` (``default`` | ``avx2`` | ``avx512``; aarch64 ``default`` | ``sve256``):
     ATen's own vector kernels. Capped below AVX-512, the AVX-512 extensions (AVX512-BF16,
     AVX512-VNNI) and AMX count as absent, and so does AVX-VNNI unless ``ONEDNN_MAX_CPU_ISA``
     names it (``AVX2_VNNI``): the cap reads as "a plain AVX2 CPU".
   * ``ONEDNN_MAX_CPU_ISA`` (legacy ``DNNL_MAX_CPU_ISA``): oneDNN's kernels, which do the bf16
     and int8 matmuls (``SSE41`` < ``AVX`` < ``AVX2`` < ``AVX2_VNNI`` ...; ``AVX512_CORE`` <
     ``AVX512_CORE_VNNI`` < ``AVX512_CORE_BF16`` < ``AVX512_CORE_FP16`` < ``AVX512_CORE_AMX``;
     oneDNN's "CPU Dispatcher Control",
     https://oneapi-src.github.io/oneDNN/dev_guide_cpu_dispatcher_control.html).
   * ``MKL_ENABLE_INSTRUCTIONS`` caps MKL's fp32 GEMM only; it changes no bf16/int8 answer (and
     timed nothing differently on an AMD EPYC, where MKL takes its generic path anyway).
3. **What torch dispatches to**: ``torch.backends.cpu.get_cpu_capability()`` (``AVX512``,
   ``AVX2``, ``DEFAULT``, ``SVE256`` ...), which already honours ``ATEN_CPU_CAPABILITY``.

Each answer is a :class:`Capability` (truthy when present) with its reason, so callers can print
why: ``f = cpu_features(); if f.bf16_native: ...; print(f.bf16_native.reason)``.
:func:`features_from` is the pure part (tests hand it any CPU); :func:`hardware_from_auxv` and
:func:`hardware_from_cpuinfo` turn raw probes into feature names.
"""

from __future__ import annotations

import functools
import os
import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pt2aws.system import CAP_VARIABLES, is_arm64

#: The caps that emulate an AVX2-only x86 CPU (no AVX-512, bf16, VNNI or AMX) on a newer one.
AVX2_CAPS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}

# aarch64 HWCAP bits (AT_HWCAP = 16, AT_HWCAP2 = 26): Linux arch/arm64/include/uapi/asm/hwcap.h.
AT_HWCAP, AT_HWCAP2 = 16, 26
HWCAP_BITS = {"asimd": 1, "asimddp": 20, "sve": 22}
HWCAP2_BITS = {"sve2": 1, "svei8mm": 9, "svebf16": 12, "i8mm": 13, "bf16": 14, "sme": 23}

#: ``torch.cpu.get_capabilities()`` keys -> the kernel's ``/proc/cpuinfo`` flag names.
_TORCH_NAMES = {
    "avx2": "avx2",
    "avx512_f": "avx512f",
    "avx512_bw": "avx512bw",
    "avx512_vl": "avx512vl",
    "avx512_dq": "avx512dq",
    "avx512_vnni": "avx512_vnni",
    "avx512_bf16": "avx512_bf16",
    "avx_vnni": "avx_vnni",
    "amx_tile": "amx_tile",
    "amx_bf16": "amx_bf16",
    "amx_int8": "amx_int8",
    "neon": "asimd",
    "dot": "asimddp",
    "i8mm": "i8mm",
    "bf16": "bf16",
    "sve": "sve",
    "sve2": "sve2",
    "sve_bf16": "svebf16",
    "sme": "sme",
}

# What each ONEDNN_MAX_CPU_ISA value lets oneDNN use (x86): AVX-512, VNNI (which kind), bf16, AMX.
_ONEDNN_AVX512 = ("AVX512_CORE", "AVX10")
_ONEDNN_BF16 = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX10")
_ONEDNN_AVX512_VNNI = ("AVX512_CORE_VNNI", *_ONEDNN_BF16)
_ONEDNN_AVX_VNNI = ("AVX2_VNNI",)
#: Every ``ONEDNN_MAX_CPU_ISA`` value oneDNN 3.x knows (x64, then aarch64); others it ignores.
ONEDNN_ISAS = (
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
    "AVX512_CORE_BF16",
    "AVX512_CORE_FP16",
    "AVX512_CORE_AMX",
    "AVX512_CORE_AMX_FP16",
    "AVX10_1_512",
    "AVX10_1_512_AMX",
    "AVX10_1_512_AMX_FP16",
    "AVX10_2_512",
    "AVX10_2_512_AMX_2",
    "ASIMD",
    "SVE_128",
    "SVE_256",
    "SVE_512",
)


@dataclass(frozen=True)
class Capability:
    """One native capability of this process's CPU: truthy when present, with the reason."""

    available: bool
    reason: str

    def __bool__(self) -> bool:
        return self.available


@dataclass(frozen=True)
class CpuFeatures:
    """What this CPU does natively as this process will use it (see the module docstring).

    Attributes:
        arch: ``x86_64``, ``aarch64`` or another ``platform.machine()`` value.
        model: the CPU's name (never from ``/proc/cpuinfo`` on aarch64).
        isa: torch's ATen dispatch level (``torch.backends.cpu.get_cpu_capability()``).
        hardware: feature names the CPU reports, in the kernel's ``/proc/cpuinfo`` spelling
            (``avx512_bf16``, ``avx_vnni``, ``asimddp``, ``bf16`` ...), before any cap.
        source: where ``hardware`` came from.
        caps: the cap variables set in the environment, ``{name: value}``.
        bf16_native: bf16 dot products in hardware and not capped away (x86 AVX512-BF16 or AMX,
            Arm BF16).
        int8_dot: int8 dot-product instructions, not capped away (x86 AVX512-VNNI, AVX-VNNI or
            AMX-INT8; Arm SDOT/UDOT or I8MM).
        amx: Intel AMX tiles (x86 only).
        avx512: AVX-512 (x86 only).
        sve: Arm SVE.
        notes: caps that contradict each other or a library left uncapped, each a sentence.
    """

    arch: str
    model: str
    isa: str
    hardware: frozenset[str]
    source: str
    caps: dict[str, str]
    bf16_native: Capability
    int8_dot: Capability
    amx: Capability
    avx512: Capability
    sve: Capability
    notes: list[str] = field(default_factory=list)

    @property
    def capped(self) -> bool:
        """Whether any cap variable is set."""
        return bool(self.caps)

    @property
    def description(self) -> str:
        """One line for a person: the CPU, torch's ISA, the caps, bf16, int8, AMX/SVE."""
        caps = " ".join(f"{k}={v}" for k, v in self.caps.items())
        parts = [
            f"{self.model} ({self.arch}), torch dispatches {self.isa}"
            + (f", capped by {caps}" if caps else ""),
            ("native bf16" if self.bf16_native else "no native bf16 (emulated, slow)"),
            ("int8 dot products" if self.int8_dot else "no int8 dot products"),
        ]
        if self.arch == "x86_64":
            parts.append("AMX" if self.amx else "no AMX")
        elif is_arm64(self.arch):
            parts.append("SVE" if self.sve else "no SVE")
        return "; ".join(parts)

    def as_dict(self) -> dict:
        """JSON-serialisable form: capabilities as ``{"available", "reason"}``."""
        out = {
            "arch": self.arch,
            "model": self.model,
            "isa": self.isa,
            "hardware": sorted(self.hardware),
            "source": self.source,
            "caps": dict(self.caps),
            "notes": list(self.notes),
            "description": self.description,
        }
        for name in ("bf16_native", "int8_dot", "amx", "avx512", "sve"):
            cap = getattr(self, name)
            out[name] = {"available": cap.available, "reason": cap.reason}
        return out


def hardware_from_auxv(hwcap: int, hwcap2: int) -> frozenset[str]:
    """aarch64 feature names from the auxiliary vector's ``AT_HWCAP`` and ``AT_HWCAP2`` words."""
    names = {n for n, bit in HWCAP_BITS.items() if hwcap >> bit & 1}
    return frozenset(names | {n for n, bit in HWCAP2_BITS.items() if hwcap2 >> bit & 1})


def hardware_from_cpuinfo(text: str) -> frozenset[str]:
    """Feature names from ``/proc/cpuinfo`` text (x86 ``flags``, Arm ``Features``; first CPU)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def hardware_from_torch(capabilities: Mapping) -> frozenset[str]:
    """Feature names from ``torch.cpu.get_capabilities()`` (its keys renamed as the kernel's)."""
    return frozenset(
        _TORCH_NAMES[k] for k, v in capabilities.items() if k in _TORCH_NAMES and v is True
    )


def _auxv() -> tuple[int, int] | None:
    """``(AT_HWCAP, AT_HWCAP2)`` of this process from libc's ``getauxval``, or None."""
    try:
        import ctypes

        getauxval = ctypes.CDLL(None).getauxval
        getauxval.restype, getauxval.argtypes = ctypes.c_ulong, [ctypes.c_ulong]
        return int(getauxval(AT_HWCAP)), int(getauxval(AT_HWCAP2))
    except (OSError, AttributeError):
        return None


@functools.lru_cache(maxsize=1)
def _probe(machine: str) -> tuple[frozenset[str], str, str, str]:
    """This machine's ``(hardware, source, model, torch ISA)``; probed once per process."""
    import torch

    caps = dict(torch.cpu.get_capabilities())
    isa = torch.backends.cpu.get_cpu_capability()
    model = str(caps.get("cpu_name") or "")
    if is_arm64(machine):
        auxv = _auxv() if platform.system() == "Linux" else None
        if auxv and auxv[0]:
            return hardware_from_auxv(*auxv), "getauxval(AT_HWCAP, AT_HWCAP2)", model, isa
        return hardware_from_torch(caps), "torch.cpu.get_capabilities()", model, isa
    hardware = hardware_from_torch(caps)
    if hardware:
        return hardware, "torch.cpu.get_capabilities() (CPUID)", model, isa
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    return hardware_from_cpuinfo(text), "/proc/cpuinfo flags", model, isa


def _default_isa(arch: str, hardware: frozenset[str], aten: str | None) -> str:
    """The ATen level torch would report, for :func:`features_from` without a probe."""
    if aten:
        return aten.upper()
    if is_arm64(arch):
        return "SVE256" if "sve" in hardware else "DEFAULT"
    if "avx512f" in hardware:
        return "AVX512"
    return "AVX2" if "avx2" in hardware else "DEFAULT"


def features_from(
    arch: str,
    hardware: Iterable[str],
    *,
    environ: Mapping[str, str] | None = None,
    isa: str | None = None,
    model: str = "CPU",
    source: str = "given",
) -> CpuFeatures:
    """The native capabilities of a CPU with ``hardware`` under the caps in ``environ``.

    Args:
        arch: ``platform.machine()`` value (``x86_64``, ``aarch64``).
        hardware: feature names in the kernel's spelling (see :func:`hardware_from_cpuinfo`,
            :func:`hardware_from_auxv`, :func:`hardware_from_torch`).
        environ: the environment to read the caps from (default ``os.environ``).
        isa: torch's ATen level (``torch.backends.cpu.get_cpu_capability()``); default: what the
            cap or the hardware implies.
        model: the CPU's name, for the reasons.
        source: where ``hardware`` came from, for the reasons.

    Returns:
        A :class:`CpuFeatures`.
    """
    env = os.environ if environ is None else environ
    hw = frozenset(hardware)
    caps = {k: env[k] for k in CAP_VARIABLES if env.get(k)}
    aten_cap = caps.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    isa = _default_isa(arch, hw, aten_cap or None) if isa is None else isa.upper()
    onednn = (caps.get("ONEDNN_MAX_CPU_ISA") or caps.get("DNNL_MAX_CPU_ISA") or "").upper()
    notes = []
    if onednn in ("ALL", "DEFAULT"):
        onednn = ""
    elif onednn and onednn not in ONEDNN_ISAS:
        name = "ONEDNN_MAX_CPU_ISA" if "ONEDNN_MAX_CPU_ISA" in caps else "DNNL_MAX_CPU_ISA"
        notes.append(f"{name}={onednn} is not a oneDNN ISA name: oneDNN ignores it")
        onednn = ""
    if is_arm64(arch):
        return _arm_features(arch, hw, caps, isa, onednn, model, source, notes)
    if arch not in ("x86_64", "AMD64", "i686", "x86"):
        none = Capability(False, f"{arch}: pt2aws knows bf16/int8 instructions of x86 and Arm only")
        return CpuFeatures(arch, model, isa, hw, source, caps, none, none, none, none, none, notes)
    return _x86_features(arch, hw, caps, isa, onednn, model, source, notes)


def _x86_features(arch, hw, caps, isa, onednn, model, source, notes) -> CpuFeatures:
    """:func:`features_from` for x86 (``/proc/cpuinfo`` flag names; ``onednn`` a valid cap)."""
    aten_cap = caps.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    onednn_name = "ONEDNN_MAX_CPU_ISA" if "ONEDNN_MAX_CPU_ISA" in caps else "DNNL_MAX_CPU_ISA"
    aten_512 = isa.startswith("AVX512")
    if aten_cap and not aten_512 and not onednn:
        notes.append(
            f"ATEN_CPU_CAPABILITY={aten_cap} caps ATen only: oneDNN still uses this CPU's "
            "AVX-512/bf16/VNNI kernels; set ONEDNN_MAX_CPU_ISA too (AVX2 emulates an AVX2 CPU)"
        )

    def check(found: list[str], needs_512: bool, onednn_allows: bool, what: str) -> Capability:
        """``found`` (the hardware's names for it), unless a cap takes it away."""
        if not found:
            return Capability(False, f"{model} has no {what}")
        has = f"{model} has {'/'.join(found)}"
        if needs_512 and not aten_512:
            return Capability(
                False, f"{has}, but ATEN_CPU_CAPABILITY={aten_cap} caps torch at {isa}"
            )
        if onednn and not onednn_allows:
            return Capability(False, f"{has}, but {onednn_name}={onednn} caps oneDNN below it")
        return Capability(True, has)

    def names(*pairs: tuple[str, str]) -> list[str]:
        return [label for flag, label in pairs if flag in hw]

    bf16 = check(
        names(("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX-BF16")),
        True,
        onednn.startswith(_ONEDNN_BF16),
        "AVX512-BF16 or AMX-BF16",
    )
    vnni_512 = check(
        names(("avx512_vnni", "AVX512-VNNI"), ("amx_int8", "AMX-INT8")),
        True,
        onednn.startswith(_ONEDNN_AVX512_VNNI),
        "AVX512-VNNI or AMX-INT8",
    )
    # AVX-VNNI (256-bit) survives an ATen AVX2 cap only where oneDNN is explicitly allowed it
    vnni_256 = check(
        names(("avx_vnni", "AVX-VNNI")),
        bool(aten_cap) and not onednn,
        onednn.startswith((*_ONEDNN_AVX_VNNI, *_ONEDNN_AVX512_VNNI)),
        "AVX-VNNI",
    )
    usable = [c.reason for c in (vnni_512, vnni_256) if c]
    if usable:
        int8 = Capability(True, "; ".join(usable))
    else:
        int8 = Capability(False, "; ".join(dict.fromkeys([vnni_512.reason, vnni_256.reason])))
    amx = check(
        names(("amx_tile", "AMX")), True, "AMX" in onednn or onednn.startswith("AVX10"), "AMX"
    )
    avx512 = check(
        names(("avx512f", "AVX-512")), True, onednn.startswith(_ONEDNN_AVX512), "AVX-512"
    )
    sve = Capability(False, "SVE is an Arm extension")
    return CpuFeatures(arch, model, isa, hw, source, caps, bf16, int8, amx, avx512, sve, notes)


def _arm_features(arch, hw, caps, isa, onednn, model, source, notes) -> CpuFeatures:
    """:func:`features_from` for aarch64 (HWCAP names)."""
    aten_default = caps.get("ATEN_CPU_CAPABILITY", "").strip().lower() == "default"
    if "bf16" in hw:
        bf16 = Capability(True, f"{model} has BF16 (HWCAP2_BF16)")
    else:
        bf16 = Capability(False, f"{model} has no BF16 (HWCAP2_BF16)")
    dots = [k for k, n in (("SDOT/UDOT", "asimddp"), ("I8MM", "i8mm")) if n in hw]
    if dots:
        int8 = Capability(True, f"{model} has {' and '.join(dots)}")
    else:
        int8 = Capability(False, f"{model} has no SDOT/UDOT (HWCAP_ASIMDDP) or I8MM")
    if "sve" not in hw:
        sve = Capability(False, f"{model} has no SVE (HWCAP_SVE)")
    elif aten_default or onednn == "ASIMD":
        cut = " and ".join(f"{k}={v}" for k, v in caps.items())
        sve = Capability(False, f"{model} has SVE, but {cut} caps it away")
    else:
        sve = Capability(True, f"{model} has SVE{'2' if 'sve2' in hw else ''}")
    amx = Capability(False, "AMX is an x86 extension")
    avx512 = Capability(False, "AVX-512 is an x86 extension")
    return CpuFeatures(arch, model, isa, hw, source, caps, bf16, int8, amx, avx512, sve, notes)


def cpu_features(environ: Mapping[str, str] | None = None) -> CpuFeatures:
    """What this CPU does natively for this process (the module docstring says how).

    The hardware is probed once per process (``import torch`` included); the caps are read from
    ``environ`` on every call. ATen, oneDNN and MKL read their caps when they start, so change
    them in a new process, not in this one.

    Args:
        environ: the environment to read the caps from (default ``os.environ``).

    Returns:
        A :class:`CpuFeatures`; e.g. ``cpu_features().bf16_native`` is truthy on a Graviton3 or
        a Sapphire Rapids, and ``.bf16_native.reason`` says why (not).
    """
    machine = platform.machine()
    hardware, source, model, isa = _probe(machine)
    return features_from(
        machine,
        hardware,
        environ=environ,
        isa=isa if environ is None else None,  # torch's level reflects this process's caps
        model=model or machine,
        source=source,
    )
