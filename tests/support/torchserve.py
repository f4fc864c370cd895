"""The AWS DLC's serving stack on 127.0.0.1: the SageMaker PyTorch toolkit 2.0.25 + TorchServe
0.12.0 + Java 17, serving a ``model.tar.gz`` as the container does (stack notes, section 8A).
The contract suite's reference (``torchserve`` in tests/conftest.py); only tests use it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from pt2aws.processes import free_port
from pt2aws.serving.local import LocalServer

LAUNCHER = Path(__file__).with_name("ts_launcher.py")


def torchserve_missing() -> str | None:
    """Why TorchServe cannot run here (Java or the ``serve`` extra missing), or None."""
    if shutil.which("java") is None:
        return "Java is not installed: apt-get install openjdk-17-jre-headless"
    for module in (
        "ts",
        "sagemaker_pytorch_serving_container",
        "sagemaker_inference",
        "pkg_resources",
    ):
        if importlib.util.find_spec(module) is None:
            return f"{module} is missing: pip install -e '.[serve]'"
    return None


class TorchServe(LocalServer):
    """:class:`~pt2aws.serving.local.LocalServer`'s lifecycle around the toolkit's own
    ``start_torchserve`` (``ts_launcher.py``): ports are free ones picked here, TorchServe's
    config, logs and temp files stay in ``workdir``; healthy once its worker is ``READY``."""

    def launch(self, model_dir: Path) -> list[str]:
        assert model_dir == self.workdir / "model", "TorchServe serves an extracted model.tar.gz"
        self.port, self.management_port = free_port(), free_port()
        tmp = tempfile.mkdtemp(prefix="pt2aws-ts-", dir="/tmp")  # short: a Unix socket lives here
        ports = {"management_port": self.management_port, "metrics_port": free_port(),
                 "grpc_inference_port": free_port(), "grpc_management_port": free_port()}  # fmt: skip
        self.env.update(
            SAGEMAKER_BASE_DIR=str(self.workdir), SAGEMAKER_BIND_TO_PORT=str(self.port),
            SAGEMAKER_MODEL_SERVER_WORKERS=str(self.workers), SAGEMAKER_PROGRAM="inference.py",
            LOG_LOCATION=str(self.workdir / "logs"), METRICS_LOCATION=str(self.workdir / "logs"),
            TEMP=tmp, TMPDIR=tmp,
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            PT2AWS_TS_LAUNCH=json.dumps({"config_file": str(self.workdir / "ts.properties"), **ports}),
        )  # fmt: skip
        return [sys.executable, str(LAUNCHER)]

    def ping(self) -> bool:
        """``/ping`` is 200 once the frontend runs; the worker loads the model seconds later."""
        if not super().ping():
            return False
        port, self.port = self.port, self.management_port
        try:
            answer = self.request("GET", "/models/model", timeout_s=5)
            workers = json.loads(answer.body)[0]["workers"] if answer.status == 200 else []
        except (OSError, ValueError, KeyError, IndexError):
            workers = []
        finally:
            self.port = port
        return sum(w.get("status") == "READY" for w in workers) >= self.workers

    def stop(self) -> int | None:
        code = super().stop()
        shutil.rmtree(self.env.get("TMPDIR", "/nonexistent"), ignore_errors=True)
        return code
