"""The SageMaker serving contract as a table of HTTP requests, each with the answer it must get.

One table, run against every server that serves ``pt2aws/serving/handler.py``: the SageMaker
PyTorch toolkit + TorchServe (the reference, :class:`support.torchserve.TorchServe`), the
project's Starlette/uvicorn server on 127.0.0.1, and the same server inside the container image.

How two answers are compared (:func:`assert_same_answer`):

* status: identical, and the one the case expects (never a 5xx for a client mistake);
* 200: ``Content-Type`` and body byte for byte (the predictions included);
* 4xx: the first line of the body. The toolkit appends a Python traceback after the handler's
  message and sends no ``Content-Type``; the project's server sends the message alone as
  ``text/plain; charset=utf-8`` (a traceback tells a client nothing it can act on and shows the
  server's file paths);
* ``/ping``: status, ``Content-Type`` and body byte for byte;
* cases outside SageMaker's contract, where the two servers legitimately differ, say how in
  ``known_difference`` and are compared by status class only.
"""

from __future__ import annotations

import codecs
import csv
import http.client
import io
import json
from dataclasses import dataclass

JSON, CSV, TEXT = "application/json", "text/csv", "text/plain"
#: What the project's server sends with a 4xx (TorchServe sends no Content-Type).
ERROR_CONTENT_TYPE = "text/plain; charset=utf-8"
LONG = "terrible " * 400  # over the smoke model's 64-token limit: flagged "truncated"
MAX_BATCH = 64  # the handler's default PT2AWS_MAX_BATCH


@dataclass(frozen=True)
class Answer:
    """What a server sent back: status, body bytes and Content-Type ("" when absent)."""

    status: int
    body: bytes
    content_type: str


@dataclass(frozen=True)
class Case:
    """One request and what a correct answer looks like.

    ``content_type``/``accept`` None: the header is not sent. ``results``: number of entries in a
    200 answer; ``empty``/``truncated``: their indexes flagged so; ``media``: the 200 Content-Type;
    ``same_as``: another (body, content type) that must get the identical answer.
    """

    id: str
    body: bytes | None
    content_type: str | None = JSON
    accept: str | None = JSON
    status: int = 200
    media: str | None = None
    results: int | None = None
    empty: tuple[int, ...] = ()
    truncated: tuple[int, ...] = ()
    method: str = "POST"
    path: str = "/invocations"
    same_as: tuple[bytes, str] | None = None
    message: str | None = None  # a substring of the 4xx message
    known_difference: str | None = None


def _j(obj) -> bytes:
    return json.dumps(obj).encode()


UTF16_LE_BOM_TEXT = codecs.BOM_UTF16_LE + "great phone\r\n".encode("utf-16-le")

