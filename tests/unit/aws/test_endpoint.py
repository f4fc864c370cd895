"""Tests of :mod:`pt2aws.aws.endpoint` and notebook 03's deployment lifecycle, call by call, on
the emulator (issue 18).

The steps are the notebook's: upload, CreateModel, CreateEndpointConfig, CreateEndpoint, wait,
InvokeEndpoint, delete in ``finally``. The emulated endpoint is answered by the archive's own
handler in this process (``model_servers="in_process"``: no Java, seconds), or by the project's
serving image's server for a custom image.
"""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from pt2aws.aws import artifact, endpoint, hosting, images, invoke
from pt2aws.aws.session import AwsSession, RoleError, billable_resources, resource_name
from pt2aws.emulator import patches as moto_patches
from pt2aws.emulator import server as aws_emulator

TEXTS = ["I love it", "I hate it", "café ☕"]
CUSTOM = "123456789012.dkr.ecr.us-east-1.amazonaws.com/pt2aws-serve:2026.12"
NOTHING = {"endpoints": [], "endpoint_configs": [], "models": [], "scalable_targets": []}


@pytest.fixture(scope="module")
def archive(smoke_model_dir, tmp_path_factory):
    return artifact.package(smoke_model_dir, tmp_path_factory.mktemp("deploy") / "model.tar.gz")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    on = aws_emulator.start(model_servers="in_process", workdir=tmp_path_factory.mktemp("eps"))
    yield on
    on.close()


def _plan(session, prefix: str, image: str = "dlc", **kwargs):
    chosen = endpoint.choose_image(image, session.region, "ml.c7g.xlarge", **kwargs)
    name = resource_name(prefix)
    bucket = f"sagemaker-{session.region}-{session.account()}"
    deployment = hosting.new_deployment(
        session,
        f"s3://{bucket}/pt2aws/{name}/model.tar.gz",
        name=name,
        image_uri=chosen["image_uri"],
        environment=endpoint.serving_environment(image, "ml.c7g.xlarge"),
        network_isolation=kwargs.get("network_isolation", False),
    )
    return chosen, deployment


def _lifecycle(session, archive, deployment, *, keep_endpoint=False, load_requests=0):
    """The notebook's lifecycle cell."""
    sm = session.client("sagemaker")
    outcome = {"answer": None, "load_test": None, "deleted": [], "model_data_deleted": False}
    try:
        artifact.upload_archive(session, archive, deployment.model_data_url)
        sm.create_model(**deployment.requests["CreateModel"])
        sm.create_endpoint_config(**deployment.requests["CreateEndpointConfig"])
        sm.create_endpoint(**deployment.requests["CreateEndpoint"])
        hosting.wait_for_endpoint(session, deployment.name, timeout_s=120, progress=False)
        client = deployment.client()
        outcome["answer"] = client.predict(TEXTS)
        if load_requests:
            outcome["load_test"] = invoke.load_test(
                client, TEXTS, max_requests=load_requests, concurrency=deployment.workers
            )
    finally:
        keep = keep_endpoint and outcome["answer"] is not None
        if not keep:
            outcome["deleted"] = hosting.delete_resources(session, deployment.name)
            outcome["model_data_deleted"] = artifact.delete_uploaded(
                session, deployment.model_data_url
            )
    return outcome


def test_lifecycle_answers_like_the_handler_and_leaves_nothing(session, archive):
    local = artifact.smoke_test_archive(archive, TEXTS)
    chosen, deployment = _plan(session, "pt2aws-life")
    status = []
    describe = session.client("sagemaker").describe_endpoint
    outcome = _lifecycle(session, archive, deployment, load_requests=12)
    with pytest.raises(ClientError, match="Could not find endpoint"):
        describe(EndpointName=deployment.name)
    status.append(outcome["answer"])
    left = billable_resources(session, prefix=deployment.name)
    record = endpoint.deployment_record(
        session,
        deployment,
        image=chosen,
        archive=artifact.validate_archive(archive, smoke_test=False),
        local_predictions=local,
        deployed=True,
        left=left,
        **outcome,
    )
    assert record["answer"] == local and record["matches_local"] is True
    assert record["answer_source"].startswith("the archive's handler in this Python process")
    assert sorted(k for k, _ in record["deleted"]) == ["endpoint", "endpoint_config", "model"]
    assert record["resources_left"] == 0 and left == NOTHING and record["kept"] is None
    load = record["load_test"]
    assert (load["requests"], load["errors"], load["concurrency"]) == (12, 0, 4)
    assert record["image_uri"] == images.inference_image_uri("us-east-1")
    assert record["image_support"]["past"] is True and record["model_data_deleted"] is True
    assert record["requests"]["CreateModel"]["ExecutionRoleArn"] == session.role_arn
    assert json.loads(json.dumps(record)) == record
    shown = endpoint.format_record(record)
    assert "matches the in-process handler: True" in shown and "load test: 12 requests" in shown
    assert "resources left with this name: 0" in shown and "p90" in shown


def test_endpoint_is_creating_until_its_server_answers(session, archive):
    _, deployment = _plan(session, "pt2aws-wait")
    sm = session.client("sagemaker")
    try:
        artifact.upload_archive(session, archive, deployment.model_data_url)
        sm.create_model(**deployment.requests["CreateModel"])
        sm.create_endpoint_config(**deployment.requests["CreateEndpointConfig"])
        sm.create_endpoint(**deployment.requests["CreateEndpoint"])
        first = sm.describe_endpoint(EndpointName=deployment.name)["EndpointStatus"]
        done = hosting.wait_for_endpoint(session, deployment.name, timeout_s=120, progress=False)
    finally:
        hosting.delete_resources(session, deployment.name)
    assert first == "Creating" and done["EndpointStatus"] == "InService"


