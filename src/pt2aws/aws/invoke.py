"""Client for a SageMaker real-time endpoint: UTF-8 JSON, payload-sized chunks, retried throttling.

A real-time ``InvokeEndpoint`` request carries at most 6 MB ("Real-Time Inference is suitable
for workloads with ... payload sizes up to 6 MB, and processing times of up to 60 seconds",
SageMaker AI Hosting FAQ, https://docs.aws.amazon.com/sagemaker/latest/dg/hosting-faqs.html;
the same page sends larger payloads to Asynchronous Inference, up to 1 GB). The client splits a batch
of texts into requests under :data:`DEFAULT_MAX_PAYLOAD_BYTES`, and under the handler's
``PT2AWS_MAX_BATCH`` texts per request, sends them in order and returns one prediction per
text in the original order.

Throttling (``ThrottlingException``) and transient errors are retried by botocore's ``standard``
retry mode: exponential backoff with full jitter (``random() * 2**attempt`` seconds for
throttling errors, capped at 20 s), ``max_attempts`` tries in total (botocore 1.44.8
``retries/standard.py``, ``ExponentialBackoff``; ``ThrottlingException`` is in its throttling
error codes).
"""

from __future__ import annotations

import json
import logging

logger = logging.getLogger(__name__)

#: Default request size limit: 5 MiB (5,242,880 bytes), below SageMaker's 6 MB real-time limit
#: with room for HTTP framing.
DEFAULT_MAX_PAYLOAD_BYTES = 5 * 1024 * 1024
#: SageMaker's real-time payload limit (6 MB, SageMaker AI Hosting FAQ).
REALTIME_PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024
#: Texts per request; must not exceed the handler's ``PT2AWS_MAX_BATCH`` (default 64).
DEFAULT_MAX_ITEMS = 64

_PREFIX, _SEPARATOR, _SUFFIX = b'{"inputs": [', b", ", b"]}"


def request_body(texts: list[str]) -> bytes:
    """The JSON request for ``texts``: ``{"inputs": [...]}`` encoded as UTF-8 (no ``\\u`` escapes)."""
    return json.dumps({"inputs": texts}, ensure_ascii=False).encode("utf-8")


