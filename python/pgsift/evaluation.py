"""Evaluation: score the search pipeline against a golden set, store every run.

Two layers:

* :func:`score` is the metric core, shared with the quality benchmark: given
  rankings and judgments it returns hit rate, MRR, nDCG, precision and recall
  at k per query and averaged. The numbers come from pytrec_eval (trec_eval's
  own C code), not from a re-implementation; ``tests/test_evaluation.py``
  cross-checks them against hand-computed values and ``pgsift.metrics``.
* :func:`evaluate` runs every question of a golden set through
  ``Client.search`` (the exact call an application makes: the same fusion,
  knobs and whatever the client adds to it), scores the rankings, measures
  what the answers cost (tokens and results per question) and stores the run
  in ``sift.eval_runs``. :func:`sweep` does it for each value of one knob and
  :func:`plot_sweep` draws the result.

What counts as a hit: a golden set judged at the ``chunk`` level scores chunk
ids; one judged at the ``document`` level (every BEIR import) scores
documents: a hit on any chunk of a relevant document counts as that document,
once, at its best rank (later chunks of the same document neither earn gain
again nor use up a slot, as in pgsift.metrics and the benchmark). A positive
whose chunk is gone (unbound, see ``pgsift golden rebind``) still counts as
relevant and can never be found, so a stale golden set scores low rather than
high, and the run reports how many positives were unbound.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from . import __version__
from . import client as _client_module
from . import eval_queries as q
from .client import Client
from .errors import InvalidArgument, PgsiftError
from .golden import GoldenSet, get_golden_set, transaction

METRICS = ("hit_rate", "mrr", "ndcg", "precision", "recall")
COST = ("mean_tokens", "mean_results")
MODES = ("pipeline", "dense", "lexical")
METRIC_LABELS = {"hit_rate": "hit", "mrr": "MRR", "ndcg": "nDCG", "precision": "P", "recall": "R"}
# Every knob Client.search takes (retrieval, then the ranking stage's), from the client
# itself so the two lists cannot drift apart.
KNOBS: tuple[str, ...] = (*_client_module._KNOBS, *getattr(_client_module, "_RANKING_KNOBS", ()))
# Knobs a sweep can walk: numeric, each a domain of the same name that range-checks it.
SWEEP_KNOBS: dict[str, type] = {name: kind for name, kind in (
    ("dense_weight", float), ("rrf_k", float), ("fetch_k", int), ("bm25_k1", float), ("bm25_b", float),
    ("exact_search_limit", int), ("per_document_cap", int), ("mmr_lambda", float),
    ("recency_weight", float), ("score_threshold", float)) if name in KNOBS}

Progress = Callable[[int], None]


class EvaluationUnavailable(PgsiftError, RuntimeError):
    """The optional evaluation libraries are not installed."""


def _require(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EvaluationUnavailable(f"evaluation needs the 'eval' extra ({module} is missing): "
                                    "pip install 'pgsift[eval]'") from exc


# -- the metric core ---------------------------------------------------------------

@dataclass(frozen=True)
class Scores:
    """Metrics at k: ``mean`` over the judged queries, and ``per_query``."""

    k: int
    mean: dict[str, float | None]
    per_query: dict[str, dict[str, float]]

    @property
    def n_queries(self) -> int:
        return len(self.per_query)


def score(rankings: Mapping[str, Sequence[Hashable]], qrels: Mapping[str, Mapping[Hashable, int]],
          k: int) -> Scores:
    """Hit rate, MRR, nDCG, precision and recall at ``k``, computed by pytrec_eval.

    ``rankings``: query id -> retrieved ids, best first. Repeated ids count once, at
    their first position, before the cut (several chunks of one document mapped to
    the document). ``qrels``: query id -> {id: relevance}; relevance > 0 is relevant
    and is the gain in nDCG (linear, trec_eval's ``ndcg_cut``, as BEIR reports it).
    Queries without a relevant judgment are left out of the mean (BEIR's rule); a
    judged query missing from ``rankings`` retrieved nothing and scores 0.

    * hit_rate: 1 if a relevant id is in the top k (trec_eval ``success``)
    * mrr: 1/rank of the first relevant id in the top k, else 0 (``recip_rank`` on
      the ranking cut at k)
    * ndcg: ``ndcg_cut.k``; the ideal ranking is built from every relevant judgment
    * precision: relevant in the top k / k (``P.k``: fewer than k results still divide by k)
    * recall: relevant in the top k / all relevant (``recall.k``)
    """
    pytrec_eval = _require("pytrec_eval")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InvalidArgument(f"k must be an integer >= 1, got {k!r}")
    judged = {str(qid): {str(doc): int(rel) for doc, rel in rels.items() if rel > 0}
              for qid, rels in qrels.items()}
    judged = {qid: rels for qid, rels in judged.items() if rels}
    run: dict[str, dict[str, float]] = {}
    for qid in judged:
        ranked: list[str] = []
        seen: set[str] = set()
        for doc in rankings.get(qid, ()):
            doc = str(doc)
            if doc not in seen:
                seen.add(doc)
                ranked.append(doc)
                if len(ranked) == k:
                    break
        # Strictly decreasing scores: trec_eval orders by score, never by name.
        run[qid] = {doc: float(k - i) for i, doc in enumerate(ranked)}
    names = {f"success_{k}": "hit_rate", "recip_rank": "mrr", f"ndcg_cut_{k}": "ndcg",
             f"P_{k}": "precision", f"recall_{k}": "recall"}
    measures = {f"success.{k}", "recip_rank", f"ndcg_cut.{k}", f"P.{k}", f"recall.{k}"}
    result = pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(run) if judged else {}
    per_query = {qid: {name: float(result.get(qid, {}).get(measure, 0.0)) for measure, name in names.items()}
                 for qid in judged}
    mean = {name: (float(np.mean([s[name] for s in per_query.values()])) if per_query else None)
            for name in METRICS}
    return Scores(k=k, mean=mean, per_query=per_query)


# -- runs ------------------------------------------------------------------------

@dataclass(frozen=True)
class QuestionResult:
    key: str
    answerable: bool
    chunk_ids: list[int]        # the answer, in rank order
    ranked: list[str]           # what was scored: chunk ids, or documents (source_uri)
    tokens: int                 # sum of the returned chunks' token counts
    legs: list[str]             # the legs that ran
    scores: dict[str, float] | None   # None for a question without an answer


@dataclass
class EvalRun:
    collection: str
    golden_set: str
    label: str
    mode: str
    k: int
    metrics: dict[str, float | None]
    settings: dict[str, Any]
    questions: list[QuestionResult] = field(repr=False, default_factory=list)
    run_id: int | None = None
    created_at: datetime | None = None
    previous_run_id: int | None = None
    delta: dict[str, float] | None = None

    def to_json(self, per_question: bool = False) -> dict[str, Any]:
        out = {"run_id": self.run_id, "created_at": self.created_at and self.created_at.isoformat(),
               "collection": self.collection, "golden_set": self.golden_set, "label": self.label,
               "mode": self.mode, "k": self.k, "metrics": self.metrics, "settings": self.settings,
               "previous_run_id": self.previous_run_id, "delta": self.delta}
        if per_question:
            out["questions"] = [asdict(r) for r in self.questions]
        return out


@dataclass(frozen=True)
class HistoryRow:
    run_id: int
    created_at: datetime
    set_name: str
    label: str
    k: int
    metrics: dict[str, Any]
    settings: dict[str, Any]
    previous_run_id: int | None
    delta: dict[str, float] | None


def _check_knobs(knobs: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(knobs) - set(KNOBS)
    if unknown:
        raise InvalidArgument(f"unknown search knob(s): {', '.join(sorted(unknown))} "
                              f"(known: {', '.join(KNOBS)})")
    return dict(knobs)


def _load(client: Client, gs: GoldenSet) -> tuple[list[tuple], dict[int, list[tuple]]]:
    with transaction(client) as conn:
        questions = conn.execute(q.QUESTIONS, {"golden_set_id": gs.golden_set_id}).fetchall()
        positives: dict[int, list[tuple]] = {}
        for row in conn.execute(q.POSITIVES, {"golden_set_id": gs.golden_set_id}):
            positives.setdefault(row[1], []).append(row)
    return questions, positives


def _qrels(judged_at: str, positives: list[tuple]) -> dict[str, int]:
    """One question's relevant units: chunk ids, or documents (source_uri) at the document
    level. An unbound positive is a unit nothing can retrieve (one per document at the
    document level, unless that document is already relevant through a bound chunk)."""
    units: dict[str, int] = {}
    for _pid, _qid, chunk_id, source_uri, _content, grade in positives:
        if chunk_id is not None:
            key = f"chunk:{chunk_id}" if judged_at == "chunk" else f"doc:{source_uri}"
            units[key] = max(units.get(key, 0), grade)
    for positive_id, _qid, chunk_id, source_uri, _content, grade in positives:
        if chunk_id is None:
            if judged_at == "document" and source_uri:
                if f"doc:{source_uri}" in units:
                    continue
                key = f"unbound:{source_uri}"
            else:
                key = f"unbound:{positive_id}"
            units[key] = max(units.get(key, 0), grade)
    return units


def _jsonable(value: Any) -> Any:
    """A setting as JSON stores it (intervals as PostgreSQL reads them back: '30 days')."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "total_seconds"):
        return f"{value.total_seconds():g} seconds"
    return str(value)


def _embeddings(client: Client, questions: list[tuple], mode: str, reembed: bool
                ) -> tuple[list[Any], str]:
    """The query vector of each question and where they came from."""
    if mode == "lexical":
        return [None] * len(questions), "none (lexical only)"
    vectors = [None if reembed else row[4] for row in questions]
    missing = [i for i, v in enumerate(vectors) if v is None]
    source = "stored with the golden set"
    if missing and client.embedder is not None:
        computed = client.embedder.embed([questions[i][2] for i in missing])
        for i, vec in zip(missing, computed):
            vectors[i] = vec
        name = getattr(client.embedder, "name", type(client.embedder).__name__)
        source = f"embedder {name}" if len(missing) == len(vectors) else f"stored + embedder {name}"
    elif missing:
        if mode == "dense":
            raise InvalidArgument(f"the dense baseline needs a query vector for every question; "
                                  f"{len(missing)} have none stored and the client has no embedder")
        source = ("none: no stored vectors and no embedder (lexical leg only)"
                  if len(missing) == len(vectors) else
                  f"stored; {len(missing)} question(s) without a vector ran lexical only")
    return vectors, source


def evaluate(client: Client, collection: str, *, golden_set: str | None = None, top_k: int = 10,
             knobs: Mapping[str, Any] | None = None, mode: str = "pipeline", label: str | None = None,
             store: bool = True, reembed: bool = False, progress: Progress | None = None) -> EvalRun:
    """Run every question of the golden set through search and score the answers at top_k.

    mode:

    * ``pipeline``: ``client.search(question, embedding=..., top_k=top_k, **knobs)``:
      what an application calling search gets (the collection's settings, the knob
      overrides, and whatever the client itself adds, such as a reranker).
    * ``dense``: the dense leg alone (``hybrid => false``), through a plain client:
      the baseline that hybrid and reranking must beat.
    * ``lexical``: the lexical leg alone (no query vector), through a plain client.

    Baselines change the retrieval legs only: the collection's ranking settings
    (per-document cap, recency, ...) and the knob overrides apply to them too.
    Answers are scored in rank order (strength), not in presentation order.

    Query vectors: the one stored with the question (BEIR imports with precomputed
    embeddings), else the client's embedder (``reembed`` forces it), else none (the
    lexical leg alone, said in ``settings["embeddings"]``).

    Metrics (see :func:`score`) are averaged over the answerable questions;
    ``mean_tokens`` (sum of the returned chunks' token_count) and ``mean_results``
    over every question, and ``unanswerable_declined`` is the share of questions
    without an answer that got no result (null when the set has none).
    ``settings["legs"]`` counts, per leg, the questions whose search ran it (read
    from the answer's rows, so a question with no result is not counted). The run is
    stored in sift.eval_runs unless ``store`` is false; ``delta`` is against the
    previous stored run with the same golden set, k and label.
    """
    if mode not in MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= 1000:
        raise InvalidArgument(f"top_k must be an integer in [1, 1000], got {top_k!r}")
    knobs = _check_knobs(knobs or {})
    if mode != "pipeline" and "hybrid" in knobs:
        raise InvalidArgument(f"the {mode} baseline decides 'hybrid' itself")
    gs = get_golden_set(client, collection, golden_set)
    col = client.get_collection(collection)
    questions, positives = _load(client, gs)
    if not questions:
        raise InvalidArgument(f'golden set "{gs.name}" has no question')
    vectors, embedding_source = _embeddings(client, questions, mode, reembed)
    searcher = client if mode == "pipeline" else Client(client.source, tenant=client.tenant)
    call_knobs = {**knobs, "hybrid": False} if mode == "dense" else knobs
    if mode != "pipeline":
        call_knobs = {**call_knobs, "rerank": False}   # baselines are what reranking must beat

    answers = []
    for row, vector in zip(questions, vectors):
        hits = searcher.search(collection, row[2], embedding=vector, top_k=top_k, **call_knobs).hits
        # Scored by strength (rank), not by presentation order (lost-in-the-middle).
        answers.append(sorted(hits, key=lambda h: (h.rank, h.chunk_id)))
        if progress:
            progress(1)

    chunk_ids = sorted({h.chunk_id for hits in answers for h in hits})
    with transaction(client) as conn:
        tokens = dict(conn.execute(q.TOKEN_COUNTS, {"chunk_ids": chunk_ids}).fetchall())

    rankings, qrels, legs = {}, {}, Counter()
    results = []
    for (question_id, key, _text, answerable, _vec, _meta), hits in zip(questions, answers):
        ranked = [f"chunk:{h.chunk_id}" if gs.judged_at == "chunk" else f"doc:{h.source_uri}"
                  for h in hits]
        rankings[key] = ranked
        if answerable:
            qrels[key] = _qrels(gs.judged_at, positives.get(question_id, []))
        legs.update((hits[0].legs or []) if hits else [])
        results.append((key, answerable, hits, ranked))
    scores = score(rankings, qrels, top_k)

    per_question = [QuestionResult(key=key, answerable=answerable, chunk_ids=[h.chunk_id for h in hits],
                                   ranked=ranked, tokens=sum(tokens.get(h.chunk_id, 0) for h in hits),
                                   legs=list(hits[0].legs or []) if hits else [],
                                   scores=scores.per_query.get(key) if answerable else None)
                    for key, answerable, hits, ranked in results]
    unanswerable = [r for r in per_question if not r.answerable]
    metrics: dict[str, float | None] = dict(scores.mean)
    metrics["mean_tokens"] = float(np.mean([r.tokens for r in per_question]))
    metrics["mean_results"] = float(np.mean([len(r.chunk_ids) for r in per_question]))
    metrics["unanswerable_declined"] = (
        sum(1 for r in unanswerable if not r.chunk_ids) / len(unanswerable) if unanswerable else None)

    effective = {name: _jsonable(getattr(col, name)) for name in KNOBS if hasattr(col, name)}
    effective.update({name: _jsonable(value) for name, value in call_knobs.items()})
    unbound = sum(1 for rows in positives.values() for p in rows if p[2] is None)
    settings = {
        "mode": mode,
        "knobs": _jsonable(knobs),
        "effective": effective,
        "judged_at": gs.judged_at,
        "embeddings": embedding_source,
        "legs": dict(sorted(legs.items())),
        "questions": {"answerable": len(qrels), "unanswerable": len(unanswerable),
                      "scored": scores.n_queries, "unbound_positives": unbound},
        "pgsift": __version__,
    }
    run = EvalRun(collection=collection, golden_set=gs.name, label=label or mode, mode=mode, k=top_k,
                  metrics=metrics, settings=settings, questions=per_question)
    if store:
        _store(client, run, gs)
    return run


def _store(client: Client, run: EvalRun, gs: GoldenSet) -> None:
    params = {"collection": run.collection, "tenant": client.tenant, "golden_set_id": gs.golden_set_id,
              "golden_set": gs.name, "label": run.label, "k": run.k, "settings": Jsonb(run.settings),
              "metrics": Jsonb(run.metrics)}
    with transaction(client) as conn:
        run.run_id, run.created_at = conn.execute(q.INSERT_RUN, params).fetchone()
        row = conn.cursor(row_factory=class_row(HistoryRow)).execute(q.HISTORY_OF_RUNS, {
            "collection": run.collection, "tenant": client.tenant, "golden_set": gs.name,
            "run_ids": [run.run_id]}).fetchone()
    run.previous_run_id, run.delta = row.previous_run_id, row.delta


def history(client: Client, collection: str, *, golden_set: str | None = None,
            max_runs: int | None = 50) -> list[HistoryRow]:
    """Stored runs, oldest first (the latest max_runs; None: all), each with its delta
    against the previous run of the same golden set, k and label (sift.eval_history)."""
    with transaction(client) as conn:
        cur = conn.cursor(row_factory=class_row(HistoryRow))
        return cur.execute(q.HISTORY, {"collection": collection, "tenant": client.tenant,
                                       "golden_set": golden_set, "max_runs": max_runs}).fetchall()


# -- sweeps ------------------------------------------------------------------------

def parse_values(text: str, kind: type = float) -> list:
    """``"0,0.1,...,1"`` (an arithmetic series: first, second, ..., last), ``"20,40,80"``,
    or ``"0:1:0.25"`` (start:stop:step, stop included) as a list of numbers."""
    text = text.strip()
    try:
        if ":" in text and "," not in text:
            start, stop, step = (float(x) for x in text.split(":"))
            if step <= 0 or stop < start:
                raise InvalidArgument(f"values {text!r}: need start <= stop and step > 0")
            n = int(math.floor((stop - start) / step + 1e-9)) + 1
            values = [start + i * step for i in range(n)]
        else:
            parts = [p.strip() for p in text.split(",") if p.strip()]
            if "..." in parts:
                if len(parts) != 4 or parts[2] != "...":
                    raise InvalidArgument(f"values {text!r}: write a series as first,second,...,last")
                first, second, last = float(parts[0]), float(parts[1]), float(parts[3])
                step = second - first
                if step == 0 or (last - first) / step < 0:
                    raise InvalidArgument(f"values {text!r}: the series never reaches {parts[3]}")
                n = int(math.floor((last - first) / step + 1e-9)) + 1
                values = [first + i * step for i in range(n)]
            else:
                values = [float(p) for p in parts]
    except ValueError as exc:
        raise InvalidArgument(f"values {text!r}: not numbers ({exc})") from exc
    values = [round(v, 10) for v in values]
    if kind is int:
        if any(v != int(v) for v in values):
            raise InvalidArgument(f"values {text!r}: this knob takes whole numbers")
        values = [int(v) for v in values]
    if not values:
        raise InvalidArgument("no values to sweep")
    if len(set(values)) != len(values):
        raise InvalidArgument(f"values {text!r}: a value appears twice")
    return values


def format_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass
class Sweep:
    knob: str
    metric: str
    values: list
    runs: list[EvalRun]
    baselines: list[EvalRun]

    @property
    def best(self) -> tuple[Any, EvalRun]:
        """The value with the highest metric (the first such value on a tie)."""
        scored = [(run.metrics[self.metric] if run.metrics[self.metric] is not None else -math.inf, -i)
                  for i, run in enumerate(self.runs)]
        i = -max(scored)[1]
        return self.values[i], self.runs[i]

    def to_json(self) -> dict[str, Any]:
        value, run = self.best
        return {"knob": self.knob, "metric": self.metric, "values": self.values,
                "best": {"value": value, "run_id": run.run_id, self.metric: run.metrics[self.metric]},
                "runs": [r.to_json() for r in self.runs],
                "baselines": [r.to_json() for r in self.baselines]}


def check_values(client: Client, knob: str, values: Sequence[Any]) -> None:
    """Range-check a sweep's values in the database (the knob's domain) before any run."""
    with transaction(client) as conn:
        conn.execute(q.check_knob_values(knob), {"values": [str(v) for v in values]})


def sweep(client: Client, collection: str, knob: str, values: Sequence[Any], *,
          golden_set: str | None = None, top_k: int = 10, knobs: Mapping[str, Any] | None = None,
          baselines: Sequence[str] = (), metric: str = "ndcg", store: bool = True,
          reembed: bool = False, progress: Progress | None = None) -> Sweep:
    """Evaluate the pipeline once per value of ``knob`` (other overrides from ``knobs``),
    each run stored with label ``sweep <knob>=<value>``; ``baselines`` ('dense',
    'lexical') run once beside it."""
    if knob not in SWEEP_KNOBS:
        raise InvalidArgument(f"cannot sweep {knob!r}: choose one of {', '.join(SWEEP_KNOBS)}")
    if metric not in METRICS:
        raise InvalidArgument(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    knobs = _check_knobs(knobs or {})
    if knob in knobs:
        raise InvalidArgument(f"{knob} is the knob being swept: do not also set it")
    values = [SWEEP_KNOBS[knob](v) for v in values]
    if not values:
        raise InvalidArgument("no values to sweep")
    check_values(client, knob, values)
    runs = [evaluate(client, collection, golden_set=golden_set, top_k=top_k, knobs={**knobs, knob: v},
                     label=f"sweep {knob}={format_value(v)}", store=store, reembed=reembed,
                     progress=progress)
            for v in values]
    base_knobs = {k: v for k, v in knobs.items() if k != "hybrid"}
    base = [evaluate(client, collection, golden_set=golden_set, top_k=top_k, knobs=base_knobs, mode=m,
                     store=store, reembed=reembed, progress=progress)
            for m in baselines]
    return Sweep(knob=knob, metric=metric, values=values, runs=runs, baselines=base)


def plot_sweep(result: Sweep, path: Path | str, *, title: str | None = None) -> Path:
    """A PNG of every metric at k against the swept knob, the best value marked and the
    baselines (if any) as dashed lines of the chosen metric. Headless (Agg), no pyplot
    state touched."""
    Figure = _require("matplotlib.figure").Figure
    path = Path(path)
    k = result.runs[0].k
    x = [float(v) for v in result.values]
    fig = Figure(figsize=(8, 5), dpi=120, layout="constrained")
    ax = fig.subplots()
    for name in METRICS:
        ys = [r.metrics[name] if r.metrics[name] is not None else math.nan for r in result.runs]
        ax.plot(x, ys, marker="o", markersize=4, linewidth=2 if name == result.metric else 1.2,
                label=f"{METRIC_LABELS[name]}@{k}")
    best_value, best_run = result.best
    best = best_run.metrics[result.metric]
    ax.axvline(float(best_value), color="grey", linestyle=":", linewidth=1)
    if best is not None:
        ax.annotate(f"best {METRIC_LABELS[result.metric]}@{k} {best:.4f}\nat {result.knob} = "
                    f"{format_value(best_value)}", xy=(float(best_value), best), xytext=(8, 8),
                    textcoords="offset points", fontsize=9)
    for run, style in zip(result.baselines, ("--", "-.")):
        value = run.metrics[result.metric]
        if value is not None:
            ax.axhline(value, color="black", linestyle=style, linewidth=1,
                       label=f"{run.mode} only {METRIC_LABELS[result.metric]}@{k} {value:.4f}")
    ax.set_xlabel(result.knob)
    ax.set_ylabel(f"metric @ {k}")
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9)
    first = result.runs[0]
    fixed = ", ".join(f"{name} {format_value(first.settings['effective'][name])}"
                      for name in ("dense_weight", "rrf_k", "fetch_k", "lexical_scorer")
                      if name != result.knob and name in first.settings["effective"])
    ax.set_title(title or f"{first.collection} / {first.golden_set}: {result.knob} sweep "
                 f"({first.settings['questions']['scored']} questions)\n{fixed}", fontsize=10)
    fig.savefig(path, format="png")
    return path
