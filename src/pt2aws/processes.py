"""Subprocesses and ports: a free TCP port, a child that dies with its parent and streams its
output (also forked from a Python that imported its modules once), a process group stopped with
everything it started."""

from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
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


class ChildFailedError(RuntimeError):
    """A child process exited non-zero or ran past its time; the message ends with its output."""


def stream_child(cmd: list[str], on_line, *, what: str, env=None, timeout_s=None) -> bool:
    """Run ``cmd`` (``env`` added to this process's, Python unbuffered, stderr into stdout; it dies
    with this process), each output line to ``on_line``; a true return kills the child. Returns
    whether ``on_line`` stopped it. Raises ChildFailedError (``what``, the last 40 lines): a
    non-zero exit, or ``timeout_s`` seconds passed."""
    tail, stopped, timed_out = deque(maxlen=40), False, threading.Event()
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        preexec_fn=die_with_parent(),  # a killed kernel or make run: the child stops too
    ) as proc:
        timer = threading.Timer(
            timeout_s or threading.TIMEOUT_MAX, lambda: (timed_out.set(), proc.kill())
        )
        timer.start()
        try:
            for line in proc.stdout:
                tail.append(line)
                if on_line(line):
                    stopped = True
                    proc.kill()
                    break
        finally:
            timer.cancel()
        code = proc.wait()
    if timed_out.is_set() or (code and not stopped):
        why = f"no result within {timeout_s} s" if timed_out.is_set() else f"exit code {code}"
        raise ChildFailedError(f"{what}: {why}; last output:\n{''.join(tail)}")
    return stopped


#: Starts the lines a :class:`Forker`'s server writes between the runs' own output.
_MARK = "\x00pt2aws-fork "


class Forker:
    """A child Python that imports ``preload`` once, then runs each ``python -m <module> <args>``
    of :meth:`stream` in a fork of itself: a fresh process without the seconds torch and
    transformers take to import. ``env`` is added to every run's; ``tag`` goes on its command
    line (``ps``, ``pkill -f`` find it and its runs); dies with this process."""

    def __init__(self, preload: list[str], env: dict | None = None, tag: str = "forker"):
        self.preload, self.env, self.tag, self.proc = preload, env or {}, str(tag), None

    def __enter__(self) -> Forker:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def stream(self, module: str, args: list[str], on_line, *, what: str, timeout_s=None) -> bool:
        """:func:`stream_child` for one run of ``module`` with ``args`` (the first starts the
        server)."""
        if self.proc is None:
            code = "from pt2aws.processes import _serve_forks; _serve_forks()"
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, self.tag, *self.preload],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                preexec_fn=die_with_parent(),
            )
        self.proc.stdin.write(json.dumps([module, *args]) + "\n")
        self.proc.stdin.flush()
        tail, stopped, pid, code = deque(maxlen=40), False, [], None
        timed_out = threading.Event()
        timer = threading.Timer(timeout_s or threading.TIMEOUT_MAX, lambda: timed_out.set() or
                                (pid and os.kill(pid[0], signal.SIGKILL)))  # fmt: skip
        timer.start()
        try:
            for line in self.proc.stdout:
                if line.startswith(_MARK):
                    word, value = line[len(_MARK) :].split()
                    if word == "exit":
                        code = int(value)
                        break
                    pid.append(int(value))
                    continue
                tail.append(line)
                if not stopped and on_line(line):
                    stopped = True
                    os.kill(pid[0], signal.SIGKILL)
        finally:
            timer.cancel()
        if timed_out.is_set() or (code != 0 and not stopped):
            why = f"no result within {timeout_s} s" if timed_out.is_set() else f"exit code {code}"
            raise ChildFailedError(f"{what}: {why}; last output:\n{''.join(tail)}")
        return stopped


def _serve_forks() -> None:
    """A :class:`Forker`'s server: imports ``sys.argv[2:]``, then forks a run per stdin line."""
    for name in sys.argv[2:]:
        importlib.import_module(name)
    for line in sys.stdin:
        module, *args = json.loads(line)
        pid = os.fork()
        if pid == 0:
            (die_with_parent() or (lambda: None))()
            print(f"{_MARK}pid {os.getpid()}", flush=True)
            sys.argv, code = [module, *args], 0
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            except SystemExit as done:  # sys.exit(): an int, None or a message
                code = done.code if isinstance(done.code, int) else int(done.code is not None)
                if isinstance(done.code, str):
                    print(done.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        print(f"{_MARK}exit {os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}", flush=True)


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
