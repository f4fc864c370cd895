"""One worker's model behind the SageMaker handler functions, without any HTTP.

:class:`ModelService` imports the handler (``model_fn`` / ``input_fn`` / ``predict_fn`` /
``output_fn``) the way the SageMaker PyTorch toolkit does, loads and warms up the model, and turns
one request (body, ``Content-Type``, ``Accept``) into a :class:`Reply` with the toolkit's status,
first body line and content type. :mod:`pt2aws.serving.server` puts it behind HTTP.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

logger = logging.getLogger(__name__)

DEFAULT_MODEL_DIR = "/opt/ml/model"
#: The request the model answers before ``/ping`` turns healthy.
WARMUP_REQUEST = (b'{"inputs": ["warm up"]}', "application/json", "application/json")
#: Content type of error replies (TorchServe sends none).
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


def unmet_requirements(path: str) -> list[str]:
    """The lines of a ``requirements.txt`` that the installed packages do not satisfy.

    Only names and version specifiers are checked (environment markers, extras and URLs are not);
    nothing is installed. Used by :class:`ModelService` (the serving image) and by the local
    TorchServe launcher (:mod:`pt2aws.standins.ts_launcher`), neither of which pip-installs
    ``code/requirements.txt`` (the SageMaker toolkit does, which fails in a network-isolated
    endpoint).

    Raises:
        OSError: the file cannot be read.
        packaging.requirements.InvalidRequirement: a line is not a requirement.
    """
    from importlib import metadata

    from packaging.requirements import Requirement

    with open(path) as fh:
        lines = [ln.split("#")[0].strip() for ln in fh]
    unmet = []
    for line in filter(None, lines):
        req = Requirement(line)
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            unmet.append(line)
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            unmet.append(f"{line} (installed: {version})")
    return unmet


def load_handler(model_dir: str | os.PathLike, *, builtin: bool = True) -> ModuleType:
    """Import the inference handler for ``model_dir``, as the SageMaker PyTorch toolkit does.

    ``<model_dir>/code/$SAGEMAKER_PROGRAM`` (default ``inference.py``) when it exists, with
    ``code/`` put on ``sys.path`` for the handler's own modules (``pt2aws_windows.py``), as the
    container does; else :mod:`pt2aws.serving.handler`, the handler built into this package.
    The one way pt2aws loads a handler: the serving image's workers
    (:class:`ModelService`) and the offline archive check
    (:func:`pt2aws.aws.artifact.smoke_test_archive`, ``builtin=False``).

    Args:
        model_dir: the extracted model folder (``model.tar.gz``'s root).
        builtin: fall back to the built-in handler when the folder has none; False raises
            ``FileNotFoundError`` instead (an archive must carry its own).

    Raises:
        FileNotFoundError: no handler file in ``model_dir/code`` and ``builtin`` is False.
        AttributeError: the module lacks ``model_fn``, ``input_fn``, ``predict_fn`` or
            ``output_fn`` (``transform_fn`` handlers are not supported).
        Exception: whatever importing the module raises (e.g. ``ModuleNotFoundError`` for a
            package its ``requirements.txt`` names but this image lacks).
    """
    path = Path(model_dir) / "code" / os.environ.get("SAGEMAKER_PROGRAM", "inference.py")
    if path.is_file():
        if str(path.parent) not in sys.path:  # as the toolkit does: the handler's own modules
            sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location("inference", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["inference"] = module  # as the toolkit imports it, for pickling and logs
        spec.loader.exec_module(module)
        logger.info("handler: %s (from the model archive)", path)
    elif not builtin:
        raise FileNotFoundError(f"{path} missing: the archive carries no handler")
    else:
        from pt2aws.serving import handler as module

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
