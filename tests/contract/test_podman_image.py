"""The podman helpers behind the container tests, checked without podman (part of ``make test``):
the CPU stand-in an emulated arm64 container needs, the QEMU checks, the run options per
architecture, the build log's torch line, and how the container tests are parametrised."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import podman_image
import pytest
from podman_image import (
    NEOVERSE_N1_MIDR,
    QEMU_CPU,
    emulation_problem,
    run_options,
    torch_build_line,
    torch_wheels,
    write_cpu_sysfs,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def on_x86(monkeypatch):
    """As on the project's machines: amd64 native, arm64 emulated."""
    monkeypatch.setattr(podman_image, "host_arch", lambda: "amd64")


def test_cpu_sysfs_describes_each_core_as_a_neoverse_n1(tmp_path):
    root = write_cpu_sysfs(tmp_path / "cpu", 2)
    for name in ("possible", "present", "online"):
        assert (root / name).read_text() == "0-1\n"
    assert (root / "kernel_max").read_text() == "1\n"
    for cpu in (0, 1):
        assert (root / f"cpu{cpu}" / "online").read_text() == "1\n"
        midr = (root / f"cpu{cpu}" / "regs" / "identification" / "midr_el1").read_text()
        assert midr == "0x00000000413fd0c1\n" == NEOVERSE_N1_MIDR + "\n"
        assert int(midr, 16) >> 24 == 0x41 and (int(midr, 16) >> 4) & 0xFFF == 0xD0C  # Arm, N1
    assert not (root / "cpu2").exists()
    assert QEMU_CPU == "neoverse-n1"  # the stand-in's cores and QEMU's must be the same core


def test_cpu_sysfs_for_one_core_and_bad_arguments(tmp_path):
    root = write_cpu_sysfs(tmp_path / "one", 1)
    assert (root / "online").read_text() == "0\n" and (root / "kernel_max").read_text() == "0\n"
    with pytest.raises(ValueError, match="at least one core"):
        write_cpu_sysfs(tmp_path / "none", 0)
    with pytest.raises(ValueError, match="16 hex digits"):
        write_cpu_sysfs(tmp_path / "bad", 2, midr="0x413fd0c1")


def _binfmt(tmp_path: Path, text: str | None) -> Path:
    folder = tmp_path / "binfmt_misc"
    folder.mkdir(parents=True)
    if text is not None:
        (folder / "qemu-aarch64").write_text(text)
    return folder


def test_emulation_needs_qemu_registered_with_the_f_flag(tmp_path, on_x86):
    entry = "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: {}\n"
    assert emulation_problem("amd64", _binfmt(tmp_path / "a", None)) is None  # native
    why = emulation_problem("arm64", _binfmt(tmp_path / "b", None))
    assert "install-emulation.sh" in why and "qemu-aarch64" in why
    why = emulation_problem("arm64", _binfmt(tmp_path / "c", entry.format("P")))
    assert "F flag" in why
    disabled = entry.format("PF").replace("enabled", "disabled")
    why = emulation_problem("arm64", _binfmt(tmp_path / "d", disabled))
    assert "update-binfmts --enable" in why
    assert emulation_problem("arm64", _binfmt(tmp_path / "e", entry.format("PF"))) is None


def test_run_options_per_architecture(tmp_path, on_x86):
    assert run_options("amd64", None) == []  # nothing emulation needs
    sysfs = tmp_path / "cpu"
    emulated = run_options("arm64", sysfs)
    assert emulated[emulated.index("--arch") + 1] == "arm64"
    assert f"{sysfs}:/sys/devices/system/cpu:ro" in emulated  # read-only bind mount
    assert "QEMU_CPU=neoverse-n1" in emulated
    with pytest.raises(ValueError, match="stand-in"):
        run_options("arm64", None)


def test_tags_differ_per_architecture():
    assert podman_image.image("amd64") != podman_image.image("arm64")
    assert podman_image.base_image("amd64") != podman_image.base_image("arm64")
    assert podman_image.base_image("arm64").endswith("bookworm-arm64")


