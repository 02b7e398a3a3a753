"""migrate and install_script: recorded, frozen, idempotent (an unchanged re-run takes no
lock), concurrency-safe, safe under live searches, installable by a non-superuser, and the
same catalog either way; plus the rules every function in schema sift follows."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shlex
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import BIN, SOCKET_DIR, random_documents
from pglast import ast
from pglast.parser import parse_sql
from pglast.visitors import Visitor
from pgsift import Client
from pgsift import queries as q
from pgsift.migrate import is_current
from pgsift.migrate_async import migrate as amigrate
from pgsift.schema import (
    SQUASHES,
    SqlFile,
    Squash,
    function_files,
    functions_sha256,
    migration_files,
    with_vector_schema,
)

ROOT = Path(__file__).resolve().parent.parent
PSQL = BIN / "psql"

# What "the same catalog" means: every definition in schema sift, its policies and grants.
CATALOG = {
    "functions": """
        select p.proname, pg_get_functiondef(p.oid), p.proacl::text
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = 'sift' order by 1, 2""",
    "function_comments": """
        select p.oid::regprocedure::text, obj_description(p.oid, 'pg_proc')
        from pg_proc p where p.pronamespace = 'sift'::regnamespace order by 1""",
    "relations": """
        select c.relname, c.relkind, c.relrowsecurity, c.relacl::text from pg_class c
        where c.relnamespace = 'sift'::regnamespace order by 1""",
    "columns": """
        select c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
               a.attnotnull, a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid)
        from pg_class c
        join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
        left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
        where c.relnamespace = 'sift'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'c')
        order by 1, 2""",
    "constraints": """
        select coalesce(conrelid::regclass::text, contypid::regtype::text), conname, contype,
               pg_get_constraintdef(oid)
        from pg_constraint where connamespace = 'sift'::regnamespace order by 1, 2""",
    "types": """
        select t.typname, t.typtype, format_type(t.typbasetype, t.typtypmod), t.typnotnull
        from pg_type t where t.typnamespace = 'sift'::regnamespace and t.typtype in ('d', 'c')
        order by 1""",
    "indexes": "select tablename, indexname, indexdef from pg_indexes where schemaname = 'sift' order by 1, 2",
    "triggers": """
        select tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) from pg_trigger
        where not tgisinternal
          and tgrelid in (select oid from pg_class where relnamespace = 'sift'::regnamespace)
        order by 1, 2""",
    "policies": """
        select tablename, policyname, cmd, roles::text, qual, with_check from pg_policies
        where schemaname = 'sift' order by 1, 2""",
    "data": """
        select 'knob ' || name || ' ' || default_value::text from sift.knob_defs
        union all select 'preset ' || name || ' ' || knobs::text from sift.knob_presets
        union all select 'provider ' || provider from sift.reranker_providers
        order by 1""",
    "migrations": "select version, sha256 from sift.schema_migrations order by 1",
    "functions_sha": "select sha256 from sift.schema_functions",
}


def catalog(dsn: str) -> dict[str, list[tuple]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {name: conn.execute(q).fetchall() for name, q in CATALOG.items()}


@pytest.fixture
def empty_database(db):
    """Factory: a brand-new database without pgsift (not even the vector extension)."""
    created = []

    def make(owner: str | None = None) -> str:
        name = f"pgsift_empty_{uuid.uuid4().hex[:12]}"
        db.execute(f'create database "{name}"' + (f' owner "{owner}"' if owner else ""))
        created.append(name)
        return f"postgresql://{db.info.user}@/{name}?host={SOCKET_DIR}&port={db.info.port}"

    yield make
    for name in created:
        db.execute(f'drop database if exists "{name}" with (force)')


def run_psql(dsn: str, script: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(PSQL), "-v", "ON_ERROR_STOP=1", "-X", "-q", "-f", str(script), dsn],
                          capture_output=True, text=True, timeout=120)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- migrate ------------------------------------------------------------------------------

def test_first_migrate_applies_every_migration_in_order(empty_database):
    with psycopg.connect(empty_database(), autocommit=True) as conn:
        applied = pgsift.migrate(conn)
        assert applied == [p.stem for p in sorted((ROOT / "migrations").glob("*.sql"))]
        assert conn.execute("select count(*) from pg_proc where proname = 'search' "
                            "and pronamespace = 'sift'::regnamespace").fetchone()[0] == 1
        assert conn.execute("select sha256 from sift.schema_functions").fetchone()[0] == functions_sha256()


def test_migrate_is_idempotent(db, dsn):
    before = catalog(dsn)
    assert pgsift.migrate(db) == []
    assert pgsift.migrate(db) == []
    assert catalog(dsn) == before


def test_an_unchanged_rerun_takes_no_lock_and_a_busy_table_is_retried_not_waited_on(db, dsn):
    # A writer's open transaction holds a lock that trigger DDL on sift.chunks waits for (a
    # reader's never is: see the test below).
    with psycopg.connect(dsn) as holder:
        holder.execute("lock table sift.chunks in row exclusive mode")
        # Unchanged: no lock taken (one would be refused past its lock_timeout, below).
        assert pgsift.migrate(db) == []
        with pytest.raises(pgsift.MigrationError, match="could not take the locks"):
            pgsift.migrate(db, force=True, attempts=2)   # gives up, never sits in the lock queue
        holder.rollback()
    assert pgsift.migrate(db, force=True) == []


def test_a_dropped_function_comes_back_with_force(db):
    db.execute("drop function sift.explain")
    db.execute("comment on function sift.rrf(bigint[], bigint[], double precision, double precision) "
               "is 'tampered'")
    assert pgsift.migrate(db) == []   # unchanged files: nothing re-applied ...
    assert db.execute("select to_regproc('sift.explain') is null").fetchone()[0]
    assert pgsift.migrate(db, force=True) == []   # ... unless asked
    assert db.execute("select to_regproc('sift.explain') is not null").fetchone()[0]
    comment = db.execute("select obj_description('sift.rrf'::regproc, 'pg_proc')").fetchone()[0]
    assert comment.startswith("Weighted Reciprocal Rank Fusion")


def test_a_changed_files_sha_reapplies_the_functions(db):
    db.execute("drop function sift.explain")
    db.execute("update sift.schema_functions set sha256 = 'older release'")
    assert pgsift.migrate(db) == []
    assert db.execute("select to_regproc('sift.explain') is not null").fetchone()[0]
    assert db.execute("select sha256 from sift.schema_functions").fetchone()[0] == functions_sha256()


def test_schema_migrations_records_version_and_sha256(db):
    rows = db.execute("select version, sha256, applied_at is not null from sift.schema_migrations "
                      "order by version").fetchall()
    expected = [(p.stem, sha256(p), True) for p in sorted((ROOT / "migrations").glob("*.sql"))]
    assert rows == expected
    assert [(m.version, m.sha256) for m in migration_files()] == [(v, s) for v, s, _ in expected]


def test_changed_migration_is_refused(db):
    db.execute("update sift.schema_migrations set sha256 = repeat('0', 64) where version = '0001_schema'")
    db.execute("drop function sift.explain")
    with pytest.raises(pgsift.MigrationError, match="0001_schema"):
        pgsift.migrate(db, force=True)
    # The whole migrate rolled back: nothing was re-applied, and the connection is usable.
    assert db.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert db.execute("select to_regproc('sift.explain')").fetchone()[0] is None


async def test_changed_migration_is_refused_async(db, dsn):
    db.execute("update sift.schema_migrations set sha256 = repeat('0', 64) where version = '0001_schema'")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
        with pytest.raises(pgsift.MigrationError, match="0001_schema"):
            await amigrate(aconn)


def test_concurrent_migrates_on_a_new_database(empty_database):
    url = empty_database()
    workers = 3
    barrier = threading.Barrier(workers)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run():
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                barrier.wait(timeout=30)
                results.append(pgsift.migrate(conn))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    versions = [m.version for m in migration_files()]
    assert sorted(results, key=len) == [[]] * (workers - 1) + [versions]
    with psycopg.connect(url) as conn:
        rows = conn.execute("select version, count(*) from sift.schema_migrations group by 1 order by 1")
        assert rows.fetchall() == [(v, 1) for v in versions]


def test_migrates_take_turns_on_a_lock_no_other_role_may_take(db, dsn, connect_as):
    """Two migrates serialize on the ledger's table lock (an advisory key, which any role
    could hold, hung every migrate: issue 37 item 2); no shipped role may lock the ledger."""
    with psycopg.connect(dsn) as running:
        running.execute("lock table sift.schema_migrations in share row exclusive mode")   # a migrate's prelude
        done: list[list[str]] = []

        def second() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                done.append(pgsift.migrate(conn))

        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive()                        # waits its turn
        running.commit()
        thread.join(timeout=30)
    assert done == [[]]
    for role in ("t_reader", "t_writer", "t_admin", "t_gateway", "t_nobody"):
        conn = connect_as(role)
        for table in ("schema_migrations", "schema_functions", "operator_locks"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(f"lock table sift.{table} in access share mode")

def test_searches_survive_migrates_under_load(db, dsn, figure):
    """Searches run from several connections while migrate re-applies every function file
    (forced: the case of an upgrade) again and again: none fails, each waits at most briefly."""
    client = Client(db)
    client.create_collection("c", embedding_dims=8)
    rng = np.random.default_rng(0)
    client.upsert_documents("c", random_documents(rng, 40, 8))
    stop = threading.Event()
    failures: list[BaseException] = []
    searches = [0]

    def search_loop(seed: int) -> None:
        local = np.random.default_rng(seed)
        with psycopg.connect(dsn, autocommit=True) as conn:
            c = Client(conn)
            while not stop.is_set():
                try:
                    assert len(c.search("c", "alpha bravo", embedding=local.normal(size=8), top_k=5)) == 5
                    searches[0] += 1
                except BaseException as exc:
                    failures.append(exc)

    threads = [threading.Thread(target=search_loop, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(6):
                assert pgsift.migrate(conn, force=True) == []
                assert pgsift.migrate(conn) == []
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert failures == []
    assert searches[0] > 0
    figure("searches during 12 migrate runs (6 forced), 0 failed", searches[0])


# -- a non-superuser installs it, as on a managed server -------------------------------------

def test_a_non_superuser_with_createrole_installs_and_uses_it(db, empty_database):
    role = f"t_installer_{uuid.uuid4().hex[:8]}"
    db.execute(f'create role "{role}" login createrole')
    url = empty_database()
    with psycopg.connect(url, autocommit=True) as su:
        # What a managed platform does for its admin: the extension exists, CREATE is granted.
        su.execute("create extension vector")
        dbname = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        su.execute(f'grant create on database "{dbname}" to "{role}"')
    installer_url = url.replace(f"postgresql://{db.info.user}@", f"postgresql://{role}@")
    with psycopg.connect(installer_url, autocommit=True) as conn:
        assert conn.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()[0] is False
        assert pgsift.migrate(conn) == [m.version for m in migration_files()]
        client = Client(conn)
        client.create_collection("c", embedding_dims=8)   # the definer function builds the index
        client.upsert_documents("c", random_documents(np.random.default_rng(1), 5, 8))
        assert len(client.search("c", "alpha", embedding=np.ones(8), top_k=3)) == 3
        assert conn.execute("select count(*) from pg_indexes where schemaname = 'sift' "
                            "and indexname = 'chunks_hnsw_cosine_8'").fetchone()[0] == 1


# -- install_script through psql ------------------------------------------------------------

def test_install_script_matches_migrate(empty_database, tmp_path):
    assert PSQL.exists(), PSQL
    script = tmp_path / "pgsift.sql"
    script.write_text(pgsift.install_script(), encoding="utf-8")

    by_psql = empty_database()
    first = run_psql(by_psql, script)
    assert first.returncode == 0, first.stderr
    second = run_psql(by_psql, script)   # running it again is fine
    assert second.returncode == 0, second.stderr

    by_migrate = empty_database()
    with psycopg.connect(by_migrate, autocommit=True) as conn:
        pgsift.migrate(conn)

    got, want = catalog(by_psql), catalog(by_migrate)
    assert want["functions"], "migrate installed no functions?"
    for part in CATALOG:
        assert got[part] == want[part], part


def test_install_script_then_migrate_applies_nothing(empty_database, tmp_path):
    script = tmp_path / "pgsift.sql"
    script.write_text(pgsift.install_script(), encoding="utf-8")
    url = empty_database()
    assert run_psql(url, script).returncode == 0
    with psycopg.connect(url, autocommit=True) as conn:
        before = conn.execute("select sha256, applied_at from sift.schema_functions").fetchall()
        assert pgsift.migrate(conn) == []
        assert conn.execute("select sha256, applied_at from sift.schema_functions").fetchall() == before


def documented_psql_command() -> list[str]:
    """docs/install.md's psql command for the install file, as an argv (psql: the test server's)."""
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    found = re.search(r"`pgsift install-sql > install\.sql`, then `(psql [^`]+)`", text)
    assert found, "docs/install.md names no psql command for install.sql"
    argv = shlex.split(found.group(1))
    return [str(PSQL), *argv[1:]]


def test_the_documented_psql_command_installs_without_a_warning(empty_database, tmp_path):
    """What install.md tells a user to run, as written: no WARNING (the script is one transaction
    itself: psql -1 around it warns twice), installed, and a rerun is fine."""
    argv = documented_psql_command()
    (tmp_path / "install.sql").write_text(pgsift.install_script(), encoding="utf-8")
    url = empty_database()
    for _ in range(2):
        run = subprocess.run([*argv, url], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "WARNING" not in run.stderr, [line for line in run.stderr.splitlines() if "WARNING" in line]
    with psycopg.connect(url, autocommit=True) as conn:
        assert is_current(conn)

    # A failing script fails the command and leaves nothing behind (ON_ERROR_STOP: one transaction).
    broken = pgsift.install_script().replace("\ncommit;", "\nselect 1 / 0;\ncommit;")
    (tmp_path / "install.sql").write_text(broken, encoding="utf-8")
    other = empty_database()
    run = subprocess.run([*argv, other], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "division by zero" in run.stderr
    with psycopg.connect(other, autocommit=True) as conn:
        assert conn.execute("select to_regnamespace('sift')").fetchone() == (None,)


def test_the_vector_schema_is_written_into_every_file(empty_database):
    # pgvector in another schema (Supabase puts it in `extensions`): the installer writes that
    # schema wherever the files say @extschema:vector@, and nothing needs `public`.
    url = empty_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("create schema extensions")
        conn.execute("create extension vector schema extensions")
        conn.execute("revoke create on schema public from public")
        pgsift.migrate(conn)
        client = Client(conn)
        client.create_collection("c", embedding_dims=4)
        client.upsert_documents("c", random_documents(np.random.default_rng(2), 3, 4))
        assert len(client.search("c", "alpha", embedding=[1, 0, 0, 0], top_k=2)) == 2
        assert conn.execute("select count(*) from pg_proc where pronamespace = 'sift'::regnamespace "
                            "and prosrc like '%%public.%%'").fetchone()[0] == 0
    assert "@extschema:vector@" not in with_vector_schema(function_files()[0].text, '"extensions"')


# -- squashed migrations ---------------------------------------------------------------------

# The seeded tables whose rows the migrations write alike wherever they run (cursor_keys: a
# random key; the ledgers: by design).
SEEDED = ("knob_defs", "knob_presets", "language_configs", "reranker_providers", "reranker_limits",
          "operator_locks")


@pytest.fixture(scope="module", params=SQUASHES, ids=lambda squash: squash.release)
def squash(request: pytest.FixtureRequest) -> Squash:
    """Each squash of pgsift.schema.SQUASHES (every one stays tested)."""
    return request.param


@pytest.fixture(scope="module")
def squashed_tree(squash: Squash, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """python/, migrations/ and sql/ as of the last commit that shipped the migrations the
    squash replaces."""
    run = subprocess.run(["git", "-C", str(ROOT), "archive", squash.commit, "python", "migrations", "sql"],
                         capture_output=True, check=False)
    if run.returncode != 0:
        pytest.fail(f"commit {squash.commit} is missing from this checkout (a shallow clone? git fetch "
                    f"--unshallow): {run.stderr.decode().strip()}")
    tree = tmp_path_factory.mktemp("squashed")
    with tarfile.open(fileobj=io.BytesIO(run.stdout)) as archive:
        if hasattr(tarfile, "fully_trusted_filter"):   # Python 3.10.12+, 3.11.4+
            archive.extractall(tree, filter="fully_trusted")
        else:   # pragma: no cover
            archive.extractall(tree)
    return tree


def migrations_only(url: str, files: list[SqlFile]) -> None:
    """The runner's prelude and these migrations, no function file: what the files make alone."""
    with psycopg.connect(url) as conn:
        for statement in q.MIGRATE_PRELUDE:
            conn.execute(statement)
        for f in files:
            conn.execute(with_vector_schema(f.text, "public"))


