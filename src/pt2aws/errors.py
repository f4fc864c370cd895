"""User errors: one line naming the problem and the fix, at the command line (:func:`run_cli`,
``<prog>: error: ...``, exit 2) and in a notebook cell (:func:`show_user_errors_in_one_line`);
``--debug`` or ``PT2AWS_DEBUG=1`` shows the traceback. Anything else is a bug and keeps it."""

from __future__ import annotations

import argparse
import builtins
import os
import sys
import traceback
from collections.abc import Callable, Sequence

DEBUG_ENV = "PT2AWS_DEBUG"
CHECK_CREDENTIALS = (
    "set AWS credentials (aws configure, AWS_PROFILE or an instance role) and check them "
    "with `aws sts get-caller-identity`"
)


class UserError(Exception):
    """Bad input the user can fix; the message names the problem and the fix."""


class ConfigError(UserError, ValueError):
    """A setting out of range or of the wrong kind (a profile, a flag, a model name)."""


class MissingFileError(UserError, FileNotFoundError):
    """A file, folder or package the user must provide, or a notebook to run first."""


class DataError(UserError, ValueError):
    """Data that cannot be used as given."""


class DataFileNotFoundError(DataError, MissingFileError):
    """A data file (or the package that ships one) is missing."""


class HubUnreachableError(UserError, ConnectionError):
    """A Hugging Face hub model or dataset was asked for while the hub cannot be reached."""


def option(name: str, value: object) -> str:
    """``option("header", False)`` is ``"header=False (--header false)"``, for a message."""
    cli = str(value).lower() if isinstance(value, bool) else str(value)
    if not cli or any(c in cli for c in " {}\"'"):
        cli = f"'{cli}'"
    return f"{name}={value!r} (--{name} {cli})"


def flag(name: str) -> str:
    """An option's name in Python and on the command line: ``"label_map (--label_map)"``."""
    return f"{name} (--{name})"


class ArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors (its subparsers' too) raise a one-line UserError."""

    def error(self, message: str):
        raise UserError(f"{message} (see {self.prog} --help)")


#: AWS's answer -> one line naming the fix, first match: ``(botocore exception class, error code
#: prefix or operation; words in the message; the line)``, formatted with ``err``, ``code``,
#: ``message``, ``operation``, ``region``.
AWS_ERRORS = (
    ("NoCredentialsError", (), f"no AWS credentials found: {CHECK_CREDENTIALS}"),
    ("PartialCredentialsError", (), f"incomplete AWS credentials ({{err}}): {CHECK_CREDENTIALS}"),
    ("NoRegionError", (), "no AWS region: pass --region (e.g. us-east-1) or set AWS_DEFAULT_REGION"),
    ("ProfileNotFound", (), "{err}: set AWS_PROFILE to one of `aws configure list-profiles`"),
    ("EndpointConnectionError", (), "AWS is unreachable ({err}): check the network, the region "
     "{region!r} and AWS_ENDPOINT_URL"),
    ("ClientError", ("iam:passrole",), "these credentials may not pass the execution role "
     "({message}): allow iam:PassRole on it, with condition iam:PassedToService = "
     "sagemaker.amazonaws.com"),
    ("AccessDenied", (), "{operation} was refused ({message}): allow it to these credentials (the "
     "checklist lists every action pt2aws calls)"),
    ("ResourceLimitExceeded", (), "quota reached ({message}): request an increase in the Service "
     "Quotas console (Amazon SageMaker) or pick another instance type"),
    ("ClientError", ("assume", "role"), "SageMaker cannot assume the execution role ({message}): "
     "it must exist and trust sagemaker.amazonaws.com"),
    *((kind, (), f"the credentials were refused ({{code}}): {CHECK_CREDENTIALS}")
      for kind in ("GetCallerIdentity", "AuthFailure", "ExpiredToken", "InvalidAccessKeyId",
                   "InvalidClientTokenId", "SignatureDoesNotMatch", "UnrecognizedClient")),
)  # fmt: skip


def explain_aws(err: BaseException, region: str = "") -> str | None:
    """The line of :data:`AWS_ERRORS` that ``err`` (a botocore error) matches, or None."""
    if not type(err).__module__.startswith("botocore"):
        return None
    error = getattr(err, "response", {}).get("Error", {})
    code, message = error.get("Code", ""), error.get("Message", "")
    operation = getattr(err, "operation_name", "")
    names = {cls.__name__ for cls in type(err).__mro__} | {operation}
    for kind, words, line in AWS_ERRORS:
        if (kind in names or code.startswith(kind)) and all(w in message.lower() for w in words):
            fields = {"code": code, "message": message, "operation": operation, "region": region}
            return line.format(err=err, **fields)
    return None


def is_user_error(exc: BaseException) -> bool:
    """Whether the command line reports ``exc`` as the user's, not a bug."""
    user = (UserError, ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError)
    return isinstance(exc, (*user, PermissionError)) or explain_aws(exc) is not None


def describe(exc: BaseException) -> str:
    """One line for a user error, with the fix where the message lacks it (AWS, OS errors)."""
    text = explain_aws(exc) or str(exc)
    if isinstance(exc, OSError) and exc.filename is not None and text.startswith("[Errno"):
        text = f"{exc.strerror}: {exc.filename}: check the path"
    return " ".join(text.split()) or type(exc).__name__


def debug_enabled() -> bool:
    """Whether ``PT2AWS_DEBUG`` asks for full tracebacks (any value but empty or ``0``)."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def run_cli(main: Callable[[list[str]], object], argv: Sequence[str] | None = None, *, prog: str):
    """``main(argv without --debug)``'s int result (else 0); a user error prints one line
    ``<prog>: error: ...`` on stderr and returns 2; other exceptions propagate."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or debug_enabled()
    try:
        result = main([a for a in args if a != "--debug"])
    except Exception as exc:
        if not is_user_error(exc):
            raise
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {describe(exc)}", file=sys.stderr)
        return 2  # argparse's status for a usage error
    return result if isinstance(result, int) else 0


def show_user_errors_in_one_line(shell=None) -> bool:
    """Show a :class:`UserError` raised in an IPython cell (``shell``, default the running one)
    as one line, ``<Type>: <message>``; the cell still fails. ``PT2AWS_DEBUG=1`` (also set
    later, with ``%env``) shows the traceback. Returns whether a shell was found."""
    if shell is None:  # IPython puts get_ipython() in builtins while a cell runs
        shell = getattr(builtins, "get_ipython", lambda: None)()
    if shell is None:
        return False

    def one_line(shell, etype, value, tb, tb_offset=None):
        if debug_enabled():
            return shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        shell._showtraceback(etype, value, [f"{etype.__name__}: {describe(value)}"])

    shell.set_custom_exc((UserError,), one_line)
    return True
