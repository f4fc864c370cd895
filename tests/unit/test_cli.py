"""The command line: a verb's output, and each verb's user errors as one line and exit status 2.

Each case runs the real entry point in a subprocess (as a user would) with one bad input;
``--debug`` brings the traceback back. The in-process cases check the error classification.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import pt2aws
from pt2aws import cli, errors

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
        "pt2aws cleanup: error: Unable to locate credentials: set AWS credentials",
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


def test_run_cli_sorts_user_errors_from_bugs(capsys):
    def fails(exc):
        def main(argv):
            raise exc

        return main

    assert errors.run_cli(fails(FileNotFoundError(2, "No such file", "x.csv")), [], prog="p") == 2
    assert capsys.readouterr().err == "p: error: No such file: x.csv: check the path\n"
    assert errors.run_cli(fails(errors.UserError("bad\n  input: fix it")), [], prog="p") == 2
    assert capsys.readouterr().err == "p: error: bad input: fix it\n"  # always one line
    for bug in (KeyError("k"), TypeError("t"), IndexError("i"), RuntimeError("r")):
        with pytest.raises(type(bug)):
            errors.run_cli(fails(bug), [], prog="p")
    assert errors.run_cli(lambda argv: {"metrics": 1}, [], prog="p") == 0
    assert errors.run_cli(lambda argv: argv, ["a", "--debug"], prog="p") == 0


def test_aws_setup_errors_are_user_errors_with_a_fix():
    from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError

    assert errors.is_user_error(NoCredentialsError())
    assert "aws sts get-caller-identity" in errors.describe(NoCredentialsError())
    assert "--region" in errors.describe(NoRegionError())
    expired = ClientError({"Error": {"Code": "ExpiredToken", "Message": "expired"}}, "ListModels")
    throttled = ClientError({"Error": {"Code": "ThrottlingException"}}, "ListModels")
    assert errors.is_user_error(expired) and not errors.is_user_error(throttled)


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