def schema_dump(url: str) -> str:
    """pg_dump --schema-only: every definition, comment, constraint, storage, policy and grant."""
    run = subprocess.run([str(BIN / "pg_dump"), "--schema-only", "--restrict-key=pgsift", "-d", url],
                         capture_output=True, text=True, timeout=120, check=True)
    return run.stdout


def seeded_rows(url: str) -> dict[str, list[tuple]]:
    with psycopg.connect(url) as conn:
        return {t: sorted(conn.execute(f"select * from sift.{t}").fetchall(), key=repr) for t in SEEDED}


def test_the_squash_makes_what_the_migrations_it_replaces_made(empty_database, squash, squashed_tree):
    """The squash's files, run where the replaced migrations would run, make the same schema
    (pg_dump --schema-only: comments, domains, CHECKs, storage, grants) and the same seeded
    rows; each replaced migration is the text its declared sha256 names (the file at the
    squash's commit), so a database that ran them has what the squash makes."""
    old = sorted((squashed_tree / "migrations").glob("*.sql"))
    replaced = dict(squash.replaced)
    assert [p.stem for p in old if p.stem in replaced] == list(replaced)
    assert {p.stem: sha256(p) for p in old if p.stem in replaced} == replaced
    before = [p for p in old if p.stem not in replaced]
    assert [p.stem for p in before] == [m.version for m in migration_files()][:len(before)]
    new = [m for m in migration_files() if m.version <= squash.into[-1]]
    assert [m.version for m in new[len(before):]] == list(squash.into)

    by_replaced, by_squash = empty_database(), empty_database()
    migrations_only(by_replaced, [SqlFile(p.stem, p) for p in old])
    migrations_only(by_squash, new)
    assert schema_dump(by_squash) == schema_dump(by_replaced)
    assert seeded_rows(by_squash) == seeded_rows(by_replaced)


