"""The real-account checklist and the quota check: against the emulator, and with recorded
Service Quotas answers (botocore Stubber) for what only AWS says."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from pt2aws.aws import account
from pt2aws.aws.session import AwsSession, AwsSetupError
from pt2aws.emulator import patches
from pt2aws.emulator import server as aws_emulator


@pytest.fixture(scope="module")
def session():
    on = aws_emulator.start(model_servers=False)
    yield on
    on.close()


def test_checklist_reads_the_quotas_and_prices_the_run_on_the_emulator(session):
    c = account.checklist(
        session,
        endpoint_instance="ml.c7g.xlarge",
        training_instance="ml.p4d.24xlarge",
        max_runtime_s=3600,
        keep_endpoint=True,
    )
    assert (c["target"], c["region"], c["account"]) == ("emulator", "us-east-1", "123456789012")
    endpoint, training = c["quotas"]
    assert endpoint["name"] == "ml.c7g.xlarge for endpoint usage"
    assert (endpoint["value"], endpoint["source"], endpoint["ok"]) == (2.0, "applied", True)
    # a GPU training quota with only a default value, 0: as new accounts often start
    assert training["name"] == "ml.p4d.24xlarge for training job usage"
    assert (training["value"], training["source"], training["ok"]) == (0.0, "AWS default", False)
    assert f"--quota-code {training['code']} --desired-value 1" in training["reason"]
    assert "ResourceLimitExceeded" in training["reason"]
    assert "iam:PassRole" in c["caller_actions"]["pass the execution role"][0]
    assert "sagemaker:CreateTrainingJob" in c["caller_actions"]["training job (notebook 01)"]
    assert "pricing:GetProducts" in str(c["caller_actions"]) and c["arm64_build"] is None
    endpoint_cost, _, training_cost, _ = c["cost"]  # 0.1734 USD/h; 37.688 USD/h for 1 h
    assert f"about {0.1734 * 10 / 60:.3f} USD for 10 min" in endpoint_cost
    assert f"at most {0.1734 * (1830 / 60 + 2) / 60:.3f} USD" in endpoint_cost
    assert "at most 37.69 USD (1 h max runtime)" in training_cost
    text = account.format_checklist(c)
    assert len(text.splitlines()) <= 40
    assert "OK: ml.c7g.xlarge for endpoint usage = 2 (applied), needed 1" in text
    assert "TOO LOW: ml.p4d.24xlarge for training job usage = 0 (AWS default)" in text
    assert "KEEP_ENDPOINT: 0.1734 USD/h (4.16 USD/day)" in text


def test_an_unknown_quota_and_the_emulators_own_values(session, monkeypatch):
    quotas = {**session.emulator.quotas, "ml.c8g.xlarge for endpoint usage": (0, True)}
    monkeypatch.setitem(patches._state, "quotas", quotas)
    low = account.check_quota(session, "ml.c8g.xlarge", needed=1)
    assert (low["value"], low["ok"]) == (0.0, False)
    unknown = account.check_quota(session, "ml.r8g.24xlarge")
    assert unknown["ok"] is None and "no quota named" in unknown["reason"]
    own = account.checklist(session, endpoint_instance="ml.c7g.xlarge", own_image=True)
    assert own["arm64_build"]["codebuild"].endswith("pushes to ECR")
    assert "ecr:PutImage" in own["caller_actions"]["your own image (ECR)"]


def test_require_ready_stops_before_anything_is_created(session):
    gpu = account.checklist(session, training_instance="ml.p4d.24xlarge", max_runtime_s=3600)
    with pytest.raises(AwsSetupError) as info:
        account.require_ready(gpu)
    assert str(info.value).startswith(
        "quota too low: ml.p4d.24xlarge for training job usage is 0, the run needs 1: request an "
        "increase (Service Quotas console, or `aws service-quotas request-service-quota-increase"
    )
    account.require_ready(account.checklist(session, endpoint_instance="ml.c7g.xlarge"))  # ready
    no_role = account.checklist(
        session.emulator.session(role_arn=""), endpoint_instance="ml.c7g.xlarge"
    )
    with pytest.raises(AwsSetupError, match=r"^no execution role: set ROLE_ARN"):
        account.require_ready(no_role)


class _Stubbed(AwsSession):
    """An AWS session whose Service Quotas client answers recorded responses."""

    def client(self, service, **kwargs):
        return self.stubbed


def _stubbed_session(*responses):
    client = boto3.client(
        "service-quotas", region_name="eu-west-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    stubber = Stubber(client)
    for method, answer in responses:
        if isinstance(answer, str):
            stubber.add_client_error(method, answer, "recorded error")
        else:
            stubber.add_response(method, answer)
    stubber.activate()
    session = _Stubbed(region="eu-west-1")
    session.stubbed = client
    return session, stubber


QUOTA = {
    "ServiceCode": "sagemaker",
    "QuotaCode": "L-0123ABCD",
    "QuotaName": "ml.c7g.xlarge for endpoint usage",
    "Value": 2.0,
}


def test_no_applied_value_falls_back_to_the_aws_default():
    """ListServiceQuotas may have no applied value (the API reference): the default stands."""
    session, stubber = _stubbed_session(
        ("list_service_quotas", {"Quotas": [{**QUOTA, "QuotaName": "another"}]}),
        ("list_aws_default_service_quotas", {"Quotas": [{**QUOTA, "Value": 4.0}]}),
    )
    quota = account.check_quota(session, "ml.c7g.xlarge", "endpoint", needed=2)
    stubber.assert_no_pending_responses()
    assert (quota["code"], quota["value"], quota["source"], quota["ok"]) == (
        "L-0123ABCD",
        4.0,
        "AWS default",
        True,
    )


def test_access_denied_is_reported_not_raised():
    session, _ = _stubbed_session(("list_service_quotas", "AccessDeniedException"))
    quota = account.check_quota(session, "ml.c7g.xlarge")
    assert quota["ok"] is None and quota["value"] is None
    assert "AccessDeniedException" in quota["reason"] and "servicequotas:*" in quota["reason"]


def test_the_codebuild_buildspec_builds_the_dockerfile_natively_and_prints_the_uri():
    from pathlib import Path

    import yaml

    root = Path(account.__file__).resolve().parents[3]
    spec = yaml.safe_load((root / "container" / "buildspec-arm64.yml").read_text())
    assert spec["version"] == 0.2
    build = " ".join(spec["phases"]["build"]["commands"])
    assert "docker build --platform linux/arm64" in build and "-f container/Dockerfile" in build
    assert (root / "container" / "Dockerfile").is_file()
    assert any("docker push" in c for c in spec["phases"]["post_build"]["commands"])
    assert "sagemaker" in spec["env"]["variables"]["REPO"]  # covered by the managed policy
    assert "container/buildspec-arm64.yml" in account.FACTS["arm64_build"]["codebuild"]
