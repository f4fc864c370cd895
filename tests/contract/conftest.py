"""Fixtures of the serving contract suite: the smoke model as an extracted archive, and the two
servers of one handler side by side: TorchServe (the AWS DLC's stack, the reference, where Java
is installed) and the project's server (``python -m pt2aws.serving.server serve``)."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import pytest
from support.torchserve import TorchServe, torchserve_missing

from pt2aws.serving import HANDLER_PATH
from pt2aws.serving.local import LocalServer


def make_model_folder(model_dir: Path, target: Path) -> Path:
    """``model_dir`` as SageMaker extracts ``model.tar.gz``: the model files,
    ``code/inference.py`` (this checkout's handler) and ``code/requirements.txt`` pinned to the
    versions installed here."""
    shutil.copytree(model_dir, target)
    (target / "code").mkdir()
    shutil.copy(HANDLER_PATH, target / "code" / "inference.py")
    pins = [f"{p}=={metadata.version(p)}" for p in ("transformers", "tokenizers", "safetensors")]
    (target / "code" / "requirements.txt").write_text("\n".join(pins) + "\n")
    return target


@pytest.fixture(scope="session")
def contract_model(smoke_model_dir, tmp_path_factory) -> Path:
    """The smoke model as an extracted ``model.tar.gz``, read-only for every server."""
    return make_model_folder(smoke_model_dir, tmp_path_factory.mktemp("contract") / "model")


@pytest.fixture(scope="session")
def servers(smoke_archive, contract_model, tmp_path_factory) -> dict:
    """``{"asgi": our server, "torchserve": TorchServe or None}``, one worker each, started
    side by side (each start is mostly a torch import: two cores do both at once)."""
    ours = LocalServer(contract_model, tmp_path_factory.mktemp("asgi"))
    reference = None
    if torchserve_missing() is None:
        reference = TorchServe(smoke_archive, tmp_path_factory.mktemp("torchserve"))
    started = [s for s in (ours, reference) if s is not None]
    try:
        with ThreadPoolExecutor(len(started)) as pool:
            list(pool.map(LocalServer.start, started))
        yield {"asgi": ours, "torchserve": reference}
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="session")
def asgi_server(servers) -> LocalServer:
    return servers["asgi"]


@pytest.fixture(scope="session")
def torchserve(servers) -> TorchServe:
    if servers["torchserve"] is None:
        pytest.skip(f"the TorchServe reference cannot run here: {torchserve_missing()}")
    return servers["torchserve"]


@pytest.fixture(scope="session")
def torchserve_if_java(servers) -> TorchServe | None:
    """The reference where it runs, else None (then answers are checked, not compared)."""
    return servers["torchserve"]


def pytest_terminal_summary(terminalreporter):
    """What the container tests measured (build and start-up times, sizes), when they ran."""
    from podman_image import REPORT

    for arch, rows in REPORT.items():
        terminalreporter.section(f"serving image, {arch}")
        for key, value in rows.items():
            if isinstance(value, dict):
                for sub, text in value.items():
                    terminalreporter.line(f"{key} {sub}: {text}")
            else:
                terminalreporter.line(f"{key}: {value}")


def pytest_collection_modifyitems(config, items):
    """The serving image's tests grouped by architecture, then by ``PT2AWS_VARIANT`` (in the
    order collected), so that each (architecture, variant) container starts once and one runs
    at a time; the per-architecture tests first (they use the eager container)."""
    ours = [i for i in items if i.path.name == "test_container.py" and hasattr(i, "callspec")]

    def target(item) -> tuple:
        params = item.callspec.params
        return params.get("target", (params.get("arch"), None))

    arches = list(dict.fromkeys(target(i)[0] for i in ours))
    variants = list(dict.fromkeys(target(i)[1] for i in ours if target(i)[1] is not None))

    def key(item) -> tuple:
        arch, variant = target(item)
        return arches.index(arch), -1 if variant is None else variants.index(variant)

    slots = [n for n, item in enumerate(items) if item in ours]
    for n, item in zip(slots, sorted(ours, key=key)):  # sorted() is stable
        items[n] = item
