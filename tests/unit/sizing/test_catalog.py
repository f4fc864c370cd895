"""Tests of :mod:`pt2aws.sizing.catalog`: the instance, accelerator and price facts."""

from __future__ import annotations

import json

import pytest

from pt2aws.sizing import catalog


def test_instance_vcpus_and_bad_types():
    assert catalog.instance_vcpus("ml.c7g.medium") == 1
    assert catalog.instance_vcpus("ml.t2.medium") == 2
    assert catalog.instance_vcpus("ml.c7g.16xlarge") == 64
    assert catalog.instance_vcpus("c7g.xlarge") == 4  # the EC2 name works too
    for malformed in ("c7g", "ml.c7g", "ml.c7g.xlarge.extra", "ml..xlarge"):
        with pytest.raises(ValueError, match="ml.<family>.<size>"):
            catalog.is_graviton(malformed)
    with pytest.raises(ValueError, match="pass vcpus= explicitly"):
        catalog.instance_vcpus("ml.c7g.metal")


def test_catalog_is_complete_sourced_and_packaged():
    names = {i.name for i in catalog.load_catalog()}
    families = {n.split(".")[0] for n in names}
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
        for src in it.sources.values():
            assert src["url"] and src["date"] and isinstance(src["verified"], bool)
        assert it.peak_bf16_tflops > 0 and it.vcpus > 0
    p4d = catalog.get_instance("ml.p4d.24xlarge")
    assert (p4d.accelerator_count, p4d.accelerator_memory_gb, p4d.peak_bf16_tflops) == (8, 40, 2496)
    assert p4d.sources["peak"]["verified"] is True  # A100 312 TFLOP/s read in stored material
    pyproject = (catalog.CATALOG_PATH.parents[3] / "pyproject.toml").read_text()
    package_data = pyproject.split("[tool.setuptools.package-data]")[1].split("[")[1]
    assert '"sizing/*.json"' in package_data  # shipped with the wheel


def test_family_processor_generation_and_bf16_come_from_the_catalog():
    assert catalog.family_processor("ml.c7g.xlarge") == "Graviton3"
    assert catalog.family_processor("c6gd.2xlarge") == "Graviton2"  # cpu_families, no row
    assert catalog.family_processor("g5.xlarge") == "AMD EPYC 2nd gen"  # the family's row
    assert catalog.family_processor("x9.large") is None
    with pytest.raises(ValueError, match="ml.<family>.<size>"):
        catalog.family_processor("c7g")
    gens = {t: catalog.graviton_generation(t) for t in ("ml.c6g.large", "c7g.xlarge", "r8g.large")}
    assert gens == {"ml.c6g.large": 2, "c7g.xlarge": 3, "r8g.large": 4}
    assert catalog.graviton_generation("ml.c7i.xlarge") is None
    assert [catalog.architecture(t) for t in ("ml.c8g.xlarge", "c7i.xlarge", "g5.xlarge")] == [
        "arm64",
        "x86_64",
        "x86_64",
    ]
    bf16 = {t: catalog.has_bf16(t) for t in ("c6g.xlarge", "c7g.xlarge", "c8g.xlarge", "c7i.large")}
    assert bf16 == {"c6g.xlarge": False, "c7g.xlarge": True, "c8g.xlarge": True, "c7i.large": True}
    assert not catalog.has_bf16("ml.c6i.xlarge") and not catalog.has_bf16("x9.large")


def test_instance_vcpus_row_then_size_rule():
    assert catalog.instance_vcpus("ml.p4d.24xlarge") == 96  # the catalog row
    assert catalog.instance_vcpus("ml.c6i.2xlarge") == 8  # rule: xlarge 4, each step doubles
    assert catalog.instance_vcpus("r7g.16xlarge") == 64
    assert catalog.instance_vcpus("ml.c7g.medium") == 1  # a Graviton medium is one core
    assert catalog.instance_vcpus("t3.medium") == 2  # x86 burstable
    with pytest.raises(ValueError, match="unknown size 'metal'.*pass vcpus="):
        catalog.instance_vcpus("c7g.metal")


