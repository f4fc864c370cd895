"""Read labelled texts from a local file as raw ``text``/``label`` rows.

:func:`read_table_file` returns a ``pandas.DataFrame`` with exactly the columns ``text`` and
``label``, in file order, values as found (labels may be strings, numbers or missing); nothing is
cleaned or dropped here (:mod:`pt2aws.data.loading` does that and counts it). ``frame.attrs``
records how the file was read: ``format``, ``compression``, ``encoding``,
``encoding_detected_by``, ``header`` and the ``text_column``/``label_column`` used, so a run can
say what it did.

Files (the format comes from the suffix; ``.gz``, ``.bz2`` and ``.xz`` compression is undone
first): ``.csv`` (comma), ``.tsv``/``.tab`` (tab), with or without a header row, quoted fields
that span lines; ``.jsonl``/``.ndjson`` (one object per line); ``.json`` (a list of objects,
``{"data": [...]}``, pandas' ``orient="split"`` or ``"columns"`` layouts, or JSON Lines saved as
``.json``); ``.parquet``. Text encodings: see :mod:`pt2aws.data.encoding`.

Columns are chosen by name, or by 0-based position (an ``int`` or a digit string such as ``"0"``,
as the CLI passes it). ``header="auto"`` decides whether a CSV/TSV's first row is a header: with
column names it must be (names live in a header); with positions, the first row is a header when
its label is not one of the labels below it (a header says ``label`` or ``stars``, where data
rows repeat a few class values).
"""

from __future__ import annotations

import bz2
import difflib
import gzip
import io
import json
import lzma
from pathlib import Path

import pandas as pd

from pt2aws.data.encoding import decode_bytes
from pt2aws.data.errors import DataError, flag, option
from pt2aws.data.labels import label_key

#: File suffix -> format read by :func:`read_table_file`.
FILE_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
}
#: Compression suffix -> decompressor (a ``.csv.gz`` is read as a ``.csv``).
COMPRESSIONS = {".gz": gzip.decompress, ".bz2": bz2.decompress, ".xz": lzma.decompress}
#: Spellings of ``header`` (any case), as notebooks, the CLI and ``make`` pass it.
HEADER_CHOICES = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def file_format(path: str | Path) -> tuple[str | None, str | None]:
    """``(format, compression)`` of ``path`` from its suffixes, e.g. ``("csv", ".gz")``.

    The format is ``None`` for a suffix :data:`FILE_FORMATS` does not list.
    """
    suffixes = [s.lower() for s in Path(path).suffixes]
    compression = suffixes.pop() if suffixes and suffixes[-1] in COMPRESSIONS else None
    return (FILE_FORMATS.get(suffixes[-1]) if suffixes else None), compression


def header_choice(header: bool | str) -> bool | str:
    """``True``, ``False`` or ``"auto"`` from a bool or a string (``"false"``, ``"auto"``, ...).

    Raises:
        DataError: any other value.
    """
    if isinstance(header, bool):
        return header
    text = str(header).strip().lower()
    if text == "auto":
        return "auto"
    if text not in HEADER_CHOICES:
        raise DataError(f"header={header!r}: use true, false or auto (--header true|false|auto)")
    return HEADER_CHOICES[text]


