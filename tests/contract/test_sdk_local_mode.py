"""The serving image driven by a client nobody here wrote: the SageMaker Python SDK's local mode.

SageMaker Python SDK v3 (``sagemaker==3.27.0``, ``sagemaker-core==2.27.0``): a
``sagemaker.core.local.LocalSession``, whose ``sagemaker_client`` takes the CreateModel,
CreateEndpointConfig and CreateEndpoint requests of the SageMaker API and whose
``sagemaker_runtime_client.invoke_endpoint`` is shaped like boto3's. What it does with them
(file:line in ``sagemaker/core/local/`` of that release):

* ``local_session.py:391`` create_endpoint -> ``entities.py:618`` ``_LocalEndpoint.serve`` ->
  ``image.py:328`` ``_SageMakerContainer.serve``: extracts the ``file://`` model.tar.gz into
  its own folder and mounts that folder at /opt/ml/model (``image.py:679``); writes a compose
  file (``image.py:706``, ``:811``): ``command: serve``, the request's ``Environment`` plus the
  session's AWS keys, ``ports: ["<local.serving_port>:8080"]``, network ``sagemaker-local``;
  runs ``docker compose`` (else ``docker-compose``) ``-f FILE up --build
  --abort-on-container-exit`` in a thread (``image.py:140``, ``:790``);
* ``entities.py:666``: ``GET http://<host>:<port>/ping`` every 5 s until 200 (120 s at most:
  ``entities.py:639`` reads ``local.health_check_timeout``, but the session's config schema
  refuses that key), the host from ``docker context inspect`` (``utils.py:154``: ``localhost``
  for a unix socket);
* ``local_session.py:498``: ``POST http://<host>:<port>/invocations``, the body with
  ``Content-type`` and ``Accept`` as given; answers ``{"Body", "ContentType",
  "ResponseMetadata": {"HTTPStatusCode"}}``, and, unlike boto3, raises nothing for a 4xx;
* ``local_session.py:423`` delete_endpoint: terminates Compose, which stops the container.

Compose and the Docker CLI reach podman's Docker-compatible API through ``DOCKER_HOST``
(:class:`podman_api.PodmanApiService`); no Docker engine runs here.

The requests are the ones notebook 03 sends for the project's image
(:func:`pt2aws.aws.deploy.requests` of its SDK shapes, ``image="custom"``, ml.c6i.xlarge: x86 like
this machine, so no Graviton fast-math settings), with three fields changed for local mode:
``Image`` (the local tag, not ECR), ``ModelDataUrl`` (``file://`` of a
:func:`pt2aws.aws.artifact.package` archive) and ``InstanceType`` (``local``). Local mode
ignores ``EnableNetworkIsolation`` and the role.

Not ``sagemaker.serve.ModelBuilder(mode=Mode.LOCAL_CONTAINER)``: it deploys the SDK's own
handler, not an image's. Its build calls STS (``model_builder_utils.py:2925``,
``default_bucket``), then, for TorchServe, replaces ``code/inference.py`` in the model folder
with the SDK's (which imports ``sagemaker.serve`` and unpickles ``code/serve.pkl``;
``model_server/torchserve/prepare.py:62``); it starts the container through docker-py with
host port 8080 fixed (``model_server/torchserve/server.py:37``) and then registers the
endpoint with ``LocalSession.create_endpoint`` (``serve/local_resources.py:357``), which starts
a second container through Compose on the same port.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from contract_cases import CASES, Answer, assert_correct, assert_same_answer, request
from podman_api import PodmanApiService, missing_clients
from podman_image import build_image, ensure_base_image, host_arch, image, missing_tools, podman

from pt2aws.processes import free_port

pytestmark = pytest.mark.container

REGION = "us-east-1"
#: Where notebook 03 would take the project's image from; local mode runs this checkout's image (``sdk_image``).
ECR_IMAGE = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/pt2aws-serving:test"
#: CreateModel needs a role; LocalSession does not use it.
ROLE_ARN = "arn:aws:iam::123456789012:role/pt2aws-sagemaker-execution"
NETWORK = "sagemaker-local"  # the SDK's compose network (image.py:764)
#: The SDK's only settings: telemetry off (each Create* call would then call an AWS host).
SDK_CONFIG = {
    "SchemaVersion": "1.0",
    "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}},
}
POSTS = [c for c in CASES if c.method == "POST" and c.path == "/invocations"]


@dataclasses.dataclass
class SdkEndpoint:
    """An endpoint the SDK's local mode serves; ``container`` is the podman container's name."""

    session: object  # sagemaker.core.local.LocalSession
    name: str
    port: int
    container: str
    requests: dict
    deleted: bool = False

    def invoke(self, body: bytes | None, content_type: str | None, accept: str | None) -> Answer:
        """One request through the SDK's runtime client, as the contract suite reads answers."""
        response = self.session.sagemaker_runtime_client.invoke_endpoint(
            Body=body or b"", EndpointName=self.name, ContentType=content_type, Accept=accept
        )
        return Answer(
            response["ResponseMetadata"]["HTTPStatusCode"],
            response["Body"].read(),
            response["ContentType"] or "",
        )

    def delete(self) -> None:
        """The SDK's DeleteEndpoint (once)."""
        if not self.deleted:
            self.deleted = True
            self.session.sagemaker_client.delete_endpoint(EndpointName=self.name)


