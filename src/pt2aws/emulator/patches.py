"""What moto 5.2.5 lacks for pt2aws, as one table of handlers (:data:`HANDLERS`): botocore's
instance types, describes without empty dicts (SDK shapes reject them), endpoints answered by a
model server, ``SimulatePrincipalPolicy`` (the SDK's ModelTrainer asks it), ``StopTrainingJob``, a
job's model, SageMaker quotas."""

from __future__ import annotations

import hashlib
import json
from functools import partial

from moto.core.exceptions import JsonRESTError
from moto.core.responses import ActionResult
from moto.iam.responses import IamResponse
from moto.s3.models import s3_backends
from moto.sagemaker import models
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.responses import SageMakerResponse
from moto.sagemakerruntime.responses import SageMakerRuntimeResponse
from moto.servicequotas.exceptions import NoSuchResource
from moto.servicequotas.responses import ServiceQuotasResponse

from pt2aws.sizing.catalog import botocore_instance_types

#: What the handlers read, set by the running emulator (None, {}: moto's behaviour):
#: ``endpoints`` (``EndpointServers``), ``training_output()`` (a job's ``model.tar.gz``),
#: ``quotas`` (``{name: (value, applied)}``).
_state: dict = {"applied": False, "endpoints": None, "training_output": None, "quotas": {}}


def validate_instance_type(self, original, instance_type: str) -> None:
    if instance_type not in botocore_instance_types("hosting"):
        raise ValidationError(message=f"Value '{instance_type}' at 'instanceType' failed to satisfy "
                                "enum value set: ProductionVariantInstanceType")  # fmt: skip


def describe_without_empty(self, original):
    return ActionResult({k: v for k, v in original(self).result.items() if v != {}})


def create_endpoint(self, original, endpoint_name, endpoint_config_name, tags):
    """``Creating`` while the model server starts, then ``InService`` or ``Failed``."""
    endpoint = original(self, endpoint_name, endpoint_config_name, tags)
    if _state["endpoints"] is not None:
        variant = self.endpoint_configs[endpoint_config_name].production_variants[0]
        container = self._models[variant["ModelName"]].primary_container or {}
        _state["endpoints"].create(endpoint, container, s3_backends[self.account_id]["aws"])
    return endpoint


def delete_endpoint(self, original, endpoint_name):
    original(self, endpoint_name)
    if _state["endpoints"] is not None:
        _state["endpoints"].delete(endpoint_name)


def invoke_endpoint(self, original):
    if _state["endpoints"] is None:
        return original(self)
    name = self.path.split("/")[2]
    if name not in models.sagemaker_backends[self.current_account][self.region].endpoints:
        raise JsonRESTError(
            "ValidationError", f"Endpoint {name} of account {self.current_account} not found."
        )
    answer = _state["endpoints"].invoke(name, self.raw_body, self.headers)
    if answer is None:
        return original(self)
    status, content_type, body = answer
    if status == 200:
        return 200, {"Content-Type": content_type or "application/json"}, body
    detail = body.decode("utf-8", "replace")[:2000]
    message = f'Received client error ({status}) from primary with message "{detail}"'
    payload = {"__type": "ModelError", "message": message, "OriginalStatusCode": status}
    headers = {"Content-Type": "application/json", "x-amzn-ErrorType": "ModelError", "status": 424}
    return 424, headers, json.dumps(payload).encode()


def simulate_principal_policy(self, original):
    results = [
        {"EvalActionName": action, "EvalResourceName": resource, "EvalDecision": "allowed"}
        for action in self._get_param("ActionNames", [])
        for resource in self._get_param("ResourceArns", []) or ["*"]
    ]
    return ActionResult({"EvaluationResults": results, "IsTruncated": False})


def _training_job(response):
    """The job asked for; once ``Completed``, its ``model.tar.gz`` is ``training_output()``."""
    name = response._get_param("TrainingJobName")
    job = response.sagemaker_backend.training_jobs.get(name)
    if job is None:
        raise ValidationError(message=f"Could not find training job '{name}'.")
    output = _state["training_output"]
    if job.training_job_status == "Completed" and output and not getattr(job, "pt2aws_out", 0):
        s3 = s3_backends[response.current_account]["aws"]
        s3.put_object(*job.model_artifacts["S3ModelArtifacts"][5:].split("/", 1), output())
        job.pt2aws_out = True
    return job


def describe_training_job(self, original):
    _training_job(self)
    return original(self)


def stop_training_job(self, original):
    job = _training_job(self)
    if job.training_job_status != "InProgress":
        raise ValidationError(message="The request was rejected because the training job is in "
                                f"status {job.training_job_status}.")  # fmt: skip
    job.training_job_status = job.secondary_status = "Stopped"
    return ActionResult({})


def quotas(self, original, *, applied_only: bool):
    """The emulator's SageMaker quotas (applied, or every default); other services have none."""
    if json.loads(self.body or "{}").get("ServiceCode") != "sagemaker":
        raise NoSuchResource
    found = [
        {"ServiceCode": "sagemaker", "QuotaName": name, "Value": float(value),
         "QuotaCode": "L-EMU" + hashlib.sha1(name.encode()).hexdigest()[:5].upper()}
        for name, (value, applied) in sorted(_state["quotas"].items())
        if applied or not applied_only
    ]  # fmt: skip
    return json.dumps({"Quotas": found})


#: moto class -> ``{method: handler}``; each handler gets moto's method (None where moto has
#: none) as its second argument.
HANDLERS = {
    models.FakeEndpointConfig: {"validate_instance_type": validate_instance_type},
    models.SageMakerModelBackend: {"create_endpoint": create_endpoint,
                                   "delete_endpoint": delete_endpoint},
    SageMakerResponse: {
        **dict.fromkeys(("describe_model", "describe_endpoint_config", "describe_endpoint"),
                        describe_without_empty),
        "describe_training_job": describe_training_job, "stop_training_job": stop_training_job,
    },
    SageMakerRuntimeResponse: {"invoke_endpoint": invoke_endpoint},
    IamResponse: {"simulate_principal_policy": simulate_principal_policy},
    ServiceQuotasResponse: {
        "list_service_quotas": partial(quotas, applied_only=True),
        "list_aws_default_service_quotas": partial(quotas, applied_only=False),
    },
}  # fmt: skip


def apply() -> None:
    """Install :data:`HANDLERS` once per process."""
    if _state["applied"]:
        return
    for cls, handlers in HANDLERS.items():
        for method, handler in handlers.items():
            original = getattr(cls, method, None)

            def patched(self, *args, _handler=handler, _original=original, **kwargs):
                return _handler(self, _original, *args, **kwargs)

            setattr(cls, method, patched)
    _state["applied"] = True
