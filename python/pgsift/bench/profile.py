"""Where a search's time goes: `pgsift bench profile --dataset DIR`.

Times, in turn query by query (pgsift.bench.turns), the calls a search is
measured against and pgsift's own, all at match_count 10 (``--match-count``):

* ``raw_ids``: pgvector's query, ``order by embedding <=> q limit k`` through the
  collection's HNSW index (pgsift's own table and index, the collection filter
  inside the walk), walked as the dense leg walks: its ``hnsw.ef_search`` and a
  relaxed-order iterative scan where pgvector has one (the comparable walk: issue
  33's decision 1; pgsift.bench.peers.RawWalk, set around these two calls only);
* ``raw_hits``: the same walk joined to what a hit needs (the chunk's text, its
  document's title, uri and metadata): the comparable raw query;
* ``dense``, ``lexical``, ``hybrid``: ``sift.search`` with the collection's knobs
  (dense: ``{"hybrid": false}``; lexical: no embedding), every row fetched;
* ``supabase_hybrid``: Supabase's documented ``hybrid_search`` on a plain copy of
  the chunks (pgsift.bench.peers), at the session's HNSW settings, as deployed;
* ``hybrid_client``: the hybrid search through ``Client.search`` (what a Python
  caller sees: its rows as dataclasses), as shipped (no prepared statement);
  ``hybrid_client_prepared``: the same with ``prepare=True`` (the SQL calls above
  are prepared too).

Then it profiles each of dense, lexical and hybrid by function (``track_functions
= all``, ``pg_stat_user_functions``): the self time per search of every sift
function, and what a search spends outside its legs (the whole of ``sift.search``
less the legs' functions); the final read of the hits is timed apart
(``read_hits``: the kept hits' rows read by id, timed by the server as the search is,
without the client's round trip). A regression then shows as a
line of the table, not a guess. Needs the operator's connection (track_functions
is a superuser's setting).
"""

from __future__ import annotations

import json
import math
import statistics
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..beir import load_beir
from ..client import Client
from ..errors import InvalidArgument
from ..vectors import vector_text
from . import peers as bench_peers
from . import queries as q
from . import turns as bench_turns
from .quality import _percentile, load_collection

MODES = ("dense", "lexical", "hybrid")
# The leg functions a search's time is split by: what runs inside them is the legs'. In each
# group one calls the next (the staged pipeline reaches _dense_ids through a space's
# _space_dense_ids), so a group counts once, by its largest total.
LEGS = (("_space_dense_ids", "_dense_ids"), ("_question_ids",), ("_legs",), ("_lexical_ids",))
KNOBS = {"dense": {"hybrid": False}, "lexical": {}, "hybrid": {}}


def _function_times(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, float, float]]:
    """Each sift function's (calls, total ms, self ms) so far, flushed first (on an autocommit
    connection a forced flush is done before the call's answer comes back: nothing to wait for)."""
    conn.execute(q.PROFILE_FLUSH)
    conn.execute(q.PROFILE_CLEAR_SNAPSHOT)
    return {name: (int(c), float(t), float(s)) for name, c, t, s in conn.execute(q.PROFILE_FUNCTIONS)}


def _one(conn: psycopg.Connection[Any], query: Any, params: dict[str, Any]) -> int:
    row = conn.execute(query, params).fetchone()
    assert row is not None   # counts and the knob lookup always return a row
    return int(row[0])


def _loaded(conn: psycopg.Connection[Any], client: Client, collection: str) -> int:
    """How many chunks the tenant's collection holds (0 when it has none of that name)."""
    if not any(c.name == collection for c in client.list_collections()):
        return 0
    return _one(conn, q.BENCH_CHUNK_COUNT, {"collection": collection})


