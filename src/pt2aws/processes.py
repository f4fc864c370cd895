"""Subprocesses and ports: a free TCP port, a child that dies with its parent, a process group
stopped with everything it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` free now (another process may take it before the caller binds)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def die_with_parent():
    """A ``preexec_fn`` sending the child SIGTERM when its parent dies (Linux
    ``prctl(PR_SET_PDEATHSIG)``; ``None`` elsewhere): a killed kernel stops its ``torchrun``."""
    if not sys.platform.startswith("linux"):
        return None

    def set_death_signal() -> None:
        import ctypes

        pr_set_pdeathsig = 1  # <linux/prctl.h>
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)

    return set_death_signal


def stop_process_group(proc: subprocess.Popen, timeout_s: float = 15.0) -> None:
    """Stop ``proc`` (``start_new_session=True``) and its process group: SIGTERM to ``proc``,
    then the group, SIGKILL after ``timeout_s``; returns once reaped (also when already gone)."""
    pgid = proc.pid  # start_new_session: the group id is the leader's pid
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            break
        end = time.monotonic() + (timeout_s if sig == signal.SIGTERM else 5)
        while time.monotonic() < end and process_group_alive(pgid):
            time.sleep(0.1)
        if not process_group_alive(pgid):
            break
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def process_group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is alive, zombies (which ``killpg`` counts) not."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
