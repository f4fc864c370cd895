"""The small patches moto 5.2.5 needs to emulate what pt2aws uses of AWS (see :mod:`.aws_emulator`).

Each acts on the moto server only; the product's AWS code path is unchanged. They are applied
once per process by :func:`apply` (documented in ``../shared/notes/stack-notes.md``, section 7c):

1. **Instance types.** moto's endpoint-config validator knows only a few x86 types; the patch
   validates against botocore's ``ProductionVariantInstanceType`` enum instead (the real API's
   list, which holds the Graviton families ml.c6g ... ml.r8g), read through
   :func:`pt2aws.sizing.catalog.botocore_instance_types`.
2. **STS in the SageMaker SDK** builds its client with an explicit regional endpoint that bypasses
   ``AWS_ENDPOINT_URL``; :class:`~pt2aws.emulator.server.Emulator` points it at the emulator
   while it runs (it is a patch of the SDK, not of moto, so it lives there).
3. **Endpoints that answer.** moto runs no model: its endpoint is ``InService`` at once and
   ``InvokeEndpoint`` answers a canned body. With :func:`serve_endpoints_with` (an
   :class:`pt2aws.emulator.endpoints.EndpointServers`), ``CreateEndpoint`` starts the
   model's image's serving software on this machine for its ``ModelDataUrl`` (read from the
   emulated S3): the endpoint is ``Creating`` until that answers, then ``InService`` (or
   ``Failed`` with the reason), ``InvokeEndpoint`` reaches it and ``DeleteEndpoint`` stops it.
   With :func:`forward_invocations_to` every ``InvokeEndpoint`` goes to one URL instead (tests'
   stub servers). Either way a non-2xx answer becomes a ``ModelError`` (HTTP 424) naming the
   original status, as SageMaker does, and an endpoint that does not exist (or was deleted) is a
   ``ValidationError``.
4. **Fault injection.** :func:`add_fault` makes the next call(s) of an operation in
   :data:`FAULT_OPERATIONS` fail with a given AWS error code (e.g. ``ThrottlingException``).
5. **IAM SimulatePrincipalPolicy** is not implemented by moto (HTTP 500, retried by botocore with
   a traceback per try); SDK v3 ``ModelTrainer`` calls it to check that the role may write to the
   staging bucket. The patch answers ``allowed`` for every requested action and resource, as for
   a role with the usual ``AmazonSageMakerFullAccess`` policy.
6. **Training jobs.** moto's training job is ``Completed`` the moment it is created and moto has
   no ``StopTrainingJob``. With :func:`set_training_seconds` a new job stays ``InProgress``
   that long (``DescribeTrainingJob`` then answers ``Completed``), and ``StopTrainingJob`` stops
   an ``InProgress`` job (``Stopped``) and refuses any other with a ``ValidationException``, as
   AWS does. With :func:`set_training_output`, a job that reaches ``Completed`` finds a local run
   folder's tarball where its ``model.tar.gz`` belongs (an emulated job trains nothing).
7. **SageMaker service quotas.** moto's Service Quotas knows only ``vpc``. With
   :func:`set_sagemaker_quotas` it answers ``ListServiceQuotas``, ``ListAWSDefaultServiceQuotas``,
   ``GetServiceQuota`` and ``GetAWSDefaultServiceQuota`` for ``sagemaker`` from the emulator's own
   table (names in AWS's pattern, values and codes the emulator's: a quota without an applied
   value answers ``NoSuchResourceException`` to ``GetServiceQuota``, as AWS may).
"""

from __future__ import annotations

import json
import time

#: Operations whose next calls :func:`add_fault` can make fail -> moto's handler method.
FAULT_OPERATIONS = {
    "CreateModel": "create_model",
    "CreateEndpointConfig": "create_endpoint_config",
    "CreateEndpoint": "create_endpoint",
    "InvokeEndpoint": "invoke_endpoint",
}

#: Per-process state read by the patched handlers (one emulator at a time).
_state: dict = {
    "applied": False,
    "faults": {},
    "forward_url": None,
    "endpoints": None,
    "training_seconds": 0.0,
    "training_output": None,
    "quotas": {},
}


