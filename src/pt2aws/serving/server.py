"""The SageMaker hosting contract on Starlette + uvicorn, around the same handler as TorchServe.

This is the model server of the project's own serving image (``container/Dockerfile``): SageMaker
runs ``docker run <image> serve``, which starts :func:`main`. It serves the handler in
``pt2aws/serving/handler.py`` (``model_fn`` / ``input_fn`` / ``predict_fn`` / ``output_fn``)
with the answers the SageMaker PyTorch toolkit + TorchServe give for it (same statuses, first
body lines and 200 content types; ``tests/contract`` checks every case against both):

* ``GET /ping`` (also ``HEAD``, ``POST``): 200 ``{"status": "Healthy"}`` only after ``model_fn``
  has loaded the model and a warm-up request has been answered through the same code path as
  ``/invocations``; 503 before that. A worker whose model fails to load logs why and exits
  with status 3, which stops the whole server: it never reports healthy.
* ``POST /invocations``: ``Content-Type`` and ``Accept`` go to the handler as the toolkit passes
  them (no ``Accept`` or ``*/*`` means ``SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT``, default
  ``application/json``). The handler's errors (``GenericInferenceToolkitError``: 400, 406, 413,
  415) become that status with the message as a ``text/plain`` body; TorchServe appends a
  traceback after the message and sends no ``Content-Type``. Bodies over
  ``SAGEMAKER_MAX_PAYLOAD_IN_MB`` (default: TorchServe's 6,553,500 bytes) get a 413.
* Where the model comes from: ``--model-dir``, else ``PT2AWS_MODEL_DIR``, else
  ``$SAGEMAKER_BASE_DIR/model``, else ``/opt/ml/model``. The handler is
  ``<model>/code/$SAGEMAKER_PROGRAM`` (default ``inference.py``) when the archive has one, as in
  the SageMaker PyTorch container, else the copy built into this package
  (:func:`pt2aws.serving.service.load_handler`).
  ``code/requirements.txt`` is checked and never installed: nothing is downloaded at start, so
  the image works with ``EnableNetworkIsolation=True``.
* Processes: ``SAGEMAKER_MODEL_SERVER_WORKERS`` worker processes (default: one per vCPU, as in
  AWS's Graviton benchmark set-up), each with its own copy of the model and one request at a
  time; uvicorn's supervisor restarts a worker that dies after start-up. The workers share one
  listening socket, so each request (``/ping`` too) is answered by whichever worker takes it:
  during start-up a ``/ping`` can be 200 from a ready worker while another still loads, and an
  ``/invocations`` request that reaches the loading one waits for it (up to 55 s, then 503).
  Port ``SAGEMAKER_BIND_TO_PORT`` (default 8080) on all interfaces.
* Runtime settings (AWS Graviton Technical Guide; their one home is :mod:`pt2aws.inference.runtime`):
  ``LRU_CACHE_CAPACITY=1024``, ``THP_MEM_ALLOC_ENABLE=1``, ``OMP_NUM_THREADS`` = vCPUs /
  workers, and ``DNNL_DEFAULT_FPMATH_MODE=BF16`` on aarch64 CPUs with bf16; a variable already
  set in the environment (``CreateModel`` ``Environment``) is kept. They are set before the
  workers start, so each worker imports torch with them.

Run locally: ``python -m pt2aws.serving.server serve --model-dir runs/x/train/model --port 8080``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable

from pt2aws.inference.runtime import set_runtime_environment
from pt2aws.serving.service import ModelService, Reply, resolve_model_dir

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8080
#: TorchServe's default ``max_request_size`` in bytes, kept by the SageMaker toolkit unless
#: ``SAGEMAKER_MAX_PAYLOAD_IN_MB`` is set (SageMaker itself refuses larger real-time requests).
DEFAULT_MAX_REQUEST_BYTES = 6_553_500
#: ``GET /ping`` body when healthy: byte for byte what TorchServe 0.12 answers.
HEALTHY_BODY = b'{\n  "status": "Healthy"\n}\n'
#: uvicorn's exit status for "failed before serving" (``uvicorn.config.STARTUP_FAILURE``): a
#: worker exiting with it makes the supervisor stop every worker instead of restarting it.
STARTUP_FAILURE = 3
#: Seconds an ``/invocations`` request that reaches a worker still loading its model waits before
#: a 503 (SageMaker allows 60 s per request).
LOAD_WAIT_S = 55.0


def _json_reply(status: int, payload: dict) -> Reply:
    return Reply(status, (json.dumps(payload, indent=2) + "\n").encode(), "application/json")


def respond(reply: Reply):
    """A Starlette response for a :class:`~pt2aws.serving.service.Reply`."""
    from starlette.responses import Response

    headers = {"content-type": reply.content_type} if reply.content_type else None
    return Response(reply.body, status_code=reply.status, headers=headers)


def _load_in_thread(service, on_load_failure, loop, loaded) -> None:
    """Load the model (in a daemon thread); on failure log it and tell ``on_load_failure``."""
    try:
        service.load()
    except BaseException as err:  # noqa: BLE001 - reported, then the worker stops
        service.error = err
        logger.error("the model failed to load:\n%s", traceback.format_exc())
        if on_load_failure is not None:
            on_load_failure(err)
    finally:
        loop.call_soon_threadsafe(loaded.set)


async def _read_body(request, max_request_bytes: int) -> bytes | Reply:
    """The request body, or a 413 :class:`Reply` as soon as it exceeds ``max_request_bytes``
    (by its declared ``Content-Length`` or while streaming)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_request_bytes:
        return _too_large(int(declared), max_request_bytes)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_request_bytes:
            return _too_large(None, max_request_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(
    service: ModelService,
    *,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    on_load_failure: Callable[[BaseException], None] | None = None,
    load_wait_s: float = LOAD_WAIT_S,
):
    """The Starlette app for one worker: ``/ping`` and ``/invocations`` around ``service``.

    Args:
        service: the worker's model; its :meth:`ModelService.load` starts in a background
            thread when the app starts, so ``/ping`` can answer 503 meanwhile.
        max_request_bytes: larger request bodies get a 413 without being read in full.
        on_load_failure: called with the exception when loading fails (``serve`` exits the
            process); with None the app stays up and answers 503.
        load_wait_s: how long ``/invocations`` waits for a model still loading before a 503.

    Returns:
        A :class:`starlette.applications.Starlette` application.
    """
    from starlette.applications import Starlette
    from starlette.routing import Route

    state: dict = {}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        import anyio

        state["limiter"] = anyio.CapacityLimiter(1)
        state["loaded"] = loaded = asyncio.Event()
        # a daemon thread, not anyio's pool: a SIGTERM during a long load must not wait for it
        threading.Thread(
            target=_load_in_thread,
            args=(service, on_load_failure, asyncio.get_running_loop(), loaded),
            name="model-load",
            daemon=True,
        ).start()
        yield

    async def ping(request):
        if service.ready:
            return respond(Reply(200, HEALTHY_BODY, "application/json"))
        if service.error is not None:
            return respond(
                _json_reply(
                    503, {"status": "Unhealthy", "error": f"model failed to load: {service.error}"}
                )
            )
        return respond(_json_reply(503, {"status": "Loading"}))

    async def invocations(request):
        import anyio

        body = await _read_body(request, max_request_bytes)
        if isinstance(body, Reply):
            return respond(body)
        if not service.ready and service.error is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(state["loaded"].wait(), load_wait_s)
        if not service.ready:
            reason = f"failed to load: {service.error}" if service.error else "is still loading"
            return respond(Reply.error(503, f"the model {reason}; retry later"))
        reply = await anyio.to_thread.run_sync(
            service.invoke,
            body,
            request.headers.get("content-type"),
            request.headers.get("accept"),
            limiter=state["limiter"],
        )
        return respond(reply)

    routes = [
        Route("/ping", ping, methods=["GET", "POST"]),  # Starlette adds HEAD to GET
        Route("/invocations", invocations, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _too_large(size: int | None, limit: int) -> Reply:
    got = f"{size} bytes" if size is not None else "larger than that"
    return Reply.error(
        413,
        f"request body is {got}; the limit is {limit} bytes (SAGEMAKER_MAX_PAYLOAD_IN_MB): "
        "split the batch",
    )


def max_request_bytes() -> int:
    """Largest request body in bytes: ``SAGEMAKER_MAX_PAYLOAD_IN_MB`` MiB (as the toolkit reads
    it), else TorchServe's default of 6,553,500.

    Raises:
        ValueError: ``SAGEMAKER_MAX_PAYLOAD_IN_MB`` is not a positive integer.
    """
    raw = os.environ.get("SAGEMAKER_MAX_PAYLOAD_IN_MB")
    if raw is None:
        return DEFAULT_MAX_REQUEST_BYTES
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ValueError(f"SAGEMAKER_MAX_PAYLOAD_IN_MB={raw!r}: set a positive integer, e.g. 6")
    return int(raw) * 1024 * 1024


def _exit_startup_failure(err: BaseException) -> None:
    logger.critical("stopping: the model failed to load (%s: %s)", type(err).__name__, err)
    logging.shutdown()
    os._exit(STARTUP_FAILURE)  # the supervisor then stops every worker (no restart loop)


def app_from_environment():
    """uvicorn's app factory in each worker process: the model from :func:`resolve_model_dir`,
    ``SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT``, ``SAGEMAKER_MAX_PAYLOAD_IN_MB``; a failed load
    exits the worker with status 3."""
    _configure_logging()
    service = ModelService(
        resolve_model_dir(),
        default_accept=os.environ.get("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", "application/json"),
    )
    return create_app(
        service, max_request_bytes=max_request_bytes(), on_load_failure=_exit_startup_failure
    )


def vcpus() -> int:
    """CPUs this process may run on (``sched_getaffinity``; ``os.cpu_count()`` where missing)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def worker_count(workers: int | None = None) -> int:
    """Worker processes: ``workers``, else ``SAGEMAKER_MODEL_SERVER_WORKERS``, else one per vCPU.

    Raises:
        ValueError: the value is not a positive integer.
    """
    raw = workers if workers is not None else os.environ.get("SAGEMAKER_MODEL_SERVER_WORKERS")
    if raw is None or raw == "":
        return vcpus()
    if not str(raw).strip().isdigit() or int(raw) < 1:
        raise ValueError(
            f"SAGEMAKER_MODEL_SERVER_WORKERS={raw!r}: set a positive integer (e.g. the vCPUs)"
        )
    return int(raw)


def _configure_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"
        )


def build_parser() -> argparse.ArgumentParser:
    """The ``serve`` command line (SageMaker passes only ``serve``; the options are for local runs)."""
    parser = argparse.ArgumentParser(
        prog="python -m pt2aws.serving.server",
        description="SageMaker real-time inference server (GET /ping, POST /invocations).",
    )
    parser.add_argument("command", choices=["serve"], help="SageMaker runs `<image> serve`")
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default: all)")
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"port (default: SAGEMAKER_BIND_TO_PORT, else {DEFAULT_PORT})",
    )
    parser.add_argument("--model-dir", default=None, help="model folder (default: /opt/ml/model)")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes (default: SAGEMAKER_MODEL_SERVER_WORKERS, else one per vCPU)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Start the server and block until SIGTERM/SIGINT (``docker run <image> serve``).

    Returns:
        0 after a clean shutdown, 2 for bad settings (message on stderr), 3 when a worker's
        model failed to load.
    """
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["serve"]:
        print(
            f"this image serves SageMaker real-time inference: run it as `<image> serve` "
            f"(got {' '.join(argv) or 'no command'!r})",
            file=sys.stderr,
        )
        return 2
    args = build_parser().parse_args(argv)
    _configure_logging()
    try:
        workers = worker_count(args.workers)
        port = args.port or int(os.environ.get("SAGEMAKER_BIND_TO_PORT", DEFAULT_PORT))
        max_request_bytes()  # validated here once, not in every worker
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model_dir = resolve_model_dir(args.model_dir).resolve()
    if not model_dir.is_dir():
        print(
            f"error: model folder {model_dir} does not exist (SageMaker extracts model.tar.gz to "
            "/opt/ml/model; locally pass --model-dir)",
            file=sys.stderr,
        )
        return 2
    os.environ["PT2AWS_MODEL_DIR"] = str(model_dir)  # the workers read it
    set_runtime_environment(workers)  # before the workers import torch
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # its threads would fight OpenMP's
    logger.info("serving %s on %s:%d with %d worker(s)", model_dir, args.host, port, workers)

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(
        "pt2aws.serving.server:app_from_environment",
        factory=True,
        host=args.host,
        port=port,
        workers=workers,
        lifespan="on",
        timeout_worker_healthcheck=30,
    )
    # Always through the supervisor, even for one worker: the workers are fresh processes that
    # import torch after the settings above, and a worker's load failure stops the server.
    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    supervisor.run()
    if any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes):
        logger.error("stopped: a worker's model failed to load (see its log above)")
        return STARTUP_FAILURE
    return 0


if __name__ == "__main__":
    sys.exit(main())
