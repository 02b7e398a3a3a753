"""Every server the suite starts is stopped by it, however the run ends (issue 36 item 4).

Each case is a process that starts the test server exactly as a pytest run (or an xdist
worker) does, by importing tests/conftest.py, and then ends: normally, on an uncaught
error (a failing session), on Ctrl-C, on SIGTERM and on SIGKILL (a worker torn down, a CI
timeout). Afterwards its postmaster must be gone and its data folder removed. A run used
to leave one PostgreSQL per worker behind, parent PID 1, its data folder already deleted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

TESTS = Path(__file__).parent

# Starts the server as the suite does, says where, then ends as told.
CHILD = """
import os, signal, sys, time
sys.path[:0] = [sys.argv[1]]
import conftest
print(conftest._SERVER.get_pid(), conftest._PGDATA_PARENT, flush=True)
how = sys.argv[2]
if how == "error":
    raise RuntimeError("a failing session")
if how != "exit":
    time.sleep(600)     # until the test signals it
"""

ENDINGS = {"exit": None, "error": None, "ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM,
           "sigkill": signal.SIGKILL}


def _gone(pid: int, created: float | None) -> bool:
    if created is None:   # gone before it was first looked up
        return True
    try:
        p = psutil.Process(pid)
        return p.create_time() != created or p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_every_way_a_run_ends_stops_its_server_and_removes_its_folder():
    children = {how: subprocess.Popen([sys.executable, "-c", CHILD, str(TESTS), how], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
                for how in ENDINGS}
    servers: dict[str, tuple[int, float | None, Path]] = {}
    try:
        for how, child in children.items():
            assert child.stdout is not None
            line = child.stdout.readline().split()
            assert line, f"{how}: the server did not start: {child.stderr.read() if child.stderr else ''}"
            pid = int(line[0])
            try:
                created: float | None = psutil.Process(pid).create_time()
            except psutil.NoSuchProcess:   # the run ended, and stopped it, before it was looked up
                created = None
            servers[how] = (pid, created, Path(line[1]))
        for how, sig in ENDINGS.items():
            if sig is not None:
                children[how].send_signal(sig)
        for child in children.values():
            child.wait(timeout=60)
        # The watcher acts when its process is gone; give it time, without timing it.
        deadline = time.monotonic() + 90
        left = dict(servers)
        while left and time.monotonic() < deadline:
            left = {how: s for how, s in left.items() if not (_gone(s[0], s[1]) and not s[2].exists())}
            time.sleep(0.2)
        assert not left, {how: (f"server {'running' if not _gone(pid, created) else 'stopped'}, "
                                f"folder {'left' if folder.exists() else 'removed'}")
                          for how, (pid, created, folder) in left.items()}
        assert children["error"].returncode == 1
    finally:
        for child in children.values():
            if child.poll() is None:
                child.kill()
        for pid, created, _folder in servers.values():
            if not _gone(pid, created):
                os.kill(pid, signal.SIGQUIT)
