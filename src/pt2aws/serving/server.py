"""The SageMaker hosting contract on Starlette + uvicorn, around the same handler as TorchServe.

This is the model server of the project's own serving image (``container/Dockerfile``): SageMaker
runs ``docker run <image> serve``, which starts :func:`main`. It serves the handler in
``pt2aws/serving/inference.py`` (``model_fn`` / ``input_fn`` / ``predict_fn`` / ``output_fn``)
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
  the SageMaker PyTorch container, else the copy built into this package.
  ``code/requirements.txt`` is checked and never installed: nothing is downloaded at start, so
  the image works with ``EnableNetworkIsolation=True``.
* Processes: ``SAGEMAKER_MODEL_SERVER_WORKERS`` worker processes (default: one per vCPU, as in
  AWS's Graviton benchmark set-up), each with its own copy of the model and one request at a
  time; uvicorn's supervisor restarts a worker that dies after start-up. Port
  ``SAGEMAKER_BIND_TO_PORT`` (default 8080) on all interfaces.
* Runtime settings (AWS Graviton Technical Guide, via :func:`pt2aws.inference.runtime_settings`):
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
import importlib.util
import inspect
import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

logger = logging.getLogger(__name__)

DEFAULT_MODEL_DIR = "/opt/ml/model"
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
#: The request the model answers before ``/ping`` turns healthy.
WARMUP_REQUEST = (b'{"inputs": ["warm up"]}', "application/json", "application/json")
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: ``status``, ``body`` bytes and ``content_type`` (None: no header)."""

    status: int
    body: bytes
    content_type: str | None

    @classmethod
    def error(cls, status: int, message: str) -> Reply:
        """A ``text/plain`` error whose body is ``message`` and a newline."""
        return cls(status, f"{message}\n".encode(), TEXT_CONTENT_TYPE)


def resolve_model_dir(model_dir: str | os.PathLike | None = None) -> Path:
    """The model folder: ``model_dir``, ``PT2AWS_MODEL_DIR``, ``$SAGEMAKER_BASE_DIR/model`` or
    ``/opt/ml/model``, in that order (the last is where SageMaker extracts ``model.tar.gz``)."""
    if model_dir:
        return Path(model_dir)
    if os.environ.get("PT2AWS_MODEL_DIR"):
        return Path(os.environ["PT2AWS_MODEL_DIR"])
    if os.environ.get("SAGEMAKER_BASE_DIR"):
        return Path(os.environ["SAGEMAKER_BASE_DIR"]) / "model"
    return Path(DEFAULT_MODEL_DIR)


