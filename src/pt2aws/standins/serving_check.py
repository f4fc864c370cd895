"""Notebook 02's check: the real serving stack answers as the handler does in this process.

:func:`compare_with_handler` packages the model, starts the SageMaker PyTorch serving stack on
127.0.0.1 (:class:`pt2aws.standins.torchserve.LocalEndpoint`), sends a few requests of each kind
(JSON, CSV in and out, plain text, and two bad ones), sends the same requests to the handler in
this process (:class:`pt2aws.serving.service.ModelService`), and compares: same status, same
body (JSON compared as data), and for errors the same first line (TorchServe appends a
traceback after it). ``tests/contract/`` is the full contract suite; this is its classroom size.
"""

from __future__ import annotations

import json
from pathlib import Path

JSON, CSV, TEXT = "application/json", "text/csv", "text/plain"


def default_requests(texts: list[str]) -> list[tuple[str, bytes | str, str, str]]:
    """``(name, body, content type, accept)`` for each kind of request a client sends.

    The last two are mistakes that must come back as a 4xx with a message: an unsupported
    content type (415) and a body that is not UTF-8 (400).
    """
    return [
        ("json", json.dumps({"inputs": texts}), JSON, JSON),
        ("csv in, csv out", "text\n" + "\n".join(texts), CSV, CSV),
        ("plain text", texts[0], TEXT, JSON),
        ("bad: unsupported type", "x", "application/x-npy", JSON),
        ("bad: not UTF-8", b'{"inputs": "\xff"}', JSON, JSON),
    ]


def _first_line(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    return text.splitlines()[0] if text else ""


def same_answer(status: int, body: bytes, content_type: str | None, reference) -> bool:
    """Whether an HTTP answer equals the in-process ``reference`` (a ``Reply``).

    200: same content type and body (JSON bodies compared as data); errors: same status and the
    same first line of the body.
    """
    if status != reference.status:
        return False
    if status != 200:
        return _first_line(body) == _first_line(reference.body)
    if (content_type or "").split(";")[0] != (reference.content_type or "").split(";")[0]:
        return False
    if (content_type or "").startswith(JSON):
        return json.loads(body) == json.loads(reference.body)
    return body == reference.body


def compare_with_handler(
    model_dir: str | Path,
    workdir: str | Path,
    texts: list[str],
    *,
    start: bool = True,
    latency_calls: int = 10,
) -> dict:
    """Query the local serving stack and the in-process handler alike; compare the answers.

    Args:
        model_dir: the fine-tuned model folder (``train/model`` of the run).
        workdir: folder for ``model.tar.gz`` and the server's files and logs (``serve/``).
        texts: a few texts to classify (the first one is also the latency probe).
        start: False skips the server (the result says so).
        latency_calls: single-text requests timed after the comparison.

    Returns:
        ``{"answers": [{"request", "status", "content_type", "first_line", "same_as_in_process"}],
        "summary": {"answers", "startup_s", "matches_in_process", "p50_ms", ..., "requests_per_s"}
        or {"skipped": reason}}``.
    """
    from pt2aws.aws.artifact import package
    from pt2aws.inference.measure import measure_endpoint
    from pt2aws.serving.service import ModelService
    from pt2aws.standins.torchserve import LocalEndpoint, serve_stack_missing

    missing = None if start else "START_ENDPOINT is False"
    missing = missing or serve_stack_missing()
    if missing:
        print(f"local endpoint skipped: {missing}")
        return {"answers": [], "summary": {"skipped": missing}}
    workdir = Path(workdir)
    archive = package(model_dir, workdir / "model.tar.gz")
    service = ModelService(model_dir)
    service.load()
    answers = []
    with LocalEndpoint(archive, workdir / "serve") as endpoint:
        print(f"{endpoint.url} healthy after {endpoint.startup_s:.1f} s")
        for name, body, content_type, accept in default_requests(texts):
            status, got, got_type = endpoint.invoke(body, content_type, accept)
            reference = service.invoke(
                body.encode() if isinstance(body, str) else body, content_type, accept
            )
            answers.append(
                {
                    "request": name,
                    "status": status,
                    "content_type": got_type,
                    "first_line": _first_line(got)[:70],
                    "same_as_in_process": same_answer(status, got, got_type, reference),
                }
            )
        timing = measure_endpoint(endpoint, texts[0], calls=latency_calls)
    summary = {
        "answers": answers,
        "startup_s": endpoint.startup_s,
        "matches_in_process": all(a["same_as_in_process"] for a in answers),
        "stopped": not endpoint.running,
        **timing,
    }
    print(
        f"same answers as in-process: {summary['matches_in_process']}; request p50 "
        f"{timing['p50_ms']:.1f} ms, {timing['requests_per_s']:.1f} requests/s; "
        f"stopped: {summary['stopped']}"
    )
    return {"answers": answers, "summary": summary}
