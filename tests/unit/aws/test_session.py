"""Tests of :mod:`pt2aws.aws.session`: names, the session, and every way the ``aws`` target can
be misconfigured stopping with one line before anything is created."""

import os

import pytest

from pt2aws.aws import session
from pt2aws.aws.session import AwsSetupError


def test_resource_name_is_timestamped_and_valid():
    name = session.resource_name("pt2aws-smoke")
    assert name.startswith("pt2aws-smoke-20") and len(name) == len("pt2aws-smoke-") + 15
    with pytest.raises(ValueError, match="letters, digits and single hyphens"):
        session.resource_name("my_model")


def test_session_carries_region_role_url_and_hooks(emulator):
    from pt2aws.emulator.server import EMULATOR_ROLE_ARN

    on = emulator.session()
    assert (on.target, on.emulated, on.region) == ("emulator", True, "us-east-1")
    assert on.role_arn == EMULATOR_ROLE_ARN and on.endpoint_url == emulator.url
    assert on.require_role() == EMULATOR_ROLE_ARN and on.account() == "123456789012"
    assert on.boto() is on.boto() and on.sdk == {"session": on.boto(), "region": "us-east-1"}
    assert "LOCAL EMULATOR" in str(on) and "nothing is billed" in str(on)
    assert on.answered_by("x") == "moto's canned answer (no model server)"
    with pytest.raises(AwsSetupError, match="pt2aws.emulator.start"):
        session.connect("emulator")
    real = session.connect(region="eu-west-1", role_arn="arn:aws:iam::1:role/r")
    assert (real.target, real.region, real.poll_s) == ("aws", "eu-west-1", 15)
    assert "REAL AWS ACCOUNT" in str(real)


def test_connect_closes_the_emulator_a_notebook_started():
    """A kernel switched from the emulator to AWS must not keep talking to the emulator."""
    from pt2aws.emulator import server

    before = os.environ.get("AWS_ENDPOINT_URL")
    emulated = server.start(model_servers=False)
    assert os.environ["AWS_ENDPOINT_URL"] == emulated.endpoint_url
    real = session.connect(region="us-east-1")
    assert os.environ.get("AWS_ENDPOINT_URL") == before and real.endpoint_url == before
    assert session._RUNNING_EMULATOR["session"] is None


def _one_line(err: Exception) -> str:
    text = str(err)
    assert "\n" not in text and isinstance(err, session.UserError)
    return text


def test_no_region_stops_with_the_fix(monkeypatch, tmp_path):
    for key in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(AwsSetupError) as info:
        session.connect(role_arn="arn:aws:iam::1:role/r")
    assert _one_line(info.value).startswith("no AWS region: set REGION (e.g. 'us-east-1')")


def test_no_credentials_stop_with_the_fix(monkeypatch, tmp_path, emulator):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role here
    on = session.connect(region="us-east-1")  # reaches the emulator: AWS_ENDPOINT_URL
    with pytest.raises(AwsSetupError) as info:
        on.account()
    assert _one_line(info.value) == (
        "no AWS credentials found: set AWS credentials (aws configure, AWS_PROFILE or an "
        "instance role) and check them with `aws sts get-caller-identity`"
    )


def test_unreachable_aws_stops_with_the_fix(monkeypatch):
    from pt2aws.processes import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    on = session.connect(region="eu-west-1")
    with pytest.raises(AwsSetupError) as info:
        on.account()
    text = _one_line(info.value)
    assert text.startswith("AWS is unreachable (Could not connect to the endpoint URL")
    assert text.endswith("check the network, the region 'eu-west-1' and AWS_ENDPOINT_URL")


def test_a_session_without_a_role_stops_before_any_aws_call(monkeypatch):
    import botocore.client

    def no_aws(*a, **k):
        raise AssertionError("an AWS call was made")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", no_aws)
    with pytest.raises(session.RoleError, match="needs ROLE_ARN") as info:
        session.AwsSession(region="eu-west-1").require_role()
    _one_line(info.value)


@pytest.mark.parametrize(
    ("code", "operation", "message", "line"),
    [
        ("InvalidClientTokenId", "GetCallerIdentity", "invalid", "the credentials were refused ("),
        ("AccessDeniedException", "CreateModel", "User: x is not authorized to perform: "
         "iam:PassRole on resource: r", "these credentials may not pass the execution role ("),
        ("AccessDeniedException", "CreateEndpoint", "no", "CreateEndpoint was refused (no): allow"),
        ("ResourceLimitExceeded", "CreateEndpoint", "max 0", "quota reached (max 0): request"),
        ("ValidationException", "CreateModel", "Could not assume role r",
         "SageMaker cannot assume the execution role ("),
        ("ValidationException", "CreateModel", "bad name", None),
    ],
)  # fmt: skip
def test_aws_refusals_read_as_one_line_naming_the_fix(code, operation, message, line):
    from botocore.exceptions import ClientError

    err = ClientError({"Error": {"Code": code, "Message": message}}, operation)
    explained = session.explain(err, "eu-west-1")
    assert (explained is None) if line is None else _one_line(explained).startswith(line)
