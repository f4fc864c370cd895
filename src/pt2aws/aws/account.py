"""What a real account needs before anything billable is created (:func:`checklist`): the caller,
the IAM actions (``checklist.json``, with sources), the SageMaker quotas, the expected cost;
:func:`require_ready` stops with one line on what would make the run fail."""

from __future__ import annotations

import json
from pathlib import Path

from pt2aws.aws.session import AwsSetupError
from pt2aws.aws.training_job import training_cost_bound
from pt2aws.sizing.pricing import instance_cost

FACTS = json.loads(Path(__file__).with_name("checklist.json").read_text())
#: Quota names by use, as Service Quotas spells them for SageMaker.
QUOTA_USES = {"endpoint": "endpoint usage", "training": "training job usage"}
#: Minutes an endpoint lives in notebook 03 (create, load test, delete): expected, not measured.
TYPICAL_ENDPOINT_MINUTES = 10.0


def quota_name(instance_type: str, use: str = "endpoint") -> str:
    """``"ml.c7g.xlarge for endpoint usage"``: Service Quotas' name for a :data:`QUOTA_USES` use."""
    return f"ml.{instance_type.removeprefix('ml.')} for {QUOTA_USES[use]}"


def check_quota(session, instance_type: str, use: str = "endpoint", needed: int = 1) -> dict:
    """The applied quota, else AWS's default: ``{"name", "code", "value", "source", "needed",
    "ok" (None: unknown), "reason"}`` (the fix, if not ok)."""
    from botocore.exceptions import BotoCoreError, ClientError

    name = quota_name(instance_type, use)
    out = {"name": name, "code": None, "value": None, "source": "unknown", "needed": needed}
    client = session.client("service-quotas", max_attempts=3)
    try:  # each list carries the values (Service Quotas API: ListServiceQuotas)
        found = next(
            (q | {"source": source}
             for call, source in (("list_service_quotas", "applied"),
                                  ("list_aws_default_service_quotas", "AWS default"))
             for page in client.get_paginator(call).paginate(ServiceCode="sagemaker")
             for q in page.get("Quotas", []) if q.get("QuotaName") == name),
            None,
        )  # fmt: skip
    except (ClientError, BotoCoreError) as err:
        code = getattr(err, "response", {}).get("Error", {}).get("Code", type(err).__name__)
        reason = (
            f"could not read the quota ({code}): allow servicequotas:* to these credentials (not "
            "in AmazonSageMakerFullAccess), or look it up in the Service Quotas console"
        )
        return {**out, "ok": None, "reason": reason}
    if found is None:
        reason = f"no quota named {name!r} in Service Quotas (check it in the console)"
        return {**out, "ok": None, "reason": reason}
    out |= {"code": found["QuotaCode"], "value": found.get("Value"), "source": found["source"]}
    if out["value"] is not None and out["value"] >= needed:
        return {**out, "ok": True, "reason": ""}
    reason = (
        f"{name} is {out['value']:g}, the run needs {needed}: request an increase (Service Quotas "
        f"console, or `aws service-quotas request-service-quota-increase --service-code "
        f"sagemaker --quota-code {out['code']} --desired-value {needed}`); otherwise the request "
        "fails with ResourceLimitExceeded"
    )
    return {**out, "ok": False, "reason": reason}


def run_cost(region: str, *, endpoint_instance=None, endpoint_instances=1, wait_timeout_s=1800,
             load_test_seconds=30, keep_endpoint=False, training_instance=None, training_count=1,
             max_runtime_s=None) -> list[str]:  # fmt: skip
    """The expected cost in lines: an endpoint :data:`TYPICAL_ENDPOINT_MINUTES` (at most wait +
    load test + 2 min), a job its max runtime."""
    lines = []
    if endpoint_instance:
        most_min = (wait_timeout_s + load_test_seconds) / 60 + 2
        usd, price = instance_cost(endpoint_instance, "hosting", 1, endpoint_instances, region)
        if price is None:
            lines.append(f"endpoint {endpoint_instance}: no hosting price in the catalog")
        else:
            lines.append(
                f"endpoint {endpoint_instances} x {endpoint_instance} at {price.describe()}: about "
                f"{usd * TYPICAL_ENDPOINT_MINUTES / 60:.3f} USD for {TYPICAL_ENDPOINT_MINUTES:g} "
                f"min (expected), at most {usd * most_min / 60:.3f} USD ({most_min:.0f} min: wait "
                "timeout + load test + delete)"
            )
            if keep_endpoint:
                lines.append(
                    f"KEEP_ENDPOINT: {usd:.4f} USD/h ({usd * 24:.2f} USD/day) until you delete it"
                )
    if training_instance and max_runtime_s:
        bound = training_cost_bound(training_instance, training_count, max_runtime_s, region)
        usd = "an unknown" if bound["usd"] is None else f"{bound['usd']:.2f}"
        lines.append(
            f"training job {training_count} x {training_instance} at {bound['price']}: at most "
            f"{usd} USD ({max_runtime_s / 3600:g} h max runtime)"
        )
    return lines + [FACTS["not_priced"]]


