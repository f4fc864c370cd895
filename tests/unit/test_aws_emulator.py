"""The deploy flow over HTTP against a moto server on 127.0.0.1 (no AWS account)."""

import json

import pytest

from pt2aws import deploy
from pt2aws.aws import EMULATOR_ROLE_ARN, Emulator


@pytest.fixture(scope="module")
def emulator():
    with Emulator() as emu:
        yield emu


@pytest.fixture(scope="module")
def model_url(emulator, smoke_model_dir, tmp_path_factory):
    archive = deploy.package(smoke_model_dir, tmp_path_factory.mktemp("emu") / "model.tar.gz")
    return deploy.upload_model(
        archive, deploy.default_bucket(emulator.region), "t/model.tar.gz", emulator.region
    )


def test_upload_is_encrypted(emulator, model_url):
    from pt2aws.aws import boto_session

    head = (
        boto_session()
        .client("s3")
        .head_object(Bucket="sagemaker-us-east-1-123456789012", Key="t/model.tar.gz")
    )
    assert model_url == "s3://sagemaker-us-east-1-123456789012/t/model.tar.gz"
    assert head["ServerSideEncryption"] == "AES256"


def test_deploy_invoke_and_cleanup(emulator, model_url):
    from pt2aws.aws import boto_session

    with deploy.deployed_endpoint(
        model_url, role_arn=EMULATOR_ROLE_ARN, region=emulator.region, name="pt2aws-t1"
    ) as d:
        sm = boto_session().client("sagemaker")
        assert sm.describe_endpoint(EndpointName="pt2aws-t1")["EndpointStatus"] == "InService"
        config = sm.describe_endpoint_config(EndpointConfigName="pt2aws-t1")
        assert config["ProductionVariants"][0]["InstanceType"] == "ml.c7g.xlarge"
        container = sm.describe_model(ModelName="pt2aws-t1")["PrimaryContainer"]
        assert "pytorch-inference-arm64" in container["Image"]
        assert container["Environment"]["SAGEMAKER_PROGRAM"] == "inference.py"
        emulator.queue_endpoint_result(json.dumps([{"label": "positive", "score": 0.9}]))
        assert json.loads(d.invoke('{"inputs": "x"}')) == [{"label": "positive", "score": 0.9}]
    assert sorted(k for k, _ in d.deleted) == ["endpoint", "endpoint_config", "model"]
    assert emulator.sagemaker_resources() == {"endpoints": [], "endpoint_configs": [], "models": []}


def test_failure_inside_with_still_cleans_up(emulator, model_url):
    with pytest.raises(RuntimeError, match="boom"):
        with deploy.deployed_endpoint(
            model_url, role_arn=EMULATOR_ROLE_ARN, region=emulator.region, name="pt2aws-t2"
        ):
            raise RuntimeError("boom")
    assert emulator.sagemaker_resources() == {"endpoints": [], "endpoint_configs": [], "models": []}


def test_failed_create_leaves_nothing(emulator, model_url, monkeypatch):
    from sagemaker.core import resources

    def fail(*args, **kwargs):
        raise RuntimeError("create_endpoint failed")

    monkeypatch.setattr(resources.Endpoint, "create", fail)
    with pytest.raises(RuntimeError, match="create_endpoint failed"):
        with deploy.deployed_endpoint(
            model_url, role_arn=EMULATOR_ROLE_ARN, region=emulator.region, name="pt2aws-t3"
        ):
            pass
    assert emulator.sagemaker_resources() == {"endpoints": [], "endpoint_configs": [], "models": []}


def test_emulator_rejects_unknown_instance_types(emulator, model_url):
    with pytest.raises(Exception, match="instanceType"):
        with deploy.deployed_endpoint(
            model_url,
            role_arn=EMULATOR_ROLE_ARN,
            region=emulator.region,
            instance_type="ml.c99g.xlarge",
            image_uri="x",
            name="pt2aws-t4",
        ):
            pass
    assert emulator.sagemaker_resources() == {"endpoints": [], "endpoint_configs": [], "models": []}


def test_cli_cleanup_deletes_leftovers(emulator, capsys):
    from pt2aws.aws import boto_session
    from pt2aws.cli import main

    sm = boto_session().client("sagemaker")
    sm.create_model(
        ModelName="pt2aws-left", ExecutionRoleArn=EMULATOR_ROLE_ARN, PrimaryContainer={"Image": "x"}
    )
    assert main(["cleanup", "--prefix", "pt2aws-left"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert emulator.sagemaker_resources()["models"] == ["pt2aws-left"]
    assert main(["cleanup", "--prefix", "pt2aws-left", "--yes"]) == 0
    assert emulator.sagemaker_resources()["models"] == []


def test_emulator_restores_environment():
    import os

    before = os.environ.get("AWS_ENDPOINT_URL")
    with Emulator() as emu:
        assert os.environ["AWS_ENDPOINT_URL"] == emu.url
    assert os.environ.get("AWS_ENDPOINT_URL") == before
