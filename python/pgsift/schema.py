"""The SQL pgsift ships: numbered migrations (run once) and function files (re-applied when
they change), read from the package, with the vector extension's schema written in.

Shared by `migrate` (the runner) and `install_script` (the same steps for `psql -f`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
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


@dataclass(frozen=True)
class Squash:
    """Migrations written between two releases, squashed into fewer files before the later one
    was tagged (CONTRIBUTING.md rule 2). A database that ran every one of `replaced`, each with
    the sha256 given, has the schema that `into` makes: migrate records `into` there in their
    place and runs nothing (`record_squash_sql`). A database that ran only some of them is
    refused: pgsift at `commit`, the last commit that shipped them all, migrates it first."""

    release: str
    into: tuple[str, ...]
    commit: str
    replaced: tuple[tuple[str, str], ...]   # (version, sha256), in order

    @property
    def advice(self) -> str:
        return (f"migrate it first with pgsift as of commit {self.commit} (the last that ships them all), "
                "then with this version; or reinstall (drop schema sift cascade, then pgsift migrate: "
                "its data goes with it)")

    def refusal(self, done: Mapping[str, str]) -> str | None:
        """Why a database whose ledger `done` (version: sha256) has some of the replaced
        migrations cannot have `into` recorded in their place; None when it ran all of them
        unchanged."""
        ran = [v for v, _ in self.replaced if v in done]
        if len(ran) < len(self.replaced):
            missing = [v for v, _ in self.replaced if v not in done]
            which = f"{ran[0]} to {ran[-1]}, not {', '.join(missing)}" if ran else "none"
            return (f"this database ran {len(ran)} of the {len(self.replaced)} development migrations that "
                    f"release {self.release}'s squash ({', '.join(self.into)}) replaces ({which}): "
                    f"{self.advice}")
        changed = [v for v, sha in self.replaced if done[v] != sha]
        if changed:
            return (f"migration {', '.join(changed)} ran here with another text than the one release "
                    f"{self.release}'s squash replaces (it was edited after it ran): no pgsift version "
                    "migrates this database on; reinstall it (drop schema sift cascade, then pgsift "
                    "migrate: its data goes with it)")
        return None


# Every squash, oldest first: the one place that says which files replaced which migrations.
SQUASHES: tuple[Squash, ...] = (
    Squash(
        release="0.2.0",
        into=("0018_release_0_2_0", "0019_delta_entries", "0020_pending_buckets", "0021_cross_tenant_refs",
              "0022_secret_providers"),
        commit="0b3ff5832b4e201ac64f341162a701084aa7af9a",
        replaced=(
            ("0018_binary_vectors", "49d50f3ed4d74c0107e832d03f6a1903cab284630df7750689f117fb9d86f089"),
            ("0019_dense_index_options", "d762888d990ec3ccb3a4c728d33f1b236f90d8e9105f962291ba065e4ed0e05c"),
            ("0020_space_index_review", "d2c1d7a4e02baf338ffb2a076018ace570797267054c1a565d26045661649796"),
            ("0021_lexical_exact", "71974a7aec0e26796909be7c34154455e897169df7c585d379ca9f966d8237b2"),
            ("0022_late_interaction", "44f42b782690e5e600fd876e71da33fe72bdd42ad17939d33ad22d2271751584"),
            ("0023_fusion_legs", "beaf69dcd00efec513affa5ed14d28e4f2135bb263d0de50b5ea11b9dd02d40f"),
            ("0024_enrichment", "0dde22b92e8bc41ba56786d8c6ba500c6ea9d6fb9bceb203eebe6cf2b530cb94"),
            ("0025_question_vectors", "921da53565316267b31d98d752a2a3eebbc994c9b9d4292288916d279d54ee21"),
            ("0026_exact_search_limit", "70048c35d291f72a46357dc4a1f5729becffa29bd5cedda33082844c5992fabd"),
            ("0027_pending_term_order", "8c33e5c6bdf5efccbd843687730616204f0b623056f107904a6236b6228d2df7"),
            ("0028_lexical_list_limit", "731c51d001eefd0239860c8a09d68a512bb33a7128a608778d199647e18d7b09"),
            ("0029_lists_min_df", "d74e19bace9a4c00e6afaa507fb4068a2e1b7341e9cad530e4d34cce2113a173"),
            ("0030_inline_search_vectors", "4f1ff71ee140ff84c7df652144678787fd9d02c5308e31bad5818737eb8ca2d2"),
            ("0031_delta_entries", "537b788a0c4cf258528417d5cfb5af63e61df5472efef10be7b4ecdbac265919"),
            ("0032_pending_buckets", "5000cdff202f60ab1fa63baa0f5821c74efb3284a5ccf9b3a9b12c2776de9eba"),
            ("0033_hnsw_ef_search", "77bb0fc074462eb7de19f61aded74543214d49caafd8ec7d30e21eb63509a2ad"),
            ("0034_resolved_knobs", "751beae062b1fc535689f7c90aa655390ce612fd4a4c7e9d671e59f8d15fcef6"),
            ("0035_cross_tenant_refs", "d7a1c785c58999a4bc834a5b43bd86d188203739e9b4938413982c4d3fb6720e"),
            ("0036_secret_providers", "111d2dae0493ad853d3bb9b3582de0ec9f045cfba62dd1c73b9d850f912e4ede"),
            ("0037_index_requests", "63f9a371765d525d023795a42ca129e3883371a9b39f4dcb5f302ad0a44183f5"),
            ("0038_tenant_safe_locks", "603260cd616452cfb5447ccf50c3a4bbea6e5062ee643837edd60c0d61d9eb99"),
            ("0039_array_legs", "3921863bbeb6694846fa9a6efb89a5450c03999d1e284d1998a7f62dd249ae95"),
            ("0040_explain_rerank", "7a1b3a52ddc57723dd0602c22bddb6e49d1369593840e97460f7984a53b63181"),
            ("0041_rerank_prices", "f72140ed043af07cbd22ee5c177865d910e4eb30c7a2f96ca7a613df042e4824"),
            ("0042_document_positives", "6376f26d94018405b0d8d1e152d5800eca2731560d91048b6da4659bf1e087a5"),
        ),
    ),
)


def squashes_to_record(done: Mapping[str, str], root: Path | None = None) -> list[Squash]:
    """The squashes whose replaced migrations a database with ledger `done` (version: sha256)
    ran, so that their files are to be recorded in its ledger in place of those; MigrationError
    where it ran only some of them, or another text of one."""
    shipped = {m.version for m in migration_files(root)}
    found = []
    for squash in SQUASHES:
        if not set(squash.into) <= shipped or any(v in done for v in squash.into):
            continue   # an older tree, or recorded already: pending files run as usual
        if not any(v in done for v, _ in squash.replaced):
            continue   # none ran here (a release's database, a new one): the squash runs
        problem = squash.refusal(done)
        if problem is not None:
            raise MigrationError(problem)
        found.append(squash)
    return found


def record_squash_sql(squash: Squash, root: Path | None = None) -> str:
    """One statement that records the squash's files in place of the migrations it replaced, on
    a database that ran every one of them unchanged, and runs nothing; it does nothing where
    none of them ran or the squash is recorded, and raises (saying what to do) where only some
    ran or one ran with another text. The runner checks first (`squashes_to_record`), to say
    which; `install_script` has only this."""
    files = {m.version: m for m in migration_files(root)}
    versions = ", ".join(f"'{v}'" for v, _ in squash.replaced)
    shas = ", ".join(f"'{sha}'" for _, sha in squash.replaced)
    rows = ", ".join(f"('{v}', '{files[v].sha256}')" for v in squash.into)
    return f"""do $squash$
declare
    replaced constant text[] := array[{versions}];
    shas constant text[] := array[{shas}];
    ran integer;
    unchanged integer;
begin
    if exists (select 1 from sift.schema_migrations m where m.version = '{squash.into[0]}') then
        return;
    end if;
    select pg_catalog.count(*), pg_catalog.count(*) filter (where m.sha256 = r.sha256) into ran, unchanged
    from sift.schema_migrations m
    join rows from (pg_catalog.unnest(replaced), pg_catalog.unnest(shas)) r(version, sha256) on r.version = m.version;
    if ran = 0 then
        return;
    end if;
    if unchanged < pg_catalog.cardinality(replaced) then
        raise exception 'this database ran % of the % development migrations that release {squash.release}''s '
                        'squash replaces, % of them unchanged: {squash.advice}',
                        ran, pg_catalog.cardinality(replaced), unchanged;
    end if;
    delete from sift.schema_migrations m where m.version = any (replaced);
    insert into sift.schema_migrations (version, sha256) values {rows};
end
$squash$;"""


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
