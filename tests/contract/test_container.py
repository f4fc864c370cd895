"""The serving image, built here and run as SageMaker runs it, once per architecture and variant.

Builds ``container/Dockerfile`` with podman for each architecture asked for (``--image-arch``:
this machine's by default; ``arm64`` on an x86 machine runs under QEMU user emulation), starts
``<image> serve`` with the smoke model read-only at /opt/ml/model and port 8080 published on
127.0.0.1, once per ``PT2AWS_VARIANT`` (``--image-variants``: every variant the handler offers,
and ``auto`` with int8 eligible in the archive's ``variants.json``), and checks that each variant
starts healthy and answers the contract cases, or is refused at start-up with the reason where
this CPU cannot run it (bf16 without bf16 instructions). ``eager`` answers every case in
``contract_cases`` and is compared with a reference served on this machine: TorchServe byte for
byte (native, where Java is installed), or the project's server outside the image with scores
within :data:`SCORE_TOLERANCE` (emulated arm64: oneDNN's aarch64 kernels round differently).
The other variants answer :data:`VARIANT_CASES` (their predictions differ from eager's by design).

``make container`` (this machine's architecture) and ``make container-arm64``; skipped where
podman, runc, mmdebstrap or (for an emulated architecture) QEMU's binfmt entry is missing
(``container/install-podman.sh``, ``container/install-emulation.sh`` install them).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from contract_cases import (
    CASES,
    assert_correct,
    assert_same_answer,
    first_line,
    parse_scores,
    send,
)
from contract_cases import request as send_case
from podman_image import (
    REPORT,
    Container,
    build_image,
    emulated,
    ensure_base_image,
    image,
    image_size,
    missing_tools,
    pins,
    podman,
    run_options,
    torch_wheels,
    write_cpu_sysfs,
)

from pt2aws.processes import free_port

pytestmark = pytest.mark.container

#: Seconds from ``podman run`` to ``/ping`` = 200. Native: model load and warm-up, plus a
#: torch.compile for int8 and compile (42-48 s on 2 cores at load 6-8). Under QEMU, g++ runs
#: emulated too: eager took 74 s, int8 411 s, compile 629 s at load 8-13 (container/README.md).
STARTUP_TIMEOUT_S = {False: 600.0, True: 3600.0}
#: Seconds per request (emulated: 0.13-0.19 s for eager; the 7 MB body takes longer).
REQUEST_TIMEOUT_S = {False: 60.0, True: 300.0}
#: Largest difference between an emulated arm64 score and the host's (scores are rounded to
#: 6 decimals; with QEMU_CPU=neoverse-n1 they agreed to 1e-7, stack notes "Containers").
SCORE_TOLERANCE = 1e-5
#: What every variant answers: one case per input type and answer type, long texts, the 4xx
#: the handler raises, and the health check. ``eager`` answers all of ``CASES``.
VARIANT_CASE_IDS = (
    "json-string",
    "json-list-to-csv",
    "json-empty-texts",
    "json-truncated",
    "csv-header-quoted-comma",
    "text-plain-accept-wildcard",
    "400-bad-json",
    "413-too-many-texts",
    "406-xml",
    "ping-get",
)
VARIANT_CASES = [c for c in CASES if c.id in VARIANT_CASE_IDS]
#: Where the containers' shared Inductor cache is mounted (``startups``).
INDUCTOR_CACHE = "/tmp/inductor-cache"


def variants(config) -> list[str]:
    """``--image-variants``, or every variant the handler offers and ``auto``."""
    from pt2aws.inference.variants import VARIANTS

    chosen = config.getoption("image_variants", default=None)
    return chosen.split(",") if chosen else [*VARIANTS, "auto"]


def arches(config) -> list[str]:
    """``--image-arch`` (repeatable), or this machine's architecture."""
    from podman_image import host_arch

    return config.getoption("image_arch", default=None) or [host_arch()]


def pytest_generate_tests(metafunc):
    """One test per (architecture, variant) and per case; ``conftest.py`` groups them so that
    each container starts once."""
    targets = [(a, v) for a in arches(metafunc.config) for v in variants(metafunc.config)]
    if "case" in metafunc.fixturenames:
        rows = [
            ((a, v), case)
            for a, v in targets
            for case in (CASES if v == "eager" else VARIANT_CASES)
        ]
        ids = [f"{a}-{v}-{case.id}" for (a, v), case in rows]
        metafunc.parametrize(("target", "case"), rows, ids=ids)
    elif "target" in metafunc.fixturenames:
        metafunc.parametrize("target", targets, ids=[f"{a}-{v}" for a, v in targets])
    elif "arch" in metafunc.fixturenames:
        metafunc.parametrize("arch", arches(metafunc.config), scope="module")


