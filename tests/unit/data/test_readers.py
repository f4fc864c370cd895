"""Tests of :mod:`pt2aws.data.readers`: CSV/TSV/JSON(L)/Parquet files, headers, columns."""

import bz2
import gzip
import json
import lzma

import pandas as pd
import pytest
from support.data_files import rows, texts_of, write_csv

from pt2aws.data import DataError, DataFileNotFoundError, load_sentiment_data, read_file


def test_csv_with_header_keeps_quoted_multiline_commas_and_quotes(tmp_path):
    d = load_sentiment_data(write_csv(tmp_path / "d.csv", rows()))
    assert d.stats["header"] is True and d.stats["encoding"] == "utf-8"
    assert d.label_names == ["negative", "positive"]
    assert 'a "great" read,\nsecond line #2' in texts_of(d)
    assert "meh; boring\tand slow #2" in texts_of(d)
    assert sum(d.stats["per_split"].values()) == 24


@pytest.mark.parametrize("text_column, label_column", [(0, 1), ("0", "1")])
def test_headerless_csv_by_position_is_detected(tmp_path, text_column, label_column):
    path = write_csv(tmp_path / "d.csv", rows(), header=False)
    d = load_sentiment_data(path, text_column=text_column, label_column=label_column)
    assert d.stats["header"] is False
    assert d.stats["rows_read"] == 24  # the first row is data, not a header


def test_header_csv_by_position_is_detected_and_columns_reordered(tmp_path):
    path = write_csv(tmp_path / "d.csv", [(y, t) for t, y in rows()], names=("stars", "review"))
    d = load_sentiment_data(path, text_column=1, label_column="0")
    assert d.stats["header"] is True and d.stats["rows_read"] == 24
    assert d.stats["text_column"] == "review" and d.stats["label_column"] == "stars"


def test_header_option_accepts_cli_spellings(tmp_path):
    path = write_csv(tmp_path / "d.csv", rows(), header=False)
    d = load_sentiment_data(path, header="false", text_column="0", label_column="1")
    assert d.stats["header"] is False  # a wrong spelling is TrainConfig's error (test_config)


def test_names_on_a_headerless_file_name_the_first_row_and_the_fix(tmp_path):
    path = write_csv(tmp_path / "d.csv", rows(), header=False)
    with pytest.raises(DataError, match=r"--header false") as err:
        load_sentiment_data(path)
    assert "Très bien, café génial #0" in str(err.value)
    with pytest.raises(DataError, match=r"without a header row.*--text_column 0"):
        load_sentiment_data(path, header=False, text_column="text", label_column=1)


def test_names_on_a_wrong_header_choice_name_the_columns_and_the_fix(tmp_path):
    path = tmp_path / "labels_first.tsv"  # label first, as spreadsheet exports often are
    path.write_text("-1\tthe plot was thin and the acting worse\n1\ta warm, funny film\n" * 30)
    with pytest.raises(DataError, match=r"without a header row.*--text_column 0"):
        load_sentiment_data(path, header=False)  # text_column "text" is a name
    with pytest.raises(DataError, match=r"not found.*-1.*--text_column.*--header false"):
        load_sentiment_data(path, header=True)  # the first row taken as the header


def test_tsv(tmp_path):
    d = load_sentiment_data(write_csv(tmp_path / "d.tsv", rows(), sep="\t"))
    assert "meh; boring\tand slow #2" in texts_of(d)


def test_jsonl_and_json_shapes(tmp_path):
    data = [{"review": t, "stars": 5 if y == "positive" else 1} for t, y in rows()]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in data) + "\n\n")
    (tmp_path / "b.json").write_text(json.dumps(data))
    (tmp_path / "c.json").write_text(json.dumps({"data": data}))
    (tmp_path / "d.json").write_text(pd.DataFrame(data).to_json(orient="split"))
    (tmp_path / "e.json").write_text(pd.DataFrame(data).to_json())  # orient="columns"
    (tmp_path / "f.json").write_text("\n".join(json.dumps(r) for r in data))  # JSONL as .json
    for name in ("a.jsonl", "b.json", "c.json", "d.json", "e.json", "f.json"):
        d = load_sentiment_data(
            str(tmp_path / name),
            text_column="review",
            label_column="stars",
            label_map="1=neg,5=pos",
        )
        assert d.label_names == ["neg", "pos"], name
        assert sum(d.stats["per_split"].values()) == 24, name


