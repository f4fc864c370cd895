"""The serving image, built here and run as SageMaker runs it, against the same contract cases.

Builds ``container/Dockerfile`` (linux/amd64 on this machine) with podman, starts
``<image> serve`` with the smoke model read-only at /opt/ml/model and port 8080 published on
127.0.0.1, and checks every case in ``contract_cases`` against TorchServe, as for the server
outside the image. ``make container-test``; skipped where podman, runc or mmdebstrap is missing
(``container/install-podman.sh`` installs them).
"""

from __future__ import annotations

import json
import shutil
import time

import pytest
from contract_cases import CASES, assert_correct, assert_same_answer, request, send
from podman_image import IMAGE, Container, build_image, ensure_base_image, missing_tools, podman

from pt2aws.system import free_port

pytestmark = pytest.mark.container

STARTUP_TIMEOUT_S = 240.0
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def image():
    why = missing_tools()
    if why:
        pytest.skip(why)
    TIMINGS["base_image_s"] = ensure_base_image()
    TIMINGS["build_s"] = build_image()
    return IMAGE


def _start(container: Container) -> Container:
    """Start ``container`` and wait for /ping = 200 (RuntimeError with its log otherwise)."""
    container.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if send(container.port, "GET", "/ping", None, None, None, timeout_s=2).status == 200:
                return container
        except OSError:
            pass
        if not container.running():
            break
        time.sleep(0.5)
    logs = container.logs()
    container.stop()
    raise RuntimeError(f"container {container.name} not healthy:\n{logs[-4000:]}")


@pytest.fixture(scope="module")
def served(image, contract_model):
    t0 = time.perf_counter()
    container = _start(Container(image, contract_model, free_port()))
    TIMINGS["healthy_after_s"] = time.perf_counter() - t0
    yield container
    container.stop()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_container_answers_as_torchserve(case, torchserve_if_java, served):
    got = request(served.port, case)
    assert_correct(case, got)
    if torchserve_if_java is not None:  # without Java: correct, but not compared
        assert_same_answer(case, request(torchserve_if_java.port, case), got)


def test_image_has_the_pinned_cpu_torch_and_no_pip_at_start(image, served):
    logs = served.logs()
    assert "model loaded and warmed up" in logs
    assert "pip install" not in logs and "Collecting " not in logs  # nothing installed at start
    out = podman(
        "run",
        "--rm",
        "--entrypoint",
        "python",
        image,
        "-c",
        "import torch, transformers; print(torch.__version__, transformers.__version__)",
    ).stdout.split()
    assert out == ["2.13.0+cpu", "5.24.0"]


def test_unprivileged_read_only_container_serves(image, contract_model, tmp_path):
    """Outside SageMaker (which wants root) the image runs as any user on a read-only root."""
    model = tmp_path / "model"
    shutil.copytree(contract_model, model)
    for path in [model, *model.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    container = Container(
        image, model, free_port(), args=(), options=["--user", "65534:65534", "--read-only"]
    )
    _start(container)  # no command: the image's CMD is `serve`
    try:
        answer = send(
            container.port, "POST", "/invocations", b'["great"]', "application/json", None
        )
        assert answer.status == 200 and answer.content_type == "application/json"
    finally:
        assert container.stop() == 0  # SIGTERM reaches the server (exec-form ENTRYPOINT)


@pytest.fixture(scope="module")
def model_with_variants(contract_model, tmp_path_factory):
    """The contract model with a ``variants.json`` that lists int8 as eligible (as the
    ``make run`` model's archive does): ``auto`` must time it, then serve."""
    model = tmp_path_factory.mktemp("variants") / "model"
    shutil.copytree(contract_model, model)
    record = {
        "target": 0.99,
        "texts": 4,
        "agreement": {"int8": 1.0, "int8-legacy": 1.0, "bf16": 1.0},
        "eligible": ["int8", "int8-legacy"],
        "sample": ["great phone", "worst service ever", "the battery died", "love it"],
        "measured_on": "test",
    }
    (model / "variants.json").write_text(json.dumps(record))
    return model


@pytest.mark.parametrize("variant", ["int8", "compile", "auto"])
def test_each_compiled_variant_starts_and_answers_in_the_image(image, model_with_variants, variant):
    """int8 and compile run torch.compile: the image must carry the C++ compiler and Python
    headers Inductor needs (without them the server exited at its warm-up), and auto with int8
    eligible must time it and serve."""
    container = Container(
        image, model_with_variants, free_port(), options=["-e", f"PT2AWS_VARIANT={variant}"]
    )
    t0 = time.perf_counter()
    _start(container)
    TIMINGS[f"healthy_after_s[{variant}]"] = time.perf_counter() - t0
    try:
        answer = send(
            container.port, "POST", "/invocations", b'["great phone"]', "application/json", None
        )
        assert answer.status == 200 and json.loads(answer.body)[0]["label"] in (
            "positive",
            "negative",
        )
        logs = container.logs()
        served = "int8" if variant == "int8" else variant
        if variant == "auto":
            assert "| int8 |" in logs  # int8 was built and timed, not skipped
            assert "serving variant" in logs and "auto, measured at start-up" in logs
        else:
            assert f"serving variant {served} (" in logs
        assert "InvalidCxxCompiler" not in logs and "not timed" not in logs
    finally:
        assert container.stop() == 0


def test_other_commands_are_refused(image):
    proc = podman("run", "--rm", image, "train", check=False)
    assert proc.returncode == 2
    assert "`<image> serve`" in proc.stderr


def test_report_timings(served):
    """Not a check: prints what the build and start took (``pytest -s`` shows it)."""
    print("\ncontainer timings (s):", {k: round(v, 1) for k, v in TIMINGS.items()})
    assert TIMINGS["healthy_after_s"] < STARTUP_TIMEOUT_S
