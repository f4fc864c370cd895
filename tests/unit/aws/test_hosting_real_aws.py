"""The endpoint lifecycle on a real AWS account (opt-in: ``-m aws`` with credentials)."""

import os

import pytest

from pt2aws.aws import artifact, hosting, session
from pt2aws.aws.session import boto_session, list_sagemaker_resources, list_scalable_targets

pytestmark = pytest.mark.aws


TEXTS = ["I love this phone, great battery!", "Terrible service, never again.", "café ☕"]


def test_real_graviton_endpoint_matches_local_predictions(smoke_model_dir, tmp_path):
    role_arn = os.environ.get("PT2AWS_ROLE_ARN")
    if not role_arn:
        pytest.skip("set PT2AWS_ROLE_ARN to a SageMaker execution role ARN")
    region = os.environ.get("AWS_REGION") or boto_session().region_name
    name = session.resource_name("pt2aws-test")
    archive = artifact.package(smoke_model_dir, tmp_path / "model.tar.gz")
    local = artifact.smoke_test_archive(archive, TEXTS)
    bucket = session.default_bucket(region)
    key = f"pt2aws-tests/{name}/model.tar.gz"
    url = artifact.upload_archive(archive, bucket, key, region)
    try:
        with hosting.deployed_endpoint(
            url,
            role_arn=role_arn,
            region=region,
            instance_type="ml.c7g.xlarge",
            name=name,
            wait_timeout_s=1800,
            progress=True,
            tags={"purpose": "pt2aws-opt-in-test"},
        ) as deployed:
            assert "pytorch-inference-arm64" in deployed.image_uri
            answer = deployed.predict(TEXTS)
    finally:
        boto_session(region).client("s3").delete_object(Bucket=bucket, Key=key)
    assert [a["label"] for a in answer] == [p["label"] for p in local]
    # bf16 fast-math GEMMs on Graviton3 (DNNL_DEFAULT_FPMATH_MODE=BF16) move scores slightly
    assert all(abs(a["score"] - p["score"]) < 0.02 for a, p in zip(answer, local))
    left = list_sagemaker_resources(prefix=name, region=region)
    assert left == {"endpoints": [], "endpoint_configs": [], "models": []}
    assert list_scalable_targets(prefix=name, region=region) == []