def read_table_file(
    path: str | Path,
    text_column: str | int = "text",
    label_column: str | int = "label",
    header: bool | str = "auto",
    encoding: str = "auto",
) -> pd.DataFrame:
    """Raw ``text``/``label`` rows of a local CSV, TSV, JSON Lines, JSON or Parquet file.

    Args:
        path: an existing file; its suffixes give the format (see the module docstring).
        text_column, label_column: column names or 0-based positions (``0`` or ``"0"``).
        header: ``True``, ``False`` or ``"auto"`` (CSV/TSV only; strings such as ``"false"``
            work too).
        encoding: a codec name or ``"auto"`` (text formats only; :mod:`pt2aws.data.encoding`).

    Returns:
        A DataFrame with columns ``text`` and ``label`` and ``attrs`` saying how it was read.

    Raises:
        DataError: a folder, an unsupported suffix, undecodable or unparsable content (the
            message names the line), or a missing column.
    """
    path = Path(path)
    fmt, compression = file_format(path)
    if path.is_dir():
        raise DataError(f"{path} is a folder; pass a data file ({', '.join(FILE_FORMATS)})")
    if fmt is None:
        raise DataError(
            f"{path}: unsupported file type {''.join(path.suffixes) or '(no suffix)'!r}; use one "
            f"of {', '.join(FILE_FORMATS)} (optionally compressed: {', '.join(COMPRESSIONS)})"
        )
    header = header_choice(header)
    raw = path.read_bytes()
    if compression:
        try:
            raw = COMPRESSIONS[compression](raw)
        except (OSError, EOFError, lzma.LZMAError) as err:
            raise DataError(f"{path}: not a valid {compression} file ({err})") from None
    info = {"source": str(path), "format": fmt, "compression": compression}
    if fmt == "parquet":
        frame = _read_parquet(raw, path)
    else:
        text, used, how = decode_bytes(raw, encoding, name=str(path))
        info.update(encoding=used, encoding_detected_by=how)
        if fmt in ("csv", "tsv"):
            frame = _read_csv(text, "\t" if fmt == "tsv" else ",", path)
            frame, info["header"] = _apply_header(frame, header, text_column, label_column, path)
        elif fmt == "jsonl":
            frame = _read_jsonl(text, path)
        else:
            frame = _read_json(text, path)
    return _select_columns(frame, text_column, label_column, info, path)


def _read_csv(text: str, sep: str, path: Path) -> pd.DataFrame:
    """Every row, as strings, with positional column names (the header is decided later)."""
    try:
        return pd.read_csv(
            io.StringIO(text), sep=sep, header=None, dtype=str, keep_default_na=False
        )
    except pd.errors.EmptyDataError:
        raise DataError(f"{path} is empty; it needs a text and a label per row") from None
    except pd.errors.ParserError as err:
        reason = str(err).strip().removeprefix("Error tokenizing data. C error: ")
        raise DataError(
            f"{path}: not readable as {'TSV' if sep == chr(9) else 'CSV'}: {reason}. A text that "
            f"contains the separator {sep!r}, a quote or a line break must be in double quotes "
            '("..."), with inner quotes doubled ("")'
        ) from None


def _apply_header(frame, header, text_column, label_column, path) -> tuple[pd.DataFrame, bool]:
    """Use the first row as column names when ``header`` says so (or ``"auto"`` decides so)."""
    if header == "auto":
        header = _first_row_is_header(frame, text_column, label_column)
    if not header:
        return frame, False
    names = [str(v).strip() for v in frame.iloc[0]]
    return frame.iloc[1:].set_axis(names, axis=1).reset_index(drop=True), True


def _first_row_is_header(frame: pd.DataFrame, text_column, label_column) -> bool:
    if _position(text_column) is None or _position(label_column) is None:
        return True  # columns by name need a header row
    label_at = _position(label_column)
    if len(frame) < 2 or label_at >= frame.shape[1]:
        return False
    labels = frame.iloc[:, label_at]
    return label_key(labels.iloc[0]) not in set(labels.iloc[1:].map(label_key))


def _read_jsonl(text: str, path: Path) -> pd.DataFrame:
    records = []
    for number, line in enumerate(text.split("\n"), start=1):  # not splitlines(): U+2028 is text
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(
                f"{path}, line {number}: not valid JSON ({err.msg} at column {err.colno}); "
                "JSON Lines needs one complete object per line"
            ) from None
        if not isinstance(record, dict):
            raise DataError(
                f'{path}, line {number}: a {type(record).__name__}, not an object like {{"text": '
                '"...", "label": "..."}'
            )
        records.append(record)
    if not records:
        raise DataError(f"{path} has no rows")
    return pd.DataFrame.from_records(records)