def release_migrate(url: str, tree: Path) -> list[str]:
    """`tree`'s own pgsift.migrate, run in a process of its own (as test_extension runs a release's)."""
    script = ("import psycopg, pgsift, sys; assert pgsift.__file__.startswith(sys.argv[2]); "
              "print(' '.join(pgsift.migrate(psycopg.connect(sys.argv[1], autocommit=True))))")
    run = subprocess.run([sys.executable, "-c", script, url, str(tree / "python")], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tree / "python")}, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.split()


# A mark on what the squash made that no function file re-applies (sql/95_comments.sql writes
# the columns' comments on every migrate; a constraint has none).
WHOLE_DOCUMENT_MARK = """
    select obj_description(c.oid, 'pg_constraint') from pg_constraint c
    where c.conrelid = 'sift.golden_positives'::regclass and c.conname = 'whole_document_has_source'"""


def test_a_database_that_ran_the_squashed_migrations_records_the_squash_and_runs_nothing(empty_database, squash,
                                                                                          squashed_tree):
    """A developer's database, migrated by pgsift as of the squash's commit: migrate records the
    squash in place of the migrations it replaces, runs none of its files (a mark left on what
    they make stays), only the migrations written after it, and re-applies the function files; it
    then reads as a new install."""
    dev = empty_database()
    assert release_migrate(dev, squashed_tree)[-len(squash.replaced):] == [v for v, _ in squash.replaced]
    with psycopg.connect(dev, autocommit=True) as conn:
        assert conn.execute(WHOLE_DOCUMENT_MARK).fetchone() == (None,)
        conn.execute("comment on constraint whole_document_has_source on sift.golden_positives is 'a mark'")
        assert not is_current(conn)
        assert pgsift.migrate(conn) == [m.version for m in migration_files() if m.version > squash.into[-1]]
        assert conn.execute(WHOLE_DOCUMENT_MARK).fetchone() == ("a mark",)   # none of the squash ran
        conn.execute("comment on constraint whole_document_has_source on sift.golden_positives is null")
        assert is_current(conn)
    fresh = empty_database()
    with psycopg.connect(fresh, autocommit=True) as conn:
        pgsift.migrate(conn)
    assert catalog(dev) == catalog(fresh)
    assert schema_dump(dev) == schema_dump(fresh)


