"""On a real streaming hot standby: every read answers as the primary does (row-level
security included), every write is refused with a typed error, migrate checks without
writing, and a reranked search meters its call on the primary through `writer` or, with
no writer, returns the usage row and says so; metering is never lost in silence.

The standby is made the way an operator makes one: `pg_basebackup -R -X stream` from the
test server with the embedded server's own binaries, then started as a second server on
its own socket. One per test module; each test's database reaches it by replication.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pgsift
import psycopg
import pytest
import reaper
from conftest import BIN, PORT, SOCKET_DIR, random_documents, unit
from pgsift import AsyncClient, Client, migrate
from rerank_servers import RerankServer, import_providers, keyword_scorer, loopback_only

DIMS = 8
WORDS = ["refund", "policy", "invoice", "shipping", "return", "warranty", "order", "delivery"]
KEY = "test-key-acme"
OS_USER = "embedded_postgres" if os.geteuid() == 0 else None   # postgres refuses to run as root


def _run(*command: object) -> None:
    subprocess.run([str(c) for c in command], check=True, capture_output=True, timeout=120, user=OS_USER)


@pytest.fixture(scope="module")
def standby_socket() -> Iterator[str]:
    """A hot standby of the test server, streaming from it; yields its socket directory."""
    home = Path(tempfile.mkdtemp(prefix="pgsift-standby-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    os.chmod(home, 0o777)
    data, sock, log = home / "data", home / "sock", home / "standby.log"
    sock.mkdir()
    os.chmod(sock, 0o777)
    try:
        _run(BIN / "pg_basebackup", "-h", SOCKET_DIR, "-p", str(PORT), "-U", "postgres", "-D", str(data),
             "-R", "-X", "stream", "-c", "fast", "--no-sync")
        _run(BIN / "pg_ctl", "-D", str(data), "-w", "-t", "60", "-l", str(log), "-o", '-h ""',
             "-o", f"-k {sock}", "-o", f"-p {PORT}", "start")
    except Exception as exc:
        detail = getattr(exc, "stderr", b"") or b""
        shutil.rmtree(home, ignore_errors=True)
        pytest.fail(f"could not start a standby: {exc}: {detail.decode(errors='replace')}")
    # Stopped below; the guard stops it too when this process is killed before it gets there.
    watch = reaper.guard(int((data / "postmaster.pid").read_text().split()[0]), home)
    try:
        with psycopg.connect(host=str(sock), port=PORT, user="postgres", dbname="postgres") as conn:
            assert conn.execute("select pg_is_in_recovery()").fetchone() == (True,)
        yield str(sock)
    finally:
        try:
            _run(BIN / "pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(home, ignore_errors=True)
            watch.release()


@pytest.fixture
def replica(db: psycopg.Connection, standby_socket: str) -> Iterator[Callable[..., psycopg.Connection]]:
    """Factory: once the standby has replayed everything the primary wrote so far, an
    autocommit connection to this test's database on it (as `user`)."""
    opened: list[psycopg.Connection] = []

    def connect(user: str = "postgres") -> psycopg.Connection:
        caught_up(db, standby_socket)
        conn = psycopg.connect(host=standby_socket, port=PORT, dbname=db.info.dbname, user=user, autocommit=True)
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()


