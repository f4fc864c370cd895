"""The patches moto 5.2.5 needs for what pt2aws uses of AWS, once per process:

1. Instance types: botocore's ``ProductionVariantInstanceType`` enum (Graviton included).
2. SDK resources: moto's empty describe dicts (``VpcConfig: {}``), which SDK shapes reject, go.
3. Endpoints that answer: ``CreateEndpoint`` starts a server (:mod:`pt2aws.emulator.endpoints`;
   ``Creating``, then ``InService`` or ``Failed``), ``InvokeEndpoint`` reaches it (non-2xx:
   ``ModelError``, HTTP 424, as SageMaker), ``DeleteEndpoint`` stops it.
4. IAM ``SimulatePrincipalPolicy`` (``ModelTrainer``'s role check; moto lacks it): all allowed.
5. ``StopTrainingJob`` (moto lacks it), as AWS; a completed job finds ``training_output()``.
6. SageMaker quotas (moto's Service Quotas knows only ``vpc``) from the emulator's table.
"""

from __future__ import annotations

import hashlib
import json

#: What the patched handlers read (one emulator at a time): :func:`configure`.
_state: dict = {"applied": False}


def configure(*, endpoints=None, training_output=None, quotas=None) -> dict:
    """Set what the patched handlers use (no arguments: moto's behaviour); returns the settings
    before. ``endpoints``: an :class:`~pt2aws.emulator.endpoints.EndpointServers` (None: canned);
    ``training_output()``: a completed job's ``model.tar.gz``; ``quotas``: ``{name: (value,
    applied)}``."""
    before = {k: _state[k] for k in ("endpoints", "training_output", "quotas") if k in _state}
    _state.update(endpoints=endpoints, training_output=training_output, quotas=dict(quotas or {}))
    return before


def apply() -> None:
    """Apply the patches of the module docstring, once per process."""
    if _state["applied"]:
        return
    from moto.core.responses import ActionResult
    from moto.sagemaker import models, responses
    from moto.sagemaker.exceptions import ValidationError

    from pt2aws.sizing.catalog import botocore_instance_types

    hosting = botocore_instance_types("hosting")

    def validate_instance_type(self, instance_type: str) -> None:  # 1
        if instance_type not in hosting:
            raise ValidationError(message=f"Value '{instance_type}' at 'instanceType' failed to "
                                  "satisfy enum value set: ProductionVariantInstanceType")  # fmt: skip

    models.FakeEndpointConfig.validate_instance_type = validate_instance_type
    for name in ("describe_model", "describe_endpoint_config", "describe_endpoint"):  # 2
        original = getattr(responses.SageMakerResponse, name)

        def describe(self, _original=original):
            answer = _original(self)
            return ActionResult({k: v for k, v in answer.result.items() if v != {}})

        setattr(responses.SageMakerResponse, name, describe)
    _patch_endpoints(models)
    _patch_simulate_principal_policy()
    _patch_training_jobs(models, responses, ActionResult, ValidationError)
    _patch_service_quotas()
    configure()
    _state["applied"] = True


def _model_error(status: int, content_type: str | None, body: bytes):
    """A model server's answer as SageMaker returns it: 200 as is, anything else a ModelError."""
    if status == 200:
        return 200, {"Content-Type": content_type or "application/json"}, body
    detail = body.decode("utf-8", "replace")[:2000]
    message = f'Received client error ({status}) from primary with message "{detail}"'
    payload = {"__type": "ModelError", "message": message, "OriginalStatusCode": status}
    headers = {"Content-Type": "application/json", "x-amzn-ErrorType": "ModelError", "status": 424}
    return 424, headers, json.dumps(payload).encode()