def test_graviton_cpu_parts_and_catalog_consistency():
    assert catalog.processor_by_cpu_part("0xD40") == ("Graviton3", "Neoverse V1")
    assert catalog.processor_by_cpu_part(" 0xd0c") == ("Graviton2", "Neoverse N1")
    assert catalog.processor_by_cpu_part("0xd4f") == ("Graviton4", "Neoverse V2")
    assert catalog.processor_by_cpu_part("0xd08") is None  # Cortex-A72 (e.g. a Raspberry Pi 4)
    data = json.loads(catalog.CATALOG_PATH.read_text())
    cpus = {k: v for k, v in data["cpus"].items() if k != "note"}
    for family, cpu in data["cpu_families"].items():
        assert family == "note" or cpu in cpus, f"{family}: {cpu} is not a key of cpus"
    for name, cpu in cpus.items():
        assert cpu["source"] in data["sources"]
        assert name.startswith("Graviton") == ("cpu_part" in cpu) == (cpu["arch"] == "arm64")
    with pytest.raises(catalog.CatalogError, match="unknown source id"):
        catalog.source("no-such-source")


def test_hosting_prices_are_sagemaker_types_with_a_dated_unverified_source():
    prices = catalog.hosting_prices()
    assert {"ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge"} <= set(prices)
    c7g = catalog.hosting_price("c7g.xlarge")
    assert c7g == catalog.hosting_price("ml.c7g.xlarge") == prices["ml.c7g.xlarge"]
    assert (c7g.usd_per_hour, c7g.processor, c7g.verified) == (0.1734, "Graviton3", False)
    assert c7g.source["id"] == "sagemaker-hosting-pricing" and c7g.source["date"] == "2026-11-30"
    # SageMaker hosting costs more than EC2 for the same hardware (0.1734 vs 0.145 USD/h)
    assert c7g.usd_per_hour > catalog.get_instance("c7g.xlarge").price_usd_per_hour
    assert catalog.hosting_price("ml.c5.9xlarge") is None
    hosting = catalog.botocore_instance_types("hosting")
    for name, price in prices.items():
        assert name in hosting and price.processor and price.source["url"]


def test_botocore_lists_and_gpu_peaks_have_one_definition():
    assert "c7g.xlarge" in catalog.botocore_instance_types("ec2")
    assert "ml.p4d.24xlarge" in catalog.botocore_instance_types("training")
    assert "ml.c7g.xlarge" in catalog.botocore_instance_types("hosting")
    assert "ml.c7g.xlarge" not in catalog.botocore_instance_types("training")
    with pytest.raises(ValueError, match="choose one of ec2, training, hosting"):
        catalog.botocore_instance_types("lambda")
    # MFU's peak (torch device name) and the ranking's peak (instance row) are the same figure
    for device, instance in (
        ("NVIDIA A10G", "g5.xlarge"),
        ("NVIDIA A100-SXM4-40GB", "p4d.24xlarge"),
    ):
        it = catalog.get_instance(instance)
        assert catalog.peak_bf16_flops(device) * it.accelerator_count == it.peak_bf16_tflops * 1e12
    assert catalog.peak_bf16_flops("NVIDIA A100-SXM4-80GB") == 312e12  # longest pattern wins


@pytest.mark.parametrize(
    ("device_name", "tflops"),
    [
        ("NVIDIA A10G", 70),
        ("NVIDIA H100 80GB HBM3", 989.4),
        ("NVIDIA H100 PCIe", 756),
        ("NVIDIA L40S", 362),
        ("NVIDIA L4", 121),
        ("NVIDIA A100-SXM4-40GB", 312),
        ("NVIDIA H200", 989.4),
        ("Tesla T4", None),
    ],
)
def test_gpu_peak_comes_from_the_catalog(device_name, tflops):
    from pt2aws.sizing.catalog import peak_bf16_flops

    peak = peak_bf16_flops(device_name)
    assert peak == (None if tflops is None else pytest.approx(tflops * 1e12))