def add_fault(
    operation: str,
    code: str = "ThrottlingException",
    message: str = "Rate exceeded (injected by the pt2aws emulator)",
    status: int = 400,
    times: int = 1,
) -> None:
    """Make the next ``times`` calls of ``operation`` fail with the AWS error ``code``, while an
    :class:`~pt2aws.emulator.server.Emulator` runs (its ``stop`` clears the queue).

    Args:
        operation: one of :data:`FAULT_OPERATIONS` (``CreateModel``, ``CreateEndpointConfig``,
            ``CreateEndpoint``, ``InvokeEndpoint``).
        code: the AWS error code the client sees (``ThrottlingException``, ``ModelError``,
            ``ValidationException``, ``InternalFailure`` ...).
        message: the error message.
        status: HTTP status of the error response (400 for throttling, 424 for ModelError,
            500 for InternalFailure).
        times: how many consecutive calls fail.

    Raises:
        ValueError: an operation not in :data:`FAULT_OPERATIONS`.
    """
    if operation not in FAULT_OPERATIONS:
        raise ValueError(
            f"cannot inject a fault into {operation!r}; choose one of {', '.join(FAULT_OPERATIONS)}"
        )
    _state["faults"].setdefault(operation, []).extend([(code, message, status)] * times)


def clear_faults() -> None:
    """Forget every queued fault."""
    _state["faults"].clear()


def forward_invocations_to(url: str | None) -> None:
    """Send every later ``InvokeEndpoint`` to ``url`` (``POST``); None: moto's canned answers."""
    _state["forward_url"] = url


def serve_endpoints_with(servers) -> None:
    """Start a model server per emulated endpoint with ``servers``
    (:class:`pt2aws.emulator.endpoints.EndpointServers`); None: moto's canned ones."""
    _state["endpoints"] = servers


def set_training_output(tarball) -> None:
    """``tarball()`` returns the bytes a completed emulated training job's ``model.tar.gz``
    holds (written to the emulated S3 when the job completes); None: nothing is written."""
    _state["training_output"] = tarball


def set_sagemaker_quotas(quotas: dict[str, tuple[float, bool]]) -> None:
    """The emulator's SageMaker quotas: ``{quota name: (value, applied)}`` (``applied`` False:
    only an AWS default exists for it)."""
    _state["quotas"] = dict(quotas)


def set_training_seconds(seconds: float) -> None:
    """Training jobs created from now on stay ``InProgress`` for ``seconds`` (0: moto's instant
    ``Completed``)."""
    _state["training_seconds"] = max(0.0, float(seconds))


def apply() -> None:
    """Apply patches 1, 3, 4, 5 and 6 of the module docstring, once per process."""
    if _state["applied"]:
        return
    _patch_instance_types()
    _patch_faults_and_forwarding()
    _patch_endpoint_servers()
    _patch_simulate_principal_policy()
    _patch_training_jobs()
    _patch_service_quotas()
    _state["applied"] = True


def _patch_instance_types() -> None:  # patch 1
    from moto.sagemaker import models
    from moto.sagemaker.exceptions import ValidationError

    from pt2aws.sizing.catalog import botocore_instance_types

    real_types = botocore_instance_types("hosting")

    def validate_instance_type(self, instance_type: str) -> None:
        if instance_type not in real_types:
            raise ValidationError(
                message=f"Value '{instance_type}' at 'instanceType' failed to satisfy constraint: "
                "Member must satisfy enum value set: ProductionVariantInstanceType"
            )

    models.FakeEndpointConfig.validate_instance_type = validate_instance_type


def _raise_queued_fault(operation: str) -> None:
    from moto.core.exceptions import JsonRESTError

    queue = _state["faults"].get(operation)
    if queue:
        code, message, status = queue.pop(0)
        error = JsonRESTError(code, message)
        error.code = status
        raise error


def _answer(status: int, content_type: str | None, body: bytes) -> tuple[int, dict, bytes]:
    """A model server's answer as SageMaker returns it: 200 as is, anything else a ModelError."""
    if status == 200:
        return 200, {"Content-Type": content_type or "application/json"}, body
    detail = body.decode("utf-8", "replace")[:2000]
    message = f'Received client error ({status}) from primary with message "{detail}"'
    payload = {"__type": "ModelError", "message": message, "OriginalStatusCode": status}
    headers = {
        "Content-Type": "application/json",
        "x-amzn-ErrorType": "ModelError",
        "status": 424,  # moto reads the status from this header
    }
    return 424, headers, json.dumps(payload).encode()


