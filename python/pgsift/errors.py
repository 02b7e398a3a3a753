"""Typed errors a caller can act on.

The SQL functions raise SQLSTATEs of class SF (see sql/00_core.sql) and the
knob domains raise check_violation naming the knob; `translate` turns those
into the exceptions below so nobody has to parse messages.
"""

from __future__ import annotations

import re

import psycopg


class PgsiftError(Exception):
    """Base class of every error pgsift raises on purpose."""


class CollectionNotFound(PgsiftError, LookupError):
    """The collection does not exist for this tenant."""


class DimensionMismatch(PgsiftError, ValueError):
    """An embedding's dimension differs from the collection's."""

    def __init__(self, message: str, *, got: int | None = None, expected: int | None = None):
        super().__init__(message)
        self.got = got
        self.expected = expected


class InvalidKnob(PgsiftError, ValueError):
    """A ranking knob is out of its allowed range (refused by the database's CHECK)."""

    def __init__(self, message: str, *, knob: str | None = None):
        super().__init__(message)
        self.knob = knob


class InvalidArgument(PgsiftError, ValueError):
    """An argument is malformed (a filter that is not an object, a blank name, ...)."""


class UnknownLanguage(InvalidArgument):
    """The search language is not a text search configuration of this database."""


class IncompatibleCollections(InvalidArgument):
    """Collections searched together differ in embedding size: search them separately."""


class DocumentNotFound(PgsiftError, LookupError):
    """A chunk names a document that does not exist."""


class CollectionExists(PgsiftError):
    """A collection of that name already exists for the tenant."""


class MigrationError(PgsiftError):
    """The database's recorded migrations disagree with the files shipped."""


class EmbedderUnavailable(PgsiftError, RuntimeError):
    """The optional local embedder is not installed."""


class ServerUnavailable(PgsiftError, RuntimeError):
    """No database: DATABASE_URL unset and the embedded server is not installed or not running."""


_DIMS = re.compile(r"has (\d+) dimensions; collection .* expects (\d+)")
_DOMAIN = re.compile(r'domain sift\.(\w+)')
# Table CHECKs (and their per-call twins) that tie two knobs together: the knob to name.
_CONSTRAINT_KNOBS = {"recency_weight_within_ceiling": "recency_weight"}


def translate(exc: psycopg.Error) -> Exception:
    """Map a database error to a typed pgsift error; unknown errors pass through unchanged."""
    state = getattr(exc, "sqlstate", None)
    diag = getattr(exc, "diag", None)
    message = (diag.message_primary if diag and diag.message_primary else str(exc)).strip()
    hint = diag.message_hint if diag else None
    full = f"{message} ({hint})" if hint else message
    if state == "SF001":
        return CollectionNotFound(full)
    if state == "SF002":
        m = _DIMS.search(message)
        got, expected = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        return DimensionMismatch(full, got=got, expected=expected)
    if state == "SF004":
        return UnknownLanguage(full)
    if state in ("SF003", "SF005"):
        return InvalidArgument(full)
    if state == "SF006":
        return DocumentNotFound(full)
    if state == "SF007":
        return IncompatibleCollections(full)
    if state == "23514":  # check_violation: a knob's domain or a table CHECK
        constraint = (diag.constraint_name if diag else None) or ""
        if constraint in _CONSTRAINT_KNOBS:
            knob = _CONSTRAINT_KNOBS[constraint]
            return InvalidKnob(f"invalid value for {knob}: {full}", knob=knob)
        m = _DOMAIN.search(message)
        if m or constraint.endswith(("_range", "_positive", "_known")):
            knob = m.group(1) if m else constraint.rsplit("_", 1)[0]
            return InvalidKnob(f"invalid value for {knob}: {message}", knob=knob)
        return InvalidArgument(full)
    if state == "23505" and diag and diag.constraint_name == "collections_tenant_name_key":
        return CollectionExists(full)
    if state == "22P02" and "vector" in message:
        return InvalidArgument(f"malformed embedding: {message}")
    return exc
