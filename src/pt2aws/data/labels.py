"""Raw labels to named classes: one spelling per label value, and label maps.

Files store labels as words (``positive``), numbers (``1``, ``-1``, ``4``) or numbers written as
floats (``1.0``, what pandas makes of an integer column with a gap). :func:`label_key` gives each
value one spelling, so ``1``, ``1.0``, ``"1"`` and ``" 1 "`` are the same label, and a label map
written by hand (always strings) matches numbers read from any file.

A label map names the classes: ``{"1": "positive", "-1": "negative"}``, or 1-5 stars grouped
into two classes with 3 left out (``1=negative,2=negative,4=positive,5=positive``). Rows whose
label the map does not name are dropped and counted. :func:`parse_label_map` accepts a dict, a
JSON object string, or ``key=value,key=value`` (for the CLI and ``make``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

from pt2aws.data.errors import DataError, option

#: Label cells that mean "no label" (compared case-insensitively), besides empty and missing.
MISSING_LABELS = frozenset({"", "nan", "none", "null", "na", "n/a"})
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def label_key(value: object) -> str | None:
    """One spelling for a raw label value, or ``None`` for a missing one.

    Integral numbers, as numbers or as strings, become their integer digits (``1``, ``1.0``,
    ``"1.0"``, ``"+1"`` -> ``"1"``); other numbers their shortest float form (``"0.5"``); strings
    are stripped, case kept. ``None``, NaN, ``""`` and :data:`MISSING_LABELS` are missing.

    Examples:
        >>> [label_key(v) for v in (1, 1.0, "1.0", " -1 ", "positive", "", float("nan"))]
        ['1', '1', '1', '-1', 'positive', None, None]
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in MISSING_LABELS:
            return None
        return _number_key(float(text)) if _NUMBER.match(text) else text
    try:
        number = float(value)  # int, float, numpy and pandas scalars
    except (TypeError, ValueError):
        return str(value).strip() or None
    return None if math.isnan(number) else _number_key(number)


def _number_key(number: float) -> str:
    return str(int(number)) if number.is_integer() else repr(number)


def parse_label_map(spec: Mapping | str | None) -> dict[str, str] | None:
    """A label map from a dict, a JSON object string or ``"key=value,key=value"``.

    Args:
        spec: e.g. ``{"1": "positive", "-1": "negative"}``, ``'{"1": "positive"}'`` or
            ``"1=negative,2=negative,4=positive,5=positive"``; ``None`` or ``""`` for no map.

    Returns:
        ``{label_key(raw): class name}``, or ``None`` when ``spec`` is empty.

    Raises:
        DataError: unreadable JSON, an item without ``=``, an empty key or class name, one raw
            label mapped to two classes (``1`` and ``1.0`` are the same label), or fewer than
            2 classes.
    """
    if spec is None or (isinstance(spec, (str, Mapping)) and not spec):
        return None
    if isinstance(spec, str):
        spec = _parse_string(spec.strip())
    if not isinstance(spec, Mapping):
        raise DataError(f"label_map must be a mapping of raw label to class name, got {spec!r}")
    result: dict[str, str] = {}
    for raw, name in spec.items():
        key = label_key(raw)
        name = "" if name is None else str(name).strip()
        if key is None or not name:
            raise DataError(
                f"label_map entry {raw!r}: {name!r}: both the raw label and the class name must "
                "be non-empty"
            )
        if result.get(key, name) != name:
            raise DataError(
                f"label_map maps the label {key!r} to both {result[key]!r} and {name!r} "
                "(1, 1.0 and '1' are the same label); keep one"
            )
        result[key] = name
    if len(set(result.values())) < 2:
        raise DataError(
            f"label_map {spec!r} names {len(set(result.values()))} class(es); a classifier needs "
            f"at least 2, e.g. {option('label_map', '0=negative,1=positive')}"
        )
    return result


def _parse_string(text: str) -> dict:
    if text.startswith(("{", "[")):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(
                f"label_map {text!r} is not valid JSON ({err.msg} at position {err.pos}); write "
                '\'{"1": "positive", "-1": "negative"}\' or 1=positive,-1=negative'
            ) from None
        if not isinstance(loaded, dict):
            raise DataError(f"label_map {text!r}: the JSON must be an object")
        return loaded
    items = {}
    for item in text.split(","):
        raw, sep, name = item.partition("=")
        if not sep:
            raise DataError(
                f"label_map item {item.strip()!r} has no '='; write raw=class pairs separated by "
                f"commas, e.g. {option('label_map', '1=positive,-1=negative')} (a label that "
                "contains ',' or '=' needs the JSON form)"
            )
        items[raw] = name
    return items


def suggest_label_map(labels: list[str]) -> str:
    """A ``key=value`` label map to put in a message, for numeric class values found in data.

    Two values become ``negative``/``positive`` (lower is negative); more become their own
    names with a ``class_`` prefix, for the user to edit.
    """
    ordered = sorted(labels, key=lambda v: float(v) if _NUMBER.match(v) else math.inf)
    if len(ordered) == 2:
        return f"{ordered[0]}=negative,{ordered[1]}=positive"
    return ",".join(f"{v}=class_{v}" for v in ordered)


def is_numeric(label: str) -> bool:
    """True for a label spelled as a number (``"1"``, ``"-1"``, ``"0.5"``)."""
    return bool(_NUMBER.match(label))