def load_handler(model_dir: str | os.PathLike) -> ModuleType:
    """Import the inference handler for ``model_dir``.

    ``<model_dir>/code/$SAGEMAKER_PROGRAM`` (default ``inference.py``) when it exists, as the
    SageMaker PyTorch container does; else :mod:`pt2aws.serving.inference`.

    Raises:
        AttributeError: the module lacks ``model_fn``, ``input_fn``, ``predict_fn`` or
            ``output_fn`` (``transform_fn`` handlers are not supported).
        Exception: whatever importing the module raises (e.g. ``ModuleNotFoundError`` for a
            package its ``requirements.txt`` names but this image lacks).
    """
    path = Path(model_dir) / "code" / os.environ.get("SAGEMAKER_PROGRAM", "inference.py")
    if path.is_file():
        spec = importlib.util.spec_from_file_location("inference", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["inference"] = module  # as the toolkit imports it, for pickling and logs
        spec.loader.exec_module(module)
        logger.info("handler: %s (from the model archive)", path)
    else:
        from pt2aws.serving import inference as module

        logger.info(
            "handler: %s (built into the image; the model has no %s)", module.__file__, path
        )
    missing = [
        f for f in ("model_fn", "input_fn", "predict_fn", "output_fn") if not hasattr(module, f)
    ]
    if missing:
        raise AttributeError(f"handler {module.__file__} does not define {', '.join(missing)}")
    return module


def _call(fn: Callable, *args):
    """Call a handler function with or without its trailing ``context`` parameter, as the
    toolkit does (``context`` is None here: there is no TorchServe context)."""
    if len(inspect.signature(fn).parameters) == len(args) + 1:
        return fn(*args, None)
    return fn(*args)


class ModelService:
    """One worker's model: loads it once, then answers invocations through the handler.

    Args:
        model_dir: the extracted ``model.tar.gz`` (see :func:`resolve_model_dir`).
        default_accept: the response type for requests without ``Accept`` or with ``*/*``
            (``SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT`` in the toolkit).

    :meth:`load` is blocking and runs once (the app runs it in a thread); :meth:`invoke` is
    called from one thread at a time.
    """

    def __init__(self, model_dir: str | os.PathLike, *, default_accept: str = "application/json"):
        self.model_dir = Path(model_dir)
        self.default_accept = default_accept
        self.handler: ModuleType | None = None
        self.model = None
        self.ready = False
        self.error: BaseException | None = None
        self.load_s: float | None = None

    def load(self) -> None:
        """Import the handler, check ``code/requirements.txt``, run ``model_fn``, the handler's
        ``model_warmup_fn`` if any, and one warm-up request; then :attr:`ready` is True.

        Raises:
            FileNotFoundError: ``model_dir`` does not exist.
            RuntimeError: the warm-up request was not answered with 200.
            Exception: whatever the handler raises while loading.
        """
        t0 = time.perf_counter()
        if not self.model_dir.is_dir():
            raise FileNotFoundError(
                f"model folder {self.model_dir} does not exist: SageMaker extracts model.tar.gz "
                "to /opt/ml/model; locally pass --model-dir or mount the model there"
            )
        requirements = self.model_dir / "code" / "requirements.txt"
        if requirements.is_file():
            from pt2aws.serving.ts_launcher import unmet_requirements

            unmet = unmet_requirements(str(requirements))
            if unmet:
                logger.warning(
                    "%s is not satisfied by this image and is not installed at start "
                    "(no network is assumed): %s",
                    requirements,
                    "; ".join(unmet),
                )
        self.handler = load_handler(self.model_dir)
        self.model = _call(self.handler.model_fn, str(self.model_dir))
        if hasattr(self.handler, "model_warmup_fn"):
            _call(self.handler.model_warmup_fn, str(self.model_dir), self.model)
        reply = self.invoke(*WARMUP_REQUEST)
        if reply.status != 200:
            raise RuntimeError(
                f"warm-up request answered {reply.status}: {reply.body[:500].decode(errors='replace')}"
            )
        self.load_s = time.perf_counter() - t0
        self.ready = True
        logger.info("model loaded and warmed up in %.1f s (pid %d)", self.load_s, os.getpid())

    def invoke(self, body: bytes, content_type: str | None, accept: str | None) -> Reply:
        """Run one request through ``input_fn`` -> ``predict_fn`` -> ``output_fn``.

        Args:
            body: the request body, as received.
            content_type: the ``Content-Type`` header, or None when absent.
            accept: the ``Accept`` header, or None when absent.

        Returns:
            The reply: 200 with the handler's body and content type; the handler's status
            (4xx) and message for its errors; 500 with the exception text for anything else
            (the first line TorchServe sends; the traceback goes to the log, not the client).
        """
        handler, model = self.handler, self.model
        if not accept or accept == "*/*":
            accept = self.default_accept
        try:
            data = _call(handler.input_fn, body, content_type)
            prediction = _call(handler.predict_fn, data, model)
            out = _call(handler.output_fn, prediction, accept)
        except Exception as err:  # noqa: BLE001 - every failure becomes an HTTP answer
            status = getattr(err, "status_code", None)
            if isinstance(status, int) and 400 <= status < 600:
                return Reply.error(status, str(getattr(err, "message", err)))
            logger.error("handler failed:\n%s", traceback.format_exc())
            return Reply.error(500, str(err))  # TorchServe's first line; the traceback is logged
        out_body, media = out if isinstance(out, tuple) else (out, accept)
        if isinstance(out_body, str):
            out_body = out_body.encode("utf-8")
        return Reply(200, bytes(out_body), media)


def _json_reply(status: int, payload: dict) -> Reply:
    return Reply(status, (json.dumps(payload, indent=2) + "\n").encode(), "application/json")


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
    from starlette.responses import Response
    from starlette.routing import Route

    state: dict = {}

    def respond(reply: Reply) -> Response:
        headers = {"content-type": reply.content_type} if reply.content_type else None
        return Response(reply.body, status_code=reply.status, headers=headers)

    def _load_in_thread(loop: asyncio.AbstractEventLoop, loaded: asyncio.Event) -> None:
        try:
            service.load()
        except BaseException as err:  # noqa: BLE001 - reported, then the worker stops
            service.error = err
            logger.error("the model failed to load:\n%s", traceback.format_exc())
            if on_load_failure is not None:
                on_load_failure(err)
        finally:
            loop.call_soon_threadsafe(loaded.set)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        import anyio

        state["limiter"] = anyio.CapacityLimiter(1)
        state["loaded"] = loaded = asyncio.Event()
        # a daemon thread, not anyio's pool: a SIGTERM during a long load must not wait for it
        threading.Thread(
            target=_load_in_thread,
            args=(asyncio.get_running_loop(), loaded),
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

        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > max_request_bytes:
            return respond(_too_large(int(declared), max_request_bytes))
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_request_bytes:
                return respond(_too_large(None, max_request_bytes))
            chunks.append(chunk)
        if not service.ready and service.error is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(state["loaded"].wait(), load_wait_s)
        if not service.ready:
            reason = f"failed to load: {service.error}" if service.error else "is still loading"
            return respond(Reply.error(503, f"the model {reason}; retry later"))
        reply = await anyio.to_thread.run_sync(
            service.invoke,
            b"".join(chunks),
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


def apply_runtime_settings(workers: int) -> dict[str, str]:
    """Set the Graviton runtime settings for ``workers`` processes in ``os.environ``, keeping any
    variable already set; called before the workers start (they import torch with them).

    Returns:
        ``{name: value}`` in force afterwards, one entry per setting.
    """
    # The one import of code outside pt2aws.serving (moves with the package restructure).
    from pt2aws.inference import runtime_settings

    settings = runtime_settings(num_processes=workers)
    for name, value in settings["env"].items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # its threads would fight OpenMP's
    for name, reason in settings["reasons"].items():
        logger.info("runtime: %s=%s (%s)", name, os.environ.get(name, "-"), reason)
    return {name: os.environ[name] for name in settings["env"]}


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
    apply_runtime_settings(workers)
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
