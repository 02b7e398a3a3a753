"""The embedded server sizes itself from the machine (pgsift.embedded): the settings for a
machine, the memory it may use (PGSIFT_SERVER_MEMORY, a container's limit), and a real
server started in a fresh PGSIFT_HOME running with them, restarted only when they change."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest
from pgsift import ServerUnavailable, embedded

GB = 2**30


def test_settings_follow_the_machine():
    small = embedded.settings_for(1 * GB, 1)
    assert small["shared_buffers"] == "256MB" and small["maintenance_work_mem"] == "64MB"
    assert small["max_parallel_maintenance_workers"] == "0" and small["max_wal_size"] == "1GB"
    laptop = embedded.settings_for(16 * GB, 8)
    assert laptop["shared_buffers"] == "4096MB" and laptop["effective_cache_size"] == "8192MB"
    assert laptop["maintenance_work_mem"] == "1024MB" and laptop["max_parallel_maintenance_workers"] == "7"
    big = embedded.settings_for(256 * GB, 64)
    assert big["shared_buffers"] == "8192MB" and big["maintenance_work_mem"] == "2048MB"
    assert big["max_parallel_maintenance_workers"] == "8"
    assert all(s["jit"] == "off" and s["random_page_cost"] == "1.1" for s in (small, laptop, big))


def test_the_memory_to_size_for(monkeypatch):
    monkeypatch.setenv("PGSIFT_SERVER_MEMORY", "3GB")
    assert embedded.machine()[0] == 3 * GB
    monkeypatch.setenv("PGSIFT_SERVER_MEMORY", "512mb")
    assert embedded.machine()[0] == 512 * 2**20
    monkeypatch.setenv("PGSIFT_SERVER_MEMORY", "lots")
    with pytest.raises(ServerUnavailable, match="PGSIFT_SERVER_MEMORY"):
        embedded.machine()
    monkeypatch.delenv("PGSIFT_SERVER_MEMORY")
    memory, cores = embedded.machine()
    assert 0 < memory <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") and cores >= 1


def test_a_fresh_embedded_server_runs_sized(monkeypatch):
    home = Path(tempfile.mkdtemp(prefix="pgsift-home-"))
    home.chmod(0o755)
    monkeypatch.setenv("PGSIFT_HOME", str(home))
    monkeypatch.setenv("PGSIFT_SERVER_MEMORY", "1GB")

    def running() -> tuple[str, str, int]:
        with psycopg.connect(embedded.start()) as conn:
            buffers = conn.execute("select current_setting('shared_buffers')").fetchone()[0]
            jit = conn.execute("select current_setting('jit')").fetchone()[0]
        return buffers, jit, embedded.status()["pid"]

    try:
        buffers, jit, pid = running()
        assert (buffers, jit) == ("256MB", "off")
        assert "include_if_exists = 'pgsift.conf'" in (home / "pgdata" / "postgresql.conf").read_text()
        assert running() == (buffers, jit, pid)            # unchanged: not restarted
        monkeypatch.setenv("PGSIFT_SERVER_MEMORY", "2GB")   # another machine: sized again
        buffers, _jit, new_pid = running()
        assert buffers == "512MB" and new_pid != pid
        # Someone is connected: no restart; the rest is reloaded, shared_buffers waits.
        monkeypatch.setenv("PGSIFT_SERVER_MEMORY", "4GB")
        with psycopg.connect(embedded.status()["url"]) as other:
            uri = embedded.start()
            assert embedded.status()["pid"] == new_pid
            with psycopg.connect(uri) as conn:
                assert conn.execute("select current_setting('maintenance_work_mem'), "
                                    "current_setting('shared_buffers')").fetchone() == ("256MB", "512MB")
                assert conn.execute("select pending_restart from pg_settings where name = 'shared_buffers'"
                                    ).fetchone() == (True,)
            other.execute("select 1")
    finally:
        embedded.stop()
        shutil.rmtree(home, ignore_errors=True)
