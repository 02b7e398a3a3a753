"""Scale benchmark: `pgsift bench scale --chunks N`.

Generates a synthetic corpus in the database (Zipf vocabulary, so the head
terms occur in 20-50% of chunks; chunk lengths around 200 tokens; 384-d
vectors drawn around 256 cluster centres), then times, for rare-term,
common-term and mixed queries: the lexical leg (BM25, and ts_rank_cd beside it
in the same run), the dense leg and the whole hybrid search, beside raw
pgvector (`order by embedding <=> q limit 40`, at pgvector's ef_search 40 and
at the dense leg's, hnsw_ef_search) and the peers' SQL (Supabase's
hybrid_search, full text ranked by ts_rank_cd) over a view of the same chunks
(pgsift.bench.peers), all in turn query by query, each p50 also as a ratio of
raw pgvector's. Also reports
ingest throughput with statistics maintenance on, beside a plain table with the
same indexes and beside the floor (pgsift's writes with no BM25 upkeep at all),
and the storage BM25 adds next to the plain tsvector + GIN baseline.
"""

from __future__ import annotations

import statistics
import struct
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg.types.json import Jsonb

from ..client import BATCH_DOCUMENTS, Client
from ..models import Chunk, Document
from . import peers as bench_peers
from . import plain as bench_plain
from . import queries as q
from . import turns as bench_turns

DIMS = 384
VOCAB = 500_000          # Zipf-Mandelbrot over a finite vocabulary: P(r) ~ (r + 2.7)^-1.1
ZIPF_S, ZIPF_Q = 1.1, 2.7
CHUNKS_PER_DOC = 20
BATCH_CHUNKS = 10_000    # chunks per COPY (one transaction, one statistics row); whole documents
COLLECTION = "scale"
LIVE_ROUNDS = 3          # live writes into pgsift and the plain table, in turn
# Each side's runs by the names results have always carried.
LIVE_KEYS = {"pgsift_ingest": "client_ingest", "pgsift_one": "client_one", "plain_ingest": "plain_live",
             "plain_one": "plain_one", "floor_ingest": "floor_ingest", "floor_one": "floor_one"}
NO_REFRESH = 2**31 - 1   # a refresh_backlog never reached: the floor side refreshes nothing


def _word(rank: int) -> str:
    # Letters only, so every token is a plain word the english parser keeps.
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = ""
    rank += 26 * 27
    while rank:
        rank, r = divmod(rank, 26)
        out += letters[r]
    return "q" + out


