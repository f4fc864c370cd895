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


def test_stream_child_streams_lines_stops_early_and_fails_with_its_tail():
    lines = []
    count = [sys.executable, "-c", "import time\nfor i in range(50): print(i, flush=True)"]
    assert processes.stream_child(count, lines.append, what="count") is False
    assert [int(x) for x in lines] == list(range(50))
    assert processes.stream_child(count, lambda line: line == "3\n", what="count") is True
    fail = [sys.executable, "-c", "import sys\nfor i in range(50): print(i)\nsys.exit(3)"]
    with pytest.raises(processes.ChildFailedError, match="^count: exit code 3") as err:
        processes.stream_child(fail, lambda line: None, what="count")
    assert str(err.value).splitlines()[1:] == [str(i) for i in range(10, 50)]  # the last 40
    sleep = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"]
    with pytest.raises(processes.ChildFailedError, match="no result within 0.5 s"):
        processes.stream_child(sleep, lambda line: None, what="sleep", timeout_s=0.5)


def test_forker_runs_each_module_in_a_fork_that_streams_stops_and_fails_as_a_new_process(
    tmp_path,
):
    """The A/B's runs: forks of one server that imported ``preload`` once; the same contract as
    :func:`stream_child` (lines, an early stop, a failure's tail), and a stopped run leaves the
    server ready for the next."""
    (tmp_path / "count.py").write_text(
        "import os, sys, time\n"
        "print('preloaded', 'json' in sys.modules, os.getpid(), flush=True)\n"
        "for i in range(int(sys.argv[1])): print(i, flush=True); time.sleep(0.01)\n"
        "sys.exit(int(sys.argv[2]))\n"
    )
    with processes.Forker(["json"], env={"PYTHONPATH": str(tmp_path)}) as forker:
        lines = []
        assert forker.stream("count", ["5", "0"], lines.append, what="count") is False
        first, *numbers = lines
        assert first.split()[:2] == ["preloaded", "True"] and numbers == [
            f"{i}\n" for i in range(5)
        ]
        assert int(first.split()[2]) != os.getpid()
        stop = forker.stream("count", ["1000", "0"], lambda line: line == "3\n", what="count")
        assert stop is True
        with pytest.raises(processes.ChildFailedError, match="^count: exit code 3") as err:
            forker.stream("count", ["50", "3"], lambda line: None, what="count")
        assert str(err.value).splitlines()[-1] == "49"
        with pytest.raises(processes.ChildFailedError, match="no result within 0.5 s"):
            forker.stream("count", ["1000", "0"], lambda line: None, what="count", timeout_s=0.5)
        assert forker.stream("count", ["2", "0"], lines.append, what="count") is False
    assert forker.proc.poll() is not None  # the server is stopped with the block
