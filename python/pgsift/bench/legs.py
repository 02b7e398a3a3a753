"""N legs on one dataset: `pgsift bench legs --dataset ../shared/datasets/scifact`.

Loads a BEIR folder that carries two embedding models (SciFact: all-MiniLM-L6-v2 and
multilingual-e5-small): the first is the collection's built-in space, the second an added
vector space. Three legs then answer each question: MiniLM, e5 and BM25. Tuning runs on the
train split: one sift.candidates call per question gives each leg's top fetch_k with its raw
scores (leg_details), and every (weights, rrf_k) cell of a small grid is fused from those in
Python with the formulas tests/test_fusion_legs.py checks against sift._fuse. The chosen
cell of each fusion (rrf, dbsf, convex) is then scored on the test split through
sift.search itself, beside today's two-leg hybrid at its defaults, as nDCG@10.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import psycopg

from .. import metrics
from ..beir import BeirDataset, load_beir
from ..client import Client
from . import queries
from .quality import load_collection

COLLECTION = "bench_legs"
SPACE = "second"
WEIGHTS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)   # the main dense leg's; lexical gets 1 - it
SECOND_WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)   # the added space's
RRF_KS = (1, 3, 5, 10, 30, 60)
FETCH_KS = (40, 100)   # each leg's depth
METHODS = ("rrf", "dbsf", "convex")
Id = TypeVar("Id", bound=Hashable)


def normalised(legs: Mapping[str, Sequence[tuple[Id, float]]], method: str,
               k: float) -> dict[str, list[tuple[Id, float]]]:
    """Each leg's entries with their normalised score (the formulas of sift._fuse), from lists
    of (id, score where larger is better) in rank order: the Python reference the benchmark
    fuses with and tests/test_fusion_legs.py holds sift._fuse to."""
    out: dict[str, list[tuple[Id, float]]] = {}
    for name, entries in legs.items():
        if not entries:
            continue
        s = [score for _, score in entries]
        mu, sigma, lo, hi = statistics.fmean(s), statistics.pstdev(s), min(s), max(s)
        normed = []
        for r, (doc, score) in enumerate(entries, start=1):
            if method == "rrf":
                norm = 1 / (k + r)
            elif method == "convex":
                norm = (score - lo) / (hi - lo) if hi > lo else 1.0
            elif sigma > 1e-9 * max(abs(mu), 1e-300):   # dbsf; equal scores (sigma about 0) are 1
                norm = min(1.0, max(0.0, (score - (mu - 3 * sigma)) / (6 * sigma)))
            else:
                norm = 1.0
            normed.append((doc, norm))
        out[name] = normed
    return out


def _combine(normed: dict[str, list[tuple[str, float]]], weights: dict[str, float]) -> list[str]:
    """Documents best first (ties by id): the weighted sum of the legs' normalised scores."""
    total: dict[str, float] = {}
    for name, entries in normed.items():
        w = weights.get(name, 0.0)
        for doc, norm in entries:
            total[doc] = total.get(doc, 0.0) + w * norm
    return sorted(total, key=lambda d: (-total[d], d))


def _tune(train: list[dict[str, list[tuple[str, float]]]], qrels: list[dict[str, int]], method: str,
          grid: list[tuple[float, float, float]], fixed_legs: tuple[str, ...]) -> dict[str, float]:
    """The grid cell (main weight, second weight, rrf_k) and depth with the best mean train nDCG@10
    over the legs named (a leg left out weighs 0)."""
    best: tuple[float, dict[str, float]] | None = None
    for depth in FETCH_KS:
        for k in sorted({cell[2] for cell in grid}):
            normed = [normalised({n: e[:depth] for n, e in legs.items() if n in fixed_legs}, method, k)
                      for legs in train]
            for w, w2, _ in (cell for cell in grid if cell[2] == k):
                weights = {"dense": w, "lexical": 1 - w, SPACE: w2}
                score = statistics.fmean(metrics.ndcg_at_k(_combine(n, weights), q, 10)
                                         for n, q in zip(normed, qrels, strict=True))
                if best is None or score > best[0] + 1e-12:
                    best = (score, {"dense_weight": w, "second_weight": w2, "rrf_k": k, "fetch_k": depth,
                                    "train_ndcg": round(score, 4)})
    assert best is not None
    return best[1]


