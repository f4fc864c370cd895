"""Tests of :mod:`pt2aws.aws.images`: every image for an instance, checked offline (serving,
training, the DLAMI), and the patch-support dates with their warning."""

from __future__ import annotations

import datetime
import warnings

import pytest

from pt2aws.aws import images
from pt2aws.aws.images import ImageSupportWarning, support
from pt2aws.sizing import catalog

ARM = "pytorch-inference-arm64:2.6.0-cpu-py312-ubuntu22.04-sagemaker"


IMAGE_TABLE = [
    # (region, torch, instance, expected URI)
    *[
        ("us-east-1", "2.6.0", f"ml.{family}.xlarge", f"763104351884.dkr.ecr.us-east-1.amazonaws.com/{ARM}")
        for family in ("c6g", "c6gd", "c6gn", "c7g", "c8g", "m6g", "m6gd", "m8g", "r6g", "r6gd", "r8g")
    ],
    ("us-east-1", "2.6.0", "ml.r7gd.2xlarge", f"763104351884.dkr.ecr.us-east-1.amazonaws.com/{ARM}"),
    ("eu-west-1", "2.6.0", "ml.m5.xlarge", "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"),
    ("eu-west-1", "2.6.0", "ml.c6i.xlarge", "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"),
    # a version the SDK does not know for Graviton: the arm64 repository from the DLC table
    ("eu-west-1", "2.5.1", "ml.c7g.xlarge", "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-inference-arm64:2.5.1-cpu-py311-ubuntu22.04-sagemaker"),
    ("ap-south-2", "2.5.1", "ml.c8g.xlarge", "772153158452.dkr.ecr.ap-south-2.amazonaws.com/pytorch-inference-arm64:2.5.1-cpu-py311-ubuntu22.04-sagemaker"),
    # older versions: the -graviton repository, also forced for Graviton4 (the SDK says x86)
    ("us-west-2", "2.4.0", "ml.c8g.xlarge", "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-inference-graviton:2.4.0-cpu-py311-ubuntu22.04-sagemaker"),
    ("af-south-1", "2.6.0", "ml.c7g.xlarge", f"626614931356.dkr.ecr.af-south-1.amazonaws.com/{ARM}"),
]  # fmt: skip


@pytest.mark.parametrize(("region", "torch_version", "instance", "expected"), IMAGE_TABLE)
def test_inference_image_uri_table(region, torch_version, instance, expected):
    assert images.inference_image_uri(region, torch_version, instance) == expected


def test_every_graviton_family_sagemaker_hosts_is_in_the_table():
    hosted = {catalog.instance_family(t) for t in catalog.botocore_instance_types("hosting")}
    graviton = {f for f in hosted if catalog.is_graviton(f"ml.{f}.xlarge")}
    assert len(graviton) >= 11 and graviton <= {
        catalog.instance_family(i) for _, _, i, _ in IMAGE_TABLE
    }


def test_fallback_matches_the_sdk_where_the_sdk_knows(monkeypatch):
    """Drop 2.6.0 from the SDK: the DLC table must produce the URI the SDK would have."""
    from sagemaker.core import image_uris

    expected = images.inference_image_uri("eu-central-2", "2.6.0", "ml.c7g.xlarge")

    def sdk_without_26(framework, region, version=None, **kwargs):
        raise ValueError(f"Unsupported pytorch version: {version}")

    monkeypatch.setattr(image_uris, "retrieve", sdk_without_26)
    assert images.inference_image_uri("eu-central-2", "2.6.0", "ml.c7g.xlarge") == expected


