"""Raw labels to named classes: one spelling per label value (``1``, ``1.0`` and ``"+1"`` are
``"1"``, so a hand-written map matches numbers from any file), and label maps such as
``1=negative,2=negative,4=positive,5=positive``."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

from pt2aws.errors import DataError, option

#: Label cells that mean "no label" (any case), besides empty and missing.
MISSING_LABELS = frozenset({"", "nan", "none", "null", "na", "n/a"})
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def label_key(value: object) -> str | None:
    """One spelling for a raw label (integral numbers as digits, other numbers as the shortest
    float, strings stripped, bools lower case), ``None`` for a missing one."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in MISSING_LABELS:
            return None
        if not _NUMBER.match(text):
            return text
    try:
        number = float(value)  # a number's text; int, float, numpy and pandas scalars
    except (TypeError, ValueError):
        return None if value is None else str(value).strip() or None
    if math.isnan(number):
        return None
    return str(int(number)) if number.is_integer() else repr(number)


def parse_label_map(spec: Mapping | str | None) -> dict[str, str] | None:
    """``{label_key(raw): class}`` from a dict, a JSON object or ``"raw=class,raw=class"``;
    ``None`` when empty. DataError: bad JSON, no ``=``, an empty side, a label mapped twice, or
    fewer than 2 classes."""
    if not spec:
        return None
    if isinstance(spec, str) and spec.strip().startswith(("{", "[")):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as err:
            raise DataError(
                f"label_map {spec!r} is not valid JSON ({err.msg} at position {err.pos}); write "
                '\'{"1": "positive", "-1": "negative"}\' or 1=positive,-1=negative'
            ) from None
        if not isinstance(spec, dict):
            raise DataError(f"label_map {spec!r}: the JSON must be an object")
    elif isinstance(spec, str):
        items = [item.partition("=") for item in spec.split(",")]
        for raw in (raw for raw, sep, _ in items if not sep):
            raise DataError(
                f"label_map item {raw.strip()!r} has no '='; write raw=class pairs separated by "
                f"commas, e.g. {option('label_map', '1=positive,-1=negative')} (a label that "
                "contains ',' or '=' needs the JSON form)"
            )
        spec = {raw: name for raw, _, name in items}
    result: dict[str, str] = {}
    for raw, name in spec.items():
        key, name = label_key(raw), str(name or "").strip()
        if key is None or not name:
            raise DataError(
                f"label_map entry {raw!r}: {name!r}: both the raw label and the class name must be non-empty"
            )
        if result.setdefault(key, name) != name:
            raise DataError(
                f"label_map maps the label {key!r} to both {result[key]!r} and {name!r} (1, 1.0 "
                "and '1' are the same label); keep one"
            )
    if len(set(result.values())) < 2:
        raise DataError(
            f"label_map {spec!r} names {len(set(result.values()))} class(es); a classifier needs "
            f"at least 2, e.g. {option('label_map', '0=negative,1=positive')}"
        )
    return result


def suggest_label_map(labels: list[str]) -> str | None:
    """A map to suggest for labels that are all numbers (two become ``negative``/``positive``,
    more ``class_<value>``); ``None`` for any other labels."""
    if not all(_NUMBER.match(label) for label in labels):
        return None
    ordered = sorted(labels, key=float)
    names = ["negative", "positive"] if len(ordered) == 2 else [f"class_{v}" for v in ordered]
    return ",".join(f"{v}={name}" for v, name in zip(ordered, names))