def test_local_cpu_torch_wheel_is_found_per_architecture(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    pin = podman_image.pins()["torch"]
    (tmp_path / f"torch-{pin}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    assert torch_wheels("amd64") == str(tmp_path)
    assert torch_wheels("arm64") is None  # then the build takes PyPI's (a CUDA build)
    (tmp_path / f"torch-{pin}-cp311-cp311-manylinux_2_28_aarch64.whl").touch()
    assert torch_wheels("arm64") is None  # not a CPU build
    (tmp_path / f"torch-{pin}+cpu-cp311-cp311-manylinux_2_28_aarch64.whl").touch()
    assert torch_wheels("arm64") == str(tmp_path)


def test_torch_build_line_from_a_build_log():
    cpu = "STEP 4/8: RUN ...\ntorch build: 2.13.0+cpu for x86_64, CPU-only\nCOMMIT\n"
    assert torch_build_line(cpu) == "2.13.0+cpu for x86_64, CPU-only"
    cuda = (
        "!!!!\ntorch build: 2.13.0+cu130 for aarch64 is a CUDA 13.0 build,\n"
        "with 61 GPU-only packages (4.2 GB installed) that a CPU\n!!!!\n"
    )
    line = torch_build_line(cuda)
    assert line.startswith("2.13.0+cu130 for aarch64 is a CUDA 13.0 build")
    assert line.endswith("with 61 GPU-only packages (4.2 GB installed) that a CPU")
    assert torch_build_line("--> Using cache 1f2e\n") == ""  # the layer was cached


def test_bf16_is_expected_refused_only_where_the_cpu_lacks_it(on_x86, monkeypatch):
    import test_container

    assert test_container.expected_refusal("arm64", "bf16") == "PT2AWS_VARIANT=bf16"
    for variant in ("eager", "int8", "auto"):
        assert test_container.expected_refusal("arm64", variant) is None
        assert test_container.expected_refusal("amd64", variant) is None
    monkeypatch.setattr(test_container, "cpu_has_bf16", lambda arch: True)
    assert test_container.expected_refusal("amd64", "bf16") is None


def _collect(*args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "container", "-p",
         "no:cacheprovider", str(ROOT / "tests" / "contract" / "test_container.py"), *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [ln for ln in proc.stdout.splitlines() if "::" in ln]


def test_container_tests_are_parametrised_by_architecture_and_variant():
    from contract_cases import CASES
    from test_container import VARIANT_CASES

    ids = _collect("--image-arch", "arm64", "--image-variants", "eager,int8,auto")
    starts = [i for i in ids if "test_variant_starts_or_is_refused" in i]
    assert [i.split("[")[1] for i in starts] == ["arm64-eager]", "arm64-int8]", "arm64-auto]"]
    cases = [i.split("[")[1].rstrip("]") for i in ids if "test_image_answers_contract_case" in i]
    assert len(cases) == len(CASES) + 2 * len(VARIANT_CASES)  # eager answers every case
    assert cases[0] == f"arm64-eager-{CASES[0].id}"
    # grouped by (arch, variant): each container starts once
    targets = ("arm64-eager", "arm64-int8", "arm64-auto")
    order = [next(t for t in targets if c.startswith(t + "-")) for c in cases]
    groups = [g for i, g in enumerate(order) if i == 0 or order[i - 1] != g]
    assert groups == ["arm64-eager", "arm64-int8", "arm64-auto"]
    # the per-architecture tests first: they use the eager container, which then serves on
    first_start = next(n for n, i in enumerate(ids) if "test_variant_starts" in i)
    arch_tests = [n for n, i in enumerate(ids) if i.endswith("[arm64]")]
    assert len(arch_tests) == 3 and max(arch_tests) < first_start
    both = _collect("--image-arch", "amd64", "--image-arch", "arm64", "--image-variants", "eager")
    assert [i.split("[")[1] for i in both if "test_other_commands" in i] == ["amd64]", "arm64]"]


def test_podman_children_write_no_core_dumps():
    """Containers inherit the podman client's limits; a crash under QEMU must not dump."""
    import resource

    script = "import resource; print(resource.getrlimit(resource.RLIMIT_CORE)[0])"
    before = resource.getrlimit(resource.RLIMIT_CORE)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        preexec_fn=podman_image.no_core_dumps,
    ).stdout  # fmt: skip
    assert out.strip() == "0"
    assert resource.getrlimit(resource.RLIMIT_CORE) == before  # only the child's


def test_prefetch_fetches_the_base_images_wheels_once(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(podman_image.subprocess, "run", fake_run)
    podman_image.prefetch_wheels("arm64", tmp_path / "wheels")
    (cmd,) = calls
    platforms = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--platform"]
    assert platforms[0] == "manylinux_2_36_aarch64"  # Debian 12's glibc, and every older tag
    assert platforms[-2:] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]
    assert len(platforms) == 21
    assert cmd[cmd.index("--python-version") + 1] == "3.11"  # Debian 12's python3
    assert "--only-binary=:all:" in cmd  # no sdists: they would build for this machine
    assert cmd[-2:] == ["--requirement", str(ROOT / "container" / "requirements.txt")]
    assert podman_image.prefetch_wheels("arm64", tmp_path / "wheels") == 0.0  # stamp: skipped
    assert len(calls) == 1