def cpu_has_bf16(arch: str) -> bool:
    """Whether the CPU an ``arch`` container sees here has bf16 instructions.

    Emulated arm64 runs as ``QEMU_CPU=neoverse-n1`` (Armv8.2: no BF16; Graviton3's Neoverse V1
    has it): its HWCAP2 has no BF16 bit (read from /proc/self/auxv in the image: 0x0; with
    QEMU's default ``max`` model BF16 is set). Native: the kernel's flags (AVX512-BF16 or AMX on
    x86, ``bf16`` on arm64).
    """
    if emulated(arch):
        return False
    flags = set(Path("/proc/cpuinfo").read_text().split())
    return bool({"avx512_bf16", "amx_bf16", "bf16"} & flags)


def cpu_has_int8_dot(arch: str) -> bool:
    """Whether that CPU has int8 dot products (x86 VNNI/AMX; Arm SDOT, which QEMU's
    neoverse-n1 has): ``auto`` times torchao int8 only there."""
    if emulated(arch):
        return True
    flags = set(Path("/proc/cpuinfo").read_text().split())
    return bool({"avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm"} & flags)


def expected_refusal(arch: str, variant: str) -> str | None:
    """What the log must name when the image rightly refuses ``variant`` at start-up on
    ``arch`` here, or None when it must serve."""
    if variant == "bf16" and not cpu_has_bf16(arch):
        return "PT2AWS_VARIANT=bf16"
    return None


@dataclass
class Startup:
    """How one (architecture, variant) container started: healthy after ``seconds``, or exited
    with ``exit_code`` (``refused``: the reason line from its log)."""

    container: Container
    seconds: float
    healthy: bool
    exit_code: int | None = None
    logs: str = ""

    @property
    def refused(self) -> str:
        """The log's "stopping: ..." line (why the server exited at start-up), or ""."""
        lines = [ln for ln in self.logs.splitlines() if "stopping:" in ln or "Error:" in ln]
        return lines[-1].strip() if lines else ""


def start(container: Container, timeout_s: float) -> Startup:
    """Start ``container`` and wait for ``/ping`` = 200 or for it to exit."""
    t0 = time.perf_counter()
    container.start()
    while time.perf_counter() - t0 < timeout_s:
        try:
            if send(container.port, "GET", "/ping", None, None, None, timeout_s=5).status == 200:
                return Startup(container, time.perf_counter() - t0, True)
        except OSError:
            pass
        if not container.running():
            break
        time.sleep(1.0)
    seconds = time.perf_counter() - t0
    logs = container.logs()
    return Startup(container, seconds, False, container.stop(), logs)


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """Per architecture, the image built (once per session; layers cached across sessions)."""
    done: dict[str, str] = {}

    def get(arch: str) -> str:
        if arch not in done:
            why = missing_tools(arch)
            if why:
                pytest.skip(why)
            report = REPORT.setdefault(arch, {})
            report["base image s"] = round(ensure_base_image(arch), 1)
            build = build_image(arch, tmp_path_factory.mktemp(f"build-{arch}") / "build.log")
            report["build s"] = round(build.seconds, 1)
            report["wheels fetched natively s"] = round(build.prefetch_s, 1)
            report["torch"] = build.torch or "(torch layer cached)"
            report["image GB"] = round(image_size(image(arch)) / 1e9, 2)
            done[arch] = image(arch)
        return done[arch]

    return get


@pytest.fixture(scope="session")
def cpu_sysfs(tmp_path_factory) -> Path:
    """The /sys/devices/system/cpu stand-in for emulated containers (this machine's CPU count)."""
    return write_cpu_sysfs(tmp_path_factory.mktemp("sysfs") / "cpu", os.cpu_count() or 1)


@pytest.fixture(scope="session")
def image_model(contract_model, tmp_path_factory) -> Path:
    """The contract model with the ONNX Runtime variants' ``onnx/`` export, which
    ``aws.artifact.package`` ships when ``variants.json`` records them (a read-only
    ``/opt/ml/model`` cannot export them)."""
    from pt2aws.inference.ort import onnx_files
    from pt2aws.inference.variants import load_fp32

    target = tmp_path_factory.mktemp("image") / "model"
    shutil.copytree(contract_model, target)
    onnx_files(target, *load_fp32(str(target)))
    return target


