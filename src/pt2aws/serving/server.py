"""The serving image's model server: the SageMaker hosting contract on Starlette + uvicorn.
``<image> serve`` runs the archive's ``code/inference.py`` (else :mod:`pt2aws.serving.handler`)
with TorchServe's statuses, first body lines and content types (``tests/contract`` checks both).
``/ping`` is 200 once a warm-up request answered; a worker whose model fails to load exits 3,
stopping the server. ``SAGEMAKER_MODEL_SERVER_WORKERS`` processes (default one per vCPU), one
request at a time each; ``code/requirements.txt`` is checked, never installed."""

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
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8080
#: TorchServe's default ``max_request_size`` (kept by the toolkit unless the variable is set).
DEFAULT_MAX_REQUEST_BYTES = 6_553_500
#: ``GET /ping`` body when healthy: byte for byte TorchServe 0.12's.
HEALTHY_BODY = b'{\n  "status": "Healthy"\n}\n'
#: uvicorn's exit status for "failed before serving": its supervisor then stops every worker.
STARTUP_FAILURE = 3
#: Seconds a request waits for a worker still loading (SageMaker allows 60 s per request).
LOAD_WAIT_S = 55.0


class Reply(NamedTuple):
    """One HTTP answer; ``content_type`` None sends no header."""

    status: int
    body: bytes
    content_type: str | None

    @classmethod
    def error(cls, status: int, message: str) -> Reply:
        return cls(status, f"{message}\n".encode(), "text/plain; charset=utf-8")


def unmet_requirements(path: str | os.PathLike) -> list[str]:
    """Lines of a ``requirements.txt`` the installed packages do not satisfy (nothing installed)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    unmet = []
    lines = (line.split("#")[0].strip() for line in Path(path).read_text().splitlines())
    for line in filter(None, lines):
        req = Requirement(line)
        try:
            if not req.specifier.contains(version := metadata.version(req.name), prereleases=True):
                unmet.append(f"{line} (installed: {version})")
        except metadata.PackageNotFoundError:
            unmet.append(line)
    return unmet


def load_handler(model_dir: str | os.PathLike, *, builtin: bool = True) -> ModuleType:
    """The handler as the SageMaker PyTorch toolkit imports it: ``code/$SAGEMAKER_PROGRAM``
    (``inference.py``; ``code/`` on ``sys.path``), else with ``builtin`` the built-in one.
    FileNotFoundError: none and not ``builtin``; AttributeError: one of the four ``*_fn`` missing.
    """
    path = Path(model_dir) / "code" / os.environ.get("SAGEMAKER_PROGRAM", "inference.py")
    if path.is_file():
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location("inference", path)
        module = sys.modules["inference"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    elif not builtin:
        raise FileNotFoundError(f"{path} missing: the archive carries no handler")
    else:
        from pt2aws.serving import handler as module
    logger.info("handler: %s", module.__file__)
    if hasattr(module, "choose_variant"):  # the built-in handler or a copy of it: every variant
        from pt2aws.inference.selection import serving_variant

        module.choose_variant = serving_variant
    needed = ("model_fn", "input_fn", "predict_fn", "output_fn")
    missing = [f for f in needed if not hasattr(module, f)]
    if missing:
        raise AttributeError(f"handler {module.__file__} does not define {', '.join(missing)}")
    return module


def _call(fn, *args):
    """``fn(*args)``, with the toolkit's trailing ``context`` (None) when ``fn`` takes it."""
    extra = (None,) if len(inspect.signature(fn).parameters) == len(args) + 1 else ()
    return fn(*args, *extra)


