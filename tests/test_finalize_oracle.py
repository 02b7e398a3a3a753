"""The finalize stage against plain-Python references on random inputs: the recency
formula, the per-document cap with backfill, greedy MMR, lost-in-the-middle order, and
all of them together (multiplicative recency and boost, threshold on relevance).

The references here are written from the issue's definitions, not from the SQL:
  recency  factor = 1 - w (1 - 0.5^(age / half_life)), no date = 1 - w, future = age 0
  cap      greedy in score order skipping documents at the cap, then backfill in score order
  MMR      argmax lam * rel - (1 - lam) * max cosine to chosen, rel = score min-max over the pool
  litm     ranks 1, 3, 5, ..., 6, 4, 2
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from conftest import unit
from pgsift import Chunk, Document
from psycopg.types.json import Jsonb

DIMS = 8
# Pools whose best and second-best MMR objective differ by less than this at some step are
# compared only as sets: pgvector computes cosine in float32, the reference in float64.
NEAR_TIE = 1e-5


# -- references ------------------------------------------------------------------------------

def recency_factor(date: datetime | None, as_of: datetime, half_life: timedelta, weight: float) -> float:
    if date is None:
        return 1 - weight
    age = max((as_of - date).total_seconds(), 0.0)
    return 1 - weight * (1 - 0.5 ** min(age / half_life.total_seconds(), 1000))


def lost_in_the_middle(selected: list) -> list:
    """Strongest first, then alternate: ranks 1, 3, 5, ..., 6, 4, 2."""
    return selected[0::2] + selected[1::2][::-1]


@dataclass
class Row:
    chunk_id: int
    document_id: int
    base: float
    factor: float = 1.0
    boost: float = 1.0
    embedding: np.ndarray | None = None

    @property
    def score(self) -> float:
        return self.base * self.factor * self.boost


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return 0.0 if na == 0 or nb == 0 else float(a @ b / (na * nb))


def select(rows: list[Row], match_count: int, cap: int = 0, lam: float | None = None,
           threshold: float | None = None) -> tuple[list[Row], float]:
    """The selection, in order, and the smallest gap between the best and the second-best
    MMR objective over the steps (inf without MMR)."""
    pool = sorted(rows, key=lambda r: (-r.score, r.chunk_id))
    pool = [r for r in pool if threshold is None or r.base >= threshold]
    chosen: list[Row] = []
    per_doc: dict[int, int] = {}
    gap = math.inf
    if lam is None:
        skipped = []
        for r in pool:
            if len(chosen) == match_count:
                break
            if cap and per_doc.get(r.document_id, 0) >= cap:
                skipped.append(r)
                continue
            chosen.append(r)
            per_doc[r.document_id] = per_doc.get(r.document_id, 0) + 1
        for r in skipped:                      # backfill, in score order
            if len(chosen) == match_count:
                break
            chosen.append(r)
        return chosen, gap

    scores = [r.score for r in pool]
    lo, hi = (min(scores), max(scores)) if scores else (0, 0)
    rel = {r.chunk_id: (r.score - lo) / (hi - lo) if hi > lo else 1.0 for r in pool}
    maxsim: dict[int, float | None] = {r.chunk_id: None for r in pool}   # None: nothing chosen yet
    full: set[int] = set()
    left = list(pool)
    phase = 1
    while len(chosen) < match_count:
        eligible = [r for r in left if phase == 2 or not cap or r.document_id not in full]
        if not eligible:
            if phase == 2 or not cap:
                break
            phase = 2
            continue
        objective = [lam * rel[r.chunk_id] - (1 - lam) * (maxsim[r.chunk_id] or 0.0) for r in eligible]
        best = max(range(len(eligible)), key=lambda i: (objective[i], -pool.index(eligible[i])))
        others = [o for i, o in enumerate(objective) if i != best]
        if others:
            gap = min(gap, objective[best] - max(others))
        pick = eligible[best]
        chosen.append(pick)
        left.remove(pick)
        if phase == 1 and cap:
            per_doc[pick.document_id] = per_doc.get(pick.document_id, 0) + 1
            if per_doc[pick.document_id] >= cap:
                full.add(pick.document_id)
        for r in left:
            sim = cosine(r.embedding, pick.embedding)
            maxsim[r.chunk_id] = sim if maxsim[r.chunk_id] is None else max(maxsim[r.chunk_id], sim)
    return chosen, gap


def reference_finalize(rows: list[Row], match_count: int, *, cap: int = 0, lam: float | None = None,
                       threshold: float | None = None, litm: bool = False) -> tuple[list[int], float]:
    """Chunk ids in the order shown, and the MMR near-tie gap."""
    chosen, gap = select(rows, match_count, cap, lam, threshold)
    ids = [r.chunk_id for r in chosen]
    return (lost_in_the_middle(ids) if litm else ids), gap


# -- helpers ---------------------------------------------------------------------------------

def stored(db, collection: str) -> dict[int, tuple[int, np.ndarray]]:
    """chunk_id -> (document_id, embedding as stored)."""
    rows = db.execute("select k.chunk_id, k.document_id, k.embedding::text from sift.chunks k "
                      "join sift.collections c using (collection_id) where c.name = %s", (collection,))
    return {cid: (doc, np.array(json.loads(text))) for cid, doc, text in rows.fetchall()}


def finalize(db, collection, ids, scores, match_count, **knobs) -> list[int]:
    sql = ("select chunk_id from sift.finalize(collection => %(collection)s, chunk_ids => %(ids)s::bigint[], "
           "scores => %(scores)s::float8[], match_count => %(n)s, knobs => %(knobs)s)")
    rows = db.execute(sql, {"collection": collection, "ids": ids, "scores": scores, "n": match_count,
                            "knobs": Jsonb(knobs)})
    return [r[0] for r in rows.fetchall()]


@pytest.fixture
def pool_collection(client, db):
    """12 documents with 1-6 chunks each, random unit embeddings; a few exact duplicates."""
    rng = np.random.default_rng(11)
    client.create_collection("p", embedding_dims=DIMS)
    docs = []
    for d in range(12):
        vecs = [unit(rng.normal(size=DIMS)) for _ in range(int(rng.integers(1, 7)))]
        if d % 4 == 0:
            vecs.append(vecs[0])               # a near-duplicate chunk (same vector)
        docs.append(Document(source_uri=f"d{d}", chunks=[Chunk(content=f"text {d} {i}", embedding=v)
                                                          for i, v in enumerate(vecs)]))
    client.upsert_documents("p", docs)
    return stored(db, "p")


# -- recency formula -------------------------------------------------------------------------

def test_recency_factor_matches_the_reference(db):
    rng = np.random.default_rng(5)
    as_of = datetime(2025, 6, 1, 12, tzinfo=timezone.utc)
    cases = []
    for _ in range(300):
        half = timedelta(seconds=float(rng.choice([60, 3600, 86400, 30 * 86400, 365 * 86400])) *
                         float(rng.uniform(0.1, 10)))
        age = timedelta(seconds=float(rng.uniform(-1, 50)) * half.total_seconds())
        date = None if rng.random() < 0.1 else as_of - age
        cases.append((date, half, float(rng.uniform(0, 1))))
    cases.append((as_of - timedelta(days=365 * 500), timedelta(seconds=1), 0.7))   # 1e10 half-lives: bounded
    got = db.execute(
        "select sift.recency_factor(u.d, %s, u.h, u.w) from unnest(%s::timestamptz[], %s::interval[], "
        "%s::float8[]) with ordinality u(d, h, w, o) order by u.o",
        (as_of, [c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases])).fetchall()
    for (date, half, w), (factor,) in zip(cases, got, strict=True):
        want = recency_factor(date, as_of, half, w)
        assert factor == pytest.approx(want, rel=1e-9, abs=1e-12), (date, half, w)
        assert 1 - w - 1e-12 <= factor <= 1 + 1e-12        # the weight is a hard ceiling


def test_recency_factor_landmarks(db):
    as_of = datetime(2025, 1, 1, tzinfo=timezone.utc)
    half = timedelta(days=10)

    def factor(date, w=0.4):
        return db.execute("select sift.recency_factor(%s, %s, %s, %s)", (date, as_of, half, w)).fetchone()[0]

    assert factor(as_of) == 1                                  # brand new: untouched
    assert factor(as_of - half) == pytest.approx(1 - 0.4 / 2)  # at the half-life: half the weight
    assert factor(as_of - 2 * half) == pytest.approx(1 - 0.4 * 0.75)
    assert factor(as_of + half) == 1                           # the future counts as now
    assert factor(None) == pytest.approx(0.6)                  # no date: the full weight
    assert factor(datetime(1, 1, 1, tzinfo=timezone.utc)) == pytest.approx(0.6)
    assert factor(as_of - half, w=0) == 1


# -- cap with backfill -----------------------------------------------------------------------

def test_cap_with_backfill_matches_the_reference(db, pool_collection):
    rng = np.random.default_rng(7)
    all_ids = sorted(pool_collection)
    for trial in range(40):
        ids = [int(i) for i in rng.choice(all_ids, size=int(rng.integers(1, len(all_ids))), replace=False)]
        scores = rng.uniform(0, 1, size=len(ids)).round(int(rng.choice([2, 12]))).tolist()   # ties too
        cap, n = int(rng.integers(0, 4)), int(rng.integers(0, 25))
        rows = [Row(i, pool_collection[i][0], s) for i, s in zip(ids, scores)]
        want, _ = reference_finalize(rows, n, cap=cap)
        got = finalize(db, "p", ids, scores, n, per_document_cap=cap)
        assert got == want, (trial, cap, n)
        assert len(got) == min(n, len(ids))                    # the cap never reduces the count


# -- MMR -------------------------------------------------------------------------------------

def test_mmr_matches_a_greedy_reference(db, pool_collection):
    rng = np.random.default_rng(3)
    all_ids = sorted(pool_collection)
    compared = 0
    for trial in range(40):
        ids = [int(i) for i in rng.choice(all_ids, size=int(rng.integers(2, len(all_ids))), replace=False)]
        scores = rng.uniform(0, 1, size=len(ids)).tolist()
        lam = float(rng.choice([0.0, 0.25, 0.5, 0.7, 0.9, 1.0]))
        cap, n = int(rng.choice([0, 0, 1, 2])), int(rng.integers(1, 15))
        rows = [Row(i, pool_collection[i][0], s, embedding=pool_collection[i][1]) for i, s in zip(ids, scores)]
        want, gap = reference_finalize(rows, n, cap=cap, lam=lam)
        got = finalize(db, "p", ids, scores, n, per_document_cap=cap, mmr_lambda=lam)
        assert len(got) == len(want) == min(n, len(ids))
        if gap > NEAR_TIE:
            assert got == want, (trial, lam, cap, n)
            compared += 1
        else:
            assert set(got) <= set(ids)
    assert compared >= 30                                      # most pools had no near tie


def test_mmr_with_lambda_one_is_the_score_order(db, pool_collection):
    ids = sorted(pool_collection)[:20]
    scores = np.random.default_rng(1).uniform(size=len(ids)).tolist()
    assert finalize(db, "p", ids, scores, 10, mmr_lambda=1, per_document_cap=0) == \
        finalize(db, "p", ids, scores, 10, per_document_cap=0)


# -- lost in the middle ----------------------------------------------------------------------

def test_lost_in_the_middle_matches_the_reference(db, pool_collection):
    assert lost_in_the_middle([1, 2, 3, 4, 5, 6]) == [1, 3, 5, 6, 4, 2]
    assert lost_in_the_middle([1, 2, 3, 4, 5]) == [1, 3, 5, 4, 2]
    rng = np.random.default_rng(9)
    all_ids = sorted(pool_collection)
    for n in range(0, 16):
        ids = [int(i) for i in rng.permutation(all_ids)[:20]]
        plain = finalize(db, "p", ids, None, n, per_document_cap=0)
        shown = finalize(db, "p", ids, None, n, per_document_cap=0, lost_in_the_middle=True)
        assert shown == lost_in_the_middle(plain)
        assert sorted(shown) == sorted(plain)                  # only the order changes
        rows = db.execute("select rank, position from sift.finalize(collection => 'p', chunk_ids => %s, "
                          "match_count => %s, knobs => '{\"lost_in_the_middle\": true}')", (ids, n)).fetchall()
        assert [r[1] for r in rows] == list(range(1, len(rows) + 1))
        assert [r[0] for r in rows] == lost_in_the_middle(list(range(1, len(rows) + 1)))


# -- everything together, several collections ------------------------------------------------

def test_all_knobs_together_match_the_reference(client, db):
    """Two collections (boosts), dated documents (recency), threshold, cap, MMR, litm."""
    rng = np.random.default_rng(17)
    now = datetime.now(timezone.utc)
    truth: dict[int, tuple[int, np.ndarray, datetime | None, str]] = {}
    for name in ("a", "b"):
        client.create_collection(name, embedding_dims=DIMS, recency_field="published",
                                 recency_half_life=timedelta(days=20), recency_weight=0.3,
                                 recency_ceiling=0.8)
        docs = []
        for d in range(8):
            date = None if d % 5 == 4 else now - timedelta(days=float(rng.uniform(0, 120)))
            meta = {"published": date.isoformat()} if date else {"other": "x"}
            docs.append(Document(source_uri=f"{name}{d}", metadata=meta, chunks=[
                Chunk(content=f"{name} {d} {i}", embedding=unit(rng.normal(size=DIMS)))
                for i in range(int(rng.integers(1, 5)))]))
        client.upsert_documents(name, docs)
        for cid, (doc, emb) in stored(db, name).items():
            _uri, meta = db.execute("select source_uri, metadata from sift.documents where document_id = %s",
                                   (doc,)).fetchone()
            date = datetime.fromisoformat(meta["published"]) if "published" in meta else None
            truth[cid] = (doc, emb, date, name)

    compared = 0
    all_ids = sorted(truth)
    for trial in range(25):
        ids = [int(i) for i in rng.choice(all_ids, size=int(rng.integers(5, len(all_ids))), replace=False)]
        scores = rng.uniform(0, 1, size=len(ids)).tolist()
        boosts = [float(rng.choice([0.5, 1, 2])), float(rng.choice([0.5, 1, 2]))]
        bias = float(rng.choice([0, 0.5, 1]))
        threshold = float(rng.choice([0.0, 0.2, 0.5]))
        cap = int(rng.choice([0, 1, 2]))
        lam = [None, 0.5, 0.8][trial % 3]
        litm = bool(trial % 2)
        n = int(rng.integers(1, 12))
        with db.transaction():
            as_of = db.execute("select now()").fetchone()[0]
            # A knob's value may be an object naming a value per collection (here: the boost).
            knobs = {"boost": {"a": boosts[0], "b": boosts[1]}, "recency_bias": bias,
                     "score_threshold": threshold, "per_document_cap": cap, "mmr_lambda": lam,
                     "lost_in_the_middle": litm}
            got = db.execute(
                "select chunk_id, recency_factor, boost, score from sift.finalize("
                "collections => array['a', 'b'], chunk_ids => %s::bigint[], scores => %s::float8[], "
                "match_count => %s, knobs => %s)", (ids, scores, n, Jsonb(knobs))).fetchall()
        weight = 0.3 + bias * (0.8 - 0.3)
        rows = []
        for i, s in zip(ids, scores):
            doc, emb, date, name = truth[i]
            rows.append(Row(i, doc, s, recency_factor(date, as_of, timedelta(days=20), weight),
                            boosts[0 if name == "a" else 1], emb))
        by_id = {r.chunk_id: r for r in rows}
        for chunk_id, factor, boost, score in got:
            assert factor == pytest.approx(by_id[chunk_id].factor, rel=1e-9)
            assert boost == by_id[chunk_id].boost
            assert score == pytest.approx(by_id[chunk_id].score, rel=1e-9)
        want, gap = reference_finalize(rows, n, cap=cap, lam=lam, threshold=threshold, litm=litm)
        if gap > NEAR_TIE:
            assert [r[0] for r in got] == want, trial
            compared += 1
    assert compared >= 18