@pytest.fixture(scope="session")
def auto_model(image_model, tmp_path_factory) -> Path:
    """The contract model with a ``variants.json`` that makes every recorded variant (int8
    among them) eligible for ``auto``, as the ``make run`` model's archive does."""
    from pt2aws.inference.selection import AUTO_CANDIDATES

    target = tmp_path_factory.mktemp("auto") / "model"
    shutil.copytree(image_model, target)
    texts = ["great phone", "awful service", "it works", "never again"] * 2
    record = {
        "target": 0.99,
        "texts": len(texts),
        "agreement": {v: 1.0 for v in AUTO_CANDIDATES},
        "eligible": list(AUTO_CANDIDATES),
        "sample": texts,
        "measured_on": "tests/contract/test_container.py (a written record)",
    }
    assert "int8" in record["eligible"]
    (target / "variants.json").write_text(json.dumps(record))
    return target


@pytest.fixture(scope="session")
def startups(built, cpu_sysfs, image_model, auto_model, tmp_path_factory):
    """Per (architecture, variant), the container started once; one runs at a time.

    The containers of one architecture share an Inductor cache for the session
    (``TORCHINDUCTOR_CACHE_DIR``): the first compiled variant builds its C++ kernels cold, as an
    endpoint does; ``auto`` after ``int8`` reuses int8's (under QEMU that saves about 7 of its
    10 minutes; a real endpoint's ``auto`` pays int8's compile, see container/README.md).
    """
    cache: dict[tuple[str, str], Startup] = {}
    running: list[Startup] = []
    inductor: dict[str, Path] = {}

    def get(arch: str, variant: str) -> Startup:
        key = (arch, variant)
        if key not in cache:
            tag = built(arch)
            while running:  # one container at a time: 2 cores, and QEMU is heavy
                running.pop().container.stop()
            if arch not in inductor:
                inductor[arch] = tmp_path_factory.mktemp(f"inductor-{arch}")
            options = [*run_options(arch, cpu_sysfs), "-e", f"PT2AWS_VARIANT={variant}"]
            options += ["-v", f"{inductor[arch]}:{INDUCTOR_CACHE}"]
            options += ["-e", f"TORCHINDUCTOR_CACHE_DIR={INDUCTOR_CACHE}"]
            model = auto_model if variant == "auto" else image_model
            container = Container(tag, model, free_port(), options=options)
            startup = cache[key] = start(container, STARTUP_TIMEOUT_S[emulated(arch)])
            REPORT.setdefault(arch, {}).setdefault("start-up", {})[variant] = describe(startup)
            if startup.healthy:
                running.append(startup)
        return cache[key]

    yield get
    for startup in running:
        startup.container.stop()


def describe(startup: Startup) -> str:
    """One line for the report: healthy after how long and what it serves, or why it exited."""
    if not startup.healthy:
        why = startup.refused or "(no reason in the log)"
        return f"exited {startup.exit_code} after {startup.seconds:.0f} s: {why}"
    served = [ln for ln in startup.container.logs().splitlines() if "serving variant" in ln]
    what = served[-1].split("serving variant", 1)[1].strip() if served else "?"
    return f"healthy after {startup.seconds:.0f} s, serving {what}"


def serving(startups, arch: str, variant: str) -> Startup:
    """The healthy container for (``arch``, ``variant``); skips when it was rightly refused,
    fails with its log when it should have served."""
    startup = startups(arch, variant)
    if startup.healthy:
        return startup
    if expected_refusal(arch, variant):
        pytest.skip(f"{variant} is refused on {arch} here: {startup.refused}")
    pytest.fail(
        f"{arch} {variant} did not start: {startup.refused or startup.logs[-300:]} (the log: "
        f"test_variant_starts_or_is_refused_with_the_reason[{arch}-{variant}])"
    )


def test_variant_starts_or_is_refused_with_the_reason(target, startups):
    arch, variant = target
    startup = startups(arch, variant)
    why = expected_refusal(arch, variant)
    if why:
        assert not startup.healthy, f"{variant} served on {arch}, where the CPU lacks it"
        assert startup.exit_code == 3, startup.logs[-2000:]  # the server's start-up failure
        assert why in startup.refused, startup.logs[-2000:]
        return
    assert startup.healthy, f"{arch} {variant} exited {startup.exit_code}:\n{startup.logs[-4000:]}"
    logs = startup.container.logs()
    assert "model loaded and warmed up" in logs
    served = [ln for ln in logs.splitlines() if "serving variant" in ln]
    assert served, logs[-2000:]
    assert "InvalidCxxCompiler" not in logs  # torch.compile found the image's g++
    if variant == "auto":
        assert "(auto, measured at start-up" in served[-1], served[-1]
        if cpu_has_int8_dot(arch):  # int8 built and timed; else left out, saying why
            assert "| int8 |" in logs and "int8: built in" in logs, logs[-3000:]
        else:
            assert "int8 (no int8 dot products" in served[-1], served[-1]
    else:
        assert f"serving variant {variant} (" in served[-1], served[-1]


