"""The one source of instance and accelerator facts: ``instances.json`` and its readers.

Every hardware, instance and price figure pt2aws uses lives in ``instances.json`` beside this
file, each naming its source, the date it was read and whether it was verified in stored
material (``verified: false`` figures must be checked at the source before anyone quotes them):

* instance types (EC2 names; SageMaker prefixes ``ml.``): vCPUs, memory, accelerators,
  interconnect, EFA, EC2 on-demand price (:func:`load_catalog`, :func:`get_instance`);
* accelerators: memory, peak dense bf16 FLOP/s and the names ``torch.cuda.get_device_name``
  reports (:func:`peak_bf16_flops`, used for MFU);
* processors: architecture, native bf16, and for Graviton the Neoverse core and the Arm part
  number ``/proc/cpuinfo`` shows (:func:`processor_by_cpu_part`);
* the processor of each instance family, hence architecture, Graviton generation and bf16
  (:func:`family_processor`, :func:`architecture`, :func:`graviton_generation`,
  :func:`has_bf16`), and vCPUs per size (:func:`instance_vcpus`);
* SageMaker real-time hosting prices (:func:`hosting_price`) and training prices
  (:func:`training_price`), which differ from EC2 prices and from each other.

Which instance types the AWS APIs accept is read from botocore's bundled service models, here
and nowhere else (:func:`botocore_instance_types`), so it follows the installed botocore.
Edit ``instances.json`` to update a figure; nothing else in the package hard-codes one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CATALOG_PATH = Path(__file__).with_name("instances.json")


class CatalogError(ValueError):
    """The instance catalog is missing a field or names an unknown accelerator/source."""


@dataclass(frozen=True)
class InstanceType:
    """One instance type from the catalog (EC2 name; SageMaker prefixes ``ml.``).

    Attributes:
        name: EC2 instance type, e.g. ``"p4d.24xlarge"``.
        kind: ``gpu`` | ``trainium`` | ``inferentia`` | ``cpu``.
        cpu: processor family, e.g. ``"Graviton3"``.
        vcpus: virtual CPUs.
        memory_gib: instance RAM, GiB.
        accelerator: accelerator name (key of the catalog's ``accelerators``) or None.
        accelerator_count: accelerators per instance.
        accelerator_memory_gb: memory per accelerator, GB (1e9 bytes); 0 for CPU instances.
        peak_bf16_tflops: dense bf16 peak of the whole instance, TFLOP/s (accelerator peak x
            count; for CPU instances the processor's per-vCPU estimate x vCPUs).
        interconnect: accelerator interconnect and network, in words.
        efa: whether the instance has an Elastic Fabric Adapter.
        price_usd_per_hour: EC2 on-demand price, us-east-1, USD/hour; None when unknown.
        sources: ``{"specs", "price", "peak"}`` -> source entries of the catalog (url, date, verified).
    """

    name: str
    kind: str
    cpu: str
    vcpus: int
    memory_gib: float
    accelerator: str | None
    accelerator_count: int
    accelerator_memory_gb: float
    peak_bf16_tflops: float
    interconnect: str
    efa: bool
    price_usd_per_hour: float | None
    sources: dict

    @property
    def devices(self) -> int:
        """Training devices per instance: accelerators, or 1 (the CPU) for CPU instances."""
        return self.accelerator_count or 1

    @property
    def device_memory_bytes(self) -> float:
        """Memory of one training device in bytes (accelerator memory, else instance RAM)."""
        if self.accelerator_count:
            return self.accelerator_memory_gb * 1e9
        return self.memory_gib * 2**30

    @property
    def verified(self) -> bool:
        """True when every figure of this entry was verified in stored material."""
        return all(s.get("verified") for s in self.sources.values())

    @property
    def trains(self) -> bool:
        """Inferentia is for inference only; everything else can train."""
        return self.kind != "inferentia"


@lru_cache(maxsize=4)
def _read(path: str) -> dict:
    return json.loads(Path(path).read_text())


def _data() -> dict:  # the parsed instances.json, read once per process
    return _read(str(CATALOG_PATH))


def source(source_id: str) -> dict:
    """A source entry of the catalog: ``{"url", "date", "verified", "note", "id"}``.

    Raises:
        CatalogError: an unknown source id.
    """
    sources = _data()["sources"]
    if source_id not in sources:
        raise CatalogError(f"unknown source id {source_id!r}; known: {', '.join(sources)}")
    return dict(sources[source_id], id=source_id)


def _instance(row: dict, data: dict) -> InstanceType:
    srcs = {k: dict(data["sources"][v], id=v) for k, v in row["sources"].items()}
    if row["accelerator"]:
        acc = data["accelerators"][row["accelerator"]]
        mem_gb, peak = acc["memory_gb"], acc["peak_bf16_tflops"] * row["accelerator_count"]
        peak_source = acc["source"]
    else:
        cpu = data["cpus"][row["cpu"]]
        mem_gb, peak = 0.0, cpu["peak_bf16_tflops_per_vcpu"] * row["vcpus"]
        peak_source = cpu["source"]
    srcs["peak"] = dict(data["sources"][peak_source], id=peak_source)
    return InstanceType(
        name=row["name"],
        kind=row["kind"],
        cpu=row["cpu"],
        vcpus=int(row["vcpus"]),
        memory_gib=float(row["memory_gib"]),
        accelerator=row["accelerator"],
        accelerator_count=int(row["accelerator_count"]),
        accelerator_memory_gb=float(mem_gb),
        peak_bf16_tflops=float(peak),
        interconnect=row["interconnect"],
        efa=bool(row["efa"]),
        price_usd_per_hour=row["price_usd_per_hour"],
        sources=srcs,
    )


@lru_cache(maxsize=4)
def _instances(path: str) -> tuple[InstanceType, ...]:
    data = _read(path)
    out = []
    for row in data["instances"]:
        try:
            out.append(_instance(row, data))
        except KeyError as exc:
            raise CatalogError(
                f"catalog entry {row.get('name', row)!r}: missing or unknown {exc}; every instance "
                "needs name, kind, cpu, vcpus, memory_gib, accelerator, accelerator_count, "
                "interconnect, efa, price_usd_per_hour and sources naming ids under 'sources'"
            ) from None
    return tuple(out)


def load_catalog(path: str | Path | None = None) -> list[InstanceType]:
    """The instance types of ``instances.json`` (or ``path``), in file order.

    Raises:
        CatalogError: a missing field, an unknown accelerator/CPU, or an unknown source id.
    """
    return list(_instances(str(path or CATALOG_PATH)))


def catalog_meta(path: str | Path | None = None) -> dict:
    """The catalog's ``meta`` block (region, price basis, checked date, verification rule)."""
    return dict(_read(str(path or CATALOG_PATH))["meta"])


def _find(bare: str) -> InstanceType | None:
    return next((it for it in _instances(str(CATALOG_PATH)) if it.name == bare), None)


def get_instance(name: str) -> InstanceType:
    """The catalog entry for ``name`` (``"p4d.24xlarge"`` or ``"ml.p4d.24xlarge"``).

    Raises:
        KeyError: not in the catalog; the message lists what is.
    """
    found = _find(name.removeprefix("ml."))
    if found is None:
        raise KeyError(
            f"{name!r} is not in the catalog ({CATALOG_PATH.name}); known: "
            + ", ".join(i.name for i in load_catalog())
            + ". Add it to the catalog file with its sources."
        )
    return found


# Processors, families, sizes, architecture: any instance type AWS offers, not only the rows.
def processor_by_cpu_part(cpu_part: str) -> tuple[str, str] | None:
    """The Graviton processor and core of an Arm ``CPU part`` number from ``/proc/cpuinfo``.

    Returns:
        ``(processor, core)``, e.g. ``("Graviton3", "Neoverse V1")`` for ``"0xd40"`` (any case);
        None for another part. Source: the catalog's ``linux-cputype`` (Linux ``cputype.h``).
    """
    part = cpu_part.strip().lower()
    for name, cpu in _data()["cpus"].items():
        if isinstance(cpu, dict) and cpu.get("cpu_part") == part:
            return name, cpu["core"]
    return None


def instance_family(instance_type: str) -> str:
    """``"ml.c7g.xlarge"`` or ``"c7g.xlarge"`` -> ``"c7g"``.

    Raises:
        ValueError: not of the form ``[ml.]<family>.<size>``.
    """
    parts = instance_type.removeprefix("ml.").split(".") if isinstance(instance_type, str) else []
    if len(parts) != 2 or not all(parts):
        raise ValueError(
            f"instance type {instance_type!r} is not of the form ml.<family>.<size>, "
            "e.g. ml.c7g.xlarge"
        )
    return parts[0]


def family_processor(instance_type: str) -> str | None:
    """Processor of the instance's family (``cpu_families``, else the family's catalog row).

    Returns:
        A key of the catalog's ``cpus`` (``"Graviton3"``, ``"Ice Lake"``), else the row's CPU
        in words (``"AMD EPYC 3rd gen"``); None for an unknown family.

    Raises:
        ValueError: a malformed instance type (see :func:`instance_family`).
    """
    family = instance_family(instance_type)
    known = _data()["cpu_families"]
    if family in known:
        return known[family]
    row = next((it for it in load_catalog() if instance_family(it.name) == family), None)
    return row.cpu if row else None


def is_graviton(instance_type: str) -> bool:
    """True for AWS Graviton (arm64) instance types, e.g. ``ml.c7g.xlarge``."""
    return (family_processor(instance_type) or "").startswith("Graviton")


def architecture(instance_type: str) -> str:
    """``"arm64"`` for Graviton families, else ``"x86_64"``."""
    return "arm64" if is_graviton(instance_type) else "x86_64"


def graviton_generation(instance_type: str) -> int | None:
    """2, 3 or 4 for Graviton instance types (c6g, c7g, c8g...); None for others."""
    cpu = family_processor(instance_type) or ""
    return int(cpu.removeprefix("Graviton")) if cpu.startswith("Graviton") else None


def has_bf16(instance_type: str) -> bool:
    """Whether the instance's CPU computes bf16 natively (Graviton3+, Sapphire Rapids).

    False for an unknown family (the safe default: no bf16 fast-math settings).
    """
    cpu = family_processor(instance_type)
    return bool(cpu and _data()["cpus"].get(cpu, {}).get("bf16"))


def instance_vcpus(instance_type: str) -> int:
    """vCPUs of an instance type: its catalog row, else the size rule of ``size_vcpus``.

    The rule (source ``aws-ec2-sizes``): ``large`` 2 and each size step doubles (``xlarge`` 4,
    ``2xlarge`` 8...); a Graviton ``medium`` has 1 vCPU, an x86 (burstable) ``medium`` 2.

    Raises:
        ValueError: a malformed type, or a size the rule does not know (pass the vCPUs
            explicitly then).
    """
    bare = instance_type.removeprefix("ml.")
    family = instance_family(bare)
    row = _find(bare)
    if row:
        return row.vcpus
    size = bare.split(".")[1]
    sizes = {k: v for k, v in _data()["size_vcpus"].items() if k != "note"}
    if size == "medium" and not is_graviton(bare):
        return 2
    if size not in sizes:
        raise ValueError(
            f"unknown size {size!r} in {instance_type} (family {family}): pass vcpus= "
            f"explicitly (known sizes: {', '.join(sizes)})"
        )
    return int(sizes[size])


@lru_cache(maxsize=1)
def _botocore_enums() -> dict[str, frozenset]:
    import botocore.session

    session = botocore.session.get_session()
    sm = session.get_service_model("sagemaker")
    return {
        "ec2": frozenset(session.get_service_model("ec2").shape_for("InstanceType").enum),
        "training": frozenset(sm.shape_for("TrainingInstanceType").enum),
        "hosting": frozenset(sm.shape_for("ProductionVariantInstanceType").enum),
    }


def botocore_instance_types(api: str) -> frozenset[str]:
    """Instance types an AWS API accepts, from botocore's bundled service model (offline).

    Args:
        api: ``"ec2"`` (EC2 ``InstanceType``, bare names), ``"training"`` (SageMaker
            ``TrainingInstanceType``) or ``"hosting"`` (SageMaker
            ``ProductionVariantInstanceType``); the two SageMaker lists carry the ``ml.`` prefix.

    Returns:
        The enum of the installed botocore (read once per process).

    Raises:
        ValueError: another ``api``.
    """
    enums = _botocore_enums()
    if api not in enums:
        raise ValueError(f"api {api!r}: choose one of {', '.join(enums)}")
    return enums[api]


def availability(name: str) -> dict[str, bool]:
    """Whether EC2, SageMaker training and SageMaker real-time hosting accept ``name``.

    Returns:
        ``{"ec2": bool, "sagemaker_training": bool, "sagemaker_hosting": bool}`` for
        ``"p4d.24xlarge"`` or ``"ml.p4d.24xlarge"``.
    """
    bare = name.removeprefix("ml.")
    return {
        "ec2": bare in botocore_instance_types("ec2"),
        "sagemaker_training": f"ml.{bare}" in botocore_instance_types("training"),
        "sagemaker_hosting": f"ml.{bare}" in botocore_instance_types("hosting"),
    }


# Accelerator peaks and hosting prices.
def peak_bf16_flops(device_name: str) -> float | None:
    """Peak dense bf16 FLOP/s of the GPU ``torch.cuda.get_device_name()`` calls ``device_name``.

    The longest ``device_names`` pattern of the catalog's accelerators contained in the name
    wins (``"H100 PCIe"`` before ``"H100"``, ``"L40S"`` before ``"L4"``).

    Returns:
        FLOP/s (not TFLOP/s), or None for a GPU the catalog does not know (MFU is then not
        reported).
    """
    best = None
    for acc in _data()["accelerators"].values():
        for pattern in acc.get("device_names", []):
            if pattern in device_name and (best is None or len(pattern) > len(best[0])):
                best = (pattern, acc["peak_bf16_tflops"])
    return best[1] * 1e12 if best else None


#: Region of every figure in the catalog unless a row's ``regional_prices`` names another.
CATALOG_REGION = "us-east-1"
#: What a price is for: an EC2 instance, a SageMaker real-time endpoint, a SageMaker training job.
PRICE_USES = ("ec2", "hosting", "training")


@dataclass(frozen=True)
class InstancePrice:
    """An on-demand price (USD per instance-hour): EC2, SageMaker hosting or SageMaker training.

    Attributes:
        instance_type: as asked, e.g. ``"ml.c7g.xlarge"`` (SageMaker) or ``"c7g.xlarge"`` (EC2).
        usd_per_hour: USD per instance-hour (a training job bills its billable seconds x
            instances; an endpoint every hour it exists; EC2 per second of a running instance).
        processor: e.g. ``"Graviton3"`` (:func:`family_processor`; ``""`` when unknown).
        source: the source entry (``url``, ``date``, ``verified``, ``note``, ``id``): a catalog
            source, or the AWS Price List API read now (:mod:`pt2aws.sizing.pricing`).
        use: ``"ec2"``, ``"hosting"`` or ``"training"`` (:data:`PRICE_USES`).
        region: the region the figure is for.
        asked_region: the region it was asked for (differs from ``region`` when the catalog has
            no figure there and fell back to :data:`CATALOG_REGION`).
    """

    instance_type: str
    usd_per_hour: float
    processor: str
    source: dict
    use: str = "hosting"
    region: str = CATALOG_REGION
    asked_region: str = CATALOG_REGION

    @property
    def verified(self) -> bool:
        """True when the price was read in stored material on the source's date (or live)."""
        return bool(self.source.get("verified"))

    @property
    def region_note(self) -> str:
        """``""``, or the sentence saying that another region's figure stands in."""
        if self.region == self.asked_region:
            return ""
        return f"{self.region} price: the catalog has no figure for {self.asked_region}"

    def describe(self) -> str:
        """``"0.1734 USD/h (UNVERIFIED, sagemaker-hosting-pricing 2026-11-30)"`` and the region
        note, for tables and messages."""
        mark = "verified" if self.verified else "UNVERIFIED"
        note = f"; {self.region_note}" if self.region_note else ""
        return (
            f"{self.usd_per_hour:.6g} USD/h ({mark}, {self.source['id']} {self.source['date']}, "
            f"{self.region}{note})"
        )


def _sagemaker_price(section: str, use: str, name: str, region: str) -> InstancePrice | None:
    row = _data()[section].get(name)
    if row is None or name == "note":
        return None
    return InstancePrice(
        instance_type=name,
        usd_per_hour=float(row["usd_per_hour"]),
        processor=family_processor(name) or "",
        source=source(row["source"]),
        use=use,
        asked_region=region or CATALOG_REGION,
    )


def _prices(section: str, use: str) -> dict[str, InstancePrice]:
    return {
        name: _sagemaker_price(section, use, name, CATALOG_REGION)
        for name in _data()[section]
        if name != "note"
    }


def hosting_prices() -> dict[str, InstancePrice]:
    """Every SageMaker real-time hosting price in the catalog (us-east-1), by ``ml.`` type."""
    return _prices("sagemaker_hosting_prices", "hosting")


def training_prices() -> dict[str, InstancePrice]:
    """Every SageMaker training price in the catalog (us-east-1), by ``ml.`` type."""
    return _prices("sagemaker_training_prices", "training")


def hosting_price(instance_type: str, region: str = CATALOG_REGION) -> InstancePrice | None:
    """The SageMaker hosting price of ``instance_type`` (``ml.`` prefix optional), or None.

    The catalog's SageMaker prices are us-east-1 only: for another ``region`` the us-east-1
    figure comes back with :attr:`InstancePrice.region_note` saying so.
    """
    name = "ml." + instance_type.removeprefix("ml.")
    return _sagemaker_price("sagemaker_hosting_prices", "hosting", name, region)


def training_price(instance_type: str, region: str = CATALOG_REGION) -> InstancePrice | None:
    """The SageMaker training price of ``instance_type`` (``ml.`` prefix optional), or None
    (us-east-1 only, as :func:`hosting_price`)."""
    name = "ml." + instance_type.removeprefix("ml.")
    return _sagemaker_price("sagemaker_training_prices", "training", name, region)


def ec2_price(instance_type: str, region: str = CATALOG_REGION) -> InstancePrice | None:
    """The EC2 on-demand Linux price of a catalog row, in ``region`` where a dated source gives
    one (``regional_prices``), else the us-east-1 figure with a region note.

    Returns:
        None for a type not in the catalog or without a known on-demand price (p5e, trn2).
    """
    bare = instance_type.removeprefix("ml.")
    row = next((r for r in _data()["instances"] if r["name"] == bare), None)
    if row is None or row["price_usd_per_hour"] is None:
        return None
    region = region or CATALOG_REGION
    regional = row.get("regional_prices", {})
    here = region if region in regional else CATALOG_REGION
    usd = regional[region] if region in regional else row["price_usd_per_hour"]
    return InstancePrice(
        instance_type=bare,
        usd_per_hour=float(usd),
        processor=family_processor(bare) or row["cpu"],
        source=source(row["sources"]["price"]),
        use="ec2",
        region=here,
        asked_region=region,
    )


def price(instance_type: str, use: str | None = None, region: str = CATALOG_REGION):
    """The catalog price of ``instance_type`` for ``use`` in ``region`` (see :func:`ec2_price`,
    :func:`hosting_price`, :func:`training_price`); ``use`` None: ``hosting`` for ``ml.``
    names, else ``ec2``.

    Raises:
        ValueError: an unknown ``use``.
    """
    use = use or ("hosting" if instance_type.startswith("ml.") else "ec2")
    lookup = {"ec2": ec2_price, "hosting": hosting_price, "training": training_price}
    if use not in lookup:
        raise ValueError(f"use {use!r}: choose one of {', '.join(PRICE_USES)}")
    return lookup[use](instance_type, region)


def price_source_counts() -> dict[str, dict[str, int]]:
    """How many catalog prices are verified: ``{"ec2"|"hosting"|"training": {"verified",
    "unverified"}}`` (an EC2 row without a price counts by its source: p5e unverified, trn2's
    absence verified)."""
    counts = {use: {"verified": 0, "unverified": 0} for use in PRICE_USES}
    for row in _data()["instances"]:
        key = "verified" if source(row["sources"]["price"])["verified"] else "unverified"
        counts["ec2"][key] += 1
    for use, prices in (("hosting", hosting_prices()), ("training", training_prices())):
        for p in prices.values():
            counts[use]["verified" if p.verified else "unverified"] += 1
    return counts


def serving_peak(instance_type: str) -> dict | None:
    """Peak FLOP/s an endpoint on ``instance_type`` computes a served model at, with its basis.

    CPU instances (any size of a family in ``cpu_families``): vCPUs x the processor's fp32
    vector peak per vCPU (``peak_fp32_gflops_per_vcpu``, source ``derived-cpu-fp32-peak``: the
    model is served in fp32; bf16 fast math on Graviton3/4 is not counted). Accelerator rows:
    the accelerators' dense bf16 peak.

    Returns:
        ``{"flops": float (FLOP/s), "precision": "fp32"|"bf16", "processor": str,
        "basis": str, "source": dict}``, or None when the catalog has no figure (an unknown
        family, a CPU without ``peak_fp32_gflops_per_vcpu``).
    """
    bare = instance_type.removeprefix("ml.")
    row = _find(bare)
    if row is not None and row.accelerator:
        return {
            "flops": row.peak_bf16_tflops * 1e12,
            "precision": "bf16",
            "processor": row.accelerator,
            "basis": f"{row.accelerator_count} x {row.accelerator} dense bf16 peak",
            "source": row.sources["peak"],
        }
    processor = family_processor(bare)
    cpu = _data()["cpus"].get(processor or "")
    if not isinstance(cpu, dict) or not cpu.get("peak_fp32_gflops_per_vcpu"):
        return None
    vcpus = instance_vcpus(bare)
    per_vcpu = float(cpu["peak_fp32_gflops_per_vcpu"])
    return {
        "flops": vcpus * per_vcpu * 1e9,
        "precision": "fp32",
        "processor": processor,
        "basis": f"{vcpus} vCPUs x {per_vcpu:g} GFLOP/s fp32 ({processor})",
        "source": source("derived-cpu-fp32-peak"),
    }