def _legs(client: Client, uri: dict[int, str], main: BeirDataset, second: BeirDataset,
          i: int) -> dict[str, list[tuple[str, float]]]:
    pool = client.candidates(COLLECTION, main.query_texts[i], embedding=main.query_embeddings[i],
                             space_embeddings={SPACE: second.query_embeddings[i]}, fusion="rrf",
                             fetch_k=max(FETCH_KS))
    legs: dict[str, list[tuple[int, str, float]]] = {"dense": [], "lexical": [], SPACE: []}
    for c in pool:
        for name, d in (c.leg_details or {}).items():
            raw = float(d["raw"])
            legs[name].append((int(d["rank"]), uri[c.chunk_id], raw if name == "lexical" else -raw))
    return {name: [(doc, s) for _, doc, s in sorted(entries)] for name, entries in legs.items()}


def run_legs(conn: psycopg.Connection[Any], dataset: Path, *, models: tuple[str, str] | None = None,
             keep: bool = False, seed: int = 0) -> dict[str, Any]:
    names = models or tuple(sorted(p.name for p in (dataset / "embeddings").iterdir() if p.is_dir()))[:2]
    if len(names) != 2:
        raise ValueError(f"{dataset} needs two embedding models under embeddings/, found {list(names)}")
    main_test, second_test = (load_beir(dataset, model=m, split="test") for m in names)
    main_train, second_train = (load_beir(dataset, model=m, split="train") for m in names)
    client = Client(conn)
    started = time.perf_counter()
    load_collection(client, COLLECTION, main_test)
    client.add_vector_space(COLLECTION, SPACE, dimensions=second_test.dims, model=names[1])
    with client.transaction() as tx:
        uri = dict(tx.execute(queries.CHUNK_SOURCES, {"collection": COLLECTION}).fetchall())
    row_of = {doc: i for i, doc in enumerate(main_test.doc_ids)}
    ids = sorted(uri)
    for start in range(0, len(ids), 2000):
        batch = ids[start:start + 2000]
        client.write_space_vectors(COLLECTION, SPACE, batch, [second_test.doc_embeddings[row_of[uri[c]]]
                                                              for c in batch])
    load_s = time.perf_counter() - started

    # Tuning: each train question's three lists once, then the grid in Python.
    train = [_legs(client, uri, main_train, second_train, i) for i in range(len(main_train.query_ids))]
    qrels = [main_train.qrels[q] for q in main_train.query_ids]
    three = ("dense", "lexical", SPACE)
    chosen = {method: _tune(train, qrels, method,
                            [(w, w2, k) for w in WEIGHTS for w2 in SECOND_WEIGHTS
                             for k in (RRF_KS if method == "rrf" else (3,))], three)
              for method in METHODS}
    # The two-leg systems, tuned the same way: today's hybrid, and the two dense models alone.
    # The two-leg systems, tuned the same way: today's hybrid by each fusion, and the two dense
    # models alone.
    two_legs = {method: _tune(train, qrels, method, [(w, 0.0, k) for w in WEIGHTS
                                                     for k in (RRF_KS if method == "rrf" else (3,))],
                              ("dense", "lexical"))
                for method in METHODS}
    two_dense = _tune(train, qrels, "rrf", [(1.0, w2, k) for w2 in SECOND_WEIGHTS for k in RRF_KS],
                      ("dense", SPACE))

    # The Python fusion that tuned is sift._fuse's: each chosen cell's top 10, each way, for
    # the first 20 train questions.
    checks = agreed = 0
    for method in METHODS:
        c = chosen[method]
        for i in range(min(20, len(train))):
            pool = client.candidates(COLLECTION, main_train.query_texts[i], embedding=main_train.query_embeddings[i],
                                     space_embeddings={SPACE: second_train.query_embeddings[i]},
                                     space_weights={SPACE: c["second_weight"]}, dense_weight=c["dense_weight"],
                                     rrf_k=c["rrf_k"], fetch_k=int(c["fetch_k"]), fusion=method)
            cut = {n: e[:int(c["fetch_k"])] for n, e in train[i].items()}
            python = _combine(normalised(cut, method, c["rrf_k"]), {
                "dense": c["dense_weight"], "lexical": 1 - c["dense_weight"], SPACE: c["second_weight"]})
            checks += 1
            agreed += python[:10] == [uri[p.chunk_id] for p in pool][:10]

    # The test split, through sift.search itself.
    def evaluate(knobs: Callable[[int], dict[str, Any]]) -> tuple[list[float], float]:
        scores, times = [], []
        for i, qid in enumerate(main_test.query_ids):
            t0 = time.perf_counter()
            hits = client.search(COLLECTION, main_test.query_texts[i], embedding=main_test.query_embeddings[i],
                                 top_k=10, **knobs(i))
            times.append((time.perf_counter() - t0) * 1000)
            scores.append(metrics.ndcg_at_k([uri[h.chunk_id] for h in hits], main_test.qrels[qid], 10))
        return scores, round(statistics.median(times), 1)

    def second(i: int) -> dict[str, Any]:
        return {SPACE: second_test.query_embeddings[i]}

    rows: list[dict[str, Any]] = []
    per_query: dict[str, list[float]] = {}

    def add(system: str, scores: list[float], p50: float, tuned: dict[str, float] | None, kind: str) -> None:
        rows.append({"system": system, "ndcg_at_10": round(statistics.fmean(scores), 4), "p50_ms": p50,
                     **({"train_ndcg": tuned["train_ndcg"]} if tuned else {}), "kind": kind})
        per_query[system] = scores

    scores, p50 = evaluate(lambda i: {})
    add(f"two legs ({names[0]} + BM25), defaults", scores, p50, None, "defaults")
    for method in METHODS:
        t = two_legs[method]
        fixed2 = {"dense_weight": t["dense_weight"], "rrf_k": t["rrf_k"], "fetch_k": int(t["fetch_k"]),
                  "fusion": method}
        def plain(i: int, fixed2: dict[str, Any] = fixed2) -> dict[str, Any]:
            return fixed2

        scores, p50 = evaluate(plain)
        add(f"two legs, {method} (w {t['dense_weight']}" + (f", k {t['rrf_k']:g}" if method == "rrf" else "")
            + f", fetch_k {t['fetch_k']:g})", scores, p50, t, "two")
    d = two_dense
    scores, p50 = evaluate(lambda i: {"hybrid": False, "space_embeddings": second(i), "dense_weight": 1.0,
                                      "space_weights": {SPACE: d["second_weight"]}, "rrf_k": d["rrf_k"],
                                      "fetch_k": int(d["fetch_k"])})
    add(f"two dense legs ({names[1]} {d['second_weight']}, k {d['rrf_k']:g}, fetch_k {d['fetch_k']:g})",
        scores, p50, d, "dense")
    for method in METHODS:
        c = chosen[method]
        fixed = {"space_weights": {SPACE: c["second_weight"]}, "dense_weight": c["dense_weight"],
                 "rrf_k": c["rrf_k"], "fetch_k": int(c["fetch_k"]), "fusion": method}

        def knobs(i: int, fixed: dict[str, Any] = fixed) -> dict[str, Any]:
            return {**fixed, "space_embeddings": second(i)}

        scores, p50 = evaluate(knobs)
        add(f"three legs, {method} (w {c['dense_weight']}, {names[1]} {c['second_weight']}"
            + (f", k {c['rrf_k']:g}" if method == "rrf" else "") + f", fetch_k {c['fetch_k']:g})",
            scores, p50, c, "three")

    # The third leg's gain: the best three-leg system against the best two-leg one, each chosen
    # on train, with a paired bootstrap over the test questions (2,000 resamples drawn with
    # `seed`, 0 by default).
    best_two = max((r for r in rows if r["kind"] == "two"), key=lambda r: r["train_ndcg"])
    best_three = max((r for r in rows if r["kind"] == "three"), key=lambda r: r["train_ndcg"])
    diffs = np.array(per_query[best_three["system"]]) - np.array(per_query[best_two["system"]])
    rng = np.random.default_rng(seed)
    means = np.sort([float(diffs[rng.integers(0, len(diffs), len(diffs))].mean()) for _ in range(2000)])
    gain = {"two": best_two["system"], "three": best_three["system"], "mean": round(float(diffs.mean()), 4),
            "ci95": [round(float(means[49]), 4), round(float(means[1949]), 4)]}
    if not keep:
        client.drop_collection(COLLECTION)
    return {"dataset": main_test.name, "models": list(names), "train_queries": len(train),
            "test_queries": len(main_test.query_ids), "load_s": round(load_s, 1),
            "python_matches_sql": f"{agreed} of {checks}", "third_leg_gain": gain, "rows": rows}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['dataset']}: {result['models'][0]} (built-in space), {result['models'][1]} (added space) "
             f"and BM25; tuned on {result['train_queries']} train questions, "
             f"scored on {result['test_queries']} test questions; the tuning's Python fusion gives "
             f"sift._fuse's top 10 for {result['python_matches_sql']} checked questions",
             f"{'system':<64} {'nDCG@10':>8} {'train':>7} {'p50 ms':>7}"]
    for r in result["rows"]:
        train = f"{r['train_ndcg']:.4f}" if "train_ndcg" in r else ""
        lines.append(f"{r['system']:<64} {r['ndcg_at_10']:>8.4f} {train:>7} {r['p50_ms']:>7.1f}")
    g = result["third_leg_gain"]
    lines.append(f"third leg, best on train each ({g['three']} vs {g['two']}): {g['mean']:+.4f} nDCG@10 on test, "
                 f"95% paired bootstrap [{g['ci95'][0]:+.4f}, {g['ci95'][1]:+.4f}]")
    return "\n".join(lines)
