"""Tests of :mod:`pt2aws.env`: the environment report."""

from __future__ import annotations

import json

from pt2aws import env


def test_collect_on_this_machine_says_cpu_only_or_lists_gpus(tmp_path):
    report = env.collect("local", disk_path=tmp_path / "run")
    for key in ("versions", "cpu", "gpus", "gpu_count", "disk", "efa", "where", "notes"):
        assert key in report
    assert {"cudnn", "nccl", "sagemaker"} <= set(report["versions"])
    assert report["disk"]["free_bytes"] > 0
    text = env.format_report(report)
    if report["cpu_only"]:
        assert "CPU-only machine" in text and report["gpu_count"] == 0
    else:
        assert f"GPU {report['gpu_count'] - 1}:" in text


def test_env_report_on_cpu_machine():
    report = env.collect("full")
    assert report["versions"]["torch"].startswith("2.13.0")
    assert report["arch"]
    assert report["cpu"]["logical_cores"] >= 1
    json.dumps(report)  # serialisable
    if not report["gpus"]:
        assert report["accelerator"] == "cpu"
        assert any("no CUDA GPU" in n for n in report["notes"])
        assert any("profile full needs a GPU" in n for n in report["notes"])
    text = env.format_report(report)
    assert "profile full" in text
    report["cpu"]["processor"] = ("Graviton3", "Neoverse V1")  # what the caller joins
    assert (
        f"CPU: {report['cpu']['features']['model']}, Graviton3 (Neoverse V1),"
        in env.format_report(report)
    )