def record_replaced(db: psycopg.Connection, squash: Squash, replaced: list[tuple[str, str]]) -> None:
    """The ledger of a database that ran `replaced` and not the squash (its schema is the squash's)."""
    db.execute("delete from sift.schema_migrations where version = any(%s)",
               [[*squash.into, *(v for v, _ in squash.replaced)]])
    for version, sha in replaced:
        db.execute("insert into sift.schema_migrations (version, sha256) values (%s, %s)", [version, sha])


def ledger(db: psycopg.Connection) -> list[tuple[str, str]]:
    return db.execute("select version, sha256 from sift.schema_migrations order by 1").fetchall()


def test_a_database_that_ran_some_of_the_squashed_migrations_is_refused(db, dsn, tmp_path, squash):
    """Only some of the replaced migrations ran (a developer's database of the middle of a
    release), or one ran with another text: migrate and the psql script refuse it, say what to
    do, and change nothing."""
    replaced = list(squash.replaced)
    record_replaced(db, squash, replaced[:13])
    before = ledger(db)
    with pytest.raises(pgsift.MigrationError) as refused:
        pgsift.migrate(db)
    message = str(refused.value)
    assert f"ran 13 of the {len(replaced)} development migrations" in message
    assert f"{replaced[0][0]} to {replaced[12][0]}, not {replaced[13][0]}" in message
    assert f"migrate it first with pgsift as of commit {squash.commit}" in message
    assert ledger(db) == before                                           # all rolled back
    # The psql script refuses it too.
    script = tmp_path / "pgsift.sql"
    script.write_text(pgsift.install_script(), encoding="utf-8")
    run = run_psql(dsn, script)
    assert run.returncode != 0 and f"migrate it first with pgsift as of commit {squash.commit}" in run.stderr
    assert ledger(db) == before

    # Every one of them, but one with another text than the squash replaces.
    changed = [(v, "0" * 64 if v == replaced[-3][0] else sha) for v, sha in replaced]
    record_replaced(db, squash, changed)
    with pytest.raises(pgsift.MigrationError, match=f"migration {replaced[-3][0]} ran here with another text"):
        pgsift.migrate(db)


