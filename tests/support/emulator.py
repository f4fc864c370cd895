"""The AWS emulator's test companions (nothing of this ships in the package):

* :class:`StubModelServer`: a model server that records what ``InvokeEndpoint`` forwards;
  ``emulator.endpoints.server = served_by(stub.url)`` makes it answer every endpoint;
* :func:`served_in_process`: the archive's handler in this process answers (seconds, instead
  of the project's server as a subprocess);
* :func:`injected`: the next call(s) of a SageMaker operation fail with an AWS error code;
* :func:`deployed`: notebook 03's lifecycle in a ``with`` block that always deletes;
* :func:`seed_training_output`: a run folder where an emulated job's ``model.tar.gz`` belongs;
* :func:`training_jobs_take`: emulated training jobs stay ``InProgress`` a while.
"""

from __future__ import annotations

import contextlib
import json
import tarfile
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from pt2aws.aws import deploy, images, invoke
from pt2aws.emulator import patches
from pt2aws.emulator.server import run_folder_tarball

NOTHING = {"endpoints": [], "endpoint_configs": [], "models": [], "scalable_targets": []}


class _Server:
    """A ThreadingHTTPServer on a free port answering ``POST`` with ``answer(content_type,
    accept, body) -> (status, content_type, body)``."""

    def __init__(self, answer):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status, content_type, out = answer(
                    self.headers["Content-Type"], self.headers.get("Accept"), body
                )
                self.send_response(status)
                self.send_header("Content-Type", content_type or "text/plain")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/invocations"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class StubModelServer(_Server):
    """``{"inputs": [...]}`` -> ``[{"label": text, "score": 1.0}, ...]``; records every request;
    415 for anything but JSON, like the real handler."""

    def __init__(self):
        self.requests: list[tuple[str, bytes]] = []
        super().__init__(self._answer)

    def _answer(self, content_type, accept, body):
        self.requests.append((content_type, body))
        if content_type != "application/json":
            return 415, "text/plain", b"content type not supported; send application/json"
        texts = json.loads(body.decode("utf-8"))["inputs"]
        return (
            200,
            "application/json",
            json.dumps([{"label": t, "score": 1.0} for t in texts]).encode(),
        )


def served_by(url: str):
    """An ``EndpointServers.server`` answering every endpoint with the server at ``url``
    (``emulator.endpoints.server = served_by(url)``)."""

    @contextlib.contextmanager
    def model_server(archive, workdir, env):
        yield url, f"the server at {url} (every endpoint)"

    return model_server


def served_in_process():
    """An ``EndpointServers.server`` answering with the archive's handler in this process."""

    @contextlib.contextmanager
    def model_server(archive, workdir, env):
        from pt2aws.serving.server import ModelService

        model_dir = Path(workdir) / "model"
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(model_dir, filter="data")
        service = ModelService(model_dir)
        service.load()
        lock = threading.Lock()

        def answer(content_type, accept, body):
            with lock:  # one worker: one request at a time
                reply = service.invoke(body, content_type, accept)
            return reply.status, reply.content_type, reply.body

        server = _Server(answer)
        try:
            yield server.url, "the archive's handler in this Python process"
        finally:
            server.close()

    return model_server


#: Operations :func:`injected` can make fail -> (moto response class, its method).
FAULT_OPERATIONS = {
    "CreateModel": "create_model",
    "CreateEndpointConfig": "create_endpoint_config",
    "CreateEndpoint": "create_endpoint",
    "InvokeEndpoint": "invoke_endpoint",
    "CreateTrainingJob": "create_training_job",
}
_faults: dict[str, list] = {}
_installed: list[bool] = []


def _install_faults() -> None:
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.responses import SageMakerResponse
    from moto.sagemakerruntime.responses import SageMakerRuntimeResponse

    if _installed:
        return
    patches.apply()  # wrap the emulator's own patched handlers
    for operation, method in FAULT_OPERATIONS.items():
        cls = SageMakerRuntimeResponse if operation == "InvokeEndpoint" else SageMakerResponse
        original = getattr(cls, method)

        def wrapped(self, _original=original, _operation=operation):
            if _faults.get(_operation):
                code, message, status = _faults[_operation].pop(0)
                error = JsonRESTError(code, message)
                error.code = status
                raise error
            return _original(self)

        setattr(cls, method, wrapped)
    _installed.append(True)


