"""Tests of :mod:`pt2aws.aws.hosting`: the endpoint lifecycle over HTTP against the AWS emulator.

``InvokeEndpoint`` is forwarded to a tiny stub model server of our own (127.0.0.1, free port),
so the tests see real request bodies (``tests/unit/aws/conftest.py``)."""

import json

import pytest
from botocore.exceptions import ClientError
from support.emulator import NOTHING, deploy_on_emulator

from pt2aws.aws import hosting, images, session
from pt2aws.emulator import patches as moto_patches
from pt2aws.emulator.server import EMULATOR_ROLE_ARN
from pt2aws.sizing import catalog


def test_deploy_invoke_and_cleanup(emulator, model_url, stub):
    stub.requests.clear()
    with deploy_on_emulator(emulator, model_url, "pt2aws-t1", tags={"owner": "tests"}) as d:
        sm = emulator.session().client("sagemaker")
        assert sm.describe_endpoint(EndpointName="pt2aws-t1")["EndpointStatus"] == "InService"
        config = sm.describe_endpoint_config(EndpointConfigName="pt2aws-t1")
        assert config["ProductionVariants"][0]["InstanceType"] == "ml.c7g.xlarge"
        container = sm.describe_model(ModelName="pt2aws-t1")["PrimaryContainer"]
        assert container["Image"] == (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/"
            "pytorch-inference-arm64:2.6.0-cpu-py312-ubuntu22.04-sagemaker"
        )
        assert container["Environment"]["SAGEMAKER_MODEL_SERVER_WORKERS"] == "4"
        assert container["Environment"]["DNNL_DEFAULT_FPMATH_MODE"] == "BF16"
        arn = sm.describe_endpoint(EndpointName="pt2aws-t1")["EndpointArn"]
        tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
        assert tags["project"] == "pt2aws" and tags["owner"] == "tests"
        assert tags["pt2aws:created-at"].startswith("20")
        assert json.loads(d.invoke('{"inputs": ["x"]}')) == [{"label": "x", "score": 1.0}]
    assert stub.requests == [("application/json", b'{"inputs": ["x"]}')]
    assert sorted(k for k, _ in d.deleted) == ["endpoint", "endpoint_config", "model"]
    assert session.billable_resources(emulator.session()) == NOTHING


def test_invoking_a_deleted_endpoint_fails_like_aws(emulator, model_url):
    with deploy_on_emulator(emulator, model_url, "pt2aws-gone") as d:
        pass
    with pytest.raises(ClientError, match="Endpoint pt2aws-gone .*not found"):
        d.predict(["x"])


def test_model_server_error_becomes_model_error(emulator, model_url):
    with deploy_on_emulator(emulator, model_url, "pt2aws-415") as d:
        with pytest.raises(ClientError) as info:
            d.client().invoke_raw(b"a,b", content_type="text/x-unknown")
    assert info.value.response["Error"]["Code"] == "ModelError"
    assert "Received client error (415)" in info.value.response["Error"]["Message"]
    assert session.billable_resources(emulator.session()) == NOTHING


def test_invoke_failure_still_cleans_up(emulator, model_url):
    with pytest.raises(ClientError, match="ModelError"):
        with deploy_on_emulator(emulator, model_url, "pt2aws-t2") as d:
            moto_patches.add_fault("InvokeEndpoint", "ModelError", "worker died", status=424)
            d.predict(["x"])
    assert sorted(k for k, _ in d.deleted) == ["endpoint", "endpoint_config", "model"]
    assert session.billable_resources(emulator.session()) == NOTHING


@pytest.mark.parametrize(
    ("operation", "created_before"),
    [("CreateModel", 0), ("CreateEndpointConfig", 1), ("CreateEndpoint", 2)],
)
def test_failed_create_leaves_nothing(emulator, model_url, operation, created_before, caplog):
    moto_patches.add_fault(operation, "ResourceLimitExceeded", "account quota reached")
    with caplog.at_level("INFO", logger="pt2aws.aws.hosting"):
        with pytest.raises(ClientError, match="ResourceLimitExceeded"):
            with deploy_on_emulator(emulator, model_url, f"pt2aws-fail-{created_before}"):
                pytest.fail("the body must not run when creation failed")
    (deleted,) = [r.args[0] for r in caplog.records if r.msg == "deleted %s"]
    assert len(deleted) == created_before  # what was created before the failure, deleted
    assert session.billable_resources(emulator.session()) == NOTHING


def test_bad_instance_or_image_fails_before_any_aws_call(emulator, model_url):
    with pytest.raises(images.ImageSelectionError, match="not a SageMaker real-time hosting"):
        with deploy_on_emulator(emulator, model_url, "pt2aws-t4", instance_type="ml.c99g.xlarge"):
            pass
    x86 = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"
    with pytest.raises(images.ImageSelectionError, match="x86_64 but ml.c7g.xlarge"):
        with deploy_on_emulator(emulator, model_url, "pt2aws-t5", image_uri=x86):
            pass
    assert session.billable_resources(emulator.session()) == NOTHING


def test_wait_times_out_and_reports_failure(emulator, model_url, monkeypatch):
    sm = emulator.session().client("sagemaker")
    sm.create_model(
        ModelName="pt2aws-wait", ExecutionRoleArn=EMULATOR_ROLE_ARN, PrimaryContainer={"Image": "x"}
    )
    sm.create_endpoint_config(
        EndpointConfigName="pt2aws-wait",
        ProductionVariants=[
            {"VariantName": "v", "ModelName": "pt2aws-wait", "InstanceType": "ml.c7g.xlarge"}
        ],
    )
    sm.create_endpoint(EndpointName="pt2aws-wait", EndpointConfigName="pt2aws-wait")
    from moto.sagemaker import models

    backend = models.sagemaker_backends["123456789012"]["us-east-1"]
    backend.endpoints["pt2aws-wait"].endpoint_status = "Creating"
    with pytest.raises(TimeoutError, match="still Creating after"):
        hosting.wait_for_endpoint(
            emulator.session(), "pt2aws-wait", timeout_s=1.5, poll_s=0.5, progress=False
        )
    backend.endpoints["pt2aws-wait"].endpoint_status = "Failed"
    with pytest.raises(hosting.DeploymentError, match="is Failed"):
        hosting.wait_for_endpoint(
            emulator.session(), "pt2aws-wait", timeout_s=5, poll_s=0.5, progress=False
        )
    assert len(hosting.delete_resources(emulator.session(), "pt2aws-wait")) == 3
    assert session.billable_resources(emulator.session()) == NOTHING


@pytest.mark.parametrize(
    ("instance", "workers", "threads", "bf16"),
    [
        ("ml.c7g.xlarge", "4", "1", True),  # Graviton3: 4 cores, bf16
        ("ml.c8g.4xlarge", "16", "1", True),  # Graviton4
        ("ml.c6g.2xlarge", "8", "1", False),  # Graviton2 has no bf16
        ("ml.m5.xlarge", "2", "2", False),  # x86: 4 vCPUs = 2 cores x 2 threads
    ],
)
def test_endpoint_environment(instance, workers, threads, bf16):
    env = hosting.endpoint_environment(instance)
    assert env["SAGEMAKER_PROGRAM"] == "inference.py"
    assert env["SAGEMAKER_MODEL_SERVER_WORKERS"] == workers
    assert env["OMP_NUM_THREADS"] == threads
    assert env["PT2AWS_MAX_BATCH"] == "64"
    assert (env.get("DNNL_DEFAULT_FPMATH_MODE") == "BF16") is bf16
    assert ("LRU_CACHE_CAPACITY" in env) is catalog.is_graviton(instance)
