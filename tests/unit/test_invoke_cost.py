"""The invoke client's chunking (pure). (The cost arithmetic: tests/unit/aws/test_endpoint_cost.py.)"""

import json

import pytest

from pt2aws.aws import invoke


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
        invoke.PayloadTooLargeError,
        match=r"text #1 is 10,002 bytes.*Asynchronous Inference.*Batch Transform",
    ):
        invoke.chunk_indices(texts, max_payload_bytes=5_000)


def test_default_limit_is_below_the_realtime_limit():
    assert invoke.DEFAULT_MAX_PAYLOAD_BYTES < invoke.REALTIME_PAYLOAD_LIMIT_BYTES == 6 * 1024 * 1024
    with pytest.raises(ValueError, match="exceeds SageMaker's real-time limit"):
        invoke.EndpointClient("e", max_payload_bytes=7_000_000, client=object())
    with pytest.raises(TypeError, match="text #1 is int"):
        invoke.chunk_indices(["a", 1])


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


def test_predict_reassembles_in_original_order():
    fake = FakeRuntime()
    client = invoke.EndpointClient("e", client=fake, max_items=3)
    texts = [str(i) for i in range(10)]
    assert [p["label"] for p in client.predict(texts)] == texts
    assert [len(json.loads(b)["inputs"]) for b in fake.bodies] == [3, 3, 3, 1]
    assert client.predict([]) == []
