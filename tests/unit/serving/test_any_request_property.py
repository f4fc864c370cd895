"""Client errors are 4xx for any request (issue 17): generated bodies, content types (charset
parameters, garbage, none) and Accept headers, sent to the handler functions in-process and to
the project's server (its ASGI app, through Starlette's test client). Never a 5xx, and the server
still answers ``/ping`` and a valid request afterwards.

Hypothesis runs derandomized (the same examples on every run: CI stays stable) with no deadline
(a loaded 2-core machine); together 750 examples, the edge cases below always among them.
"""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")  # starlette.testclient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from pt2aws.serving.server import ModelService, create_app

#: Examples per property.
HANDLER_EXAMPLES = 500
SERVER_EXAMPLES = 250

PROPERTY = settings(
    max_examples=HANDLER_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

MEDIA = ["application/json", "text/csv", "text/plain", "application/x-www-form-urlencoded",
         "text/html", "application/octet-stream", "multipart/form-data", "*/*", "TEXT/CSV"]  # fmt: skip
CHARSETS = ["utf-8", "UTF8", '"utf-8"', "latin-1", "cp1252", "ascii", "utf-16", "utf-16-le",
            "utf-7", "idna", "punycode", "rot13", "base64", "bogus", "", "utf-8\t"]  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
texts = st.text(max_size=60)
bodies = st.one_of(
    st.binary(max_size=200),
    texts.map(lambda t: t.encode("utf-8", "surrogatepass")),
    texts.map(lambda t: t.encode("utf-16", "surrogatepass")),
    json_values.map(lambda v: json.dumps(v).encode()),
    json_values.map(lambda v: json.dumps({"inputs": v}).encode()),
    st.lists(texts, max_size=8).map(lambda v: json.dumps({"inputs": v}).encode()),
    st.lists(texts, max_size=5).map(
        lambda rows: "\r\n".join(rows).encode("utf-8", "surrogatepass")
    ),
)
content_types = st.one_of(
    st.none(),
    st.sampled_from(MEDIA),
    st.tuples(st.sampled_from(MEDIA), st.sampled_from(CHARSETS)).map(
        lambda p: f"{p[0]}; charset={p[1]}"
    ),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
)
accepts = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "application/json",
            "text/csv",
            "text/*",
            "*/*",
            "",
            "text/html",
            "application/json;q=0",
            "text/csv;q=abc, application/json;q=0.5",
            "application/*;q=nan",
            "image/png, text/*;q=0.1",
        ]
    ),  # fmt: skip
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
)
#: Bodies a generator at these sizes would not reach.
DEEP_JSON = b"[" * 100_000 + b"]" * 100_000
LONE_SURROGATE = b'{"inputs": ["ok", "\\ud800 broken"]}'
TOO_MANY = json.dumps({"inputs": ["ok"] * 65}).encode()  # over PT2AWS_MAX_BATCH: 413


@pytest.fixture(scope="module")
def service(smoke_model_dir):
    """One worker's model (the built-in handler: the smoke model has no code/ folder)."""
    loaded = ModelService(smoke_model_dir)
    loaded.load()
    return loaded


@PROPERTY
@given(body=bodies, content_type=content_types, accept=accepts)
@example(body=DEEP_JSON, content_type="application/json", accept=None)
@example(body=LONE_SURROGATE, content_type="application/json", accept=None)
@example(body=b"a..b", content_type="text/plain; charset=idna", accept="text/csv")
@example(body=TOO_MANY, content_type="application/json", accept=None)
def test_the_handler_answers_any_request_below_500(service, body, content_type, accept):
    reply = service.invoke(body, content_type, accept)
    assert reply.status < 500, (reply.status, reply.body[:300])
    if reply.status >= 400:
        assert reply.body.strip(), "a client error names the problem"


@pytest.fixture(scope="module")
def client(service):
    """The project's server app around the loaded model, in this process."""
    with TestClient(create_app(service, load_wait_s=5), raise_server_exceptions=False) as c:
        yield c


@settings(PROPERTY, max_examples=SERVER_EXAMPLES)
@given(body=bodies, content_type=content_types, accept=accepts)
@example(body=DEEP_JSON, content_type="application/json", accept="*/*")
def test_the_server_answers_any_request_below_500_and_stays_healthy(
    client, body, content_type, accept
):
    headers = {
        k: v for k, v in (("content-type", content_type), ("accept", accept)) if v is not None
    }
    response = client.post("/invocations", content=body, headers=headers)
    assert response.status_code < 500, (response.status_code, response.text[:300])


def test_after_the_generated_requests_the_server_is_healthy(client):
    """Runs after the property above (file order): the same app, still answering."""
    assert client.get("/ping").status_code == 200
    ok = client.post(
        "/invocations",
        content=b'{"inputs": ["great phone", "awful"]}',
        headers={"content-type": "application/json"},
    )
    assert ok.status_code == 200 and len(ok.json()) == 2
    assert threading.active_count() < 50  # no thread left behind per request