def test_parquet_and_compressed_files(tmp_path):
    frame = pd.DataFrame(rows(), columns=["text", "label"])
    frame.to_parquet(tmp_path / "d.parquet")
    (tmp_path / "d.csv.gz").write_bytes(gzip.compress(frame.to_csv(index=False).encode()))
    (tmp_path / "d.jsonl.bz2").write_bytes(
        bz2.compress(frame.to_json(orient="records", lines=True).encode())
    )
    (tmp_path / "d.tsv.xz").write_bytes(lzma.compress(frame.to_csv(sep="\t", index=False).encode()))
    for name in ("d.parquet", "d.csv.gz", "d.jsonl.bz2", "d.tsv.xz"):
        d = load_sentiment_data(str(tmp_path / name))
        assert sum(d.stats["per_split"].values()) == 24, name
    assert read_file(tmp_path / "d.csv.gz").attrs["compression"] == ".gz"


@pytest.mark.parametrize(
    "name, content, match",
    [
        ("d.txt", b"a,b\n", r"not a data file I can read \(\.txt\)"),
        ("d.csv", b"", "is empty"),
        (
            "d.csv",
            b'text,label\n"fine",1\nnot, quoted, text,0\n',
            r"Expected 2 fields in line 3.*double quotes",
        ),
        (
            "d.jsonl",
            b'{"text": "a", "label": 1}\n{"text": "b", label: 0}\n',
            r"not readable as JSONL .*position 40.*one complete object per line",
        ),
        ("d.jsonl", b'{"text": "a", "label": 1}\n["b", 0]\n', "not readable as JSONL"),
        ("d.json", b'{"rows": 5}', r"not readable as JSON .*use a list of objects"),
        ("d.json", b"[1, 2", "not readable as JSON"),
        ("d.parquet", b"PAR1 not really", "not readable as PARQUET"),
        ("d.csv.gz", b"not gzip", r"not a valid \.gz file"),
        ("d.parquet.gz", b"x", r"not a data file I can read \(\.parquet\.gz\)"),
    ],
)
def test_unreadable_files_are_one_clear_error(tmp_path, name, content, match):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(DataError, match=match):
        load_sentiment_data(str(tmp_path / name))


def test_column_errors(tmp_path):
    path = write_csv(tmp_path / "d.csv", rows())
    with pytest.raises(DataError, match=r"\['Text'\] not found \(did you mean 'text'\?\)"):
        load_sentiment_data(path, text_column="Text")
    with pytest.raises(DataError, match=r"label column position 7 is out of range.*2 column"):
        load_sentiment_data(path, text_column=0, label_column=7)
    with pytest.raises(DataError, match="same column"):
        load_sentiment_data(path, text_column="text", label_column="text")


def test_missing_paths_and_folders(tmp_path):
    with pytest.raises(DataFileNotFoundError, match=r"does not exist \(looked for /"):
        load_sentiment_data(str(tmp_path / "nope.tsv"))
    with pytest.raises(FileNotFoundError):  # DataFileNotFoundError is one
        load_sentiment_data("~/surely/not/here.parquet")
    with pytest.raises(DataError, match="not a data file I can read"):
        read_file(tmp_path)


def test_hub_dataset_splits_are_joined_with_class_names(monkeypatch):
    import datasets

    from pt2aws.data import read_source, readers

    features = datasets.Features(
        {"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])}
    )

    def split(labels):
        texts = [f"text {len(labels)} {i}" for i in range(len(labels))]
        return datasets.Dataset.from_dict({"sentence": texts, "label": labels}, features=features)

    hub = datasets.DatasetDict({"train": split([0, 1, 1]), "test": split([-1, -1])})
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config=None: hub)
    monkeypatch.setattr(readers, "ensure_hub_reachable", lambda *args, **kwargs: None)
    frame = read_source("someone/reviews", text_column="sentence")
    assert frame["label"][:3].tolist() == ["neg", "pos", "pos"]
    assert frame["label"][3:].isna().all()  # -1: no label
    assert frame.attrs["format"] == "hub" and frame.attrs["text_column"] == "sentence"
    with pytest.raises(DataError, match=r"\['text'\] not found.*'sentence'"):
        read_source("someone/reviews")
