"""Tests of :mod:`pt2aws.emulator` (the server and the moto patches it applies)."""

import contextlib
import os
import threading

import pytest
from botocore.exceptions import ClientError

from pt2aws.emulator.server import EMULATOR_ROLE_ARN, Emulator


def test_emulator_validates_instance_types_like_aws(emulator):
    sm = emulator.session().client("sagemaker")
    with pytest.raises(ClientError, match="instanceType"):
        sm.create_endpoint_config(
            EndpointConfigName="pt2aws-bad",
            ProductionVariants=[
                {"VariantName": "v", "ModelName": "m", "InstanceType": "ml.c99g.xlarge"}
            ],
        )


def test_emulator_answers_the_role_check_the_sdks_model_trainer_makes(emulator):
    iam = emulator.session().client("iam")  # moto raises NotImplementedError (stderr) without it
    answer = iam.simulate_principal_policy(
        PolicySourceArn=EMULATOR_ROLE_ARN, ActionNames=["s3:GetObject", "s3:PutObject"]
    )
    assert [r["EvalDecision"] for r in answer["EvaluationResults"]] == ["allowed", "allowed"]


def test_emulator_restores_environment_and_the_sdks_sts_endpoint():
    from sagemaker.core.helper import session_helper

    before, sts = os.environ.get("AWS_ENDPOINT_URL"), session_helper.sts_regional_endpoint
    with Emulator(model_servers=False) as emu:
        assert os.environ["AWS_ENDPOINT_URL"] == emu.url
        assert session_helper.sts_regional_endpoint("us-east-1") == emu.url
    assert os.environ.get("AWS_ENDPOINT_URL") == before
    assert session_helper.sts_regional_endpoint is sts


def test_an_endpoint_deleted_while_its_server_starts_is_stopped(emulator, stub):
    from support.emulator import served_by

    release, stopped = threading.Event(), []

    @contextlib.contextmanager
    def slow_server(archive, workdir, env):
        release.wait(30)
        try:
            yield stub.url, "a slow server"
        finally:
            stopped.append(workdir.name)

    s3, sm = emulator.session().client("s3"), emulator.session().client("sagemaker")
    s3.create_bucket(Bucket="pt2aws-slow")
    s3.put_object(Bucket="pt2aws-slow", Key="model.tar.gz", Body=b"not read by the slow server")
    model_url = "s3://pt2aws-slow/model.tar.gz"
    emulator.endpoints.server = slow_server
    try:
        sm.create_model(ModelName="pt2aws-slow", ExecutionRoleArn=EMULATOR_ROLE_ARN,
                        PrimaryContainer={"Image": "x", "ModelDataUrl": model_url})  # fmt: skip
        variant = {"VariantName": "v", "ModelName": "pt2aws-slow", "InstanceType": "ml.c7g.xlarge"}
        sm.create_endpoint_config(EndpointConfigName="pt2aws-slow", ProductionVariants=[variant])
        sm.create_endpoint(EndpointName="pt2aws-slow", EndpointConfigName="pt2aws-slow")
        assert sm.describe_endpoint(EndpointName="pt2aws-slow")["EndpointStatus"] == "Creating"
        sm.delete_endpoint(EndpointName="pt2aws-slow")
        release.set()
        for _ in range(100):
            if stopped:
                break
            threading.Event().wait(0.05)
        assert stopped == ["pt2aws-slow"]
    finally:
        emulator.endpoints.server = served_by(stub.url)
        sm.delete_endpoint_config(EndpointConfigName="pt2aws-slow")
        sm.delete_model(ModelName="pt2aws-slow")