def _s3_object(account_id: str, url: str) -> bytes:
    """The bytes of ``s3://bucket/key`` in the emulated S3 (no HTTP round trip)."""
    from moto.s3.models import s3_backends

    bucket, key = url.removeprefix("s3://").split("/", 1)
    found = s3_backends[account_id]["aws"].get_object(bucket, key)
    if found is None:
        raise FileNotFoundError(f"{url} does not exist in the emulated S3")
    return found.value


def _check_endpoint_exists(response) -> None:
    """As SageMaker: invoking an endpoint that does not exist (or was deleted) is a 400."""
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.models import sagemaker_backends

    name = response.path.split("/")[2] if response.path.count("/") >= 2 else ""
    if name not in sagemaker_backends[response.current_account][response.region].endpoints:
        raise JsonRESTError(
            "ValidationError", f"Endpoint {name} of account {response.current_account} not found."
        )


def _patch_faults_and_forwarding() -> None:  # patches 3 and 4
    from moto.sagemaker import responses
    from moto.sagemakerruntime import responses as runtime_responses

    from pt2aws.emulator.endpoints import _post

    for operation, name in FAULT_OPERATIONS.items():
        cls = (
            runtime_responses.SageMakerRuntimeResponse
            if operation == "InvokeEndpoint"
            else responses.SageMakerResponse
        )
        original = getattr(cls, name)

        def wrapped(self, _original=original, _operation=operation):
            _raise_queued_fault(_operation)
            if _operation != "InvokeEndpoint":
                return _original(self)
            content_type, accept = self.headers.get("Content-Type"), self.headers.get("Accept")
            if _state["forward_url"]:
                _check_endpoint_exists(self)
                return _answer(*_post(_state["forward_url"], self.raw_body, content_type, accept))
            servers = _state["endpoints"]
            if servers is not None and servers.active:
                _check_endpoint_exists(self)
                name = self.path.split("/")[2]
                answer = servers.invoke(name, self.raw_body, content_type, accept)
                if answer is not None:
                    return _answer(*answer)
            return _original(self)

        setattr(cls, name, wrapped)


def _patch_endpoint_servers() -> None:  # patch 3: CreateEndpoint starts, DeleteEndpoint stops
    from moto.sagemaker import models

    original_create = models.SageMakerModelBackend.create_endpoint
    original_delete = models.SageMakerModelBackend.delete_endpoint

    def create_endpoint(self, endpoint_name, endpoint_config_name, tags):
        endpoint = original_create(self, endpoint_name, endpoint_config_name, tags)
        servers = _state["endpoints"]
        if servers is None or not servers.active:
            return endpoint
        config = self.endpoint_configs[endpoint_config_name]
        model = self._models[config.production_variants[0]["ModelName"]]
        container = model.primary_container or {}
        endpoint.endpoint_status = "Creating"

        def done(reason, _endpoint=endpoint):
            _endpoint.endpoint_status = "Failed" if reason else "InService"
            _endpoint.failure_reason = reason

        servers.create(
            endpoint_name,
            image=container.get("Image", ""),
            environment=container.get("Environment") or {},
            fetch=lambda: _s3_object(self.account_id, container.get("ModelDataUrl", "")),
            done=done,
        )
        return endpoint

    def delete_endpoint(self, endpoint_name):
        original_delete(self, endpoint_name)
        if _state["endpoints"] is not None:
            _state["endpoints"].delete(endpoint_name)

    models.SageMakerModelBackend.create_endpoint = create_endpoint
    models.SageMakerModelBackend.delete_endpoint = delete_endpoint


def _patch_simulate_principal_policy() -> None:  # patch 5
    from moto.core.responses import ActionResult
    from moto.iam.responses import IamResponse

    def simulate_principal_policy(self):
        resources = self._get_param("ResourceArns", []) or ["*"]
        results = [
            {"EvalActionName": action, "EvalResourceName": resource, "EvalDecision": "allowed"}
            for action in self._get_param("ActionNames", [])
            for resource in resources
        ]
        return ActionResult({"EvaluationResults": results, "IsTruncated": False})

    IamResponse.simulate_principal_policy = simulate_principal_policy


