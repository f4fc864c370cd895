"""AWS sessions, and a local emulator of the AWS control plane (moto) for tests and workshops.

``Emulator`` runs a moto server on 127.0.0.1 in this process and points every boto3/SageMaker
client at it through ``AWS_ENDPOINT_URL`` with fake credentials, so the product's real AWS code
path runs unchanged over HTTP. It is an emulator: nothing is created in any AWS account, and
endpoint invocations answer whatever the emulator was told to answer.

moto 5.2.5 needs a few small patches, applied when the server starts (documented in
``../shared/notes/stack-notes.md``, section 7c):

1. **Instance types.** moto's endpoint-config validator knows only a few x86 types; the patch
   validates against botocore's ``ProductionVariantInstanceType`` enum instead (the real API's
   list, which holds the Graviton families ml.c6g … ml.r8g).
2. **Empty nested shapes.** moto's DescribeModel/DescribeEndpoint(Config) return ``VpcConfig: {}``
   and ``DataCaptureConfig: {}``, which sagemaker-core's pydantic shapes reject; the patch drops
   empty-dict values from those three responses, as AWS omits unset members.
3. **STS in the SageMaker SDK** builds its client with an explicit regional endpoint that bypasses
   ``AWS_ENDPOINT_URL``; the patch points it at the emulator.

Three more patches (each acts only on the moto
server; the product's AWS code path is unchanged):

4. **InvokeEndpoint forwarding.** moto runs no model: ``InvokeEndpoint`` answers a canned body.
   With ``Emulator(invocations_url=...)`` it forwards the request body, ``Content-Type`` and
   ``Accept`` to that URL (``POST``; e.g. the local SageMaker serving stack of
   :mod:`pt2aws.serving.local`) and answers with what the model server answered. A non-2xx
   answer becomes a ``ModelError`` (HTTP 424) naming the original status, as SageMaker does, and
   an endpoint that does not exist (or was deleted) is a ``ValidationError``, as on AWS.
5. **Fault injection.** :meth:`Emulator.inject_fault` makes the next call(s) of an operation
   (``CreateModel``, ``CreateEndpointConfig``, ``CreateEndpoint``, ``InvokeEndpoint``) fail with
   a given AWS error code (e.g. ``ThrottlingException``), to test retries and clean-up.
6. **IAM SimulatePrincipalPolicy** is not implemented by moto (HTTP 500, retried by botocore with
   a traceback per try); SDK v3 ``ModelTrainer`` calls it to check that the role may write to the
   staging bucket. The patch answers ``allowed`` for every requested action and resource, as for
   a role with the usual ``AmazonSageMakerFullAccess`` policy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket

from pt2aws.aws.session import list_sagemaker_resources, list_scalable_targets

EMULATOR_ACCOUNT = "123456789012"  # moto's default account id


EMULATOR_REGION = "us-east-1"  # the emulator's default region (any region works)


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


#: Per-process state read by the patched moto handlers (one emulator at a time).
_FAULTS: dict[str, list[tuple[str, str, int]]] = {}


_FORWARD: dict[str, str | None] = {"url": None}


_FAULT_OPERATIONS = {
    "CreateModel": "create_model",
    "CreateEndpointConfig": "create_endpoint_config",
    "CreateEndpoint": "create_endpoint",
    "InvokeEndpoint": "invoke_endpoint",
}


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
    _patch_faults_and_forwarding()

    from moto.iam.responses import IamResponse

    def simulate_principal_policy(self):  # patch 6
        resources = self._get_param("ResourceArns", []) or ["*"]
        results = [
            {"EvalActionName": action, "EvalResourceName": resource, "EvalDecision": "allowed"}
            for action in self._get_param("ActionNames", [])
            for resource in resources
        ]
        return ActionResult({"EvaluationResults": results, "IsTruncated": False})

    IamResponse.simulate_principal_policy = simulate_principal_policy
    _PATCHED = True


def _raise_injected_fault(operation: str) -> None:
    from moto.core.exceptions import JsonRESTError

    queue = _FAULTS.get(operation)
    if queue:
        code, message, status = queue.pop(0)
        error = JsonRESTError(code, message)
        error.code = status
        raise error


def _forward_invocation(url: str, body: bytes, headers) -> tuple[int, dict, bytes]:
    """POST ``body`` to the model server at ``url``; map its answer as SageMaker does."""
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": headers.get("Content-Type") or "application/json",
            "Accept": headers.get("Accept") or "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return (
                200,
                {"Content-Type": response.headers.get("Content-Type", "application/json")},
                response.read(),
            )
    except urllib.error.HTTPError as err:
        detail = err.read().decode("utf-8", "replace")[:2000]
        message = f'Received client error ({err.code}) from primary with message "{detail}"'
        payload = {"__type": "ModelError", "message": message, "OriginalStatusCode": err.code}
        headers = {
            "Content-Type": "application/json",
            "x-amzn-ErrorType": "ModelError",
            "status": 424,  # moto reads the status from this header
        }
        return 424, headers, json.dumps(payload).encode()


def _check_endpoint_exists(response) -> None:
    """As SageMaker: invoking an endpoint that does not exist (or was deleted) is a 400."""
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.models import sagemaker_backends

    name = response.path.split("/")[2] if response.path.count("/") >= 2 else ""
    if name not in sagemaker_backends[response.current_account][response.region].endpoints:
        raise JsonRESTError(
            "ValidationError", f"Endpoint {name} of account {response.current_account} not found."
        )


def _patch_faults_and_forwarding() -> None:
    """Patches 4 and 5 of the module docstring."""
    from moto.sagemaker import responses
    from moto.sagemakerruntime import responses as runtime_responses

    for operation, name in _FAULT_OPERATIONS.items():
        cls = (
            runtime_responses.SageMakerRuntimeResponse
            if operation == "InvokeEndpoint"
            else responses.SageMakerResponse
        )
        original = getattr(cls, name)

        def wrapped(self, _original=original, _operation=operation):
            _raise_injected_fault(_operation)
            if _operation == "InvokeEndpoint" and _FORWARD["url"]:
                _check_endpoint_exists(self)
                return _forward_invocation(_FORWARD["url"], self.raw_body, self.headers)
            return _original(self)

        setattr(cls, name, wrapped)


class Emulator:
    """A moto server on 127.0.0.1 that emulates S3, SageMaker, STS, IAM and Application Auto Scaling.

    Use as a context manager; while it runs, ``AWS_ENDPOINT_URL`` and fake credentials are set in
    ``os.environ`` (restored on exit), so boto3 and the SageMaker SDK talk to it.

    Args:
        region: the emulated region (default ``us-east-1``).
        port: TCP port; default a free one.
        invocations_url: where ``InvokeEndpoint`` forwards requests (patch 4), e.g.
            ``LocalEndpoint(...).url + "/invocations"``; ``None`` keeps moto's canned answers.
    """

    def __init__(
        self,
        region: str = EMULATOR_REGION,
        port: int | None = None,
        invocations_url: str | None = None,
    ):
        self.region = region
        self.invocations_url = invocations_url
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = None
        self._saved_env: dict[str, str | None] = {}
        self._sts_patch = None

    def start(self) -> Emulator:
        from moto.server import ThreadedMotoServer

        _patch_moto()
        _FAULTS.clear()
        _FORWARD["url"] = self.invocations_url
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
        _FAULTS.clear()
        _FORWARD["url"] = None
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

    def forward_invocations(self, url: str | None) -> None:
        """Send every later ``InvokeEndpoint`` to ``url`` (``None``: moto's canned answers)."""
        self.invocations_url = _FORWARD["url"] = url

    def inject_fault(
        self,
        operation: str,
        code: str = "ThrottlingException",
        message: str = "Rate exceeded (injected by the pt2aws emulator)",
        status: int = 400,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``operation`` fail with the AWS error ``code``.

        Args:
            operation: one of ``CreateModel``, ``CreateEndpointConfig``, ``CreateEndpoint``,
                ``InvokeEndpoint``.
            code: the AWS error code the client sees (``ThrottlingException``, ``ModelError``,
                ``ValidationException``, ``InternalFailure`` ...).
            status: HTTP status of the error response (400 for throttling, 424 for ModelError,
                500 for InternalFailure).

        Raises:
            ValueError: an operation the emulator cannot fail.
        """
        if operation not in _FAULT_OPERATIONS:
            raise ValueError(
                f"cannot inject a fault into {operation!r}; choose one of {', '.join(_FAULT_OPERATIONS)}"
            )
        _FAULTS.setdefault(operation, []).extend([(code, message, status)] * times)

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

    def seed_public_parameter(self, name: str, value: str) -> None:
        """Make the emulated SSM answer ``value`` for the AWS-owned public parameter ``name``.

        AWS publishes parameters under ``/aws/service/...`` (e.g. DLAMI IDs) that no account can
        write (``PutParameter`` answers AccessDenied, in moto too), so the emulator's store is
        filled directly. moto ships only the Amazon Linux ones.
        """
        import datetime

        from moto.ssm.models import Parameter, ssm_backends

        if self._server is None:
            raise RuntimeError(
                "start the emulator before seeding parameters (use `with Emulator()`)"
            )
        store = ssm_backends[EMULATOR_ACCOUNT][self.region]._parameters
        store[name].append(
            Parameter(
                account_id=EMULATOR_ACCOUNT,
                name=name,
                value=value,
                parameter_type="String",
                description="seeded by pt2aws.aws.Emulator",
                allowed_pattern=None,
                keyid=None,
                last_modified_date=datetime.datetime.now(datetime.timezone.utc),
                version=len(store[name]) + 1,
                data_type="aws:ec2:image" if value.startswith("ami-") else "text",
            )
        )

    def sagemaker_resources(self) -> dict[str, list[str]]:
        """Names of the models, endpoint configs, endpoints and scalable targets the emulator holds."""
        found = list_sagemaker_resources(region=self.region)
        found["scalable_targets"] = list_scalable_targets(region=self.region)
        return found


@contextlib.contextmanager
def local_model_server(model, workdir, *, attempts: int = 3, env: dict[str, str] | None = None):
    """Start :class:`pt2aws.serving.local.LocalEndpoint` for the emulator's ``invocations_url``.

    Each attempt takes fresh free ports: the ports are picked before TorchServe binds them, so on
    a busy machine another process can take one in between ("Address already in use"); that
    attempt fails and the next one usually succeeds. Stops the server on exit.

    Args:
        model: ``model.tar.gz`` or a model folder.
        workdir: folder for the server's files (``workdir``, then ``workdir-retry2`` ...).
        attempts: starts to try.
        env: extra server environment (e.g. ``{"PT2AWS_MAX_BATCH": "64"}``).

    Yields:
        The running endpoint (``.url``, ``.startup_s``).

    Raises:
        pt2aws.serving.local.LocalEndpointError: every attempt failed (the last error).
    """
    from pathlib import Path

    from pt2aws.serving.local import LocalEndpoint, LocalEndpointError

    last = None
    for attempt in range(1, attempts + 1):
        folder = Path(workdir) if attempt == 1 else Path(f"{workdir}-retry{attempt}")
        endpoint = LocalEndpoint(model, folder, env=env)
        try:
            endpoint.start()
        except LocalEndpointError as err:
            last = err
            logging.getLogger(__name__).warning(
                "local model server attempt %d/%d failed: %s", attempt, attempts, str(err)[:300]
            )
            continue
        try:
            yield endpoint
        finally:
            endpoint.stop()
        return
    raise last


@contextlib.contextmanager
def aws_target(target: str, region: str | None = None, invocations_url: str | None = None):
    """``with aws_target("emulator") as emulator:`` … (``None`` for ``"aws"``, the real account).

    Args:
        invocations_url: emulator only: forward ``InvokeEndpoint`` there (see :class:`Emulator`).

    Raises:
        ValueError: a target other than ``emulator`` or ``aws``.
    """
    if target == "emulator":
        with Emulator(
            region=region or EMULATOR_REGION, invocations_url=invocations_url
        ) as emulator:
            yield emulator
    elif target == "aws":
        yield None
    else:
        raise ValueError(f"AWS_TARGET must be 'emulator' or 'aws', not {target!r}")
