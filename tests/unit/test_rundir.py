"""Tests of :mod:`pt2aws.rundir`: the run folder's paths and the "run NN first" hints."""

from pt2aws import rundir


def test_read_json_hint(tmp_path):
    import pytest

    from pt2aws.errors import MissingFileError, UserError

    run = rundir.RunDir(tmp_path)
    with pytest.raises(MissingFileError, match="run 01_finetune_multi_gpu first") as err:
        run.read_json(tmp_path / "train" / "metrics.json")
    assert isinstance(err.value, (FileNotFoundError, UserError))  # one line in CLI and notebook
    with pytest.raises(AttributeError, match="no path 'modle_dir'"):
        run.modle_dir  # noqa: B018


def test_run_dir_names_every_path_and_says_which_notebook_writes_it(tmp_path):
    import pytest

    run = rundir.RunDir(tmp_path)
    assert run.model_dir == tmp_path / "train" / "model"
    assert run.plot("training") == run.plot("training.png") == tmp_path / "plots" / "training.png"
    assert run.deploy_archive == tmp_path / "deploy" / "model.tar.gz"
    for path, writer in (
        (run.train_metrics, "01_finetune_multi_gpu"),
        (run.inference_metrics, "02_local_inference"),
        (run.cost_md, "03_deploy_sagemaker_graviton"),
        (run.recommendation_json, "00_instance_setup"),
        (run.ec2_dir / "commands.json", "00_instance_setup"),
        (run.sagemaker_job_dir / "model", "01_finetune_multi_gpu"),
        (tmp_path.parent / "elsewhere.json", "an earlier notebook"),
    ):
        with pytest.raises(FileNotFoundError, match=f"run {writer} first"):
            run.require(path)
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
