"""User errors at the command line: one line naming the problem and the fix, exit status 2.

The entry points (``pt2aws <verb>``, ``python -m pt2aws.train``, ``python -m pt2aws.pipeline``)
run through :func:`run_cli`. An exception that means *bad input the user can fix* prints one
line on stderr, ``<prog>: error: <problem>: <fix>``, and the process exits with status 2
(argparse's status for usage errors). ``--debug`` anywhere on the command line (or
``PT2AWS_DEBUG=1``) prints the traceback above that line. Any other exception is a bug: it
propagates with its traceback (exit status 1).

User errors (:func:`is_user_error`):

* :class:`UserError`, and the usage errors of an :class:`ArgumentParser` (unknown flag, bad
  choice, a value of the wrong type or range);
* ``ValueError`` and its subclasses: every validation in pt2aws raises one (``TrainConfig``,
  profiles, model names, the catalog, image and archive checks), and so do unreadable inputs
  (``UnicodeDecodeError``, ``json.JSONDecodeError``, pandas' ``ParserError``);
* a path the user named that is missing or unusable: ``FileNotFoundError``,
  ``NotADirectoryError``, ``IsADirectoryError``, ``PermissionError``;
* :class:`pt2aws.hub.HubUnreachableError`: a hub model or dataset while the hub is out of reach;
* the AWS set-up, from botocore: no or partial credentials, no region, an unknown profile, an
  unreachable endpoint, or a ``ClientError`` saying the credentials are invalid, expired or not
  allowed (:data:`AWS_CREDENTIAL_ERROR_CODES`).

Bugs (traceback): everything else, e.g. ``TypeError``, ``KeyError``, ``AttributeError``,
``IndexError``, ``AssertionError`` and ``RuntimeError`` (a failed subprocess or server, whose
own output says why).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from pt2aws.hub import HubUnreachableError

#: Exit status of a user error (argparse uses 2 for usage errors).
EXIT_USER_ERROR = 2
#: Command-line flag (anywhere in argv) and environment variable that show the traceback.
DEBUG_FLAG = "--debug"
DEBUG_ENV = "PT2AWS_DEBUG"
#: ``ClientError`` codes meaning the caller's credentials are invalid, expired or not allowed.
AWS_CREDENTIAL_ERROR_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "AuthFailure",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidAccessKeyId",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
    }
)
_PATH_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)
_CHECK_CREDENTIALS = (
    "set AWS credentials (aws configure, AWS_PROFILE or an instance role) and check them "
    "with `aws sts get-caller-identity`"
)


class UserError(Exception):
    """Bad input the user can fix; the message names the problem and the fix."""


class OneLineUsageErrors:
    """Mixin for an argparse parser class: a usage error raises :class:`UserError`.

    The message is argparse's (``argument --examples: must be an integer >= 1, got '-5'``) plus
    ``(see <prog> --help)``; :func:`run_cli` prints it as one line instead of argparse's usage
    block and ``exit(2)``. Mix it into another parser class the same way, e.g.
    ``class TrainParser(OneLineUsageErrors, transformers.HfArgumentParser)``.
    """

    def error(self, message: str):
        raise UserError(f"{message} (see {self.prog} --help)")


class ArgumentParser(OneLineUsageErrors, argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with :class:`OneLineUsageErrors`; its subparsers too."""


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
    """Whether ``exc`` is bad input the user can fix (see the module docstring), not a bug."""
    user_types = (UserError, ValueError, HubUnreachableError, *_PATH_ERRORS)
    return isinstance(exc, user_types) or _aws_hint(exc) is not None


def describe(exc: BaseException) -> str:
    """One line for a user error: its message (whitespace collapsed) and, where the message
    cannot name it, the fix (AWS set-up errors; an OS error on a path: "check the path")."""
    text = str(exc)
    if isinstance(exc, OSError) and exc.filename is not None and text.startswith("[Errno"):
        text = f"{exc.strerror}: {exc.filename}: check the path"
    hint = _aws_hint(exc)
    if hint:
        text = f"{text}: {hint}"
    return " ".join(text.split()) or type(exc).__name__


def run_cli(
    main: Callable[[list[str]], object], argv: Sequence[str] | None = None, *, prog: str
) -> int:
    """Run ``main(argv)`` as a command: a user error becomes one line on stderr and status 2.

    Args:
        main: the entry point; it gets ``argv`` without ``--debug``.
        argv: the arguments (default ``sys.argv[1:]``).
        prog: the command's name for the message, e.g. ``"pt2aws recommend"``.

    Returns:
        ``main``'s result when it is an int (an exit status), else 0; 2 after a user error.

    Raises:
        Exception: any exception that is not a user error (a bug), unchanged.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in args or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    args = [a for a in args if a != DEBUG_FLAG]
    try:
        result = main(args)
    except Exception as exc:
        if not is_user_error(exc):
            raise
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {describe(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    return result if isinstance(result, int) else 0
