"""Vectors over the wire in pgvector's binary form, through pgvector's psycopg adapter.

A chunk's embedding in text form is about 4.6 kB for 384 dimensions, formatted by the
client and parsed float by float by the server; the binary form is 4 bytes a
dimension, copied. pgsift's own parameters wrap each vector in `Vec` (a pgvector
`Vector`), and only `Vec` is registered on a connection: an application's own arrays
and pgvector registrations on the same connection are left as they were.

A connection is adapted once (one catalog read for the vector type, found through the
extension, so wherever pgvector lives). On a connection not adapted (a database without
pgvector) a single vector goes as untyped text; the write statements ask for binary (%b),
which only an adapted connection can send.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import psycopg
from pgvector import Vector
from pgvector.psycopg.vector import VectorBinaryDumper
from psycopg.adapt import Dumper
from psycopg.types import TypeInfo

from . import queries
from .errors import InvalidArgument

MAX_DIMS = 16000   # pgvector's limit for a stored vector
_FLOAT4_MAX = float(np.finfo(np.float32).max)
_TEMPLATES: dict[int, str] = {}


def check_vector(embedding: Any, what: str = "embedding") -> np.ndarray:
    """The embedding as a float32 array, refusing what the database would choke on (typed,
    naming `what`): not numbers, not 1-d, empty, over 16,000 values, NaN or infinity, or a
    value a 4-byte float cannot hold."""
    if isinstance(embedding, Vector):
        embedding = embedding.to_numpy()
    try:
        arr = np.asarray(embedding, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{what} must be a sequence of numbers") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidArgument(f"{what} must be a non-empty 1-d sequence of numbers, got shape {arr.shape}")
    if arr.size > MAX_DIMS:
        raise InvalidArgument(f"{what} has {arr.size} dimensions; pgvector stores at most 16,000")
    if not np.all(np.isfinite(arr)):
        raise InvalidArgument(f"{what} contains NaN or infinity")
    if np.abs(arr).max() > _FLOAT4_MAX:
        raise InvalidArgument(f"{what} has a value beyond the range of pgvector's 4-byte floats")
    return arr.astype(np.float32)


def text_form(values: np.ndarray) -> str:
    """pgvector's text form of checked float32 values: 9 significant digits carry each
    exactly, in one C-level format call."""
    size = int(values.size)
    template = _TEMPLATES.get(size)
    if template is None:
        template = _TEMPLATES.setdefault(size, "[" + ",".join(["%.9g"] * size) + "]")
    return template % tuple(values.tolist())


def vector_text(embedding: Any, what: str = "embedding") -> str:
    """pgvector's text form of an embedding, refusing what the database would choke on (for
    SQL written by hand; the client sends vectors in binary, as Vec)."""
    return text_form(check_vector(embedding, what))


class Vec(Vector):
    """A checked vector as a query parameter: binary on an adapted connection, text before."""

    def __init__(self, embedding: Any, what: str = "embedding"):
        super().__init__(check_vector(embedding, what))


def vec(embedding: Any, what: str = "embedding") -> Vec:
    return Vec(embedding, what)


class _Text(Dumper):
    """pgvector's text form, formatted in one C-level call: before a connection is adapted,
    with no type (oid 0), which the function's parameter type casts; after, typed (for a
    value sent as text, %t)."""

    def dump(self, obj: Any) -> bytes:
        return text_form(obj.to_numpy()).encode()


psycopg.adapters.register_dumper(Vec, _Text)

_ADAPTED: weakref.WeakSet[Any] = weakref.WeakSet()


def adapted(conn: Any) -> bool:
    return conn in _ADAPTED


def register(conn: Any, oids: tuple[int, int]) -> None:
    """Send Vec values on this connection in binary, typed as the database's vector
    (oids: the type's and its array type's)."""
    info = TypeInfo("vector", oids[0], oids[1])
    info.register(conn)   # so a list of Vec goes as vector[]
    text = type("VecText", (_Text,), {"oid": oids[0]})
    binary = type("VecBinary", (VectorBinaryDumper,), {"oid": oids[0]})
    conn.adapters.register_dumper(Vec, text)
    conn.adapters.register_dumper(Vec, binary)   # the last registered: what %s picks
    _ADAPTED.add(conn)


def adapt(conn: psycopg.Connection[Any]) -> bool:
    """Register Vec on a plain (sync) connection from the catalog, once; False when the
    database has no pgvector. (The clients do this themselves, minding the transaction.)"""
    if conn in _ADAPTED:
        return True
    row = conn.execute(queries.VECTOR_TYPES, prepare=False).fetchone()
    if row is None:
        return False
    register(conn, (row[0], row[1]))
    return True
