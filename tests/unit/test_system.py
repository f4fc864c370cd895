import os
import socket
import sys
from pathlib import Path

import pytest

from pt2aws import system


def test_arm64_names_and_thread_split(monkeypatch):
    assert system.is_arm64("aarch64") and system.is_arm64("arm64")
    assert not system.is_arm64("x86_64")
    monkeypatch.setattr(system, "available_cpus", lambda: 8)
    assert system.default_num_threads(2) == 4
    assert system.default_num_threads(16) == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert system.default_num_threads() == 2


def test_free_port_is_bindable_and_peak_memory_is_plausible():
    port = system.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    assert 20 * 2**20 < system.peak_memory_bytes("cpu") < 64 * 2**30  # a Python process


def test_cpu_name_reads_proc_cpuinfo(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU @ 1GHz\n")
    assert system.cpu_name(tmp_path) == "Test CPU @ 1GHz"
    assert system.cpu_name(tmp_path / "missing")  # falls back to platform, never empty


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux")
def test_die_with_parent_ends_a_silent_child_when_its_parent_dies():
    """A training subprocess that prints nothing for a while (no SIGPIPE to end it) must still
    stop when the kernel that started it dies; without the death signal it lives on."""
    import subprocess
    import time

    def orphan_pid(with_death_signal: bool) -> int:
        parent = (
            "import subprocess, sys, os\n"
            "from pt2aws.system import die_with_parent\n"
            f"fn = die_with_parent() if {with_death_signal} else None\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
            " preexec_fn=fn, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "print(child.pid, flush=True)\n"
            "os._exit(0)\n"
        )
        out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True)
        return int(out.stdout.strip())

    def alive(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    def gone_within(pid: int, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if not alive(pid):
                return True
            time.sleep(0.1)
        return False

    assert gone_within(orphan_pid(with_death_signal=True), 10)
    survivor = orphan_pid(with_death_signal=False)
    try:
        assert not gone_within(survivor, 1.5)  # the control: an orphan lives on by default
    finally:
        os.kill(survivor, 9)


def test_a_capped_instruction_set_gets_its_own_compile_cache(tmp_path):
    capped = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "HOME": "/root"}
    folder = system.inductor_cache_for_caps(capped)
    assert folder is not None and capped["TORCHINDUCTOR_CACHE_DIR"] == folder
    assert folder.endswith("_aten_cpu_capability_avx2_onednn_max_cpu_isa_avx2")
    other = system.inductor_cache_for_caps({"ATEN_CPU_CAPABILITY": "default"})
    assert other != folder  # each cap its own folder
    chosen = {"ATEN_CPU_CAPABILITY": "avx2", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    assert system.inductor_cache_for_caps(chosen) is None  # the user's choice stays
    assert chosen["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)
    plain = {"PATH": "/usr/bin"}
    assert system.inductor_cache_for_caps(plain) is None and "TORCHINDUCTOR_CACHE_DIR" not in plain


def test_import_pt2aws_sets_the_capped_cache_in_a_fresh_process():
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    code = "import os, pt2aws; print(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))"
    capped = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "ATEN_CPU_CAPABILITY": "avx2"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert capped.stdout.strip().endswith("_aten_cpu_capability_avx2")
    env.pop("ATEN_CPU_CAPABILITY", None)
    env.pop("ONEDNN_MAX_CPU_ISA", None)
    plain = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert plain.stdout.strip() == "None"