def _item_bytes(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8"))


def chunk_indices(
    texts: list[str],
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> list[list[int]]:
    """Split ``texts`` greedily, in order, into requests of at most ``max_payload_bytes`` bytes.

    The size is exact: ``len(request_body(chunk))`` for every chunk is ``<= max_payload_bytes``.

    Returns:
        Lists of indices into ``texts``; concatenated they are ``0 .. len(texts) - 1``.

    Raises:
        TypeError: an item that is not a string.
        ValueError: limits below 1.
        pt2aws.serving.handler.PayloadTooLargeError: one text alone does not fit; names its
            index and size.
    """
    if max_items < 1 or max_payload_bytes < len(_PREFIX) + len(_SUFFIX) + 2:
        raise ValueError(
            f"max_items ({max_items}) and max_payload_bytes ({max_payload_bytes}) too small"
        )
    chunks: list[list[int]] = []
    current: list[int] = []
    size = len(_PREFIX) + len(_SUFFIX)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text #{i} is {type(text).__name__}, not str")
        item = _item_bytes(text)
        if len(_PREFIX) + item + len(_SUFFIX) > max_payload_bytes:
            from pt2aws.serving.handler import PayloadTooLargeError

            raise PayloadTooLargeError(
                f"text #{i} is {item:,} bytes as JSON (UTF-8); one real-time request carries at "
                f"most {max_payload_bytes:,} bytes here (SageMaker's limit is 6 MB). Shorten it, or "
                "use SageMaker Asynchronous Inference (payloads up to 1 GB, input from S3) or "
                "Batch Transform for large inputs."
            )
        extra = item + (len(_SEPARATOR) if current else 0)
        if current and (size + extra > max_payload_bytes or len(current) >= max_items):
            chunks.append(current)
            current, size = [], len(_PREFIX) + len(_SUFFIX)
            extra = item
        current.append(i)
        size += extra
    if current:
        chunks.append(current)
    return chunks


class EndpointClient:
    """Invoke one SageMaker endpoint with chunking and retries.

    Args:
        endpoint_name: the endpoint.
        session: the :class:`pt2aws.aws.session.AwsSession` it is in (None with ``client``).
        max_payload_bytes: request size limit in bytes (default 5 MiB; must stay below 6 MB).
        max_items: texts per request (the handler's ``PT2AWS_MAX_BATCH``).
        max_attempts: tries per request including the first (botocore standard retry mode).
        client: a ready ``sagemaker-runtime`` client (tests); default one built here.

    Raises:
        ValueError: ``max_payload_bytes`` above the 6 MB real-time limit.
    """

    def __init__(
        self,
        endpoint_name: str,
        session=None,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_items: int = DEFAULT_MAX_ITEMS,
        max_attempts: int = 5,
        client=None,
    ):
        if max_payload_bytes > REALTIME_PAYLOAD_LIMIT_BYTES:
            raise ValueError(
                f"max_payload_bytes {max_payload_bytes:,} exceeds SageMaker's real-time limit of "
                f"{REALTIME_PAYLOAD_LIMIT_BYTES:,} bytes; use asynchronous inference for larger requests"
            )
        self.endpoint_name = endpoint_name
        self.max_payload_bytes = max_payload_bytes
        self.max_items = max_items
        self.requests_sent = 0
        if client is None:  # SageMaker answers or times out within 60 s: read_timeout 70
            client = session.client("sagemaker-runtime", max_attempts=max_attempts, read_timeout=70)
        self._client = client

    def invoke_raw(
        self,
        body: bytes,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> tuple[bytes, str]:
        """One ``InvokeEndpoint`` call; returns ``(body bytes, content type)``.

        Raises:
            pt2aws.serving.handler.PayloadTooLargeError: ``body`` over ``max_payload_bytes``
                (before sending).
            botocore.exceptions.ClientError: ``ModelError`` (the handler refused), or
                ``ThrottlingException`` still failing after ``max_attempts`` tries.
        """
        if len(body) > self.max_payload_bytes:
            from pt2aws.serving.handler import PayloadTooLargeError

            raise PayloadTooLargeError(
                f"request of {len(body):,} bytes exceeds {self.max_payload_bytes:,}; split it "
                "(predict() does) or use asynchronous inference / batch transform"
            )
        response = self._client.invoke_endpoint(
            EndpointName=self.endpoint_name, Body=body, ContentType=content_type, Accept=accept
        )
        self.requests_sent += 1
        return response["Body"].read(), response.get("ContentType", "")

    def predict(self, texts: list[str]) -> list[dict]:
        """Classify ``texts``; one ``{"label", "score"}`` per text, in the original order.

        Raises:
            pt2aws.serving.handler.PayloadTooLargeError: one text alone is over the limit
                (suggests async / batch).
            RuntimeError: the endpoint answered a different number of predictions.
        """
        if isinstance(texts, str):
            texts = [texts]
        results: list[dict | None] = [None] * len(texts)
        for indices in chunk_indices(texts, self.max_payload_bytes, self.max_items):
            payload, _ = self.invoke_raw(request_body([texts[i] for i in indices]))
            answer = json.loads(payload.decode("utf-8"))
            if not isinstance(answer, list) or len(answer) != len(indices):
                raise RuntimeError(
                    f"endpoint {self.endpoint_name} answered {answer!r:.200} for {len(indices)} texts"
                )
            for i, prediction in zip(indices, answer):
                results[i] = prediction
        return results


def load_test(
    client: EndpointClient,
    texts: list[str],
    *,
    max_requests: int = 200,
    max_seconds: float = 60.0,
    concurrency: int = 4,
    batch_size: int = 1,
) -> dict:
    """A short, bounded load test: requests from ``concurrency`` threads until either bound.

    Each request carries ``batch_size`` texts (taken round-robin from ``texts``), as real-time
    traffic does; with ``concurrency`` equal to the endpoint's model-server workers the
    instance is kept busy, so the throughput is what it serves at full load. Throttled or failed
    requests are counted, not retried beyond the client's own retries.

    Args:
        client: the endpoint's client (:meth:`pt2aws.aws.hosting.Deployment.client`).
        texts: texts to send (at least one).
        max_requests: stop after this many requests.
        max_seconds: stop starting requests after this many seconds (wall clock).
        concurrency: requests in flight at once.
        batch_size: texts per request.

    Returns:
        ``{"requests", "errors", "texts", "seconds", "concurrency", "batch_size",
        "throughput_per_s" (texts answered per second), "requests_per_s", "latency_ms":
        {"p50", "p90", "p99", "mean", "max"} (None without a successful request),
        "stopped_by" ("requests" or "seconds")}``.

    Raises:
        ValueError: no texts, or bounds below 1 (seconds <= 0).
    """
    import threading
    import time

    if not texts or max_requests < 1 or max_seconds <= 0 or concurrency < 1 or batch_size < 1:
        raise ValueError("need texts, max_requests >= 1, max_seconds > 0, concurrency >= 1")
    lock = threading.Lock()
    state = {"started": 0, "errors": 0, "latencies": []}
    start = time.perf_counter()

    def worker() -> None:
        while True:
            with lock:
                if state["started"] >= max_requests or time.perf_counter() - start >= max_seconds:
                    return
                first = state["started"] * batch_size
                state["started"] += 1
            body = request_body([texts[(first + i) % len(texts)] for i in range(batch_size)])
            sent = time.perf_counter()
            try:
                client.invoke_raw(body)
            except Exception as err:  # noqa: BLE001 - counted; the test goes on
                logger.warning("load test request failed: %s", err)
                with lock:
                    state["errors"] += 1
                continue
            with lock:
                state["latencies"].append(time.perf_counter() - sent)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    latencies = sorted(1000 * s for s in state["latencies"])
    return {
        "requests": len(latencies),
        "errors": state["errors"],
        "texts": len(latencies) * batch_size,
        "seconds": seconds,
        "concurrency": concurrency,
        "batch_size": batch_size,
        "throughput_per_s": len(latencies) * batch_size / seconds,
        "requests_per_s": len(latencies) / seconds,
        "latency_ms": _latency_summary(latencies),
        "stopped_by": "requests" if state["started"] >= max_requests else "seconds",
    }


def _latency_summary(latencies_ms: list[float]) -> dict | None:
    """p50 / p90 / p99 / mean / max of sorted latencies in ms; None when there are none.

    Percentiles by :func:`pt2aws.inference.measure.percentile`, as in the predictor tables.
    """
    from pt2aws.inference.measure import LATENCY_PERCENTILES, percentile

    if not latencies_ms:
        return None
    return {
        **{f"p{q}": percentile(latencies_ms, q) for q in LATENCY_PERCENTILES},
        "mean": sum(latencies_ms) / len(latencies_ms),
        "max": latencies_ms[-1],
    }
