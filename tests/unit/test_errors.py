"""Tests of :mod:`pt2aws.errors`: user errors in one line, bugs with their traceback."""

from __future__ import annotations

import pytest

from pt2aws import errors


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


def test_every_pt2aws_error_class_is_a_user_error_and_keeps_its_builtin_base():
    pairs = [
        (errors.ConfigError, ValueError),
        (errors.DataError, ValueError),
        (errors.MissingFileError, FileNotFoundError),
        (errors.DataFileNotFoundError, FileNotFoundError),
        (errors.HubUnreachableError, ConnectionError),
    ]
    for cls, builtin in pairs:
        assert issubclass(cls, errors.UserError) and issubclass(cls, builtin), cls
        assert errors.is_user_error(cls("x"))


def _shell():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell()
    shell.colors = "nocolor"
    return shell


def test_a_notebook_cell_shows_a_user_error_as_one_line_and_still_fails(capsys, monkeypatch):
    monkeypatch.delenv(errors.DEBUG_ENV, raising=False)
    shell = _shell()
    assert errors.show_user_errors_in_one_line(shell)
    cell = (
        "from pt2aws.rundir import RunDir\nRunDir('/nowhere').require(RunDir('/nowhere').model_dir)"
    )
    result = shell.run_cell(cell)
    out = capsys.readouterr().out.strip()
    assert isinstance(result.error_in_exec, errors.MissingFileError)  # Run All stops here
    assert out == (
        "MissingFileError: /nowhere/train/model not found: run 01_finetune_multi_gpu first with "
        "RUN_DIR = '/nowhere'"
    )
    shell.run_cell("{}['a bug']")  # not ours: the usual traceback
    assert "Traceback" in capsys.readouterr().out
    monkeypatch.setenv(errors.DEBUG_ENV, "1")  # the switch, read when the error happens
    shell.run_cell(cell)
    debug = capsys.readouterr().out
    assert "Traceback" in debug and "rundir.py" in debug and debug.count("\n") > 5


def test_the_kernel_check_is_one_line_with_the_fix_and_installs_the_handler(capsys, monkeypatch):
    import importlib.util

    from pt2aws.pipeline import notebooks_dir

    script = notebooks_dir() / "kernel_check.py"
    shell = _shell()
    shell.run_cell(f"%run {script}")
    assert capsys.readouterr().out == "" and shell.custom_exceptions == (errors.UserError,)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "pt2aws" else find_spec(n, *a)
    )
    _shell().run_cell(f"%run {script}")
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ModuleNotFoundError: pt2aws is not installed")
    assert "`make kernel`" in lines[0] and "bash scripts/setup-env.sh" in lines[0]
