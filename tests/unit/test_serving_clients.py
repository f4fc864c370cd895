"""Request bodies as common tools on Windows, macOS and Linux send them, through the handler.

Each case names the tool. The bytes are what the tool writes or sends (file encodings and line
endings of PowerShell, Notepad and Excel; curl's --data vs --data-binary; Python's requests and
http.client), so the handler is tested on what arrives, not on tidy literals.
"""

from __future__ import annotations

import codecs
import json

import pytest

from pt2aws.serving import handler

PRETTY_JSON = '{\n  "inputs": [\n    "great phone",\n    "awful service"\n  ]\n}\n'


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def curl_data(file_bytes: bytes) -> bytes:
    """What `curl --data @file` sends: the file with CR and LF removed (--data-binary keeps
    them). Source: curl(1), --data: "carriage returns and newlines will be stripped out"."""
    return file_bytes.replace(b"\r", b"").replace(b"\n", b"")


READ_AS_MEANT = [
    # Windows: Notepad "UTF-8 with BOM", Windows PowerShell 5 `Out-File -Encoding utf8`
    ("notepad-bom-text", codecs.BOM_UTF8 + b"great phone\r\n", "text/plain", ["great phone"]),
    (
        "powershell5-outfile-utf8-json",
        codecs.BOM_UTF8 + crlf(PRETTY_JSON).encode(),
        "application/json",
        ["great phone", "awful service"],
    ),
    # Excel "CSV UTF-8 (Comma delimited)": BOM, CRLF, a header
    (
        "excel-csv-utf8",
        codecs.BOM_UTF8 + b'text\r\ngreat phone\r\n"awful, really"\r\n',
        "text/csv",
        ["great phone", "awful, really"],
    ),
    # a quoted CSV cell spanning lines, written on Windows
    (
        "csv-multiline-cell-crlf",
        b'"line one\r\nline two"\r\n',
        "text/csv",
        ["line one\nline two"],
    ),
    # classic Mac OS line endings
    ("csv-cr-only", b"great\rawful\r", "text/csv", ["great", "awful"]),
    # a text file saved on Windows with two lines, sent with curl --data-binary @file
    ("text-crlf-lines", b"line one\r\nline two\r\n", "text/plain", ["line one\nline two"]),
    # Linux/macOS editors end files with a newline: --data-binary keeps it
    ("text-trailing-newline", b"great phone\n", "text/plain", ["great phone"]),
    ("text-only-newline", b"\r\n", "text/plain", [""]),
    # curl --data @pretty.json strips newlines: still valid JSON
    (
        "curl-data-json",
        curl_data(crlf(PRETTY_JSON).encode()),
        "application/json",
        ["great phone", "awful service"],
    ),
    (
        "curl-data-binary-json",
        crlf(PRETTY_JSON).encode(),
        "application/json",
        ["great phone", "awful service"],
    ),
    # curl --data @texts.csv glues the rows into one (use --data-binary for CSV)
    ("curl-data-csv", curl_data(b"text\ngreat\nawful\n"), "text/csv", ["textgreatawful"]),
    # Python requests json=...: ASCII with \u escapes, no charset
    (
        "requests-json",
        json.dumps({"inputs": ["caf\u00e9 \u2615"]}).encode(),
        "application/json",
        ["caf\u00e9 \u2615"],
    ),
    # requests 2.34 (urllib3 2) data="café": UTF-8, no charset
    ("requests-data-str", "caf\u00e9".encode(), "text/plain", ["caf\u00e9"]),
    # charset spellings seen in the wild
    ("charset-quoted", "caf\u00e9".encode(), 'text/plain; charset="UTF-8"', ["caf\u00e9"]),
    (
        "charset-single-quoted",
        "caf\u00e9".encode(),
        "text/plain; charset='utf-8'",
        ["caf\u00e9"],
    ),
    ("charset-utf8-alias", "caf\u00e9".encode(), "text/plain;charset=utf8", ["caf\u00e9"]),
    ("charset-casing", "caf\u00e9".encode(), "Text/Plain; CHARSET=Utf-8", ["caf\u00e9"]),
    (
        "charset-latin1",
        "caf\u00e9".encode("latin-1"),
        "text/plain; charset=ISO-8859-1",
        ["caf\u00e9"],
    ),
    (
        "charset-cp1252",
        "na\u00efve \u2013 \u201cquoted\u201d".encode("cp1252"),
        "text/plain; charset=windows-1252",
        ["na\u00efve \u2013 \u201cquoted\u201d"],
    ),
    # UTF-16 declared (Windows PowerShell 5 file sent with charset=utf-16)
    (
        "utf16-declared",
        codecs.BOM_UTF16_LE + "great phone\r\n".encode("utf-16-le"),
        "text/plain; charset=utf-16",
        ["great phone"],
    ),
    # a UTF-8 BOM wins over a wrong charset label
    (
        "bom-beats-label",
        codecs.BOM_UTF8 + "caf\u00e9".encode(),
        "text/plain; charset=latin-1",
        ["caf\u00e9"],
    ),
    # a str that a caller decoded but kept the BOM of
    ("decoded-str-bom", "\ufefftext\r\ngreat\r\n", "text/csv", ["great"]),
    # JSON strings are used as sent (the client quoted them on purpose)
    (
        "json-strings-verbatim",
        b'{"inputs": [" spaced ", "a\\r\\nb"]}\n',
        "application/json",
        [" spaced ", "a\r\nb"],
    ),
]


