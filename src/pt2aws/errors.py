"""User errors: one line naming the problem and the fix, at the command line and in a notebook.

Every error pt2aws raises for input the user can fix derives from :class:`UserError`. The entry
points run through :func:`run_cli`: a user error prints ``<prog>: error: <problem>: <fix>`` on
stderr and exits 2 (argparse's status for usage errors). The command line also counts as the
user's: ``ValueError`` (pandas' ``ParserError``, ``UnicodeDecodeError``, ``JSONDecodeError``), a
missing or unusable path, and the AWS set-up errors of botocore. Anything else is a bug and keeps
its traceback. In a notebook, :func:`show_user_errors_in_one_line` (the first cell runs it) does
the same for :class:`UserError`. ``--debug`` or ``PT2AWS_DEBUG=1`` shows the full traceback.
"""

from __future__ import annotations

import argparse
import builtins
import os
import sys
import traceback
from collections.abc import Callable, Sequence

#: Exit status of a user error (argparse's for usage errors).
EXIT_USER_ERROR = 2
#: Command-line flag (anywhere in argv) and environment variable that show the traceback.
DEBUG_FLAG, DEBUG_ENV = "--debug", "PT2AWS_DEBUG"
#: ``ClientError`` codes meaning the caller's credentials are invalid, expired or not allowed.
AWS_CREDENTIAL_ERROR_CODES = frozenset(
    "AccessDenied AccessDeniedException AuthFailure ExpiredToken ExpiredTokenException "
    "InvalidAccessKeyId InvalidClientTokenId SignatureDoesNotMatch UnrecognizedClientException".split()
)
_CHECK_CREDENTIALS = (
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
    """How to set a data option in Python and on the command line, for a message:
    ``option("header", False)`` is ``"header=False (--header false)"``."""
    cli = str(value).lower() if isinstance(value, bool) else str(value)
    if not cli or any(c in cli for c in " {}\"'"):
        cli = f"'{cli}'"
    return f"{name}={value!r} (--{name} {cli})"


def flag(name: str) -> str:
    """An option's name in Python and on the command line: ``"label_map (--label_map)"``."""
    return f"{name} (--{name})"


class OneLineUsageErrors:
    """Mixin for an argparse parser class: a usage error raises :class:`UserError` (argparse's
    message plus ``(see <prog> --help)``) instead of printing the usage block and exiting."""

    def error(self, message: str):
        raise UserError(f"{message} (see {self.prog} --help)")


class ArgumentParser(OneLineUsageErrors, argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors (its subparsers' too) are one line."""


def _aws_hint(exc: BaseException) -> str | None:
    """The fix for an AWS set-up error from botocore, or None for any other exception."""
    if not type(exc).__module__.startswith("botocore"):
        return None
    from botocore import exceptions as bx

    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return _CHECK_CREDENTIALS
    if isinstance(exc, bx.NoRegionError):
        return "pass --region (e.g. us-east-1) or set AWS_DEFAULT_REGION"
    if isinstance(exc, bx.ProfileNotFound):
        return "set AWS_PROFILE to a profile of `aws configure list-profiles`"
    if isinstance(exc, bx.EndpointConnectionError):
        return "check the network, the region and AWS_ENDPOINT_URL"
    if isinstance(exc, bx.ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        return _CHECK_CREDENTIALS if code in AWS_CREDENTIAL_ERROR_CODES else None
    return None


def is_user_error(exc: BaseException) -> bool:
    """Whether the command line reports ``exc`` as the user's (module docstring), not a bug."""
    user = (UserError, ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError)
    return isinstance(exc, (*user, PermissionError)) or _aws_hint(exc) is not None


def describe(exc: BaseException) -> str:
    """One line for a user error: its message, whitespace collapsed, and the fix where the
    message cannot name it (AWS set-up errors; an OS error on a path: "check the path")."""
    text = str(exc)
    if isinstance(exc, OSError) and exc.filename is not None and text.startswith("[Errno"):
        text = f"{exc.strerror}: {exc.filename}: check the path"
    hint = _aws_hint(exc)
    return " ".join(f"{text}: {hint}".split() if hint else text.split()) or type(exc).__name__


def debug_enabled() -> bool:
    """Whether ``PT2AWS_DEBUG`` asks for full tracebacks (any value but empty or ``0``)."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def run_cli(main: Callable[[list[str]], object], argv: Sequence[str] | None = None, *, prog: str):
    """Run ``main(argv)`` as a command: a user error becomes one line on stderr and status 2.

    Args:
        main: the entry point; it gets ``argv`` (default ``sys.argv[1:]``) without ``--debug``.
        prog: the command's name for the message, e.g. ``"pt2aws recommend"``.

    Returns:
        ``main``'s result when it is an int (an exit status), else 0; 2 after a user error.

    Raises:
        Exception: any exception that is not a user error (a bug), unchanged.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in args or debug_enabled()
    try:
        result = main([a for a in args if a != DEBUG_FLAG])
    except Exception as exc:
        if not is_user_error(exc):
            raise
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {describe(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    return result if isinstance(result, int) else 0


def show_user_errors_in_one_line(shell=None) -> bool:
    """Show a :class:`UserError` raised in an IPython cell as one line, ``<Type>: <message>``.

    Installs an IPython custom exception handler (``shell.set_custom_exc``); the cell still
    fails (Run All stops there). With ``PT2AWS_DEBUG=1`` (also set later, e.g. with ``%env``)
    the full traceback shows instead. Other exceptions keep their traceback.

    Args:
        shell: an ``InteractiveShell``; default: the running one, if any.

    Returns:
        Whether a shell was found (False in plain Python).
    """
    if shell is None:  # IPython puts get_ipython() in builtins while a cell runs
        shell = getattr(builtins, "get_ipython", lambda: None)()
    if shell is None:
        return False

    def one_line(shell, etype, value, tb, tb_offset=None):
        if debug_enabled():
            return shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        shell._showtraceback(
            etype, value, [f"{etype.__name__}: {describe(value)}"]
        )  # the cell's error

    shell.set_custom_exc((UserError,), one_line)
    return True
