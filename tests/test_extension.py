"""CREATE EXTENSION pgsift (pgsift.extension): the generated control file and scripts are
installed into a folder of their own (PostgreSQL 18's extension_control_path, so the server's
installation is left alone); an extension install has the runner's catalog; the last
release (its git tag) upgrades to this version by each path, ALTER EXTENSION UPDATE and
`pgsift migrate`, with its data and its search results intact; pg_dump keeps an extension
install's rows and sequences; the pg_tle installer parses and carries the very scripts
CREATE EXTENSION runs here.

The release's own install is its runner's (tag v0.1.0); 0.1.0 shipped no extension, so its
extension install script is this generator's rendering of the release's files: a defect the
generator puts into both an install and an upgrade script would not show in the upgrade
test, which is why the catalog of each is also compared with the runner's."""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pglast
import psycopg
import pytest
import release_client
from conftest import BIN, SERVER_URI
from pgsift import Client, MigrationError, extension, migrate
from pgsift.cli import main
from pgsift.version import RELEASE_COMMITS, RELEASES, VERSION

ROOT = Path(__file__).resolve().parent.parent
LAST = list(RELEASES)[-1]
# Readable by the server's own OS user (pytest's temporary folders are not).
# extension_control_path names share folders: the files go into FOLDER/extension.
FOLDER = Path(tempfile.mkdtemp(prefix="pgsift-extension-"))
FOLDER.chmod(0o755)
atexit.register(shutil.rmtree, FOLDER, ignore_errors=True)
OPTIONS = f"-c extension_control_path={FOLDER}:$system"
EXTENSION_DIR = FOLDER / "extension"


@pytest.fixture(scope="module")
def release_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The last release's python/, migrations/ and sql/, from its commit on main (which its tag
    names where the tag is present: a clone of main alone may not carry tags)."""
    commit = RELEASE_COMMITS[LAST]
    tag = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"v{LAST}^{{commit}}"],
                         capture_output=True, text=True, check=False)
    if tag.returncode == 0:
        assert tag.stdout.strip() == commit, f"tag v{LAST} names {tag.stdout.strip()}, not {commit}"
    run = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "python", "migrations", "sql"],
                         capture_output=True, check=False)
    if run.returncode != 0:
        pytest.fail(f"release {LAST}'s commit {commit} is missing from this checkout (a shallow clone? "
                    f"git fetch --unshallow): {run.stderr.decode().strip()}")
    tree = tmp_path_factory.mktemp("release")
    with tarfile.open(fileobj=io.BytesIO(run.stdout)) as archive:
        if hasattr(tarfile, "fully_trusted_filter"):   # Python 3.10.12+, 3.11.4+
            archive.extractall(tree, filter="fully_trusted")
        else:   # pragma: no cover
            archive.extractall(tree)
    return tree


@pytest.fixture(scope="module")
def installed(release_tree: Path) -> None:
    """This version's control file and scripts in FOLDER (as `make extension` writes them), and
    the last release's install script rendered from its own tree."""
    assert main(["extension", "--out", str(EXTENSION_DIR)]) == 0
    old = extension.install_script(LAST, root=release_tree)
    (EXTENSION_DIR / old.name).write_text(old.text, encoding="utf-8")
    EXTENSION_DIR.chmod(0o755)
    for path in EXTENSION_DIR.iterdir():
        path.chmod(0o644)


@pytest.fixture
def database() -> Iterator[Callable[[], str]]:
    """Factory: a new empty database (no pgvector, no pgsift); its connection string."""
    made: list[str] = []

    def make() -> str:
        name = f"ext_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(SERVER_URI, autocommit=True) as admin:
            admin.execute(f'create database "{name}"')
        made.append(name)
        return psycopg.conninfo.make_conninfo(SERVER_URI, dbname=name)

    yield make
    with psycopg.connect(SERVER_URI, autocommit=True) as admin:
        for name in made:
            admin.execute(f'drop database if exists "{name}" with (force)')


def connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True, options=OPTIONS)


