"""Fusion of N legs (sql/40_fusion.sql, sift._fuse): the main dense leg, the lexical leg and
one dense leg per added vector space's query vector, combined by rrf, dbsf or convex.

The oracles are plain Python: each dense leg is an exact nearest-neighbour list computed with
numpy from the vectors written (the collection is under exact_search_limit, so the database's
leg is exact too), the lexical leg is sift.candidates' own lexical list, and the three fusion
formulas are written out below.
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Client, DimensionMismatch, Document, InvalidArgument, SpaceNotFound
from pgsift.bench.legs import normalised

DIMS, ALT = 8, 5
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
N = 40   # each leg's depth: max(fetch_k, top_k)


@pytest.fixture
def kb(db):
    """30 documents x 3 chunks with a vector in the built-in space and one in "alt"."""
    rng = np.random.default_rng(3)
    client = Client(db)
    client.create_collection("kb", embedding_dims=DIMS)
    main = {}
    docs = []
    for i in range(30):
        chunks = []
        for _ in range(3):
            v = unit(rng.normal(size=DIMS))
            chunks.append(Chunk(content=" ".join(rng.choice(WORDS, size=6)), embedding=v))
        docs.append(Document(source_uri=f"doc-{i}", chunks=chunks))
    client.upsert_documents("kb", docs)
    ids = [r[0] for r in db.execute("select chunk_id from sift.chunks order by chunk_id").fetchall()]
    for cid, chunk in zip(ids, [c for d in docs for c in d.chunks], strict=True):
        main[cid] = chunk.embedding
    client.add_vector_space("kb", "alt", dimensions=ALT)
    alt = {cid: unit(rng.normal(size=ALT)) for cid in ids}
    client.write_space_vectors("kb", "alt", ids, [alt[c] for c in ids])
    client.vectors = {"dense": main, "alt": alt}   # type: ignore[attr-defined]
    return client


def nearest(vectors: dict[int, np.ndarray], query: np.ndarray, n: int = N) -> list[tuple[int, float]]:
    """(chunk_id, cosine distance), nearest first, ties by id: the exact dense leg."""
    q = query / np.linalg.norm(query)
    dist = {c: float(1 - np.dot(v / np.linalg.norm(v), q)) for c, v in vectors.items()}
    return sorted(dist.items(), key=lambda x: (x[1], x[0]))[:n]


def fuse(legs: dict[str, list[tuple[int, float]]], weights: dict[str, float], higher: dict[str, bool],
         method: str, k: float) -> dict[int, float]:
    """The three fusion formulas (pgsift.bench.legs.normalised, the benchmark's reference),
    summed with the legs' weights: every leg's entries in its rank order."""
    oriented = {name: [(cid, raw if higher[name] else -raw) for cid, raw in entries]
                for name, entries in legs.items()}
    total: dict[int, float] = {}
    for name, entries in normalised(oriented, method, k).items():
        for cid, norm in entries:
            total[cid] = total.get(cid, 0.0) + weights[name] * norm
    return total


@pytest.mark.parametrize("method", ["rrf", "dbsf", "convex"])
def test_n_legs_fuse_as_the_python_oracle(kb, method, figure):
    rng = np.random.default_rng({"rrf": 1, "dbsf": 2, "convex": 3}[method])
    checked = 0
    for _ in range(10):
        q_main, q_alt = unit(rng.normal(size=DIMS)), unit(rng.normal(size=ALT))
        text = " ".join(rng.choice(WORDS, size=2))
        w, w_alt = float(rng.uniform(0.1, 0.9)), float(rng.uniform(0, 2))
        lexical = [(c.chunk_id, c.lexical_score) for c in kb.candidates("kb", text, top_k=N)]
        legs = {"dense": nearest(kb.vectors["dense"], q_main), "lexical": lexical,
                "alt": nearest(kb.vectors["alt"], q_alt)}
        want = fuse(legs, {"dense": w, "lexical": 1 - w, "alt": w_alt},
                    {"dense": False, "lexical": True, "alt": False}, method, 3.0)
        got = kb.candidates("kb", text, embedding=q_main, top_k=10, space_embeddings={"alt": q_alt},
                            space_weights={"alt": w_alt}, fusion=method, dense_weight=w)
        assert len(got) == len(want)
        for c in got:
            assert c.score == pytest.approx(want[c.chunk_id], abs=1e-6), (method, c.chunk_id)
            assert set(c.leg_details) <= {"dense", "lexical", "alt"}
            assert sum(d["contribution"] for d in c.leg_details.values()) == pytest.approx(c.score, abs=1e-9)
            assert c.found_by == ("both" if "lexical" in c.leg_details and len(c.leg_details) > 1
                                  else "lexical" if "lexical" in c.leg_details else "dense")
        order = sorted(want, key=lambda cid: (-want[cid], cid))
        got_order = [c.chunk_id for c in got]
        for a, b in zip(got_order, order, strict=True):
            if a != b:   # a near tie between the two scores only
                assert abs(want[a] - want[b]) < 1e-9
        assert got[0].legs == ["dense", "lexical", "alt"]
        checked += len(got)
    figure(f"candidates fused by {method} over 3 legs, checked against Python", checked)


def test_search_and_explain_say_what_each_leg_gave(kb):
    rng = np.random.default_rng(8)
    q_main, q_alt = unit(rng.normal(size=DIMS)), unit(rng.normal(size=ALT))
    args = {"embedding": q_main, "space_embeddings": {"alt": q_alt}, "fusion": "dbsf", "per_document_cap": None}
    hits = kb.search("kb", "alpha", top_k=5, **args)
    rows = kb.explain("kb", "alpha", top_k=5, **args)
    kept = sorted((r for r in rows if r.kept), key=lambda r: r.final_rank)
    assert [r.chunk_id for r in kept] == [h.chunk_id for h in hits]
    for h in hits:
        assert h.leg_details and sum(d["contribution"] for d in h.leg_details.values()) == \
            pytest.approx(h.base_score)
        if "alt" in h.leg_details:
            assert h.leg_details["alt"]["weight"] == pytest.approx(0.5)   # dense_weight by default
    for r in rows:
        assert sum(d["contribution"] for d in r.leg_details.values()) == pytest.approx(r.base_score)


def test_two_legs_keep_their_order_and_say_what_each_gave(kb, db):
    """Without added spaces and with rrf, the pool is what it was (sift.rrf), now explained."""
    q = unit(np.random.default_rng(5).normal(size=DIMS))
    pool = kb.candidates("kb", "alpha echo", embedding=q, top_k=10)
    for c in pool:
        contributions = {leg: d["contribution"] for leg, d in c.leg_details.items()}
        assert sum(contributions.values()) == pytest.approx(c.score)
        assert ("dense" in contributions) == (c.dense_rank is not None)
        assert ("lexical" in contributions) == (c.lexical_rank is not None)
    # sift._fuse (the N-leg path) gives two legs exactly what sift.rrf gives them.
    dense = [c.chunk_id for c in sorted((c for c in pool if c.dense_rank), key=lambda c: c.dense_rank)]
    lexical = [c.chunk_id for c in sorted((c for c in pool if c.lexical_rank), key=lambda c: c.lexical_rank)]
    for w in (0.0, 0.3, 0.5, 1.0):
        rrf = db.execute("select chunk_id, score from sift.rrf(%s, %s, %s, 3)", [dense, lexical, w]).fetchall()
        fused = db.execute(
            "select chunk_id, score from sift._fuse(array['dense', 'lexical'], %s, %s, %s, %s, array[false, true], "
            "'rrf', 3)", [[w, 1 - w], [1] * len(dense) + [2] * len(lexical), dense + lexical,
                         [0.0] * (len(dense) + len(lexical))]).fetchall()
        assert [r[0] for r in fused] == [r[0] for r in rrf]
        assert [r[1] for r in fused] == pytest.approx([r[1] for r in rrf], abs=1e-15)
    # An added space alone (no main query vector) is a dense leg of its own.
    alt_only = kb.candidates("kb", "", space_embeddings={"alt": unit(np.random.default_rng(6).normal(size=ALT))})
    assert alt_only and all(set(c.leg_details) == {"alt"} for c in alt_only)


@pytest.mark.parametrize("distance", ["inner_product", "l2"])
def test_other_distances_and_partial_weights_fuse_as_the_oracle(kb, db, distance):
    """Two more spaces of another distance, a weight for one of them only (the other takes
    dense_weight), every fusion: a distance where smaller is better, whatever its sign."""
    rng = np.random.default_rng(11)
    ids = sorted(kb.vectors["dense"])
    kb.add_vector_space("kb", "other", dimensions=ALT, distance=distance)
    other = {cid: rng.normal(size=ALT) for cid in ids}
    kb.write_space_vectors("kb", "other", ids, [other[c] for c in ids])

    def raw(v: np.ndarray, q: np.ndarray) -> float:
        return float(-np.dot(v, q)) if distance == "inner_product" else float(np.linalg.norm(v - q))

    for method in ("rrf", "dbsf", "convex"):
        q_main, q_alt, q_other = unit(rng.normal(size=DIMS)), unit(rng.normal(size=ALT)), rng.normal(size=ALT)
        legs = {"dense": nearest(kb.vectors["dense"], q_main), "alt": nearest(kb.vectors["alt"], q_alt),
                "other": sorted(((c, raw(v, q_other)) for c, v in other.items()), key=lambda x: (x[1], x[0]))[:N]}
        # No lexical leg ran: the main dense leg takes its weight (1); "other" has none given: dense_weight.
        want = fuse(legs, {"dense": 1.0, "alt": 0.7, "other": 0.9}, dict.fromkeys(legs, False), method, 3.0)
        got = kb.candidates("kb", "", embedding=q_main, space_embeddings={"alt": q_alt, "other": q_other},
                            space_weights={"alt": 0.7}, fusion=method, dense_weight=0.9)
        assert {c.chunk_id: c.score for c in got} == pytest.approx(want, abs=1e-6)
        assert all(c.leg_details.get("other", {}).get("weight", 0.9) == 0.9 for c in got)


def test_a_leg_that_did_not_run_leaves_the_other_its_order(kb):
    """dbsf and convex weigh the legs as two-leg fusion does: a leg that did not run gives its
    weight to the one that did, so dense alone keeps the dense order."""
    q = unit(np.random.default_rng(2).normal(size=DIMS))
    want = [c for c, _ in nearest(kb.vectors["dense"], q)]
    for method in ("dbsf", "convex"):
        got = kb.candidates("kb", "alpha", embedding=q, hybrid=False, dense_weight=0.0, fusion=method)
        assert [c.chunk_id for c in got] == want
        assert got[0].leg_details["dense"]["weight"] == 1.0


def test_bad_space_arguments_are_typed(kb, db):
    q = unit(np.random.default_rng(1).normal(size=DIMS))
    alt = np.ones(ALT)
    with pytest.raises(SpaceNotFound):
        kb.search("kb", "alpha", embedding=q, space_embeddings={"nope": alt})
    with pytest.raises(DimensionMismatch, match='space "alt"'):
        kb.search("kb", "alpha", embedding=q, space_embeddings={"alt": np.ones(3)})
    with pytest.raises(InvalidArgument, match="space_weights names"):
        kb.search("kb", "alpha", embedding=q, space_embeddings={"alt": alt}, space_weights={"other": 1})
    with pytest.raises(InvalidArgument, match="between 0 and 1,000"):
        kb.search("kb", "alpha", embedding=q, space_embeddings={"alt": alt}, space_weights={"alt": -1})
    with pytest.raises(InvalidArgument, match="contains NaN"):
        kb.search("kb", "alpha", embedding=q, space_embeddings={"alt": [np.nan] * ALT})
    with pytest.raises(InvalidArgument):
        kb.search("kb", "alpha", embedding=q, space_embeddings={})
    vec = "[" + ",".join(["0.5"] * ALT) + "]"
    main = "[" + ",".join(["0.5"] * DIMS) + "]"
    cases = [
        ("select * from sift.search('kb', 'alpha', spaces => array['alt'], space_embeddings => %s::vector[])",
         [[vec, vec]], "SF003"),
        ("select * from sift.search('kb', 'alpha', spaces => array['alt', 'alt'], space_embeddings => %s::vector[])",
         [[vec, vec]], "SF003"),
        ("select * from sift.search('kb', 'alpha', %s::vector, spaces => array['default'], "
         "space_embeddings => %s::vector[])", [main, [main]], "SF003"),
        ("select * from sift.search('kb', 'alpha', spaces => array['alt'], space_embeddings => %s::vector[], "
         "space_weights => array[2000])", [[vec]], "SF003"),
        ("select * from sift.search('kb', 'alpha', knobs => '{\"fusion\": \"borda\"}')", None, "23514"),
        ("select * from sift.search('kb', 'alpha', spaces => array['a','b','c','d','e','f','g','h','i'], "
         "space_embeddings => %s::vector[])", [[vec] * 9], "SF003"),
    ]
    for sql, params, state in cases:
        with pytest.raises(psycopg.Error) as err:
            db.execute(sql, params)
        assert err.value.sqlstate == state, (sql, err.value)
    with pytest.raises(InvalidArgument, match="search_page does not take space_embeddings"):
        kb.search_page("kb", "alpha", embedding=q, space_embeddings={"alt": alt})
    kb.add_vector_space("kb", "lexical", dimensions=ALT)
    with pytest.raises(psycopg.Error) as err:
        db.execute("select * from sift.search('kb', 'alpha', spaces => array['lexical'], "
                   "space_embeddings => %s::vector[])", [[vec]])
    assert err.value.sqlstate == "SF003"
    # Several collections: each must have the space.
    kb.create_collection("other", embedding_dims=DIMS)
    kb.upsert_documents("other", [Document(source_uri="x", chunks=[Chunk(content="alpha", embedding=q)])])
    with pytest.raises(SpaceNotFound):
        kb.search(["kb", "other"], "alpha", embedding=q, space_embeddings={"alt": alt})
    kb.add_vector_space("other", "alt", dimensions=ALT)
    kb.alter_collection("other", fusion="convex")
    with pytest.raises(InvalidArgument, match="fuse differently"):
        kb.search(["kb", "other"], "alpha", embedding=q, space_embeddings={"alt": alt})
    both = kb.search(["kb", "other"], "alpha", embedding=q, space_embeddings={"alt": alt}, fusion="dbsf")
    assert {h.collection_name for h in both} <= {"kb", "other"} and len(both) == 10
