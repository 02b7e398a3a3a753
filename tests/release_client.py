"""Writes a collection and prints searches as JSON, with whichever pgsift is importable: the
upgrade tests run it with a release's own package (from its commit on main,
pgsift.version.RELEASE_COMMITS) before an upgrade and with this checkout's after, so the same calls are made
by both versions.

    python release_client.py DSN write|more|search [EXPECTED_PGSIFT_DIR]
"""

from __future__ import annotations

import json
import sys

import numpy as np
import psycopg
from pgsift import Chunk, Client, Document

DIMS = 8
WORDS = ["refund", "policy", "shipping", "parcel", "invoice", "warranty", "return", "leave", "holiday", "salary",
         "pension", "laptop", "password", "printer", "badge", "office", "parking", "lunch", "travel", "expense"]
QUERIES = [("refund warranty", 1), ("parking badge office", 2), ("travel expense salary", 3), ("", 4),
           ("printer", None)]


def vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIMS)
    return v / np.linalg.norm(v)


def documents() -> list[Document]:
    rng = np.random.default_rng(7)
    docs = []
    for d in range(30):
        chunks = [Chunk(content=" ".join(rng.choice(WORDS, size=12)), embedding=vector(100 * d + k),
                        context=f"Doc {d}") for k in range(3)]
        docs.append(Document(source_uri=f"doc-{d}.md", title=f"Doc {d}", chunks=chunks,
                             metadata={"team": ["people", "ops"][d % 2], "year": 2020 + d % 5}))
    return docs


def searches(client: Client) -> list[list[list[object]]]:
    out = []
    for text, seed in QUERIES:
        for knobs in ({}, {"per_document_cap": 1}, {"mmr_lambda": 0.5}):
            hits = client.search("kb", text, embedding=None if seed is None else vector(seed), top_k=8,
                                 filter={"team": "ops"} if seed == 2 else None, **knobs)
            out.append([[h.source_uri, h.ordinal, h.found_by, h.dense_rank, h.lexical_rank, round(h.score, 9)]
                        for h in hits])
    return out


def main() -> None:
    dsn, action = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        import pgsift

        assert pgsift.__file__.startswith(sys.argv[3]), f"imported {pgsift.__file__}, not {sys.argv[3]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        client = Client(conn)
        if action == "write":
            client.create_collection("kb", embedding_dims=DIMS)
            client.upsert_documents("kb", documents())
        elif action == "more":   # after the database was upgraded: this client writes on
            more = documents()[:2]
            for doc in more:
                doc.source_uri = "more-" + doc.source_uri
            client.upsert_documents("kb", more)
        json.dump(searches(client), sys.stdout)


if __name__ == "__main__":
    main()
