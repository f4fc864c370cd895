"""Tests of :func:`pt2aws.data.readers.detect_encoding`: text encodings detected and named."""

import gzip
import logging

import pytest
from support.data_files import rows, texts_of, write_csv

from pt2aws.data import DataError, load_sentiment_data
from pt2aws.data.readers import detect_encoding


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
    with caplog.at_level(logging.WARNING, logger="pt2aws.data.readers"):
        d = load_sentiment_data(path)
    assert d.stats["encoding"] == "cp1252"  # Western European; same letters as latin-1 here
    assert "Schön? Nein: schrecklich #3" in texts_of(d)
    assert "not UTF-8: decoded as cp1252" in caplog.text and "--encoding" in caplog.text
    assert load_sentiment_data(path, encoding="latin-1").stats["encoding_detected_by"] == "given"


def test_wrong_encoding_names_the_line_and_the_option(tmp_path):
    path = write_csv(tmp_path / "d.csv", rows(), encoding="latin-1")
    with pytest.raises(
        DataError,
        match=r"not valid utf-8 \(byte 0xe8: invalid continuation byte\).*--encoding latin-1",
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
    tmp_path, text, encoding, expected
):
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(text.encode(encoding)))  # detection reads through gzip
    used, how = detect_encoding(path, ".gz")
    assert used == expected and text.encode(encoding).decode(used) == text
    assert "charset-normalizer" in how
