"""What answers an emulated endpoint: the project's server for its archive on this machine,
started in the background as ``CreateEndpoint`` starts an instance."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

logger = logging.getLogger(__name__)


class EndpointServers:
    """One :meth:`server` per emulated endpoint (files in ``<workdir>/<endpoint>/``)."""

    def __init__(self, workdir: str | Path | None = None):
        self._tmp = None if workdir else tempfile.mkdtemp(prefix="pt2aws-endpoints-")
        self.workdir = Path(workdir or self._tmp)
        self._served: dict[str, tuple[str, contextlib.ExitStack] | None] = {}  # None: starting
        self.history: dict[str, str] = {}  # endpoint -> what answered it (kept after deletion)
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def server(self, archive: Path, workdir: Path, env: dict[str, str]):
        """Yields ``(invocations URL, what it is in words)`` of the project's server for ``archive``
        once ``/ping`` answers (tests set another ``server``)."""
        from pt2aws.serving.local import LocalServer

        with LocalServer(archive, workdir / "serve", env=env) as server:
            words = "the project's server on this machine (pt2aws.serving.server, 127.0.0.1)"
            yield f"{server.url}/invocations", words

    def create(self, endpoint, container: dict, s3) -> None:
        """Serve moto's ``endpoint`` (``Creating``, then ``InService`` or ``Failed``) from
        ``container``'s archive in ``s3`` (moto's backend) in the background; only ``PT2AWS_*``
        settings pass (this is no instance)."""
        env = container.get("Environment") or {}
        env = {k: v for k, v in env.items() if k.startswith("PT2AWS_")}
        endpoint.endpoint_status = "Creating"
        with self._lock:
            self._served[endpoint.endpoint_name] = None
        url = container.get("ModelDataUrl", "")
        threading.Thread(target=self._start, args=(endpoint, url, env, s3), daemon=True).start()

    def _start(self, endpoint, archive_url: str, env: dict, s3) -> None:
        name, stack = endpoint.endpoint_name, contextlib.ExitStack()
        try:
            found = s3.get_object(*archive_url[5:].split("/", 1))
            if found is None:
                raise FileNotFoundError(f"{archive_url} does not exist in the emulated S3")
            folder = self.workdir / name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "model.tar.gz").write_bytes(found.value)
            url, source = stack.enter_context(self.server(folder / "model.tar.gz", folder, env))
        except Exception as err:  # noqa: BLE001 - becomes the endpoint's FailureReason
            stack.close()
            logger.warning("emulated endpoint %s failed to start: %s", name, err)
            reason = f"the serving software did not start on this machine: {str(err)[-1500:]}"
            endpoint.endpoint_status, endpoint.failure_reason = "Failed", reason
            return
        with self._lock:
            self.history[name] = source
            kept = name in self._served  # not deleted while starting
            if kept:
                self._served[name] = (url, stack)
        if not kept:
            stack.close()
        endpoint.endpoint_status = "InService"

    def invoke(self, name: str, body: bytes, asked: dict):
        """``(status, content_type, body)`` from ``name``'s server (``asked``: headers), or None."""
        served = self._served.get(name)
        if served is None:
            return None
        headers = {k: asked.get(k) or "application/json" for k in ("Content-Type", "Accept")}
        request = urllib.request.Request(served[0], data=body, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return 200, response.headers.get("Content-Type"), response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.headers.get("Content-Type"), err.read()

    def delete(self, name: str) -> None:
        """Stop ``name``'s server (``DeleteEndpoint``)."""
        with self._lock:
            served = self._served.pop(name, None)
        if served is not None:
            served[1].close()

    def close(self) -> None:
        """Stop every server (and remove the temporary folder, if this made one)."""
        for name in list(self._served):
            self.delete(name)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
