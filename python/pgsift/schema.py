"""The SQL pgsift ships: numbered migrations (run once) and function files (re-applied when
they change), read from the package, with the vector extension's schema written in.

Shared by `migrate` (the runner) and `install_script` (the same steps for `psql -f`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .errors import MigrationError

_PACKAGE = Path(__file__).resolve().parent
# Where the SQL files write pgvector's schema (PostgreSQL's own spelling for
# an extension script that names a required extension's schema).
VECTOR_SCHEMA_TOKEN = "@extschema:vector@"


def _find(dirname: str, root: Path | None = None) -> Path:
    """The installed package's folder, or `root`'s (another checkout: a release's tree)."""
    places = (root / dirname,) if root is not None else (_PACKAGE / dirname, _PACKAGE.parent.parent / dirname)
    for candidate in places:
        if candidate.is_dir():
            return candidate
    raise MigrationError(f"pgsift's {dirname}/ folder is missing from the installation")


@dataclass(frozen=True)
class SqlFile:
    version: str
    path: Path

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def migration_files(root: Path | None = None) -> list[SqlFile]:
    return [SqlFile(p.stem, p) for p in sorted(_find("migrations", root).glob("*.sql"))]


def function_files(root: Path | None = None) -> list[SqlFile]:
    return [SqlFile(p.stem, p) for p in sorted(_find("sql", root).glob("*.sql"))]


def functions_sha256(root: Path | None = None) -> str:
    """What the function files are, with the migrations they sit on: re-applied when it changes."""
    digest = hashlib.sha256()
    for mig in migration_files(root):
        digest.update(f"migration {mig.version}\n".encode())
    for fn in function_files(root):
        digest.update(f"file {fn.version} {fn.sha256}\n".encode())
    return digest.hexdigest()


def with_vector_schema(text: str, quoted_schema: str) -> str:
    """The file's text with pgvector's schema (already quoted as an identifier) written in."""
    if any(c in quoted_schema for c in "'$;\\"):
        raise MigrationError(f"the vector extension's schema {quoted_schema} has a character pgsift "
                             "does not write into SQL (quote, dollar, semicolon or backslash)")
    return text.replace(VECTOR_SCHEMA_TOKEN, quoted_schema)


# pgvector's schema, read by the database at install time (quoted as an identifier).
VECTOR_SCHEMA_SQL = ("(select pg_catalog.quote_ident(n.nspname) from pg_catalog.pg_extension e "
                     "join pg_catalog.pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector')")


def dollar_tag(text: str, sha: str) -> str:
    """A dollar-quote tag for a shipped file's text that the text does not contain."""
    tag = sha[:16]
    if f"$body_{tag}$" in text or f"$do_{tag}$" in text or "$functions$" in text:
        raise MigrationError(f"a shipped SQL file contains pgsift's own dollar tag {tag}")
    return tag


def replaced(fn: SqlFile) -> str:
    """A shipped file's text as an SQL expression with pgvector's schema written in at run time
    (`execute` runs it): the one form of `install_script` and the extension's scripts (pg_tle's
    included, which fills in no schema of a required extension)."""
    tag = dollar_tag(fn.text, fn.sha256)
    return f"pg_catalog.replace($body_{tag}${fn.text}$body_{tag}$, '{VECTOR_SCHEMA_TOKEN}', {VECTOR_SCHEMA_SQL})"


def executed(fn: SqlFile) -> str:
    """A shipped file as one statement that runs it (see `replaced`)."""
    tag = dollar_tag(fn.text, fn.sha256)
    return f"do $do_{tag}$\nbegin\n    execute {replaced(fn)};\nend\n$do_{tag}$;"