def _read_json(text: str, path: Path) -> pd.DataFrame:
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as err:
        if err.msg == "Extra data":  # one object per line, saved as .json
            return _read_jsonl(text, path)
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if isinstance(payload, dict) and isinstance(payload.get("data"), list):
        rows = payload["data"]
        if "columns" in payload and rows and isinstance(rows[0], list):  # orient="split"
            return pd.DataFrame(rows, columns=payload["columns"])
        payload = rows
    if isinstance(payload, list) and payload and all(isinstance(r, dict) for r in payload):
        return pd.DataFrame.from_records(payload)
    if (
        isinstance(payload, dict)
        and payload
        and all(isinstance(v, (dict, list)) for v in payload.values())
    ):
        try:
            return pd.DataFrame(payload)  # orient="columns" ({"text": {"0": ...}}) or lists
        except ValueError:
            pass
    raise DataError(
        f"{path}: JSON of an unsupported shape; use a list of objects "
        '([{"text": "...", "label": "..."}, ...]), {"data": [...]}, or JSON Lines (.jsonl)'
    )


def _read_parquet(raw: bytes, path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(io.BytesIO(raw))
    except Exception as err:  # noqa: BLE001 - pyarrow raises its own types (ArrowInvalid, ...)
        raise DataError(f"{path}: not a readable Parquet file ({err})") from None


def _position(spec: str | int) -> int | None:
    """The 0-based column position ``spec`` names (``2`` or ``"2"``), else ``None``."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return spec
    if isinstance(spec, str) and spec.strip().isdigit():
        return int(spec)
    return None


def _select_columns(frame, text_column, label_column, info: dict, path) -> pd.DataFrame:
    columns = list(frame.columns)
    first_row = [str(v) for v in frame.iloc[0]] if len(frame) else []
    picked = [
        resolve_column(columns, spec, role, path, first_row)
        for spec, role in ((text_column, "text"), (label_column, "label"))
    ]
    if picked[0] == picked[1]:
        raise DataError(
            f"{path}: text and label are the same column ({picked[0]!r}); point "
            f"{flag('text_column')} and {flag('label_column')} at two columns"
        )
    out = frame.iloc[:, [columns.index(p) for p in picked]].set_axis(["text", "label"], axis=1)
    out = out.reset_index(drop=True)
    out.attrs = {"header": None, **info, "text_column": picked[0], "label_column": picked[1]}
    return out


def resolve_column(columns: list, spec, role: str, where, first_row: list[str] | None = None):
    """The column label that ``spec`` (a name or a 0-based position) names among ``columns``.

    Args:
        columns: the column labels: positions (ints) for a CSV read without a header row,
            names otherwise.
        spec: a name, or a position as an int or a digit string (``"0"``, as the CLI passes it).
        role: ``"text"`` or ``"label"``, for messages.
        where: the file or dataset, for messages.
        first_row: the first row's values, to show in messages.

    Raises:
        DataError: no such column (the message lists the columns and the options that fix it),
            a position out of range, or a name repeated in the header.
    """
    setting = f"{role}_column"
    if isinstance(spec, str) and spec in columns:
        if columns.count(spec) > 1:
            raise DataError(f"{where}: {columns.count(spec)} columns are named {spec!r}")
        return spec
    at = _position(spec)
    if at is not None:
        if not 0 <= at < len(columns):
            raise DataError(
                f"{where}: {role} column position {at} is out of range: the file has "
                f"{len(columns)} column(s), positions 0 to {len(columns) - 1}"
            )
        return columns[at]
    if columns and not isinstance(columns[0], str):
        raise DataError(
            f"{where}: the {role} column {spec!r} is a name, but the file is read without a "
            f"header row (its first row is {first_row}); pass 0-based positions, e.g. "
            f"{option(setting, _likely_position(first_row or [], role))}, or "
            f"{option('header', True)} if that row is a header"
        )
    close = difflib.get_close_matches(str(spec), [str(c) for c in columns], n=1)
    maybe = f" (did you mean {close[0]!r}?)" if close else ""
    raise DataError(
        f"{where}: column(s) {[spec]} not found{maybe}; the file has {columns}. Pass the "
        f"{role} column's name or its 0-based position, e.g. "
        f"{option(setting, _likely_position([str(c) for c in columns], role))}; if that first "
        f"row is data, not a header, pass positions and {option('header', False)}"
    )


def _likely_position(values: list[str], role: str) -> int:
    """The position a message suggests for ``role``: the longest value for the text column,
    the shortest for the label (a guess from one row, only for the example in a message)."""
    if not values:
        return 0
    lengths = [len(str(v)) for v in values]
    pick = max if role == "text" else min
    return pick(range(len(values)), key=lengths.__getitem__)
