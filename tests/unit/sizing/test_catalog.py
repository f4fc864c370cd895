"""Tests of :mod:`pt2aws.sizing.catalog`: the instance, accelerator and processor facts."""

from __future__ import annotations

import pytest

from pt2aws.sizing import catalog


def test_instance_vcpus_row_then_size_rule_and_bad_types():
    assert catalog.instance_vcpus("ml.p4d.24xlarge") == 96  # the catalog row
    assert catalog.instance_vcpus("ml.c6i.2xlarge") == 8  # rule: xlarge 4, each step doubles
    assert catalog.instance_vcpus("r7g.16xlarge") == 64
    assert catalog.instance_vcpus("ml.c7g.medium") == 1  # a Graviton medium is one core
    assert catalog.instance_vcpus("t3.medium") == 2  # x86 burstable
    with pytest.raises(ValueError, match="unknown size 'metal'.*pass vcpus="):
        catalog.instance_vcpus("c7g.metal")
    for malformed in ("c7g", "ml.c7g", "ml.c7g.xlarge.extra", "ml..xlarge"):
        with pytest.raises(ValueError, match="ml.<family>.<size>"):
            catalog.instance_vcpus(malformed)
    with pytest.raises(KeyError, match="not in the catalog"):
        catalog.get_instance("x9.huge")


def test_catalog_is_complete_sourced_and_packaged():
    families = {it.name.split(".")[0] for it in catalog.load_catalog()}
    assert {
        "g5",
        "g6",
        "g6e",
        "p4d",
        "p4de",
        "p5",
        "p5e",
        "p5en",
        "trn1",
        "trn2",
        "inf2",
    } <= families
    assert {"c7g", "c8g", "m7g", "m8g", "c7i", "m7i"} <= families
    for it in catalog.load_catalog():
        assert catalog.availability(it.name)["ec2"], f"{it.name} unknown to EC2"
        assert {"specs", "price", "peak"} == set(it.sources)
        for src in it.sources.values():
            assert src["url"] and src["date"] and isinstance(src["verified"], bool)
        assert it.peak_tflops > 0 and it.vcpus > 0
    p4d = catalog.get_instance("ml.p4d.24xlarge")
    assert (p4d.accelerator_count, p4d.accelerator_memory_gb, p4d.peak_tflops) == (8, 40, 2496)
    assert (p4d.peak_precision, p4d.devices, p4d.device_memory_bytes) == ("bf16", 8, 40e9)
    assert p4d.sources["peak"]["verified"] is True  # A100 312 TFLOP/s read in stored material
    c7g = catalog.get_instance("c7g.xlarge")  # a CPU row: vCPUs x the fp32 vector peak
    assert (c7g.peak_tflops, c7g.peak_precision, c7g.devices) == (pytest.approx(0.3328), "fp32", 1)
    assert c7g.device_memory_bytes == 8 * 2**30
    assert not all(src["verified"] for src in c7g.sources.values())
    pyproject = (catalog.CATALOG_PATH.parents[3] / "pyproject.toml").read_text()
    package_data = pyproject.split("[tool.setuptools.package-data]")[1].split("[")[1]
    assert '"sizing/*.json"' in package_data  # shipped with the wheel


def test_family_processor_architecture_and_bf16_come_from_the_catalog():
    assert catalog.family_processor("ml.c7g.xlarge") == "Graviton3"
    assert catalog.family_processor("c6gd.2xlarge") == "Graviton2"  # cpu_families, no row
    assert catalog.family_processor("g5.xlarge") == "AMD EPYC 2nd gen"  # the family's row
    assert catalog.family_processor("x9.large") is None
    assert [catalog.architecture(t) for t in ("ml.c8g.xlarge", "c7i.xlarge", "g5.xlarge")] == [
        "arm64",
        "x86_64",
        "x86_64",
    ]
    assert catalog.is_graviton("r8g.large") and not catalog.is_graviton("ml.c7i.xlarge")
    bf16 = {t: catalog.has_bf16(t) for t in ("c6g.xlarge", "c7g.xlarge", "c8g.xlarge", "c7i.large")}
    assert bf16 == {"c6g.xlarge": False, "c7g.xlarge": True, "c8g.xlarge": True, "c7i.large": True}
    assert not catalog.has_bf16("ml.c6i.xlarge") and not catalog.has_bf16("x9.large")


