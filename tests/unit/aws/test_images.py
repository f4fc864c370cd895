"""Tests of :mod:`pt2aws.aws.images`: the inference image for an instance, checked offline."""

from __future__ import annotations

import pytest

from pt2aws.aws import images
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


def test_every_graviton_family_is_in_the_table():
    families = {catalog.instance_family(i) for _, _, i, _ in IMAGE_TABLE}
    assert set(images.hosting_graviton_families()) <= families


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
        (
            ("us-east-1", "2.6.0", "ml.c7g.xlarge"),
            {"framework": "huggingface"},
            r"Hugging Face DLCs have no arm64 image.*family c7g.*arm64.*supported versions: 2\.0\.1",
        ),
        (("us-east-1", "ml.c7g.xlarge", "2.6.0"), {}, "looks like an instance type"),
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