def test_image_answers_contract_case(target, case, startups, request):
    """Each variant answers correctly; eager answers as this machine does outside the image."""
    arch, variant = target
    startup = serving(startups, arch, variant)
    got = send_case(startup.container.port, case, timeout_s=REQUEST_TIMEOUT_S[emulated(arch)])
    assert_correct(case, got)
    if variant != "eager":
        return
    reference = None if emulated(arch) else request.getfixturevalue("torchserve_if_java")
    if reference is not None:
        assert_same_answer(case, send_case(reference.port, case), got)
        return
    # the same server outside the image, on this machine (for arm64: "as the amd64 image")
    expected = send_case(request.getfixturevalue("asgi_server").port, case)
    assert_equivalent_answer(case, expected, got, SCORE_TOLERANCE if emulated(arch) else 0.0)


def assert_equivalent_answer(case, reference, got, tolerance: float) -> None:
    """``got`` answers ``case`` as ``reference`` did, scores equal within ``tolerance``."""
    assert got.status == reference.status, (reference.body[:300], got.body[:300])
    assert got.content_type == reference.content_type
    if got.status != 200 or case.path == "/ping":
        assert first_line(got.body) == first_line(reference.body)
        return
    want, have = parse_scores(reference), parse_scores(got)
    assert [r["label"] for r in have] == [r["label"] for r in want]
    for a, b in zip(want, have):
        assert (a["score"] is None) == (b["score"] is None)
        if a["score"] is not None:
            assert abs(a["score"] - b["score"]) <= tolerance, (a, b)


def test_image_has_the_pinned_torch_and_no_pip_at_start(arch, built, startups, cpu_sysfs):
    """torch at the pin: the CPU build where the build had one (amd64 here: the local
    +cpu wheel); PyPI's CUDA build otherwise (arm64 here), which the build log says."""
    tag = built(arch)
    logs = serving(startups, arch, "eager").container.logs()
    assert "pip install" not in logs and "Collecting " not in logs  # nothing installed at start
    code = (
        "import torch, transformers; "
        "print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), "
        "transformers.__version__)"
    )
    out = podman(
        "run", "--rm", *run_options(arch, cpu_sysfs), "--entrypoint", "python", tag, "-c", code,
        timeout_s=REQUEST_TIMEOUT_S[emulated(arch)] * 4,
    ).stdout.split()  # fmt: skip
    version, cuda, cuda_available, transformers = out[-4:]
    assert version.split("+")[0] == pins()["torch"] and transformers == pins()["transformers"]
    assert cuda_available == "False"
    if torch_wheels(arch):
        assert version == f"{pins()['torch']}+cpu" and cuda == "None"
    report = podman(
        "run", "--rm", "--entrypoint", "python", tag, "/opt/build/torch_build.py",
    ).stdout  # fmt: skip
    assert report.count(f"torch build: {version} ") == 1, report
    assert report.strip().endswith("CPU-only") == (cuda == "None"), report
    assert (f"is a CUDA {cuda} build" in report) == (cuda != "None"), report
    REPORT.setdefault(arch, {})["torch in the image"] = f"{version} (CUDA {cuda})"


def test_unprivileged_read_only_container_serves(arch, built, image_model, tmp_path):
    """Outside SageMaker (which wants root) the image runs as any user on a read-only root."""
    if emulated(arch):
        pytest.skip("checked natively: nothing in it depends on the architecture")
    model = tmp_path / "model"
    shutil.copytree(image_model, model)
    for path in [model, *model.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    container = Container(
        built(arch), model, free_port(), args=(), options=["--user", "65534:65534", "--read-only"]
    )
    startup = start(container, STARTUP_TIMEOUT_S[False])  # no command: the image's CMD is serve
    assert startup.healthy, startup.logs[-4000:]
    try:
        answer = send(
            container.port, "POST", "/invocations", b'["great"]', "application/json", None
        )
        assert answer.status == 200 and answer.content_type == "application/json"
    finally:
        assert container.stop() == 0  # SIGTERM reaches the server (exec-form ENTRYPOINT)


def test_other_commands_are_refused(arch, built, cpu_sysfs):
    proc = podman(
        "run", "--rm", *run_options(arch, cpu_sysfs), built(arch), "train", check=False,
        timeout_s=REQUEST_TIMEOUT_S[emulated(arch)] * 4,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "`<image> serve`" in proc.stderr
