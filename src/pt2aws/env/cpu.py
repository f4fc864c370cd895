"""What this CPU does natively, as this process uses it: the one answer to "is bf16/int8 native
here" (``cpu_features().bf16_native``, ``.int8_dot``, each with its ``.reason``). Inputs: aarch64
``getauxval(AT_HWCAP/AT_HWCAP2)`` (not ``/proc/cpuinfo``, the host's under QEMU), x86
``torch.cpu.get_capabilities()`` else ``/proc/cpuinfo``; the caps in :data:`CAP_VARIABLES`
(oneDNN's: https://oneapi-src.github.io/oneDNN/dev_guide_cpu_dispatcher_control.html); torch's
dispatch level. :func:`features_from` is the pure part."""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pt2aws.env.machine import cpu_name, cpuinfo, is_arm64

#: Environment variables that cap the instruction set torch's libraries use.
CAP_VARIABLES = tuple(
    "ATEN_CPU_CAPABILITY ONEDNN_MAX_CPU_ISA DNNL_MAX_CPU_ISA MKL_ENABLE_INSTRUCTIONS".split()
)
#: aarch64 HWCAP bits (AT_HWCAP = 16, AT_HWCAP2 = 26): Linux arch/arm64/include/uapi/asm/hwcap.h.
AT_HWCAP, AT_HWCAP2 = 16, 26
HWCAP_BITS = {"asimd": 1, "asimddp": 20, "sve": 22}
HWCAP2_BITS = {"sve2": 1, "svei8mm": 9, "svebf16": 12, "i8mm": 13, "bf16": 14, "sme": 23}
#: ``torch.cpu.get_capabilities()`` keys spelled otherwise in ``/proc/cpuinfo``.
_TORCH_RENAMES = {
    **{f"avx512_{x}": f"avx512{x}" for x in ("f", "bw", "vl", "dq")},
    **{"neon": "asimd", "dot": "asimddp", "sve_bf16": "svebf16"},
}
#: Every ``ONEDNN_MAX_CPU_ISA`` value oneDNN 3.x knows (x64, then aarch64); it ignores others.
ONEDNN_ISAS = frozenset(
    "SSE41 AVX AVX2 AVX2_VNNI AVX2_VNNI_2 AVX512_CORE AVX512_CORE_VNNI AVX512_CORE_BF16 "
    "AVX512_CORE_FP16 AVX512_CORE_AMX AVX512_CORE_AMX_FP16 AVX10_1_512 AVX10_1_512_AMX "
    "AVX10_1_512_AMX_FP16 AVX10_2_512 AVX10_2_512_AMX_2 ASIMD SVE_128 SVE_256 SVE_512".split()
)
_ONEDNN_BF16 = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX10")
_ONEDNN_VNNI = ("AVX512_CORE_VNNI", *_ONEDNN_BF16)
#: x86 capability: (its ``/proc/cpuinfo`` flags and names, the ONEDNN_MAX_CPU_ISA prefixes that
#: still allow it); each needs ATen's AVX-512 level too.
X86_CAPABILITIES = {
    "bf16_native": ({"avx512_bf16": "AVX512-BF16", "amx_bf16": "AMX-BF16"}, _ONEDNN_BF16),
    "int8_dot": ({"avx512_vnni": "AVX512-VNNI", "amx_int8": "AMX-INT8"}, _ONEDNN_VNNI),
    "amx": ({"amx_tile": "AMX"}, ("AVX512_CORE_AMX", "AVX10")),
}


@dataclass(frozen=True)
class Capability:
    """One native capability: truthy when present, with the reason."""

    available: bool
    reason: str

    def __bool__(self) -> bool:
        return self.available


