"""Query-adaptive fusion: `pgsift bench adaptive --dataset DIR[:MODEL] ...` (issue 34, item 5).

Can a per-query dense_weight, chosen from signals the legs already have, beat the fixed
default (rrf, dense_weight 0.5, rrf_k 3, fetch_k 40)? One sift.candidates call per question
gives each leg's top 100 with its raw scores; the signals are read from those lists:

* ``lexical_gap``: the lexical leg's (s1 - s2) / s1 (how far its best match stands out);
* ``lexical_peak``: s1 over the mean of its top 10 (a peaked list: a confident match);
* ``lexical_hits``: how many chunks the lexical leg found (0-100: a rare-term question finds few);
* ``dense_margin``: the dense leg's similarity 1 minus similarity 2;
* ``dense_spread``: similarity 1 minus similarity 10.

A rule cuts one signal at its tertiles on the tuning questions and picks, per third, the
dense_weight of WEIGHTS with the best mean nDCG@10 there (rrf_k and fetch_k stay the
default's). The signal is chosen on the tuning questions alone, by 5-fold cross-validation
(each fold's rule made on the other folds), and the rule is then made on every tuning
question and scored on the held-out ones beside the fixed default, with a 95% paired
bootstrap interval of the gain. Fusion is computed here with sift.rrf's formula over the
legs' lists (ties to the smaller chunk id), so both arms rank the same pool.

Tuning questions: a dataset's train split; without one (xquad-r-multi) a sample that
leaves out the questions `bench languages --seed` reports on (as `bench fusion` draws it),
which are then the held-out ones. A dataset given as DIR:MODEL uses embeddings/MODEL.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from .. import metrics
from ..beir import BeirDataset, load_beir
from ..client import Client
from ..errors import InvalidArgument
from . import queries
from .fusion import tuning_indices
from .languages import sample_indices
from .quality import load_collection

COLLECTION = "bench_adaptive"
RRF_K, FETCH_K = 3, 40       # the defaults' rrf_k and fetch_k, which both arms keep
DEFAULT = {"dense_weight": 0.5, "rrf_k": RRF_K, "fetch_k": FETCH_K}
WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
DEPTH = 100
FOLDS = 5
RESAMPLES = 2000
REPORTED = 1000


@dataclass(frozen=True)
class Legs:
    """One question's two legs, best first: (chunk id, larger-is-better score)."""

    qid: str
    dense: list[tuple[int, float]]
    lexical: list[tuple[int, float]]


def _gap(scores: Sequence[float]) -> float:
    return (scores[0] - scores[1]) / scores[0] if len(scores) > 1 and scores[0] > 0 else 1.0


SIGNALS: dict[str, Callable[[Legs], float]] = {
    "lexical_gap": lambda q: _gap([s for _, s in q.lexical]),
    "lexical_peak": lambda q: (q.lexical[0][1] / statistics.fmean(s for _, s in q.lexical[:10])
                               if q.lexical and q.lexical[0][1] > 0 else 0.0),
    "lexical_hits": lambda q: float(len(q.lexical)),
    "dense_margin": lambda q: q.dense[0][1] - q.dense[1][1] if len(q.dense) > 1 else 0.0,
    "dense_spread": lambda q: q.dense[0][1] - q.dense[min(9, len(q.dense) - 1)][1] if q.dense else 0.0,
}


def fuse(q: Legs, w: float, k: float = RRF_K, depth: int = FETCH_K) -> list[int]:
    """sift.rrf over the legs' top `depth`: w / (k + dense rank) + (1 - w) / (k + lexical rank),
    best first, ties to the smaller chunk id."""
    total: dict[int, float] = {}
    for r, (cid, _) in enumerate(q.dense[:depth], start=1):
        total[cid] = total.get(cid, 0.0) + w / (k + r)
    for r, (cid, _) in enumerate(q.lexical[:depth], start=1):
        total[cid] = total.get(cid, 0.0) + (1 - w) / (k + r)
    return sorted(total, key=lambda c: (-total[c], c))


Score = Callable[[int, float], float]   # question (index), dense_weight -> nDCG@10