def checklist(session, *, autoscaling=False, own_image=False, **run) -> dict:
    """What notebook 03's endpoint or 01's job needs (``run``: :func:`run_cost`'s keywords):
    ``{"target", "region", "account", "role", "caller_actions", "quotas", "cost",
    "arm64_build"}``; ``AwsSetupError``: no or refused credentials, AWS unreachable."""
    account = session.account()
    purposes = ["pass the execution role", "model data in S3", "this checklist and price refresh"]
    quotas = []
    if run.get("endpoint_instance"):
        purposes += ["deploy (notebook 03)", "clean-up (pt2aws cleanup)"]
        needed = run.get("endpoint_instances", 1)
        quotas.append(check_quota(session, run["endpoint_instance"], "endpoint", needed))
    if run.get("training_instance"):
        purposes.append("training job (notebook 01)")
        needed = run.get("training_count", 1)
        quotas.append(check_quota(session, run["training_instance"], "training", needed))
    purposes += ["autoscaling (AUTOSCALING)"] * autoscaling + ["your own image (ECR)"] * own_image
    actions = FACTS["caller_actions"]
    return {
        "target": session.target, "region": session.region, "account": account,
        "role": session.role_arn or "MISSING: set ROLE_ARN",
        "caller_actions": {p: a for p, a in actions.items() if p.startswith(tuple(purposes))},
        "quotas": quotas, "cost": run_cost(session.region, **run),
        "arm64_build": FACTS["arm64_build"] if own_image else None,
    }  # fmt: skip


def require_ready(checklist: dict) -> None:
    """``AwsSetupError`` (one line) when the checklist shows no role or a quota too low."""
    if checklist["role"].startswith("MISSING"):
        raise AwsSetupError(
            "no execution role: set ROLE_ARN to a SageMaker execution role (IAM console -> Roles,"
            " trusted by sagemaker.amazonaws.com; see the checklist above)"
        )
    for quota in checklist["quotas"]:
        if quota["ok"] is False:
            raise AwsSetupError(f"quota too low: {quota['reason']}")


def format_checklist(c: dict) -> str:
    """The checklist in at most about 30 lines (each IAM purpose on one line)."""
    where = "the emulator (its own quotas, not AWS's)" if c["target"] == "emulator" else "AWS"
    role = FACTS["execution_role"]
    lines = [
        f"Real-account checklist: {where}, region {c['region']}, account {c['account']}",
        f"execution role: {c['role']} (trusts {role['trust']}; needs: "
        + "; ".join(role["actions"]) + ")",
        "your credentials need:",
        *(f"  {purpose}: {', '.join(actions)}" for purpose, actions in c["caller_actions"].items()),
        "service quotas (read now):",
    ]  # fmt: skip
    for q in c["quotas"]:
        value = "unknown" if q["value"] is None else f"{q['value']:g} ({q['source']})"
        mark = {True: "OK", False: "TOO LOW", None: "CHECK"}[q["ok"]]
        lines.append(f"  {mark}: {q['name']} = {value}, needed {q['needed']}")
        lines += [f"    {q['reason']}"] if q["reason"] else []
    lines += ["expected cost of the run:", *(f"  {line}" for line in c["cost"])]
    if c["arm64_build"]:
        lines += ["arm64 image without local Docker:"]
        lines += [f"  {k}: {v}" for k, v in c["arm64_build"].items()]
    return "\n".join(lines)
