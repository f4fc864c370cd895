"""Tests of :mod:`pt2aws.report`: ``summary.md``."""

from pt2aws import report, rundir


def test_summary_reports_missing_stages(tmp_path):
    rundir.write_json(
        tmp_path / "inference" / "metrics.json",
        {
            "accuracy": 0.9,
            "f1": 0.89,
            "majority_baseline_accuracy": 0.5,
            "num_examples": 10,
            "handler_agrees": True,
        },
    )
    text = report.write_summary(tmp_path, {"a.ipynb": 1.5}).read_text()
    assert "missing" in text
    assert "| test accuracy | 0.9000 |" in text
    assert "| total | 1.5 |" in text


def test_summary_reports_sizing(tmp_path):
    rundir.write_json(
        tmp_path / "recommendation.json",
        {
            "recommendation": {
                "model": {"name": "roberta-base", "parameters": 124647170},
                "class": {"class": "small", "strategy": "single device"},
                "recommended": {"instance": "g6e.xlarge", "nodes": 1},
                "training": [
                    {"instance": "g6e.xlarge", "cheapest": True, "fastest": False},
                    {"instance": "trn2.48xlarge", "cheapest": False, "fastest": True},
                ],
            }
        },
    )
    text = report.write_summary(tmp_path).read_text()
    assert "## Sizing (notebook 00)" in text
    assert "124,647,170 parameters; workload class **small**" in text
    assert "1 x `g6e.xlarge`; cheapest `g6e.xlarge`, fastest `trn2.48xlarge`" in text


def test_summary_names_the_cpu_with_its_caps_and_what_was_left_out(tmp_path):
    described = (
        "AMD EPYC (x86_64), torch dispatches AVX2, capped by ATEN_CPU_CAPABILITY=avx2 "
        "ONEDNN_MAX_CPU_ISA=AVX2; no native bf16 (emulated, slow); no int8 dot products; no AMX"
    )
    rundir.write_json(
        tmp_path / "env.json",
        {
            "profile": "local",
            "versions": {"torch": "2.13.0+cpu"},
            "accelerator": "cpu",
            "suggested_instance": "ml.m7i.xlarge",
            "cpu": {"logical_cores": 2, "features": {"description": described}},
        },
    )
    rundir.write_json(
        tmp_path / "inference" / "metrics.json",
        {"accuracy": 0.85, "left_out": {"bf16": "no native bf16 (CPU: ...): bf16 is emulated"}},
    )
    text = report.write_summary(tmp_path).read_text()
    assert f"- CPU: {described}; 2 logical cores" in text
    assert "- bf16 left out: no native bf16 (CPU: ...): bf16 is emulated" in text