@dataclass(frozen=True)
class CpuFeatures:
    """This CPU as this process uses it: ``hardware`` (``/proc/cpuinfo`` spelling, uncapped),
    ``isa`` (ATen's dispatch level), ``caps`` set, capabilities after the caps, ``notes``."""

    arch: str
    model: str
    isa: str
    hardware: frozenset[str]
    source: str
    caps: dict[str, str]
    bf16_native: Capability
    int8_dot: Capability
    amx: Capability
    sve: Capability
    notes: list[str] = field(default_factory=list)

    @property
    def description(self) -> str:
        caps = " ".join(f"{k}={v}" for k, v in self.caps.items())
        cpu = self.arch if self.model == self.arch else f"{self.model} ({self.arch})"
        parts = [
            f"{cpu}, torch dispatches {self.isa}" + (f", capped by {caps}" if caps else ""),
            "native bf16" if self.bf16_native else "no native bf16 (emulated, slow)",
            "int8 dot products" if self.int8_dot else "no int8 dot products",
        ]
        if self.arch == "x86_64":
            parts.append("AMX" if self.amx else "no AMX")
        elif is_arm64(self.arch):
            parts.append("SVE" if self.sve else "no SVE")
        return "; ".join(parts)

    def as_dict(self) -> dict:
        """JSON-serialisable form; each capability as ``{"available", "reason"}``."""
        out = dataclasses.asdict(self) | {"description": self.description}
        return out | {"hardware": sorted(self.hardware)}


def hardware_from_auxv(hwcap: int, hwcap2: int) -> frozenset[str]:
    """aarch64 feature names from the auxiliary vector's ``AT_HWCAP`` and ``AT_HWCAP2`` words."""
    names = {n for n, bit in HWCAP_BITS.items() if hwcap >> bit & 1}
    return frozenset(names | {n for n, bit in HWCAP2_BITS.items() if hwcap2 >> bit & 1})


def hardware_from_torch(capabilities: Mapping) -> frozenset[str]:
    """Feature names from ``torch.cpu.get_capabilities()`` (its true flags, kernel spelling)."""
    return frozenset(_TORCH_RENAMES.get(k, k) for k, v in capabilities.items() if v is True)


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
def _probe(machine: str) -> tuple[frozenset[str], str, str]:
    """This machine's ``(hardware, source, torch ISA)``; probed once per process."""
    import torch

    caps, isa = dict(torch.cpu.get_capabilities()), torch.backends.cpu.get_cpu_capability()
    auxv = _auxv() if is_arm64(machine) and platform.system() == "Linux" else None
    if auxv and auxv[0]:
        return hardware_from_auxv(*auxv), "getauxval(AT_HWCAP, AT_HWCAP2)", isa
    if hardware_from_torch(caps) or is_arm64(machine):
        return hardware_from_torch(caps), "torch.cpu.get_capabilities()", isa
    first = (cpuinfo() or [{}])[0]
    return frozenset((first.get("flags") or "").split()), "/proc/cpuinfo flags", isa


def features_from(arch: str, hardware: Iterable[str], *, environ: Mapping[str, str] | None = None,
                  isa: str | None = None, model: str = "CPU",
                  source: str = "given") -> CpuFeatures:  # fmt: skip
    """The native capabilities of a CPU with ``hardware`` (kernel spelling) under the caps in
    ``environ`` (default ``os.environ``); ``isa`` defaults to what the cap or hardware implies."""
    env = os.environ if environ is None else environ
    hw, caps = frozenset(hardware), {k: env[k] for k in CAP_VARIABLES if env.get(k)}
    aten = caps.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    if isa is None:  # the widest level the hardware has
        levels = {"sve": "SVE256", "avx512f": "AVX512", "avx2": "AVX2"}
        isa = aten or next((n for f, n in levels.items() if f in hw), "DEFAULT")
    isa = isa.upper()
    onednn_name = "ONEDNN_MAX_CPU_ISA" if "ONEDNN_MAX_CPU_ISA" in caps else "DNNL_MAX_CPU_ISA"
    onednn, notes = caps.get(onednn_name, "").upper(), []
    if onednn in ("ALL", "DEFAULT"):
        onednn = ""
    elif onednn and onednn not in ONEDNN_ISAS:
        notes.append(f"{onednn_name}={onednn} is not a oneDNN ISA name: oneDNN ignores it")
        onednn = ""
    done = functools.partial(CpuFeatures, arch, model, isa, hw, source, caps, notes=notes)
    if is_arm64(arch):
        return done(*_arm(hw, caps, onednn, model))
    if arch not in ("x86_64", "AMD64", "i686", "x86"):
        none = Capability(False, f"{arch}: pt2aws knows bf16/int8 instructions of x86 and Arm only")
        return done(none, none, none, none)
    if aten and not isa.startswith("AVX512") and not onednn:
        notes.append(
            f"ATEN_CPU_CAPABILITY={aten} caps ATen only: oneDNN still uses this CPU's "
            "AVX-512/bf16/VNNI kernels; set ONEDNN_MAX_CPU_ISA too (AVX2 emulates an AVX2 CPU)"
        )

    def check(flags: dict, allowed: tuple, needs_512: bool = True) -> Capability:
        found = [name for flag, name in flags.items() if flag in hw]
        if not found:
            return Capability(False, f"{model} has no {' or '.join(flags.values())}")
        has = f"{model} has {'/'.join(found)}"
        if needs_512 and not isa.startswith("AVX512"):
            return Capability(False, f"{has}, but ATEN_CPU_CAPABILITY={aten} caps torch at {isa}")
        if onednn and not onednn.startswith(allowed):
            return Capability(False, f"{has}, but {onednn_name}={onednn} caps oneDNN below it")
        return Capability(True, has)

    got = {name: check(*spec) for name, spec in X86_CAPABILITIES.items()}
    # AVX-VNNI (256-bit) survives an ATen AVX2 cap only where oneDNN is explicitly allowed it
    vnni_256 = check(
        {"avx_vnni": "AVX-VNNI"}, ("AVX2_VNNI", *_ONEDNN_VNNI), bool(aten) and not onednn
    )
    usable = [c.reason for c in (got["int8_dot"], vnni_256) if c]
    reasons = usable or list(dict.fromkeys([got["int8_dot"].reason, vnni_256.reason]))
    got["int8_dot"] = Capability(bool(usable), "; ".join(reasons))
    return done(**got, sve=Capability(False, "SVE is an Arm extension"))


