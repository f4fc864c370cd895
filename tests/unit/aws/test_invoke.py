"""Tests of :mod:`pt2aws.aws.invoke`: payload-sized chunks, retries, the bounded load test."""

from __future__ import annotations

import json
import math
import threading
import time

import pytest
from botocore.exceptions import ClientError
from support.emulator import NOTHING, deployed, injected

from pt2aws.aws import invoke, session
from pt2aws.aws.invoke import request_body
from pt2aws.serving.handler import PayloadTooLargeError


def test_large_batch_is_chunked_in_order_with_utf8(emulator, model_url, stub):
    texts = [f"text {i} café ☕ {'x' * (i % 7) * 50}" for i in range(150)]
    stub.requests.clear()
    with deployed(emulator.session(), model_url, "pt2aws-chunks") as d:
        client = d.client(max_payload_bytes=4_000)
        predictions = client.predict(texts)
    assert [p["label"] for p in predictions] == texts  # original order, nothing lost
    total = len(request_body(texts))  # one request would be ~26 kB
    assert client.requests_sent == len(stub.requests) >= math.ceil(total / 4_000) >= 6
    assert all(len(body) <= 4_000 for _, body in stub.requests)
    assert all(len(json.loads(body)["inputs"]) <= 64 for _, body in stub.requests)
    assert "café ☕".encode() in stub.requests[0][1]  # UTF-8 on the wire, not \\u escapes
    assert session.billable_resources(emulator.session()) == NOTHING


def test_throttling_is_retried_with_backoff(emulator, model_url, stub):
    stub.requests.clear()
    with deployed(emulator.session(), model_url, "pt2aws-throttle") as d:
        with injected("InvokeEndpoint", "ThrottlingException", times=2):
            assert d.client(max_attempts=3).predict(["a", "b"]) == [
                {"label": "a", "score": 1.0},
                {"label": "b", "score": 1.0},
            ]
        assert len(stub.requests) == 1  # two throttled tries never reached the model
        with injected("InvokeEndpoint", "ThrottlingException"):
            with pytest.raises(ClientError, match="ThrottlingException"):
                d.client(max_attempts=1).predict(["a"])
    assert session.billable_resources(emulator.session()) == NOTHING


class FakeRuntime:
    """Answers each request with its texts reversed in label order, to catch misplaced chunks."""

    def __init__(self):
        self.bodies = []

    def invoke_endpoint(self, EndpointName, Body, ContentType, Accept):
        import io

        self.bodies.append(Body)
        texts = json.loads(Body)["inputs"]
        return {
            "Body": io.BytesIO(json.dumps([{"label": t} for t in texts]).encode()),
            "ContentType": "application/json",
        }


def test_chunks_keep_order_and_respect_both_limits():
    texts = [f"{i}:" + "é" * (i * 37 % 300) for i in range(500)]
    chunks = invoke.chunk_indices(texts, max_payload_bytes=2_000, max_items=16)
    assert [i for chunk in chunks for i in chunk] == list(range(500))
    sizes = [len(invoke.request_body([texts[i] for i in chunk])) for chunk in chunks]
    assert max(sizes) <= 2_000
    assert max(len(c) for c in chunks) <= 16
    # greedy: adding the next text to any chunk would break a limit
    for chunk, nxt in zip(chunks, chunks[1:]):
        grown = invoke.request_body([texts[i] for i in chunk + [nxt[0]]])
        assert len(grown) > 2_000 or len(chunk) == 16


def test_size_is_exact_for_utf8():
    texts = ["naïve ☕", 'quote " and \\ backslash', "日本語"]
    body = invoke.request_body(texts)
    assert json.loads(body.decode("utf-8")) == {"inputs": texts}
    assert "☕".encode() in body
    assert invoke.chunk_indices(texts, max_payload_bytes=len(body)) == [[0, 1, 2]]
    assert invoke.chunk_indices(texts, max_payload_bytes=len(body) - 1) != [[0, 1, 2]]


