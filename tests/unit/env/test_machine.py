"""Tests of :mod:`pt2aws.env.machine`: facts of this machine and process."""

from pt2aws.env import machine


def test_arm64_names_and_thread_split(monkeypatch):
    assert machine.is_arm64("aarch64") and machine.is_arm64("arm64")
    assert not machine.is_arm64("x86_64")
    monkeypatch.setattr(machine, "available_cpus", lambda: 8)
    assert machine.default_num_threads(2) == 4
    assert machine.default_num_threads(16) == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert machine.default_num_threads() == 2


def test_peak_memory_is_plausible():
    assert 20 * 2**20 < machine.peak_memory_bytes("cpu") < 64 * 2**30  # a Python process


def test_cpu_name_reads_proc_cpuinfo(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU @ 1GHz\n")
    assert machine.cpu_name(tmp_path) == "Test CPU @ 1GHz"
    assert machine.cpu_name(tmp_path / "missing", "aarch64") == "aarch64"  # the architecture