def test_the_squash_is_recorded_by_migrate_and_by_the_psql_script(db, dsn, tmp_path, squash):
    """Every replaced migration recorded, unchanged: the squash takes their place in the ledger,
    by migrate and by the psql script alike, and nothing else changes."""
    before, schema = ledger(db), catalog(dsn)
    record_replaced(db, squash, list(squash.replaced))
    assert not is_current(db)
    assert pgsift.migrate(db) == []
    assert ledger(db) == before and catalog(dsn) == schema and is_current(db)
    record_replaced(db, squash, list(squash.replaced))
    script = tmp_path / "pgsift.sql"
    script.write_text(pgsift.install_script(), encoding="utf-8")
    run = run_psql(dsn, script)
    assert run.returncode == 0, run.stderr
    assert ledger(db) == before and catalog(dsn) == schema


# -- rules for every function in schema sift ------------------------------------------------

def _declared_functions() -> dict[str, list[dict[str, object]]]:
    """name -> the options of each `create function` for it in sql/ and migrations/."""
    found: dict[str, list[dict[str, object]]] = {}
    for f in [*migration_files(), *function_files()]:
        for raw in parse_sql(with_vector_schema(f.text, "public")):
            stmt = raw.stmt
            if isinstance(stmt, ast.CreateFunctionStmt):
                schema, name = (n.sval for n in stmt.funcname)
                assert schema == "sift", f"{f.path.name}: {name} is created outside schema sift"
                found.setdefault(name, []).append({o.defname: o.arg for o in stmt.options or ()})
    return found


