"""Typed errors a caller can act on, and the one table that maps database errors to them.

The SQL functions raise SQLSTATEs of class SF, the knob domains raise check
violations naming the knob, and row-level security raises 42501; `translate`
turns those into the exceptions below so nobody parses messages. `SQLSTATES`
is the registry of every code pgsift raises (docs/errors.md is checked
against it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg


class PgsiftError(Exception):
    """Base class of every error pgsift raises on purpose."""


class InvalidArgument(PgsiftError, ValueError):
    """An argument is malformed (a filter that is not an object, a blank name, a zero vector...)."""


class CollectionNotFound(PgsiftError, LookupError):
    """The collection does not exist for this tenant."""


class CollectionExists(PgsiftError):
    """A collection of that name already exists for the tenant."""


class DimensionMismatch(InvalidArgument):
    """An embedding's dimension differs from the collection's (`.got`, `.expected`)."""

    def __init__(self, message: str, *, got: int | None = None, expected: int | None = None):
        super().__init__(message)
        self.got = got
        self.expected = expected


class InvalidKnob(InvalidArgument):
    """A knob is unknown, of the wrong type, not allowed here, or out of its range (`.knob`)."""

    def __init__(self, message: str, *, knob: str | None = None):
        super().__init__(message)
        self.knob = knob


class UnknownLanguage(InvalidArgument):
    """The search language is not a text search configuration of this database."""


class IncompatibleCollections(InvalidArgument):
    """Collections searched together differ in embedding size: search them separately."""


class ImmutableChunk(InvalidArgument):
    """Chunk text is never rewritten: replace the document instead."""


class DocumentNotFound(PgsiftError, LookupError):
    """A chunk names a document that does not exist."""


class TenantError(PgsiftError, PermissionError):
    """No tenant is bound, or this role may not act for the tenant it asked for."""


class SectionNotFound(PgsiftError, LookupError):
    """A chunk asked about has no section to resolve (flat chunking), or is not the tenant's."""


class InvalidCursor(PgsiftError, ValueError):
    """A pagination cursor that is malformed, altered, another tenant's, or of another request
    (collections, question, vector, filter or knobs differ from its first page's)."""


class SpaceNotFound(PgsiftError, LookupError):
    """A collection has no vector space of that name (Client.vector_spaces lists them)."""


class SpaceIncomplete(PgsiftError, ValueError):
    """A vector space still lacks vectors for some chunks (the count is in the message): fill
    them (Client.reembed resumes) before switching searches to it."""


class LimitExceeded(InvalidArgument):
    """A call asked for more than the operator allows its tenant (sift.tenant_limits): a knob or
    match_count above its ceiling, one HNSW index shape too many, or a search past its time
    limit. `.limit` names the limit (a knob's name, `max_match_count`, `call_time_limit`,
    `max_index_shapes`, `max_index_requests`), `.ceiling` is its value as text."""

    def __init__(self, message: str, *, limit: str | None = None, ceiling: str | None = None):
        super().__init__(message)
        self.limit = limit
        self.ceiling = ceiling


class PermissionDenied(PgsiftError, PermissionError):
    """The database refused: this role lacks the grant, or the row is another tenant's."""


class ReadOnlyDatabase(PgsiftError, PermissionError):
    """A write reached a read-only server (a hot standby) or a read-only transaction: send
    writes to the primary."""


class RerankerNotAllowed(PgsiftError, PermissionError):
    """A reranker (or its endpoint) is not this tenant's to use, or its key is mapped for another
    provider or host."""


class GoldenSetNotFound(PgsiftError, LookupError):
    """The collection has no golden set of that name (or none at all)."""


class GoldenSetExists(PgsiftError):
    """A golden set of that name already exists in the collection (replace it explicitly)."""


class MigrationError(PgsiftError):
    """The database's recorded migrations disagree with the files shipped."""


class EmbedderUnavailable(PgsiftError, RuntimeError):
    """The optional local embedder is not installed."""


class ServerUnavailable(PgsiftError, RuntimeError):
    """No database: DATABASE_URL unset and the embedded server is not installed or not running."""


class EvaluationUnavailable(PgsiftError, RuntimeError):
    """The optional evaluation libraries are not installed."""


@dataclass(frozen=True)
class Code:
    """One SQLSTATE pgsift raises: the exception it becomes and what it means."""

    error: type[PgsiftError]
    meaning: str