def _arm(hw, caps, onednn, model) -> tuple[Capability, ...]:
    """``(bf16, int8, amx, sve)`` of an aarch64 CPU with HWCAP names ``hw``."""
    has_bf16 = "bf16" in hw
    bf16 = Capability(has_bf16, f"{model} has {'' if has_bf16 else 'no '}BF16 (HWCAP2_BF16)")
    dots = [k for k, n in (("SDOT/UDOT", "asimddp"), ("I8MM", "i8mm")) if n in hw]
    no_dots = f"{model} has no SDOT/UDOT (HWCAP_ASIMDDP) or I8MM"
    int8 = Capability(bool(dots), f"{model} has {' and '.join(dots)}" if dots else no_dots)
    if "sve" not in hw:
        sve = Capability(False, f"{model} has no SVE (HWCAP_SVE)")
    elif caps.get("ATEN_CPU_CAPABILITY", "").strip().lower() == "default" or onednn == "ASIMD":
        cut = " and ".join(f"{k}={v}" for k, v in caps.items())
        sve = Capability(False, f"{model} has SVE, but {cut} caps it away")
    else:
        sve = Capability(True, f"{model} has SVE{'2' if 'sve2' in hw else ''}")
    return bf16, int8, Capability(False, "AMX is an x86 extension"), sve


def cpu_features() -> CpuFeatures:
    """What this CPU does natively for this process (``.bf16_native`` on a Graviton3 or a
    Sapphire Rapids); the hardware is probed once, the caps read from ``os.environ`` each call."""
    machine = platform.machine()
    hardware, source, isa = _probe(machine)
    return features_from(machine, hardware, isa=isa, model=cpu_name(machine=machine), source=source)


def inductor_cache_for_caps(environ: dict | None = None) -> str | None:
    """With a cap set and no ``TORCHINDUCTOR_CACHE_DIR``, set it to
    ``<tmp>/torchinductor_<user>_<caps>`` in ``environ`` and return it: Inductor's cache key
    ignores the caps, and kernels cached under one crashed under another (benchmarks/README.md)."""
    import getpass
    import re
    import tempfile

    env = os.environ if environ is None else environ
    caps = [f"{name}={env[name]}" for name in CAP_VARIABLES if env.get(name)]
    if not caps or env.get("TORCHINDUCTOR_CACHE_DIR"):
        return None
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(caps).lower())
    path = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}_{tag}")
    env["TORCHINDUCTOR_CACHE_DIR"] = path
    return path