def test_every_ec2_price_names_a_dated_source_and_the_corrections_hold():
    data = json.loads(catalog.CATALOG_PATH.read_text())
    for row in data["instances"]:
        src = catalog.source(row["sources"]["price"])
        assert src["date"] and src["url"], row["name"]
        assert src["id"] != "aws-ec2-pricing" or not src["verified"]
        for region, usd in row.get("regional_prices", {}).items():
            assert region != "us-east-1" and usd > 0 and src["verified"], row["name"]
    p5en = catalog.ec2_price("p5en.48xlarge")
    assert (p5en.usd_per_hour, p5en.source["id"], p5en.source["date"]) == (
        63.296,
        "dstack-2026",
        "2026-08-06",
    )
    assert catalog.ec2_price("p4d.24xlarge").usd_per_hour == 21.957642  # AWS offer file
    assert catalog.ec2_price("trn2.48xlarge") is None  # no on-demand product: verified absence
    assert catalog.get_instance("trn2.48xlarge").sources["price"]["verified"] is True
    assert catalog.ec2_price("p5e.48xlarge") is None


def test_verified_and_unverified_counts():
    counts = catalog.price_source_counts()
    assert counts["ec2"] == {"verified": 20, "unverified": 6}
    unverified = {
        r["name"]
        for r in json.loads(catalog.CATALOG_PATH.read_text())["instances"]
        if not catalog.source(r["sources"]["price"])["verified"]
    }
    assert unverified == {
        "g6e.xlarge",
        "p4de.24xlarge",
        "p5e.48xlarge",
        "c8g.xlarge",
        "c8g.4xlarge",
        "m8g.xlarge",
    }
    assert counts["hosting"]["verified"] == counts["training"]["verified"] == 0


def test_regional_prices_and_the_us_east_1_fallback_say_which_region():
    eu = catalog.ec2_price("p4d.24xlarge", "eu-west-1")
    assert (eu.usd_per_hour, eu.region, eu.region_note) == (23.71569, "eu-west-1", "")
    assert "eu-west-1" in eu.describe() and "verified" in eu.describe()
    fallback = catalog.ec2_price("c7g.xlarge", "eu-west-1")
    assert (fallback.usd_per_hour, fallback.region, fallback.asked_region) == (
        0.145,
        "us-east-1",
        "eu-west-1",
    )
    assert fallback.region_note == "us-east-1 price: the catalog has no figure for eu-west-1"
    hosting = catalog.price("ml.c7g.xlarge", region="ap-south-1")
    assert (hosting.use, hosting.usd_per_hour, hosting.region) == ("hosting", 0.1734, "us-east-1")
    assert "ap-south-1" in hosting.region_note and "UNVERIFIED" in hosting.describe()
    assert catalog.price("c7g.xlarge").use == "ec2"
    assert catalog.price("ml.p4d.24xlarge", "training").usd_per_hour == 37.688
    with pytest.raises(ValueError, match="choose one of ec2, hosting, training"):
        catalog.price("c7g.xlarge", "spot")


def test_serving_peak_per_processor_generation():
    peaks = {
        t: catalog.serving_peak(t)
        for t in ("ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge", "g5.xlarge")
    }
    gflops = {t: p["flops"] / 1e9 for t, p in peaks.items()}
    # vector units x fp32 lanes x 2 (FMA) x clock, per vCPU, x 4 vCPUs (graviton-guide table)
    assert gflops["ml.c6g.xlarge"] == pytest.approx(4 * 2 * 4 * 2 * 2.5)
    assert gflops["ml.c7g.xlarge"] == pytest.approx(4 * 4 * 4 * 2 * 2.6)
    assert gflops["ml.c8g.xlarge"] == pytest.approx(4 * 4 * 4 * 2 * 2.8)
    assert gflops["ml.c6i.xlarge"] == pytest.approx(4 * 16 * 2 * 3.5)  # half a core per vCPU
    assert peaks["g5.xlarge"]["precision"] == "bf16" and gflops["g5.xlarge"] == 70_000
    assert {p["precision"] for t, p in peaks.items() if t.startswith("ml.")} == {"fp32"}
    assert catalog.serving_peak("ml.c7g.4xlarge")["flops"] == 4 * peaks["ml.c7g.xlarge"]["flops"]
    assert catalog.serving_peak("x9.large") is None
    assert catalog.source("graviton-guide")["verified"] is True
    assert peaks["ml.c7g.xlarge"]["source"]["id"] == "derived-cpu-fp32-peak"
