"""What answers an emulated endpoint: its image's serving software, started by CreateEndpoint.

On AWS, ``CreateEndpoint`` starts an instance that pulls the model's image, downloads its
``ModelDataUrl`` and starts the serving software; the endpoint turns ``InService`` once that
answers. :class:`EndpointServers` does the same on this machine for the emulator
(:mod:`pt2aws.emulator.server`, patch 3 of :mod:`pt2aws.emulator.patches`): the model
archive is read from the emulated S3, and in a background thread one of these starts:

* ``"torchserve"``: an AWS DLC image: the SageMaker PyTorch toolkit + TorchServe
  (:class:`pt2aws.standins.torchserve.LocalEndpoint`; needs Java 17);
* ``"asgi"``: any other image, i.e. the project's own serving image: its Starlette server
  (:class:`pt2aws.standins.asgi_local.AsgiEndpoint`);
* ``"in_process"``: when that software cannot run here (no Java), or when asked: the archive's
  handler in this Python process (:class:`pt2aws.serving.service.ModelService`), one request at
  a time.

Meanwhile the emulated endpoint is ``Creating``; then ``InService``, or ``Failed`` with the
server's log tail as ``FailureReason``. ``DeleteEndpoint`` stops the server. Everything runs on
this machine's Python and torch, not the image's.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tarfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

#: How endpoints are answered: their image's serving software ("auto"), the archive's handler in
#: this process ("in_process"), or moto's canned answers ("canned": nothing is started).
MODES = ("auto", "in_process", "canned")


@dataclass
class _Served:
    """One endpoint's server (or in-process service) and what it is, in words."""

    name: str
    source: str = "starting"
    url: str | None = None
    service: object | None = None
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    lock: threading.Lock = field(default_factory=threading.Lock)
    deleted: bool = False


def _extract(archive: bytes, dest: Path) -> Path:
    """Extract ``model.tar.gz`` bytes into ``dest`` (tarfile's ``data`` filter)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
    return dest


class EndpointServers:
    """The model servers of the emulated endpoints, one per endpoint.

    Args:
        mode: one of :data:`MODES`.
        workdir: folder for each endpoint's files (``<workdir>/<endpoint>/``).
    """

    def __init__(self, mode: str = "auto", workdir: str | Path | None = None):
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: choose one of {', '.join(MODES)}")
        import tempfile

        self.mode = mode
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="pt2aws-endpoints-"))
        self._served: dict[str, _Served] = {}
        self.history: dict[str, str] = {}  # endpoint -> what answered it (kept after deletion)

    @property
    def active(self) -> bool:
        """False in ``"canned"`` mode: endpoints are left to moto."""
        return self.mode != "canned"

    def create(
        self,
        name: str,
        *,
        image: str,
        environment: dict[str, str],
        fetch: Callable[[], bytes],
        done: Callable[[str | None], None],
    ) -> None:
        """Start serving ``name`` in a background thread; ``done(None)`` once it answers, or
        ``done(reason)`` when it could not start.

        Args:
            name: the endpoint.
            image: the model's image URI (an AWS DLC: TorchServe; another: the ASGI server).
            environment: the model's container environment (its ``PT2AWS_*`` settings are
                passed on; the instance's thread settings are not: this machine is not it).
            fetch: returns the ``model.tar.gz`` bytes from the emulated S3.
            done: called with None (``InService``) or the failure reason (``Failed``).
        """
        served = _Served(name)
        self._served[name] = served
        env = {k: v for k, v in environment.items() if k.startswith("PT2AWS_")}
        thread = threading.Thread(
            target=self._start,
            args=(served, image, env, fetch, done),
            name=f"pt2aws-endpoint-{name}",
            daemon=True,
        )
        thread.start()

    def _start(self, served: _Served, image: str, env: dict, fetch, done) -> None:
        from pt2aws.aws.images import is_aws_dlc

        folder = self.workdir / served.name
        try:
            archive = folder / "model.tar.gz"
            folder.mkdir(parents=True, exist_ok=True)
            archive.write_bytes(fetch())
            kind = "torchserve" if is_aws_dlc(image) else "asgi"
            missing = None if self.mode == "in_process" else self._missing(kind)
            if missing is None and self.mode == "auto":
                self._start_server(served, kind, archive, folder, env)
            else:
                self._start_in_process(served, archive, folder, env, missing)
        except Exception as err:  # noqa: BLE001 - becomes the endpoint's FailureReason
            logger.warning("emulated endpoint %s failed to start: %s", served.name, err)
            self.delete(served.name)
            done(f"the serving software did not start on this machine: {str(err)[-1500:]}")
            return
        self.history[served.name] = served.source
        if served.deleted:  # deleted while starting
            served.stack.close()
            return
        done(None)

    @staticmethod
    def _missing(kind: str) -> str | None:
        if kind == "torchserve":
            from pt2aws.standins.torchserve import LocalEndpoint

            return LocalEndpoint.missing()
        from pt2aws.standins.asgi_local import AsgiEndpoint

        return AsgiEndpoint.missing()

    def _start_server(self, served: _Served, kind, archive: Path, folder: Path, env) -> None:
        server = served.stack.enter_context(
            local_model_server(archive, folder / "serve", env=env, server=kind)
        )
        served.url = f"{server.url}/invocations"
        served.source = {
            "torchserve": "the AWS DLC's serving software on this machine (SageMaker PyTorch "
            "toolkit + TorchServe, 127.0.0.1)",
            "asgi": "the project's serving image's server on this machine (pt2aws.serving.server,"
            " Starlette + uvicorn, 127.0.0.1)",
        }[kind]
        logger.info("emulated endpoint %s: %s at %s", served.name, kind, served.url)

    @staticmethod
    def _start_in_process(served: _Served, archive: Path, folder: Path, env, missing) -> None:
        import os

        from pt2aws.serving.service import ModelService

        model_dir = _extract(archive.read_bytes(), folder / "model")
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            service = ModelService(model_dir)
            service.load()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        served.service = service
        why = f" ({missing})" if missing else ""
        served.source = f"the archive's handler in this Python process{why}"

    def invoke(self, name: str, body: bytes, content_type: str | None, accept: str | None):
        """Answer one ``InvokeEndpoint``: ``(status, content_type, body)`` from the endpoint's
        server, or None when nothing serves ``name`` (moto answers then)."""
        served = self._served.get(name)
        if served is None or (served.url is None and served.service is None):
            return None
        if served.url:
            return _post(served.url, body, content_type, accept)
        with served.lock:  # one worker: one request at a time
            reply = served.service.invoke(body, content_type, accept)
        return reply.status, reply.content_type, reply.body

    def answered_by(self, name: str) -> str:
        """What answered (or answers) ``name``, in words."""
        served = self._served.get(name)
        if served is not None and served.source != "starting":
            return served.source
        return self.history.get(name, "moto's canned answer (no model server)")

    def delete(self, name: str) -> None:
        """Stop ``name``'s server (``DeleteEndpoint``)."""
        served = self._served.pop(name, None)
        if served is not None:
            served.deleted = True
            served.stack.close()

    def close(self) -> None:
        """Stop every server."""
        for name in list(self._served):
            self.delete(name)


