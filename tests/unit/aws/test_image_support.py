"""Patch-support end dates of every DLC and DLAMI, the warning past them, EC2 and custom images."""

from __future__ import annotations

import datetime

import pytest

from pt2aws.aws import image_support, images, training_images
from pt2aws.aws.image_support import ImageSupportWarning, dlami_support, dlc_support

DEC_2026 = datetime.date(2026, 12, 1)


def test_the_arm64_inference_dlc_is_past_and_has_no_successor():
    support = dlc_support("pytorch-inference-arm64", "2.6.0", today=DEC_2026)
    assert support.end_of_patch == datetime.date(2026, 6, 30)
    assert support.past(DEC_2026) and not support.past(datetime.date(2026, 6, 30))
    message = support.describe(DEC_2026)
    assert message.startswith("pytorch-inference-arm64 2.6: patch support ended 2026-06-30, 154")
    assert "no newer PyTorch CPU inference DLC" in message and "image='custom'" in message
    with pytest.warns(ImageSupportWarning, match="arm64 2.6: patch support ended 2026-06-30"):
        uri = images.inference_image_uri("us-east-1")
    assert uri.endswith("/pytorch-inference-arm64:2.6.0-cpu-py312-ubuntu22.04-sagemaker")
    shown = images.inference_image_support("us-east-1")
    assert shown["end_of_patch"] == "2026-06-30" and shown["past"] is True
    assert shown["verified"] is True


def test_training_lines_name_the_newer_one():
    old = dlc_support("pytorch-training", "2.8.0", today=DEC_2026)
    assert old.past(DEC_2026)
    assert old.newer == "use pytorch-training 2.10 (patched until 2027-01-21)"
    # once the old line has ended entirely, its successor, the unified 'pytorch' DLC
    later = dlc_support("pytorch-training", "2.8.0", today=datetime.date(2027, 2, 1))
    assert later.newer == "use pytorch 2.13 (patched until 2027-07-20)"
    current = dlc_support("pytorch", "2.13", today=DEC_2026)
    assert not current.past(DEC_2026)
    assert current.describe(DEC_2026) == "pytorch 2.13: patched until 2027-07-20 (231 days left)"
    with pytest.warns(ImageSupportWarning, match="pytorch-training 2.8: patch support ended"):
        training_images.training_image_uri("ml.p5.48xlarge", "us-east-1", "2.8.0")


def test_dlami_dates_are_marked_unverified_and_name_the_newer_one():
    old = dlami_support("2.9", today=DEC_2026)
    assert old.past(DEC_2026) and old.newer == "use the DLAMI for PyTorch 2.13"
    assert "(UNVERIFIED date)" in old.describe(DEC_2026)
    with pytest.warns(ImageSupportWarning, match="DLAMI PyTorch 2.9: patch support ended"):
        training_images.dlami_parameter("g5.xlarge", "2.9")
    with pytest.raises(KeyError, match="known"):
        dlami_support("1.0")


def test_every_image_in_the_tables_has_support_dates():
    facts = image_support.image_facts()
    for version in images.ARM64_INFERENCE_IMAGES:
        repository = images.ARM64_INFERENCE_IMAGES[version]["repository"]
        assert dlc_support(repository, version).end_of_patch.year >= 2024
    for version, image in facts["training"]["ec2"]["versions"].items():
        assert dlc_support(image["repository"], version)
    for line in facts["support"]["lines"].values():
        for ga, eop in line.values():
            assert datetime.date.fromisoformat(ga) < datetime.date.fromisoformat(eop)
    assert set(facts["dlami"]["pytorch_versions"]["versions"]) >= {
        training_images.DLAMI_PYTORCH_VERSION
    }
