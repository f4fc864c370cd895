import json

from pt2aws import env, report, rundir


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


def test_read_json_hint(tmp_path):
    import pytest

    with pytest.raises(FileNotFoundError, match="01_finetune_multi_gpu"):
        rundir.read_json(tmp_path / "train" / "metrics.json")


def test_summary_reports_sizing(tmp_path):
    rundir.write_json(
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
    text = report.write_summary(tmp_path).read_text()
    assert "## Sizing (notebook 00)" in text
    assert "124,647,170 parameters; workload class **small**" in text
    assert "1 x `g6e.xlarge`" in text


def test_run_dir_names_every_path_and_says_which_notebook_writes_it(tmp_path):
    import pytest

    run = rundir.RunDir(tmp_path)
    assert run.model_dir == tmp_path / "train" / "model"
    assert run.plot("training") == run.plot("training.png") == tmp_path / "plots" / "training.png"
    assert run.deploy_archive == tmp_path / "deploy" / "model.tar.gz"
    assert run.writer_of(run.train_metrics) == "01_finetune_multi_gpu"
    assert run.writer_of(run.inference_metrics) == "02_local_inference"
    assert run.writer_of(run.cost_md) == "03_deploy_sagemaker_graviton"
    assert run.writer_of(run.recommendation_json) == "00_instance_setup"
    assert run.writer_of(run.ec2_dir / "commands.json") == "00_instance_setup"
    assert run.writer_of(run.sagemaker_job_dir / "model") == "01_finetune_multi_gpu"
    with pytest.raises(FileNotFoundError, match="run 01_finetune_multi_gpu first with RUN_DIR"):
        run.require(run.model_dir)
    rundir.write_json(run.ab_json, {"rows": [1]})
    assert run.read_json(run.ab_json) == {"rows": [1]}
    run.train_log.parent.mkdir(parents=True)
    run.train_log.write_text('{"step": 1}\n\n{"step": 2}\n')
    assert [r["step"] for r in run.read_jsonl(run.train_log)] == [1, 2]


def test_new_run_dir_is_a_utc_timestamp(tmp_path):
    import re

    run = rundir.RunDir.new(tmp_path / "runs")
    assert run.root.is_dir() and re.fullmatch(r"\d{8}-\d{6}", run.root.name)
    latest = tmp_path / "runs" / "latest"  # the notebooks' default RUN_DIR follows it
    assert latest.is_symlink() and latest.resolve() == run.root.resolve()
