"""Behind a real PgBouncer in transaction mode: whatever one client leaves on a pooled
server connection (a garbage session setting, a tenant set with SET) never breaks or
leaks into another client's search, and the client works with psycopg's default
connections (prepared statements on) because it never prepares a statement.

PgBouncer is the Debian package `pgbouncer` (`make system-deps` installs it); each run
starts one on loopback in front of the test server, its pools deliberately small so
that clients share server connections.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pgsift
import psycopg
import pytest
import reaper
from conftest import PORT, SOCKET_DIR, random_documents, unit
from pgsift import AsyncClient, Client

DIMS = 8
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
USERS = ("postgres", "t_gateway", "t_reader")


def _pgbouncer() -> str:
    exe = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.access(exe, os.X_OK):
        pytest.fail("pgbouncer is not installed: `make system-deps` installs the Debian package")
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def bouncer() -> Iterator[int]:
    """A PgBouncer on 127.0.0.1 (transaction pooling, one server connection per database
    and user) in front of the test server's socket; yields its port."""
    exe = _pgbouncer()
    home = Path(tempfile.mkdtemp(prefix="pgsift-pgbouncer-"))
    os.chmod(home, 0o777)
    port = _free_port()
    (home / "users.txt").write_text("".join(f'"{u}" ""\n' for u in USERS))
    (home / "pgbouncer.ini").write_text(f"""
[databases]
* = host={SOCKET_DIR} port={PORT}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {home}/users.txt
pool_mode = transaction
default_pool_size = 1
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,options
; Each test drops its database, and with it the server connections PgBouncer pooled for it:
; check a server connection before handing it out (else a client may get one already closed).
server_check_delay = 0
logfile = {home}/pgbouncer.log
pidfile = {home}/pgbouncer.pid
""")
    for f in home.iterdir():
        os.chmod(f, 0o666)
    # PgBouncer refuses to run as root; as root, it drops to the server's OS user.
    command = [exe, str(home / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", "embedded_postgres"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    watch = reaper.guard(proc.pid, home)     # stops it when this process is killed first
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (home / "pgbouncer.log").read_text() if (home / "pgbouncer.log").exists() else ""
                    out = proc.stdout.read().decode() if proc.stdout and proc.poll() is not None else ""
                    pytest.fail(f"pgbouncer did not start: {out}{log}")
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(home, ignore_errors=True)
        watch.release()


@pytest.fixture
def through(bouncer: int, connect_as: Callable[..., psycopg.Connection]) -> Callable[..., psycopg.Connection]:
    """Factory: a connection to this test's database through PgBouncer, with psycopg's
    defaults (prepare_threshold=5)."""
    return lambda user="postgres": connect_as(user, host="127.0.0.1", port=bouncer)


@pytest.fixture
def corpus(db: psycopg.Connection) -> dict[str, list[str]]:
    """Tenants "default" and "acme", each with a collection "docs" of its own documents;
    returns each tenant's source URIs."""
    rng = np.random.default_rng(7)
    owned = {}
    for tenant in ("default", "acme"):
        client = Client(db, tenant=tenant)
        client.create_collection("docs", embedding_dims=DIMS)
        docs = random_documents(rng, 40, DIMS, words=WORDS, prefix=tenant)
        client.upsert_documents("docs", docs)
        owned[tenant] = [d.source_uri for d in docs]
    db.execute("insert into sift.tenant_roles (tenant, role_name) values ('acme', 't_reader')")
    return owned


def _queries(n: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(11)
    return [(" ".join(rng.choice(WORDS, size=2)), unit(rng.normal(size=DIMS))) for _ in range(n)]


def _uris(result: pgsift.SearchResult) -> list[str]:
    return [h.source_uri for h in result.hits]


def test_garbage_left_on_a_pooled_connection_breaks_no_one(db, through, corpus):
    queries = _queries(12)
    expected = [_uris(Client(db).search("docs", text, embedding=vec, top_k=5)) for text, vec in queries]

    # One client leaves garbage on the only server connection of (database, postgres):
    # settings pgsift once read, a tenant, a forged binding, a tiny HNSW ef_search.
    dirty = through()
    for setting, value in (("pgsift.lexical_budget", "abc"), ("pgsift.lexical_exact_limit", "-1"),
                           ("pgsift.tenant", "acme"), ("pgsift.tenant_txn", "garbage"),
                           ("hnsw.ef_search", "1")):
        dirty.execute(f"set {setting} = '{value}'")

    # Another client lands on that same server connection (the pool holds one) ...
    clean = through()
    assert clean.execute("select current_setting('pgsift.lexical_budget')").fetchone() == ("abc",)
    assert clean.execute("select current_setting('pgsift.tenant')").fetchone() == ("acme",)
    # ... and its searches are exactly those of a direct connection, in its own tenant.
    client = Client(clean)
    got = [_uris(client.search("docs", text, embedding=vec, top_k=5)) for text, vec in queries]
    assert got == expected
    assert all(uri in corpus["default"] for uris in got for uri in uris)
    assert all(client.search("docs", text, embedding=vec).legs == ["dense", "lexical"] for text, vec in queries[:2])


def test_session_settings_left_on_a_pooled_connection_change_no_answer(db, connect_as, through, corpus):
    """extra_float_digits = -15 (every float cut to one digit, in the text sent and in the JSON a
    function writes), IntervalStyle, TimeZone, DateStyle and gin_fuzzy_search_limit, left on the
    one server connection by another client: the Python client's answers are a direct connection's to the bit (scores,
    leg_details, explanations, page cursors, a collection's settings and knobs), whether it binds
    a tenant or not, and what it pins for its transaction is not left behind."""
    queries = _queries(4)

    def answers(client: Client) -> list[object]:
        out: list[object] = [client.list_collections(), client.knobs("docs")]
        for text, vec in queries:
            out.append(client.search("docs", text, embedding=vec, top_k=5).hits)
            out.append(client.explain("docs", text, embedding=vec, top_k=5))
            page = client.search_page("docs", text, embedding=vec, page_size=3)
            following = client.search_page("docs", text, embedding=vec, page_size=3, cursor=page.cursor)
            out.append((page.hits, following.hits))
        return out

    left = {"extra_float_digits": "-15", "IntervalStyle": "iso_8601", "TimeZone": "Asia/Kathmandu",
            "DateStyle": "SQL, DMY", "gin_fuzzy_search_limit": "1"}
    for user, tenant in (("postgres", None), ("t_gateway", "acme")):
        expected = answers(Client(connect_as(user), tenant=tenant))
        hits = expected[2]
        assert isinstance(hits, list) and any(h.leg_details for h in hits)
        assert any(x is not None and x != float(f"{x:.1g}")   # a float cut to one digit would show
                   for h in hits for x in (h.score, h.dense_distance, h.lexical_score))
        dirty = through(user)
        for setting, value in left.items():
            dirty.execute(f"set {setting} = '{value}'")
        clean = through(user)   # the pool holds one server connection per user: the dirty one
        shown = {setting: clean.execute(f"show {setting}").fetchone()[0] for setting in left}
        # PgBouncer gives a client back its own DateStyle and TimeZone, but not the other two.
        assert shown["extra_float_digits"] == "-15" and shown["IntervalStyle"] == "iso_8601"
        assert shown["DateStyle"] != "SQL, DMY" and shown["TimeZone"] != "Asia/Kathmandu"
        assert clean.execute("select 0.123456789::float8::text").fetchone() == ("0.1",)   # a raw query's
        assert answers(Client(clean, tenant=tenant)) == expected, user
        assert clean.execute("show extra_float_digits").fetchone() == ("-15",)   # pinned per transaction only


def test_a_tenant_set_with_set_is_never_honoured_through_the_pooler(db, through, corpus):
    text, vec = _queries(1)[0]
    gateway = through("t_gateway")
    gateway.execute("set pgsift.tenant = 'acme'")
    # Unbound in its transaction, the gateway gets no tenant at all, not the one left behind.
    with pytest.raises(pgsift.TenantError):
        Client(gateway).search("docs", text, embedding=vec)
    # Bound per transaction, it gets exactly the tenant it names, on the same server connection.
    hits = Client(through("t_gateway"), tenant="default").search("docs", text, embedding=vec).hits
    assert hits and all(h.source_uri in corpus["default"] for h in hits)
    # A mapped role acts for its own tenant whatever anyone left on the connection.
    reader = through("t_reader")
    reader.execute("set pgsift.tenant = 'default'")
    hits = Client(reader).search("docs", text, embedding=vec).hits
    assert hits and all(h.source_uri in corpus["acme"] for h in hits)


def test_default_connections_search_concurrently_through_the_pooler(db, through, corpus, figure):
    """Eight clients on psycopg's default connections (which prepare a statement from its
    fifth run) share one server connection; 20 searches each, every one succeeds and equals
    the direct connection's answer."""
    queries = _queries(20)
    expected = [_uris(Client(db).search("docs", text, embedding=vec, top_k=5)) for text, vec in queries]
    clients = [Client(through()) for _ in range(8)]
    failures: list[BaseException] = []
    wrong: list[int] = []
    done = [0]
    lock = threading.Lock()

    def work(client: Client) -> None:
        for i, (text, vec) in enumerate(queries):
            try:
                uris = _uris(client.search("docs", text, embedding=vec, top_k=5))
            except Exception as exc:   # counted, asserted below
                with lock:
                    failures.append(exc)
                continue
            with lock:
                done[0] += 1
                if uris != expected[i]:
                    wrong.append(i)

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert wrong == []
    assert done[0] == 8 * len(queries)
    figure("searches through PgBouncer on default connections, 0 failed", done[0])


def test_async_clients_through_the_pooler(db, bouncer, corpus):
    queries = _queries(10)
    expected = [_uris(Client(db).search("docs", text, embedding=vec, top_k=5)) for text, vec in queries]

    async def worker() -> list[list[str]]:
        # One connection per task: a connection runs one transaction at a time.
        async with await psycopg.AsyncConnection.connect(host="127.0.0.1", port=bouncer, dbname=db.info.dbname,
                                                         user="postgres", autocommit=True) as conn:
            client = AsyncClient(conn)
            return [_uris(await client.search("docs", text, embedding=vec, top_k=5)) for text, vec in queries]

    async def main() -> list[list[list[str]]]:
        return list(await asyncio.gather(*(worker() for _ in range(4))))

    assert asyncio.run(main()) == [expected] * 4


def test_clients_writing_through_the_pooler_leave_no_prepared_statement(db, through, corpus):
    """Writes go through PgBouncer (before 1.21: no prepared statements in transaction mode)
    from two default connections sharing its one server connection, in turn: psycopg's
    executemany would prepare its statement (whatever the connection's threshold), and the
    other client's own statement of the same name, or a later write on another server
    connection, would then fail."""
    first, second = Client(through()), Client(through())
    rng = np.random.default_rng(5)
    for turn in range(3):
        for n, client in enumerate((first, second)):
            docs = random_documents(rng, 3, DIMS, words=WORDS, prefix=f"w{turn}-{n}")
            assert len(client.upsert_documents("docs", docs)) == 3
    # (the pool's one server connection: what either client would find there)
    assert first.source.execute("select array_agg(name) from pg_prepared_statements").fetchone() == (None,)
    assert db.execute("select count(*) from sift.documents where source_uri like 'w%'").fetchone() == (18,)
