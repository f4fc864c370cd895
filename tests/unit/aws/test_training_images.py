"""Tests of :mod:`pt2aws.aws.training_images`: the SageMaker / EC2 training DLC and the DLAMI."""

from __future__ import annotations

import pytest

from pt2aws.aws import training_images
from pt2aws.aws.image_support import ImageSupportWarning


def test_ec2_training_image():
    registry = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
    assert training_images.ec2_training_image_uri("us-east-1") == (
        f"{registry}/pytorch:2.13.0-cu133-amzn2023"
    )
    assert training_images.ec2_training_image_uri("us-east-1", gpu=False) == (
        f"{registry}/pytorch:2.13.0-cpu-amzn2023"
    )
    assert training_images.ec2_training_image_uri("us-east-1", "2.10") == (
        f"{registry}/pytorch-training:2.10.0-gpu-py313-cu130-ubuntu22.04-ec2"
    )
    with pytest.warns(ImageSupportWarning, match="pytorch-training 2.9: patch support ended"):
        training_images.ec2_training_image_uri("us-east-1", "2.9")
    with pytest.raises(training_images.TrainingImageError, match="known: 2.13"):
        training_images.ec2_training_image_uri("us-east-1", "3.0")


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
    uri = training_images.training_image_uri(instance_type, "us-east-1", version)
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
    with pytest.raises(training_images.TrainingImageError, match=match):
        training_images.training_image_uri(instance_type, "us-east-1", version)


def test_gpu_families_agree_with_the_catalog_and_botocore():
    from pt2aws.sizing import catalog

    training_families = {
        catalog.instance_family(t) for t in catalog.botocore_instance_types("training")
    }
    assert set(training_images.GPU_TRAINING_FAMILIES) <= training_families
    assert set(training_images.NEURON_TRAINING_FAMILIES) <= training_families
    for it in catalog.load_catalog():
        if catalog.availability(it.name)["sagemaker_training"]:
            assert training_images.is_gpu_instance(it.name) == (it.kind == "gpu"), it.name