CASES: list[Case] = [
    # --- good JSON, as clients send it
    Case("json-string", _j({"inputs": "What a wonderful phone!"}), results=1),
    Case(
        "json-list-to-csv",
        _j({"inputs": ["great", "   ", "awful service"]}),
        "application/json; charset=utf-8",
        CSV,
        media=CSV,
        results=3,
        empty=(1,),
    ),
    Case("json-bare-list", b'["a bare", "list"]', results=2),
    Case("json-bare-string", b'"a bare string"', accept="*/*", media=JSON, results=1),
    Case("json-no-headers", _j({"inputs": ["great"]}), None, None, media=JSON, results=1),
    Case("json-empty-accept", _j({"inputs": ["great"]}), accept="", media=JSON, results=1),
    Case("json-type-uppercase", _j({"inputs": ["great"]}), "APPLICATION/JSON", results=1),
    Case(
        "json-charset-quoted",
        _j({"inputs": ["great"]}),
        'application/json; charset="UTF-8"',
        results=1,
    ),
    Case(
        "json-charset-utf8", _j({"inputs": ["great"]}), "application/json;charset=utf8", results=1
    ),
    # Python requests json=: ASCII with \u escapes, no charset
    Case("json-requests-escaped", _j({"inputs": ["caf\u00e9 \u2615"]}), results=1),
    # curl --data-binary @file of a pretty-printed Windows file, and curl --data (strips CR/LF)
    Case(
        "json-pretty-crlf",
        b'{\r\n  "inputs": [\r\n    "great",\r\n    "awful"\r\n  ]\r\n}\r\n',
        results=2,
        same_as=(b'{"inputs": ["great", "awful"]}', JSON),
    ),
    Case(
        "json-curl-data-stripped",
        b'{  "inputs": [    "great",    "awful"  ]}',
        results=2,
        same_as=(b'{"inputs": ["great", "awful"]}', JSON),
    ),
    # PowerShell Out-File -Encoding utf8 (Windows PowerShell 5) / Notepad "UTF-8 with BOM"
    Case(
        "json-utf8-bom",
        codecs.BOM_UTF8 + b'{"inputs": ["great"]}\r\n',
        results=1,
        same_as=(b'{"inputs": ["great"]}', JSON),
    ),
    Case(
        "json-utf16-declared",
        '{"inputs": ["great"]}'.encode("utf-16"),
        "application/json; charset=utf-16",
        results=1,
        same_as=(b'{"inputs": ["great"]}', JSON),
    ),
    Case("json-empty-list", _j({"inputs": []}), results=0),
    Case("json-empty-texts", _j({"inputs": ["", "  \n"]}), results=2, empty=(0, 1)),
    Case("json-truncated", _j({"inputs": ["ok", LONG]}), results=2, truncated=(1,)),
    # --- CSV
    Case(
        "csv-header-quoted-comma",
        b'text\nfirst row\n"second, with comma"\n',
        CSV,
        CSV,
        results=2,
    ),
    Case("csv-no-header", b"no header, just one row\n", CSV, results=1),
    # Excel "CSV UTF-8": BOM + CRLF; before the fix the BOM hid the header (3 texts, not 2)
    Case(
        "csv-excel-bom-crlf",
        codecs.BOM_UTF8 + b"text\r\ngreat phone\r\nawful\r\n",
        CSV,
        results=2,
        same_as=(b"great phone\nawful\n", CSV),
    ),
    Case("csv-cr-only", b"great\rawful\r", CSV, results=2, same_as=(b"great\nawful\n", CSV)),
    Case("csv-empty-body", b"", CSV, results=0),
    # --- plain text
    Case(
        "text-plain-accept-wildcard",
        b"the whole body is one text",
        TEXT,
        "text/*",
        media=CSV,
        results=1,
    ),
    Case(
        "text-trailing-crlf",
        b"great phone\r\n",
        TEXT,
        results=1,
        same_as=(b"great phone", TEXT),
    ),
    Case(
        "text-notepad-bom",
        codecs.BOM_UTF8 + b"great phone",
        TEXT,
        results=1,
        same_as=(b"great phone", TEXT),
    ),
    Case(
        "text-latin1",
        "caf\u00e9 cr\u00e8me".encode("latin-1"),
        "text/plain; charset=latin-1",
        results=1,
    ),
    Case(
        "text-cp1252",
        "na\u00efve \u2013 caf\u00e9".encode("cp1252"),
        "text/plain; charset=windows-1252",
        results=1,
        same_as=("na\u00efve \u2013 caf\u00e9".encode(), TEXT),
    ),
    Case("text-iso-casing", b"caf\xe9", "text/plain;charset=ISO-8859-1", results=1),
    Case("text-empty-body", b"", TEXT, results=1, empty=(0,)),
    # --- Accept negotiation
    Case(
        "accept-q-values",
        _j({"inputs": ["great"]}),
        accept="application/json;q=0.2, text/csv;q=0.9",
        media=CSV,
        results=1,
    ),
    Case(
        "accept-list-fallback",
        _j({"inputs": ["great"]}),
        accept="application/xml, text/csv;q=0.5",
        media=CSV,
        results=1,
    ),
    Case(
        "accept-application-wildcard",
        _j({"inputs": ["great"]}),
        accept="application/*",
        media=JSON,
        results=1,
    ),
    Case("accept-uppercase", _j({"inputs": ["great"]}), accept="TEXT/CSV", media=CSV, results=1),
    Case(
        "accept-json-with-charset",
        _j({"inputs": ["great"]}),
        accept="application/json; charset=utf-8",
        media=JSON,
        results=1,
    ),
    Case(
        "accept-browser",
        _j({"inputs": ["great"]}),
        accept="text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        media=JSON,
        results=1,
    ),
    # --- client mistakes: each 4xx, never a 5xx
    Case("415-npy", b"x", "application/x-npy", status=415, message="text/csv"),
    Case(
        "415-curl-form-default",
        _j({"inputs": ["great"]}),
        "application/x-www-form-urlencoded",
        status=415,
        message="curl --data",
    ),
    Case("400-bad-json", b"{not json", status=400, message="not valid JSON"),
    Case("400-json-empty-body", b"", status=400, message="not valid JSON"),
    Case("400-wrong-shape", b'{"text": "x"}', status=400, message='"inputs"'),
    Case("400-not-strings", b'{"inputs": [1, 2]}', status=400, message="list of strings"),
    Case("400-bad-utf8-json", b'{"inputs": "\xff\xfe"}', status=400, message="UTF-8"),
    Case("400-bad-utf8-csv", b"\xff\xfe,x", CSV, status=400, message="UTF-8"),
    # Python's http.client sends a str body as ISO-8859-1 (requests with urllib3 2: UTF-8)
    Case("400-latin1-undeclared", b"caf\xe9", TEXT, status=400, message="charset="),
    # Windows PowerShell 5 `>` writes UTF-16 LE with BOM
    Case("400-utf16-undeclared", UTF16_LE_BOM_TEXT, TEXT, status=400, message="UTF-16"),
    Case("400-unknown-charset", b"x", "text/plain; charset=klingon", status=400, message="klingon"),
    Case(
        "400-unreadable-csv",
        b'"' + b"x" * 200_000 + b'"\n',
        CSV,
        status=400,
        message="not readable CSV",
    ),
    Case(
        "413-too-many-texts",
        _j({"inputs": ["x"] * (MAX_BATCH + 1)}),
        accept="*/*",
        status=413,
        message="limit is 64",
    ),
    Case(
        "406-xml", _j({"inputs": ["x"]}), accept="application/xml", status=406, message="text/csv"
    ),
    Case(
        "406-text-plain", _j({"inputs": ["x"]}), accept="text/plain", status=406, message="text/csv"
    ),
    Case(
        "406-q-zero",
        _j({"inputs": ["x"]}),
        accept="text/csv;q=0, application/json;q=0",
        status=406,
        message="not supported",
    ),
    Case(
        "413-body-over-limit",
        b"x" * 7_000_000,
        TEXT,
        status=413,
        known_difference="TorchServe's frontend answers with an empty body; the project's server "
        "names the limit (SageMaker refuses such requests before they reach either)",
    ),
    # --- health check
    Case("ping-get", None, None, None, method="GET", path="/ping"),
    Case("ping-head", None, None, None, method="HEAD", path="/ping"),
    Case("ping-post", b"", None, None, method="POST", path="/ping"),
    # --- outside SageMaker's contract (it only POSTs /invocations and GETs /ping)
    Case(
        "get-invocations",
        None,
        None,
        None,
        method="GET",
        status=0,
        known_difference="TorchServe runs the handler on an empty body (400); the project's "
        "server answers 405 Method Not Allowed",
    ),
    Case(
        "unknown-path",
        None,
        None,
        None,
        method="GET",
        path="/models",
        status=404,
        known_difference="TorchServe's 404 body is JSON; the project's server sends "
        "'Not Found' as text/plain",
    ),
]