# Every code pgsift raises on purpose. Codes of class SF are pgsift's own.
SQLSTATES: dict[str, Code] = {
    "SF001": Code(CollectionNotFound, "unknown collection (for the current tenant)"),
    "SF002": Code(DimensionMismatch, "an embedding's dimension differs from the collection's"),
    "SF003": Code(InvalidArgument, "an argument is malformed, out of range or too large"),
    "SF004": Code(UnknownLanguage, "unknown text search configuration"),
    "SF005": Code(ImmutableChunk, "chunk text is never rewritten"),
    "SF006": Code(DocumentNotFound, "a chunk names an unknown document"),
    "SF007": Code(IncompatibleCollections, "collections searched together differ in embedding size"),
    "SF008": Code(RerankerNotAllowed, "a reranker, endpoint or key is not the tenant's to use"),
    "SF009": Code(InvalidKnob, "a knob is unknown, of the wrong type or not settable here"),
    "SF010": Code(TenantError, "no tenant is bound, or the role may not act for that tenant"),
    "SF011": Code(SectionNotFound, "a chunk has no section to resolve, or is not the tenant's"),
    "SF012": Code(InvalidCursor, "a pagination cursor is malformed, altered, or not this request's"),
    "SF013": Code(SpaceNotFound, "a collection has no vector space of that name"),
    "SF014": Code(SpaceIncomplete, "a vector space lacks vectors for some chunks"),
    "SF015": Code(LimitExceeded, "a call asks for more than the tenant's ceilings allow (sift.tenant_limits)"),
    "SFG01": Code(GoldenSetNotFound, "unknown golden set"),
    "23514": Code(InvalidKnob, "check_violation: a knob's domain (named) or a table CHECK"),
    "23505": Code(CollectionExists, "unique_violation: a collection or golden set name is taken"),
    "42501": Code(PermissionDenied, "insufficient_privilege: a grant or row-level policy refused"),
    "25006": Code(ReadOnlyDatabase, "read_only_sql_transaction: a write on a standby or a read-only transaction"),
    "22003": Code(InvalidArgument, "numeric_value_out_of_range: a number too large for its type"),
    "22P02": Code(InvalidArgument, "invalid_text_representation: a malformed vector"),
    "22000": Code(InvalidArgument, "data_exception: NaN or infinity in a vector (pgvector refuses it)"),
}

_NOT_FINITE = re.compile(r"^(NaN|infinite value) not allowed in (vector|halfvec|sparsevec)")
_DIMS = re.compile(r"has (\d+) dimensions; collection .* expects (\d+)")
_DOMAIN = re.compile(r"domain sift\.(\w+)")
_KNOB_IN_MESSAGE = re.compile(r"^(?:invalid value for knob |unknown knob \")?(\w+)")
# Table CHECKs that are not about a knob: a blank or too long name, a bad URI...
_SHAPES = {"name_shape": "a name must be 1 to 128 characters",
           "source_uri_shape": "source_uri must be 1 to 2048 bytes"}
_KNOB_CONSTRAINTS = {"recency_weight_within_ceiling": "recency_weight"}


def _message(exc: psycopg.Error) -> tuple[str, str | None]:
    diag = exc.diag
    message = (diag.message_primary or str(exc)).strip()
    return message, diag.message_hint


def translate(exc: psycopg.Error) -> Exception:
    """Map a database error to a typed pgsift error; unknown errors pass through unchanged."""
    state = exc.sqlstate
    if state not in SQLSTATES:
        return exc
    message, hint = _message(exc)
    full = f"{message} ({hint})" if hint else message
    constraint = exc.diag.constraint_name or ""
    if state == "SF002":
        m = _DIMS.search(message)
        got, expected = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        return DimensionMismatch(full, got=got, expected=expected)
    if state == "SF015":
        return LimitExceeded(full, limit=exc.diag.constraint_name, ceiling=exc.diag.message_detail)
    if state == "SF009":
        m = _KNOB_IN_MESSAGE.match(message)
        return InvalidKnob(full, knob=m.group(1) if m else None)
    if state == "23514":
        if constraint in _KNOB_CONSTRAINTS:
            knob = _KNOB_CONSTRAINTS[constraint]
            return InvalidKnob(f"invalid value for {knob}: {full}", knob=knob)
        m = _DOMAIN.search(message)
        if constraint in _SHAPES or (m and m.group(1) == "name"):
            return InvalidArgument(f"{_SHAPES.get(constraint, 'a name must be 1 to 128 characters')}: {full}")
        # A knob's domain CHECK names the knob; an argument's or a table column's CHECK is
        # <name>_valid (top_k, embedding_dims, a reranker's timeout): not a knob.
        if constraint.endswith("_valid"):
            return InvalidArgument(f"invalid {constraint.removesuffix('_valid')}: {full}")
        if m or constraint.endswith(("_range", "_known")):
            knob = m.group(1) if m else constraint.rsplit("_", 1)[0]
            return InvalidKnob(f"invalid value for {knob}: {message}", knob=knob)
        return InvalidArgument(full)
    if state == "23505":
        if constraint == "golden_sets_collection_name_key":
            return GoldenSetExists("a golden set of that name already exists in the collection "
                                   "(pass replace=True / --replace to overwrite it)")
        if constraint == "collections_tenant_name_key":
            return CollectionExists(full)
        return exc
    if state == "22P02":
        return InvalidArgument(f"malformed embedding: {message}") if "vector" in message else exc
    if state == "22000":   # pgvector's input refuses NaN and infinity before any pgsift function runs
        return InvalidArgument(f"malformed embedding: {message}") if _NOT_FINITE.search(message) else exc
    return SQLSTATES[state].error(full)