def run_profile(conn: psycopg.Connection[Any], dataset: Path, *, model: str | None = None,
                collection: str = "bench", queries: int = 60, match_count: int = 10,
                reuse: bool = False, peers_too: bool = True) -> dict[str, Any]:
    """Load the dataset (unless ``reuse`` finds it loaded), time every call in turn, then
    profile each pgsift mode by function. See the module docstring."""
    if queries < 2 or match_count < 1:
        raise InvalidArgument(f"need queries >= 2 and match_count >= 1, got {queries} and {match_count}")
    data = load_beir(Path(dataset), model)
    client = Client(conn, refresh_backlog=1)
    if not (reuse and _loaded(conn, client, collection) == len(data)):
        load_collection(client, collection, data)
        conn.execute(q.ANALYZE)
    # The collection as the session's tenant sees it (CollectionNotFound if it does not), and the
    # candidate list its dense leg walks with at this match_count.
    col = client.get_collection(collection)
    cid, dims = col.collection_id, col.embedding_dims
    ef = _one(conn, q.BENCH_LEG_EF_SEARCH, {"collection": collection, "match_count": match_count})
    schema = bench_peers.vector_schema(conn)
    raw = {name: bench_peers.render(text, schema, dims) for name, text in
           (("raw_ids", q.PROFILE_RAW_IDS), ("raw_hits", q.PROFILE_RAW_HITS))}
    # Query i is the dataset's i-th (taken again from the first when it has fewer); 0 warms up.
    n = queries
    n_data = len(data.query_ids)
    vectors = [vector_text(data.query_embeddings[i % n_data]) for i in range(n + 1)]
    texts = [data.query_texts[i % n_data] for i in range(n + 1)]

    def params(i: int, mode: str = "hybrid") -> dict[str, Any]:
        return {"c": collection, "cid": cid, "k": match_count, "q": texts[i],
                "e": None if mode == "lexical" else vectors[i], "knobs": Jsonb(KNOBS.get(mode, {}))}

    def sql_call(statement: Any, mode: str, i: int) -> int:
        return len(conn.execute(statement, params(i, mode), prepare=True).fetchall())

    prepared = Client(conn, refresh_backlog=1, prepare=True)

    def client_call(searcher: Client, i: int) -> int:
        return len(searcher.search(collection, texts[i], embedding=data.query_embeddings[i % n_data],
                                   top_k=match_count))

    runs: dict[str, Any] = {name: partial(sql_call, statement, name) for name, statement in raw.items()}
    for mode in MODES:
        runs[mode] = partial(sql_call, q.PROFILE_SEARCH, mode)
    runs["hybrid_client"] = partial(client_call, client)
    runs["hybrid_client_prepared"] = partial(client_call, prepared)
    # The raw walks walk as the dense leg does, set around them alone: everything else (the
    # Supabase function above all) runs with the session's own settings.
    walk = bench_peers.RawWalk(conn, ef)
    around = dict.fromkeys(raw, walk.hooks)
    peers_skipped = None
    try:
        if peers_too:
            try:
                bench_peers.install(conn, collection, dims)
                peers = bench_peers.Peers(conn)
                runs["supabase_hybrid"] = lambda i: len(peers.search("supabase_hybrid", texts[i], vectors[i],
                                                                     match_count))
            except bench_peers.PeersUnavailable as exc:
                peers_skipped = str(exc)
        _, times = bench_turns.in_turn(runs, range(1, n + 1), around, warm_up=0)
    finally:
        if peers_too:
            bench_peers.drop(conn)
    calls = {name: {"p50_ms": statistics.median(t), "p95_ms": _percentile(t, 95)} for name, t in times.items()}
    for m in calls.values():
        for base in ("raw_ids", "raw_hits"):
            m[f"over_{base}"] = m["p50_ms"] / calls[base]["p50_ms"] if calls[base]["p50_ms"] else math.nan

    profiles = {mode: _profile_mode(conn, mode, n, params) for mode in MODES}
    return {"dataset": data.name, "chunks": len(data), "queries": n, "match_count": match_count,
            "ef_search": ef, "calls": calls, "profiles": profiles,
            **({"peers_skipped": peers_skipped} if peers_skipped else {})}