@pytest.fixture(scope="module")
def sdk_image():
    why = missing_tools() or missing_clients()
    if why:
        pytest.skip(why)
    ensure_base_image(host_arch())
    build_image(host_arch())  # this checkout's image; only changed layers rebuild
    return image(host_arch())


@pytest.fixture(scope="module")
def podman_api(sdk_image, tmp_path_factory):
    """Podman's Docker API on a private socket, and ``DOCKER_HOST`` pointing at it."""
    service = PodmanApiService(tmp_path_factory.mktemp("podman-api")).start()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_HOST", service.docker_host)
        mp.setenv("COMPOSE_HTTP_TIMEOUT", "120")  # else the SDK sets it in os.environ for good
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata probe by boto
        yield service
    service.stop()


@pytest.fixture(scope="module")
def sdk_endpoint(sdk_image, podman_api, smoke_model_dir, tmp_path_factory):
    """The smoke model's archive deployed with the SDK's LocalSession, as notebook 03 deploys."""
    import boto3
    from sagemaker.core.local.local_session import LocalSession
    from sagemaker.core.shapes import ContainerDefinition, ProductionVariant

    from pt2aws.aws import deploy
    from pt2aws.aws.artifact import package

    work = tmp_path_factory.mktemp("sdk-local")
    archive = package(smoke_model_dir, work / "model" / "model.tar.gz")
    name = f"pt2aws-sdk-local-{int(time.time())}"
    container = ContainerDefinition(  # the shapes notebook 03 builds and sends with the SDK
        image=ECR_IMAGE,
        model_data_url=archive.resolve().as_uri(),
        environment=deploy.endpoint_environment("ml.c6i.xlarge", image="custom"),
    )
    variant = ProductionVariant(
        variant_name="AllTraffic", model_name=name, instance_type="ml.c6i.xlarge",
        initial_instance_count=1,
    )  # fmt: skip
    requests = deploy.requests(
        name, container, variant, role_arn=ROLE_ARN, network_isolation=False, tags=deploy.tags()
    )
    requests["CreateModel"]["PrimaryContainer"]["Image"] = sdk_image
    requests["CreateEndpointConfig"]["ProductionVariants"][0]["InstanceType"] = "local"

    session = LocalSession(
        boto_session=boto3.Session(region_name=REGION), sagemaker_config=SDK_CONFIG
    )
    port = free_port()
    session.config = {"local": {"serving_port": port, "container_root": str(work)}}
    had_network = podman("network", "exists", NETWORK, check=False).returncode == 0
    sm = session.sagemaker_client
    sm.create_model(**requests["CreateModel"])
    sm.create_endpoint_config(**requests["CreateEndpointConfig"])
    endpoint = SdkEndpoint(session, name, port, "", requests)
    try:
        sm.create_endpoint(**requests["CreateEndpoint"])  # returns once /ping answered 200
        endpoint.container = _container_named(_compose_service(name))
        yield endpoint
    finally:  # also after a failed start: Compose may have left the container behind
        service = _compose_service(name)
        endpoint.delete()
        if service:
            for container in _names(f"name=-{service}$"):
                podman("rm", "-f", container, check=False)
        if not had_network:
            podman("network", "rm", NETWORK, check=False)


