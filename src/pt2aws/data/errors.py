"""The one exception type for data the user must fix, and how messages name the fix.

Every problem with a user's data (a file that cannot be read, a missing column, a bad label map,
too few rows in a class) raises :class:`DataError` (a ``ValueError``) or
:class:`DataFileNotFoundError` (also a ``FileNotFoundError``), with one message that names the
problem and the fix. The CLI prints such an error as one line and exits 2; Python callers can
catch either base class.
"""

from __future__ import annotations


class DataError(ValueError):
    """Data that cannot be used as given; the message names the problem and the fix."""


class DataFileNotFoundError(DataError, FileNotFoundError):
    """A data file (or the package that ships one) is missing; the message names the fix."""


def option(name: str, value: object) -> str:
    """How to set one data option, in Python and on the command line, for an error message.

    Example: ``option("header", False)`` gives ``"header=False (--header false)"``, so a message
    serves notebook, Python and CLI users alike (the notebook parameter is the upper-case name).

    Args:
        name: the keyword argument of :func:`pt2aws.data.load_sentiment_data`, which is also the
            ``TrainConfig`` field and CLI flag name.
        value: the value to suggest.
    """
    cli = str(value).lower() if isinstance(value, bool) else str(value)
    if not cli or any(c in cli for c in " {}\"'"):
        cli = "'" + cli + "'"
    return f"{name}={value!r} (--{name} {cli})"


def flag(name: str) -> str:
    """An option's name in Python and on the command line: ``"label_map (--label_map)"``."""
    return f"{name} (--{name})"