def _refresh_training_status(job, account_id: str) -> None:
    done_at = getattr(job, "pt2aws_done_at", None)
    if job.training_job_status == "InProgress" and done_at and time.time() >= done_at:
        job.training_job_status = job.secondary_status = "Completed"
    output = _state["training_output"]
    if job.training_job_status == "Completed" and output and not getattr(job, "pt2aws_out", 0):
        from moto.s3.models import s3_backends

        url = job.model_artifacts["S3ModelArtifacts"]
        bucket, key = url.removeprefix("s3://").split("/", 1)
        s3_backends[account_id]["aws"].put_object(bucket, key, output())
        job.pt2aws_out = True


def _patch_training_jobs() -> None:  # patch 6
    from moto.core.responses import ActionResult
    from moto.sagemaker import models, responses
    from moto.sagemaker.exceptions import ValidationError

    original_init = models.FakeTrainingJob.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if _state["training_seconds"] > 0:
            self.training_job_status, self.secondary_status = "InProgress", "Training"
            self.pt2aws_done_at = time.time() + _state["training_seconds"]

    def job_named(response):
        name = response._get_param("TrainingJobName")
        job = response.sagemaker_backend.training_jobs.get(name)
        if job is None:
            raise ValidationError(message=f"Could not find training job '{name}'.")
        _refresh_training_status(job, response.current_account)
        return job

    original_describe = responses.SageMakerResponse.describe_training_job

    def describe_training_job(self):
        job_named(self)
        return original_describe(self)

    def stop_training_job(self):
        job = job_named(self)
        if job.training_job_status != "InProgress":
            raise ValidationError(
                message="The request was rejected because the training job is in status "
                f"{job.training_job_status}."
            )
        job.training_job_status = job.secondary_status = "Stopped"
        return ActionResult({})

    models.FakeTrainingJob.__init__ = init
    responses.SageMakerResponse.describe_training_job = describe_training_job
    responses.SageMakerResponse.stop_training_job = stop_training_job


def _quota_entries(region: str, applied_only: bool) -> list[dict]:
    import hashlib

    out = []
    for name, (value, applied) in sorted(_state["quotas"].items()):
        if applied_only and not applied:
            continue
        code = "L-EMU" + hashlib.sha1(name.encode()).hexdigest()[:5].upper()
        out.append(
            {
                "ServiceCode": "sagemaker",
                "ServiceName": "Amazon SageMaker",
                "QuotaArn": f"arn:aws:servicequotas:{region}::sagemaker/{code}",
                "QuotaCode": code,
                "QuotaName": name,
                "Value": float(value),
                "Unit": "None",
                "Adjustable": True,
                "GlobalQuota": False,
            }
        )
    return out


def _patch_service_quotas() -> None:  # patch 7
    from moto.servicequotas.exceptions import NoSuchResource
    from moto.servicequotas.responses import ServiceQuotasResponse

    original_defaults = ServiceQuotasResponse.list_aws_default_service_quotas
    original_get = ServiceQuotasResponse.get_service_quota

    def params(self) -> dict:
        return json.loads(self.body or "{}")

    def one(self, applied_only: bool) -> str:
        code = params(self).get("QuotaCode")
        for quota in _quota_entries(self.region, applied_only):
            if quota["QuotaCode"] == code:
                return json.dumps({"Quota": quota})
        raise NoSuchResource

    def list_service_quotas(self):
        if params(self).get("ServiceCode") != "sagemaker":
            raise NoSuchResource
        return json.dumps({"Quotas": _quota_entries(self.region, applied_only=True)})

    def list_aws_default_service_quotas(self):
        if params(self).get("ServiceCode") != "sagemaker":
            return original_defaults(self)
        return json.dumps({"Quotas": _quota_entries(self.region, applied_only=False)})

    def get_service_quota(self):
        if params(self).get("ServiceCode") != "sagemaker":
            return original_get(self)
        return one(self, applied_only=True)

    def get_aws_default_service_quota(self):
        if params(self).get("ServiceCode") != "sagemaker":
            raise NoSuchResource
        return one(self, applied_only=False)

    ServiceQuotasResponse.list_service_quotas = list_service_quotas
    ServiceQuotasResponse.list_aws_default_service_quotas = list_aws_default_service_quotas
    ServiceQuotasResponse.get_service_quota = get_service_quota
    ServiceQuotasResponse.get_aws_default_service_quota = get_aws_default_service_quota
