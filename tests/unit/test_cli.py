"""The deploy flow over HTTP against a moto server on 127.0.0.1 (no AWS account).

``InvokeEndpoint`` is forwarded to a tiny stub model server of our own (127.0.0.1, free port),
so the tests see real request bodies: chunk sizes, order, UTF-8, and the model server's errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.emulator import NOTHING

import pt2aws
from pt2aws import cli
from pt2aws.aws import deploy, session
from pt2aws.emulator.server import EMULATOR_ROLE_ARN


def test_cli_cleanup_deletes_leftovers(emulator, capsys):
    from pt2aws.cli import main

    sm = emulator.session().client("sagemaker")
    sm.create_model(
        ModelName="pt2aws-left", ExecutionRoleArn=EMULATOR_ROLE_ARN, PrimaryContainer={"Image": "x"}
    )
    deploy.enable_autoscaling(emulator.session(), "pt2aws-left")
    assert main(["cleanup", "--prefix", "pt2aws-left"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert session.billable_resources(emulator.session())["models"] == ["pt2aws-left"]
    assert main(["cleanup", "--prefix", "pt2aws-left", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "deleted model pt2aws-left" in out and "deleted scalable_target" in out
    assert session.billable_resources(emulator.session()) == NOTHING


SRC = str(Path(pt2aws.__file__).resolve().parents[1])


PT2AWS = [sys.executable, "-m", "pt2aws.cli"]


TRAIN = [sys.executable, "-m", "pt2aws.train"]


def _run(cmd: list[str], tmp_path: Path, **env) -> subprocess.CompletedProcess:
    """``cmd`` with this checkout's package, the hub offline and no AWS credentials at all."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    environ.update(
        PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
        HF_HUB_OFFLINE="1",
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_EC2_METADATA_DISABLED="true",  # no instance-role lookup (it would wait for a timeout)
        **env,
    )
    return subprocess.run(
        cmd, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300, check=False
    )


CASES = {
    "env: unknown profile": (
        PT2AWS + ["env", "--profile", "nope"],
        "pt2aws env: error: argument --profile: invalid choice: 'nope'",
    ),
    "recommend: negative count": (
        PT2AWS + ["recommend", "--examples", "-5"],
        "pt2aws recommend: error: argument --examples: must be an integer >= 1, got '-5' "
        "(see pt2aws recommend --help)",
    ),
    "recommend: unknown model": (
        PT2AWS + ["recommend", "--profile", "smoke", "--model", "gpt-unknown"],
        "pt2aws recommend: error: unknown model 'gpt-unknown'",
    ),
    "train: negative count": (
        PT2AWS + ["train", "--profile", "smoke", "--num_train_epochs", "-1"],
        "pt2aws train: error: num_train_epochs must be >= 0",
    ),
    "python -m pt2aws.train: missing data file": (
        TRAIN + ["--profile", "smoke", "--dataset", "missing.csv", "--output_dir", "out"],
        "python -m pt2aws.train: error: data file 'missing.csv' does not exist",
    ),
    "run: unknown profile": (
        PT2AWS + ["run", "--profile", "nope"],
        "pt2aws run: error: argument --profile: invalid choice: 'nope'",
    ),
    "serve: missing model": (
        PT2AWS + ["serve", "missing/model.tar.gz"],
        "pt2aws serve: error: model missing/model.tar.gz does not exist: pass a model.tar.gz",
    ),
    "cleanup: no AWS credentials": (
        PT2AWS + ["cleanup", "--prefix", "pt2aws-", "--region", "us-east-1"],
        "pt2aws cleanup: error: no AWS credentials found: set AWS credentials",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_user_error_is_one_line_and_exit_2(case, tmp_path):
    cmd, start = CASES[case]
    result = _run(cmd, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(start), result.stderr


def test_debug_shows_the_traceback_and_keeps_exit_2(tmp_path):
    result = _run(PT2AWS + ["recommend", "--model", "gpt-unknown", "--debug"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert "ValueError: unknown model 'gpt-unknown'" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("pt2aws recommend: error: unknown model 'gpt-unknown'")
    env_debug = _run(TRAIN + ["--profile", "nope"], tmp_path, PT2AWS_DEBUG="1")
    assert env_debug.returncode == 2 and "Traceback" in env_debug.stderr


def test_cli_main_returns_2_in_process(capsys):
    assert cli.main(["recommend", "--top", "0"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "pt2aws recommend: error: argument --top: must be an integer >= 1, got '0' "
        "(see pt2aws recommend --help)\n"
    )


def test_cli_recommend_prints_the_table(capsys):
    assert (
        cli.main(["recommend", "--model", "roberta-base", "--examples", "1000000", "--top", "3"])
        == 0
    )
    out = capsys.readouterr().out
    assert "roberta-base: 124,647,170 parameters" in out
    assert "workload class: small" in out and "Launch plan: 1 x" in out
