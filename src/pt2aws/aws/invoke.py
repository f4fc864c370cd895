"""A SageMaker real-time endpoint's client (UTF-8 JSON requests under the 6 MB limit of the
SageMaker AI Hosting FAQ, in order, throttling retried) and a short bounded load test."""

from __future__ import annotations

import itertools
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor

logger = logging.getLogger(__name__)

#: Default request size limit: 5 MiB, below SageMaker's 6 MB with room for HTTP framing.
DEFAULT_MAX_PAYLOAD_BYTES = 5 * 1024 * 1024
REALTIME_PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024
#: Texts per request; at most the handler's ``PT2AWS_MAX_BATCH`` (default 64).
DEFAULT_MAX_ITEMS = 64


def request_body(texts: list[str]) -> bytes:
    """``{"inputs": [...]}`` as UTF-8 (no ``\\u`` escapes)."""
    return json.dumps({"inputs": texts}, ensure_ascii=False).encode("utf-8")


def chunk_indices(texts: list[str], max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
                  max_items: int = DEFAULT_MAX_ITEMS) -> list[list[int]]:  # fmt: skip
    """Indices of ``texts`` split greedily, in order, into requests of at most ``max_items`` texts
    and ``max_payload_bytes`` bytes; ``TypeError``, ``ValueError``, ``PayloadTooLargeError``."""
    if max_items < 1 or max_payload_bytes < 1:
        raise ValueError(f"max_items ({max_items}) and max_payload_bytes ({max_payload_bytes}) < 1")
    chunks, current = [], []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text #{i} is {type(text).__name__}, not str")
        if len(request_body([text])) > max_payload_bytes:
            from pt2aws.serving.handler import PayloadTooLargeError

            raise PayloadTooLargeError(
                f"text #{i} is {len(json.dumps(text, ensure_ascii=False).encode()):,} bytes as "
                f"JSON (UTF-8); one real-time request carries at most {max_payload_bytes:,} bytes "
                "here (SageMaker's limit is 6 MB). Shorten it, or use SageMaker Asynchronous "
                "Inference (payloads up to 1 GB, input from S3) or Batch Transform for large inputs."
            )
        grown = [texts[j] for j in current] + [text]
        if current and (len(current) >= max_items or len(request_body(grown)) > max_payload_bytes):
            chunks.append(current)
            current = []
        current.append(i)
    return chunks + [current] if current else chunks


class EndpointClient:
    """Invoke ``endpoint_name`` with requests within the limits (``ValueError``: over 6 MB),
    ``max_attempts`` tries each; ``client``: a ready ``sagemaker-runtime`` client instead."""

    def __init__(self, endpoint_name: str, session=None, *,
                 max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
                 max_items: int = DEFAULT_MAX_ITEMS, max_attempts: int = 5, client=None):  # fmt: skip
        if max_payload_bytes > REALTIME_PAYLOAD_LIMIT_BYTES:
            raise ValueError(
                f"max_payload_bytes {max_payload_bytes:,} exceeds SageMaker's real-time limit of "
                f"{REALTIME_PAYLOAD_LIMIT_BYTES:,} bytes; use asynchronous inference for larger"
            )
        self.endpoint_name, self.max_items, self.requests_sent = endpoint_name, max_items, 0
        self.max_payload_bytes = max_payload_bytes
        # SageMaker answers or times out within 60 s: read_timeout 70
        self._client = client or session.client(
            "sagemaker-runtime", max_attempts=max_attempts, read_timeout=70
        )

    def invoke_raw(
        self, body: bytes, content_type: str = "application/json", accept: str = "application/json"
    ) -> tuple[bytes, str]:
        """One ``InvokeEndpoint``: ``(body, content type)``; ``ClientError``."""
        response = self._client.invoke_endpoint(
            EndpointName=self.endpoint_name, Body=body, ContentType=content_type, Accept=accept
        )
        self.requests_sent += 1
        return response["Body"].read(), response.get("ContentType", "")

    def predict(self, texts: list[str]) -> list[dict]:
        """One ``{"label", "score"}`` per text, in order (``RuntimeError``: another number)."""
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


def load_test(client: EndpointClient, texts: list[str], *, max_requests: int = 200,
              max_seconds: float = 60.0, concurrency: int = 4, batch_size: int = 1) -> dict:  # fmt: skip
    """Requests of ``batch_size`` texts from ``concurrency`` threads until ``max_requests`` or
    ``max_seconds``, failures counted: ``{"requests", "errors", "texts", "seconds", "concurrency",
    "batch_size", "throughput_per_s", "requests_per_s", "latency_ms", "stopped_by"}``."""
    from pt2aws.inference.measure import latency_summary

    if not texts or max_requests < 1 or max_seconds <= 0 or concurrency < 1 or batch_size < 1:
        raise ValueError("need texts, max_requests >= 1, max_seconds > 0, concurrency >= 1")
    numbers, errors, latencies = itertools.count(), [], []  # next() and append: thread-safe
    start = time.perf_counter()

    def worker() -> None:
        while time.perf_counter() - start < max_seconds and (n := next(numbers)) < max_requests:
            body = request_body(
                [texts[(n * batch_size + i) % len(texts)] for i in range(batch_size)]
            )
            sent = time.perf_counter()
            try:
                client.invoke_raw(body)
            except Exception as err:  # noqa: BLE001 - counted; the test goes on
                logger.warning("load test request failed: %s", err)
                errors.append(err)
                continue
            latencies.append(time.perf_counter() - sent)

    with ThreadPoolExecutor(concurrency) as pool:
        for _ in range(concurrency):
            pool.submit(worker)
    seconds, done = time.perf_counter() - start, len(latencies)
    return {
        "requests": done, "errors": len(errors), "texts": done * batch_size, "seconds": seconds,
        "concurrency": concurrency, "batch_size": batch_size,
        "throughput_per_s": done * batch_size / seconds, "requests_per_s": done / seconds,
        "latency_ms": latency_summary(latencies) if latencies else None,
        "stopped_by": "requests" if done + len(errors) >= max_requests else "seconds",
    }  # fmt: skip
