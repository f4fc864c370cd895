"""Test set-up: nothing leaves the machine (hub offline, fake AWS credentials), shared fixtures.

Shared, once per session (the expensive parts of the suite, so each is paid once): the smoke
model (:func:`smoke_train_dir`) and its ``model.tar.gz`` (:func:`smoke_archive`); the servers of
the contract suite are in ``tests/contract/conftest.py``, the notebooks' one executed run in
``tests/notebooks/conftest.py``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ.update(
    HF_HUB_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    TOKENIZERS_PARALLELISM="false",
)
if not os.environ.get("PT2AWS_REAL_AWS"):  # fake credentials unless real AWS is opted into
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        SAGEMAKER_VALIDATE_ROLE="false",
    )
    for _key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        os.environ.pop(_key, None)
    os.environ.setdefault("PT2AWS_PRICE_LIST", "off")  # fake credentials: never ask AWS prices
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR",
    str(Path(__file__).resolve().parents[1] / ".pytest_cache" / "inductor"),
)

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    group = parser.getgroup("pt2aws serving image (-m container)")
    group.addoption(
        "--image-arch",
        action="append",
        choices=("amd64", "arm64"),
        help="architecture to build and test the serving image for (repeatable; default: this "
        "machine's; arm64 on x86 runs under QEMU: make container-arm64)",
    )
    group.addoption(
        "--image-variants",
        default=None,
        help="comma-separated PT2AWS_VARIANT values to start the image with (default: every "
        "variant and auto)",
    )


def pytest_collection_modifyitems(config, items):
    # markers, not item.keywords: keywords also hold folder names (tests/unit/aws/ is not real AWS)
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    has_aws = bool(os.environ.get("PT2AWS_REAL_AWS"))
    java = shutil.which("java") is not None
    # markers, not keywords: keywords also hold folder names (a checkout in a folder named
    # `container`, or tests/unit/aws/, would match)
    for item in items:
        if item.get_closest_marker("gpu") and gpus < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if item.get_closest_marker("multigpu") and gpus < 2:
            item.add_marker(pytest.mark.skip(reason="needs 2+ CUDA GPUs"))
        if item.get_closest_marker("aws") and not has_aws:
            item.add_marker(
                pytest.mark.skip(
                    reason="real AWS is opt-in: set PT2AWS_REAL_AWS=1 with credentials, run -m aws"
                )
            )
        if item.get_closest_marker("serve") and not java:
            item.add_marker(pytest.mark.skip(reason="needs Java 17 for TorchServe"))
        if item.get_closest_marker("container") and "container" not in (
            config.option.markexpr or ""
        ):
            item.add_marker(
                pytest.mark.skip(
                    reason="builds the serving image with podman (4-10 min cold): "
                    "run `make container` or `pytest -m container`"
                )
            )


@pytest.fixture(scope="session")
def smoke_train_dir(tmp_path_factory) -> Path:
    """A smoke-profile training run (tiny RoBERTa, about 10 s), shared by the tests that need a model."""
    from pt2aws.train import loop

    out = tmp_path_factory.mktemp("smoke") / "train"
    loop.main(
        [
            "--profile",
            "smoke",
            "--output_dir",
            str(out),
            "--max_train_samples",
            "400",
            "--num_train_epochs",
            "2",
        ]
    )
    return out


@pytest.fixture(scope="session")
def smoke_model_dir(smoke_train_dir) -> Path:
    return smoke_train_dir / "model"


@pytest.fixture(scope="session")
def eager_probs(smoke_model_dir):
    """fp32 eager class probabilities of :data:`support.texts.TEXTS`, shape ``(24, 2)``."""
    from support.texts import TEXTS

    from pt2aws.inference.predictor import Predictor

    return Predictor(str(smoke_model_dir)).predict_proba(TEXTS)


@pytest.fixture(scope="session")
def smoke_archive(smoke_model_dir, tmp_path_factory) -> Path:
    """The smoke model as SageMaker's ``model.tar.gz`` (:func:`pt2aws.aws.artifact.package`)."""
    from pt2aws.aws.artifact import package

    return package(smoke_model_dir, tmp_path_factory.mktemp("pkg") / "model.tar.gz")
