"""Tests of :mod:`pt2aws.aws.deploy`: notebook 03's lifecycle on the SageMaker SDK's resources,
over HTTP against the emulator. Every endpoint is answered by a stub server of our own that
records the request bodies (``tests/unit/conftest.py``), or, where the answer must be the
model's, by the archive's handler in this process (``served_in_process``)."""

import contextlib
import json
import logging
import subprocess
import sys
import threading

import pytest
from botocore.exceptions import ClientError
from support.emulator import NOTHING, deployed, injected, served_by, served_in_process

from pt2aws.aws import artifact, deploy, images, invoke
from pt2aws.aws.session import AwsSetupError, billable_resources
from pt2aws.emulator.server import Emulator
from pt2aws.sizing import catalog

TEXTS = ["I love it", "I hate it", "café ☕"]


def test_deploy_invoke_and_cleanup(emulator, model_url, stub):
    stub.requests.clear()
    on = emulator.session()
    with deployed(on, model_url, "pt2aws-t1", extra_tags={"owner": "tests"}) as d:
        sm = on.client("sagemaker")
        assert d.endpoint.endpoint_status == "InService"
        config = sm.describe_endpoint_config(EndpointConfigName="pt2aws-t1")
        assert config["ProductionVariants"][0]["InstanceType"] == "ml.c7g.xlarge"
        container = sm.describe_model(ModelName="pt2aws-t1")["PrimaryContainer"]
        assert container["Image"] == (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/"
            "pytorch-inference-arm64:2.6.0-cpu-py312-ubuntu22.04-sagemaker"
        )
        assert (
            container["Environment"] == d.requests["CreateModel"]["PrimaryContainer"]["Environment"]
        )
        assert container["Environment"]["SAGEMAKER_MODEL_SERVER_WORKERS"] == "4"
        assert container["Environment"]["DNNL_DEFAULT_FPMATH_MODE"] == "BF16"
        arn = sm.describe_endpoint(EndpointName="pt2aws-t1")["EndpointArn"]
        tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
        assert tags["project"] == "pt2aws" and tags["owner"] == "tests"
        assert tags["pt2aws:created-at"].startswith("20")
        reply = d.endpoint.invoke(body=b'{"inputs": ["x"]}', content_type="application/json")
        assert json.loads(reply.body.read()) == [{"label": "x", "score": 1.0}]
    assert stub.requests == [("application/json", b'{"inputs": ["x"]}')]
    assert sorted(k for k, _ in d.cleanup.deleted) == ["endpoint", "endpoint_config", "model"]
    assert billable_resources(on) == NOTHING


def test_invoking_a_deleted_endpoint_fails_like_aws(emulator, model_url):
    with deployed(emulator.session(), model_url, "pt2aws-gone") as d:
        pass
    with pytest.raises(ClientError, match="Endpoint pt2aws-gone .*not found"):
        d.client().predict(["x"])


def test_model_server_error_becomes_model_error(emulator, model_url):
    with deployed(emulator.session(), model_url, "pt2aws-415") as d:
        with pytest.raises(ClientError) as info:
            d.client().invoke_raw(b"a,b", content_type="text/x-unknown")
    assert info.value.response["Error"]["Code"] == "ModelError"
    assert "Received client error (415)" in info.value.response["Error"]["Message"]
    assert billable_resources(emulator.session()) == NOTHING


def test_a_failure_in_a_step_deletes_what_the_run_created(emulator, model_url):
    on = emulator.session()
    with pytest.raises(ClientError, match="ModelError"):
        with deployed(on, model_url, "pt2aws-t2") as d:
            with injected("InvokeEndpoint", "ModelError", "worker died", status=424), d.cleanup:
                d.client().predict(["x"])
    assert sorted(k for k, _ in d.cleanup.deleted) == ["endpoint", "endpoint_config", "model"]
    assert billable_resources(on) == NOTHING


@pytest.mark.parametrize(
    ("operation", "created_before"),
    [("CreateModel", 0), ("CreateEndpointConfig", 1), ("CreateEndpoint", 2)],
)
def test_a_quota_refusal_is_one_line_and_leaves_nothing(
    emulator, model_url, operation, created_before, caplog
):
    on = emulator.session()
    with caplog.at_level(logging.INFO, logger="pt2aws.aws.deploy"):
        with injected(operation, "ResourceLimitExceeded", "account quota reached"):
            with pytest.raises(AwsSetupError, match=r"^quota reached \(account quota reached\)"):
                with deployed(on, model_url, f"pt2aws-fail-{created_before}"):
                    pytest.fail("the body must not run when creation failed")
    deleted = [r.args[0] for r in caplog.records if r.msg == "deleted %s"][0]
    assert len(deleted) == created_before  # what was created before the refusal, deleted
    assert billable_resources(on) == NOTHING