class Corpus:
    """Chunks drawn from a Zipf-Mandelbrot vocabulary: about 50 words occur in
    20-50% of chunks, and at a million chunks every word past rank ~90,000 is
    in at most 100 (so rare-term queries exist at every scale, unlike a plain
    zeta draw folded into a small vocabulary). Lengths ~ N(200, 60) tokens;
    vectors around 256 unit cluster centres."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.words = np.array([_word(r) for r in range(1, VOCAB + 1)], dtype=object)
        p = (np.arange(1, VOCAB + 1) + ZIPF_Q) ** -ZIPF_S
        self.cdf = np.cumsum(p / p.sum())
        self.centres = self.rng.normal(size=(256, DIMS))
        self.centres /= np.linalg.norm(self.centres, axis=1, keepdims=True)

    def texts(self, n: int) -> list[str]:
        lengths = np.clip(self.rng.normal(200, 60, size=n), 50, 400).astype(int)
        ranks = np.minimum(np.searchsorted(self.cdf, self.rng.random(lengths.sum())), VOCAB - 1)
        tokens = self.words[ranks]
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        return [" ".join(tokens[bounds[i]:bounds[i + 1]]) for i in range(n)]

    def vectors(self, n: int, scale: float = 0.35) -> npt.NDArray[np.float32]:
        v = self.centres[self.rng.integers(len(self.centres), size=n)] \
            + self.rng.normal(scale=scale, size=(n, DIMS)) / np.sqrt(DIMS)
        return np.asarray(v / np.linalg.norm(v, axis=1, keepdims=True), dtype=np.float32)

    def documents(self, start: int, n_docs: int) -> list[Document]:
        texts, vecs = self.texts(n_docs * CHUNKS_PER_DOC), self.vectors(n_docs * CHUNKS_PER_DOC)
        return [Document(source_uri=f"extra-{start + d}", title=None,
                         chunks=[Chunk(content=texts[i], embedding=vecs[i])
                                 for i in range(d * CHUNKS_PER_DOC, (d + 1) * CHUNKS_PER_DOC)])
                for d in range(n_docs)]


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)


def _copy_rows(doc_ids: list[int], texts: list[str], vecs: np.ndarray) -> bytes:
    """COPY binary: (document_id, ordinal, content, embedding), vectors in
    pgvector's wire format (int16 dims, int16 unused, float4 big-endian)."""
    vec_head = struct.pack("!ihh", 4 + 4 * DIMS, DIMS, 0)
    be = vecs.astype(">f4")
    out = [_COPY_HEADER]
    for i, text in enumerate(texts):
        body = text.encode()
        out.append(struct.pack("!hiqiii", 4, 8, doc_ids[i // CHUNKS_PER_DOC], 4, i % CHUNKS_PER_DOC,
                               len(body)))
        out.append(body)
        out.append(vec_head)
        out.append(be[i].tobytes())
    out.append(struct.pack("!h", -1))
    return b"".join(out)


def load(conn: psycopg.Connection[Any], corpus: Corpus, chunks: int, collection_id: int) -> None:
    """Bulk load: documents in one statement per batch, their chunks by one
    binary COPY, statistics triggers on (one ledger row per batch)."""
    n_docs = max(1, chunks // CHUNKS_PER_DOC)
    per_batch = BATCH_CHUNKS // CHUNKS_PER_DOC
    for start in range(0, n_docs, per_batch):
        count = min(per_batch, n_docs - start)
        texts, vecs = corpus.texts(count * CHUNKS_PER_DOC), corpus.vectors(count * CHUNKS_PER_DOC)
        with conn.transaction():
            doc_ids = [r[0] for r in conn.execute(
                q.BENCH_INSERT_DOCUMENTS,
                {"collection_id": collection_id, "first": start, "last": start + count - 1}).fetchall()]
            with conn.cursor().copy(q.BENCH_COPY_CHUNKS) as copy:
                copy.write(_copy_rows(doc_ids, texts, vecs))


def _percentiles(values_ms: list[float]) -> dict[str, float]:
    ms = sorted(values_ms)

    def pick(share: float) -> float:
        return ms[min(len(ms) - 1, int(share * len(ms)))]

    return {"p50": round(statistics.median(ms), 2), "p95": round(pick(0.95), 2), "p99": round(pick(0.99), 2)}


def _one(conn: psycopg.Connection[Any], query: Any, params: dict[str, Any] | None = None) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None   # aggregates and counts always return a row
    return row[0]


def _vec(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


def _existing(conn: psycopg.Connection[Any], chunks: int) -> bool:
    if not any(c.name == COLLECTION for c in Client(conn).list_collections()):
        return False   # --reuse on a database that has no corpus yet: build it
    return bool(_one(conn, q.BENCH_CHUNK_COUNT, {"collection": COLLECTION})
                == max(1, chunks // CHUNKS_PER_DOC) * CHUNKS_PER_DOC)


def build(conn: psycopg.Connection[Any], corpus: Corpus, chunks: int) -> dict[str, Any]:
    """Load the corpus as anyone loading a large one would: HNSW index dropped
    and built once at the end, BM25 statistics maintained throughout."""
    client = Client(conn)
    if any(c.name == COLLECTION for c in client.list_collections()):
        client.drop_collection(COLLECTION)
    col = client.create_collection(COLLECTION, embedding_dims=DIMS)
    index = _one(conn, q.BENCH_ENSURE_INDEX, {"dims": DIMS})
    conn.execute(q.bench_drop_index(index))
    t0 = time.perf_counter()
    load(conn, corpus, chunks, col.collection_id)
    seconds = time.perf_counter() - t0
    return {"load_chunks_per_s": round(chunks / seconds, 1), "load_s": round(seconds, 1)}


def finish(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Impact lists by one refresh, the HNSW index if missing, fresh planner
    statistics (each timed; quick when a reused corpus has them already)."""
    conn.execute(q.BENCH_WORK_MEM)   # a bulk build's sorts, as a maintenance session would
    t0 = time.perf_counter()
    Client(conn).refresh_lexical_stats(COLLECTION)
    refresh_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute(q.BENCH_MAINTENANCE_WORK_MEM)
    conn.execute(q.BENCH_ENSURE_INDEX, {"dims": DIMS})
    index_s = time.perf_counter() - t0
    conn.execute(q.BENCH_VACUUM)
    conn.execute(q.BENCH_RESET_WORK_MEM)
    row = conn.execute(q.BENCH_LISTS, {"collection": COLLECTION}).fetchone()
    assert row is not None   # one row: the collection's (sift._collection raises without it)
    lists, min_df = row
    return {"refresh_s": round(refresh_s, 1), "hnsw_build_s": round(index_s, 1), "lists": lists,
            "lists_min_df": min_df}


def _client_ingest(conn: psycopg.Connection[Any], documents: list[Document], per_call: int, *,
                   floor: bool = False) -> float:
    """Write through Client.upsert_documents onto the loaded collection (lists in
    place, so their deltas are maintained), `per_call` documents a call, refresh
    included: the ones the client runs and a last one for what the calls left
    pending; chunks per second. Then removed again (untimed). floor: pgsift's
    write path with no BM25 upkeep at all (the statistics triggers off, no
    refresh), written and removed that way, so no statistics ever count them:
    the most any lagging of the statistics could give (issue 33, decision 3)."""
    client = Client(conn, refresh_backlog=NO_REFRESH) if floor else Client(conn)
    if floor:
        conn.execute(q.BENCH_STATS_TRIGGERS_OFF)
    try:
        t0 = time.perf_counter()
        for start in range(0, len(documents), per_call):
            client.upsert_documents(COLLECTION, documents[start:start + per_call], batch_documents=BATCH_DOCUMENTS)
        if not floor:
            client.refresh_lexical_stats(COLLECTION)
        seconds = time.perf_counter() - t0
        for doc in documents:
            client.delete_document(COLLECTION, doc.source_uri)
        if not floor:
            client.refresh_lexical_stats(COLLECTION)
    finally:
        if floor:
            conn.execute(q.BENCH_STATS_TRIGGERS_ON)
    return len(documents) * CHUNKS_PER_DOC / seconds


def _plain_ingest(conn: psycopg.Connection[Any], documents: list[Document], per_call: int, first_id: int) -> float:
    """The same documents into the plain table, `per_call` a call (bench_plain.live, a
    transaction each); chunks per second. Then removed again (untimed)."""
    t0 = time.perf_counter()
    for start in range(0, len(documents), per_call):
        bench_plain.live(conn, documents[start:start + per_call], first_id=first_id + start,
                         batch_documents=per_call)
    seconds = time.perf_counter() - t0
    conn.execute(q.PLAIN_DELETE, {"ids": list(range(first_id, first_id + len(documents)))})
    return len(documents) * CHUNKS_PER_DOC / seconds


def _live(conn: psycopg.Connection[Any], documents: list[Document], one_by_one: list[Document],
          first_id: int | None) -> dict[str, Any]:
    """Live writes, pgsift and (first_id given) the plain table in turn, LIVE_ROUNDS
    rounds, the side that goes first rotating, after both bulk loads (the one
    loaded last would otherwise write while the other's load is still being
    flushed): `documents` in one call, then `one_by_one` a document a call. Medians
    of the rounds, and of each round's pgsift / plain. Beside the plain table, when
    this role owns sift.chunks, a third side: pgsift with no BM25 upkeep (the floor,
    _client_ingest)."""
    sides = ["pgsift"]
    if first_id is not None:
        sides += ["floor", "plain"] if _one(conn, q.BENCH_OWNS_CHUNKS) else ["plain"]
    runs: dict[str, list[float]] = {f"{side}_{k}": [] for side in sides for k in ("ingest", "one")}
    for r in range(LIVE_ROUNDS):
        for side in sides[r % len(sides):] + sides[:r % len(sides)]:
            if side == "plain" and first_id is not None:
                runs["plain_ingest"].append(_plain_ingest(conn, documents, len(documents), first_id))
                runs["plain_one"].append(_plain_ingest(conn, one_by_one, 1, first_id + len(documents)))
            else:
                runs[f"{side}_ingest"].append(_client_ingest(conn, documents, len(documents), floor=side == "floor"))
                runs[f"{side}_one"].append(_client_ingest(conn, one_by_one, 1, floor=side == "floor"))
    out: dict[str, Any] = {f"{LIVE_KEYS[k]}_chunks_per_s": round(statistics.median(v), 1) for k, v in runs.items()}
    if first_id is not None:
        out["live_rounds"] = LIVE_ROUNDS
        for side in sides[:-1]:
            for k in ("ingest", "one"):
                out[f"{LIVE_KEYS[f'{side}_{k}']}_over_plain"] = round(statistics.median(
                    a / b for a, b in zip(runs[f"{side}_{k}"], runs[f"plain_{k}"], strict=True)), 3)
    return out


def plain_source(seed: int) -> bench_plain.Source:
    """The rows build(Corpus(seed), ...) loaded, batch by batch, as COPY data for the plain
    table: a fresh corpus drawn in the same batches draws the same rows."""
    corpus = Corpus(seed)

    def source(start: int, count: int) -> bytes:
        texts, vecs = corpus.texts(count), corpus.vectors(count)
        return _copy_rows(list(range(start // CHUNKS_PER_DOC, (start + count) // CHUNKS_PER_DOC)), texts, vecs)

    return source


def _ingest(conn: psycopg.Connection[Any], seed: int, chunks: int, documents: list[Document],
            one_by_one: list[Document], plain: bool) -> dict[str, Any]:
    """With `plain`, the same rows into a plain table (bulk, as build loads them);
    then the live writes (_live), into pgsift and the plain table in turn, every
    index live (pgsift.bench.plain)."""
    out: dict[str, Any] = {}
    try:
        if plain:
            out.update(bench_plain.bulk(conn, plain_source(seed), chunks, dims=DIMS, batch=BATCH_CHUNKS))
        if documents:
            out.update(_live(conn, documents, one_by_one, chunks // CHUNKS_PER_DOC if plain else None))
        return out
    finally:
        if plain:
            bench_peers.drop(conn)


# Exhaustive BM25: the leg with its read budget and exhaustive limit lifted.
EXHAUSTIVE = {"lexical_budget": 2_000_000_000, "lexical_exact_limit": 2_000_000_000}


# pgsift's searches: (hybrid, lexical_scorer, with the query vector).
LEGS = {"dense": (False, "bm25", True), "hybrid": (True, "bm25", True), "lexical": (True, "bm25", False),
        "lexical_ts_rank_cd": (True, "ts_rank_cd", False)}
# The peers': (peer, rows). Raw pgvector fetches what the dense leg does (fetch_k 40); the
# others answer match_count 10 as the searches do.
PEER_LEGS = {"raw_pgvector": ("pgvector_hnsw", 40), "raw_pgvector_ef": ("pgvector_hnsw", 40),
             "supabase_hybrid": ("supabase_hybrid", 10), "fts_ts_rank_cd": ("fts_ts_rank_cd", 10)}


def _search(conn: psycopg.Connection[Any], peers: bench_peers.Peers, texts: list[str], vecs: list[str],
            raw_hits: tuple[bytes, int], name: str, i: int) -> None:
    """Query i of a mix through one leg or peer (the vector's text made beforehand, for all alike).
    raw_hits: the comparable raw query (pgvector's walk joined to what a hit needs, every row
    fetched) and the collection's id."""
    if name == "raw_hits":
        conn.execute(raw_hits[0], {"cid": raw_hits[1], "e": vecs[i], "k": 10}).fetchall()
        return
    if name in PEER_LEGS:
        peers.search(PEER_LEGS[name][0], texts[i], vecs[i], PEER_LEGS[name][1])
        return
    hybrid, scorer, with_vector = LEGS[name]
    conn.execute(q.BENCH_SEARCH, dict(c=COLLECTION, q=texts[i], e=vecs[i] if with_vector else None,
                                      knobs=Jsonb({"hybrid": hybrid, "lexical_scorer": scorer}))).fetchone()


def run_scale(conn: psycopg.Connection[Any], chunks: int, *, queries: int = 100, seed: int = 7,
              reuse: bool = False, exact_check: int = 20, ingest_docs: int = 50,
              baseline_queries: int = 10**9, plain: bool = True) -> dict[str, Any]:
    corpus = Corpus(seed)
    results: dict[str, Any] = {}
    if reuse and _existing(conn, chunks):
        results["reused"] = True   # (the query stream then differs from a fresh run's)
    else:
        results.update(build(conn, corpus, chunks))
    results.update(finish(conn))
    rng = corpus.rng
    n_chunks = _one(conn, q.BENCH_CHUNK_COUNT, {"collection": COLLECTION})
    df = conn.execute(q.BENCH_TERM_SHARES, {"n": n_chunks, "collection": COLLECTION}).fetchall()
    common = [w for w, f in df if 0.2 <= f <= 0.5] or [w for w, f in sorted(df, key=lambda x: -x[1])[:20]]
    rare = [w for w, f in df if f * n_chunks <= 100] or [w for w, f in sorted(df, key=lambda x: x[1])[:1000]]
    mid = [w for w, f in df if 0.001 <= f <= 0.05]
    mixes: dict[str, Callable[[], list[str]]] = {
        "rare": lambda: list(rng.choice(rare, size=3)),
        "common": lambda: list(rng.choice(common, size=min(3, len(common)))),
        "mixed": lambda: list(rng.choice(common, size=2)) + list(rng.choice(rare, size=1)),
        "question": lambda: list(rng.choice(common, size=3)) + list(rng.choice(mid, size=4))
                            + list(rng.choice(rare, size=1)),
    }
    results.update({"chunks": n_chunks, "common_terms": len(common), "modes": {}})
    # Timed in turn, query by query (bench_turns); the ts_rank_cd ones after every mix's,
    # one at a time: they read most of the table and would leave the cache cold for
    # whatever came next.
    # (Each raw query follows one of pgsift's: run back to back on the same vector, the
    # second raw one found the first one's pages warm.)
    fast = ["raw_pgvector", "dense", "lexical", "raw_pgvector_ef", "hybrid", "raw_hits", "supabase_hybrid"]
    slow = ["lexical_ts_rank_cd", "fts_ts_rank_cd"]
    # Raw pgvector twice: at pgvector's default candidate list (40, the rows it returns),
    # and at the one the dense leg walks with (hnsw_ef_search, 100 by default), which
    # finds more of the true nearest chunks and costs more.
    leg_ef = int(_one(conn, q.BENCH_LEG_EF_SEARCH, {"collection": COLLECTION, "match_count": 10}))
    results["leg_ef_search"] = leg_ef
    try:
        # The peers' SQL over a view of the same chunks, on pgsift's own indexes.
        bench_peers.install(conn, COLLECTION, DIMS, copy=False)
        peers = bench_peers.Peers(conn)
        around: dict[str, bench_turns.Hooks] = {
            "raw_pgvector": (partial(peers.begin, "pgvector_hnsw", 40), peers.end),
            "raw_pgvector_ef": (partial(peers.begin, "pgvector_hnsw", 40, leg_ef), peers.end),
            "raw_hits": bench_peers.RawWalk(conn, leg_ef).hooks}
        # The comparable raw query (issue 33's decision 1): the walk as the leg walks (its
        # ef_search, an iterative scan; bench_peers.RawWalk) joined to the chunk's text and
        # its document's title, uri and metadata.
        raw_hits = (bench_peers.render(q.PROFILE_RAW_HITS, bench_peers.vector_schema(conn), DIMS),
                    int(_one(conn, q.COLLECTION_ID, {"collection": COLLECTION})))
        # Every mix's queries first (the same draws as one mix after another), then every
        # mix's fast legs, and only then what reads most of the table (the ts_rank_cd legs,
        # the exhaustive checks): run after each mix, those left the next mix's first
        # searches, raw pgvector's too, reading from disk (p95s of 50-110 ms at a million).
        # (each mix: its texts, and query i through a leg or peer by name)
        drawn: dict[str, tuple[list[str], Callable[[str, int], None]]] = {}
        for mix, make in mixes.items():
            texts = [" ".join(make()) for _ in range(queries + 1)]
            vecs = [_vec(v) for v in corpus.vectors(queries + 1, scale=0.3)]
            drawn[mix] = (texts, partial(_search, conn, peers, texts, vecs, raw_hits))
        timed: dict[str, dict[str, list[float]]] = {}
        for mix, (_, run) in drawn.items():
            # Query 0 is each one's warm-up, untimed.
            timed[mix] = bench_turns.in_turn({name: partial(run, name) for name in fast}, range(1, queries + 1),
                                             around, warm_up=0)[1]
        for mix, (texts, run) in drawn.items():
            timings = timed[mix]
            for name in slow:
                timings.update(bench_turns.in_turn({name: partial(run, name)},
                                                   range(1, min(queries, baseline_queries) + 1), warm_up=0)[1])
            m: dict[str, Any] = {k: _percentiles(v) for k, v in timings.items()}
            results["modes"][mix] = m
            bm, cd = m["lexical"]["p50"], m["lexical_ts_rank_cd"]["p50"]
            m["ts_rank_cd_over_bm25_p50"] = round(cd / bm, 2) if bm else None
            raw = m["raw_pgvector"]["p50"]
            m["over_raw_p50"] = {k: round(m[k]["p50"] / raw, 2) if raw else None
                                 for k in ("dense", "lexical", "hybrid", "supabase_hybrid")}
            same = m["raw_pgvector_ef"]["p50"]
            m["over_raw_ef_p50"] = {k: round(m[k]["p50"] / same, 2) if same else None
                                    for k in ("dense", "hybrid")}
            hits = m["raw_hits"]["p50"]
            m["over_raw_hits_p50"] = {k: round(m[k]["p50"] / hits, 2) if hits else None
                                      for k in ("dense", "lexical", "hybrid")}
            m["top10_equal_exhaustive"] = _exactness(conn, texts[1:exact_check + 1])
    finally:
        bench_peers.drop(conn)
    documents = corpus.documents(0, ingest_docs) if ingest_docs else []
    # A live application's writes, a document a call (at most 10 of them).
    one_by_one = corpus.documents(ingest_docs, min(10, ingest_docs)) if ingest_docs else []
    results.update(_ingest(conn, seed, n_chunks, documents, one_by_one, plain))

    sizes: dict[str, float] = dict(conn.execute(q.BENCH_STORAGE).fetchall())
    results["storage_bytes_per_chunk"] = {k: round(float(v) / n_chunks, 1) for k, v in sizes.items()}
    return results


def _exactness(conn: psycopg.Connection[Any], texts: list[str]) -> dict[str, Any]:
    """For these queries: how many lexical top 10s equal exhaustive BM25's (the
    leg with its read budget and exhaustive limit lifted), and the mean share
    of exhaustive's top 10 found (recall@10: of the chunks it holds, so a query
    that matches fewer than 10 chunks and finds them all counts 1)."""
    same, found, wanted = 0, 0, 0
    for text in texts:
        bounded = _one(conn, q.BENCH_LEXICAL_LEG, dict(c=COLLECTION, q=text, knobs=Jsonb({"fetch_k": 10}))) or []
        exact = _one(conn, q.BENCH_LEXICAL_LEG,
                     dict(c=COLLECTION, q=text, knobs=Jsonb({"fetch_k": 10, **EXHAUSTIVE}))) or []
        same += bounded == exact
        found += len(set(bounded) & set(exact))
        wanted += len(exact)
    return {"identical": f"{same}/{len(texts)}",
            "recall_at_10": round(found / wanted, 3) if wanted else 1.0}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['chunks']:,} chunks"]
    if "load_s" in result:
        lines.append(f"bulk load {result['load_chunks_per_s']:,} chunks/s with BM25 statistics on "
                     f"({result['load_s']} s)")
    lines.append(f"refresh ({result['lists']:,} impact lists after it: {result['common_terms']} terms in 20-50% "
                 f"of chunks, and every term in {result['lists_min_df']}+) {result['refresh_s']} s; "
                 f"HNSW build {result['hnsw_build_s']} s")
    if "load_s" in result:
        total = result["load_s"] + result["refresh_s"] + result["hnsw_build_s"]
        lines.append(f"end to end (rows, statistics, lists, HNSW): {total:,.0f} s ({total / 60:.1f} min)")
    if "plain_load_s" in result:
        plain = result["plain_load_s"] + result["plain_hnsw_build_s"]
        lines.append(f"plain table, same rows (tsvector + GIN live, HNSW after): COPY "
                     f"{result['plain_load_chunks_per_s']:,} chunks/s ({result['plain_load_s']} s), HNSW build "
                     f"{result['plain_hnsw_build_s']} s; end to end {plain:,.0f} s"
                     + (f" (pgsift {total / plain:.2f}x)" if "load_s" in result and plain > 0 else ""))
    for ours, theirs, what, plain_what in (
            ("client_ingest", "plain_live",
             "Client.upsert_documents onto it (lists maintained, refresh included)",
             "the plain table, same documents, indexes live"),
            ("client_one", "plain_one",
             "a document a call (its own transaction; refresh included)", "the plain table, same documents"),
            ("floor_ingest", "plain_live",
             "the floor: the same writes with no BM25 upkeep (statistics triggers off, no refresh)",
             "the plain table"),
            ("floor_one", "plain_one", "the floor, a document a call", "the plain table")):
        if f"{ours}_chunks_per_s" in result:
            line = f"{what}: {result[f'{ours}_chunks_per_s']:,} chunks/s"
            side = "the floor" if ours.startswith("floor") else "pgsift"
            if f"{theirs}_chunks_per_s" in result:
                line += (f"; {plain_what}: {result[f'{theirs}_chunks_per_s']:,} chunks/s "
                         f"({side} at {result[f'{ours}_over_plain']:.2f} of its rate, median of "
                         f"{result['live_rounds']} rounds in turn)")
            lines.append(line)
    ef = result.get("leg_ef_search")
    lines.append(f"(in turn, query by query; raw_pgvector at pgvector's ef_search 40, raw_pgvector_ef "
                 f"at the dense leg's {ef}; raw_hits: that walk's top 10 with each hit's text, title, uri and "
                 f"metadata, the comparable raw query; p50/raw_ef and p50/raw_hits: p50 over theirs)")
    lines.append(f"{'queries':9} {'leg':20} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'p50/raw':>8} "
                 f"{'p50/raw_ef':>10} {'p50/raw_hits':>12}")
    for mix, modes in result["modes"].items():
        for leg in ("raw_pgvector", "raw_pgvector_ef", "raw_hits", "dense", "lexical", "hybrid",
                    "supabase_hybrid", "lexical_ts_rank_cd", "fts_ts_rank_cd"):
            if leg not in modes:
                continue   # (a result saved before raw_hits was measured)
            p = modes[leg]
            ratio = modes.get("over_raw_p50", {}).get(leg)
            same = modes.get("over_raw_ef_p50", {}).get(leg)
            hits = modes.get("over_raw_hits_p50", {}).get(leg)
            lines.append(f"{mix:9} {leg:20} {p['p50']:8.2f} {p['p95']:8.2f} {p['p99']:8.2f}"
                         + (f" {ratio:>7}x" if ratio is not None else " " * 9)
                         + (f" {same:>9}x" if same is not None else " " * 11)
                         + (f" {hits:>11}x" if hits is not None else ""))
        lines.append(f"{mix:9} {'ts_rank_cd / bm25 p50':20} {modes['ts_rank_cd_over_bm25_p50']:>8}")
        ex = modes["top10_equal_exhaustive"]
        lines.append(f"{mix:9} {'top 10 = exhaustive':20} {ex['identical']:>8}   recall@10 {ex['recall_at_10']}")
    for k, v in result["storage_bytes_per_chunk"].items():
        lines.append(f"storage per chunk, {k}: {v} bytes")
    return "\n".join(lines)
