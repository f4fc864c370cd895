"""The deploy flow over HTTP against a moto server on 127.0.0.1 (no AWS account).

``InvokeEndpoint`` is forwarded to a tiny stub model server of our own (127.0.0.1, free port),
so the tests see real request bodies: chunk sizes, order, UTF-8, and the model server's errors.
"""

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from botocore.exceptions import ClientError

from pt2aws.aws import artifact, autoscaling, hosting, images, session
from pt2aws.aws.invoke import request_body
from pt2aws.aws.session import boto_session, list_scalable_targets
from pt2aws.standins.aws_emulator import EMULATOR_ROLE_ARN, Emulator

NOTHING = {"endpoints": [], "endpoint_configs": [], "models": [], "scalable_targets": []}


class StubModelServer:
    """``POST /invocations``: ``{"inputs": [...]}`` -> ``[{"label": text, "score": 1.0}, ...]``.

    Records every request; answers 415 for anything but JSON, like the real handler.
    """

    def __init__(self):
        self.requests: list[tuple[str, bytes]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                stub.requests.append((self.headers["Content-Type"], body))
                if self.headers["Content-Type"] != "application/json":
                    self.send_response(415)
                    self.end_headers()
                    self.wfile.write(b"content type not supported; send application/json")
                    return
                texts = json.loads(body.decode("utf-8"))["inputs"]
                answer = json.dumps([{"label": t, "score": 1.0} for t in texts]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/invocations"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def stub():
    server = StubModelServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def emulator(stub):
    with Emulator(invocations_url=stub.url) as emu:
        yield emu


@pytest.fixture(scope="module")
def model_url(emulator, smoke_model_dir, tmp_path_factory):
    archive = artifact.package(smoke_model_dir, tmp_path_factory.mktemp("emu") / "model.tar.gz")
    return artifact.upload_archive(
        archive, session.default_bucket(emulator.region), "t/model.tar.gz", emulator.region
    )


def _deploy(emulator, model_url, name, **kwargs):
    return hosting.deployed_endpoint(
        model_url, role_arn=EMULATOR_ROLE_ARN, region=emulator.region, name=name, **kwargs
    )


def test_upload_is_encrypted(emulator, model_url):
    s3 = boto_session().client("s3")
    head = s3.head_object(Bucket="sagemaker-us-east-1-123456789012", Key="t/model.tar.gz")
    assert model_url == "s3://sagemaker-us-east-1-123456789012/t/model.tar.gz"
    assert head["ServerSideEncryption"] == "AES256"
    block = s3.get_public_access_block(Bucket="sagemaker-us-east-1-123456789012")
    assert all(block["PublicAccessBlockConfiguration"].values())


def test_deploy_invoke_and_cleanup(emulator, model_url, stub):
    stub.requests.clear()
    with _deploy(emulator, model_url, "pt2aws-t1", tags={"owner": "tests"}) as d:
        sm = boto_session().client("sagemaker")
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
    assert emulator.sagemaker_resources() == NOTHING


def test_large_batch_is_chunked_in_order_with_utf8(emulator, model_url, stub):
    texts = [f"text {i} café ☕ {'x' * (i % 7) * 50}" for i in range(150)]
    stub.requests.clear()
    with _deploy(emulator, model_url, "pt2aws-chunks") as d:
        client = d.client(max_payload_bytes=4_000)
        predictions = client.predict(texts)
    assert [p["label"] for p in predictions] == texts  # original order, nothing lost
    total = len(request_body(texts))  # one request would be ~26 kB
    assert client.requests_sent == len(stub.requests) >= math.ceil(total / 4_000) >= 6
    assert all(len(body) <= 4_000 for _, body in stub.requests)
    assert all(len(json.loads(body)["inputs"]) <= 64 for _, body in stub.requests)
    assert "café ☕".encode() in stub.requests[0][1]  # UTF-8 on the wire, not \\u escapes
    assert emulator.sagemaker_resources() == NOTHING


def test_throttling_is_retried_with_backoff(emulator, model_url, stub):
    stub.requests.clear()
    with _deploy(emulator, model_url, "pt2aws-throttle") as d:
        emulator.inject_fault("InvokeEndpoint", "ThrottlingException", times=2)
        assert d.client(max_attempts=3).predict(["a", "b"]) == [
            {"label": "a", "score": 1.0},
            {"label": "b", "score": 1.0},
        ]
        assert len(stub.requests) == 1  # two throttled tries never reached the model
        emulator.inject_fault("InvokeEndpoint", "ThrottlingException", times=1)
        with pytest.raises(ClientError, match="ThrottlingException"):
            d.client(max_attempts=1).predict(["a"])
    assert emulator.sagemaker_resources() == NOTHING


def test_invoking_a_deleted_endpoint_fails_like_aws(emulator, model_url):
    with _deploy(emulator, model_url, "pt2aws-gone") as d:
        pass
    with pytest.raises(ClientError, match="Endpoint pt2aws-gone .*not found"):
        d.predict(["x"])


def test_model_server_error_becomes_model_error(emulator, model_url):
    with _deploy(emulator, model_url, "pt2aws-415") as d:
        with pytest.raises(ClientError) as info:
            d.client().invoke_raw(b"a,b", content_type="text/x-unknown")
    assert info.value.response["Error"]["Code"] == "ModelError"
    assert "Received client error (415)" in info.value.response["Error"]["Message"]
    assert emulator.sagemaker_resources() == NOTHING


def test_invoke_failure_still_cleans_up(emulator, model_url):
    with pytest.raises(ClientError, match="ModelError"):
        with _deploy(emulator, model_url, "pt2aws-t2") as d:
            emulator.inject_fault("InvokeEndpoint", "ModelError", "worker died", status=424)
            d.predict(["x"])
    assert sorted(k for k, _ in d.deleted) == ["endpoint", "endpoint_config", "model"]
    assert emulator.sagemaker_resources() == NOTHING


@pytest.mark.parametrize(
    ("operation", "created_before"),
    [("CreateModel", 0), ("CreateEndpointConfig", 1), ("CreateEndpoint", 2)],
)
def test_failed_create_leaves_nothing(emulator, model_url, operation, created_before, caplog):
    emulator.inject_fault(operation, "ResourceLimitExceeded", "account quota reached")
    with caplog.at_level("INFO", logger="pt2aws.aws.hosting"):
        with pytest.raises(ClientError, match="ResourceLimitExceeded"):
            with _deploy(emulator, model_url, f"pt2aws-fail-{created_before}"):
                pytest.fail("the body must not run when creation failed")
    (deleted,) = [r.args[0] for r in caplog.records if r.msg == "deleted %s"]
    assert len(deleted) == created_before  # what was created before the failure, deleted
    assert emulator.sagemaker_resources() == NOTHING


def test_autoscaling_is_set_and_removed(emulator, model_url):
    scaling = autoscaling.AutoScaling(
        min_instances=1, max_instances=3, target_invocations_per_instance=500
    )
    with _deploy(emulator, model_url, "pt2aws-scale", autoscaling=scaling) as d:
        client = boto_session().client("application-autoscaling")
        (target,) = client.describe_scalable_targets(ServiceNamespace="sagemaker")[
            "ScalableTargets"
        ]
        assert (target["ResourceId"], target["MinCapacity"], target["MaxCapacity"]) == (
            "endpoint/pt2aws-scale/variant/AllTraffic",
            1,
            3,
        )
        (policy,) = client.describe_scaling_policies(ServiceNamespace="sagemaker")[
            "ScalingPolicies"
        ]
        tracking = policy["TargetTrackingScalingPolicyConfiguration"]
        assert policy["PolicyType"] == "TargetTrackingScaling"
        assert tracking["TargetValue"] == 500.0
        assert (
            tracking["PredefinedMetricSpecification"]["PredefinedMetricType"]
            == "SageMakerVariantInvocationsPerInstance"
        )
    assert ("scalable_target", "endpoint/pt2aws-scale/variant/AllTraffic") in d.deleted
    assert client.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"] == []
    assert emulator.sagemaker_resources() == NOTHING


def test_bad_instance_or_image_fails_before_any_aws_call(emulator, model_url):
    with pytest.raises(images.ImageSelectionError, match="not a SageMaker real-time hosting"):
        with _deploy(emulator, model_url, "pt2aws-t4", instance_type="ml.c99g.xlarge"):
            pass
    x86 = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"
    with pytest.raises(images.ImageSelectionError, match="x86_64 but ml.c7g.xlarge"):
        with _deploy(emulator, model_url, "pt2aws-t5", image_uri=x86):
            pass
    assert emulator.sagemaker_resources() == NOTHING


def test_emulator_validates_instance_types_like_aws(emulator):
    sm = boto_session().client("sagemaker")
    with pytest.raises(ClientError, match="instanceType"):
        sm.create_endpoint_config(
            EndpointConfigName="pt2aws-bad",
            ProductionVariants=[
                {"VariantName": "v", "ModelName": "m", "InstanceType": "ml.c99g.xlarge"}
            ],
        )
    with pytest.raises(ValueError, match="cannot inject a fault into 'DeleteModel'"):
        emulator.inject_fault("DeleteModel")


def test_wait_times_out_and_reports_failure(emulator, model_url, monkeypatch):
    sm = boto_session().client("sagemaker")
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
            "pt2aws-wait", "us-east-1", timeout_s=1.5, poll_s=0.5, progress=False
        )
    backend.endpoints["pt2aws-wait"].endpoint_status = "Failed"
    with pytest.raises(hosting.DeploymentError, match="is Failed"):
        hosting.wait_for_endpoint(
            "pt2aws-wait", "us-east-1", timeout_s=5, poll_s=0.5, progress=False
        )
    assert len(hosting.delete_resources("pt2aws-wait", "us-east-1")) == 3
    assert emulator.sagemaker_resources() == NOTHING


def test_cli_cleanup_deletes_leftovers(emulator, capsys):
    from pt2aws.cli import main

    sm = boto_session().client("sagemaker")
    sm.create_model(
        ModelName="pt2aws-left", ExecutionRoleArn=EMULATOR_ROLE_ARN, PrimaryContainer={"Image": "x"}
    )
    autoscaling.enable_autoscaling("pt2aws-left", "us-east-1", autoscaling.AutoScaling())
    assert main(["cleanup", "--prefix", "pt2aws-left"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert emulator.sagemaker_resources()["models"] == ["pt2aws-left"]
    assert main(["cleanup", "--prefix", "pt2aws-left", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "deleted model pt2aws-left" in out and "deleted scalable_target" in out
    assert emulator.sagemaker_resources() == NOTHING
    assert list_scalable_targets("pt2aws-left") == []


def test_emulator_restores_environment():
    import os

    before = os.environ.get("AWS_ENDPOINT_URL")
    with Emulator() as emu:
        assert os.environ["AWS_ENDPOINT_URL"] == emu.url
    assert os.environ.get("AWS_ENDPOINT_URL") == before


def test_local_model_server_retries_a_failed_start(monkeypatch, tmp_path):
    from pt2aws.standins import torchserve as local
    from pt2aws.standins.aws_emulator import local_model_server

    started, stopped = [], []

    class FlakyEndpoint:
        def __init__(self, model, workdir, env=None):
            self.workdir = workdir

        def start(self):
            started.append(self.workdir)
            if len(started) == 1:
                raise local.LocalEndpointError("Failed to bind: Address already in use")
            return self

        def stop(self):
            stopped.append(self.workdir)

    monkeypatch.setattr(local, "LocalEndpoint", FlakyEndpoint)
    with local_model_server("m.tar.gz", tmp_path / "serve") as server:
        assert server.workdir == tmp_path / "serve-retry2"
    assert started == [tmp_path / "serve", tmp_path / "serve-retry2"]
    assert stopped == [tmp_path / "serve-retry2"]
    started.clear()
    monkeypatch.setattr(
        FlakyEndpoint, "start", lambda self: (_ for _ in ()).throw(local.LocalEndpointError("no"))
    )
    with pytest.raises(local.LocalEndpointError, match="no"):
        with local_model_server("m.tar.gz", tmp_path / "s", attempts=2):
            pass
