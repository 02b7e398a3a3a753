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
  what the answers cost (tokens and results per question) and records the run
  (``sift.record_eval_run``). :func:`sweep` does it for each value of one knob and
  :func:`plot_sweep` draws the result.

From psql, ``sift.score_golden_set`` and ``sift.evaluate_golden_set`` do what
:func:`evaluate` does for a client without an embedder or a reranker (SQL
never calls out), with the same definitions: ``tests/test_evaluation.py``
holds the two equal, question by question, on the same runs.

Knobs are the database's: which exist, which a sweep can walk (the numeric
ones a call may set) and whether a value is in range all come from
``sift.knobs()``, asked before any search runs.

What counts as a hit: a golden set judged at the ``chunk`` level scores chunk
ids; one judged at the ``document`` level (every BEIR import) scores
documents: a hit on any chunk of a relevant document counts as that document,
once, at its best rank (later chunks of the same document neither earn gain
again nor use up a slot, as in pgsift.metrics and the benchmark). A positive
whose chunk is gone (unbound, see ``pgsift golden rebind``) still counts as
relevant and can never be found, so a stale golden set scores low rather than
high, and the run reports how many positives were unbound.

Structure (parent_return, neighbours): a hit stands for every chunk whose text it
returns (a merged section's chunks, its window). At the chunk level it counts as
the first positive among those not already credited to a better hit, so a
section answering twice is not scored twice. ``coverage`` is the share of a
question's positives whose text came back at all, ``mean_tokens`` counts the
text actually returned (a window once, a hit inside another's window not again)
and ``merge_rate`` the share of hits that were merged sections.
"""

from __future__ import annotations

import importlib
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
from . import queries as q
from .client import Client
from .errors import EvaluationUnavailable, InvalidArgument, InvalidKnob
from .golden import GoldenSet, StoredPositive, StoredQuestion, get_golden_set, load_questions
from .models import Hit, Knob

METRICS = ("hit_rate", "mrr", "ndcg", "precision", "recall")
COST = ("mean_tokens", "mean_results")
STRUCTURE = ("coverage", "merge_rate")
MODES = ("pipeline", "dense", "lexical")
METRIC_LABELS = {"hit_rate": "hit", "mrr": "MRR", "ndcg": "nDCG", "precision": "P", "recall": "R"}
# What a sweep's values are, by the SQL type a knob's domain is over (sift.knobs().type).
NUMBER_TYPES: dict[str, type] = {"smallint": int, "integer": int, "bigint": int,
                                 "real": float, "double precision": float, "numeric": float}

Progress = Callable[[int], object]

__all__ = [
    "COST", "METRICS", "METRIC_LABELS", "MODES", "NUMBER_TYPES", "STRUCTURE", "EvalRun", "EvaluationUnavailable",
    "HistoryRow", "QuestionResult", "Scores", "Sweep", "check_values", "covered_chunks", "evaluate",
    "format_value", "history", "parse_values", "plot_sweep", "query_vectors", "ranked_units", "relevant_units",
    "require", "returned_chunks", "score", "sweep", "sweepable_knobs", "unit",
]


def require(module: str) -> Any:
    """Import an optional evaluation library, or say which extra installs it."""
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


def score(rankings: Mapping[str, Sequence[Hashable]], qrels: Mapping[str, Mapping[Any, int]],
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
    pytrec_eval = require("pytrec_eval")
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
            name = str(doc)
            if name not in seen:
                seen.add(name)
                ranked.append(name)
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
    mean: dict[str, float | None] = {
        name: (float(np.mean([s[name] for s in per_query.values()])) if per_query else None)
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
    coverage: float | None = None     # share of the bound positives whose text came back
    merged: int = 0                   # hits that were merged sections


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
        out: dict[str, Any] = {
            "run_id": self.run_id, "created_at": self.created_at and self.created_at.isoformat(),
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


def returned_chunks(hit: Hit) -> list[int]:
    """The chunks whose text this hit sends: its window, else what its content spans; none when
    a better hit's window already holds it."""
    if hit.window_of is not None:
        return []
    return list(hit.window_chunk_ids or hit.chunk_ids or [hit.chunk_id])


def covered_chunks(hit: Hit) -> list[int]:
    """The chunks a hit stands for: its own text's and its window's."""
    return list(dict.fromkeys([*(hit.chunk_ids or [hit.chunk_id]), *(hit.window_chunk_ids or [])]))


def ranked_units(judged_at: str, hits: Sequence[Hit], positives: set[int]) -> list[str]:
    """What each hit counts as, in rank order (see :func:`unit`); at the chunk level, a hit
    covering positives counts as the first one no better hit was credited with."""
    credited: set[int] = set()
    ranked = []
    for h in hits:
        if judged_at == "chunk":
            fresh = [c for c in covered_chunks(h) if c in positives and c not in credited]
            if fresh:
                credited.add(fresh[0])
                ranked.append(unit(judged_at, fresh[0], h.source_uri))
                continue
        ranked.append(unit(judged_at, h.chunk_id, h.source_uri))
    return ranked


def unit(judged_at: str, chunk_id: int, source_uri: str | None) -> str:
    """What a retrieved chunk counts as: itself, or its document at the document level."""
    return f"chunk:{chunk_id}" if judged_at == "chunk" else f"doc:{source_uri}"


def relevant_units(judged_at: str, positives: Sequence[StoredPositive]) -> dict[str, int]:
    """One question's relevant units (see :func:`unit`) with their grades. An unbound
    positive is a unit nothing can retrieve (one per document at the document level,
    unless that document is already relevant through a bound chunk)."""
    units: dict[str, int] = {}
    for p in positives:
        if p.chunk_id is not None:
            key = unit(judged_at, p.chunk_id, p.source_uri)
            units[key] = max(units.get(key, 0), p.grade)
    for p in positives:
        if p.chunk_id is None:
            if judged_at == "document" and p.source_uri:
                if f"doc:{p.source_uri}" in units:
                    continue
                key = f"unbound:{p.source_uri}"
            else:
                key = f"unbound:{p.positive_id}"
            units[key] = max(units.get(key, 0), p.grade)
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


def query_vectors(client: Client, questions: Sequence[StoredQuestion], mode: str, reembed: bool
                  ) -> tuple[list[Any], str]:
    """The query vector of each question and where they came from: the stored one, else
    the client's embedder (``reembed``: always), else none (the lexical leg alone)."""
    if mode == "lexical":
        return [None] * len(questions), "none (lexical only)"
    vectors: list[Any] = [None if reembed else qu.embedding for qu in questions]
    missing = [i for i, v in enumerate(vectors) if v is None]
    source = "stored with the golden set"
    if missing and client.embedder is not None:
        computed = client.embedder.embed([questions[i].question for i in missing])
        for i, vec in zip(missing, computed, strict=True):
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


def _check_top_k(top_k: Any) -> int:
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= 1000:
        raise InvalidArgument(f"top_k must be an integer in [1, 1000], got {top_k!r}")
    return top_k


def evaluate(client: Client, collection: str, *, golden_set: str | None = None, top_k: int = 10,
             knobs: Mapping[str, Any] | None = None, mode: str = "pipeline", label: str | None = None,
             store: bool = True, reembed: bool = False, progress: Progress | None = None) -> EvalRun:
    """Run every question of the golden set through search and score the answers at top_k.

    mode:

    * ``pipeline``: ``client.search(question, embedding=..., top_k=top_k, **knobs)``:
      what an application calling search gets (the collection's settings, the knob
      overrides, and whatever the client itself adds, such as a reranker).
    * ``dense``: the dense leg alone (``hybrid`` false, no rerank), through a plain
      client: the baseline that hybrid and reranking must beat.
    * ``lexical``: the lexical leg alone (no query vector, no rerank), through a plain client.

    Baselines change the retrieval legs only: the collection's ranking settings
    (per-document cap, recency, ...) and the knob overrides apply to them too.
    Answers are scored in rank order (strength), not in presentation order. The knobs
    are checked by the database (sift.knobs) before any search: an unknown name or a
    value out of range raises InvalidKnob and nothing runs.

    Query vectors: the one stored with the question (BEIR imports with precomputed
    embeddings), else the client's embedder (``reembed`` forces it), else none (the
    lexical leg alone, said in ``settings["embeddings"]``).

    Metrics (see :func:`score`) are averaged over the answerable questions, and so is
    ``coverage`` (the share of a question's bound positives whose text came back);
    ``mean_tokens`` (the token_count of the chunks whose text came back: windows and
    merged sections whole, nothing twice) and ``mean_results`` over every question;
    ``merge_rate`` is the share of hits that were merged sections (null with
    parent_return child), and ``unanswerable_declined`` is the share of questions
    without an answer that got no result (null when the set has none).
    ``settings["effective"]`` is every knob in force (the collection's settings with
    this run's overrides); ``settings["legs"]`` counts, per leg, the questions whose
    search ran it (read from the answer's rows, so a question with no result is not
    counted). The run is recorded (sift.record_eval_run) unless ``store`` is false;
    ``delta`` is against the previous stored run with the same golden set, k and label.
    """
    if mode not in MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    _check_top_k(top_k)
    knobs = dict(knobs or {})
    if mode != "pipeline" and "hybrid" in knobs:
        raise InvalidArgument(f"the {mode} baseline decides 'hybrid' itself")
    call_knobs = {**knobs, "hybrid": False} if mode == "dense" else dict(knobs)
    if mode != "pipeline":
        call_knobs["rerank"] = False   # baselines are what reranking must beat
    gs = get_golden_set(client, collection, golden_set)
    # The database checks the knobs (names, types, ranges) and says what is in force.
    effective = {k.name: _jsonable(k.value) for k in client.knobs(collection, **call_knobs)}
    questions, positives = load_questions(client, gs)
    if not questions:
        raise InvalidArgument(f'golden set "{gs.name}" has no question')
    vectors, embedding_source = query_vectors(client, questions, mode, reembed)
    searcher = client if mode == "pipeline" else Client(client.source, tenant=client.tenant)

    answers: list[list[Hit]] = []
    for question, vector in zip(questions, vectors, strict=True):
        hits = searcher.search(collection, question.question, embedding=vector, top_k=top_k, **call_knobs).hits
        # Scored by strength (rank), not by presentation order (lost-in-the-middle).
        answers.append(sorted(hits, key=lambda h: (h.rank, h.chunk_id)))
        if progress:
            progress(1)

    chunk_ids = sorted({c for hits in answers for h in hits for c in returned_chunks(h)})
    with client.transaction() as conn:
        tokens: dict[int, int] = dict(conn.execute(q.TOKEN_COUNTS, {"chunk_ids": chunk_ids},
                                                   prepare=False).fetchall())

    rankings: dict[str, list[str]] = {}
    qrels: dict[str, dict[str, int]] = {}
    legs: Counter[str] = Counter()
    results = []
    for question, hits in zip(questions, answers, strict=True):
        key = question.question_key
        bound = {p.chunk_id for p in positives.get(question.question_id, []) if p.chunk_id is not None}
        ranked = ranked_units(gs.judged_at, hits, bound)
        rankings[key] = ranked
        if question.answerable:
            qrels[key] = relevant_units(gs.judged_at, positives.get(question.question_id, []))
        legs.update((hits[0].legs or []) if hits else [])
        sent = {c for h in hits for c in returned_chunks(h)} | {c for h in hits for c in covered_chunks(h)}
        coverage = len(bound & sent) / len(bound) if question.answerable and bound else None
        results.append((key, question.answerable, hits, ranked, coverage))
    scores = score(rankings, qrels, top_k)

    per_question = [QuestionResult(key=key, answerable=answerable, chunk_ids=[h.chunk_id for h in hits],
                                   ranked=ranked,
                                   tokens=sum(tokens.get(c, 0) for h in hits for c in returned_chunks(h)),
                                   legs=list(hits[0].legs or []) if hits else [],
                                   scores=scores.per_query.get(key) if answerable else None,
                                   coverage=coverage, merged=sum(1 for h in hits if h.merged))
                    for key, answerable, hits, ranked, coverage in results]
    unanswerable = [r for r in per_question if not r.answerable]
    metrics: dict[str, float | None] = dict(scores.mean)
    metrics["mean_tokens"] = float(np.mean([r.tokens for r in per_question]))
    metrics["mean_results"] = float(np.mean([len(r.chunk_ids) for r in per_question]))
    covered = [r.coverage for r in per_question if r.coverage is not None]
    metrics["coverage"] = float(np.mean(covered)) if covered else None
    n_hits = sum(len(r.chunk_ids) for r in per_question)
    metrics["merge_rate"] = (sum(r.merged for r in per_question) / n_hits
                             if n_hits and effective.get("parent_return") != "child" else None)
    metrics["unanswerable_declined"] = (
        sum(1 for r in unanswerable if not r.chunk_ids) / len(unanswerable) if unanswerable else None)

    unbound = sum(1 for rows in positives.values() for p in rows if p.chunk_id is None)
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
    """Record the run (sift.record_eval_run): its id, when, and its delta against the previous
    run of the same golden set, k and label."""
    params = {"collection": run.collection, "golden_set": gs.name, "label": run.label, "k": run.k,
              "settings": Jsonb(run.settings), "metrics": Jsonb(run.metrics)}
    with client.transaction() as conn:
        stored = conn.execute(q.RECORD_RUN, params, prepare=False).fetchone()
    assert stored is not None   # sift._collection and sift._golden_set raised otherwise
    run.run_id, run.created_at, run.previous_run_id, run.delta = stored


def history(client: Client, collection: str, *, golden_set: str | None = None,
            max_runs: int | None = 50) -> list[HistoryRow]:
    """Stored runs, oldest first (the latest max_runs; None: all), each with its delta
    against the previous run of the same golden set, k and label (sift.eval_history)."""
    with client.transaction() as conn:
        cur = conn.cursor(row_factory=class_row(HistoryRow))
        return cur.execute(q.HISTORY, {"collection": collection, "golden_set": golden_set,
                                       "max_runs": max_runs}, prepare=False).fetchall()


# -- sweeps ------------------------------------------------------------------------

def parse_values(text: str, kind: type = float) -> list[Any]:
    """``"0,0.1,...,1"`` (an arithmetic series: first, second, ..., last), ``"20,40,80"``,
    or ``"0:1:0.25"`` (start:stop:step, stop included) as a list of numbers."""
    text = text.strip()
    try:
        if ":" in text and "," not in text:
            start, stop, step = (float(x) for x in text.split(":"))
            if step <= 0 or stop < start:
                raise InvalidArgument(f"values {text!r}: need start <= stop and step > 0")
            n = math.floor((stop - start) / step + 1e-9) + 1
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
                n = math.floor((last - first) / step + 1e-9) + 1
                values = [first + i * step for i in range(n)]
            else:
                values = [float(p) for p in parts]
    except ValueError as exc:
        raise InvalidArgument(f"values {text!r}: not numbers ({exc})") from exc
    values = [round(v, 10) for v in values]
    if not values:
        raise InvalidArgument("no values to sweep")
    if len(set(values)) != len(values):
        raise InvalidArgument(f"values {text!r}: a value appears twice")
    if kind is int:
        if any(v != int(v) for v in values):
            raise InvalidArgument(f"values {text!r}: this knob takes whole numbers")
        return [int(v) for v in values]
    return values


def format_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def sweepable_knobs(client: Client, definitions: Sequence[Knob] | None = None) -> dict[str, type]:
    """The knobs a sweep can walk, with the Python type of their values: the numeric ones
    a call may set (sift.knobs(): type and scope)."""
    return {k.name: NUMBER_TYPES[k.type] for k in (definitions if definitions is not None else client.knobs())
            if k.type in NUMBER_TYPES and k.scope != "collection"}


def _checked_values(client: Client, collection: str, knob: str, values: Sequence[Any],
                    knobs: Mapping[str, Any], definitions: Sequence[Knob]) -> list[Any]:
    known = {k.name for k in definitions}
    if not values:
        raise InvalidArgument("no values to sweep")
    if knob not in known:
        client.knobs(collection, **{knob: values[0]})   # the database names the nearest knob
        raise InvalidKnob(f"unknown knob {knob!r}", knob=knob)
    kinds = sweepable_knobs(client, definitions)
    if knob not in kinds:
        raise InvalidKnob(f"cannot sweep {knob!r}: a sweep walks a number a call can set "
                          f"({', '.join(kinds)})", knob=knob)
    if knob in knobs:
        raise InvalidArgument(f"{knob} is the knob being swept: do not also set it")
    kind = kinds[knob]
    checked = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidKnob(f"{knob} takes numbers, got {value!r}", knob=knob)
        if kind is int and value != int(value):
            raise InvalidKnob(f"{knob} takes whole numbers, got {value!r}", knob=knob)
        checked.append(kind(value))
        # The knob's domain range-checks the value (a check violation naming the knob).
        client.knobs(collection, **{**knobs, knob: checked[-1]})
    return checked


def check_values(client: Client, collection: str, knob: str, values: Sequence[Any],
                 knobs: Mapping[str, Any] | None = None) -> list[Any]:
    """A sweep's values checked by the database before any run (the knob exists, is a
    number a call can set, every value is in its domain's range, with the other
    overrides), as the knob's type; InvalidKnob names the first problem."""
    return _checked_values(client, collection, knob, values, dict(knobs or {}), client.knobs())


@dataclass
class Sweep:
    knob: str
    metric: str
    values: list[Any]
    runs: list[EvalRun]
    baselines: list[EvalRun]
    # The other knobs of the swept knob's stage, as the runs had them (the plot's title).
    fixed: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> tuple[Any, EvalRun]:
        """The value with the highest metric (the first such value on a tie)."""
        scored = [(m if (m := run.metrics[self.metric]) is not None else -math.inf, -i)
                  for i, run in enumerate(self.runs)]
        i = -max(scored)[1]
        return self.values[i], self.runs[i]

    def to_json(self) -> dict[str, Any]:
        value, run = self.best
        return {"knob": self.knob, "metric": self.metric, "values": self.values, "fixed": self.fixed,
                "best": {"value": value, "run_id": run.run_id, self.metric: run.metrics[self.metric]},
                "runs": [r.to_json() for r in self.runs],
                "baselines": [r.to_json() for r in self.baselines]}


def sweep(client: Client, collection: str, knob: str, values: Sequence[Any], *,
          golden_set: str | None = None, top_k: int = 10, knobs: Mapping[str, Any] | None = None,
          baselines: Sequence[str] = (), metric: str = "ndcg", store: bool = True,
          reembed: bool = False, progress: Progress | None = None) -> Sweep:
    """Evaluate the pipeline once per value of ``knob`` (other overrides from ``knobs``),
    each run stored with label ``sweep <knob>=<value>``; ``baselines`` ('dense',
    'lexical') run once beside it. Every value is checked by the database first
    (:func:`check_values`): an unknown knob or a value out of range runs nothing."""
    if metric not in METRICS:
        raise InvalidArgument(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    for mode in baselines:
        if mode not in MODES or mode == "pipeline":
            raise InvalidArgument(f"a baseline is dense or lexical, got {mode!r}")
    knobs = dict(knobs or {})
    definitions = client.knobs()
    checked = _checked_values(client, collection, knob, values, knobs, definitions)
    runs = [evaluate(client, collection, golden_set=golden_set, top_k=top_k, knobs={**knobs, knob: v},
                     label=f"sweep {knob}={format_value(v)}", store=store, reembed=reembed,
                     progress=progress)
            for v in checked]
    base_knobs = {k: v for k, v in knobs.items() if k != "hybrid"}
    base = [evaluate(client, collection, golden_set=golden_set, top_k=top_k, knobs=base_knobs, mode=m,
                     store=store, reembed=reembed, progress=progress)
            for m in baselines]
    stage = next(k.stage for k in definitions if k.name == knob)
    effective = runs[0].settings["effective"]
    fixed = {k.name: effective.get(k.name) for k in definitions
             if k.stage == stage and k.name != knob and k.scope != "collection"}
    return Sweep(knob=knob, metric=metric, values=checked, runs=runs, baselines=base, fixed=fixed)


def plot_sweep(result: Sweep, path: Path | str, *, title: str | None = None) -> Path:
    """A PNG of every metric at k against the swept knob, the best value marked and the
    baselines (if any) as dashed lines of the chosen metric. Headless (Agg), no pyplot
    state touched."""
    figure = require("matplotlib.figure").Figure
    path = Path(path)
    k = result.runs[0].k
    x = [float(v) for v in result.values]
    fig = figure(figsize=(8, 5), dpi=120, layout="constrained")
    ax = fig.subplots()
    for name in METRICS:
        ys = [m if (m := r.metrics[name]) is not None else math.nan for r in result.runs]
        ax.plot(x, ys, marker="o", markersize=4, linewidth=2 if name == result.metric else 1.2,
                label=f"{METRIC_LABELS[name]}@{k}")
    best_value, best_run = result.best
    best = best_run.metrics[result.metric]
    ax.axvline(float(best_value), color="grey", linestyle=":", linewidth=1)
    if best is not None:
        ax.annotate(f"best {METRIC_LABELS[result.metric]}@{k} {best:.4f}\nat {result.knob} = "
                    f"{format_value(best_value)}", xy=(float(best_value), best), xytext=(8, 8),
                    textcoords="offset points", fontsize=9)
    for run, style in zip(result.baselines, ("--", "-.", ":"), strict=False):
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
    fixed = ", ".join(f"{name} {format_value(value)}" for name, value in result.fixed.items())
    ax.set_title(title or f"{first.collection} / {first.golden_set}: {result.knob} sweep "
                 f"({first.settings['questions']['scored']} questions)\n{fixed}", fontsize=10)
    fig.savefig(path, format="png")
    return path
