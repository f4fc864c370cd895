"""Tests of :mod:`pt2aws.processes`: ports and subprocesses that die with their parent."""

import os
import socket
import sys
from pathlib import Path

import pytest

from pt2aws import processes


def test_free_port_is_bindable():
    port = processes.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux")
def test_die_with_parent_ends_a_silent_child_when_its_parent_dies():
    """A training subprocess that prints nothing for a while (no SIGPIPE to end it) must still
    stop when the kernel that started it dies; without the death signal it lives on."""
    import subprocess
    import time

    def orphan_pid(with_death_signal: bool) -> int:
        parent = (
            "import subprocess, sys, os\n"
            "from pt2aws.processes import die_with_parent\n"
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
