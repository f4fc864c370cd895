"""What serving the model costs per 1M inferences, and which throughput that figure rests on.

The arithmetic and the prices are :mod:`pt2aws.sizing.cost`'s; this module picks the throughput
behind them, best first:

1. measured on the endpoint itself: the bounded load test :func:`pt2aws.aws.endpoint.deploy_on`
   runs against a live endpoint (target ``"aws"``), used for that instance type only;
2. notebook 02's benchmark on this machine (``inference/metrics.json``), scaled by vCPUs;
3. a quick measurement here (fp32 eager, median of 3), scaled by vCPUs.

The scaled figures are estimates (equal per-vCPU speed assumed) and the table says so.
"""

from __future__ import annotations

import json
from pathlib import Path


def local_throughput(metrics_path: str | Path, model_dir: str | Path, texts: list[str]) -> dict:
    """Inferences/s on this machine: notebook 02's figure when recorded, else measured now.

    Args:
        metrics_path: notebook 02's ``inference/metrics.json`` (may not exist).
        model_dir: the fine-tuned model folder, for the quick measurement.
        texts: texts for the quick measurement (a few hundred: about 10 s on 2 cores).

    Returns:
        ``{"throughput_samples_per_second": float, "source": str, ...}``.
    """
    from pt2aws.sizing import cost

    metrics_path = Path(metrics_path)
    metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
    if metrics.get("throughput_samples_per_second"):
        return {
            "throughput_samples_per_second": metrics["throughput_samples_per_second"],
            "source": str(metrics_path),
        }
    measured = cost.measure_throughput(str(model_dir), texts)
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
        deploy_result: :func:`pt2aws.aws.endpoint.deploy_on`'s result; its ``load_test`` feeds
            the deployed instance's row when it ran against a live endpoint (target ``"aws"``).

    Returns:
        ``{"throughput": {...}, "endpoint_throughput": {instance: inferences/s},
        "rows": [...] (see :func:`pt2aws.sizing.cost.cost_table`), "table": markdown}``.
    """
    from pt2aws.sizing import catalog, cost

    throughput = local_throughput(metrics_path, model_dir, texts)
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
