"""Tests of :mod:`pt2aws.aws.session`."""

import pytest

from pt2aws.aws import session


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
    assert "LOCAL EMULATOR" in str(on) and "nothing is billed" in str(on)
    assert on.answered_by("x").startswith("the server at http://127.0.0.1")
    with pytest.raises(session.RoleError, match="needs ROLE_ARN"):
        session.AwsSession(region="eu-west-1").require_role()
    with pytest.raises(ValueError, match="pt2aws.emulator.server.start"):
        session.connect("emulator")
    real = session.connect(region="eu-west-1", role_arn="arn:aws:iam::1:role/r")
    assert (real.target, real.region, real.poll_s) == ("aws", "eu-west-1", 15.0)
    assert "REAL AWS ACCOUNT" in str(real)


def test_connect_closes_the_emulator_a_notebook_started():
    """A kernel switched from the emulator to AWS must not keep talking to the emulator."""
    import os

    from pt2aws.emulator import server as aws_emulator

    before = os.environ.get("AWS_ENDPOINT_URL")
    emulated = aws_emulator.start(model_servers=False)
    assert os.environ["AWS_ENDPOINT_URL"] == emulated.endpoint_url
    real = session.connect(region="us-east-1")
    assert os.environ.get("AWS_ENDPOINT_URL") == before and real.endpoint_url == before
    assert session._RUNNING_EMULATOR["session"] is None
