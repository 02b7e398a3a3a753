"""Calibrate a score threshold for a reranker on a golden set (`pgsift calibrate`).

A score threshold declines a question when nothing in its pool scores high enough.
Which value is right depends on the reranker's score scale, so it is tuned on the
golden set, per reranker:

* every question's pool is built exactly as ``Client.search`` builds it for a
  rerank (sift.candidates widened to the reranker's ``rerank_top_n``, the
  contextualized texts of sift.rerank_texts) and scored through the named
  reranker (one metered call per question);
* an unanswerable question is *declined* at threshold t when its top score is
  below t; an answerable question that *works today* (a relevant chunk or
  document within top_k of the current pipeline) is *pushed below the line* when
  the best score among its relevant pool items is below t;
* :func:`choose_threshold` maximises ``declined share - pushed-below share`` over
  every distinct cut and proposes the band of thresholds reaching the maximum and
  its midpoint.

A threshold *helps* only when that maximum is above 0 and both groups were scored:
with no scored unanswerable question there is nothing to decline, with no scored
working answerable one nothing says what a cut costs, and a best objective of 0
means every cut pushes at least as many answers below the line as it declines
questions without one (the best "cut" is then below every score: it admits
everything). Then the result says so (``helps`` false, ``why``), proposes no
value and :func:`store_calibration` stores nothing.

Scores are on the scale sift.finalize compares the threshold with
(``RerankOutcome.finalize_scores``: the provider's, or their sigmoid for logits).
A question whose rerank call failed (or was not made: fewer than two candidates)
is left out, never guessed, and counted. ``store_threshold`` stores the value
against the reranker (sift.store_calibrated_threshold): search applies it only to
pools that reranker scored, and changing the collection's reranker clears it;
``store_calibration`` stores a result's value, and refuses one that does not help.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

from . import queries as q
from .client import Client
from .errors import InvalidArgument, RerankerNotAllowed
from .evaluation import query_vectors, relevant_units, unit
from .golden import get_golden_set, load_questions
from .models import RerankerConfig

Progress = Callable[[int], object]


# -- the choice ----------------------------------------------------------------------

def _share(scores: Sequence[float], t: float) -> Fraction:
    return Fraction(sum(1 for s in scores if s < t), len(scores)) if scores else Fraction(0)


def candidate_thresholds(scores: Sequence[float]) -> list[float]:
    """Every distinct cut: one value below the lowest score, the midpoints between
    consecutive distinct scores, one above the highest (ascending)."""
    distinct = sorted({float(s) for s in scores})
    if not distinct:
        return []
    if len(distinct) > 1:
        pad = (distinct[-1] - distinct[0]) / (2 * (len(distinct) - 1))
    else:
        pad = max(abs(distinct[0]), 1.0) / 2
    mids = [(a + b) / 2 for a, b in itertools.pairwise(distinct)]
    return [distinct[0] - pad, *mids, distinct[-1] + pad]


def objective(unanswerable_scores: Sequence[float], answerable_scores: Sequence[float],
              t: float) -> float:
    """Share of unanswerable questions declined at t (top score < t) minus the share of
    working answerable ones pushed below it (best relevant score < t); an empty group's
    share is 0."""
    return float(_share(unanswerable_scores, t) - _share(answerable_scores, t))


def choose_threshold(unanswerable_scores: Sequence[float], answerable_scores: Sequence[float]
                     ) -> tuple[tuple[float, float], float, float]:
    """(band, value, objective): the thresholds that maximise :func:`objective`.

    The objective only changes at a score, so the candidates of
    :func:`candidate_thresholds` cover every distinct outcome. ``band`` is
    [lowest, highest] candidate of the lowest contiguous run of candidates reaching
    the maximum (every threshold in it reaches it; when several separate runs tie,
    the lowest one declines least), ``value`` its midpoint."""
    u = [float(s) for s in unanswerable_scores]
    a = [float(s) for s in answerable_scores]
    if not all(math.isfinite(s) for s in (*u, *a)):
        raise InvalidArgument("scores must be finite")
    cands = candidate_thresholds([*u, *a])
    if not cands:
        raise InvalidArgument("nothing to calibrate: no scored question")
    values = [_share(u, t) - _share(a, t) for t in cands]   # exact: ties are ties
    best = max(values)
    first = values.index(best)
    last = first
    while last + 1 < len(values) and values[last + 1] == best:
        last += 1
    band = (cands[first], cands[last])
    return band, (band[0] + band[1]) / 2, float(best)


# -- the run -------------------------------------------------------------------------

@dataclass(frozen=True)
class QuestionScore:
    key: str
    answerable: bool
    top_score: float | None          # best score in the pool (None: not scored)
    works_today: bool | None         # answerable: a relevant hit within top_k today
    relevant_score: float | None     # working answerable: best score among its relevant pool items
    failed: str | None = None        # why it was left out (a fault, or no call made)


@dataclass
class Calibration:
    collection: str
    golden_set: str
    reranker: str
    k: int
    band: tuple[float, float] | None  # where the objective peaks (kept when no threshold helps)
    value: float | None               # the proposal; None when no threshold helps
    objective: float | None
    declined_share: float | None      # of the scored unanswerable questions, top score < value
    pushed_below_share: float | None  # of the scored working answerable ones, best relevant < value
    counts: dict[str, int]
    failures: list[tuple[str, str]] = field(default_factory=list)
    questions: list[QuestionScore] = field(default_factory=list, repr=False)
    helps: bool = False               # a threshold declines more than it costs: value is set
    why: str | None = None            # when it does not help, why not
    stored: bool = False
    # what the collection keeps when nothing was stored: (score_threshold, threshold_reranker)
    threshold_in_force: tuple[float | None, str | None] | None = None

    def to_json(self, per_question: bool = False) -> dict[str, Any]:
        out = {"collection": self.collection, "golden_set": self.golden_set, "reranker": self.reranker,
               "k": self.k, "helps": self.helps, "why": self.why,
               "band": list(self.band) if self.band else None, "value": self.value,
               "objective": self.objective, "declined_share": self.declined_share,
               "pushed_below_share": self.pushed_below_share, "counts": self.counts,
               "failures": [{"question": q, "reason": r} for q, r in self.failures],
               "stored": self.stored}
        if self.threshold_in_force is not None:
            out["threshold_in_force"] = {"score_threshold": self.threshold_in_force[0],
                                         "threshold_reranker": self.threshold_in_force[1]}
        if per_question:
            out["questions"] = [asdict(q) for q in self.questions]
        return out


def reranker_config(client: Client, collection: str, alias: str) -> RerankerConfig:
    """The named reranker of the client's tenant as a search over the collection would run
    it (sift.reranker_for with reranker => alias: the collection's rerank_top_n).
    RerankerNotAllowed when the tenant has no reranker of that name, or when it cannot
    run (an endpoint the operator no longer allows): before any call."""
    config = client.reranker_for(collection, reranker=alias)
    if config is None or not config.usable:
        why = config.refused if config is not None and config.refused else "it cannot run"
        raise RerankerNotAllowed(f'reranker "{alias}" cannot score collection "{collection}": {why}')
    return config


def _pool_documents(client: Client, chunk_ids: list[int]) -> dict[int, str]:
    """The document (source_uri) of each pool chunk: calibration may judge documents."""
    with client.transaction() as conn:
        rows = conn.execute(q.CHUNK_DOCUMENTS, {"chunk_ids": chunk_ids}, prepare=False).fetchall()
    return {int(chunk_id): str(source_uri) for chunk_id, source_uri in rows}


def calibrate(client: Client, collection: str, reranker_alias: str, *, golden_set: str | None = None,
              top_k: int = 10, progress: Progress | None = None) -> Calibration:
    """Score every golden question through the reranker and propose a threshold (see the
    module's docstring). Raises RerankerNotAllowed when the alias is not one of the
    client's tenant's rerankers, before any call."""
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= 1000:
        raise InvalidArgument(f"top_k must be an integer in [1, 1000], got {top_k!r}")
    config = reranker_config(client, collection, reranker_alias)
    gs = get_golden_set(client, collection, golden_set)
    questions, positives = load_questions(client, gs)
    if not questions:
        raise InvalidArgument(f'golden set "{gs.name}" has no question')
    vectors, _source = query_vectors(client, questions, "pipeline", False)

    results: list[QuestionScore] = []
    for question, vector in zip(questions, vectors, strict=True):
        key, text, answerable = question.question_key, question.question, question.answerable
        relevant = (set(relevant_units(gs.judged_at, positives.get(question.question_id, [])))
                    if answerable else set())
        works = None
        if answerable:
            today = client.search(collection, text, embedding=vector, top_k=top_k).hits
            works = any(unit(gs.judged_at, h.chunk_id, h.source_uri) in relevant for h in today)
        # The pool a search would send, scored by the named reranker; one metered call.
        reranked = client.rerank(collection, text, embedding=vector, top_k=top_k, reranker=config.alias)
        outcome = reranked.outcome
        scores = outcome.finalize_scores() if outcome.reranked else None
        if scores is None:
            why = (f"{outcome.fault}: {outcome.reason}" if outcome.fault
                   else f"not scored ({outcome.skip}): {outcome.reason}")
            results.append(QuestionScore(key, answerable, None, works, None, why))
        else:
            ids = [c.chunk_id for c in reranked.pool]
            docs = _pool_documents(client, ids) if gs.judged_at == "document" else {}
            best_relevant = max((s for cid, s in zip(ids, scores, strict=True)
                                 if unit(gs.judged_at, cid, docs.get(cid)) in relevant), default=None)
            results.append(QuestionScore(key, answerable, max(scores), works,
                                         best_relevant if works else None))
        if progress:
            progress(1)
    return summarize(results, collection=collection, golden_set=gs.name, reranker=config.alias or reranker_alias,
                     k=top_k)


def summarize(results: list[QuestionScore], *, collection: str, golden_set: str, reranker: str,
              k: int) -> Calibration:
    """The proposal from per-question scores (what :func:`calibrate` returns)."""
    unanswerable = [r for r in results if not r.answerable]
    answerable = [r for r in results if r.answerable]
    failed = [r for r in results if r.failed]
    u_scores = [r.top_score for r in unanswerable if not r.failed and r.top_score is not None]
    working = [r for r in answerable if r.works_today and not r.failed]
    a_scores = [r.relevant_score for r in working if r.relevant_score is not None]
    counts = {
        "questions": len(results), "unanswerable": len(unanswerable), "answerable": len(answerable),
        "working_today": sum(1 for r in answerable if r.works_today),
        "scored_unanswerable": len(u_scores), "scored_working": len(a_scores),
        # working today, but no relevant chunk in the pool the reranker scored
        "relevant_not_in_pool": sum(1 for r in working if r.relevant_score is None),
        "failed": len(failed),
    }
    band: tuple[float, float] | None = None
    value = best = declined = pushed = None
    why = _no_help(u_scores, a_scores, None)
    if u_scores or a_scores:
        band, proposed, best = choose_threshold(u_scores, a_scores)
        why = _no_help(u_scores, a_scores, best)
        if why is None:
            value = proposed
            declined = float(_share(u_scores, value))
            pushed = float(_share(a_scores, value))
            counts["declined"] = sum(1 for s in u_scores if s < value)
            counts["pushed_below"] = sum(1 for s in a_scores if s < value)
    return Calibration(collection=collection, golden_set=golden_set, reranker=reranker, k=k, band=band,
                       value=value, objective=best, declined_share=declined, pushed_below_share=pushed,
                       counts=counts, failures=[(r.key, r.failed) for r in failed if r.failed], questions=results,
                       helps=why is None, why=why)


def _no_help(u_scores: Sequence[float], a_scores: Sequence[float], best: float | None) -> str | None:
    """Why no threshold helps (None when one does): see the module's docstring."""
    if not u_scores and not a_scores:
        return "no question was scored"
    if not u_scores:
        return "no unanswerable question was scored: there is nothing for a threshold to decline"
    if not a_scores:
        return ("no working answerable question was scored: nothing says what a threshold would push "
                "below the line")
    if best is not None and best <= 0:
        return (f"no threshold declines more of the {len(u_scores)} unanswerable question(s) than it pushes "
                f"of the {len(a_scores)} working answerable one(s) below the line (their scores overlap)")
    return None


def store_calibration(client: Client, result: Calibration) -> tuple[float, str]:
    """Store a calibration's value against its reranker (:func:`store_threshold`). InvalidArgument,
    before the database is touched, when no threshold helps (nothing is stored: a threshold
    stored before stays as it was) or when the value lies at or below every scored question's
    score (it would admit everything)."""
    if not result.helps or result.value is None:
        raise InvalidArgument(f"no threshold helps ({result.why or 'no value was proposed'}): nothing stored")
    scores = [s for r in result.questions if not r.failed
              for s in ((r.relevant_score,) if r.answerable else (r.top_score,)) if s is not None]
    if scores and result.value <= min(scores):
        raise InvalidArgument(f"threshold {result.value:g} is below every scored question ({min(scores):g}): "
                              "it would admit everything, nothing stored")
    stored = store_threshold(client, result.collection, result.reranker, result.value)
    result.stored = True
    return stored


def threshold_in_force(client: Client, collection: str) -> tuple[float | None, str | None]:
    """The collection's (score_threshold, threshold_reranker), each None when unset."""
    knobs = client.get_collection(collection).knobs
    value, reranker = knobs.get("score_threshold"), knobs.get("threshold_reranker")
    return (None if value is None else float(value)), (None if reranker is None else str(reranker))


def store_threshold(client: Client, collection: str, reranker_alias: str, value: float) -> tuple[float, str]:
    """Store a calibrated threshold against its reranker (sift.store_calibrated_threshold);
    RerankerNotAllowed (SF008) for an alias that is not the collection's tenant's.
    Returns the (score_threshold, threshold_reranker) the collection now has."""
    if value is None or isinstance(value, bool) or not math.isfinite(float(value)):
        raise InvalidArgument("the threshold must be a finite number")
    client.store_calibrated_threshold(collection, reranker_alias, float(value))
    knobs = client.get_collection(collection).knobs
    return float(knobs["score_threshold"]), str(knobs["threshold_reranker"])


__all__ = ["Calibration", "QuestionScore", "calibrate", "candidate_thresholds", "choose_threshold",
           "objective", "reranker_config", "store_calibration", "store_threshold", "summarize",
           "threshold_in_force"]