def _patch_endpoints(models) -> None:  # 3
    from moto.core.exceptions import JsonRESTError
    from moto.s3.models import s3_backends
    from moto.sagemakerruntime.responses import SageMakerRuntimeResponse

    create, delete = (
        models.SageMakerModelBackend.create_endpoint,
        models.SageMakerModelBackend.delete_endpoint,
    )
    invoke = SageMakerRuntimeResponse.invoke_endpoint

    def create_endpoint(self, endpoint_name, endpoint_config_name, tags):
        endpoint = create(self, endpoint_name, endpoint_config_name, tags)
        servers = _state["endpoints"]
        if servers is None:
            return endpoint
        config = self.endpoint_configs[endpoint_config_name]
        container = self._models[config.production_variants[0]["ModelName"]].primary_container
        url = (container or {}).get("ModelDataUrl", "")
        endpoint.endpoint_status = "Creating"

        def fetch() -> bytes:
            bucket, key = url.removeprefix("s3://").split("/", 1)
            found = s3_backends[self.account_id]["aws"].get_object(bucket, key)
            if found is None:
                raise FileNotFoundError(f"{url} does not exist in the emulated S3")
            return found.value

        def done(reason):
            endpoint.endpoint_status = "Failed" if reason else "InService"
            endpoint.failure_reason = reason

        servers.create(endpoint_name, (container or {}).get("Environment") or {}, fetch, done)
        return endpoint

    def delete_endpoint(self, endpoint_name):
        delete(self, endpoint_name)
        if _state["endpoints"] is not None:
            _state["endpoints"].delete(endpoint_name)

    def invoke_endpoint(self):
        servers = _state["endpoints"]
        if servers is None:
            return invoke(self)
        name = self.path.split("/")[2]
        if name not in models.sagemaker_backends[self.current_account][self.region].endpoints:
            raise JsonRESTError(
                "ValidationError", f"Endpoint {name} of account {self.current_account} not found."
            )
        answer = servers.invoke(
            name, self.raw_body, self.headers.get("Content-Type"), self.headers.get("Accept")
        )
        return invoke(self) if answer is None else _model_error(*answer)

    models.SageMakerModelBackend.create_endpoint = create_endpoint
    models.SageMakerModelBackend.delete_endpoint = delete_endpoint
    SageMakerRuntimeResponse.invoke_endpoint = invoke_endpoint


def _patch_simulate_principal_policy() -> None:  # 4
    from moto.core.responses import ActionResult
    from moto.iam.responses import IamResponse

    def simulate_principal_policy(self):
        results = [
            {"EvalActionName": action, "EvalResourceName": resource, "EvalDecision": "allowed"}
            for action in self._get_param("ActionNames", [])
            for resource in self._get_param("ResourceArns", []) or ["*"]
        ]
        return ActionResult({"EvaluationResults": results, "IsTruncated": False})

    IamResponse.simulate_principal_policy = simulate_principal_policy


def _patch_training_jobs(models, responses, ActionResult, ValidationError) -> None:  # 5
    from moto.s3.models import s3_backends

    describe = responses.SageMakerResponse.describe_training_job

    def job_named(response):
        name = response._get_param("TrainingJobName")
        job = response.sagemaker_backend.training_jobs.get(name)
        if job is None:
            raise ValidationError(message=f"Could not find training job '{name}'.")
        output = _state["training_output"]
        if job.training_job_status == "Completed" and output and not getattr(job, "pt2aws_out", 0):
            bucket, key = (
                job.model_artifacts["S3ModelArtifacts"].removeprefix("s3://").split("/", 1)
            )
            s3_backends[response.current_account]["aws"].put_object(bucket, key, output())
            job.pt2aws_out = True
        return job

    def describe_training_job(self):
        job_named(self)
        return describe(self)

    def stop_training_job(self):
        job = job_named(self)
        if job.training_job_status != "InProgress":
            raise ValidationError(
                message="The request was rejected because the training job is in status "
                f"{job.training_job_status}."
            )
        job.training_job_status = job.secondary_status = "Stopped"
        return ActionResult({})

    responses.SageMakerResponse.describe_training_job = describe_training_job
    responses.SageMakerResponse.stop_training_job = stop_training_job


def _patch_service_quotas() -> None:  # 6
    from moto.servicequotas.exceptions import NoSuchResource
    from moto.servicequotas.responses import ServiceQuotasResponse as Response

    def handler(original, applied_only: bool, one: bool):
        def answer(self):
            asked = json.loads(self.body or "{}")
            if asked.get("ServiceCode") != "sagemaker":
                if original is None:
                    raise NoSuchResource
                return original(self)
            found = [
                {"ServiceCode": "sagemaker", "QuotaName": name, "Value": float(value),
                 "QuotaCode": "L-EMU" + hashlib.sha1(name.encode()).hexdigest()[:5].upper()}
                for name, (value, applied) in sorted(_state["quotas"].items())
                if applied or not applied_only
            ]  # fmt: skip
            if not one:
                return json.dumps({"Quotas": found})
            quota = next((q for q in found if q["QuotaCode"] == asked.get("QuotaCode")), None)
            if quota is None:
                raise NoSuchResource
            return json.dumps({"Quota": quota})

        return answer

    Response.list_service_quotas = handler(None, True, False)
    Response.list_aws_default_service_quotas = handler(
        Response.list_aws_default_service_quotas, False, False
    )
    Response.get_service_quota = handler(Response.get_service_quota, True, True)
    Response.get_aws_default_service_quota = handler(None, False, True)
