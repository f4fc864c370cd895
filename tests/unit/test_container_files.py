"""The serving image's files: pins equal pyproject's, the Dockerfile's shape, hadolint clean.

Building and running the image is in tests/contract/test_container.py (``make container``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


CONTAINER = ROOT / "container"


DOCKERFILE = CONTAINER / "Dockerfile"


def _requirements(path: Path) -> dict[str, Requirement]:
    reqs = {}
    for line in path.read_text().splitlines():
        if line.split("#")[0].strip():
            req = Requirement(line.split("#")[0])
            reqs[req.name.lower()] = req
    return reqs


def _pyproject_requirements() -> dict[str, Requirement]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        lines += extra
    return {r.name.lower(): r for r in map(Requirement, lines)}


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            rows.append((keyword.upper(), rest.strip()))
    return rows


def _hadolint() -> list[str] | None:
    exe = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    return [exe] if Path(exe).is_file() else None


def test_image_pins_equal_pyprojects():
    image = _requirements(CONTAINER / "requirements.txt")
    project = _pyproject_requirements()
    assert {"torch", "transformers", "starlette", "uvicorn"} <= set(image)
    for name, req in image.items():
        pins = [s for s in req.specifier if s.operator == "=="]
        assert len(pins) == 1 and len(req.specifier) == 1, f"{req}: pin exactly (==)"
        assert name in project, f"{name} is in container/requirements.txt but not pyproject.toml"
        wanted = project[name].specifier
        if any(s.operator == "==" for s in wanted):
            assert req.specifier == wanted, f"{name}: image {req.specifier} != pyproject {wanted}"
        else:
            assert wanted.contains(pins[0].version), f"{name}: {pins[0].version} not in {wanted}"


def test_image_pins_match_what_the_model_archive_asks_for():
    """The archive's code/requirements.txt (transformers, tokenizers, safetensors at the versions
    that saved the model) is satisfied by the image, so nothing is missing at start."""
    image = _requirements(CONTAINER / "requirements.txt")
    for name in ("transformers", "tokenizers", "safetensors"):
        assert name in image, f"pin {name} in container/requirements.txt"


def test_dockerfile_is_what_sagemaker_runs():
    rows = _instructions()
    keywords = [k for k, _ in rows]
    assert rows[0] == ("ARG", "BASE=python:3.12-slim") and rows[1] == ("FROM", "${BASE}")
    assert ("EXPOSE", "8080") in rows
    entry = json.loads(dict(rows)["ENTRYPOINT"])  # exec form: SIGTERM reaches the server
    assert entry == ["python", "-m", "pt2aws.serving.server"]
    assert json.loads(dict(rows)["CMD"]) == ["serve"]
    assert "USER" not in keywords  # SageMaker expects root; see container/README.md
    # everything installed at build time, only from the pinned requirements
    runs = " ".join(rest for k, rest in rows if k == "RUN")
    installs = re.findall(r"pip install ([^&]*)", runs)
    assert len(installs) == 2
    torch_step, rest_step = (i.split() for i in installs)
    # torch alone, from TORCH_INDEX_URL only: an index with a CPU and a CUDA build under one
    # version cannot hand over the CUDA one; its dependencies come with the second install
    assert torch_step[-3:] == ["--constraint", "/opt/build/requirements.txt", "torch"]
    assert "--no-deps" in torch_step
    assert (
        torch_step[torch_step.index("--index-url") + 1] == '"${TORCH_INDEX_URL:-${PIP_INDEX_URL}}"'
    )
    assert rest_step[-2:] == ["--requirement", "/opt/build/requirements.txt"]
    assert rest_step[rest_step.index("--index-url") + 1] == '"${PIP_INDEX_URL}"'
    for step in (torch_step, rest_step):
        assert "--no-cache-dir" in step and '${WHEELS_DIR:+--find-links="${WHEELS_DIR}"}' in step
    # says which torch build it installed, without importing torch (crashes under QEMU)
    assert "python /opt/build/torch_build.py ${REQUIRE_CPU_TORCH:+--require-cpu}" in runs
    assert "import torch" not in runs
    assert ("COPY", "container/requirements.txt container/torch_build.py /opt/build/") in rows
    assert all(rest.split()[-1].startswith("/opt/program/pt2aws/") for k, rest in rows
               if k == "COPY" and "src/pt2aws" in rest)  # fmt: skip
    assert "HF_HUB_OFFLINE=1" in dict(rows)["ENV"]


def test_dockerfile_build_arguments():
    """Where torch and the rest come from, a local wheel folder, and the CPU-only guard."""
    args = dict(rest.partition("=")[::2] for keyword, rest in _instructions() if keyword == "ARG")
    assert args == {
        "BASE": "python:3.12-slim",
        "TORCH_INDEX_URL": "https://download.pytorch.org/whl/cpu",  # PyTorch's CPU wheels
        "PIP_INDEX_URL": "https://pypi.org/simple",
        "WHEELS_DIR": '""',
        "REQUIRE_CPU_TORCH": '""',
    }


def test_files_do_not_claim_pypis_arm64_torch_is_cpu_only():
    """PyPI's aarch64 torch 2.13.0 is 2.13.0+cu130 (NVIDIA wheels): issue 17."""
    for path in (DOCKERFILE, CONTAINER / "README.md"):
        text = " ".join(path.read_text().split())
        assert not re.search(r"arm64[^.]*(both are|are|is) CPU-only", text), path
        assert "cu130" in text, f"{path.name}: say that PyPI's arm64 torch is a CUDA build"


def _image_files() -> set[str]:
    """The package files the Dockerfile copies, relative to ``src/``."""
    return {
        src.removeprefix("src/")
        for keyword, rest in _instructions()
        if keyword == "COPY" and rest.startswith("src/pt2aws")
        for src in rest.split()[:-1]
    }


def test_the_image_copies_exactly_what_the_server_imports():
    """Every pt2aws module the server loads (with ``auto`` and the ONNX Runtime variants) is in
    the image, and nothing else: no emulator, lessons, aws, notebooks' helpers."""
    code = (
        "import sys\n"
        "import pt2aws.serving.server, pt2aws.serving.handler, pt2aws.inference.selection\n"
        "import pt2aws.inference.ort, pt2aws.inference.runtime as runtime\n"
        "runtime.apply_runtime_settings(torch_threads=False)\n"
        "print('\\n'.join(sorted(m.__file__ for n, m in sys.modules.items() if n.startswith('pt2aws'))))\n"
    )
    src = ROOT / "src"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"})  # fmt: skip
    imported = {str(Path(f).relative_to(src)) for f in out.stdout.split()}
    assert imported == _image_files()
    for side in ("emulator", "lessons", "aws", "train", "data", "sizing"):
        assert not any(f.startswith(f"pt2aws/{side}/") for f in imported), side
