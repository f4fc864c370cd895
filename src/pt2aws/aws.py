"""AWS sessions, and a local emulator of the AWS control plane (moto) for tests and workshops.

``Emulator`` runs a moto server on 127.0.0.1 in this process and points every boto3/SageMaker
client at it through ``AWS_ENDPOINT_URL`` with fake credentials, so the product's real AWS code
path runs unchanged over HTTP. It is an emulator: nothing is created in any AWS account, and
endpoint invocations answer whatever the emulator was told to answer.

moto 5.2.5 needs three small patches, applied when the server starts (documented in
``../shared/notes/stack-notes.md``, section 7c):

1. **Instance types.** moto's endpoint-config validator knows only a few x86 types; the patch
   validates against botocore's ``ProductionVariantInstanceType`` enum instead (the real API's
   list, which holds the Graviton families ml.c6g … ml.r8g).
2. **Empty nested shapes.** moto's DescribeModel/DescribeEndpoint(Config) return ``VpcConfig: {}``
   and ``DataCaptureConfig: {}``, which sagemaker-core's pydantic shapes reject; the patch drops
   empty-dict values from those three responses, as AWS omits unset members.
3. **STS in the SageMaker SDK** builds its client with an explicit regional endpoint that bypasses
   ``AWS_ENDPOINT_URL``; the patch points it at the emulator.
4. **IAM SimulatePrincipalPolicy** is not implemented by moto (HTTP 500, retried by botocore with
   a traceback per try); SDK v3 ``ModelTrainer`` calls it to check that the role may write to the
   staging bucket. The patch answers ``allowed`` for every requested action and resource, as for
   a role with the usual ``AmazonSageMakerFullAccess`` policy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket

EMULATOR_ACCOUNT = "123456789012"  # moto's default account id
EMULATOR_ROLE_ARN = f"arn:aws:iam::{EMULATOR_ACCOUNT}:role/pt2aws-emulator-sagemaker-role"
_ENV_KEYS = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "SAGEMAKER_VALIDATE_ROLE",
    "AWS_PROFILE",
)
_PATCHED = False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _drop_empty(value):
    if isinstance(value, dict):
        return {k: _drop_empty(v) for k, v in value.items() if v != {}}
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def _patch_moto() -> None:
    """Apply the documented moto patches once per process (see the module docstring)."""
    global _PATCHED
    if _PATCHED:
        return
    import botocore.session
    from moto.core.responses import ActionResult
    from moto.sagemaker import models, responses
    from moto.sagemaker.exceptions import ValidationError

    real_types = set(
        botocore.session.get_session()
        .get_service_model("sagemaker")
        .shape_for("ProductionVariantInstanceType")
        .enum
    )

    def validate_instance_type(self, instance_type: str) -> None:
        if instance_type not in real_types:
            raise ValidationError(
                message=f"Value '{instance_type}' at 'instanceType' failed to satisfy constraint: "
                "Member must satisfy enum value set: ProductionVariantInstanceType"
            )

    models.FakeEndpointConfig.validate_instance_type = validate_instance_type
    for name in ("describe_model", "describe_endpoint_config", "describe_endpoint"):
        original = getattr(responses.SageMakerResponse, name)

        def wrapped(self, _original=original):
            return ActionResult(_drop_empty(_original(self).result))

        setattr(responses.SageMakerResponse, name, wrapped)

    from moto.iam.responses import IamResponse

    def simulate_principal_policy(self):  # patch 4
        resources = self._get_param("ResourceArns", []) or ["*"]
        results = [
            {"EvalActionName": action, "EvalResourceName": resource, "EvalDecision": "allowed"}
            for action in self._get_param("ActionNames", [])
            for resource in resources
        ]
        return ActionResult({"EvaluationResults": results, "IsTruncated": False})

    IamResponse.simulate_principal_policy = simulate_principal_policy
    _PATCHED = True


class Emulator:
    """A moto server on 127.0.0.1 that emulates S3, SageMaker, STS, IAM and Application Auto Scaling.

    Use as a context manager; while it runs, ``AWS_ENDPOINT_URL`` and fake credentials are set in
    ``os.environ`` (restored on exit), so boto3 and the SageMaker SDK talk to it.

    Args:
        region: the emulated region (default ``us-east-1``).
        port: TCP port; default a free one.
    """

    def __init__(self, region: str = "us-east-1", port: int | None = None):
        self.region = region
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = None
        self._saved_env: dict[str, str | None] = {}
        self._sts_patch = None

    def start(self) -> Emulator:
        from moto.server import ThreadedMotoServer

        _patch_moto()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        self._saved_env = {k: os.environ.get(k) for k in _ENV_KEYS}
        os.environ.pop("AWS_PROFILE", None)
        os.environ.pop("AWS_SESSION_TOKEN", None)
        os.environ.update(
            AWS_ENDPOINT_URL=self.url,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION=self.region,
            SAGEMAKER_VALIDATE_ROLE="false",
        )
        try:  # patch 3: the SDK's STS endpoint (only when the SDK is used)
            from sagemaker.core.helper import session_helper

            self._sts_patch = (session_helper, session_helper.sts_regional_endpoint)
            session_helper.sts_regional_endpoint = lambda region: self.url
        except (ImportError, AttributeError):
            self._sts_patch = None
        return self

    def stop(self) -> None:
        if self._sts_patch:
            module, original = self._sts_patch
            module.sts_regional_endpoint = original
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def queue_endpoint_result(self, body: str, content_type: str = "application/json") -> None:
        """Make the next ``InvokeEndpoint`` answer ``body`` (moto's result queue).

        moto does not run models: without this it answers a canned ``b"body"``.
        """
        import json
        import urllib.request

        payload = json.dumps({"results": [{"Body": body, "ContentType": content_type}]}).encode()
        request = urllib.request.Request(
            f"{self.url}/moto-api/static/sagemaker/endpoint-results",
            data=payload,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def sagemaker_resources(self) -> dict[str, list[str]]:
        """Names of the models, endpoint configs and endpoints the emulator holds (should be empty)."""
        return list_sagemaker_resources(region=self.region)


def boto_session(region: str | None = None):
    """A ``boto3.Session`` for ``region`` (default: the configured one, else ``us-east-1``)."""
    import boto3

    session = boto3.Session()
    return boto3.Session(region_name=region or session.region_name or "us-east-1")


def list_sagemaker_resources(prefix: str = "", region: str | None = None) -> dict[str, list[str]]:
    """Names of SageMaker models, endpoint configs and endpoints starting with ``prefix``."""
    sm = boto_session(region).client("sagemaker")
    found = {"endpoints": [], "endpoint_configs": [], "models": []}
    for key, call, field, name_key in (
        ("endpoints", "list_endpoints", "Endpoints", "EndpointName"),
        ("endpoint_configs", "list_endpoint_configs", "EndpointConfigs", "EndpointConfigName"),
        ("models", "list_models", "Models", "ModelName"),
    ):
        for page in sm.get_paginator(call).paginate(**({"NameContains": prefix} if prefix else {})):
            found[key] += [
                item[name_key] for item in page[field] if item[name_key].startswith(prefix)
            ]
    return found


@contextlib.contextmanager
def aws_target(target: str, region: str | None = None):
    """``with aws_target("emulator") as emulator:`` … (``None`` for ``"aws"``, the real account).

    Raises:
        ValueError: a target other than ``emulator`` or ``aws``.
    """
    if target == "emulator":
        with Emulator(region=region or "us-east-1") as emulator:
            yield emulator
    elif target == "aws":
        yield None
    else:
        raise ValueError(f"AWS_TARGET must be 'emulator' or 'aws', not {target!r}")