def _profile_mode(conn: psycopg.Connection[Any], mode: str, n: int, params: Any) -> dict[str, Any]:
    """One mode's searches with track_functions on: per search, each function's self time,
    the whole search, its legs, and the final read of its hits timed apart."""
    conn.execute(q.PROFILE_TRACK_FUNCTIONS)
    try:
        for i in range(1, min(n, 5) + 1):   # warm the plans and caches, untimed
            conn.execute(q.PROFILE_SEARCH, params(i, mode)).fetchall()
        before = _function_times(conn)
        kept: list[list[int]] = []
        for i in range(1, n + 1):
            kept.append([r[0] for r in conn.execute(q.PROFILE_SEARCH_IDS, params(i, mode), prepare=True)])
        after = _function_times(conn)
    finally:
        conn.execute(q.PROFILE_TRACK_FUNCTIONS_OFF)
    per: dict[str, dict[str, float]] = {}
    for name, (c, t, s) in after.items():
        c0, t0, s0 = before.get(name, (0, 0.0, 0.0))
        if c > c0:
            per[name] = {"calls": (c - c0) / n, "total_ms": (t - t0) / n, "self_ms": (s - s0) / n}
    total = per.get("search", {}).get("total_ms", math.nan)
    legs = sum(max((per[f]["total_ms"] for f in group if f in per), default=0.0) for group in LEGS)
    reads = []
    for ids in kept:
        conn.execute(q.PROFILE_READ_HITS, {"ids": ids}, prepare=True).fetchall()   # its pages read in
        row = conn.execute(q.PROFILE_READ_HITS_TIMED, {"ids": ids}).fetchone()
        assert row is not None
        plan = row[0][0] if isinstance(row[0], list) else json.loads(row[0])[0]
        reads.append(float(plan["Execution Time"]))
    read = statistics.median(reads) if reads else math.nan
    return {"functions": dict(sorted(per.items(), key=lambda kv: -kv[1]["self_ms"])),
            "search_ms": total, "legs_ms": legs, "outside_legs_ms": total - legs,
            "read_hits_ms": read, "outside_legs_and_read_ms": total - legs - read}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"dataset {result['dataset']}: {result['chunks']:,} chunks, {result['queries']} queries in turn, "
             f"match_count {result['match_count']}, hnsw.ef_search {result['ef_search']} for the raw walks and "
             "pgsift's dense leg (Supabase's at the session's)",
             f"{'call':22} {'p50 ms':>8} {'p95 ms':>8} {'/raw_ids':>9} {'/raw_hits':>10}",
             f"{'-' * 22} {'-' * 8} {'-' * 8} {'-' * 9} {'-' * 10}"]
    for name, m in result["calls"].items():
        lines.append(f"{name:22} {m['p50_ms']:8.2f} {m['p95_ms']:8.2f} {m['over_raw_ids']:8.2f}x "
                     f"{m['over_raw_hits']:9.2f}x")
    if result.get("peers_skipped"):
        lines.append(f"(supabase_hybrid skipped: {result['peers_skipped']})")
    lines += ["", "per search by function (self ms; track_functions = all, which adds its own cost to "
              "every call):"]
    names: list[str] = []
    for prof in result["profiles"].values():
        names += [f for f in prof["functions"] if f not in names]
    lines.append(f"{'function':28} " + " ".join(f"{m:>9}" for m in result["profiles"]))
    for name in names[:25]:
        cells = [result["profiles"][m]["functions"].get(name, {}).get("self_ms") for m in result["profiles"]]
        lines.append(f"{name:28} " + " ".join(f"{c:9.3f}" if c is not None else f"{'':9}" for c in cells))
    for key, label in (("search_ms", "sift.search (whole)"), ("legs_ms", "in the legs"),
                       ("outside_legs_ms", "outside the legs"), ("read_hits_ms", "read of the hits (apart)"),
                       ("outside_legs_and_read_ms", "outside legs and read")):
        lines.append(f"{label:28} " + " ".join(f"{p[key]:9.3f}" for p in result["profiles"].values()))
    return "\n".join(lines)