@contextlib.contextmanager
def injected(operation: str, code: str = "ThrottlingException", message: str = "Rate exceeded",
             status: int = 400, times: int = 1):  # fmt: skip
    """The next ``times`` calls of ``operation`` fail with the AWS error ``code`` (until exit)."""
    if operation not in FAULT_OPERATIONS:
        raise ValueError(
            f"cannot inject a fault into {operation!r}; choose one of {FAULT_OPERATIONS}"
        )
    _install_faults()
    _faults[operation] = [(code, message, status)] * times
    try:
        yield
    finally:
        _faults[operation] = []


def denied_pass_role(role_arn: str, operation: str = "CreateModel"):
    """``operation`` answers what AWS answers a caller without ``iam:PassRole`` on the role."""
    message = (
        "User: arn:aws:sts::123456789012:assumed-role/analyst/alice is not authorized to perform:"
        f" iam:PassRole on resource: {role_arn}"
    )
    return injected(operation, "AccessDeniedException", message)


@contextlib.contextmanager
def deployed(session, model_data_url: str, name: str, *, instance_type=images.DEFAULT_INSTANCE_TYPE,
             image="dlc", image_uri="", autoscaling=None, extra_tags=None, timeout_s=120):  # fmt: skip
    """Notebook 03's lifecycle (the archive already uploaded): create model, endpoint config and
    endpoint with the SDK, wait, autoscale, yield; always delete. Yields an object with
    ``name``, ``requests``, ``cleanup``, ``endpoint`` (the SDK resource) and ``client(**kw)``."""
    from sagemaker.core.resources import Endpoint, EndpointConfig, Model
    from sagemaker.core.shapes import ContainerDefinition, ProductionVariant

    uri = images.serving_image(image, session.region, instance_type, image_uri=image_uri)
    environment = deploy.endpoint_environment(instance_type, image=image)
    container = ContainerDefinition(
        image=uri["image_uri"], model_data_url=model_data_url, environment=environment
    )
    variant = ProductionVariant(
        variant_name="AllTraffic", model_name=name, instance_type=instance_type,
        initial_instance_count=autoscaling["min_instances"] if autoscaling else 1,
    )  # fmt: skip
    tags = deploy.tags(extra_tags)
    role = session.require_role()
    out = types.SimpleNamespace()
    out.name, out.cleanup = (
        name,
        deploy.Cleanup(session, name, model_data_url, keep_model_data=True),
    )
    out.requests = deploy.requests(
        name, container, variant, role_arn=role, network_isolation=False, tags=tags
    )
    out.client = lambda **kw: invoke.EndpointClient(name, session, **kw)
    try:
        with out.cleanup:
            Model.create(model_name=name, primary_container=container, execution_role_arn=role,
                         tags=tags, **session.sdk)  # fmt: skip
            EndpointConfig.create(
                endpoint_config_name=name, production_variants=[variant], tags=tags, **session.sdk
            )
            out.endpoint = Endpoint.create(
                endpoint_name=name, endpoint_config_name=name, tags=tags, **session.sdk
            )
            out.endpoint.wait_for_status(target_status="InService", poll=1, timeout=timeout_s)
            if autoscaling:
                deploy.enable_autoscaling(session, name, **autoscaling)
        yield out
    finally:
        out.cleanup.delete()


def seed_training_output(session, model_artifact_s3: str, train_dir) -> int:
    """Upload ``train_dir`` as a job's ``model.tar.gz`` to ``model_artifact_s3``; its size."""
    body = run_folder_tarball(Path(train_dir))
    bucket, key = model_artifact_s3.removeprefix("s3://").split("/", 1)
    session.client("s3").put_object(Bucket=bucket, Key=key, Body=body)
    return len(body)


@contextlib.contextmanager
def training_jobs_take(seconds: float):
    """Emulated training jobs stay ``InProgress`` ``seconds`` (moto creates them ``Completed``)."""
    from moto.sagemaker import models
    from moto.sagemaker.responses import SageMakerResponse

    patches.apply()  # wrap the emulator's own DescribeTrainingJob
    init, describe = models.FakeTrainingJob.__init__, SageMakerResponse.describe_training_job

    def job_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.training_job_status, self.secondary_status = "InProgress", "Training"
        self.done_at = time.time() + seconds

    def describe_training_job(self):
        job = self.sagemaker_backend.training_jobs.get(self._get_param("TrainingJobName"))
        if job and job.training_job_status == "InProgress" and time.time() >= job.done_at:
            job.training_job_status = job.secondary_status = "Completed"
        return describe(self)

    models.FakeTrainingJob.__init__ = job_init
    SageMakerResponse.describe_training_job = describe_training_job
    try:
        yield
    finally:
        models.FakeTrainingJob.__init__ = init
        SageMakerResponse.describe_training_job = describe
