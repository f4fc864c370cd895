"""The way to a real account: what to have in place before a notebook creates anything billable.

:func:`checklist` gathers it for one run (notebook 01's training job, notebook 03's endpoint):

* the caller's IAM actions (:data:`CALLER_ACTIONS`: what pt2aws's calls need; ``iam:PassRole``
  on the execution role above all) and the execution role's (:data:`EXECUTION_ROLE`);
* the service quota of the instance type, read now with Service Quotas (:func:`check_quota`):
  SageMaker quotas are per instance type and use (``ml.c7g.xlarge for endpoint usage``,
  ``ml.p4d.24xlarge for training job usage``); new accounts often start GPU training at 0, and
  a request over the quota fails with ``ResourceLimitExceeded``;
* the region, and the expected dollar cost of the run (:func:`run_cost`);
* how to build the arm64 serving image without local Docker (:data:`ARM64_BUILD`).

Sources: the calls pt2aws makes (``aws/hosting.py``, ``artifact.py``, ``autoscaling.py``,
``training_job.py``); the AWS-managed ``AmazonSageMakerFullAccess`` policy (v29, 2026-02-12, as
copied in moto 5.2.5: it grants ``iam:PassRole`` to SageMaker, ECR push only on repositories
named ``*sagemaker*``, and no ``servicequotas:`` or ``pricing:`` action); the Service Quotas API
(botocore's model: ``GetServiceQuota`` may have no applied value, then the AWS default stands).
Quota *names* follow AWS's pattern (``<type> for endpoint usage``); their codes are looked up
by name at run time, never hard-coded (public copies disagree).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

#: What the caller's credentials need, by what the run does (IAM action names).
CALLER_ACTIONS = {
    "pass the execution role": [
        "iam:PassRole on the execution role (condition iam:PassedToService = "
        "sagemaker.amazonaws.com)"
    ],
    "deploy (notebook 03)": [
        "sagemaker:CreateModel",
        "sagemaker:CreateEndpointConfig",
        "sagemaker:CreateEndpoint",
        "sagemaker:DescribeEndpoint",
        "sagemaker:InvokeEndpoint",
        "sagemaker:DeleteEndpoint",
        "sagemaker:DeleteEndpointConfig",
        "sagemaker:DeleteModel",
        "sagemaker:AddTags (the Create requests carry tags)",
    ],
    "clean-up (pt2aws cleanup)": [
        "sagemaker:ListEndpoints",
        "sagemaker:ListEndpointConfigs",
        "sagemaker:ListModels",
    ],
    "model data in S3": [
        "s3:CreateBucket",
        "s3:PutBucketPublicAccessBlock",
        "s3:ListBucket",
        "s3:PutObject",
        "s3:GetObject",
        "s3:DeleteObject",
    ],
    "autoscaling (AUTOSCALING)": [
        "application-autoscaling:RegisterScalableTarget",
        "application-autoscaling:PutScalingPolicy",
        "application-autoscaling:Describe*",
        "application-autoscaling:DeleteScalingPolicy",
        "application-autoscaling:DeregisterScalableTarget",
        "iam:CreateServiceLinkedRole (first use)",
        "cloudwatch:PutMetricAlarm / DeleteAlarms / DescribeAlarms",
    ],
    "training job (notebook 01)": [
        "sagemaker:CreateTrainingJob",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopTrainingJob",
    ],
    "your own image (ECR)": [
        "ecr:CreateRepository",
        "ecr:GetAuthorizationToken",
        "ecr:BatchCheckLayerAvailability",
        "ecr:InitiateLayerUpload",
        "ecr:UploadLayerPart",
        "ecr:CompleteLayerUpload",
        "ecr:PutImage",
    ],
    "this checklist and price refresh (not in AmazonSageMakerFullAccess)": [
        "servicequotas:ListServiceQuotas",
        "servicequotas:ListAWSDefaultServiceQuotas",
        "servicequotas:GetServiceQuota",
        "servicequotas:GetAWSDefaultServiceQuota",
        "pricing:GetProducts",
        "sts:GetCallerIdentity",
    ],
}
#: The execution role SageMaker assumes for the model and the training job.
EXECUTION_ROLE = {
    "trust": "sagemaker.amazonaws.com",
    "actions": [
        "s3:GetObject on the model data (hosting); s3:GetObject, PutObject, ListBucket on the "
        "job's input and output prefixes (training)",
        "ecr:GetAuthorizationToken (resource *), ecr:BatchCheckLayerAvailability, "
        "GetDownloadUrlForLayer, BatchGetImage (the AWS DLC or your repository)",
        "logs:CreateLogGroup, CreateLogStream, PutLogEvents, DescribeLogStreams; "
        "cloudwatch:PutMetricData",
    ],
    "note": "AmazonSageMakerFullAccess covers these for buckets and repositories whose names "
    "contain 'sagemaker' (e.g. the default bucket sagemaker-<region>-<account>)",
}
#: How to build the arm64 serving image without Docker on this machine.
ARM64_BUILD = {
    "codebuild": "an AWS CodeBuild project on an arm container (environment type ARM_CONTAINER, "
    "image aws/codebuild/amazonlinux-aarch64-standard:3.0, privileged mode on) running "
    "container/buildspec-arm64.yml: it builds container/Dockerfile natively and pushes to ECR",
    "ec2": "a Graviton EC2 instance (e.g. c7g.large, Amazon Linux 2023 arm64): "
    "`sudo dnf install -y docker git && sudo systemctl start docker`, then the README's "
    "`docker build` and `docker push` (native arm64, no QEMU)",
    "studio": "SageMaker Studio has no Docker by default (a domain admin must enable "
    "DockerSettings.EnableDockerAccess) and no privileged QEMU: use CodeBuild or EC2",
}
#: Quota names by use, as Service Quotas spells them for SageMaker.
QUOTA_USES = {"endpoint": "endpoint usage", "training": "training job usage"}
#: Minutes an endpoint typically lives in notebook 03 (create, a few minutes; load test; delete):
#: an expectation, not a measurement (no real deployment was timed by the project).
TYPICAL_ENDPOINT_MINUTES = 10.0


def quota_name(instance_type: str, use: str = "endpoint") -> str:
    """``"ml.c7g.xlarge for endpoint usage"`` (Service Quotas' name, service code sagemaker).

    Raises:
        ValueError: an unknown ``use``.
    """
    if use not in QUOTA_USES:
        raise ValueError(f"use {use!r}: choose one of {', '.join(QUOTA_USES)}")
    return f"ml.{instance_type.removeprefix('ml.')} for {QUOTA_USES[use]}"


def _find_quota(client, name: str) -> dict | None:
    """The quota called ``name``: among the applied ones, else among AWS's defaults."""
    for call in ("list_service_quotas", "list_aws_default_service_quotas"):
        for page in client.get_paginator(call).paginate(ServiceCode="sagemaker"):
            for quota in page.get("Quotas", []):
                if quota.get("QuotaName") == name:
                    return quota
    return None


def check_quota(session, instance_type: str, use: str = "endpoint", needed: int = 1) -> dict:
    """The current quota for ``instance_type`` used as ``use``, read with Service Quotas.

    The quota code is looked up by name (``ListServiceQuotas``, then
    ``ListAWSDefaultServiceQuotas``); its value is ``GetServiceQuota`` (the applied value), and
    where that has none, ``GetAWSDefaultServiceQuota`` (which does not reflect increases).

    Args:
        session: an :class:`pt2aws.aws.session.AwsSession`.
        instance_type: e.g. ``"ml.c7g.xlarge"``.
        use: ``"endpoint"`` or ``"training"`` (:data:`QUOTA_USES`).
        needed: instances the run asks for.

    Returns:
        ``{"name", "code", "value" (float or None), "source" ("applied", "AWS default" or
        "unknown"), "needed", "ok" (bool, or None when unknown), "reason"}``; ``reason`` says
        what to do when ``ok`` is not True.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    name = quota_name(instance_type, use)
    out = {"name": name, "code": None, "value": None, "source": "unknown", "needed": needed}
    client = session.client("service-quotas", max_attempts=3)
    try:
        found = _find_quota(client, name)
        if found is None:
            return {
                **out,
                "ok": None,
                "reason": f"no quota named {name!r} in Service Quotas (check the name in its "
                "console, service 'Amazon SageMaker')",
            }
        out["code"] = found["QuotaCode"]
        try:
            quota = client.get_service_quota(ServiceCode="sagemaker", QuotaCode=out["code"])
            out["source"] = "applied"
        except ClientError as err:
            if err.response["Error"]["Code"] != "NoSuchResourceException":
                raise
            quota = client.get_aws_default_service_quota(
                ServiceCode="sagemaker", QuotaCode=out["code"]
            )
            out["source"] = "AWS default"
        out["value"] = quota["Quota"].get("Value")
    except (ClientError, BotoCoreError) as err:
        code = getattr(err, "response", {}).get("Error", {}).get("Code", type(err).__name__)
        return {
            **out,
            "ok": None,
            "reason": f"could not read the quota ({code}): allow servicequotas:* to these "
            "credentials (not in AmazonSageMakerFullAccess), or look it up in the Service "
            "Quotas console",
        }
    ok = out["value"] is not None and out["value"] >= needed
    reason = (
        ""
        if ok
        else f"{name} is {out['value']:g}, the run needs {needed}: request an increase "
        f"(Service Quotas console, or `aws service-quotas request-service-quota-increase "
        f"--service-code sagemaker --quota-code {out['code']} --desired-value {needed}`); "
        "otherwise the request fails with ResourceLimitExceeded"
    )
    return {**out, "ok": ok, "reason": reason}


def run_cost(
    *,
    region: str,
    endpoint_instance: str | None = None,
    endpoint_instances: int = 1,
    wait_timeout_s: float = 1800,
    load_test_seconds: float = 30,
    keep_endpoint: bool = False,
    training_instance: str | None = None,
    training_count: int = 1,
    max_runtime_s: int | None = None,
) -> dict:
    """The expected dollar cost of the run, from the catalog's prices (their status in words).

    Endpoint: hourly price x instances x minutes alive; typically about
    :data:`TYPICAL_ENDPOINT_MINUTES` (an expectation), at most the wait timeout + the load test
    + two minutes to delete; a kept endpoint costs its hourly price until deleted. Training job:
    at most max runtime x instances x hourly price. S3 (one archive for minutes): under a tenth
    of a cent. Not priced here: CloudWatch Logs, ECR storage of your own image, CodeBuild minutes.

    Returns:
        ``{"lines": [str], "typical_usd": float | None, "worst_usd": float | None,
        "per_hour_kept": float | None}``.
    """
    from pt2aws.sizing import pricing

    lines, typical, worst, per_hour = [], 0.0, 0.0, None
    if endpoint_instance:
        price = pricing.price(endpoint_instance, "hosting", region)
        if price is None:
            lines.append(f"endpoint {endpoint_instance}: no hosting price in the catalog")
            typical = worst = None
        else:
            per_hour = price.usd_per_hour * endpoint_instances
            most_min = (wait_timeout_s + load_test_seconds) / 60 + 2
            typical += per_hour * TYPICAL_ENDPOINT_MINUTES / 60
            worst += per_hour * most_min / 60
            lines.append(
                f"endpoint {endpoint_instances} x {endpoint_instance} at {price.describe()}: "
                f"about {per_hour * TYPICAL_ENDPOINT_MINUTES / 60:.3f} USD for "
                f"{TYPICAL_ENDPOINT_MINUTES:g} min (expected), at most "
                f"{per_hour * most_min / 60:.3f} USD ({most_min:.0f} min: wait timeout + load "
                "test + delete)"
            )
            if keep_endpoint:
                lines.append(
                    f"KEEP_ENDPOINT: {per_hour:.4f} USD/h ({per_hour * 24:.2f} USD/day) until "
                    "you delete it"
                )
    if training_instance and max_runtime_s:
        price = pricing.price(training_instance, "training", region)
        if price is None:
            lines.append(f"training {training_instance}: no training price in the catalog")
            worst = None
        else:
            bound = price.usd_per_hour * training_count * max_runtime_s / 3600
            worst = None if worst is None else worst + bound
            lines.append(
                f"training job {training_count} x {training_instance} at {price.describe()}: at "
                f"most {bound:.2f} USD ({max_runtime_s / 3600:g} h max runtime)"
            )
    lines.append(
        "S3: under 0.001 USD for the archive; not priced here: CloudWatch Logs, ECR storage of "
        "your own image, CodeBuild minutes"
    )
    return {"lines": lines, "typical_usd": typical, "worst_usd": worst, "per_hour_kept": per_hour}


def checklist(
    session,
    *,
    endpoint_instance: str | None = None,
    endpoint_instances: int = 1,
    training_instance: str | None = None,
    training_count: int = 1,
    max_runtime_s: int | None = None,
    wait_timeout_s: float = 1800,
    load_test_seconds: float = 30,
    keep_endpoint: bool = False,
    autoscaling: bool = False,
    own_image: bool = False,
) -> dict:
    """What a real-account run needs, with the quotas read now (see the module docstring).

    Args:
        session: where the run goes (on the emulator the quotas are the emulator's own).
        endpoint_instance: notebook 03's instance type, if it deploys.
        endpoint_instances: endpoint instances at most (autoscaling's maximum).
        training_instance, training_count, max_runtime_s: notebook 01's training job, if any.
        wait_timeout_s, load_test_seconds, keep_endpoint: notebook 03's bounds (for the cost).
        autoscaling: the endpoint autoscales (more IAM actions).
        own_image: the project's serving image (ECR actions, an arm64 build).

    Returns:
        ``{"target", "region", "account", "role", "caller_actions" ({purpose: [action]}),
        "execution_role", "quotas" ([:func:`check_quota`]), "cost" (:func:`run_cost`),
        "arm64_build" (or None)}``.
    """
    purposes = ["pass the execution role", "model data in S3", "this checklist and price refresh"]
    quotas = []
    if endpoint_instance:
        purposes[1:1] = ["deploy (notebook 03)", "clean-up (pt2aws cleanup)"]
        quotas.append(check_quota(session, endpoint_instance, "endpoint", endpoint_instances))
    if training_instance:
        purposes.insert(1, "training job (notebook 01)")
        quotas.append(check_quota(session, training_instance, "training", training_count))
    if autoscaling:
        purposes.append("autoscaling (AUTOSCALING)")
    if own_image:
        purposes.append("your own image (ECR)")
    try:
        account = session.account()
    except Exception as err:  # noqa: BLE001 - the checklist reports it
        account = f"unknown ({type(err).__name__}: check the credentials)"
    actions = {p: a for p, a in CALLER_ACTIONS.items() if any(p.startswith(x) for x in purposes)}
    return {
        "target": session.target,
        "region": session.region,
        "account": account,
        "role": session.role_arn or "MISSING: set ROLE_ARN",
        "caller_actions": actions,
        "execution_role": EXECUTION_ROLE,
        "quotas": quotas,
        "cost": run_cost(
            region=session.region,
            endpoint_instance=endpoint_instance,
            endpoint_instances=endpoint_instances,
            wait_timeout_s=wait_timeout_s,
            load_test_seconds=load_test_seconds,
            keep_endpoint=keep_endpoint,
            training_instance=training_instance,
            training_count=training_count,
            max_runtime_s=max_runtime_s,
        ),
        "arm64_build": ARM64_BUILD if own_image else None,
    }


def format_checklist(c: dict) -> str:
    """The checklist in at most about 30 lines (each IAM purpose on one line)."""
    where = "the emulator (its own quotas, not AWS's)" if c["target"] == "emulator" else "AWS"
    lines = [
        f"Real-account checklist: {where}, region {c['region']}, account {c['account']}",
        f"execution role: {c['role']} (trusts {c['execution_role']['trust']}; needs: "
        + "; ".join(c["execution_role"]["actions"])
        + ")",
        "your credentials need:",
    ]
    lines += [
        f"  {purpose}: {', '.join(actions)}" for purpose, actions in c["caller_actions"].items()
    ]
    lines.append("service quotas (read now):")
    for q in c["quotas"]:
        value = "unknown" if q["value"] is None else f"{q['value']:g} ({q['source']})"
        mark = {True: "OK", False: "TOO LOW", None: "CHECK"}[q["ok"]]
        lines.append(f"  {mark}: {q['name']} = {value}, needed {q['needed']}")
        if q["reason"]:
            lines.append(f"    {q['reason']}")
    lines.append("expected cost of the run:")
    lines += [f"  {line}" for line in c["cost"]["lines"]]
    if c["arm64_build"]:
        lines.append("arm64 image without local Docker:")
        lines += [f"  {k}: {v}" for k, v in c["arm64_build"].items()]
    return "\n".join(lines)
