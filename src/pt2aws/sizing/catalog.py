"""Instance, accelerator and processor facts from ``instances.json`` (each with its source), and
the instance types the AWS APIs accept (botocore)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

CATALOG_PATH = Path(__file__).with_name("instances.json")


@lru_cache(maxsize=1)
def data() -> dict:
    """The parsed ``instances.json``."""
    return json.loads(CATALOG_PATH.read_text())


def source(source_id: str) -> dict:
    """A source entry ``{"url", "date", "verified", "note", "id"}``. Raises KeyError if unknown."""
    return dict(data()["sources"][source_id], id=source_id)


@dataclass(frozen=True)
class InstanceType:
    """One catalog row (EC2 name). ``kind``: gpu | trainium | inferentia | cpu; ``memory_gib``:
    RAM; ``accelerator_memory_gb``: per accelerator (0 on CPUs); ``peak_tflops``: the instance's
    dense bf16 (accelerators) or fp32 vector peak (CPUs); ``sources``: specs, price, peak."""

    name: str
    kind: str
    cpu: str
    vcpus: int
    memory_gib: float
    accelerator: str | None
    accelerator_count: int
    accelerator_memory_gb: float
    peak_tflops: float
    efa: bool
    sources: dict

    @property
    def devices(self) -> int:
        """Training devices: accelerators, or 1 (the CPU)."""
        return self.accelerator_count or 1

    @property
    def device_memory_bytes(self) -> float:
        return self.accelerator_memory_gb * 1e9 if self.accelerator else self.memory_gib * 2**30

    @property
    def peak_precision(self) -> str:
        return "bf16" if self.accelerator else "fp32"


_ROW_FIELDS = "name kind cpu vcpus memory_gib accelerator accelerator_count efa".split()


def _instance(row: dict) -> InstanceType:
    if row["accelerator"]:
        acc = data()["accelerators"][row["accelerator"]]
        memory, peak = acc["memory_gb"], acc["peak_bf16_tflops"] * row["accelerator_count"]
    else:
        acc = data()["cpus"][row["cpu"]]
        memory, peak = 0.0, acc["peak_fp32_gflops_per_vcpu"] * row["vcpus"] / 1e3
    sources = {k: source(v) for k, v in row["sources"].items()} | {"peak": source(acc["source"])}
    fields = {field: row[field] for field in _ROW_FIELDS}
    return InstanceType(**fields, accelerator_memory_gb=memory, peak_tflops=peak, sources=sources)


@lru_cache(maxsize=1)
def load_catalog() -> tuple[InstanceType, ...]:
    """Every catalog row, in file order."""
    return tuple(_instance(row) for row in data()["instances"])


def find(name: str) -> InstanceType | None:
    """The row of ``name`` (``ml.`` prefix optional), or None."""
    bare = name.removeprefix("ml.")
    return next((it for it in load_catalog() if it.name == bare), None)


def get_instance(name: str) -> InstanceType:
    """The row of ``name``. Raises KeyError naming the known types."""
    if (found := find(name)) is None:
        known = ", ".join(it.name for it in load_catalog())
        raise KeyError(f"{name!r} is not in the catalog ({CATALOG_PATH.name}); known: {known}")
    return found


def processor_by_cpu_part(cpu_part: str) -> tuple[str, str] | None:
    """``("Graviton3", "Neoverse V1")`` for the ``/proc/cpuinfo`` Arm ``CPU part`` ``0xd40``."""
    part = cpu_part.strip().lower()
    for name, cpu in data()["cpus"].items():
        if isinstance(cpu, dict) and cpu.get("cpu_part") == part:
            return name, cpu["core"]
    return None


def instance_family(instance_type: str) -> str:
    """``"ml.c7g.xlarge"`` -> ``"c7g"``. Raises ValueError for another form."""
    parts = instance_type.removeprefix("ml.").split(".")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"instance type {instance_type!r} is not of the form ml.<family>.<size>")
    return parts[0]


def family_processor(instance_type: str) -> str | None:
    """The processor of the type's family (a key of ``cpus``, else a row's CPU in words)."""
    family = instance_family(instance_type)
    if family in data()["cpu_families"]:
        return data()["cpu_families"][family]
    row = next((it for it in load_catalog() if instance_family(it.name) == family), None)
    return row.cpu if row else None


def is_graviton(instance_type: str) -> bool:
    return (family_processor(instance_type) or "").startswith("Graviton")


def architecture(instance_type: str) -> str:
    return "arm64" if is_graviton(instance_type) else "x86_64"


def has_bf16(instance_type: str) -> bool:
    """Native bf16 on the type's CPU (Graviton3+, Sapphire Rapids); False when unknown."""
    return bool(data()["cpus"].get(family_processor(instance_type) or "", {}).get("bf16"))