def caught_up(primary: psycopg.Connection, standby_socket: str, timeout: float = 30.0) -> None:
    """Wait until the standby has replayed everything the primary has logged so far (inserted,
    not only written: the test server commits asynchronously)."""
    lsn = primary.execute("select pg_current_wal_insert_lsn()::text").fetchone()[0]
    deadline = time.monotonic() + timeout
    with psycopg.connect(host=standby_socket, port=PORT, user="postgres", dbname="postgres") as conn:
        while not conn.execute("select pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn]).fetchone()[0]:
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby did not replay up to {lsn} within {timeout} s")
            time.sleep(0.02)


@pytest.fixture
def corpus(db: psycopg.Connection) -> None:
    """Tenants "default" and "acme", each with collections "docs" and "notes" (the same
    names, their own documents); t_reader is mapped to acme."""
    rng = np.random.default_rng(3)
    for tenant in ("default", "acme"):
        client = Client(db, tenant=tenant)
        for name in ("docs", "notes"):
            client.create_collection(name, embedding_dims=DIMS)
            client.upsert_documents(name, random_documents(rng, 30, DIMS, words=WORDS, prefix=f"{tenant}-{name}"))
    Client(db).refresh_lexical_stats("docs")      # one collection merged, the other with pending deltas
    db.execute("insert into sift.tenant_roles (tenant, role_name) values ('acme', 't_reader')")


def _queries(n: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    return [(" ".join(rng.choice(WORDS, size=2)), unit(rng.normal(size=DIMS))) for _ in range(n)]


def _ranked(result: pgsift.SearchResult) -> list[tuple[int, str, float]]:
    return [(h.chunk_id, h.source_uri, round(h.score, 9)) for h in result.hits]


def test_every_read_on_the_standby_answers_as_the_primary(db, replica, corpus, figure):
    standby = replica()
    on_primary, on_standby = Client(db), Client(standby)
    searches = 0
    for text, vec in _queries(15):
        for collection, kwargs in (("docs", {"embedding": vec}), ("notes", {"embedding": vec}),
                                   (["docs", "notes"], {"embedding": vec}), ("docs", {}),
                                   ("notes", {"embedding": vec, "rrf_k": 10, "per_document_cap": 1})):
            assert _ranked(on_standby.search(collection, text, **kwargs)) == \
                _ranked(on_primary.search(collection, text, **kwargs))
            searches += 1
        assert on_standby.explain("docs", text, embedding=vec) == on_primary.explain("docs", text, embedding=vec)
        assert on_standby.candidates("notes", text, embedding=vec) == on_primary.candidates("notes", text,
                                                                                              embedding=vec)
    assert searches == 75
    figure("searches on a hot standby, each equal to the primary's", searches)
    assert on_standby.list_collections() == on_primary.list_collections()
    assert on_standby.knobs("docs", rrf_k=5) == on_primary.knobs("docs", rrf_k=5)
    assert migrate(standby) == []          # up to date: checked, nothing written


def test_row_level_security_holds_on_the_standby(db, replica, corpus):
    reader = Client(replica("t_reader"))    # mapped to acme
    text, vec = _queries(1)[0]
    hits = reader.search("docs", text, embedding=vec, top_k=20).hits
    assert hits and all(h.source_uri.startswith("acme-docs") for h in hits)
    assert [c.name for c in reader.list_collections()] == ["docs", "notes"]
    with pytest.raises(pgsift.TenantError):
        Client(replica("t_reader"), tenant="default").search("docs", text, embedding=vec)
    with pytest.raises(pgsift.TenantError):      # a gateway must bind its tenant on the standby too
        Client(replica("t_gateway")).search("docs", text, embedding=vec)


def test_writes_on_the_standby_are_refused_typed(db, replica, corpus):
    client = Client(replica())
    rng = np.random.default_rng(1)
    with pytest.raises(pgsift.ReadOnlyDatabase, match="read-only"):
        client.upsert_documents("docs", random_documents(rng, 1, DIMS, prefix="late"))
    with pytest.raises(pgsift.ReadOnlyDatabase):
        client.create_collection("more", embedding_dims=DIMS)
    with pytest.raises(pgsift.ReadOnlyDatabase):
        client.refresh_lexical_stats("notes")
    with pytest.raises(pgsift.ReadOnlyDatabase):
        client.delete_document("docs", "default-docs-0")
    assert db.execute("select count(*) from sift.documents").fetchone() == (120,)


def test_migrate_on_a_standby_behind_its_primary_says_where_to_run(db, replica, corpus):
    standby = replica()
    db.execute("update sift.schema_functions set sha256 = 'older'")
    caught_up(db, standby.info.host)
    with pytest.raises(pgsift.MigrationError, match="run migrate on the primary"):
        migrate(standby)
    assert migrate(db, force=True) == []
    caught_up(db, standby.info.host)
    assert migrate(standby) == []


@pytest.fixture
def reranked(db, monkeypatch) -> Iterator[RerankServer]:
    """acme's collection "kb" reranked by a loopback Voyage endpoint."""
    loopback_only(monkeypatch)
    import_providers("voyageai")
    monkeypatch.setenv("PGSIFT_TEST_ACME_VOYAGE", KEY)
    pgsift.rerankers.clear_reranker_cache()
    db.execute("select sift.allow_endpoint(url_prefix => 'http://127.0.0.1:')")
    db.execute("select sift.map_secret(tenant => 'acme', secret_ref => 'voyage', "
               "source => 'env:PGSIFT_TEST_ACME_VOYAGE', provider => 'voyage', "
               "endpoints => array['http://127.0.0.1:'])")
    acme = Client(db, tenant="acme")
    acme.create_collection("kb", embedding_dims=DIMS)
    acme.upsert_documents("kb", random_documents(np.random.default_rng(2), 20, DIMS, words=WORDS, prefix="kb"))
    with RerankServer(scorer=keyword_scorer({"warranty": 0.9})) as server:
        acme.register_reranker("voy", "voyage", base_url=server.base_url("voyage"), secret_ref="voyage",
                               timeout_ms=2000, deadline_ms=4000)
        acme.alter_collection("kb", reranker="voy", rerank=True, rerank_top_n=20)
        yield server
    pgsift.rerankers.clear_reranker_cache()


def usage_rows(db: psycopg.Connection) -> list[tuple]:
    return db.execute("select tenant, reranker_alias, ok, documents from sift.rerank_usage "
                      "order by usage_id").fetchall()


def test_a_reranked_search_on_the_standby_meters_on_the_primary(db, replica, reranked):
    result = Client(replica(), tenant="acme", writer=db).search("kb", "warranty", embedding=np.ones(DIMS), top_k=5)
    assert result.reranked and len(result) == 5
    assert result.rerank.usage_recorded is True
    assert usage_rows(db) == [("acme", "voy", True, 20)]


def test_a_reranked_search_on_the_standby_without_a_writer_returns_its_usage(db, replica, reranked, caplog):
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        result = Client(replica(), tenant="acme").search("kb", "warranty", embedding=np.ones(DIMS), top_k=5)
    assert result.reranked and len(result) == 5                   # the search itself is whole
    assert result.rerank.usage_recorded is False
    assert "usage not recorded" in caplog.text and "ReadOnlyDatabase" in caplog.text
    usage = result.rerank.usage
    assert (usage["reranker_alias"], usage["documents"], usage["ok"]) == ("voy", 20, True)
    assert usage_rows(db) == []


async def test_async_reranked_search_on_the_standby_meters_on_the_primary(db, dsn, replica, reranked):
    replica()   # caught up
    async with await psycopg.AsyncConnection.connect(host=replica().info.host, port=PORT, dbname=db.info.dbname,
                                                     user="postgres", autocommit=True) as standby, \
            await psycopg.AsyncConnection.connect(dsn, autocommit=True) as primary:
        result = await AsyncClient(standby, tenant="acme", writer=primary).search(
            "kb", "warranty", embedding=np.ones(DIMS), top_k=5)
    assert result.reranked and result.rerank.usage_recorded is True
    assert usage_rows(db) == [("acme", "voy", True, 20)]
