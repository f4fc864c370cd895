"""Start the SageMaker PyTorch serving stack (toolkit + TorchServe) on 127.0.0.1, without Docker.

Run by :class:`pt2aws.standins.torchserve.LocalEndpoint` as ``python ts_launcher.py`` with the
container's environment (``SAGEMAKER_BASE_DIR``, ``SAGEMAKER_BIND_TO_PORT``, ...) and
``PT2AWS_TS_LAUNCH`` (JSON: ``config_file``, ``management_port``, ``metrics_port``,
``grpc_inference_port``, ``grpc_management_port``). Needs the ``serve`` extra, and pt2aws for
:func:`pt2aws.serving.service.unmet_requirements` (the launcher runs with this project's Python).

It calls the toolkit's own ``start_torchserve`` (what the container's entry point runs) with four
changes, each needed outside the container (see docs/stack notes, section 8A):

* the TorchServe config file goes to ``config_file`` instead of ``/etc/sagemaker-ts.properties``
  (not writable here);
* every address binds 127.0.0.1 instead of 0.0.0.0, and the management, metrics and gRPC ports
  are free ones instead of the fixed 8080/8082/7070/7071 (several servers can run side by side);
* the toolkit's look-up of "the" TorchServe process accepts the one that uses our config file
  (the toolkit refuses to run when it sees any other TorchServe on the machine);
* ``code/requirements.txt`` is checked, not pip-installed, when everything in it is already
  installed (it is in this project's environment): installing would change a shared virtualenv.
"""

from __future__ import annotations

import json
import os
import re
import sys

from pt2aws.serving.service import unmet_requirements


def main() -> None:
    cfg = json.loads(os.environ["PT2AWS_TS_LAUNCH"])
    import psutil
    from retrying import retry
    from sagemaker_inference import model_server
    from sagemaker_pytorch_serving_container import handler_service
    from sagemaker_pytorch_serving_container import torchserve as ts

    ts.TS_CONFIG_FILE = cfg["config_file"]
    generate = ts._generate_ts_config_properties

    def _properties(handler: str) -> str:
        text = generate(handler).replace("0.0.0.0", "127.0.0.1")
        text = re.sub(
            r"(?m)^management_address=.*$",
            f"management_address=http://127.0.0.1:{cfg['management_port']}",
            text,
        )
        return text + (
            f"metrics_address=http://127.0.0.1:{cfg['metrics_port']}\n"
            f"grpc_inference_address=127.0.0.1\n"
            f"grpc_management_address=127.0.0.1\n"
            f"grpc_inference_port={cfg['grpc_inference_port']}\n"
            f"grpc_management_port={cfg['grpc_management_port']}\n"
        )

    ts._generate_ts_config_properties = _properties

    @retry(stop_max_delay=30 * 1000)
    def _our_server():
        for proc in psutil.process_iter():
            try:
                cmdline = proc.cmdline()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if ts.TS_NAMESPACE in cmdline and cfg["config_file"] in cmdline:
                print(f"pt2aws: TorchServe java pid {proc.pid}", flush=True)
                return proc
        raise RuntimeError("TorchServe did not start")

    ts._retrieve_ts_server_process = _our_server

    requirements = model_server.REQUIREMENTS_PATH
    if os.path.exists(requirements) and not unmet_requirements(requirements):
        print(f"pt2aws: {requirements} already satisfied; not pip-installing", flush=True)
        model_server.REQUIREMENTS_PATH = requirements + ".satisfied"  # the toolkit skips it
        ts.model_server.REQUIREMENTS_PATH = model_server.REQUIREMENTS_PATH
    ts.start_torchserve(handler_service=handler_service.__file__)


if __name__ == "__main__":
    sys.exit(main())
