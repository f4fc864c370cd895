"""Notebook 03's lifecycle on a real AWS account (opt-in: ``-m aws`` with credentials)."""

import os

import pytest
from support.emulator import NOTHING, deployed

from pt2aws.aws import artifact, session
from pt2aws.aws.session import billable_resources, connect

pytestmark = pytest.mark.aws


TEXTS = ["I love this phone, great battery!", "Terrible service, never again.", "café ☕"]


def test_real_graviton_endpoint_matches_local_predictions(smoke_model_dir, tmp_path):
    role_arn = os.environ.get("PT2AWS_ROLE_ARN")
    if not role_arn:
        pytest.skip("set PT2AWS_ROLE_ARN to a SageMaker execution role ARN")
    aws = connect(region=os.environ.get("AWS_REGION", ""), role_arn=role_arn)
    name = session.resource_name("pt2aws-test")
    archive = artifact.package(smoke_model_dir, tmp_path / "model.tar.gz")
    local = artifact.smoke_test_archive(archive, TEXTS)
    url = f"s3://{session.default_bucket(aws)}/pt2aws-tests/{name}/model.tar.gz"
    artifact.upload_archive(aws, archive, url)
    try:
        with deployed(
            aws, url, name, extra_tags={"purpose": "pt2aws-opt-in-test"}, timeout_s=1800
        ) as d:
            assert (
                "pytorch-inference-arm64" in d.requests["CreateModel"]["PrimaryContainer"]["Image"]
            )
            answer = d.client().predict(TEXTS)
    finally:
        artifact.delete_uploaded(aws, url)
    assert [a["label"] for a in answer] == [p["label"] for p in local]
    # bf16 fast-math GEMMs on Graviton3 (DNNL_DEFAULT_FPMATH_MODE=BF16) move scores slightly
    assert all(abs(a["score"] - p["score"]) < 0.02 for a, p in zip(answer, local))
    assert billable_resources(aws, prefix=name) == NOTHING
