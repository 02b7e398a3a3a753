"""Re-embedding without downtime: `pgsift bench reembed --dataset ../shared/datasets/scifact`.

Loads a BEIR folder with its MiniLM vectors, then moves the collection to a second,
offline embedder (pgsift.embed.StaticEmbedder, another size) while a reader searches
without pause on its own connection, naming the space it embeds its questions for
(dense_space): the backfill (Client.reembed, batches of --batch-size), the switch, the
reader moving to the new model, the old space dropped. Printed: how long each step took,
the searches in each phase with failures and empty answers, their p50, and nDCG@10 of
dense and hybrid search before (MiniLM) and after (the new embedder).
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from .. import metrics
from ..beir import load_beir
from ..client import Client
from ..embed import StaticEmbedder
from .quality import load_collection

PHASES = ("before", "backfill", "switched", "moved", "dropped")


def _quality(client: Client, collection: str, data: Any, vectors: np.ndarray, space: str) -> dict[str, float]:
    out = {}
    modes: tuple[tuple[str, dict[str, Any]], ...] = (("dense", {"hybrid": False}), ("hybrid", {}))
    for mode, knobs in modes:
        scores = []
        for i, qid in enumerate(data.query_ids):
            hits = client.search(collection, data.query_texts[i], embedding=vectors[i], top_k=10,
                                 dense_space=space, **knobs)
            scores.append(metrics.ndcg_at_k([h.source_uri for h in hits], data.qrels[qid], 10))
        out[mode] = round(float(np.mean(scores)), 4)
    return out


def run_reembed(conn: psycopg.Connection[Any], dataset: Path, *, dims: int = 256, batch_size: int = 256,
                collection: str = "bench_reembed", keep: bool = False) -> dict[str, Any]:
    data = load_beir(dataset)
    client = Client(conn)
    load_collection(client, collection, data)
    embedder = StaticEmbedder(dims=dims)
    new_queries = embedder.embed(data.query_texts)
    before = _quality(client, collection, data, data.query_embeddings, "default")

    phase = {"name": "before", "space": "default"}
    samples: dict[str, list[float]] = {p: [] for p in PHASES}
    failures: dict[str, int] = dict.fromkeys(PHASES, 0)
    empty: dict[str, int] = dict.fromkeys(PHASES, 0)
    stop = threading.Event()

    def reader() -> None:
        with psycopg.connect(conn.info.dsn, autocommit=True) as own:
            searcher = Client(own)
            i = 0
            while not stop.is_set():
                name, space = phase["name"], phase["space"]
                q = i % len(data.query_ids)
                vector = data.query_embeddings[q] if space == "default" else new_queries[q]
                started = time.perf_counter()
                try:
                    hits = searcher.search(collection, data.query_texts[q], embedding=vector, top_k=10,
                                           dense_space=space)
                    samples[name].append((time.perf_counter() - started) * 1000)
                    empty[name] += not hits.hits
                except Exception:  # noqa: BLE001 - counted and reported
                    failures[name] += 1
                i += 1

    def settle(name: str, searches: int = 50) -> None:
        phase["name"] = name
        deadline = time.monotonic() + 60
        while len(samples[name]) + failures[name] < searches and time.monotonic() < deadline:
            time.sleep(0.01)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        settle("before")
        phase["name"] = "backfill"
        started = time.perf_counter()
        report = client.reembed(collection, "static", embedder=embedder, batch_size=batch_size, switch=False)
        backfill_s = time.perf_counter() - started
        started = time.perf_counter()
        client.switch_vector_space(collection, "static")
        switch_ms = (time.perf_counter() - started) * 1000
        settle("switched")
        phase["space"] = "static"
        settle("moved")
        started = time.perf_counter()
        client.drop_vector_space(collection, "default")
        drop_s = time.perf_counter() - started
        settle("dropped")
    finally:
        stop.set()
        thread.join()
    after = _quality(client, collection, data, new_queries, "static")
    if not keep:
        client.drop_collection(collection)
    rows = [{"phase": p, "searches": len(samples[p]) + failures[p], "failures": failures[p], "empty": empty[p],
             "p50_ms": round(statistics.median(samples[p]), 2) if samples[p] else None} for p in PHASES]
    return {"dataset": data.name, "chunks": len(data.doc_ids), "from": data.model, "to": f"{embedder.name}-{dims}",
            "written": report.written, "batches": report.batches, "backfill_s": round(backfill_s, 2),
            "chunks_per_s": round(report.written / backfill_s, 1) if backfill_s else None,
            "switch_ms": round(switch_ms, 2), "drop_s": round(drop_s, 2), "phases": rows,
            "ndcg_before": before, "ndcg_after": after}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['dataset']}: {result['chunks']} chunks moved from {result['from']} to {result['to']} "
             f"while a reader searched",
             f"backfill {result['written']} vectors in {result['batches']} batches: {result['backfill_s']} s "
             f"({result['chunks_per_s']} chunks/s, embedding included); switch {result['switch_ms']} ms; "
             f"drop of the old space {result['drop_s']} s",
             f"{'phase':>9} {'searches':>9} {'failures':>9} {'empty':>6} {'p50 ms':>7}"]
    for r in result["phases"]:
        p50 = "-" if r["p50_ms"] is None else f"{r['p50_ms']:.2f}"
        lines.append(f"{r['phase']:>9} {r['searches']:>9} {r['failures']:>9} {r['empty']:>6} {p50:>7}")
    lines.append(f"nDCG@10 before ({result['from']}): dense {result['ndcg_before']['dense']:.4f}, "
                 f"hybrid {result['ndcg_before']['hybrid']:.4f}")
    lines.append(f"nDCG@10 after ({result['to']}): dense {result['ndcg_after']['dense']:.4f}, "
                 f"hybrid {result['ndcg_after']['hybrid']:.4f}")
    return "\n".join(lines)