def test_region_table_agrees_with_the_sdk_registries():
    from sagemaker.core import image_uris

    sdk = image_uris.config_for_framework("pytorch")["inference_graviton"]["versions"]["2.6.0"]
    common = set(sdk["registries"]) & set(images.DLC_REGISTRY_ACCOUNTS)
    assert len(common) >= 30
    assert {r: images.DLC_REGISTRY_ACCOUNTS[r] for r in common} == {
        r: sdk["registries"][r] for r in common
    }
    assert images.DLC_REGISTRY_ACCOUNTS["us-east-1"] == "763104351884"
    assert images.DLC_REGISTRY_ACCOUNTS["me-south-1"] == "217643126080"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            ("us-east-1", "2.13.0", "ml.c7g.xlarge"),
            {},
            r"torch 2\.13\.0 on ml\.c7g\.xlarge \(family c7g, arm64\); supported: 2\.0\.1.*2\.6\.0",
        ),
        (
            ("us-east-1", "2.13.0", "ml.m5.xlarge"),
            {},
            r"x86 .*family m5, x86_64\); supported: .*2\.6\.0",
        ),
        (("mars-1", "2.6.0", "ml.c7g.xlarge"), {}, "no Deep Learning Containers registry.*mars-1"),
        (("us-east-1", "2.6.0", "ml.c99g.xlarge"), {}, "not a SageMaker real-time hosting"),
        (("us-east-1", "2.6.0", "ml.c7g.3xlarge"), {}, "sizes of c7g: .*ml.c7g.4xlarge"),
    ],
)
def test_image_errors_name_family_arch_and_versions(args, kwargs, message, monkeypatch):
    import botocore.client

    def no_aws(*a, **k):  # any AWS call would fail the test
        raise AssertionError("an AWS call was made")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", no_aws)
    with pytest.raises(images.ImageSelectionError, match=message):
        images.inference_image_uri(*args, **kwargs)


@pytest.mark.parametrize(
    ("image", "instance", "message"),
    [
        (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312",
            "ml.c8g.xlarge",
            r"is x86_64 but ml\.c8g\.xlarge \(family c8g\) is arm64",
        ),
        (
            f"763104351884.dkr.ecr.us-east-1.amazonaws.com/{ARM}",
            "ml.m5.xlarge",
            r"is arm64 but ml\.m5\.xlarge \(family m5\) is x86_64",
        ),
        (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-inference:2.6.0-"
            "transformers4.51.3-cpu-py312-ubuntu22.04",
            "ml.c7g.xlarge",
            "Hugging Face DLC, which has no arm64 build",
        ),
    ],
)
def test_explicit_image_mismatch_is_refused(image, instance, message):
    with pytest.raises(images.ImageSelectionError, match=message):
        images.check_image_matches_instance(image, instance)


def test_custom_image_uri_is_checked():
    uri = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/pt2aws-serve:2026.12-arm64"
    assert images.check_custom_image_uri(uri, "eu-west-1") == {
        "account": "123456789012",
        "region": "eu-west-1",
        "repository": "team/pt2aws-serve",
        "tag": "2026.12-arm64",
    }
    for bad in (
        "pt2aws-serve:latest",  # Docker Hub
        "public.ecr.aws/team/pt2aws-serve:1",  # ECR Public: hosting pulls private ECR only
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/pt2aws-serve",  # no tag
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/PT2AWS:1",  # upper case
        "1234.dkr.ecr.eu-west-1.amazonaws.com/pt2aws:1",  # account
    ):
        with pytest.raises(images.ImageSelectionError, match="not a private ECR image URI"):
            images.check_custom_image_uri(bad)
    with pytest.raises(images.ImageSelectionError, match="is in eu-west-1 but the endpoint"):
        images.check_custom_image_uri(uri, "us-east-1")


DEC_2026 = datetime.date(2026, 12, 1)


