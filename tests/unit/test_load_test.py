"""The bounded load test of a live endpoint (``invoke.load_test``), on a fake client."""

from __future__ import annotations

import json
import threading
import time

import pytest

from pt2aws.aws import invoke


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
    latency = result["latency_ms"]
    assert 2 <= latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]
    assert result["throughput_per_s"] == pytest.approx(30 / result["seconds"])


def test_load_test_percentiles_are_the_predictor_tables_definition():
    from pt2aws.inference.measure import latency_summary

    latencies_ms = [float(k) for k in range(1, 101)]  # 1..100 ms
    summary = invoke._latency_summary(latencies_ms)
    by_table = latency_summary([ms / 1000 for ms in latencies_ms])
    assert (summary["p50"], summary["p90"], summary["p99"]) == pytest.approx((50.5, 90.1, 99.01))
    assert summary["p50"] == pytest.approx(by_table["p50_ms"])
    assert summary["p99"] == pytest.approx(by_table["p99_ms"])
    assert (summary["mean"], summary["max"]) == (50.5, 100.0)
    assert invoke._latency_summary([]) is None


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