SIFT_FUNCTIONS = """
    select p.oid::regprocedure::text, p.proname, l.lanname, p.prosecdef, p.provolatile,
           coalesce(p.proconfig, '{}'), obj_description(p.oid, 'pg_proc'), p.prosrc
    from pg_proc p join pg_language l on l.oid = p.prolang
    where p.pronamespace = 'sift'::regnamespace order by 1"""

# Helpers that stay unpinned so they inline into the queries that call them per row; their
# bodies name every function with its schema (checked below).
INLINED = {"_bm25_impact", "_bm25_part", "_bm25_scores", "_bm25_term", "_list_entries", "recency_factor",
           "_recency_date", "_language", "_page_key", "_locale_path", "_section_body", "_pending_bucket"}


def test_every_function_has_a_comment(db):
    rows = db.execute(SIFT_FUNCTIONS).fetchall()
    assert {r[1] for r in rows} >= {"search", "explain", "candidates", "finalize", "rrf", "knobs",
                                    "lexical_query", "create_collection", "alter_collection",
                                    "drop_collection", "delete_document", "set_tenant", "current_tenant"}
    missing = [sig for sig, _name, *_, comment, _src in rows if not (comment or "").strip()]
    assert missing == []


def test_every_function_states_its_volatility(db):
    declared = _declared_functions()
    rows = db.execute(SIFT_FUNCTIONS).fetchall()
    assert set(declared) == {r[1] for r in rows}   # the parse covers every function there is
    assert sorted(name for name, defs in declared.items() if any("volatility" not in d for d in defs)) == []
    codes = {"immutable": "i", "stable": "s", "volatile": "v"}
    for sig, name, _lang, _secdef, provolatile, *_ in rows:
        assert {codes[d["volatility"].sval] for d in declared[name]} == {provolatile}, sig


