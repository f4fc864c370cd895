"""Every file shape the data loader reads, and every reading error, on files generated here."""

import bz2
import gzip
import json
import logging

import pandas as pd
import pytest

from pt2aws.data import DataError, DataFileNotFoundError, load_sentiment_data, read_table_file
from pt2aws.data.encoding import decode_bytes

TEXTS = {
    "positive": ["Très bien, café génial", "loved it, 10/10", 'a "great" read,\nsecond line'],
    "negative": ["Schön? Nein: schrecklich", "awful, never again", "meh; boring\tand slow"],
}


def rows(n_per_class: int = 12, labels=("positive", "negative")) -> list[tuple[str, str]]:
    """Distinct texts with tricky characters (accents, commas, quotes, line breaks, tabs)."""
    out = []
    for i in range(n_per_class):
        for name, label in zip(("positive", "negative"), labels):
            out.append((f"{TEXTS[name][i % 3]} #{i}", label))
    return out


def write_csv(path, data, *, header=True, sep=",", encoding="utf-8", names=("text", "label")):
    frame = pd.DataFrame(data, columns=list(names))
    path.write_bytes(frame.to_csv(sep=sep, index=False, header=header).encode(encoding))
    return str(path)


def texts_of(d) -> set[str]:
    return {t for split in d.splits.values() for t in split["text"]}


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
    assert d.stats["header"] is False
    with pytest.raises(DataError, match="--header true|false|auto"):
        load_sentiment_data(path, header="maybe")


def test_names_on_a_headerless_file_name_the_first_row_and_the_fix(tmp_path):
    path = write_csv(tmp_path / "d.csv", rows(), header=False)
    with pytest.raises(DataError, match=r"--header false") as err:
        load_sentiment_data(path)
    assert "Très bien, café génial #0" in str(err.value)
    with pytest.raises(DataError, match=r"without a header row.*--text_column 0"):
        load_sentiment_data(path, header=False, text_column="text", label_column=1)


def test_the_suggested_position_is_the_column_that_looks_like_text(tmp_path):
    path = tmp_path / "labels_first.tsv"  # label first, as spreadsheet exports often are
    path.write_text("-1\tthe plot was thin and the acting worse\n1\ta warm, funny film\n" * 30)
    with pytest.raises(DataError, match=r"without a header row.*--text_column 1"):
        load_sentiment_data(path, header=False)  # text_column "text" is a name
    with pytest.raises(DataError, match=r"not found.*--text_column 1"):
        load_sentiment_data(path, header=True)  # the first row taken as the header


def test_utf8_bom_does_not_rename_the_first_column(tmp_path):
    path = write_csv(tmp_path / "d.csv", rows(), encoding="utf-8-sig")
    d = load_sentiment_data(path)
    assert (
        d.stats["encoding"] == "utf-8-sig" and d.stats["encoding_detected_by"] == "byte-order mark"
    )
    assert d.stats["text_column"] == "text"
    assert load_sentiment_data(path, encoding="utf-8").stats["rows_read"] == 24


def test_utf16_with_bom(tmp_path):
    d = load_sentiment_data(write_csv(tmp_path / "d.csv", rows(), encoding="utf-16"))
    assert d.stats["encoding"] == "utf-16"
    assert "Très bien, café génial #0" in texts_of(d)


def test_latin1_is_detected_and_named(tmp_path, caplog):
    path = write_csv(tmp_path / "d.csv", rows(), encoding="latin-1")
    with caplog.at_level(logging.WARNING, logger="pt2aws.data.encoding"):
        d = load_sentiment_data(path)
    assert d.stats["encoding"] == "cp1252"  # Western European; same letters as latin-1 here
    assert "Schön? Nein: schrecklich #3" in texts_of(d)
    assert "not UTF-8: decoded as cp1252" in caplog.text and "--encoding" in caplog.text
    assert load_sentiment_data(path, encoding="latin-1").stats["encoding_detected_by"] == "given"


def test_wrong_encoding_names_the_line_and_the_option(tmp_path):
    path = write_csv(tmp_path / "d.csv", rows(), encoding="latin-1")
    with pytest.raises(
        DataError, match=r"not valid utf-8 \(byte 0xe8 at offset \d+, line 2\).*--encoding latin-1"
    ):
        load_sentiment_data(path, encoding="utf-8")
    with pytest.raises(DataError, match="unknown encoding 'klingon'"):
        load_sentiment_data(path, encoding="klingon")


@pytest.mark.parametrize(
    "text, encoding, expected",
    [
        ("Zażółć gęślą jaźń, świetny film. " * 20, "cp1250", "cp1250"),
        ("Отличный фильм, очень понравился. " * 20, "cp1251", "cp1251"),
        ("Der Film war großartig, „toll“ – 5€. " * 20, "cp1252", "cp1252"),
        ("text,label\nhello,1\n" * 20, "utf-16-le", "utf-16-le"),
    ],
)
def test_detection_keeps_non_western_code_pages_and_prefers_cp1252_for_latin(
    text, encoding, expected
):
    decoded, used, how = decode_bytes(text.encode(encoding), name="t")
    assert (decoded, used) == (text, expected)
    assert "charset-normalizer" in how


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
    for name in ("d.parquet", "d.csv.gz", "d.jsonl.bz2"):
        d = load_sentiment_data(str(tmp_path / name))
        assert sum(d.stats["per_split"].values()) == 24, name
    assert read_table_file(tmp_path / "d.csv.gz").attrs["compression"] == ".gz"


@pytest.mark.parametrize(
    "name, content, match",
    [
        ("d.txt", b"a,b\n", r"unsupported file type '\.txt'"),
        ("d.csv", b"", "is empty"),
        (
            "d.csv",
            b'text,label\n"fine",1\nnot, quoted, text,0\n',
            r"Expected 2 fields.*double quotes",
        ),
        (
            "d.jsonl",
            b'{"text": "a", "label": 1}\n{"text": "b", label: 0}\n',
            "line 2: not valid JSON",
        ),
        ("d.jsonl", b'{"text": "a", "label": 1}\n["b", 0]\n', "line 2: a list, not an object"),
        ("d.json", b'{"rows": 5}', "unsupported shape"),
        ("d.json", b"[1, 2", "not valid JSON"),
        ("d.parquet", b"PAR1 not really", "not a readable Parquet file"),
        ("d.csv.gz", b"not gzip", r"not a valid \.gz file"),
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
    with pytest.raises(DataError, match="is a folder"):
        read_table_file(tmp_path)
