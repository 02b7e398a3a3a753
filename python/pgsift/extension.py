"""`CREATE EXTENSION pgsift`: the control file, the versioned scripts and a pg_tle installer,
generated from the same migrations/ and sql/ files the runner (pgsift.migrate) applies.

- `pgsift--X.Y.Z.sql` installs version X.Y.Z: every migration, recorded in
  sift.schema_migrations as the runner records it, then every function file, then the
  functions' sha256 in sift.schema_functions. The catalog is the runner's (tested), so a
  database reads the same whichever way it was installed.
- `pgsift--A--X.Y.Z.sql`, one per earlier release A (pgsift.version.RELEASES): the
  migrations after A's last one, then every function file again (create or replace, as the
  runner re-applies them).
- `pgsift_pg_tle.sql`: the same scripts through pg_tle's install_extension and
  install_update_path, for managed servers (RDS, Aurora, Supabase) where files cannot be
  written into the server's extension folder (no `--` in its name: PostgreSQL would take it
  for a version's script).

Each shipped file runs as `execute replace(<file>, '@extschema:vector@', <pgvector's schema>)`,
the schema read from pg_extension at install time, as `pgsift install-sql` does: pg_tle fills
in no required extension's schema, and so the scripts behind CREATE EXTENSION from files
(tested) are the very text pg_tle runs. Tables that hold users' rows are marked for pg_dump
(pg_extension_config_dump); tables the scripts fill (knob definitions, presets, language
configurations, reranker providers and limits, the cursor key, the ledger, the operator's lock
rows) are not, as a restore re-creates their rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from . import queries as q
from .errors import MigrationError
from .schema import executed, function_files, functions_sha256, migration_files
from .version import RELEASES, VERSION

NAME = "pgsift"
COMMENT = "hybrid retrieval for RAG: dense + BM25 + fusion as SQL functions (schema sift)"

# Tables whose rows are the users' (and their sequences): dumped by pg_dump with the data.
USER_TABLES = (
    "collections", "collection_configs", "vector_spaces", "documents", "sections", "chunks", "chunk_vectors",
    "chunk_tokens", "chunk_token_sizes", "chunk_enrichments", "enrichment_runs", "collection_lexical_stats",
    "question_vectors", "term_df", "term_df_pending", "term_deltas", "term_lists", "term_blocks",
    "list_build_plan", "list_build_entries", "rerankers", "rerank_usage", "secret_mappings",
    "allowed_endpoints", "tenant_roles", "golden_sets", "golden_questions", "golden_positives", "eval_runs",
    "index_requests", "tenant_limits", "collection_locks", "tenant_locks", "rerank_prices",
)
# Tables the scripts fill: a restore gets their rows from CREATE EXTENSION (rows a user added
# to them are not in a dump: docs/install.md).
SEEDED_TABLES = ("knob_defs", "knob_presets", "language_configs", "reranker_providers", "reranker_limits",
                 "cursor_keys", "schema_migrations", "schema_functions", "operator_locks")
# An upgrade that alters tables waits this long for their locks, then fails (run it again):
# queued behind a long transaction, it would hold up every search meanwhile.
UPGRADE_LOCK_TIMEOUT = "5s"

_GUARD = """do $guard$
begin
    if pg_catalog.to_regnamespace('sift') is not null then
        raise exception 'schema sift already exists: pgsift was installed here by `pgsift migrate`'
            using hint = 'keep upgrading it with `pgsift migrate`, or drop schema sift cascade first '
                         '(its data goes with it)';
    end if;
end
$guard$;"""


@dataclass(frozen=True)
class Script:
    name: str
    text: str


def _prelude(upgrade: bool = False) -> str:
    """The runner's prelude without its lock and its `create extension vector` (the control
    file requires vector, so CREATE EXTENSION ... CASCADE installs it first); an upgrade
    needs only its search_path."""
    kept = [s + ";" for s in q.MIGRATE_PRELUDE if not s.startswith("lock table") and "create extension" not in s
            and (not upgrade or "search_path" in s)]
    return "\n".join(kept)


def _body(after: str | None, root: Path | None) -> str:
    """Migrations after `after` (all when None) each with its ledger row, every function file,
    the functions' ledger row and the pg_dump marks."""
    migrations = migration_files(root)
    versions = [m.version for m in migrations]
    if after is not None and after not in versions:
        raise MigrationError(f"release migration {after} is not among the migrations of this tree")
    parts = []
    for mig in migrations:
        if after is not None and mig.version <= after:
            continue
        parts.append(f"-- migration {mig.version}\n{executed(mig)}\n"
                     f"insert into sift.schema_migrations (version, sha256) values ('{mig.version}', '{mig.sha256}');")
    for fn in function_files(root):
        parts.append(f"-- sql/{fn.path.name}\n{executed(fn)}")
    parts.append("delete from sift.schema_functions;\n"
                 f"insert into sift.schema_functions (sha256) values ('{functions_sha256(root)}');")
    parts.append("-- users' rows and their sequences go into pg_dump\n" + _table_marks() + "\n"
                 + _sequence_marks())
    return "\n\n".join(parts) + "\n"