def test_a_role_the_caller_may_not_pass_is_one_line_and_creates_nothing(emulator, model_url):
    from support.emulator import denied_pass_role

    on = emulator.session()
    with denied_pass_role(on.role_arn):
        with pytest.raises(AwsSetupError) as info:
            with deployed(on, model_url, "pt2aws-norole"):
                pass
    message = str(info.value)
    assert message.startswith("these credentials may not pass the execution role (User: ")
    assert "allow iam:PassRole on it, with condition iam:PassedToService" in message
    assert "\n" not in message and isinstance(info.value.__cause__, ClientError)
    assert billable_resources(on, prefix="pt2aws-norole") == NOTHING


def test_bad_instance_or_image_fails_before_any_aws_call(emulator, model_url):
    on = emulator.session()
    with pytest.raises(images.ImageSelectionError, match="not a SageMaker real-time hosting"):
        with deployed(on, model_url, "pt2aws-t4", instance_type="ml.c99g.xlarge"):
            pass
    x86 = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"
    with pytest.raises(images.ImageSelectionError, match="x86_64 but ml.c7g.xlarge"):
        with deployed(on, model_url, "pt2aws-t5", image_uri=x86):
            pass
    assert billable_resources(on) == NOTHING


def test_a_wait_that_times_out_or_fails_is_one_line_and_cleaned_up(emulator, model_url, stub):
    on, release = emulator.session(), threading.Event()

    @contextlib.contextmanager
    def never_ready(archive, workdir, env):  # an image that never answers /ping, then fails
        release.wait(30)
        raise RuntimeError("image pull refused")
        yield

    emulator.endpoints.server = never_ready
    try:
        with pytest.raises(deploy.DeploymentError) as info:
            with deployed(on, model_url, "pt2aws-wait", timeout_s=1):
                pass
        assert str(info.value) == (
            "endpoint pt2aws-wait is Creating: still not InService: raise WAIT_TIMEOUT_S "
            "(logs: CloudWatch /aws/sagemaker/Endpoints/pt2aws-wait)"
        )
        release.set()
        failed = r"is Failed: the serving software did not start on this machine: image pull"
        with pytest.raises(deploy.DeploymentError, match=failed):
            with deployed(on, model_url, "pt2aws-failed"):
                pass
    finally:
        emulator.endpoints.server = served_by(stub.url)
    assert billable_resources(on) == NOTHING


def test_autoscaling_is_set_and_removed(emulator, model_url):
    on = emulator.session()
    scaling = {"min_instances": 1, "max_instances": 3}
    client = on.client("application-autoscaling")
    with deployed(on, model_url, "pt2aws-scale", autoscaling=scaling) as d:
        (target,) = client.describe_scalable_targets(ServiceNamespace="sagemaker")[
            "ScalableTargets"
        ]
        assert (target["ResourceId"], target["MinCapacity"], target["MaxCapacity"]) == (
            "endpoint/pt2aws-scale/variant/AllTraffic",
            1,
            3,
        )
        ask = {"ServiceNamespace": "sagemaker", "ResourceId": target["ResourceId"]}
        (policy,) = client.describe_scaling_policies(**ask)["ScalingPolicies"]
        tracking = policy["TargetTrackingScalingPolicyConfiguration"]
        assert policy["PolicyType"] == "TargetTrackingScaling" and tracking["TargetValue"] == 600.0
        metric = tracking["PredefinedMetricSpecification"]["PredefinedMetricType"]
        assert metric == "SageMakerVariantInvocationsPerInstance"
    assert ("scalable_target", "endpoint/pt2aws-scale/variant/AllTraffic") in d.cleanup.deleted
    assert billable_resources(on) == NOTHING
    with pytest.raises(ValueError, match="min_instances"):
        deploy.enable_autoscaling(on, "pt2aws-none", min_instances=3, max_instances=2)


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
    env = deploy.endpoint_environment(instance)
    assert env["SAGEMAKER_PROGRAM"] == "inference.py"
    assert env["SAGEMAKER_MODEL_SERVER_WORKERS"] == workers
    assert env["OMP_NUM_THREADS"] == threads
    assert env["PT2AWS_MAX_BATCH"] == "64" and "PT2AWS_VARIANT" not in env
    assert (env.get("DNNL_DEFAULT_FPMATH_MODE") == "BF16") is bf16
    assert ("LRU_CACHE_CAPACITY" in env) is catalog.is_graviton(instance)
    assert deploy.endpoint_environment(instance, image="custom")["PT2AWS_VARIANT"] == "auto"