def test_one_item_over_the_limit_suggests_async_or_batch():
    texts = ["ok", "x" * 10_000, "ok"]
    with pytest.raises(
        PayloadTooLargeError,
        match=r"^text #1 is 10,002 bytes.*Asynchronous Inference.*Batch Transform",
    ) as err:
        invoke.chunk_indices(texts, max_payload_bytes=5_000)
    assert isinstance(err.value, ValueError) and err.value.status_code == 413  # one class


def test_default_limit_is_below_the_realtime_limit():
    assert invoke.DEFAULT_MAX_PAYLOAD_BYTES < invoke.REALTIME_PAYLOAD_LIMIT_BYTES == 6 * 1024 * 1024
    with pytest.raises(ValueError, match="exceeds SageMaker's real-time limit"):
        invoke.EndpointClient("e", max_payload_bytes=7_000_000, client=object())
    with pytest.raises(TypeError, match="text #1 is int"):
        invoke.chunk_indices(["a", 1])


def test_predict_reassembles_in_original_order():
    fake = FakeRuntime()
    client = invoke.EndpointClient("e", client=fake, max_items=3)
    texts = [str(i) for i in range(10)]
    assert [p["label"] for p in client.predict(texts)] == texts
    assert [len(json.loads(b)["inputs"]) for b in fake.bodies] == [3, 3, 3, 1]
    assert client.predict([]) == []


class SlowClient:
    """``invoke_raw`` that takes ``delay_s`` and fails every ``fail_every``-th request."""

    def __init__(self, delay_s: float, fail_every: int = 0):
        self.delay_s, self.fail_every = delay_s, fail_every
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()

    def invoke_raw(self, body, content_type="application/json", accept="application/json"):
        with self.lock:
            self.bodies.append(body)
            n = len(self.bodies)
        time.sleep(self.delay_s)
        if self.fail_every and n % self.fail_every == 0:
            raise RuntimeError("ModelError (fake)")
        return b"[]", "application/json"


def test_stops_after_max_requests_and_reports_percentiles():
    client = SlowClient(0.002)
    texts = ["a", "b", "c"]
    result = invoke.load_test(client, texts, max_requests=30, max_seconds=30, concurrency=3)
    assert (result["requests"], result["errors"], result["stopped_by"]) == (30, 0, "requests")
    assert len(client.bodies) == 30 and result["texts"] == 30
    assert sorted(json.loads(b)["inputs"][0] for b in client.bodies) == sorted(texts * 10)
    ms = result["latency_ms"]
    assert 2 <= ms["p50_ms"] <= ms["p90_ms"] <= ms["p99_ms"] <= ms["max_ms"]
    assert result["throughput_per_s"] == pytest.approx(30 / result["seconds"])


def test_load_test_latencies_are_the_predictor_tables_summary():
    from pt2aws.inference.measure import latency_summary

    client = SlowClient(0.001)
    result = invoke.load_test(client, ["a"], max_requests=5, concurrency=1)
    assert set(result["latency_ms"]) == set(latency_summary([0.001]))  # one definition
    assert result["latency_ms"]["calls"] == 5 and result["latency_ms"]["p50_ms"] >= 1


def test_stops_after_max_seconds_and_counts_errors():
    client = SlowClient(0.05, fail_every=4)
    result = invoke.load_test(
        client, ["x"], max_requests=100_000, max_seconds=0.4, concurrency=2, batch_size=3
    )
    assert result["stopped_by"] == "seconds"
    assert result["seconds"] < 0.4 + 0.5  # the requests in flight finish, no new ones start
    assert result["errors"] >= 1 and result["requests"] + result["errors"] == len(client.bodies)
    assert result["texts"] == 3 * result["requests"]
    assert all(len(json.loads(b)["inputs"]) == 3 for b in client.bodies)


def test_bounds_are_checked():
    with pytest.raises(ValueError, match="max_requests >= 1"):
        invoke.load_test(SlowClient(0), [], max_requests=1)
    with pytest.raises(ValueError, match="max_seconds > 0"):
        invoke.load_test(SlowClient(0), ["x"], max_seconds=0)