def request(port: int, case: Case, timeout_s: float = 60.0) -> Answer:
    """Send ``case`` to 127.0.0.1:``port`` exactly as described (absent headers not sent)."""
    return send(port, case.method, case.path, case.body, case.content_type, case.accept, timeout_s)


def send(
    port: int,
    method: str,
    path: str,
    body: bytes | None,
    content_type: str | None,
    accept: str | None,
    timeout_s: float = 60.0,
) -> Answer:
    """One HTTP request with only the headers given (plus Host and Content-Length)."""
    headers = {}
    if content_type is not None:
        headers["Content-Type"] = content_type
    if accept is not None:
        headers["Accept"] = accept
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        try:
            conn.request(method, path, body=body, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered (413) and closed before reading the whole body
        resp = conn.getresponse()
        return Answer(resp.status, resp.read(), resp.getheader("Content-Type", ""))
    finally:
        conn.close()


def first_line(body: bytes) -> str:
    """The first line of a body (the handler's message in a 4xx)."""
    return body.decode("utf-8", errors="replace").split("\n", 1)[0]


def parse_results(answer: Answer) -> list[dict]:
    """A 200 answer's predictions, from JSON or CSV, as dicts with label/score/empty/truncated."""
    if answer.content_type.split(";")[0] == CSV:
        rows = list(csv.DictReader(io.StringIO(answer.body.decode())))
        assert rows == [] or list(rows[0]) == ["label", "score", "empty", "truncated"]
        return [
            {
                "label": r["label"] or None,
                "empty": r["empty"] == "true",
                "truncated": r["truncated"] == "true",
            }
            for r in rows
        ]
    return [
        {"label": r["label"], "empty": bool(r.get("empty")), "truncated": bool(r.get("truncated"))}
        for r in json.loads(answer.body)
    ]


def parse_scores(answer: Answer) -> list[dict]:
    """A 200 answer's predictions, from JSON or CSV, as dicts with label and score (None for an
    empty text)."""
    if answer.content_type.split(";")[0] == CSV:
        rows = csv.DictReader(io.StringIO(answer.body.decode()))
        return [
            {"label": r["label"] or None, "score": float(r["score"]) if r["score"] else None}
            for r in rows
        ]
    return [{"label": r["label"], "score": r["score"]} for r in json.loads(answer.body)]


def assert_correct(case: Case, answer: Answer) -> None:
    """``answer`` is what ``case`` expects on its own (status, type, result count and flags)."""
    if case.status == 0:  # known difference: any 4xx
        assert 400 <= answer.status < 500, answer
        return
    assert answer.status == case.status, (answer.status, answer.body[:300])
    if case.path == "/ping":
        return
    if case.status != 200:
        if case.message is not None:
            assert case.message in first_line(answer.body), first_line(answer.body)
        return
    media = case.media or case.accept
    assert answer.content_type == media
    results = parse_results(answer)
    assert len(results) == case.results
    assert tuple(i for i, r in enumerate(results) if r["empty"]) == case.empty
    assert tuple(i for i, r in enumerate(results) if r["truncated"]) == case.truncated
    for i, r in enumerate(results):
        if i not in case.empty:
            assert r["label"] in ("negative", "positive"), r


def assert_same_answer(case: Case, reference: Answer, got: Answer) -> None:
    """``got`` (a candidate server) answers ``case`` as ``reference`` (TorchServe) does."""
    assert got.status < 500 and reference.status < 500, (reference.status, got.status)
    if case.known_difference:
        assert got.status // 100 == reference.status // 100 == 4 or got.status == reference.status
        return
    assert got.status == reference.status, (reference.body[:300], got.body[:300])
    if got.status == 200:
        assert got.content_type == reference.content_type
        assert got.body == reference.body
    else:
        assert first_line(got.body) == first_line(reference.body)
        assert reference.content_type == ""  # TorchServe: none
        assert got.content_type == ERROR_CONTENT_TYPE
