"""Notebook 03's cost table: which throughput it rests on (endpoint, notebook 02, or measured)."""

import json
import os

import pytest

from pt2aws.aws import endpoint_cost

TEXTS = ["good", "bad", "fine"] * 8


def test_notebook_02_figure_is_used_and_scaled_by_vcpus(tmp_path):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"variants": [{"variant": "eager", "samples_per_s": 100.0}]}))
    report = endpoint_cost.cost_report(metrics, tmp_path / "no-model", TEXTS)
    assert report["throughput"] == {
        "throughput_samples_per_second": 100.0,
        "variant": "eager",
        "source": f"{metrics} (eager, batch 32)",
    }
    assert report["endpoint_throughput"] == {}
    rows = {r["instance_type"]: r for r in report["rows"]}
    assert {"ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge"} == set(rows)
    assert all(r["throughput_basis"].startswith("estimate") for r in rows.values())
    assert "| ml.c7g.xlarge | arm64 |" in report["table"]


def test_the_row_of_the_variant_the_image_serves_is_used_not_the_fastest(tmp_path):
    metrics = tmp_path / "metrics.json"
    rows = [
        {"variant": "eager", "samples_per_s": 140.0},
        {"variant": "int8", "samples_per_s": 470.0},
        {"variant": "bf16", "samples_per_s": 370.0},
    ]
    metrics.write_text(
        json.dumps(
            {
                "variants": rows,
                "best_variant": "int8",
                "auto_variant": {"variant": "bf16", "reason": "..."},
                "throughput_samples_per_second": 470.0,
            }
        )
    )
    dlc = endpoint_cost.cost_report(metrics, tmp_path, TEXTS, {"image": "dlc"})
    assert dlc["throughput"]["variant"] == "eager"  # the AWS image's handler serves fp32 eager
    assert dlc["throughput"]["throughput_samples_per_second"] == 140.0
    custom = endpoint_cost.cost_report(metrics, tmp_path, TEXTS, {"image": "custom"})
    assert custom["throughput"]["variant"] == "bf16"  # auto's choice, not the fastest row
    c7g = next(r for r in custom["rows"] if r["instance_type"] == "ml.c7g.xlarge")
    assert c7g["throughput_per_s"] == pytest.approx(370.0 * 4 / (os.cpu_count() or 1))  # 4 vCPUs
    assert endpoint_cost.cost_report(metrics, tmp_path, TEXTS)["throughput"]["variant"] == "eager"


def test_live_load_test_feeds_the_deployed_instance_only_on_aws(tmp_path):
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"variants": [{"variant": "eager", "samples_per_s": 100.0}]}))
    deployed = {"target": "aws", "instance_type": "ml.c7g.xlarge"}
    deployed["load_test"] = {"throughput_per_s": 250.0}
    rows = {
        r["instance_type"]: r
        for r in endpoint_cost.cost_report(metrics, tmp_path, TEXTS, deployed)["rows"]
    }
    assert rows["ml.c7g.xlarge"]["throughput_per_s"] == 250.0
    assert rows["ml.c7g.xlarge"]["throughput_basis"] == "measured on the instance"
    assert rows["ml.c6i.xlarge"]["throughput_basis"].startswith("estimate")
    # through the emulator the load test measured this machine, not the instance: not fed
    emulated = {**deployed, "target": "emulator"}
    report = endpoint_cost.cost_report(metrics, tmp_path, TEXTS, emulated)
    assert report["endpoint_throughput"] == {}


def test_quick_measurement_without_notebook_02(smoke_model_dir, tmp_path):
    best_only = tmp_path / "old.json"  # a total of the fastest variant, no per-variant rows:
    best_only.write_text(json.dumps({"throughput_samples_per_second": 999.0}))  # not eager's
    old = endpoint_cost.cost_report(best_only, smoke_model_dir, TEXTS, {"image": "dlc"})
    assert old["throughput"]["source"].startswith("measured here (fp32 eager")
    report = endpoint_cost.cost_report(tmp_path / "missing.json", smoke_model_dir, TEXTS)
    assert report["throughput"]["source"] == "measured here (fp32 eager, 24 texts, median of 3)"
    assert report["throughput"]["throughput_samples_per_second"] > 0
    for r in report["rows"]:
        assert r["usd_per_1m"] == pytest.approx(
            r["usd_per_hour"] / (r["throughput_per_s"] * 3600) * 1e6, rel=1e-9
        )
