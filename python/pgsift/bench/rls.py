"""What row-level security costs a search: the same queries as the operator (who bypasses
the policies) and as a role mapped to the tenant (every policy applies), in one run.

``run_rls(conn, dataset)`` loads a BEIR corpus into a collection of its own tenant, with
``exact_search_limit`` 0 so the dense leg walks the HNSW index, makes a role mapped to
that tenant (``sift_reader``, so the connection must be allowed to create roles), and
times dense, lexical and hybrid searches through the Python client as each, taking
turns. It also runs the dense leg's statement under ``explain (analyze, buffers)`` as the
mapped role, to show the index scan the policy leaves in place. Role and collection are
dropped at the end. ``format_table`` prints the result.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ..beir import corpus_documents, load_beir
from ..client import Client
from ..queries import VECTOR_SCHEMA
from . import queries
from .finalize import time_in_turns

TENANT = "pgsift-bench-rls"
MODES = ("dense", "lexical", "hybrid")


def _plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    nodes, stack = [], [plan["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack += node.get("Plans", [])
    return nodes


def _dense_plan(conn: psycopg.Connection[Any], role: str, collection_id: int, dims: int,
                vector: str) -> dict[str, Any]:
    """The dense leg's own statement, explained as `role`: its scan node and buffers."""
    statement = conn.execute(queries.BENCH_DENSE_LEG_SQL, {"dims": dims}, prepare=False).fetchone()
    assert statement is not None
    with conn.transaction():
        conn.execute(sql.SQL("set local role {}").format(sql.Identifier(role)), prepare=False)
        schema = conn.execute(VECTOR_SCHEMA, prepare=False).fetchone()
        assert schema is not None
        conn.execute(sql.SQL("prepare pgsift_bench_leg({}.vector, bigint[], jsonb, integer) as {}").format(
            sql.SQL(schema[0]), sql.SQL(statement[0])), prepare=False)
        try:
            row = conn.execute(queries.bench_explain_leg(vector, [collection_id]), prepare=False).fetchone()
        finally:
            conn.execute("deallocate pgsift_bench_leg", prepare=False)
    assert row is not None
    plan = row[0][0] if isinstance(row[0], list) else json.loads(row[0])[0]
    nodes = _plan_nodes(plan)
    hnsw = [n for n in nodes if str(n.get("Index Name", "")).startswith("chunks_hnsw_")]
    top = plan["Plan"]
    return {"index_scan": bool(hnsw), "index": hnsw[0]["Index Name"] if hnsw else None,
            "policy_once": any(n.get("Parent Relationship") == "InitPlan" or "InitPlan" in str(n.get("Subplan Name"))
                               for n in nodes),
            "shared_hit": top.get("Shared Hit Blocks", 0), "shared_read": top.get("Shared Read Blocks", 0),
            "ms": plan.get("Execution Time")}


def run_rls(conn: psycopg.Connection[Any], dataset: Path, *, model: str | None = None, queries_n: int = 100,
            repeats: int = 3) -> dict[str, Any]:
    """Time each search mode as the operator and as a mapped reader; see the module docstring."""
    data = load_beir(dataset, model=model)
    role = f"pgsift_bench_reader_{uuid.uuid4().hex[:8]}"
    name = "rls"
    operator = Client(conn, tenant=TENANT, refresh_backlog=1)   # settled statistics before the searches
    if any(c.name == name for c in operator.list_collections()):
        operator.drop_collection(name)
    operator.create_collection(name, embedding_dims=data.dims, exact_search_limit=0)
    conn.execute(sql.SQL("create role {} nologin").format(sql.Identifier(role)), prepare=False)
    try:
        conn.execute(sql.SQL("grant sift_reader to {}").format(sql.Identifier(role)), prepare=False)
        conn.execute(queries.BENCH_MAP_ROLE, {"role": role, "tenant": TENANT}, prepare=False)
        operator.upsert_documents(name, corpus_documents(data, 0, len(data.doc_ids)))
        conn.execute(queries.ANALYZE, prepare=False)
        with psycopg.connect(conn.info.dsn, autocommit=True) as reader_conn:
            reader_conn.execute(sql.SQL("set role {}").format(sql.Identifier(role)), prepare=False)
            reader = Client(reader_conn)      # mapped: acts for TENANT, binds nothing
            n = min(queries_n, len(data.query_ids))
            calls: dict[str, Callable[[], object]] = {}
            for mode in MODES:
                for who, client in (("operator", operator), ("reader", reader)):
                    calls[f"{mode} {who}"] = _cycling(client, name, data, n, mode)
            timed = time_in_turns(calls, n * repeats)
            same = all(_ids(operator, name, data, i) == _ids(reader, name, data, i) for i in range(min(n, 20)))
        collection_id = operator.get_collection(name).collection_id
        vector = "[" + ",".join(f"{x:.9g}" for x in data.query_embeddings[0]) + "]"
        plan = _dense_plan(conn, role, collection_id, data.dims, vector)
        server = conn.execute(queries.SERVER_VERSIONS, prepare=False).fetchone()
    finally:
        operator.drop_collection(name)
        conn.execute(queries.BENCH_UNMAP_ROLE, {"role": role}, prepare=False)
        conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role)), prepare=False)
    return {"dataset": data.name, "chunks": len(data.doc_ids), "queries": n, "repeats": repeats,
            "same_results": same, "timed": timed, "dense_plan": plan,
            "postgres": server[0] if server else None, "pgvector": server[1] if server else None}


def _cycling(client: Client, name: str, data: Any, n: int, mode: str) -> Callable[[], object]:
    """One search per call, through the first n queries in turn."""
    turn = itertools.count()

    def search() -> object:
        i = next(turn) % n
        text = data.query_texts[i] if mode != "dense" else ""
        embedding = data.query_embeddings[i] if mode != "lexical" else None
        return client.search(name, text, embedding=embedding, top_k=10)
    return search


def _ids(client: Client, name: str, data: Any, i: int) -> list[int]:
    return [h.chunk_id for h in client.search(name, data.query_texts[i], embedding=np.asarray(data.query_embeddings[i]),
                                              top_k=10).hits]


def format_table(result: dict[str, Any]) -> str:
    """The result of :func:`run_rls` as an aligned plain-text table (ms per search)."""
    t, plan = result["timed"], result["dense_plan"]
    lines = [f"row-level security: {result['dataset']}, {result['chunks']:,} chunks (HNSW path), "
             f"{result['queries']} queries x {result['repeats']}; PostgreSQL {result['postgres']}, "
             f"pgvector {result['pgvector']}",
             f"{'mode':<9}{'operator p50':>14}{'reader p50':>12}{'ratio':>7}{'operator p95':>14}{'reader p95':>12}"]
    for mode in MODES:
        op, rd = t[f"{mode} operator"], t[f"{mode} reader"]
        lines.append(f"{mode:<9}{op['median_ms']:>14.2f}{rd['median_ms']:>12.2f}"
                     f"{rd['median_ms'] / op['median_ms']:>7.2f}{op['p95_ms']:>14.2f}{rd['p95_ms']:>12.2f}")
    lines.append(f"same top 10 for operator and reader: {result['same_results']}")
    scan = f"index scan on {plan['index']}" if plan["index_scan"] else "NO index scan"
    lines.append(f"dense leg as the reader: {scan}, tenant policy computed once: {plan['policy_once']}, "
                 f"buffers hit {plan['shared_hit']} read {plan['shared_read']}, {plan['ms']:.2f} ms")
    return "\n".join(lines)