class Scorer:
    """nDCG@10 of a question at a dense_weight, each computed once."""

    def __init__(self, questions: list[Legs], uri: dict[int, str], qrels: dict[str, dict[str, int]]) -> None:
        self.questions, self.uri, self.qrels = questions, uri, qrels
        self._memo: dict[tuple[int, float], float] = {}

    def __call__(self, i: int, w: float) -> float:
        key = (i, w)
        if key not in self._memo:
            q = self.questions[i]
            self._memo[key] = metrics.ndcg_at_k([self.uri[c] for c in fuse(q, w)], self.qrels[q.qid], 10)
        return self._memo[key]


@dataclass(frozen=True)
class Rule:
    signal: str
    cuts: tuple[float, float]
    weights: tuple[float, float, float]

    def third(self, value: float) -> int:
        return 0 if value <= self.cuts[0] else 1 if value <= self.cuts[1] else 2

    def weight(self, value: float) -> float:
        return self.weights[self.third(value)]


def make_rule(signal: str, values: dict[int, float], idx: Sequence[int], score: Score) -> Rule:
    """Tertile cuts of the signal on `idx` and each third's best weight (ties: nearer 0.5)."""
    low, high = (float(c) for c in np.quantile([values[i] for i in idx], [1 / 3, 2 / 3]))
    cut = Rule(signal, (low, high), (0.5, 0.5, 0.5))
    picked = []
    for third in range(3):
        members = [i for i in idx if cut.third(values[i]) == third]
        picked.append(max(WEIGHTS, key=lambda w: (statistics.fmean(score(i, w) for i in members)
                                                  if members else 0.0, -abs(w - 0.5))))
    return Rule(signal, (low, high), (picked[0], picked[1], picked[2]))


def _folds(idx: Sequence[int], seed: int) -> list[list[int]]:
    order = np.random.default_rng(seed).permutation(len(idx))
    return [[idx[int(j)] for j in order[f::FOLDS]] for f in range(FOLDS)]


def cross_validated(signal: str, values: dict[int, float], idx: Sequence[int], score: Score,
                    seed: int) -> float:
    """Mean nDCG@10 of the signal's rule on each fold, the rule made on the other folds."""
    total = []
    folds = _folds(idx, seed)
    for f, held in enumerate(folds):
        rest = [i for g, fold in enumerate(folds) if g != f for i in fold]
        rule = make_rule(signal, values, rest, score)
        total += [score(i, rule.weight(values[i])) for i in held]
    return statistics.fmean(total)