def test_only_seven_functions_are_security_definer(db):
    # The index builders and the dropper of orphaned own indexes (only the owner may index the
    # shared tables), the text-index probe (row-level security keeps the index out of reach),
    # the cleaner of the text index's pending list (only the owner may; no argument), and the
    # cursor signer and checker (no tenant reads the key). The one signer of 0.2 took any text
    # from any reader (issue 37): the signer now signs only the payload it builds from fields
    # it checks, and the checker only says whether a signature is right, so it is two
    # functions. test_trust attacks the probe, the signer and the checker, and the index
    # builder and dropper (tests/test_large_embeddings.py too); test_pages the signer.
    definers = [r[0] for r in db.execute(SIFT_FUNCTIONS).fetchall() if r[3]]
    assert definers == ["sift._clean_text_index()",
                        "sift._cursor_encode(text,text,integer,integer,bigint[],name)",
                        "sift._cursor_verify(text,text,name)",
                        "sift._drop_orphan_indexes(text)",
                        "sift._ensure_dense_index(integer,sift.distance,boolean)",
                        "sift._ensure_space_index(bigint,name)", "sift._text_matches(bigint,tsquery,name)"]

    def grantees(name: str) -> list[str]:
        return db.execute(
            "select array_agg(case when a.grantee = 0 then 'PUBLIC' else a.grantee::regrole::text end order by 1) "
            "from pg_proc p, aclexplode(p.proacl) a where p.proname = %s", [name]).fetchone()[0]
    for builder in ("_ensure_dense_index", "_ensure_space_index", "_drop_orphan_indexes"):
        assert sorted(grantees(builder)) == ["postgres", "sift_admin"]   # owner and admins, not PUBLIC
    assert sorted(grantees("_clean_text_index")) == ["postgres", "sift_writer"]
    assert sorted(grantees("_text_matches")) == ["postgres", "sift_gateway", "sift_reader"]
    for cursors in ("_cursor_encode", "_cursor_verify"):   # paging runs as its caller, and calls them
        assert sorted(grantees(cursors)) == ["postgres", "sift_gateway", "sift_reader"]
    assert sorted(grantees("_cursor_mac")) == ["postgres"]   # the key's signature: inside those two only