def _table_marks() -> str:
    # Those the version being written has (an older release's tree lacks later tables).
    tables = ", ".join(f"'{t}'" for t in USER_TABLES)
    return f"""do $tables$
declare
    name text;
begin
    foreach name in array array[{tables}] loop
        if pg_catalog.to_regclass('sift.' || name) is not null then
            perform pg_catalog.pg_extension_config_dump(('sift.' || name)::regclass, '');
        end if;
    end loop;
end
$tables$;"""


def _sequence_marks() -> str:
    tables = ", ".join(f"'{t}'" for t in USER_TABLES)
    return f"""do $marks$
declare
    seq regclass;
begin
    for seq in
        select s.oid::regclass from pg_catalog.pg_class s
        -- owned by a column: serial ('a') or identity ('i')
        join pg_catalog.pg_depend d on d.objid = s.oid and d.deptype in ('a', 'i')
        join pg_catalog.pg_class t on t.oid = d.refobjid
        where s.relkind = 'S' and t.relnamespace = 'sift'::regnamespace and t.relname in ({tables})
    loop
        perform pg_catalog.pg_extension_config_dump(seq, '');
    end loop;
end
$marks$;"""


def install_script(version: str = VERSION, root: Path | None = None, *, for_file: bool = True) -> Script:
    """Version `version` from scratch (root: the tree of that version; default this one)."""
    head = [f"-- {NAME} {version}: generated by `pgsift extension` from migrations/ and sql/."]
    if for_file:
        head.append(f'\\echo Use "CREATE EXTENSION {NAME}" to load this file. \\quit')
    text = "\n".join(head) + "\n\n" + _GUARD + "\n\n" + _prelude() + "\n\n" + _body(None, root)
    return Script(f"{NAME}--{version}.sql", text)


def upgrade_script(old: str, new: str = VERSION, root: Path | None = None, *, for_file: bool = True) -> Script:
    """From release `old` to `new` (this tree's version)."""
    if old not in RELEASES:
        raise MigrationError(f"{old} is not a pgsift release (pgsift.version.RELEASES)")
    head = [f"-- {NAME} {old} to {new}: generated by `pgsift extension`."]
    if for_file:
        head.append(f'\\echo Use "ALTER EXTENSION {NAME} UPDATE" to load this file. \\quit')
    locks = f"select pg_catalog.set_config('lock_timeout', '{UPGRADE_LOCK_TIMEOUT}', true);"
    text = "\n".join(head) + "\n\n" + _prelude(upgrade=True) + "\n" + locks + "\n\n" + _body(RELEASES[old], root)
    return Script(f"{NAME}--{old}--{new}.sql", text)


def control(version: str = VERSION) -> Script:
    # Not trusted: the scripts create roles and security-definer functions, so a superuser
    # (or pg_tle's admin role) installs it. Not relocatable: everything lives in schema sift.
    text = (f"# {NAME}: generated by `pgsift extension`\n"
            f"comment = '{COMMENT}'\n"
            f"default_version = '{version}'\n"
            "requires = 'vector'\n"
            "relocatable = false\n"
            "# pgvector's schema is written into the functions: it may not move (PostgreSQL 16+)\n"
            "no_relocate = 'vector'\n"
            "superuser = true\n"
            "trusted = false\n")
    return Script(f"{NAME}.control", text)


def _quoted(text: str, label: str) -> str:
    tag = f"$pgsift_{label}_{hashlib.sha256(text.encode()).hexdigest()[:12]}$"
    if tag in text:   # pragma: no cover - a 48-bit hash of the text inside itself
        raise MigrationError(f"a script contains its own dollar tag {tag}")
    return f"{tag}{text}{tag}"


def tle_script(root: Path | None = None) -> Script:
    """pg_tle: this version and an update path from every earlier release, as one psql file
    run by a member of pgtle_admin (then CREATE EXTENSION pgsift CASCADE as usual)."""
    full = install_script(root=root, for_file=False).text
    parts = [
        f"-- {NAME} {VERSION} for pg_tle: generated by `pgsift extension`; run with psql -f by a member of",
        "-- pgtle_admin, then: create extension pgsift cascade (or alter extension pgsift update).",
        f"select pgtle.install_extension('{NAME}', '{VERSION}', '{COMMENT}', {_quoted(full, 'install')}, "
        "array['vector']);",
    ]
    for old in RELEASES:
        if old == VERSION:
            continue
        step = upgrade_script(old, root=root, for_file=False).text
        parts.append(f"select pgtle.install_update_path('{NAME}', '{old}', '{VERSION}', "
                     f"{_quoted(step, 'update')});")
    parts.append(f"select pgtle.set_default_version('{NAME}', '{VERSION}');")
    return Script(f"{NAME}_pg_tle.sql", "\n\n".join(parts) + "\n")


def scripts(root: Path | None = None) -> list[Script]:
    """Everything `make extension` writes: control file, install script, upgrade scripts, pg_tle."""
    out = [control(), install_script(root=root)]
    out += [upgrade_script(old, root=root) for old in RELEASES if old != VERSION]
    out.append(tle_script(root))
    return out


def write(folder: Path, root: Path | None = None, *, server: bool = False) -> list[Path]:
    """The files into `folder`; `server`: a server's extension folder, which gets no pg_tle
    installer (it is for servers without one)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for script in scripts(root):
        if server and script.name.endswith("_pg_tle.sql"):
            continue
        path = folder / script.name
        path.write_text(script.text, encoding="utf-8")
        written.append(path)
    return written
