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
