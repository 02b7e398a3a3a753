"""Ingest rate through Client.upsert_documents: one large document against the same
chunks spread over many small documents, at several sizes.

``run_ingest(conn)`` writes, for each size N and each shape, N chunks (random unit
vectors; text from a BEIR corpus's sentences, or generated words with a Zipf
distribution) into a fresh collection under its own tenant, and reports the time to
the last document written, the final lexical refresh, and chunks per second overall.
Between runs the collection is dropped and ``sift.chunks`` vacuumed (when the role may),
so each run inserts into a dense index of the same size. Linear ingest shows as a
flat chunks/s down each shape; "the same rate as many small ones" as a ratio near 1
between shapes. ``format_table`` prints the result.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from .. import vectors
from ..beir import read_jsonl
from ..client import Client
from ..models import Chunk, Document
from ..queries import VECTOR_SCHEMA
from . import queries

TENANT = "pgsift-bench"
# Shape name -> chunks per document (None: all N chunks in one document).
SHAPES: dict[str, int | None] = {"one document": None, "documents of 10": 10}
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _texts(dataset: Path | None, rng: np.random.Generator) -> Iterator[str]:
    """Chunk texts without end: a corpus's sentences (two at a time) in turn, or generated."""
    if dataset is not None:
        sentences = [s for row in read_jsonl(dataset / "corpus.jsonl")
                     for s in _SENTENCE.split(str(row.get("text", ""))) if s.strip()]
        if not sentences:
            raise ValueError(f"{dataset}/corpus.jsonl has no text")
        while True:
            for i in range(0, len(sentences) - 1, 2):
                yield sentences[i] + " " + sentences[i + 1]
    vocabulary = np.array([f"w{i}x{(i * 7919) % 1000}" for i in range(20_000)])
    weights = 1.0 / np.arange(1, len(vocabulary) + 1) ** 1.1
    weights /= weights.sum()
    while True:
        yield " ".join(rng.choice(vocabulary, size=int(rng.integers(30, 80)), p=weights))


