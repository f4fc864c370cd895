"""What serving the model costs per 1M inferences, and which throughput that figure rests on.

The arithmetic and the prices are :mod:`pt2aws.lessons.sizing.cost`'s; this module picks the
throughput behind them, best first:

1. measured on the endpoint itself: the bounded load test :func:`pt2aws.aws.endpoint.deploy_on`
   runs against a live endpoint (target ``"aws"``), used for that instance type only;
2. notebook 02's benchmark on this machine (``inference/metrics.json``), scaled by vCPUs: the
   row of the variant the chosen image serves (the AWS DLC: fp32 ``eager``; the project's image:
   ``auto``, the variant notebook 02's ``auto`` picked), not the fastest row;
3. when notebook 02 has no such row, a quick measurement here (fp32 eager, median of 3), scaled
   by vCPUs.

The scaled figures are estimates (equal per-vCPU speed assumed) and the table says so.
"""

from __future__ import annotations

import json
from pathlib import Path


def served_variant(image: str | None, metrics: dict) -> str:
    """The predictor variant an endpoint on ``image`` serves, as notebook 02 measured it.

    Args:
        image: ``"dlc"`` (the AWS image: its handler serves fp32 ``eager``), ``"custom"`` (the
            project's image: ``PT2AWS_VARIANT=auto``, re-measured at start-up; notebook 02's
            ``auto`` choice stands in for it) or ``None`` (``eager``).
        metrics: notebook 02's ``inference/metrics.json`` (may be empty).
    """
    if image == "custom":
        return (metrics.get("auto_variant") or {}).get("variant") or "eager"
    return "eager"


def local_throughput(
    metrics_path: str | Path, model_dir: str | Path, texts: list[str], image: str | None = None
) -> dict:
    """Inferences/s, on this machine, of the variant an endpoint on ``image`` serves.

    Notebook 02's batch-32 row for that variant (:func:`served_variant`) when it recorded one,
    else a quick measurement of fp32 eager here.

    Args:
        metrics_path: notebook 02's ``inference/metrics.json`` (may not exist).
        model_dir: the fine-tuned model folder, for the quick measurement.
        texts: texts for the quick measurement (a few hundred: about 10 s on 2 cores).
        image: ``"dlc"``, ``"custom"`` or ``None`` (see :func:`served_variant`).

    Returns:
        ``{"throughput_samples_per_second": float, "variant": str, "source": str, ...}``.
    """
    from pt2aws.lessons.sizing import cost

    metrics_path = Path(metrics_path)
    metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
    variant = served_variant(image, metrics)
    row = next((r for r in metrics.get("variants", []) if r.get("variant") == variant), None)
    if row and row.get("samples_per_s"):
        return {
            "throughput_samples_per_second": row["samples_per_s"],
            "variant": variant,
            "source": f"{metrics_path} ({variant}, batch 32)",
        }
    measured = cost.measure_throughput(str(model_dir), texts)
    measured["variant"] = "eager"
    measured["source"] = f"measured here (fp32 eager, {len(texts)} texts, median of 3)"
    return measured


def cost_report(
    metrics_path: str | Path,
    model_dir: str | Path,
    texts: list[str],
    deploy_result: dict | None = None,
) -> dict:
    """The cost table of notebook 03, with the throughput it rests on.

    Args:
        metrics_path: notebook 02's ``inference/metrics.json`` (may not exist).
        model_dir: the fine-tuned model folder (for a quick measurement when needed).
        texts: texts for the quick measurement.
        deploy_result: :func:`pt2aws.aws.endpoint.deploy_on`'s result; its ``image`` says
            which variant the endpoint serves (:func:`served_variant`), and its ``load_test``
            feeds the deployed instance's row when it ran against a live endpoint (target
            ``"aws"``).

    Returns:
        ``{"throughput": {...}, "endpoint_throughput": {instance: inferences/s},
        "rows": [...] (see :func:`pt2aws.lessons.sizing.cost.cost_table`), "table": markdown}``.
    """
    from pt2aws import catalog
    from pt2aws.lessons.sizing import cost

    throughput = local_throughput(
        metrics_path, model_dir, texts, (deploy_result or {}).get("image")
    )
    measured_on_endpoint = {}
    load = (deploy_result or {}).get("load_test")
    if deploy_result and deploy_result.get("target") == "aws" and load:
        instance_type = deploy_result["instance_type"]
        if catalog.hosting_price(instance_type) is not None:  # no price: no row to feed
            measured_on_endpoint[instance_type] = load["throughput_per_s"]
    instances = tuple(dict.fromkeys([*cost.DEFAULT_COMPARISON, *measured_on_endpoint]))
    rows = cost.cost_table(
        throughput["throughput_samples_per_second"],
        throughput_by_instance=measured_on_endpoint,
        instances=instances,
    )
    return {
        "throughput": throughput,
        "endpoint_throughput": measured_on_endpoint,
        "rows": rows,
        "table": cost.format_cost_table(rows),
    }