class ModelService:
    """One worker's model behind the handler: :meth:`load` once, then :meth:`invoke` per request
    (one thread at a time); ``default_accept`` for no ``Accept`` or ``*/*``."""

    def __init__(self, model_dir: str | os.PathLike, *, default_accept: str = "application/json"):
        self.model_dir, self.default_accept = Path(model_dir), default_accept
        self.handler = self.model = self.error = self.load_s = None
        self.ready = False

    def load(self) -> None:
        """Import the handler, check ``code/requirements.txt``, ``model_fn``, ``model_warmup_fn``
        if any and a warm-up request, then :attr:`ready`; RuntimeError: the warm-up was no 200."""
        t0 = time.perf_counter()
        requirements = self.model_dir / "code" / "requirements.txt"
        if unmet := unmet_requirements(requirements) if requirements.is_file() else []:
            logger.warning("%s not satisfied by this image, not installed: %s", requirements,
                           "; ".join(unmet))  # fmt: skip
        self.handler = load_handler(self.model_dir)
        self.model = _call(self.handler.model_fn, str(self.model_dir))
        if hasattr(self.handler, "model_warmup_fn"):
            _call(self.handler.model_warmup_fn, str(self.model_dir), self.model)
        reply = self.invoke(b'{"inputs": ["warm up"]}', "application/json", "application/json")
        if reply.status != 200:
            raise RuntimeError(f"warm-up request answered {reply.status}: {reply.body[:500]!r}")
        self.load_s, self.ready = time.perf_counter() - t0, True
        logger.info("model loaded and warmed up in %.1f s (pid %d)", self.load_s, os.getpid())

    def invoke(self, body: bytes, content_type: str | None, accept: str | None) -> Reply:
        """``input_fn`` -> ``predict_fn`` -> ``output_fn``: 200, the handler's 4xx, or 500 (logged)."""
        if not accept or accept == "*/*":
            accept = self.default_accept
        try:
            data = _call(self.handler.input_fn, body, content_type)
            prediction = _call(self.handler.predict_fn, data, self.model)
            out = _call(self.handler.output_fn, prediction, accept)
        except Exception as err:  # noqa: BLE001 - every failure becomes an HTTP answer
            status = getattr(err, "status_code", None)
            if isinstance(status, int) and 400 <= status < 600:
                return Reply.error(status, str(getattr(err, "message", err)))
            logger.error("handler failed:\n%s", traceback.format_exc())
            return Reply.error(500, str(err))
        out_body, media = out if isinstance(out, tuple) else (out, accept)
        out_body = out_body.encode() if isinstance(out_body, str) else bytes(out_body)
        return Reply(200, out_body, media)


def create_app(service: ModelService, *, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
               on_load_failure=None, load_wait_s: float = LOAD_WAIT_S):  # fmt: skip
    """One worker's Starlette app; ``service.load`` runs in a daemon thread at start-up (SIGTERM
    need not wait), a failure calls ``on_load_failure(err)``."""
    import anyio
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    loaded, limiter = threading.Event(), anyio.CapacityLimiter(1)
    too_large = Reply.error(413, f"request body is too large: the limit is {max_request_bytes} "
                            "bytes (SAGEMAKER_MAX_PAYLOAD_IN_MB): split the batch")  # fmt: skip

    def respond(reply: Reply) -> Response:
        headers = {"content-type": reply.content_type} if reply.content_type else None
        return Response(reply.body, status_code=reply.status, headers=headers)

    def load() -> None:
        try:
            service.load()
        except BaseException as err:  # noqa: BLE001 - reported, then the worker stops
            service.error = err
            logger.error("the model failed to load:\n%s", traceback.format_exc())
            if on_load_failure is not None:
                on_load_failure(err)
        finally:
            loaded.set()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        threading.Thread(target=load, name="model-load", daemon=True).start()
        yield

    async def ping(request):
        if service.ready:
            return respond(Reply(200, HEALTHY_BODY, "application/json"))
        state = {"status": "Loading"} if service.error is None else {
            "status": "Unhealthy", "error": f"model failed to load: {service.error}"}  # fmt: skip
        return respond(Reply(503, json.dumps(state).encode(), "application/json"))

    async def invocations(request):
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_request_bytes:
                return respond(too_large)
            chunks.append(chunk)
        if not loaded.is_set():
            await asyncio.to_thread(loaded.wait, load_wait_s)
        if not service.ready:
            why = f"failed to load: {service.error}" if service.error else "is still loading"
            return respond(Reply.error(503, f"the model {why}; retry later"))
        headers = request.headers
        reply = await anyio.to_thread.run_sync(service.invoke, b"".join(chunks),
                                               headers.get("content-type"), headers.get("accept"),
                                               limiter=limiter)  # fmt: skip
        return respond(reply)

    routes = [Route("/ping", ping, methods=["GET", "POST"]),  # Starlette adds HEAD to GET
              Route("/invocations", invocations, methods=["POST"])]  # fmt: skip
    return Starlette(routes=routes, lifespan=lifespan)