def bootstrap(gains: Sequence[float], seed: int) -> tuple[float, float]:
    """95% percentile interval of the mean gain (paired: one gain per question)."""
    g = np.asarray(gains)
    draws = np.random.default_rng(seed).integers(0, len(g), size=(RESAMPLES, len(g)))
    means = g[draws].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _split(dataset: Path, model: str | None, seed: int) -> tuple[BeirDataset, list[int], list[int], str]:
    """The questions (all of one BeirDataset), which tune and which are held out."""
    if (dataset / "qrels" / "train.tsv").is_file():
        train, test = load_beir(dataset, model=model, split="train"), load_beir(dataset, model=model, split="test")
        n = len(train.query_ids)
        train.query_ids += test.query_ids
        train.query_texts += test.query_texts
        train.query_embeddings = np.concatenate([train.query_embeddings, test.query_embeddings])
        train.qrels.update(test.qrels)
        return train, list(range(n)), list(range(n, len(train.query_ids))), "train / test"
    data = load_beir(dataset, model=model, split="test")
    # Only the answering paragraph counts (xquad-r-multi's translations are graded lower).
    data.qrels = {q: {d: 1 for d, g in judged.items() if g == max(judged.values())}
                  for q, judged in data.qrels.items()}
    held = sorted(sample_indices(len(data.query_ids), min(REPORTED, len(data.query_ids) // 2), seed))
    return data, tuning_indices(len(data.query_ids), 500, seed), held, \
        f"500 tuning / the {len(held)} `bench languages --seed {seed}` reports"


def _legs(client: Client, data: BeirDataset, i: int) -> Legs:
    pool = client.candidates(COLLECTION, data.query_texts[i], embedding=data.query_embeddings[i], fetch_k=DEPTH)
    dense = sorted((c.dense_rank, c.chunk_id, -(c.dense_distance or 0.0)) for c in pool if c.dense_rank)
    lexical = sorted((c.lexical_rank, c.chunk_id, c.lexical_score or 0.0) for c in pool if c.lexical_rank)
    return Legs(data.query_ids[i], [(c, s) for _, c, s in dense], [(c, s) for _, c, s in lexical])


def run_dataset(conn: psycopg.Connection[Any], client: Client, spec: str, seed: int) -> dict[str, Any]:
    path, _, model = spec.partition(":")
    data, tune, held, split = _split(Path(path), model or None, seed)
    if len(tune) < FOLDS or not held:
        raise InvalidArgument(f"{path}: {len(tune)} tuning and {len(held)} held-out questions; "
                              f"the rule needs at least {FOLDS} to tune and one to hold out")
    load_collection(client, COLLECTION, data)
    with client.transaction() as tx:
        uri = dict(tx.execute(queries.CHUNK_SOURCES, {"collection": COLLECTION}).fetchall())
    questions = {i: _legs(client, data, i) for i in [*tune, *held]}
    client.drop_collection(COLLECTION)
    order = sorted(questions)
    pos = {i: n for n, i in enumerate(order)}
    score = Scorer([questions[i] for i in order], uri, data.qrels)
    t, h = [pos[i] for i in tune], [pos[i] for i in held]
    values = {name: {pos[i]: fn(questions[i]) for i in order} for name, fn in SIGNALS.items()}
    default_tune = statistics.fmean(score(i, 0.5) for i in t)
    cv = {name: cross_validated(name, values[name], t, score, seed) for name in SIGNALS}
    best = max(SIGNALS, key=lambda name: (cv[name], name))
    rule = make_rule(best, values[best], t, score)
    gains = [score(i, rule.weight(values[best][i])) - score(i, 0.5) for i in h]
    low, high = bootstrap(gains, seed)
    return {"dataset": f"{data.name} ({data.model})", "split": split, "tuning": len(t), "held_out": len(h),
            "default_tuning": round(default_tune, 4),
            "cv": {name: round(v - default_tune, 4) for name, v in cv.items()},
            "signal": best, "cuts": [round(c, 4) for c in rule.cuts], "weights": list(rule.weights),
            "default_held_out": round(statistics.fmean(score(i, 0.5) for i in h), 4),
            "adaptive_held_out": round(statistics.fmean(score(i, rule.weight(values[best][i])) for i in h), 4),
            "gain": round(statistics.fmean(gains), 4), "ci": [round(low, 4), round(high, 4)]}


def run_adaptive(conn: psycopg.Connection[Any], datasets: Sequence[str], *, seed: int = 0) -> dict[str, Any]:
    client = Client(conn)
    rows = [run_dataset(conn, client, spec, seed) for spec in datasets]
    wins = all(r["ci"][0] > 0 for r in rows)
    return {"default": DEFAULT, "weights": list(WEIGHTS), "datasets": rows,
            "verdict": "ships: the gain's interval lies above 0 on every set" if wins else
            "not shipped: the gain's interval does not lie above 0 on every set"}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"query-adaptive dense_weight vs the fixed default {result['default']} (nDCG@10)", "",
             "| set | tuning / held out | signal (5-fold CV gain on tuning) | weights by third | "
             "held out: default | adaptive | gain [95% CI] |", "|---|---|---|---|---|---|---|"]
    for r in result["datasets"]:
        cv = ", ".join(f"{k} {v:+.4f}" for k, v in r["cv"].items())
        lines.append(f"| {r['dataset']} | {r['tuning']} / {r['held_out']} ({r['split']}) | {r['signal']} ({cv}) | "
                     f"{r['weights']} at cuts {r['cuts']} | {r['default_held_out']:.4f} | "
                     f"{r['adaptive_held_out']:.4f} | {r['gain']:+.4f} [{r['ci'][0]:+.4f}, {r['ci'][1]:+.4f}] |")
    lines += ["", result["verdict"]]
    return "\n".join(lines)