def test_the_arm64_inference_dlc_is_past_and_has_no_successor():
    found = support("pytorch-inference-arm64", "2.6.0", today=DEC_2026)
    assert (found["end_of_patch"], found["past"], found["verified"]) == ("2026-06-30", True, True)
    assert not support("pytorch-inference-arm64", "2.6", today=datetime.date(2026, 6, 30))["past"]
    message = found["message"]
    assert message.startswith("pytorch-inference-arm64 2.6: patch support ended 2026-06-30, 154")
    assert "no newer PyTorch CPU inference DLC" in message and "image='custom'" in message
    with pytest.warns(ImageSupportWarning, match="arm64 2.6: patch support ended 2026-06-30"):
        uri = images.inference_image_uri("us-east-1")
    assert uri.endswith("/pytorch-inference-arm64:2.6.0-cpu-py312-ubuntu22.04-sagemaker")
    shown = images.serving_image("dlc", "us-east-1", "ml.c7g.xlarge")["support"]
    assert shown["end_of_patch"] == "2026-06-30" and shown["past"] is True
    assert shown["verified"] is True


def test_training_lines_name_the_newer_one():
    old = support("pytorch-training", "2.8.0", today=DEC_2026)
    assert old["past"]
    assert old["message"].endswith("; use pytorch-training 2.10 (patched until 2027-01-21)")
    # once the old line has ended entirely, its successor, the unified 'pytorch' DLC
    later = support("pytorch-training", "2.8.0", today=datetime.date(2027, 2, 1))
    assert later["message"].endswith("; use pytorch 2.13 (patched until 2027-07-20)")
    current = support("pytorch", "2.13", today=DEC_2026)
    assert not current["past"]
    assert current["message"] == "pytorch 2.13: patched until 2027-07-20 (231 days left)"
    with pytest.warns(ImageSupportWarning, match="pytorch-training 2.8: patch support ended"):
        images.training_image_uri("ml.p5.48xlarge", "us-east-1", "2.8.0")


def test_dlami_dates_are_marked_unverified_and_name_the_newer_one():
    old = support("DLAMI PyTorch", "2.9", today=DEC_2026)
    assert old["past"] and old["verified"] is False
    assert old["message"].endswith("; use DLAMI PyTorch 2.13 (patched until 2027-07-20)")
    assert "(UNVERIFIED date)" in old["message"]
    with pytest.warns(ImageSupportWarning, match="DLAMI PyTorch 2.9: patch support ended"):
        images.dlami_parameter("g5.xlarge", "2.9")
    with pytest.raises(KeyError, match="1.0"):
        support("DLAMI PyTorch", "1.0")


def test_every_image_in_the_tables_has_support_dates():
    facts = images.FACTS
    for version in images.ARM64_INFERENCE_IMAGES:
        repository = images.ARM64_INFERENCE_IMAGES[version]["repository"]
        assert support(repository, version)["end_of_patch"] >= "2024"
    for version, image in facts["training"]["ec2"]["versions"].items():
        assert support(image["repository"], version)
    for line in facts["support"]["lines"].values():
        for ga, eop in line.values():
            assert (ga or "2000-01-01") < eop and datetime.date.fromisoformat(eop)
    assert support("DLAMI PyTorch", images.DLAMI_PYTORCH_VERSION)


def test_ec2_training_image():
    registry = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
    assert images.training_image_for("p4d.24xlarge", "us-east-1") == (
        f"{registry}/pytorch:2.13.0-cu133-amzn2023",
        True,
    )
    assert images.training_image_for("c5.xlarge", "us-east-1") == (
        f"{registry}/pytorch:2.13.0-cpu-amzn2023",
        False,
    )
    assert images.training_image_for("g5.xlarge", "us-east-1", "2.10")[0] == (
        f"{registry}/pytorch-training:2.10.0-gpu-py313-cu130-ubuntu22.04-ec2"
    )
    with pytest.warns(ImageSupportWarning, match="pytorch-training 2.9: patch support ended"):
        images.training_image_for("g5.xlarge", "us-east-1", "2.9")
    with pytest.raises(images.TrainingImageError, match="known: 2.13"):
        images.training_image_for("g5.xlarge", "us-east-1", "3.0")
    with pytest.raises(images.TrainingImageError, match="no arm64 CPU training DLC"):
        images.training_image_for("c7g.xlarge", "us-east-1")


