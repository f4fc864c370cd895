"""Subprocesses and ports: a free TCP port, a child that dies with its parent and streams its
output (also forked from a Python that imported its modules once), a process group stopped with
everything it started."""

from __future__ import annotations

import contextlib
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
    with _popen(cmd, env) as proc:
        return _follow(proc.stdout, on_line, proc.kill, proc.wait, what=what, timeout_s=timeout_s)


def _popen(cmd: list[str], env: dict | None, **kwargs) -> subprocess.Popen:
    """``cmd``, ``env`` added, Python unbuffered, stderr into stdout; it dies with this process (a
    killed kernel or ``make run``: the child stops too)."""
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                            preexec_fn=die_with_parent(), **kwargs)  # fmt: skip


def _follow(lines, on_line, kill, exit_code, *, what: str, timeout_s) -> bool:
    """Each of ``lines`` to ``on_line`` (true: ``kill()``, read no more), ``kill()`` too after
    ``timeout_s``; then ``exit_code()``. Whether ``on_line`` stopped it; ChildFailedError."""
    tail, stopped, timed_out = deque(maxlen=40), False, threading.Event()
    timer = threading.Timer(timeout_s or threading.TIMEOUT_MAX, lambda: (timed_out.set(), kill()))
    timer.start()
    try:
        for line in lines:
            tail.append(line)
            if on_line(line):
                stopped = True
                kill()
                break
    finally:
        timer.cancel()
    code = exit_code()
    if timed_out.is_set() or (code != 0 and not stopped):
        why = f"no result within {timeout_s} s" if timed_out.is_set() else f"exit code {code}"
        raise ChildFailedError(f"{what}: {why}; last output:\n{''.join(tail)}")
    return stopped


#: Starts the lines a :class:`Forker`'s server writes between the runs' own output.
_MARK = "\x00pt2aws-fork "


class Forker(contextlib.AbstractContextManager):
    """A child Python that imports ``preload`` once, then runs each ``python -m <module> <args>``
    of :meth:`stream` in a fork of itself: a fresh process without the seconds torch and
    transformers take to import. ``env`` is added to every run's; ``tag`` goes on its command
    line (``ps``, ``pkill -f`` find it and its runs); dies with this process."""

    def __init__(self, preload: list[str], env: dict | None = None, tag: str = "forker"):
        self.preload, self.env, self.tag, self.proc = preload, env or {}, str(tag), None

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def stream(self, module: str, args: list[str], on_line, *, what: str, timeout_s=None) -> bool:
        """:func:`stream_child` for ``python -m <module> <args>`` (the first starts the server)."""
        if self.proc is None:
            code = "from pt2aws.processes import _serve_forks; _serve_forks()"
            cmd = [sys.executable, "-c", code, self.tag, *self.preload]
            self.proc = _popen(cmd, self.env, stdin=subprocess.PIPE)
        self.proc.stdin.write(json.dumps([module, *args]) + "\n")
        self.proc.stdin.flush()
        pid, code = [], [None]

        def run_lines():  # the run's own lines; the server's marks give its pid, then its exit
            for line in self.proc.stdout:
                if not line.startswith(_MARK):
                    yield line
                    continue
                word, value = line[len(_MARK) :].split()
                if word == "exit":
                    code[0] = int(value)
                    return
                pid.append(int(value))

        def exit_code():
            for _ in lines:  # after a stop: the killed run's last lines, up to its exit
                pass
            return code[0]

        lines = run_lines()
        kill = lambda: pid and os.kill(pid[0], signal.SIGKILL)  # noqa: E731
        return _follow(lines, on_line, kill, exit_code, what=what, timeout_s=timeout_s)


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
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout_s)
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