@pytest.mark.parametrize(
    ("operation", "created"),
    [("CreateModel", 0), ("CreateEndpointConfig", 1), ("CreateEndpoint", 2)],
)
def test_a_refused_create_leaves_nothing_billable(session, archive, operation, created):
    _, deployment = _plan(session, f"pt2aws-quota{created}")
    moto_patches.add_fault(operation, "ResourceLimitExceeded", "account quota reached", 400)
    with pytest.raises(ClientError, match="ResourceLimitExceeded"):
        _lifecycle(session, archive, deployment)
    assert billable_resources(session, prefix=deployment.name) == NOTHING


def test_an_endpoint_whose_server_fails_is_failed_and_cleaned_up(session, tmp_path):
    broken = tmp_path / "model.tar.gz"
    broken.write_bytes(b"not a tarball")
    _, deployment = _plan(session, "pt2aws-broken")
    with pytest.raises(hosting.DeploymentError, match="is Failed: the serving software did not"):
        _lifecycle(session, broken, deployment)
    assert billable_resources(session, prefix=deployment.name) == NOTHING


def test_kept_endpoint_costs_by_the_hour_until_the_cleanup_command(session, archive):
    import subprocess
    import sys

    _, deployment = _plan(session, "pt2aws-keep")
    outcome = _lifecycle(session, archive, deployment, keep_endpoint=True)
    assert outcome["deleted"] == [] and outcome["answer"] is not None
    left = billable_resources(session, prefix=deployment.name)
    assert sum(map(len, left.values())) == 3
    kept = endpoint.kept_endpoint(session, deployment.name, "ml.c7g.xlarge")
    assert kept["usd_per_hour"] == 0.1734 and kept["usd_per_day"] == pytest.approx(4.1616)
    assert kept["cleanup_command"] == (
        f"pt2aws cleanup --prefix {deployment.name} --region us-east-1 --yes"
    )
    # the command as a user runs it: another process (it reaches the emulator over HTTP)
    command = [sys.executable, "-m", "pt2aws.cli", *kept["cleanup_command"].split()[1:]]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"deleted endpoint {deployment.name}" in done.stdout
    assert billable_resources(session, prefix=deployment.name) == NOTHING


def test_image_choice_is_checked_before_any_aws_call():
    region = "us-east-1"
    with pytest.raises(ValueError, match="network isolation needs IMAGE='custom'"):
        endpoint.choose_image("dlc", region, "ml.c7g.xlarge", network_isolation=True)
    with pytest.raises(ValueError, match="image must be one of"):
        endpoint.choose_image("ubuntu", region, "ml.c7g.xlarge")
    with pytest.raises(images.ImageSelectionError, match="not a private ECR image URI"):
        endpoint.choose_image("custom", region, "ml.c7g.xlarge")
    with pytest.raises(images.ImageSelectionError, match="is in us-east-1 but the endpoint"):
        endpoint.choose_image("custom", "eu-west-1", "ml.c7g.xlarge", image_uri=CUSTOM)
    x86 = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"
    with pytest.raises(images.ImageSelectionError, match="x86_64 but ml.c7g.xlarge"):
        endpoint.choose_image("dlc", region, "ml.c7g.xlarge", image_uri=x86)
    with pytest.raises(images.ImageSelectionError, match="not a SageMaker real-time hosting"):
        endpoint.choose_image("dlc", region, "ml.c99g.xlarge")
    custom = endpoint.choose_image("custom", region, "ml.c7g.xlarge", image_uri=CUSTOM)
    assert custom["image_uri"] == CUSTOM and custom["support"]["image"] == "custom"
    assert endpoint.serving_environment("custom", "ml.c7g.xlarge")["PT2AWS_VARIANT"] == "auto"
    assert "PT2AWS_VARIANT" not in endpoint.serving_environment("dlc", "ml.c7g.xlarge")


def test_an_aws_session_without_a_role_fails_before_any_aws_call(monkeypatch):
    import botocore.client

    def no_aws(*a, **k):
        raise AssertionError("an AWS call was made")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", no_aws)
    with pytest.raises(RoleError, match="needs ROLE_ARN"):
        hosting.new_deployment(AwsSession(region="eu-west-1"), "s3://b/k/model.tar.gz")


def test_custom_image_is_answered_by_the_serving_image_server(smoke_model_dir, tmp_path):
    """A custom image's emulated endpoint runs the project's own Starlette/uvicorn server (what
    container/Dockerfile starts), not TorchServe."""
    packed = artifact.package(smoke_model_dir, tmp_path / "model.tar.gz")
    on = aws_emulator.start(workdir=tmp_path / "eps")  # model servers "auto"
    try:
        chosen, deployment = _plan(on, "pt2aws-asgi", "custom", image_uri=CUSTOM)
        outcome = _lifecycle(on, packed, deployment)
        assert on.answered_by(deployment.name).startswith("the project's serving image's server")
        assert outcome["answer"] == artifact.smoke_test_archive(packed, TEXTS)
        model = deployment.requests["CreateModel"]["PrimaryContainer"]
        assert model["Environment"]["PT2AWS_VARIANT"] == "auto" and model["Image"] == CUSTOM
        assert billable_resources(on, prefix=deployment.name) == NOTHING
    finally:
        on.close()


def test_a_past_dlc_is_reported_once_in_the_answer_not_also_as_a_warning():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chosen = endpoint.choose_image("dlc", "us-east-1", "ml.c7g.xlarge", torch_version="2.6.0")
    assert (
        "pytorch-inference-arm64 2.6: patch support ended 2026-06-30"
        in chosen["support"]["message"]
    )
    assert [w for w in caught if "patch support" in str(w.message)] == []