def _positive(name: str, default: int | None = None) -> int | None:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ValueError(f"{name}={raw!r}: set a positive integer")
    return int(raw)


def max_request_bytes() -> int:
    """``SAGEMAKER_MAX_PAYLOAD_IN_MB`` in bytes, else 6,553,500; ValueError if not a positive int."""
    mb = _positive("SAGEMAKER_MAX_PAYLOAD_IN_MB")
    return DEFAULT_MAX_REQUEST_BYTES if mb is None else mb * 1024 * 1024


def _exit_startup_failure(err: BaseException) -> None:
    logger.critical("stopping: the model failed to load (%s: %s)", type(err).__name__, err)
    logging.shutdown()
    os._exit(STARTUP_FAILURE)


def _configure_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")  # fmt: skip


def app_from_environment():
    """uvicorn's app factory in each worker (the model in ``PT2AWS_MODEL_DIR``, set by :func:`main`)."""
    _configure_logging()
    accept = os.environ.get("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", "application/json")
    service = ModelService(os.environ["PT2AWS_MODEL_DIR"], default_accept=accept)
    return create_app(service, max_request_bytes=max_request_bytes(),
                      on_load_failure=_exit_startup_failure)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; returns 0, 2 for bad settings, 3 when a model failed to load."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["serve"]:
        print("this image serves SageMaker real-time inference: run it as `<image> serve` "
              f"(got {' '.join(argv) or 'no command'!r})", file=sys.stderr)  # fmt: skip
        return 2
    from pt2aws.env.machine import available_cpus

    base = Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
    parser = argparse.ArgumentParser(prog="python -m pt2aws.serving.server serve")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=None, help="0: a free port")
    parser.add_argument("--model-dir", type=Path, help="default: PT2AWS_MODEL_DIR, /opt/ml/model",
                        default=os.environ.get("PT2AWS_MODEL_DIR") or base / "model")  # fmt: skip
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv[1:])
    _configure_logging()
    try:
        workers = args.workers or _positive("SAGEMAKER_MODEL_SERVER_WORKERS", available_cpus())
        port = _positive("SAGEMAKER_BIND_TO_PORT", DEFAULT_PORT) if args.port is None else args.port
        max_request_bytes()  # validated once, not in every worker
        if not (model_dir := Path(args.model_dir).resolve()).is_dir():
            raise ValueError(f"model folder {model_dir} does not exist (SageMaker extracts "
                             "model.tar.gz to /opt/ml/model; locally pass --model-dir)")  # fmt: skip
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from pt2aws.inference.runtime import apply_runtime_settings

    os.environ["PT2AWS_MODEL_DIR"] = str(model_dir)  # the workers read it
    apply_runtime_settings(workers, torch_threads=False)  # before the workers import torch
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # its threads fight OpenMP's

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config("pt2aws.serving.server:app_from_environment", factory=True,
                            host=args.host, port=port, workers=workers, lifespan="on",
                            timeout_worker_healthcheck=30)  # fmt: skip
    sock = config.bind_socket()
    logger.info("listening on http://%s:%d: %s, %d worker(s)", args.host, sock.getsockname()[1],
                model_dir, workers)  # fmt: skip
    # always the supervisor, even for one worker: workers import torch after the settings above
    supervisor = Multiprocess(config, sockets=[sock])
    supervisor.run()
    if any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes):
        logger.error("stopped: a worker's model failed to load (see its log above)")
        return STARTUP_FAILURE
    return 0


if __name__ == "__main__":
    sys.exit(main())