def with_release(dsn: str, tree: Path, *args: str) -> Any:
    """tests/release_client.py run with the release's own package; its JSON output."""
    env = {**os.environ, "PYTHONPATH": str(tree / "python")}
    run = subprocess.run([sys.executable, str(Path(__file__).parent / "release_client.py"), dsn, *args,
                          str(tree / "python" / "pgsift")], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def release_migrate(dsn: str, tree: Path) -> None:
    script = ("import psycopg, pgsift, sys; assert pgsift.__file__.startswith(sys.argv[2]); "
              "pgsift.migrate(psycopg.connect(sys.argv[1], autocommit=True))")
    run = subprocess.run([sys.executable, "-c", script, dsn, str(tree / "python")], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tree / "python")}, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


def searches(dsn: str) -> Any:
    with connect(dsn) as conn:
        return json.loads(json.dumps(release_client.searches(Client(conn))))


# What an install consists of, comparable across databases: every object of schema sift
# with its definition, comment and privileges, the ledger, and the rows the scripts seed.
CATALOG = {
    "functions": """
        select p.oid::regprocedure::text, pg_catalog.pg_get_functiondef(p.oid),
               pg_catalog.obj_description(p.oid, 'pg_proc'), p.proacl::text
        from pg_catalog.pg_proc p where p.pronamespace = 'sift'::regnamespace order by 1""",
    "relations": """
        select c.relname, c.relkind, c.relrowsecurity, c.relacl::text, pg_catalog.obj_description(c.oid, 'pg_class')
        from pg_catalog.pg_class c where c.relnamespace = 'sift'::regnamespace order by 1""",
    "columns": """
        select c.relname, a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_catalog.pg_get_expr(d.adbin, d.adrelid), pg_catalog.col_description(c.oid, a.attnum), a.attacl::text
        from pg_catalog.pg_class c join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum > 0
        left join pg_catalog.pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
        where c.relnamespace = 'sift'::regnamespace and not a.attisdropped order by 1, 2""",
    "constraints": """
        select t.relname, k.conname, pg_catalog.pg_get_constraintdef(k.oid)
        from pg_catalog.pg_constraint k left join pg_catalog.pg_class t on t.oid = k.conrelid
        where k.connamespace = 'sift'::regnamespace order by 1, 2""",
    "indexes": """
        select indexname, indexdef from pg_catalog.pg_indexes where schemaname = 'sift' order by 1""",
    "triggers": """
        select t.tgname, pg_catalog.pg_get_triggerdef(t.oid) from pg_catalog.pg_trigger t
        join pg_catalog.pg_class c on c.oid = t.tgrelid
        where c.relnamespace = 'sift'::regnamespace and not t.tgisinternal order by 1, 2""",
    "policies": """
        select tablename, policyname, permissive, roles::text, cmd, qual, with_check
        from pg_catalog.pg_policies where schemaname = 'sift' order by 1, 2""",
    "types": """
        select t.typname, t.typtype, pg_catalog.format_type(t.typbasetype, t.typtypmod),
               pg_catalog.obj_description(t.oid, 'pg_type')
        from pg_catalog.pg_type t where t.typnamespace = 'sift'::regnamespace order by 1""",
    "schema": """
        select n.nspacl::text, pg_catalog.obj_description(n.oid, 'pg_namespace')
        from pg_catalog.pg_namespace n where n.nspname = 'sift'""",
    "ledger": "select version, sha256 from sift.schema_migrations order by 1",
    "functions ledger": "select sha256 from sift.schema_functions",
    "knob_defs": "select * from sift.knob_defs order by 1",
    "knob_presets": "select * from sift.knob_presets order by 1",
    "language_configs": "select * from sift.language_configs order by 1",
    "reranker_providers": "select * from sift.reranker_providers order by 1",
    "reranker_limits": "select * from sift.reranker_limits order by 1, 2",
}


