"""Weighted RRF in SQL (sift.rrf) against an independent Python oracle."""

from __future__ import annotations

import numpy as np
from conftest import random_documents
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

RRF_SQL = """
select chunk_id, dense_rank, lexical_rank, score, fused_rank
from sift.rrf(dense_ids => %s::bigint[], lexical_ids => %s::bigint[],
              dense_weight => %s::float8, rrf_k => %s::float8)
order by fused_rank
"""


def rrf_oracle(dense: list[int] | None, lexical: list[int] | None, w: float, k: float) -> list[tuple]:
    """(id, dense_rank, lexical_rank, score, fused_rank), best first; ties by id."""
    dense_rank = {cid: r for r, cid in enumerate(dense or [], start=1)}
    lexical_rank = {cid: r for r, cid in enumerate(lexical or [], start=1)}
    rows = []
    for cid in set(dense_rank) | set(lexical_rank):
        dr, lr = dense_rank.get(cid), lexical_rank.get(cid)
        score = (w / (k + dr) if dr else 0.0) + ((1 - w) / (k + lr) if lr else 0.0)
        rows.append((cid, dr, lr, score))
    rows.sort(key=lambda r: (-r[3], r[0]))
    return [(*row, fused) for fused, row in enumerate(rows, start=1)]


def sql_rrf(db, dense, lexical, w, k) -> list[tuple]:
    return db.execute(RRF_SQL, (dense, lexical, w, k)).fetchall()


def assert_same_fusion(got: list[tuple], want: list[tuple]) -> None:
    assert [r[0] for r in got] == [r[0] for r in want]            # fused order
    assert [r[1:3] for r in got] == [r[1:3] for r in want]        # each leg's rank
    assert [r[4] for r in got] == list(range(1, len(want) + 1))   # fused ranks 1..n
    for g, w in zip(got, want):
        assert abs(g[3] - w[3]) <= 1e-12


ids = st.integers(min_value=1, max_value=40) | st.integers(min_value=1, max_value=2**63 - 1)
rank_list = st.none() | st.lists(ids, unique=True, max_size=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dense=rank_list, lexical=rank_list,
       w=st.floats(min_value=0, max_value=1, allow_subnormal=False),
       k=st.floats(min_value=0, max_value=200, exclude_min=True))
@example(dense=[1, 2, 3], lexical=[3, 2, 1], w=0.5, k=60.0)      # full overlap, exact ties
@example(dense=[1, 2, 3], lexical=[4, 5, 6], w=0.7, k=60.0)      # disjoint
@example(dense=[5, 4], lexical=[], w=0.7, k=60.0)                # one empty
@example(dense=None, lexical=[9, 8, 7], w=0.7, k=60.0)           # one NULL
@example(dense=None, lexical=None, w=0.7, k=60.0)                # nothing at all
@example(dense=[2, 1], lexical=[1, 2], w=0.5, k=1.0)             # symmetric tie -> id order
def test_rrf_matches_python_oracle(db, dense, lexical, w, k):
    assert_same_fusion(sql_rrf(db, dense, lexical, w, k), rrf_oracle(dense, lexical, w, k))


def test_rrf_weights_at_the_ends(db):
    dense, lexical = [10, 20, 30], [30, 40]
    # w = 1: lexical contributes nothing, lexical-only ids score 0 and trail by id.
    assert [r[0] for r in sql_rrf(db, dense, lexical, 1.0, 60.0)] == [10, 20, 30, 40]
    # w = 0: dense contributes nothing.
    assert [r[0] for r in sql_rrf(db, dense, lexical, 0.0, 60.0)] == [30, 40, 10, 20]


def test_rrf_tiny_positive_weight_does_not_raise(db):
    # 5e-324 is a legal sift.dense_weight (domain [0, 1]); the fusion must not
    # fail with "value out of range: underflow" on it.
    got = sql_rrf(db, [1, 2], [2, 3], 5e-324, 60.0)
    assert [r[0] for r in got] == [2, 3, 1]
    assert got[2][3] == 0.0 or got[2][3] < 1e-300


def test_documented_trap_lexical_only_never_beats_dense_rank_40(db):
    """w = 0.7, k = 60: the best lexical-only hit (0.3/61) ranks below dense rank 40 (0.7/100)."""
    dense = list(range(1, 101))      # dense ranks 1..100
    lexical_only = 1000              # lexical rank 1, absent from the dense list
    got = sql_rrf(db, dense, [lexical_only], 0.7, 60.0)
    assert_same_fusion(got, rrf_oracle(dense, [lexical_only], 0.7, 60.0))
    fused = {r[0]: r[4] for r in got}
    assert fused[lexical_only] > fused[40]
    assert all(fused[lexical_only] > fused[d] for d in range(1, 41))
    # The knob is the way out: lower w and the same hit overtakes dense rank 40.
    fused = {r[0]: r[4] for r in sql_rrf(db, dense, [lexical_only], 0.5, 60.0)}
    assert fused[lexical_only] < fused[40]


def test_search_scores_recompute_from_reported_ranks(client):
    dims = 8
    col = client.create_collection("fusion", embedding_dims=dims, dense_weight=0.6, rrf_k=20, fetch_k=15)
    rng = np.random.default_rng(7)
    client.upsert_documents("fusion", random_documents(rng, 30, dims))
    result = client.search("fusion", "alpha bravo hotel", embedding=rng.normal(size=dims), top_k=12)

    assert len(result) == 12
    assert result.legs == ["dense", "lexical"]
    assert any(h.found_by == "both" for h in result)
    w, k = col.settings["dense_weight"], col.settings["rrf_k"]
    for hit in result:
        want = (w / (k + hit.dense_rank) if hit.dense_rank else 0.0) + \
               ((1 - w) / (k + hit.lexical_rank) if hit.lexical_rank else 0.0)
        assert abs(hit.score - want) <= 1e-12
    assert [h.rank for h in result] == list(range(1, 13))
    order = sorted(result, key=lambda h: (-h.score, h.chunk_id))
    assert [h.chunk_id for h in result] == [h.chunk_id for h in order]
