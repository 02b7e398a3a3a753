"""Stops what a test run started, however the run ends.

A server the suite starts (the embedded test server, a standby, PgBouncer) is
stopped by the code that started it when the run ends normally. That code never
runs when the process is killed (an xdist worker torn down, a CI timeout, kill
-9), and a PostgreSQL left behind keeps running with its data folder deleted.

`guard(pid, *paths)` starts a watcher process of its own session that holds
the read end of a pipe whose write end only this process holds. When this
process ends, however it ends, the kernel closes the pipe; the watcher then
stops the guarded process (fast shutdown, then immediate, then kill) and
removes the paths. `Guard.release()` is for a fixture that stopped its server
itself: the watcher finds nothing left to stop.

Run as a script, this file is the watcher: `reaper.py PID CREATE_TIME PATH...`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

# Guards live as long as the process: a collected Popen would close its pipe and fire.
_GUARDS: list[Guard] = []


class Guard:
    """A watcher over one process; `release()` ends the watch (the process was stopped)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def release(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def guard(pid: int, *paths: Path | str) -> Guard:
    """Stop process `pid` and remove `paths` once this process is gone (see the module)."""
    created = psutil.Process(pid).create_time()
    proc = subprocess.Popen([sys.executable, __file__, str(pid), repr(created), *map(str, paths)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    g = Guard(proc)
    _GUARDS.append(g)
    return g


def _same(pid: int, created: float) -> psutil.Process | None:
    """The process, if it is still the one guarded (not a later one given the same pid)."""
    try:
        p = psutil.Process(pid)
        return p if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE else None
    except psutil.Error:
        return None


def _stop(pid: int, created: float) -> None:
    # PostgreSQL: SIGINT is a fast shutdown, SIGQUIT an immediate one; PgBouncer exits on SIGINT.
    for sig, wait in ((signal.SIGINT, 10.0), (signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
        p = _same(pid, created)
        if p is None:
            return
        try:
            p.send_signal(sig)
            p.wait(timeout=wait)
        except psutil.TimeoutExpired:
            continue
        except psutil.Error:
            return


def _watch(pid: int, created: float, paths: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # a Ctrl-C reaches the whole foreground group
    sys.stdin.buffer.read()                         # returns when the guarding process is gone
    _stop(pid, created)
    deadline = time.monotonic() + 10
    for path in paths:
        while os.path.exists(path):
            shutil.rmtree(path, ignore_errors=True)
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)


if __name__ == "__main__":
    _watch(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])
