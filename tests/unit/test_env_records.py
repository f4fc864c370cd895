import json

from pt2aws import env, records


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


def test_summary_reports_missing_stages(tmp_path):
    records.write_json(
        tmp_path / "inference" / "metrics.json",
        {
            "accuracy": 0.9,
            "f1": 0.89,
            "majority_baseline_accuracy": 0.5,
            "num_examples": 10,
            "handler_agrees": True,
        },
    )
    text = records.write_summary(tmp_path, {"a.ipynb": 1.5}).read_text()
    assert "missing" in text
    assert "| test accuracy | 0.9000 |" in text
    assert "| total | 1.5 |" in text


def test_read_json_hint(tmp_path):
    import pytest

    with pytest.raises(FileNotFoundError, match="01_finetune_multi_gpu"):
        records.read_json(tmp_path / "train" / "metrics.json")


def test_summary_reports_sizing(tmp_path):
    records.write_json(
        tmp_path / "recommendation.json",
        {
            "recommendation": {
                "model": {"name": "roberta-base", "parameters": 124647170},
                "class": {"class": "small", "strategy": "single device"},
                "recommended": {"instance": "g6e.xlarge", "nodes": 1},
                "cheapest": "g6e.xlarge",
                "fastest": "trn2.48xlarge",
            }
        },
    )
    text = records.write_summary(tmp_path).read_text()
    assert "## Sizing (notebook 00)" in text
    assert "124,647,170 parameters; workload class **small**" in text
    assert "1 x `g6e.xlarge`" in text