def catalog(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    with connect(dsn) as conn:
        return {name: conn.execute(query).fetchall() for name, query in CATALOG.items()}


def assert_same_catalog(a: str, b: str) -> None:
    ours, theirs = catalog(a), catalog(b)
    for part in CATALOG:
        assert ours[part] == theirs[part], part
    assert len(ours["functions"]) > 100 and len(ours["ledger"]) == len(extension.migration_files())


def test_create_extension_installs_what_migrate_installs(installed, database):
    by_runner, by_extension = database(), database()
    with connect(by_runner) as conn:
        migrate(conn)
    with connect(by_extension) as conn:
        conn.execute("create extension pgsift cascade")       # installs pgvector too
        assert conn.execute("select extversion from pg_catalog.pg_extension where extname = 'pgsift'").fetchone() \
            == (VERSION,)
    assert_same_catalog(by_runner, by_extension)
    for dsn in (by_runner, by_extension):
        with connect(dsn) as conn:
            client = Client(conn)
            client.create_collection("kb", embedding_dims=release_client.DIMS)
            client.upsert_documents("kb", release_client.documents())
    first = searches(by_runner)
    assert first == searches(by_extension)
    assert sum(len(hits) for hits in first) > 50


def test_the_last_release_upgrades_by_each_path_with_data_and_results_intact(installed, database, release_tree):
    # The release installed by its own runner, written by its own client, then `pgsift migrate`.
    by_runner = database()
    release_migrate(by_runner, release_tree)
    before = with_release(by_runner, release_tree, "write")   # read by the release's own client
    with connect(by_runner) as conn:
        applied = migrate(conn)
    assert applied == [m.version for m in extension.migration_files() if m.version > RELEASES[LAST]]
    assert searches(by_runner) == before
    # A rolling upgrade: the release's client writes on to the upgraded database (its text
    # vectors through the deprecated signatures).
    with_release(by_runner, release_tree, "more")
    with connect(by_runner) as conn:
        assert conn.execute("select count(*) from sift.chunks").fetchone() == (96,)
        conn.execute("delete from sift.documents where source_uri like 'more-%'")

    # The release as an extension, written by its own client, then ALTER EXTENSION ... UPDATE.
    by_extension = database()
    with connect(by_extension) as conn:
        conn.execute(f"create extension pgsift version '{LAST}' cascade")
    assert with_release(by_extension, release_tree, "write") == before
    with connect(by_extension) as conn:
        conn.execute("alter extension pgsift update")
        assert conn.execute("select extversion from pg_catalog.pg_extension where extname = 'pgsift'").fetchone() \
            == (VERSION,)
    assert searches(by_extension) == before

    # Both upgraded databases read as a fresh install of this version given the same writes
    # (which build the dense indexes on demand), and keep writing.
    fresh = database()
    with connect(fresh) as conn:
        migrate(conn)
        Client(conn).create_collection("kb", embedding_dims=release_client.DIMS)
        Client(conn).upsert_documents("kb", release_client.documents())
    assert searches(fresh) == before
    assert_same_catalog(by_runner, fresh)
    assert_same_catalog(by_extension, fresh)
    for dsn in (by_runner, by_extension):
        with connect(dsn) as conn:
            Client(conn).upsert_documents("kb", release_client.documents()[:2])
            assert conn.execute("select count(*) from sift.chunks").fetchone() == (90,)


def test_migrate_and_create_extension_refuse_each_others_install(installed, database, release_tree):
    by_extension, by_runner, old_extension = database(), database(), database()
    with connect(by_extension) as conn:
        conn.execute("create extension pgsift cascade")
        assert migrate(conn) == []            # up to date: nothing to do (Client.migrate() at start-up)
    with connect(old_extension) as conn:
        conn.execute(f"create extension pgsift version '{LAST}' cascade")
        with pytest.raises(MigrationError, match="ALTER EXTENSION pgsift UPDATE"):
            migrate(conn)
    with connect(by_runner) as conn:
        migrate(conn)
        with pytest.raises(psycopg.errors.RaiseException, match="pgsift was installed here by `pgsift migrate`"):
            conn.execute("create extension pgsift cascade")


def test_migrate_force_on_an_extension_install_says_it_reapplied_nothing(installed, database, capsys):
    dsn = database()
    with connect(dsn) as conn:
        conn.execute("create extension pgsift cascade")
        before = conn.execute("select sha256, applied_at from sift.schema_functions").fetchall()
        with pytest.raises(MigrationError, match="installed here as an extension: --force re-applies nothing"):
            migrate(conn, force=True)
        assert conn.execute("select sha256, applied_at from sift.schema_functions").fetchall() == before
    url = psycopg.conninfo.make_conninfo(dsn, options=OPTIONS)
    assert main(["--dsn", url, "migrate", "--force"]) == 2
    out, err = capsys.readouterr()
    assert "re-applied" not in out
    assert err.startswith("error: pgsift is installed here as an extension: --force re-applies nothing")
    assert "ALTER EXTENSION pgsift UPDATE" in err and len(err.splitlines()) == 1
    assert main(["--dsn", url, "migrate"]) == 0                 # without --force: up to date, as before
    assert capsys.readouterr().out.startswith("up to date: nothing applied")


def test_an_extension_install_survives_dump_and_restore(installed, database, tmp_path):
    """The users' rows are marked for pg_dump; the seeded ones come back from the script."""
    source, target = database(), database()
    with connect(source) as conn:
        conn.execute("create extension pgsift cascade")
        client = Client(conn)
        client.create_collection("kb", embedding_dims=release_client.DIMS)
        client.upsert_documents("kb", release_client.documents())
    before = searches(source)
    dump = tmp_path / "kb.dump"
    subprocess.run([str(BIN / "pg_dump"), "-Fc", "-f", str(dump), "-d", source], check=True, timeout=300)
    # The extension's triggers exist before its tables' rows come back (CREATE EXTENSION runs
    # first): the rows are restored as they were, triggers off, as a replica would apply them.
    env = {**os.environ, "PGOPTIONS": f"-c session_replication_role=replica {OPTIONS}"}
    subprocess.run([str(BIN / "pg_restore"), "--exit-on-error", "-d", target, str(dump)], check=True, timeout=300,
                   env=env)
    assert searches(target) == before
    with connect(target) as conn:
        # The on-demand HNSW indexes are not the script's: rebuilt by one call.
        hnsw = "select indexname from pg_catalog.pg_indexes where schemaname = 'sift' and indexname ~ 'hnsw' order by 1"
        assert conn.execute(hnsw).fetchall() == []
        assert conn.execute("select * from sift.ensure_dense_indexes()").fetchall() == [("chunks_hnsw_cosine_8",)]
        assert conn.execute(hnsw).fetchall() == [("chunk_vectors_hnsw_cosine_8",), ("chunks_hnsw_cosine_8",),
                                                 ("question_vectors_hnsw_cosine_8",)]
        # The sequences came back too: a new document and its chunks take new ids.
        sequences = ("select sequencename, last_value from pg_catalog.pg_sequences where schemaname = 'sift' "
                     "order by 1")
        with connect(source) as before_conn:
            assert conn.execute(sequences).fetchall() == before_conn.execute(sequences).fetchall()
        fresh = release_client.documents()[0]
        fresh.source_uri = "new.md"
        Client(conn).upsert_documents("kb", [fresh])
        assert conn.execute("select count(*) from sift.chunks").fetchone() == (93,)


def test_drop_extension_takes_everything_with_it(installed, database):
    dsn = database()
    with connect(dsn) as conn:
        conn.execute("create extension pgsift cascade")
        Client(conn).create_collection("kb", embedding_dims=4)
        conn.execute("drop extension pgsift")
        assert conn.execute("select pg_catalog.to_regnamespace('sift')").fetchone() == (None,)


def test_the_pg_tle_installer_parses_and_carries_every_script():
    """pg_tle runs the text it is given, filling in no required extension's schema: its bodies
    are the scripts CREATE EXTENSION runs from files in these tests, which read pgvector's
    schema at install time (test_pgvector_in_another_schema)."""
    script = extension.tle_script().text
    calls = pglast.parse_sql(script)
    updates = [r for r in RELEASES if r != VERSION]
    assert len(calls) == 2 + len(updates)
    bodies = [node.val.sval for node in _string_constants(calls) if len(node.val.sval) > 10_000]
    assert len(bodies) == 1 + len(updates)
    assert bodies[0] == extension.install_script(for_file=False).text
    file_script = extension.install_script().text
    assert file_script.replace('\\echo Use "CREATE EXTENSION pgsift" to load this file. \\quit\n', "") == bodies[0]
    for body, old in zip(bodies[1:], updates, strict=True):
        assert body == extension.upgrade_script(old, for_file=False).text
    for body in bodies:
        statements = pglast.parse_sql(body)   # the schema token only inside the executed strings
        assert len(statements) > 20


def test_pgvector_in_another_schema(installed, database):
    """Supabase keeps pgvector in schema extensions: the scripts find it there."""
    dsn = database()
    with connect(dsn) as conn:
        conn.execute("create schema extensions")
        conn.execute("create extension vector schema extensions")
        conn.execute("create extension pgsift")
        client = Client(conn)
        client.create_collection("kb", embedding_dims=release_client.DIMS)
        client.upsert_documents("kb", release_client.documents())
        assert len(client.search("kb", "refund", embedding=release_client.vector(1), top_k=5)) == 5
        definition = conn.execute("select pg_catalog.pg_get_functiondef('sift.search(text,text,extensions.vector,"
                                  "integer,jsonb,jsonb,text[],extensions.vector[],text[],extensions.vector[],"
                                  "double precision[])'::regprocedure)").fetchone()[0]
        assert "extensions.vector" in definition
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute("alter extension vector set schema public")   # the control file's no_relocate


def test_every_table_is_dumped_or_seeded(installed, database):
    dsn = database()
    with connect(dsn) as conn:
        conn.execute("create extension pgsift cascade")
        tables = {r[0] for r in conn.execute("select relname from pg_catalog.pg_class where relkind = 'r' "
                                             "and relnamespace = 'sift'::regnamespace").fetchall()}
        marked = {r[0] for r in conn.execute(
            "select c.relname from pg_catalog.pg_extension e, unnest(e.extconfig) x(oid) "
            "join pg_catalog.pg_class c on c.oid = x.oid where e.extname = 'pgsift' and c.relkind = 'r'").fetchall()}
    assert tables == set(extension.USER_TABLES) | set(extension.SEEDED_TABLES)
    assert marked == set(extension.USER_TABLES)


def _string_constants(node: Any) -> Iterator[Any]:
    if isinstance(node, tuple | list):
        for item in node:
            yield from _string_constants(item)
    elif isinstance(node, pglast.ast.Node):
        if isinstance(node, pglast.ast.A_Const) and isinstance(node.val, pglast.ast.String):
            yield node
        for name in node:
            yield from _string_constants(getattr(node, name))


def test_make_extension_writes_the_control_file_and_the_scripts(tmp_path, capsys):
    assert main(["extension", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["pgsift.control", f"pgsift--{VERSION}.sql", "pgsift_pg_tle.sql"]
                           + [f"pgsift--{old}--{VERSION}.sql" for old in RELEASES if old != VERSION])
    control = (tmp_path / "pgsift.control").read_text()
    assert f"default_version = '{VERSION}'" in control and "requires = 'vector'" in control
    assert str(tmp_path) in capsys.readouterr().out
    import pgsift

    assert pgsift.__version__ == VERSION and VERSION not in RELEASES   # this version is not released yet
    assert list(RELEASE_COMMITS) == list(RELEASES)


def test_pg_config_writes_into_that_servers_extension_folder(tmp_path, capsys):
    """--pg-config: the server's share/extension, without the pg_tle installer (a server that
    takes files has no use for it)."""
    fake = tmp_path / "pg_config"
    fake.write_text(f"#!/bin/sh\necho {tmp_path / 'share'}\n")
    fake.chmod(0o755)
    assert main(["extension", "--pg-config", str(fake)]) == 0
    names = sorted(p.name for p in (tmp_path / "share" / "extension").iterdir())
    assert "pgsift.control" in names and not any("pg_tle" in n for n in names)
    assert main(["extension", "--pg-config", str(tmp_path / "missing")]) == 2
    assert "could not run it" in capsys.readouterr().err