@contextlib.contextmanager
def local_model_server(
    model,
    workdir,
    *,
    attempts: int = 3,
    env: dict[str, str] | None = None,
    server: str = "torchserve",
):
    """Start a local model server to answer the emulator's invocations.

    Each attempt takes fresh free ports: the ports are picked before TorchServe binds them, so on
    a busy machine another process can take one in between ("Address already in use"); that
    attempt fails and the next one usually succeeds. Stops the server on exit.

    Args:
        model: ``model.tar.gz`` or a model folder.
        workdir: folder for the server's files (``workdir``, then ``workdir-retry2`` ...).
        attempts: starts to try.
        env: extra server environment (e.g. ``{"PT2AWS_MAX_BATCH": "64"}``).
        server: ``"torchserve"`` (:class:`pt2aws.standins.torchserve.LocalEndpoint`: the AWS DLC's
            serving stack) or ``"asgi"`` (:class:`pt2aws.standins.asgi_local.AsgiEndpoint`: the
            project's serving image's server).

    Yields:
        The running endpoint (``.url``, ``.startup_s``).

    Raises:
        pt2aws.standins.torchserve.LocalEndpointError: every attempt failed (the last error).
    """
    from pt2aws.standins.torchserve import LocalEndpoint, LocalEndpointError

    if server == "asgi":  # imported only when asked: it subclasses LocalEndpoint at import
        from pt2aws.standins.asgi_local import AsgiEndpoint as endpoint_class
    else:
        endpoint_class = LocalEndpoint
    last = None
    for attempt in range(1, attempts + 1):
        folder = Path(workdir) if attempt == 1 else Path(f"{workdir}-retry{attempt}")
        endpoint = endpoint_class(model, folder, env=env)
        try:
            endpoint.start()
        except LocalEndpointError as err:
            last = err
            logger.warning(
                "local model server attempt %d/%d failed: %s", attempt, attempts, str(err)[:300]
            )
            continue
        try:
            yield endpoint
        finally:
            endpoint.stop()
        return
    raise last


def _post(url: str, body: bytes, content_type: str | None, accept: str | None):
    """POST ``body`` to a model server; ``(status, content_type, body)`` of its answer."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": content_type or "application/json",
            "Accept": accept or "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return 200, response.headers.get("Content-Type", "application/json"), response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type"), err.read()
