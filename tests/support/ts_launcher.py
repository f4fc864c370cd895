"""Start the SageMaker PyTorch toolkit + TorchServe on 127.0.0.1 without Docker (run by
:class:`support.torchserve.TorchServe` with the container's environment and ``PT2AWS_TS_LAUNCH``:
JSON ``config_file`` and the four extra ports). The toolkit's own ``start_torchserve`` with four
changes needed outside the container (stack notes, section 8A): the config file in a writable
place; every address on 127.0.0.1 and free ports (servers side by side); its look-up of "the"
TorchServe process accepts ours; ``code/requirements.txt`` checked, not pip-installed."""

from __future__ import annotations

import json
import os
import re
import sys

from pt2aws.serving.server import unmet_requirements


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