@pytest.mark.parametrize(
    ("tool", "body", "content_type", "expected"), READ_AS_MEANT, ids=[c[0] for c in READ_AS_MEANT]
)
def test_client_bodies_are_read_as_meant(tool, body, content_type, expected):
    assert handler.input_fn(body, content_type) == expected, tool


CLIENT_MISTAKES = [
    # Windows PowerShell 5 `"great" > body.txt` writes UTF-16 LE with BOM
    (
        "powershell5-redirect",
        codecs.BOM_UTF16_LE + "great phone\r\n".encode("utf-16-le"),
        "text/plain",
        400,
        "charset=utf-16",
    ),
    # Python's http.client encodes a str body as ISO-8859-1 (checked here; requests 2.34 with
    # urllib3 2 sends UTF-8). Windows PowerShell 5 string bodies without a charset are said to go
    # out as ISO-8859-1 too (UNVERIFIED: not reproducible here).
    (
        "http-client-str-body",
        "caf\u00e9".encode("latin-1"),
        "text/plain",
        400,
        "charset=windows-1252",
    ),
    # curl --data without -H sends application/x-www-form-urlencoded
    (
        "curl-data-no-header",
        curl_data(PRETTY_JSON.encode()),
        "application/x-www-form-urlencoded",
        415,
        "-H 'Content-Type: application/json'",
    ),
    # cp1252 leaves 0x81 undefined
    (
        "cp1252-undefined-byte",
        b"caf\x81",
        "text/plain; charset=cp1252",
        400,
        "not valid cp1252",
    ),
]


@pytest.mark.parametrize(
    ("tool", "body", "content_type", "status", "message"),
    CLIENT_MISTAKES,
    ids=[c[0] for c in CLIENT_MISTAKES],
)
def test_client_mistakes_get_a_4xx_naming_the_fix(tool, body, content_type, status, message):
    with pytest.raises(handler.GenericInferenceToolkitError) as err:
        handler.input_fn(body, content_type)
    assert err.value.status_code == status, tool
    assert message in err.value.message, err.value.message


@pytest.fixture(scope="module")
def model(smoke_model_dir):
    return handler.model_fn(str(smoke_model_dir))


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (codecs.BOM_UTF8 + b"great phone\r\n", "text/plain"),
        (b"great phone\n", "text/plain"),
        (b"  great phone  \r\n\r\n", "text/plain"),
        (codecs.BOM_UTF8 + b"text\r\ngreat phone\r\n", "text/csv"),
        (codecs.BOM_UTF16_LE + "great phone".encode("utf-16-le"), "text/plain; charset=utf-16"),
    ],
)
def test_client_spellings_get_the_clean_texts_prediction(model, body, content_type):
    clean = handler.predict_fn(handler.input_fn(b"great phone", "text/plain"), model)
    assert handler.predict_fn(handler.input_fn(body, content_type), model) == clean
