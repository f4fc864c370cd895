"""Tests of :mod:`pt2aws.aws.endpoint`: ``deploy_on``, on the emulator."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pt2aws.aws import artifact, endpoint, hosting, images
from pt2aws.standins.aws_emulator import EMULATOR_ROLE_ARN, RoleError

TEXTS = ["I love it", "I hate it", "café ☕"]


PREDICTIONS = [
    {"label": "positive", "score": 0.9},
    {"label": "negative", "score": 0.8},
    {"label": "positive", "score": 0.6},
]


def canned_server(answer: list[dict], seen: list[bytes]):
    """A ``local_server`` callable: ``POST /invocations`` answers ``answer``, records bodies."""

    @contextlib.contextmanager
    def start(archive, workdir):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                seen.append(self.rfile.read(int(self.headers["Content-Length"])))
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.url = f"http://127.0.0.1:{server.server_address[1]}"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield server
        finally:
            server.shutdown()
            server.server_close()

    return start


@pytest.fixture(scope="module")
def archive(smoke_model_dir, tmp_path_factory):
    return artifact.package(smoke_model_dir, tmp_path_factory.mktemp("deploy") / "model.tar.gz")


CUSTOM = "123456789012.dkr.ecr.us-east-1.amazonaws.com/pt2aws-serve:2026.12"


def _s3_object_exists(url: str) -> bool:
    from botocore.exceptions import ClientError

    from pt2aws.aws.session import boto_session
    from pt2aws.standins.aws_emulator import Emulator

    bucket, key = url.removeprefix("s3://").split("/", 1)
    with Emulator():  # moto keeps its state in this process
        try:
            boto_session("us-east-1").client("s3").head_object(Bucket=bucket, Key=key)
        except ClientError:
            return False
    return True


def test_deploy_on_emulator_answers_from_the_chosen_server(archive, tmp_path):
    seen: list[bytes] = []
    result = endpoint.deploy_on(
        "emulator",
        archive,
        endpoint.DeploySettings(name_prefix="pt2aws-t", progress=False),
        texts=TEXTS,
        local_predictions=PREDICTIONS,
        workdir=tmp_path / "serve",
        local_server=canned_server(PREDICTIONS, seen),
    )
    assert result["target"] == "emulator" and result["region"] == "us-east-1"
    assert result["image_uri"] == images.inference_image_uri("us-east-1")
    assert result["answer"] == PREDICTIONS and result["matches_local"] is True
    assert result["answer_source"] == "local server (start)"
    assert [json.loads(b)["inputs"] for b in seen] == [TEXTS]  # one request, UTF-8 texts
    assert result["archive_valid"] is True and result["archive_bytes"] == archive.stat().st_size
    name = result["endpoint_name"]
    assert name.startswith("pt2aws-t-20")
    assert result["model_data_url"] == (
        f"s3://sagemaker-us-east-1-123456789012/pt2aws/{name}/model.tar.gz"
    )
    assert [k for k, _ in result["created"]] == ["model", "endpoint_config", "endpoint"]
    assert sorted(k for k, _ in result["deleted"]) == ["endpoint", "endpoint_config", "model"]
    assert result["resources_left"] == 0
    assert result["image"] == "dlc" and result["image_support"]["end_of_patch"] == "2026-06-30"
    assert result["image_support"]["past"] is True
    assert result["model_data_deleted"] is True and "load_test" not in result
    assert json.loads(json.dumps(result)) == result  # JSON-ready for deploy.json


def test_requests_shown_are_the_requests_sent(archive, tmp_path):
    settings = endpoint.DeploySettings(name_prefix="pt2aws-r", progress=False)
    result = endpoint.deploy_on(
        "emulator", archive, settings, texts=TEXTS, local_server=False, workdir=tmp_path
    )
    shown = endpoint.sagemaker_requests(
        settings,
        "us-east-1",
        name=result["endpoint_name"],
        model_data_url=result["model_data_url"],
        role_arn=EMULATOR_ROLE_ARN,
    )
    sent = result["requests"]
    for requests in (shown, sent):  # the creation time stamp differs by design
        for request in requests.values():
            request["Tags"] = [t for t in request["Tags"] if t["Key"] != "pt2aws:created-at"]
    assert shown == sent
    assert set(sent) == {"CreateModel", "CreateEndpointConfig", "CreateEndpoint"}
    container = sent["CreateModel"]["PrimaryContainer"]
    assert container["Environment"]["SAGEMAKER_MODEL_SERVER_WORKERS"] == "4"
    assert sent["CreateEndpointConfig"]["ProductionVariants"][0]["InstanceType"] == "ml.c7g.xlarge"
    # no Java / local_server=False: the emulator replays the in-process handler's answer
    assert result["answer_source"] == "replayed handler output (local_server=False)"
    assert result["answer"] == result["local_predictions"] and result["matches_local"] is True


def test_aws_without_role_fails_before_any_aws_call(archive, monkeypatch):
    import botocore.client

    def no_aws(*a, **k):
        raise AssertionError("an AWS call was made")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", no_aws)
    with pytest.raises(RoleError, match="needs ROLE_ARN"):
        endpoint.deploy_on(
            "aws",
            archive,
            endpoint.DeploySettings(region="eu-west-1"),
            texts=TEXTS,
            local_predictions=PREDICTIONS,
        )
    with pytest.raises(images.ImageSelectionError, match="x86_64 but ml.c7g.xlarge"):
        endpoint.deploy_on(
            "aws",
            archive,
            endpoint.DeploySettings(
                region="eu-west-1",
                role_arn="arn:aws:iam::1:role/r",
                image_uri="1.dkr.ecr.eu-west-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312",
            ),
            texts=TEXTS,
            local_predictions=PREDICTIONS,
        )


def test_failed_endpoint_is_cleaned_up_and_reraised(archive, tmp_path, monkeypatch, caplog):
    def failed(name, region, **kwargs):
        raise hosting.DeploymentError(f"endpoint {name} is Failed: image pull denied")

    monkeypatch.setattr(hosting, "wait_for_endpoint", failed)
    with caplog.at_level("INFO", logger="pt2aws.aws"):
        with pytest.raises(hosting.DeploymentError, match="image pull denied"):
            endpoint.deploy_on(
                "emulator",
                archive,
                endpoint.DeploySettings(name_prefix="pt2aws-f", progress=False),
                texts=TEXTS,
                local_predictions=PREDICTIONS,
                local_server=False,
                workdir=tmp_path,
            )
    (deleted,) = [r.args[0] for r in caplog.records if r.msg == "deleted %s"]
    assert sorted(k for k, _ in deleted) == ["endpoint", "endpoint_config", "model"]
    (left,) = [r for r in caplog.records if r.msg.startswith("deploy failed")]
    assert "0 resources left" in left.getMessage()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"instance_type": "ml.c99g.xlarge"}, "not a SageMaker real-time hosting"),
        ({"name_prefix": "my_model"}, "letters, digits and single hyphens"),
        ({"max_payload_bytes": 7_000_000}, "real-time limit"),
    ],
)
def test_settings_are_checked_offline(kwargs, message):
    with pytest.raises(ValueError, match=message):
        endpoint.DeploySettings(**kwargs)


def test_custom_image_with_network_isolation_and_a_bounded_load_test(archive, tmp_path):
    seen: list[bytes] = []
    settings = endpoint.DeploySettings(
        image="custom",
        image_uri=CUSTOM,
        network_isolation=True,
        load_test_requests=12,
        load_test_seconds=30,
        name_prefix="pt2aws-c",
        progress=False,
    )
    result = endpoint.deploy_on(
        "emulator",
        archive,
        settings,
        texts=TEXTS,
        local_predictions=PREDICTIONS,
        workdir=tmp_path,
        local_server=canned_server(PREDICTIONS, seen),
    )
    model = result["requests"]["CreateModel"]
    assert model["PrimaryContainer"]["Image"] == CUSTOM and model["EnableNetworkIsolation"] is True
    assert result["image"] == "custom" and result["image_support"]["image"] == "custom"
    load = result["load_test"]
    assert (load["requests"], load["errors"], load["stopped_by"]) == (12, 0, "requests")
    assert load["concurrency"] == 4  # one request in flight per model-server worker
    assert len(seen) == 1 + 12 and load["latency_ms"]["p99"] > 0
    assert result["model_data_deleted"] is True
    assert not _s3_object_exists(result["model_data_url"])
    shown = endpoint.format_result(result)
    assert "load test: 12 requests (0 failed)" in shown and f"image (custom) {CUSTOM}" in shown


def test_model_data_is_kept_when_asked(archive, tmp_path):
    result = endpoint.deploy_on(
        "emulator",
        archive,
        endpoint.DeploySettings(keep_model_data=True, name_prefix="pt2aws-k", progress=False),
        texts=TEXTS,
        local_predictions=PREDICTIONS,
        local_server=False,
        workdir=tmp_path,
    )
    assert result["model_data_deleted"] is False and result["resources_left"] == 0
    assert _s3_object_exists(result["model_data_url"])


def test_image_choice_is_checked_offline():
    with pytest.raises(ValueError, match="network_isolation needs image='custom'"):
        endpoint.DeploySettings(network_isolation=True)
    with pytest.raises(ValueError, match="image must be one of"):
        endpoint.DeploySettings(image="ubuntu")
    with pytest.raises(images.ImageSelectionError, match="not a private ECR image URI"):
        endpoint.DeploySettings(image="custom")
    with pytest.raises(images.ImageSelectionError, match="is in us-east-1 but the endpoint"):
        endpoint.DeploySettings(image="custom", image_uri=CUSTOM, region="eu-west-1")


def test_custom_image_is_answered_by_the_serving_image_server(smoke_model_dir, tmp_path):
    """On the emulator, InvokeEndpoint of a custom-image endpoint reaches the project's own
    Starlette/uvicorn server (what container/Dockerfile starts), not TorchServe."""
    from pt2aws.aws import artifact

    archive = artifact.package(smoke_model_dir, tmp_path / "model.tar.gz")
    local = artifact.smoke_test_archive(archive, TEXTS)
    settings = endpoint.DeploySettings(
        image="custom", image_uri=CUSTOM, name_prefix="pt2aws-asgi", progress=False
    )
    result = endpoint.deploy_on(
        "emulator", archive, settings, texts=TEXTS, local_predictions=local, workdir=tmp_path / "s"
    )
    assert result["answer_source"].startswith("local serving image server")
    assert result["matches_local"] is True and result["resources_left"] == 0
