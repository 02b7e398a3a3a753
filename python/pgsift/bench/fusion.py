"""Fusion sweep: `pgsift bench fusion --dataset DIR [--dataset DIR2 ...] --split train`.

How the fusion defaults were chosen: load each BEIR folder, take each tuning
query's dense and lexical rank lists once (200 deep), then fuse them with
`sift.rrf` in the database for every (dense_weight, rrf_k, fetch_k) of a grid
and score nDCG@10. A default must hold on more than one dataset: the chosen
cell maximises the mean over the datasets, and each dataset's loss against
its own best cell is reported. Tune on a train split; a dataset without one
(xquad-r-multi) tunes on a seeded sample of its questions that leaves out
the 1,000 its benchmarks report on (`np.random.default_rng(0)`, as its README
samples them; `--seed N` leaves out `bench languages --seed N`'s and draws the
tuning sample with N + 1).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from .. import metrics
from ..beir import BeirDataset, load_beir
from ..client import Client
from . import queries
from .languages import sample_indices
from .quality import load_collection

WEIGHTS = (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
RRF_KS = (1, 3, 5, 10, 30, 60)
FETCH_KS = (40, 100)
DEPTH = 200
REPORTED = 1000    # questions a dataset without a train split keeps out of tuning


def tuning_indices(n: int, tune_sample: int, seed: int = 0) -> list[int]:
    """Which of a test split's n questions tune, without a train split: the questions `bench
    languages --seed` reports on (at most half of a small set) never tune; `tune_sample` of the
    rest are drawn with seed + 1 (seed 0: the sample the defaults were chosen on)."""
    reported = set(sample_indices(n, min(REPORTED, n // 2), seed))
    rest = [i for i in range(n) if i not in reported]
    picked = np.random.default_rng(seed + 1).choice(len(rest), min(tune_sample, len(rest)), replace=False)
    return sorted(rest[int(i)] for i in picked)


def _tuning_queries(dataset: Path, split: str, model: str | None, tune_sample: int,
                    seed: int = 0) -> tuple[BeirDataset, list[int]]:
    if (dataset / "qrels" / f"{split}.tsv").is_file():
        data = load_beir(dataset, model=model, split=split)
        return data, list(range(len(data.query_ids)))
    data = load_beir(dataset, model=model, split="test")
    return data, tuning_indices(len(data.query_ids), tune_sample, seed)


def _grid(conn: psycopg.Connection[Any], client: Client, dataset: Path, split: str, model: str | None,
          tune_sample: int, collection: str, answer_only: bool, seed: int = 0) -> dict[str, Any]:
    data, picked = _tuning_queries(dataset, split, model, tune_sample, seed)
    if answer_only:
        # Only each question's highest grade counts (xquad-r-multi: the paragraph in the question's
        # language, not its translations, which one_translation removes at query time anyway).
        data.qrels = {q: {d: 1 for d, g in judged.items() if g == max(judged.values())}
                      for q, judged in data.qrels.items()}
    load_collection(client, collection, data)
    with client.transaction() as tx:
        uri = dict(tx.execute(queries.CHUNK_SOURCES, {"collection": collection}).fetchall())
    legs = []
    for i in picked:
        qid, text, emb = data.query_ids[i], data.query_texts[i], data.query_embeddings[i]
        dense = client.candidates(collection, embedding=emb, top_k=DEPTH, hybrid=False)
        lexical = client.candidates(collection, text, top_k=DEPTH)
        legs.append((qid, [c.chunk_id for c in sorted(dense, key=lambda c: c.dense_rank or 0)],
                     [c.chunk_id for c in sorted(lexical, key=lambda c: c.lexical_rank or 0)]))

    def ndcg(w: float, k: float, f: int) -> float:
        total = 0.0
        for qid, dense, lexical in legs:
            fused = conn.execute(queries.RRF, dict(d=dense[:f], l=lexical[:f], w=w, k=k, n=10)).fetchall()
            total += metrics.ndcg_at_k([uri[r[0]] for r in fused], data.qrels[qid], 10)
        return total / len(legs)

    grid = {(w, k, f): round(ndcg(w, k, f), 4) for w, k, f in itertools.product(WEIGHTS, RRF_KS, FETCH_KS)}
    client.drop_collection(collection)
    return {"dataset": data.name, "split": split if len(picked) == len(data.query_ids) else
            f"a tuning sample of {len(picked)} (test qrels, the reported {REPORTED} left out; seed {seed})",
            "queries": len(legs), "dense_only": round(ndcg(1.0, 60, 40), 4),
            "lexical_only": round(ndcg(0.0, 60, 40), 4), "grid": grid}


def run_fusion(conn: psycopg.Connection[Any], dataset: Path | list[Path], *, split: str = "train",
               model: str | None = None, tune_sample: int = 500, collection: str = "bench_fusion",
               answer_only: bool = False, seed: int = 0) -> dict[str, Any]:
    datasets = [dataset] if isinstance(dataset, Path) else list(dataset)
    client = Client(conn)
    per = [_grid(conn, client, Path(d), split, model, tune_sample, collection, answer_only, seed)
           for d in datasets]
    cells = sorted(per[0]["grid"])
    rows = []
    for cell in cells:
        values = [p["grid"][cell] for p in per]
        rows.append({"dense_weight": cell[0], "rrf_k": cell[1], "fetch_k": cell[2],
                     "ndcg@10": [round(v, 4) for v in values], "mean": round(float(np.mean(values)), 4)})
    rows.sort(key=lambda g: (-g["mean"], g["dense_weight"], g["rrf_k"], g["fetch_k"]))
    best = rows[0]
    own_best = [max(p["grid"].values()) for p in per]
    return {
        "answer_only": answer_only,
        "datasets": [{k: v for k, v in p.items() if k != "grid"} for p in per],
        "grid": rows,
        "chosen": {"dense_weight": best["dense_weight"], "rrf_k": best["rrf_k"], "fetch_k": best["fetch_k"],
                   "ndcg@10": best["ndcg@10"],
                   "loss_vs_own_best": [round(o - v, 4) for o, v in zip(own_best, best["ndcg@10"], strict=True)]},
    }


def format_table(result: dict[str, Any], top: int = 15) -> str:
    names = [d["dataset"] for d in result["datasets"]]
    lines = [f"{d['dataset']} ({d['split']}): {d['queries']} queries; dense only {d['dense_only']}, "
             f"lexical only {d['lexical_only']}" for d in result["datasets"]]
    if result.get("answer_only"):
        lines.append("relevant: each question's highest grade only")
    lines.append(f"{'dense_weight':>12} {'rrf_k':>6} {'fetch_k':>8} " + " ".join(f"{n[:14]:>14}" for n in names)
                 + f" {'mean':>8}")
    for g in result["grid"][:top]:
        lines.append(f"{g['dense_weight']:>12} {g['rrf_k']:>6} {g['fetch_k']:>8} "
                     + " ".join(f"{v:>14.4f}" for v in g["ndcg@10"]) + f" {g['mean']:>8.4f}")
    chosen = result["chosen"]
    lines.append(f"chosen: dense_weight {chosen['dense_weight']}, rrf_k {chosen['rrf_k']}, fetch_k "
                 f"{chosen['fetch_k']}; loss against each dataset's own best: "
                 + ", ".join(f"{n} {loss:.4f}" for n, loss in zip(names, chosen["loss_vs_own_best"], strict=True)))
    return "\n".join(lines)
