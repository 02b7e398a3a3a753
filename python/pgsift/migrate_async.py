"""Install and upgrade pgsift in any PostgreSQL that has pgvector.

Numbered files in migrations/ run once, in order, and are recorded with their
sha256 (a shipped migration never changes). Before a release its development
migrations are squashed into fewer files (pgsift.schema.SQUASHES): on a
database that ran every one of them, migrate records the squash in their place
and runs nothing; one that ran only some of them is refused, saying what to do.
The files in sql/ are `create or replace` and re-applied when they (or the
migrations under them) changed, recorded by one sha256, so running migrate
again on an unchanged install takes no lock a search or a write waits on.
Everything happens in one transaction under a lock of the ledger table, which
no role but its owner may take: two concurrent migrates are safe (two first
installs meet on creating the schema, and the second tries again) and a failed
install leaves nothing behind.

Under live traffic: re-applying the function files takes no lock a reader
waits on (functions and triggers are created or replaced, policies only when
their text changed); an upgrade that alters tables takes every table lock up
front, in one order. Any lock waits at most LOCK_TIMEOUT_MS; if migrate cannot
have it, it gives everything back, waits and tries again, so a search never
deadlocks with it and never waits for long. `install_script()` renders the
same steps as one file for `psql -f`.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg

from . import queries as q
from .compat import asleep
from .errors import MigrationError, translate
from .schema import (
    SQUASHES,
    dollar_tag,
    function_files,
    functions_sha256,
    migration_files,
    record_squash_sql,
    replaced,
    squashes_to_record,
    with_vector_schema,
)

LOCK_TIMEOUT_MS = 200
ATTEMPTS = 40

# Where migrate writes nothing, force cannot re-apply anything: said, never reported as done.
FORCE_ON_EXTENSION = ("pgsift is installed here as an extension: --force re-applies nothing, as the extension's "
                      "scripts own its functions (ALTER EXTENSION pgsift UPDATE installs a newer version's; a "
                      "function edited by hand is put back by hand)")
FORCE_ON_STANDBY = ("this server is a read-only standby: --force re-applies nothing here; run migrate --force "
                    "on the primary (the standby replays it)")


class _InstalledMeanwhile(Exception):
    """A first install that another migrate made first: the schema or the ledger it was about
    to create came to exist (unique violation in the catalog); the next attempt finds them."""


async def migrate(conn: psycopg.AsyncConnection[Any], *, force: bool = False, attempts: int = ATTEMPTS) -> list[str]:
    """Bring the database up to date; returns the migrations applied now (in order).
    force re-applies the function files even when they are unchanged (after a hand edit);
    where migrate writes nothing (an extension install, a standby) it raises MigrationError
    saying so, rather than report a re-apply that did not happen."""
    for attempt in range(1, attempts + 1):
        try:
            return await _migrate_once(conn, force)
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected, _InstalledMeanwhile) as exc:
            if attempt == attempts:
                raise MigrationError(f"could not take the locks migrate needs after {attempts} attempts "
                                     f"(busy tables): {exc}") from exc
            await asleep(min(0.05 * attempt, 1.0) * (0.5 + random.random()))
        except psycopg.Error as exc:
            raise translate(exc) from exc
    raise MigrationError("migrate made no attempt")   # attempts < 1


async def _migrate_once(conn: psycopg.AsyncConnection[Any], force: bool) -> list[str]:
    applied_now: list[str] = []
    async with conn.transaction():
        standby, installed, extension = (await (await conn.execute(q.STANDBY_STATE, prepare=False)).fetchone()
                                         or (False, False, False))
        if extension:
            # Its scripts own the schema: up to date is fine, anything to apply is theirs.
            await _check_current(conn, installed, "pgsift is installed here as an extension and is not this "
                                 "version: upgrade it with ALTER EXTENSION pgsift UPDATE (`make extension` "
                                 "writes the scripts)")
            if force:
                raise MigrationError(FORCE_ON_EXTENSION)
            return applied_now
        if standby:
            await _check_current(conn, installed, "this server is a read-only standby and pgsift on it is not "
                                 "this version: run migrate on the primary (the standby replays it)")
            if force:
                raise MigrationError(FORCE_ON_STANDBY)
            return applied_now
        try:
            for statement in q.MIGRATE_PRELUDE:
                await conn.execute(statement, prepare=False)
        except psycopg.errors.UniqueViolation as exc:
            raise _InstalledMeanwhile(str(exc)) from exc
        row = await (await conn.execute(q.VECTOR_SCHEMA, prepare=False)).fetchone()
        if row is None:
            raise MigrationError("the vector extension is not installed and could not be created")
        vector_schema = row[0]
        done = dict(await (await conn.execute(q.APPLIED_MIGRATIONS, prepare=False)).fetchall())
        # Migrations squashed since they ran here: their squash is recorded in their place, and
        # nothing runs (a database that ran only some of them is refused).
        squashes = squashes_to_record(done)
        for squash in squashes:
            await conn.execute(record_squash_sql(squash), prepare=False)
        if squashes:
            done = dict(await (await conn.execute(q.APPLIED_MIGRATIONS, prepare=False)).fetchall())
        recorded = await (await conn.execute(q.APPLIED_FUNCTIONS, prepare=False)).fetchone()
        pending = [m for m in migration_files() if m.version not in done]
        for mig in migration_files():
            if mig.version in done and done[mig.version] != mig.sha256:
                raise MigrationError(
                    f"migration {mig.version} changed after it was applied "
                    "(shipped migrations are frozen: add a new numbered file instead)")
        sha = functions_sha256()
        if not force and not pending and recorded is not None and recorded[0] == sha:
            return applied_now   # up to date: no lock but the ledger's, nothing re-applied
        await conn.execute(q.LOCK_TIMEOUT, {"ms": str(LOCK_TIMEOUT_MS)}, prepare=False)
        tables = [r[0] for r in await (await conn.execute(q.SIFT_TABLES, prepare=False)).fetchall()]
        if pending and tables:
            # An upgrade alters tables: every lock up front, in one order, or none.
            await conn.execute(q.lock_tables(tables), prepare=False)
        for mig in pending:
            await conn.execute(with_vector_schema(mig.text, vector_schema), prepare=False)
            await conn.execute(q.RECORD_MIGRATION, {"version": mig.version, "sha256": mig.sha256}, prepare=False)
            applied_now.append(mig.version)
        for fn in function_files():
            await conn.execute(with_vector_schema(fn.text, vector_schema), prepare=False)
        await conn.execute(q.RECORD_FUNCTIONS, {"sha256": sha}, prepare=False)
    return applied_now


async def is_current(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether pgsift is installed here and every migration and the function files are this
    version's (what migrate would then leave alone, unless forced). Reads only."""
    row = await (await conn.execute(q.STANDBY_STATE, prepare=False)).fetchone()
    return row is not None and bool(row[1]) and await _recorded_current(conn)