def test_graviton_cpu_parts_and_every_family_names_a_processor():
    assert catalog.processor_by_cpu_part("0xD40") == ("Graviton3", "Neoverse V1")
    assert catalog.processor_by_cpu_part(" 0xd0c") == ("Graviton2", "Neoverse N1")
    assert catalog.processor_by_cpu_part("0xd4f") == ("Graviton4", "Neoverse V2")
    assert catalog.processor_by_cpu_part("0xd08") is None  # Cortex-A72 (e.g. a Raspberry Pi 4)
    data = catalog.data()
    cpus = {k: v for k, v in data["cpus"].items() if k != "note"}
    for family, cpu in data["cpu_families"].items():
        assert family == "note" or cpu in cpus, f"{family}: {cpu} is not a key of cpus"
    for name, cpu in cpus.items():
        assert cpu["source"] in data["sources"] and cpu["peak_fp32_gflops_per_vcpu"] > 0
        assert name.startswith("Graviton") == ("cpu_part" in cpu) == (cpu["arch"] == "arm64")
    with pytest.raises(KeyError):
        catalog.source("no-such-source")


def test_peak_per_processor_generation():
    peaks = {t: catalog.peak_flops(t) for t in ("ml.c6g.xlarge", "ml.c7g.xlarge", "c8g.xlarge")}
    gflops = {t: p["flops"] / 1e9 for t, p in peaks.items()}
    # vector units x fp32 lanes x 2 (FMA) x clock, per vCPU, x 4 vCPUs (graviton-guide table)
    assert gflops["ml.c6g.xlarge"] == pytest.approx(4 * 2 * 4 * 2 * 2.5)
    assert gflops["ml.c7g.xlarge"] == pytest.approx(4 * 4 * 4 * 2 * 2.6)
    assert gflops["c8g.xlarge"] == pytest.approx(4 * 4 * 4 * 2 * 2.8)
    ice_lake = catalog.peak_flops("ml.c6i.xlarge")  # a family without a row: the size rule
    assert ice_lake["flops"] == pytest.approx(4 * 16 * 2 * 3.5e9)  # half a core per vCPU
    assert ice_lake["basis"] == "4 vCPUs x 112 GFLOP/s fp32 (Ice Lake)"
    assert catalog.peak_flops("ml.c7g.4xlarge")["flops"] == 4 * peaks["ml.c7g.xlarge"]["flops"]
    g5 = catalog.peak_flops("g5.xlarge")
    assert (g5["flops"], g5["basis"]) == (70e12, "1 x A10G dense bf16")
    assert catalog.peak_flops("x9.large") is None


def test_memory_of_one_device_row_then_family_rule():
    assert catalog.instance_memory_bytes("p4d.24xlarge") == 40e9  # one A100
    assert catalog.instance_memory_bytes("ml.c7g.xlarge") == 8 * 2**30  # the row's RAM
    assert catalog.instance_memory_bytes("ml.c6i.xlarge") == 4 * 2 * 2**30  # c: 2 GiB per vCPU
    assert catalog.instance_memory_bytes("r7g.2xlarge") == 8 * 8 * 2**30
    assert catalog.instance_memory_bytes("t3.medium") is None


def test_botocore_lists_and_gpu_peaks_have_one_definition():
    assert "c7g.xlarge" in catalog.botocore_instance_types("ec2")
    assert "ml.p4d.24xlarge" in catalog.botocore_instance_types("training")
    assert "ml.c7g.xlarge" in catalog.botocore_instance_types("hosting")
    assert "ml.c7g.xlarge" not in catalog.botocore_instance_types("training")
    assert catalog.availability("ml.c7g.xlarge") == {
        "ec2": True,
        "sagemaker_training": False,
        "sagemaker_hosting": True,
    }
    # MFU's peak (torch device name) and the ranking's peak (instance row) are the same figure
    for device, instance in (
        ("NVIDIA A10G", "g5.xlarge"),
        ("NVIDIA A100-SXM4-40GB", "p4d.24xlarge"),
    ):
        it = catalog.get_instance(instance)
        assert catalog.peak_bf16_flops(device) * it.accelerator_count == it.peak_tflops * 1e12


@pytest.mark.parametrize(
    ("device_name", "tflops"),
    [
        ("NVIDIA A10G", 70),
        ("NVIDIA H100 80GB HBM3", 989.4),
        ("NVIDIA H100 PCIe", 756),  # the longest pattern wins
        ("NVIDIA L40S", 362),
        ("NVIDIA L4", 121),
        ("NVIDIA A100-SXM4-80GB", 312),
        ("NVIDIA H200", 989.4),
        ("Tesla T4", None),
    ],
)
def test_gpu_peak_comes_from_the_catalog(device_name, tflops):
    peak = catalog.peak_bf16_flops(device_name)
    assert peak == (None if tflops is None else pytest.approx(tflops * 1e12))
