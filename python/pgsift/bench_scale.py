"""Scale benchmark: `pgsift bench scale --chunks N`.

Generates a synthetic corpus in the database (Zipf vocabulary, so the head
terms occur in 20-50% of chunks; chunk lengths around 200 tokens; 384-d
vectors drawn around 256 cluster centres), then times, for rare-term,
common-term and mixed queries: the lexical leg (BM25, and ts_rank_cd beside it
in the same run), the dense leg and the whole hybrid search. Also reports
ingest throughput with statistics maintenance on, and the storage BM25 adds
next to the plain tsvector + GIN baseline.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import psycopg

from .client import Client
from .models import Chunk, Document

DIMS = 384
VOCAB = 60_000
ZIPF_S = 1.07
CHUNKS_PER_DOC = 20
COLLECTION = "scale"


def _words(rng: np.random.Generator, n: int) -> np.ndarray:
    ranks = rng.zipf(ZIPF_S, size=n)
    return np.where(ranks <= VOCAB, ranks, rng.integers(1, VOCAB, size=n))


def _word(rank: int) -> str:
    # Letters only, so every token is a plain word the english parser keeps.
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = ""
    rank += 26 * 27
    while rank:
        rank, r = divmod(rank, 26)
        out += letters[r]
    return "q" + out


def _documents(rng: np.random.Generator, centres: np.ndarray, start: int, n_docs: int) -> list[Document]:
    docs = []
    for d in range(start, start + n_docs):
        chunks = []
        for _ in range(CHUNKS_PER_DOC):
            length = int(np.clip(rng.normal(200, 60), 50, 400))
            text = " ".join(_word(int(r)) for r in _words(rng, length))
            vec = centres[rng.integers(len(centres))] + rng.normal(scale=0.35, size=DIMS) / np.sqrt(DIMS)
            chunks.append(Chunk(content=text, embedding=(vec / np.linalg.norm(vec)).astype(np.float32)))
        docs.append(Document(source_uri=f"doc-{d}", title=None, chunks=chunks))
    return docs


def _percentiles(values: list[float]) -> dict:
    ms = sorted(v * 1000 for v in values)
    pick = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
    return {"p50": round(statistics.median(ms), 2), "p95": round(pick(0.95), 2), "p99": round(pick(0.99), 2)}


def _vec(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


def run_scale(conn: psycopg.Connection, chunks: int, *, queries: int = 100, seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    client = Client(conn)
    conn.execute("select sift.drop_collection(%s)", [COLLECTION]) if conn.execute(
        "select 1 from sift.collections where tenant = 'default' and name = %s", [COLLECTION]).fetchone() else None
    client.create_collection(COLLECTION, embedding_dims=DIMS)
    centres = rng.normal(size=(256, DIMS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)

    # Bulk load: the HNSW index is built once at the end (as anyone loading a
    # large corpus would), statistics triggers stay on throughout.
    index = conn.execute("select sift._ensure_dense_index(%s, 'cosine')", [DIMS]).fetchone()[0]
    conn.execute(f'drop index sift."{index}"')
    n_docs = max(1, chunks // CHUNKS_PER_DOC)
    t0 = time.perf_counter()
    for start in range(0, n_docs, 500):
        client.upsert_documents(COLLECTION, _documents(rng, centres, start, min(500, n_docs - start)),
                                refresh_every=10**9)
    ingest_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute("select sift._ensure_dense_index(%s, 'cosine')", [DIMS])
    index_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    client.refresh_lexical_stats(COLLECTION)
    refresh_s = time.perf_counter() - t0
    conn.execute("analyze sift.chunks")
    n_chunks = conn.execute("select count(*) from sift.chunks").fetchone()[0]

    # Query terms by document frequency, from the exact statistics.
    df = conn.execute("select lexeme, df::float8 / %s from sift.term_df", [n_chunks]).fetchall()
    common = [w for w, f in df if 0.2 <= f <= 0.5] or [w for w, f in sorted(df, key=lambda x: -x[1])[:20]]
    rare = [w for w, f in df if f * n_chunks <= 100]
    mixes = {
        "rare": lambda: list(rng.choice(rare, size=3)),
        "common": lambda: list(rng.choice(common, size=min(3, len(common)))),
        "mixed": lambda: list(rng.choice(common, size=2)) + list(rng.choice(rare, size=1)),
    }
    results: dict = {"chunks": n_chunks, "ingest_chunks_per_s": round(n_chunks / ingest_s, 1),
                     "ingest_s": round(ingest_s, 1), "hnsw_build_s": round(index_s, 1),
                     "refresh_s": round(refresh_s, 1), "common_terms": len(common), "modes": {}}
    sql = ("select count(*) from sift.search(collection => %(c)s::text, query_text => %(q)s::text, "
           "query_embedding => %(e)s, match_count => 10, hybrid => %(h)s::boolean, "
           "lexical_scorer => %(s)s::text::sift.lexical_scorer)")
    for mix, make in mixes.items():
        timings: dict[str, list[float]] = {k: [] for k in ("lexical", "lexical_ts_rank_cd", "dense", "hybrid")}
        for i in range(queries + 1):
            text = " ".join(make())
            vec = _vec(centres[rng.integers(len(centres))] + rng.normal(scale=0.3, size=DIMS) / np.sqrt(DIMS))
            runs = {"lexical": dict(e=None, h=True, s="bm25"),
                    "lexical_ts_rank_cd": dict(e=None, h=True, s="ts_rank_cd"),
                    "dense": dict(e=vec, h=False, s="bm25"),
                    "hybrid": dict(e=vec, h=True, s="bm25")}
            for name, args in runs.items():
                t = time.perf_counter()
                conn.execute(sql, dict(c=COLLECTION, q=text, **args)).fetchone()
                if i:  # the first round warms the cache
                    timings[name].append(time.perf_counter() - t)
        results["modes"][mix] = {k: _percentiles(v) for k, v in timings.items()}
        bm, cd = results["modes"][mix]["lexical"]["p50"], results["modes"][mix]["lexical_ts_rank_cd"]["p50"]
        results["modes"][mix]["ts_rank_cd_over_bm25_p50"] = round(cd / bm, 2) if bm else None

    sizes = dict(conn.execute("""
        select 'bm25 (stats + lists + postings)', sum(pg_total_relation_size(c.oid))
        from pg_class c where c.oid in ('sift.term_df'::regclass, 'sift.term_df_pending'::regclass,
                                        'sift.collection_lexical_stats'::regclass,
                                        'sift.term_lists'::regclass, 'sift.term_postings'::regclass)
        union all
        select 'tsvector column + GIN', (select sum(pg_column_size(search_vector)) from sift.chunks)
            + pg_relation_size('sift.chunks_search_vector_idx')""").fetchall())
    results["storage_bytes_per_chunk"] = {k: round(float(v) / n_chunks, 1) for k, v in sizes.items()}
    return results


def format_table(result: dict) -> str:
    lines = [f"{result['chunks']:,} chunks; ingest {result['ingest_chunks_per_s']:,} chunks/s with BM25 "
             f"statistics on ({result['ingest_s']} s), HNSW build {result['hnsw_build_s']} s, "
             f"refresh (impact lists for {result['common_terms']} common terms and the rest) "
             f"{result['refresh_s']} s"]
    lines.append(f"{'queries':8} {'leg':20} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for mix, modes in result["modes"].items():
        for leg in ("lexical", "lexical_ts_rank_cd", "dense", "hybrid"):
            p = modes[leg]
            lines.append(f"{mix:8} {leg:20} {p['p50']:8.2f} {p['p95']:8.2f} {p['p99']:8.2f}")
        lines.append(f"{mix:8} {'ts_rank_cd / bm25 p50':20} {modes['ts_rank_cd_over_bm25_p50']:>8}")
    for k, v in result["storage_bytes_per_chunk"].items():
        lines.append(f"storage per chunk, {k}: {v} bytes")
    return "\n".join(lines)