async def _recorded_current(conn: psycopg.AsyncConnection[Any]) -> bool:
    done = dict(await (await conn.execute(q.APPLIED_MIGRATIONS, prepare=False)).fetchall())
    recorded = await (await conn.execute(q.APPLIED_FUNCTIONS, prepare=False)).fetchone()
    return (all(done.get(m.version) == m.sha256 for m in migration_files())
            and recorded is not None and recorded[0] == functions_sha256())


async def _check_current(conn: psycopg.AsyncConnection[Any], installed: bool, otherwise: str) -> None:
    """Where migrate writes nothing (a standby, an extension install): fine when every migration
    and the function files are this version's, else MigrationError(otherwise)."""
    if installed and await _recorded_current(conn):
        return
    raise MigrationError(otherwise)


def install_script() -> str:
    """One SQL file doing what `migrate` does, for psql on a managed database: one transaction
    of its own, so `psql -v ON_ERROR_STOP=1 -f` (under `psql -1` PostgreSQL warns twice)."""
    parts = [
        "-- pgsift install script: generated by `pgsift install-sql`; run with psql -v ON_ERROR_STOP=1 -f",
        "-- (one transaction of its own: not under psql -1).",
        "-- Same steps as `pgsift migrate`: migrations once (recorded), functions when changed.",
        "begin;",
        "do $extension$\nbegin\n"
        "  if exists (select 1 from pg_catalog.pg_extension where extname = 'pgsift') then\n"
        "    raise exception 'pgsift is installed here as an extension: '\n"
        "                    'upgrade it with ALTER EXTENSION pgsift UPDATE';\n"
        "  end if;\nend\n$extension$;",
    ]
    parts += [s + ";" for s in q.MIGRATE_PRELUDE]
    shipped = {m.version for m in migration_files()}
    for squash in SQUASHES:
        if set(squash.into) <= shipped:
            parts.append(f"-- release {squash.release}'s squash: recorded in place of the migrations it "
                         f"replaced, where they ran\n{record_squash_sql(squash)}")
    for mig in migration_files():
        tag = dollar_tag(mig.text, mig.sha256)
        parts.append(
            f"-- migration {mig.version}\n"
            f"do $do_{tag}$\nbegin\n"
            f"  if not exists (select 1 from sift.schema_migrations where version = '{mig.version}') then\n"
            f"    execute {replaced(mig)};\n"
            f"    insert into sift.schema_migrations (version, sha256) values "
            f"('{mig.version}', '{mig.sha256}');\n"
            f"  end if;\nend\n$do_{tag}$;")
    sha = functions_sha256()
    files = "\n".join(
        f"    -- sql/{fn.path.name}\n"
        f"    execute {replaced(fn)};"
        for fn in function_files())
    parts.append(
        "-- functions: re-applied when they changed\n"
        f"do $functions$\nbegin\n"
        f"  if (select pg_catalog.max(sha256) from sift.schema_functions) is distinct from '{sha}' then\n"
        f"{files}\n"
        f"    delete from sift.schema_functions;\n"
        f"    insert into sift.schema_functions (sha256) values ('{sha}');\n"
        f"  end if;\nend\n$functions$;")
    parts.append("commit;")
    return "\n\n".join(parts) + "\n"