@pytest.mark.parametrize(
    ("instance_type", "version", "expected"),
    [
        ("ml.p4d.24xlarge", "2.10.0", "pytorch-training:2.10.0-gpu-py313"),
        ("ml.p5.48xlarge", "2.8.0", "pytorch-training:2.8.0-gpu-py312"),
        ("ml.g5.xlarge", "2.6", "pytorch-training:2.6.0-gpu-py312"),
        ("ml.c5.2xlarge", "2.8.0", "pytorch-training:2.8.0-cpu-py312"),
    ],
)
def test_training_image_for_instance_and_version(instance_type, version, expected):
    uri = images.training_image_uri(instance_type, "us-east-1", version)
    assert uri == f"763104351884.dkr.ecr.us-east-1.amazonaws.com/{expected}"


@pytest.mark.parametrize(
    ("instance_type", "version", "match"),
    [
        ("ml.trn1.32xlarge", "2.8.0", "Trainium"),
        ("ml.p4d.xlarge", "2.8.0", "not a SageMaker training instance type"),
        ("p4d.24xlarge", "2.8.0", "ml.<family>.<size>"),
        ("ml.p5.48xlarge", "1.99.0", "no SageMaker PyTorch training image for version '1.99.0'"),
    ],
)
def test_training_image_rejects_unknown_combinations(instance_type, version, match):
    with pytest.raises(images.TrainingImageError, match=match):
        images.training_image_uri(instance_type, "us-east-1", version)


def test_gpu_families_agree_with_the_catalog_and_botocore():
    from pt2aws.sizing import catalog

    training_families = {
        catalog.instance_family(t) for t in catalog.botocore_instance_types("training")
    }
    assert set(images.GPU_TRAINING_FAMILIES) <= training_families
    assert set(images.NEURON_TRAINING_FAMILIES) <= training_families
    for it in catalog.load_catalog():
        if catalog.availability(it.name)["sagemaker_training"]:
            gpu = catalog.instance_family(it.name) in images.GPU_TRAINING_FAMILIES
            assert gpu == (it.kind == "gpu"), it.name


CUSTOM = "123456789012.dkr.ecr.us-east-1.amazonaws.com/pt2aws-serve:2026.12"


def test_the_serving_image_is_checked_before_any_aws_call():
    region = "us-east-1"
    with pytest.raises(images.ImageSelectionError, match="network isolation needs IMAGE='custom'"):
        images.serving_image("dlc", region, "ml.c7g.xlarge", network_isolation=True)
    with pytest.raises(images.ImageSelectionError, match="image must be one of"):
        images.serving_image("ubuntu", region, "ml.c7g.xlarge")
    with pytest.raises(images.ImageSelectionError, match="not a private ECR image URI"):
        images.serving_image("custom", region, "ml.c7g.xlarge")
    with pytest.raises(images.ImageSelectionError, match="is in us-east-1 but the endpoint"):
        images.serving_image("custom", "eu-west-1", "ml.c7g.xlarge", image_uri=CUSTOM)
    x86 = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"
    with pytest.raises(images.ImageSelectionError, match="x86_64 but ml.c7g.xlarge"):
        images.serving_image("dlc", region, "ml.c7g.xlarge", image_uri=x86)
    with pytest.raises(images.ImageSelectionError, match="not a SageMaker real-time hosting"):
        images.serving_image("dlc", region, "ml.c99g.xlarge")
    custom = images.serving_image("custom", region, "ml.c7g.xlarge", image_uri=CUSTOM)
    assert custom["image_uri"] == CUSTOM and custom["support"]["message"].startswith("your own")


def test_a_past_dlc_is_reported_once_in_the_answer_not_also_as_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chosen = images.serving_image("dlc", "us-east-1", "ml.c7g.xlarge", torch_version="2.6.0")
    message = chosen["support"]["message"]
    assert "pytorch-inference-arm64 2.6: patch support ended 2026-06-30" in message
    assert [w for w in caught if "patch support" in str(w.message)] == []
