"""The project's own serving image's server, run on 127.0.0.1 like :class:`LocalEndpoint`.

:class:`AsgiEndpoint` starts ``python -m pt2aws.serving.server serve`` (the entry point of the
serving image in ``container/``) for a ``model.tar.gz`` or a model folder, as a subprocess in
its own process group, and is ready when ``GET /ping`` answers 200, which this server does only
after the model has loaded and answered a warm-up request. Everything else (the extracted model
in ``workdir/model``, the log in ``workdir/server.log``, :meth:`invoke`, :meth:`stop`) is
:class:`~pt2aws.standins.torchserve.LocalEndpoint`'s. No Java needed: Starlette + uvicorn only.
"""

from __future__ import annotations

import importlib.util
import sys

from pt2aws.standins.torchserve import LocalEndpoint


class AsgiEndpoint(LocalEndpoint):
    """The Starlette/uvicorn server of the serving image on 127.0.0.1 (same arguments as
    :class:`~pt2aws.standins.torchserve.LocalEndpoint`)."""

    @staticmethod
    def missing() -> str | None:
        """Why this server cannot start here (starlette or uvicorn missing), or None."""
        for module, package in (("starlette", "starlette"), ("uvicorn", "uvicorn")):
            if importlib.util.find_spec(module) is None:
                return f"{package} is missing: pip install -e '.[serve]'"
        return None

    def _launch_spec(self) -> tuple[list[str], dict[str, str]]:
        cmd = [sys.executable, "-m", "pt2aws.serving.server", "serve", "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--model-dir", str(self.workdir / "model")]
        return cmd, {"SAGEMAKER_MODEL_SERVER_WORKERS": str(self.workers)}

    def workers_ready(self) -> bool:
        """Always True: this server's ``/ping`` is 200 only once every worker answered."""
        return True