def _compose_service(endpoint_name: str) -> str | None:
    """The Compose service (host) name the SDK gave the endpoint's container, if it got that far."""
    from sagemaker.core.local.local_session import LocalSagemakerClient

    local = LocalSagemakerClient._endpoints.get(endpoint_name)  # the SDK's registry (a dict)
    return local.container.hosts[0] if local is not None and local.container else None


def _names(podman_filter: str) -> list[str]:
    """Names of the containers (running or not) that match ``podman_filter``."""
    return podman("ps", "-a", "--filter", podman_filter, "--format", "{{.Names}}").stdout.split()


def _container_named(service: str) -> str:
    """The SDK names the container ``<10 random characters>-<service>`` (image.py:844)."""
    names = _names(f"name=-{service}$")
    assert len(names) == 1, names
    return names[0]


def test_sdk_deploys_the_image_with_the_notebook_requests(sdk_endpoint):
    sm = sdk_endpoint.session.sagemaker_client
    assert sm.describe_endpoint(EndpointName=sdk_endpoint.name)["EndpointStatus"] == "InService"
    info = json.loads(podman("inspect", sdk_endpoint.container).stdout)[0]
    env = dict(item.split("=", 1) for item in info["Config"]["Env"])
    sent = sdk_endpoint.requests["CreateModel"]["PrimaryContainer"]["Environment"]
    assert {k: env.get(k) for k in sent} == sent  # the request's Environment, all of it
    assert env["PT2AWS_VARIANT"] == "auto" and env["SAGEMAKER_MODEL_SERVER_WORKERS"] == "2"
    assert info["Config"]["Cmd"] == ["serve"]
    assert any(m["Destination"] == "/opt/ml/model" for m in info["Mounts"])
    logs = podman("logs", sdk_endpoint.container).stdout
    assert "model loaded and warmed up" in logs
    assert "serving variant eager (auto: the archive records no variant agreement" in logs


@pytest.mark.parametrize("case", POSTS, ids=[c.id for c in POSTS])
def test_sdk_client_gets_the_contract_answers(case, sdk_endpoint, torchserve_if_java):
    got = sdk_endpoint.invoke(case.body, case.content_type, case.accept)
    assert_correct(case, got)
    if torchserve_if_java is not None:  # without Java: correct, but not compared
        assert_same_answer(case, request(torchserve_if_java.port, case), got)


def test_pt2aws_endpoint_client_runs_over_the_sdk_runtime_client(sdk_endpoint):
    """Notebook 03's client (boto3-shaped) works with the SDK's local runtime client: chunked
    into requests of 2 texts, the answers are one request's (labels equal; scores to 1e-5, as
    padding differs between the batches)."""
    from pt2aws.aws.invoke import EndpointClient, request_body

    texts = ["great phone", "awful service", "", "the battery died", "love it"]
    client = EndpointClient(
        sdk_endpoint.name, client=sdk_endpoint.session.sagemaker_runtime_client, max_items=2
    )
    chunked = client.predict(texts)
    assert client.requests_sent == 3
    whole = sdk_endpoint.invoke(request_body(texts), "application/json", "application/json")
    assert whole.status == 200
    expected = json.loads(whole.body)
    assert [r["label"] for r in chunked] == [r["label"] for r in expected]
    assert chunked[2] == expected[2] == {"label": None, "score": None, "empty": True}
    for got, want in zip(chunked[:2] + chunked[3:], expected[:2] + expected[3:]):
        assert got["score"] == pytest.approx(want["score"], abs=1e-5)


def test_sdk_delete_endpoint_stops_the_container_cleanly(sdk_endpoint):
    sdk_endpoint.delete()
    state = {}
    for _ in range(40):  # Compose has stopped it when delete returns; allow podman a moment
        state = json.loads(podman("inspect", sdk_endpoint.container).stdout)[0]["State"]
        if not state["Running"]:
            break
        time.sleep(0.5)
    assert state["Running"] is False
    assert state["ExitCode"] == 0  # SIGTERM reached the server (exec-form ENTRYPOINT)