# ------------------------------------------------- answered by the model: the notebook's record
@pytest.fixture(scope="module")
def handler_emulator(smoke_model_dir, tmp_path_factory):
    """An emulator whose endpoints answer with the archive's handler, and the archive there."""
    work = tmp_path_factory.mktemp("deploy")
    archive = artifact.package(smoke_model_dir, work / "model.tar.gz")
    with Emulator(workdir=work / "eps") as emu:
        emu.endpoints.server = served_in_process()
        on = emu.session()
        url = f"s3://sagemaker-us-east-1-{on.account()}/pt2aws/life/model.tar.gz"
        yield on, archive, artifact.upload_archive(on, archive, url)


def test_lifecycle_answers_like_the_handler_and_records_it(handler_emulator):
    on, archive, url = handler_emulator
    local = artifact.smoke_test_archive(archive, TEXTS)
    image = images.serving_image("dlc", "us-east-1", "ml.c7g.xlarge")
    first = on.client("sagemaker")
    with deployed(on, url, "pt2aws-life") as d:
        assert first.describe_endpoint(EndpointName="pt2aws-life")["EndpointStatus"] == "InService"
        answer = d.client().predict(TEXTS)
        load = invoke.load_test(d.client(), TEXTS, max_requests=12, concurrency=4)
    record = deploy.deployment_record(
        on, d.requests, image=image, archive=artifact.validate_archive(archive, smoke_test=False),
        local_predictions=local, deployed=True, answer=answer, load_test=load,
        deleted=d.cleanup.deleted, left=billable_resources(on, prefix="pt2aws-life"),
    )  # fmt: skip
    assert record["answer"] == local and record["matches_local"] is True
    assert record["answer_source"] == "the archive's handler in this Python process"
    assert sorted(k for k, _ in record["deleted"]) == ["endpoint", "endpoint_config", "model"]
    assert record["resources_left"] == 0 and record["left"] == NOTHING and record["kept"] is None
    assert (load["requests"], load["errors"], load["concurrency"]) == (12, 0, 4)
    assert record["image_uri"] == images.inference_image_uri("us-east-1")
    assert record["image_support"]["past"] is True
    assert record["requests"]["CreateModel"]["ExecutionRoleArn"] == on.role_arn
    assert set(record["requests"]) == {"CreateModel", "CreateEndpointConfig", "CreateEndpoint"}
    assert json.loads(json.dumps(record)) == record
    shown = deploy.format_record(record)
    assert "matches the in-process handler: True" in shown and "load test: 12 requests" in shown
    assert "resources left with this name: 0" in shown and "p90" in shown


def test_kept_endpoint_costs_by_the_hour_until_the_cleanup_command(handler_emulator):
    on, _, url = handler_emulator
    with deployed(on, url, "pt2aws-keep"):
        kept = deploy.kept_endpoint(on, "pt2aws-keep", "ml.c7g.xlarge")
        assert sum(map(len, billable_resources(on, prefix="pt2aws-keep").values())) == 3
        assert kept["usd_per_hour"] == 0.1734 and kept["usd_per_day"] == pytest.approx(4.1616)
        assert (
            kept["cleanup_command"]
            == "pt2aws cleanup --prefix pt2aws-keep --region us-east-1 --yes"
        )
        # the command as a user runs it: another process (it reaches the emulator over HTTP)
        command = [sys.executable, "-m", "pt2aws.cli", *kept["cleanup_command"].split()[1:]]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "deleted endpoint pt2aws-keep" in done.stdout
        assert billable_resources(on, prefix="pt2aws-keep") == NOTHING


def test_a_custom_image_is_answered_by_the_projects_server(smoke_model_dir, tmp_path):
    """Every emulated endpoint runs the project's own server (what container/Dockerfile starts)."""
    custom = "123456789012.dkr.ecr.us-east-1.amazonaws.com/pt2aws-serve:2026.12"
    archive = artifact.package(smoke_model_dir, tmp_path / "model.tar.gz")
    with Emulator(workdir=tmp_path / "eps") as emu:
        on = emu.session()
        url = artifact.upload_archive(on, archive, f"s3://sagemaker-us-east-1-{on.account()}/c/m")
        with deployed(on, url, "pt2aws-asgi", image="custom", image_uri=custom, timeout_s=300) as d:
            assert d.client().predict(TEXTS) == artifact.smoke_test_archive(archive, TEXTS)
        assert on.answered_by("pt2aws-asgi").startswith("the project's server on this machine")
        broken = tmp_path / "broken.tar.gz"
        broken.write_bytes(b"not a tarball")
        url = artifact.upload_archive(on, broken, f"s3://sagemaker-us-east-1-{on.account()}/b/m")
        with pytest.raises(deploy.DeploymentError, match="is Failed: the serving software did not"):
            with deployed(on, url, "pt2aws-broken"):
                pass
        assert billable_resources(on, prefix="pt2aws-") == NOTHING