def instance_vcpus(instance_type: str) -> int:
    """vCPUs: the catalog row's, else the size rule (``size_vcpus``; an x86 ``medium`` has 2).
    Raises ValueError for another size."""
    if row := find(instance_type):
        return row.vcpus
    family, size = instance_family(instance_type), instance_type.rsplit(".", 1)[1]
    if size == "medium" and not is_graviton(instance_type):
        return 2
    if size not in data()["size_vcpus"] or size == "note":
        raise ValueError(f"unknown size {size!r} in {instance_type} (family {family}): pass vcpus=")
    return data()["size_vcpus"][size]


def instance_memory_bytes(instance_type: str) -> float | None:
    """Memory of one device: the row's, else vCPUs x the family's RAM per vCPU; None if unknown."""
    if row := find(instance_type):
        return row.device_memory_bytes
    per_vcpu = data()["memory_gib_per_vcpu"].get(instance_family(instance_type)[0])
    return instance_vcpus(instance_type) * per_vcpu * 2**30 if per_vcpu else None


def cpu_peak(processor: str, vcpus: int) -> dict:
    """fp32 peak ``{"flops", "basis"}`` of ``vcpus`` vCPUs of a ``cpus`` entry, else KeyError."""
    per_vcpu = data()["cpus"][processor]["peak_fp32_gflops_per_vcpu"]
    basis = f"{vcpus} vCPUs x {per_vcpu:g} GFLOP/s fp32 ({processor})"
    return {"flops": vcpus * per_vcpu * 1e9, "basis": basis}


def peak_flops(instance_type: str) -> dict | None:
    """Peak FLOP/s of any size of a known family, ``{"flops", "basis"}`` (accelerators' dense
    bf16, else :func:`cpu_peak`); None for an unknown processor."""
    if (row := find(instance_type)) and row.accelerator:
        basis = f"{row.accelerator_count} x {row.accelerator} dense bf16"
        return {"flops": row.peak_tflops * 1e12, "basis": basis}
    processor = family_processor(instance_type) or ""
    if processor not in data()["cpus"]:
        return None
    return cpu_peak(processor, instance_vcpus(instance_type))


def peak_bf16_flops(device_name: str) -> float | None:
    """Dense bf16 FLOP/s of the GPU ``torch.cuda.get_device_name()`` names (the longest matching
    ``device_names`` pattern wins), None if unknown."""
    matches = [(len(pattern), acc["peak_bf16_tflops"] * 1e12)
               for acc in data()["accelerators"].values()
               for pattern in acc.get("device_names", []) if pattern in device_name]  # fmt: skip
    return max(matches, default=(0, None))[1]


_API_SHAPES = {"ec2": ("ec2", "InstanceType"), "training": ("sagemaker", "TrainingInstanceType"),
               "hosting": ("sagemaker", "ProductionVariantInstanceType")}  # fmt: skip


@cache
def botocore_instance_types(api: str) -> frozenset[str]:
    """Types ``"ec2"`` (bare names), ``"training"`` or ``"hosting"`` (``ml.``) accept (botocore)."""
    import botocore.session

    service, shape = _API_SHAPES[api]
    model = botocore.session.get_session().get_service_model(service)
    return frozenset(model.shape_for(shape).enum)


def availability(name: str) -> dict[str, bool]:
    """``{"ec2", "sagemaker_training", "sagemaker_hosting"}``: which APIs accept ``name``."""
    bare = name.removeprefix("ml.")
    sagemaker = {f"sagemaker_{api}": f"ml.{bare}" in botocore_instance_types(api)
                 for api in ("training", "hosting")}  # fmt: skip
    return {"ec2": bare in botocore_instance_types("ec2"), **sagemaker}