def _documents(n_chunks: int, per_doc: int | None, dims: int, texts: Iterator[str],
               rng: np.random.Generator) -> list[Document]:
    vectors = rng.normal(size=(n_chunks, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = [Chunk(content=next(texts), embedding=v) for v in vectors]
    size = per_doc or n_chunks
    return [Document(source_uri=f"ingest-{i // size}", title=f"document {i // size}", chunks=chunks[i:i + size])
            for i in range(0, n_chunks, size)]


def _vacuum(conn: psycopg.Connection[Any]) -> bool:
    try:
        conn.execute(queries.BENCH_VACUUM, prepare=False)
        return True
    except psycopg.Error:
        return False


def run_ingest(conn: psycopg.Connection[Any], sizes: tuple[int, ...] = (2_000, 10_000, 50_000), *,
               shapes: tuple[str, ...] = tuple(SHAPES), dims: int = 384, dataset: Path | None = None,
               seed: int = 0) -> dict[str, Any]:
    """Time ingest at each size and shape; see the module docstring. `conn` must be in
    autocommit mode, with pgsift installed; only scratch collections are written, and dropped."""
    if not sizes or min(sizes) < 10:
        raise ValueError("sizes must be at least 10 chunks")
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        raise ValueError(f"unknown shapes {unknown}; known: {list(SHAPES)}")
    rng = np.random.default_rng(seed)
    texts = _texts(dataset, rng)
    # The write's own refresh timed after it, whatever the backlog (refresh_backlog 1).
    client = Client(conn, tenant=TENANT, refresh_backlog=1)
    server = conn.execute(queries.SERVER_VERSIONS, prepare=False).fetchone()
    runs = []
    last = [0.0]   # when the latest document was written (upsert_documents' progress)

    def written(_: Document) -> None:
        last[0] = time.perf_counter()

    for n in sizes:
        for shape in shapes:
            docs = _documents(n, SHAPES[shape], dims, texts, rng)
            name = f"ingest-{uuid.uuid4().hex[:8]}"
            client.create_collection(name, embedding_dims=dims)
            try:
                started = last[0] = time.perf_counter()
                client.upsert_documents(name, docs, progress=written)
                ended = time.perf_counter()
            finally:
                client.drop_collection(name)
                vacuumed = _vacuum(conn)
            runs.append({"shape": shape, "chunks": n, "documents": len(docs),
                         "write_s": last[0] - started, "refresh_s": ended - last[0], "total_s": ended - started,
                         "chunks_per_s": n / (ended - started), "vacuumed": vacuumed})
    return {"dims": dims, "text": str(dataset) if dataset else "generated (Zipf)", "runs": runs,
            "postgres": server[0] if server else None, "pgvector": server[1] if server else None}


def run_transfer(conn: psycopg.Connection[Any], count: int = 5000, dims: int = 384,
                 repeats: int = 5) -> dict[str, Any]:
    """The vectors' trip alone, as `upsert_documents` makes it: `count` vectors as one
    vector[] parameter, (a) formatted as pgvector text by the client and parsed by the server
    (0.1.0's way), (b) in pgvector's binary form (pgsift.vectors). Median seconds of
    `repeats`, client and server together."""
    if count < 1 or dims < 1 or repeats < 1:
        raise ValueError("count, dims and repeats must be at least 1")
    rng = np.random.default_rng(0)
    values = rng.normal(size=(count, dims)).astype(np.float32)
    values /= np.linalg.norm(values, axis=1, keepdims=True)
    schema = conn.execute(VECTOR_SCHEMA, prepare=False).fetchone()
    if schema is None or not vectors.adapt(conn):
        raise ValueError("pgvector is not installed in this database")
    text_query = queries.BENCH_TRANSFER_TEXT.replace("{vector}", f"{schema[0]}.vector")
    times: dict[str, list[float]] = {"text": [], "binary": []}
    for _ in range(repeats):
        started = time.perf_counter()
        texts = [vectors.text_form(vectors.check_vector(v)) for v in values]
        sent = conn.execute(text_query, {"v": texts}, prepare=False).fetchone()
        times["text"].append(time.perf_counter() - started)
        started = time.perf_counter()
        binary = [vectors.vec(v) for v in values]
        got = conn.execute(queries.BENCH_TRANSFER_BINARY, {"v": binary}, prepare=False).fetchone()
        times["binary"].append(time.perf_counter() - started)
        assert sent == got == (count,)
    text_s, binary_s = float(np.median(times["text"])), float(np.median(times["binary"]))
    return {"count": count, "dims": dims, "repeats": repeats, "text_s": text_s, "binary_s": binary_s,
            "text_bytes": sum(len(t) for t in texts), "binary_bytes": count * (4 + 4 * dims)}


def format_transfer(result: dict[str, Any]) -> str:
    """The result of :func:`run_transfer` as a table."""
    rows = [("pgvector text", result["text_s"], result["text_bytes"]),
            ("binary", result["binary_s"], result["binary_bytes"])]
    lines = [f"vectors: {result['count']:,} of {result['dims']} dimensions as one vector[] parameter, "
             f"median of {result['repeats']}",
             f"{'form':<15} {'seconds':>9} {'bytes':>13} {'vs text':>8}"]
    lines += [f"{name:<15} {sec:>9.3f} {size:>13,} {sec / result['text_s']:>8.3f}" for name, sec, size in rows]
    return "\n".join(lines)


def format_table(result: dict[str, Any]) -> str:
    """The result of :func:`run_ingest` as an aligned plain-text table: per run, and each
    shape's rate against the first shape's at the same size and against its own smallest size."""
    runs = result["runs"]
    first = {r["chunks"]: r["chunks_per_s"] for r in runs if r["shape"] == runs[0]["shape"]}
    smallest: dict[str, float] = {}
    for r in runs:
        smallest.setdefault(r["shape"], r["chunks_per_s"])
    lines = [f"ingest: {result['dims']}-d chunks, text {result['text']}; PostgreSQL {result['postgres']}, "
             f"pgvector {result['pgvector']}",
             f"{'shape':<18}{'chunks':>8}{'docs':>8}{'write s':>10}{'refresh s':>11}{'total s':>10}"
             f"{'chunks/s':>10}{'vs ' + runs[0]['shape'][:12]:>18}{'vs smallest':>13}"]
    for r in runs:
        lines.append(f"{r['shape']:<18}{r['chunks']:>8,}{r['documents']:>8,}{r['write_s']:>10.1f}"
                     f"{r['refresh_s']:>11.1f}{r['total_s']:>10.1f}{r['chunks_per_s']:>10.0f}"
                     f"{r['chunks_per_s'] / first[r['chunks']]:>18.2f}"
                     f"{r['chunks_per_s'] / smallest[r['shape']]:>13.2f}")
    if not all(r["vacuumed"] for r in runs):
        lines.append("(sift.chunks could not be vacuumed between runs: later runs insert into a larger index)")
    return "\n".join(lines)