def test_every_function_pins_a_pg_catalog_first_path(db):
    rows = db.execute(SIFT_FUNCTIONS).fetchall()
    for sig, name, _lang, _secdef, _vol, config, *_ in rows:
        paths = [c.removeprefix("search_path=") for c in config if c.startswith("search_path=")]
        if name in INLINED:
            assert paths == [], sig
            continue
        assert paths == ["pg_catalog, pg_temp"], (sig, config)


def test_trust_md_names_every_unpinned_helper(db):
    """docs/trust.md#search_path lists the helpers left unpinned so they inline: exactly INLINED."""
    text = (ROOT / "docs" / "trust.md").read_text()
    section = text[text.index("## search_path"):text.index("## Poolers and standbys")]
    named = set(re.findall(r"`sift\.(\w+)`", section))
    unpinned = {r[0] for r in db.execute(
        "select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace "
        "where n.nspname = 'sift' and p.proconfig is null").fetchall()}
    assert unpinned == INLINED
    assert named >= INLINED


class _Calls(Visitor):
    def __init__(self) -> None:
        self.unqualified: list[str] = []

    def visit_FuncCall(self, _ancestors, node):
        names = [n.sval for n in node.funcname]
        if len(names) == 1:
            self.unqualified.append(names[0])


def test_inlined_helpers_name_every_function_with_its_schema(db):
    for sig, name, lang, *_, src in db.execute(SIFT_FUNCTIONS).fetchall():
        if name not in INLINED:
            continue
        assert lang == "sql", sig
        calls = _Calls()
        calls(parse_sql(src))
        assert calls.unqualified == [], (sig, calls.unqualified)


def test_no_function_creates_temporary_tables(db):
    rows = db.execute(SIFT_FUNCTIONS).fetchall()
    offenders = [sig for sig, *_, src in rows if "create temp" in src.lower() or "temporary" in src.lower()]
    assert offenders == []
