"""Evaluation: the metric core against hand-computed values and pgsift.metrics, runs
against an independent oracle (search called directly, scored by pgsift.metrics),
stored history and deltas, sweeps and their plot, and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import psycopg
import pytest
from pgsift import Client, InvalidArgument, InvalidKnob, metrics
from pgsift.cli import main
from pgsift.evaluation import (
    Sweep,
    check_values,
    evaluate,
    history,
    parse_values,
    plot_sweep,
    score,
    sweep,
    sweepable_knobs,
)
from pgsift.golden import Positive, Question, import_golden_set, read_jsonl, rebind
from test_golden import CORPUS, DIMS, build_kb, corpus_documents, e, kb_questions, write_questions

# -- the metric core ----------------------------------------------------------------


def test_score_hand_computed():
    # Ranking [a, b, c, d]; relevant b (1), c (2), z (1, never retrieved). At k = 3:
    #   hit = 1; MRR = 1/2 (b at rank 2); P = 2/3; R = 2/3
    #   DCG  = 0 + 1/log2(3) + 2/log2(4)            = 0.63093 + 1       = 1.63093
    #   IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4)    = 2 + 0.63093 + 0.5 = 3.13093
    #   nDCG = 1.63093 / 3.13093 = 0.52091
    s = score({"q": ["a", "b", "c", "d"]}, {"q": {"b": 1, "c": 2, "z": 1}}, 3)
    assert s.n_queries == 1
    assert s.mean == pytest.approx({"hit_rate": 1.0, "mrr": 0.5, "ndcg": 0.520909, "precision": 2 / 3,
                                    "recall": 2 / 3}, abs=1e-6)
    # k = 1: only "a", nothing relevant
    assert score({"q": ["a", "b"]}, {"q": {"b": 1}}, 1).mean == dict.fromkeys(
        ("hit_rate", "mrr", "ndcg", "precision", "recall"), 0.0)
    # Repeated ids count once, at their first rank, and free the slot: [b, b, c] is [b, c].
    s = score({"q": ["b", "b", "c"]}, {"q": {"b": 2, "c": 1}}, 2)
    assert s.mean["ndcg"] == pytest.approx(1.0) and s.mean["precision"] == pytest.approx(1.0)
    # Precision divides by k even when fewer results came back.
    assert score({"q": ["b"]}, {"q": {"b": 1}}, 4).mean["precision"] == pytest.approx(0.25)


def test_score_who_counts():
    # q2 has only a 0 judgment: left out of the mean (BEIR); q3 is judged but retrieved
    # nothing (absent from the rankings): it counts, with 0.
    s = score({"q1": ["a"], "q2": ["x"]}, {"q1": {"a": 1}, "q2": {"x": 0}, "q3": {"c": 1}}, 10)
    assert set(s.per_query) == {"q1", "q3"}
    assert s.per_query["q3"] == dict.fromkeys(s.per_query["q3"], 0.0)
    assert s.mean["hit_rate"] == pytest.approx(0.5) and s.mean["mrr"] == pytest.approx(0.5)
    assert score({"q": ["a"]}, {"q": {"a": 0}}, 10).mean["ndcg"] is None
    with pytest.raises(InvalidArgument):
        score({}, {}, 0)


def test_score_agrees_with_pgsift_metrics_on_random_rankings():
    rng = np.random.default_rng(11)
    for _ in range(200):
        pool = [f"d{i}" for i in range(15)]
        ranked = list(rng.choice(pool, size=int(rng.integers(0, 12)), replace=True))   # repeats too
        judged = {d: int(rng.integers(0, 4)) for d in rng.choice(pool, size=int(rng.integers(1, 6)),
                                                                  replace=False)}
        k = int(rng.integers(1, 11))
        s = score({"q": ranked}, {"q": judged}, k)
        if not metrics.relevant(judged):
            assert s.n_queries == 0
            continue
        deduped = metrics.dedupe(ranked)[:k]
        expected = {
            "hit_rate": metrics.hit_rate(ranked, judged, k),
            "mrr": metrics.mrr(ranked, judged, k),
            "ndcg": metrics.ndcg_at_k(ranked, judged, k),
            "recall": metrics.recall_at_k(ranked, judged, k),
            "precision": sum(1 for d in deduped if judged.get(d, 0) > 0) / k,
        }
        assert s.mean == pytest.approx(expected, abs=1e-9), (ranked, judged, k)


# -- evaluate against an oracle ---------------------------------------------------------

K = 3


@pytest.fixture
def kb(client, db, tmp_path) -> dict:
    ids = build_kb(client, db)
    import_golden_set(client, "kb", "gold", read_jsonl(write_questions(tmp_path / "g.jsonl", kb_questions(ids)))[1])
    return ids


def expected_qrels(ids: dict) -> dict:
    return {"refund-time": {ids[("refunds.md", 0)]: 1}, "approval": {ids[("refunds.md", 1)]: 2},
            "returns": {ids[("shipping.md", 0)]: 1, ids[("shipping.md", 1)]: 1},
            "leave": {ids[("holidays.md", 0)]: 1}}


def token_counts(ids: dict) -> dict:
    return {ids[(uri, i)]: tokens for uri, (_t, chunks) in CORPUS.items() for i, (_c, tokens) in enumerate(chunks)}


def oracle(db, ids: dict, mode: str, knobs: dict | None = None) -> dict:
    """Each question searched directly with a plain client, scored with pgsift.metrics."""
    plain = Client(db)
    qrels, tokens = expected_qrels(ids), token_counts(ids)
    per_q, costs, results, legs, shoe_results = {}, [], [], {}, None
    for line in kb_questions(ids):
        kwargs = dict(knobs or {})
        if mode == "dense":
            kwargs["hybrid"] = False
        vec = None if mode == "lexical" else line["embedding"]
        hits = plain.search("kb", line["question"], embedding=vec, top_k=K, **kwargs)
        ranked = [h.chunk_id for h in hits]
        costs.append(sum(tokens[c] for c in ranked))
        results.append(len(ranked))
        for leg in hits.legs:
            legs[leg] = legs.get(leg, 0) + 1
        if line["id"] == "shoe":
            shoe_results = len(ranked)
        if line["id"] in qrels:
            judged = qrels[line["id"]]
            per_q[line["id"]] = {
                "hit_rate": metrics.hit_rate(ranked, judged, K), "mrr": metrics.mrr(ranked, judged, K),
                "ndcg": metrics.ndcg_at_k(ranked, judged, K), "recall": metrics.recall_at_k(ranked, judged, K),
                "precision": sum(1 for c in ranked if c in judged) / K}
    mean = {m: float(np.mean([s[m] for s in per_q.values()])) for m in next(iter(per_q.values()))}
    return {"per_q": per_q, "mean": mean, "mean_tokens": float(np.mean(costs)),
            "mean_results": float(np.mean(results)), "legs": legs,
            "declined": 1.0 if shoe_results == 0 else 0.0}


@pytest.mark.parametrize("mode", ["pipeline", "dense", "lexical"])
def test_evaluate_matches_an_independent_oracle(client, db, kb, mode):
    run = evaluate(client, "kb", top_k=K, mode=mode, store=False)
    want = oracle(db, kb, mode)
    assert {m: run.metrics[m] for m in want["mean"]} == pytest.approx(want["mean"], abs=1e-9)
    got = {r.key: r.scores for r in run.questions if r.answerable}
    assert set(got) == set(want["per_q"])
    for key, scores in want["per_q"].items():
        assert got[key] == pytest.approx(scores, abs=1e-9), key
    assert run.metrics["mean_tokens"] == pytest.approx(want["mean_tokens"])
    assert run.metrics["mean_results"] == pytest.approx(want["mean_results"])
    # the question without an answer is searched (it may cost tokens) but not scored
    [shoe] = [r for r in run.questions if r.key == "shoe"]
    assert shoe.scores is None
    assert run.metrics["unanswerable_declined"] == want["declined"]
    assert run.settings["questions"] == {"answerable": 4, "unanswerable": 1, "scored": 4, "unbound_positives": 0}
    assert run.settings["judged_at"] == "chunk" and run.run_id is None
    assert run.settings["legs"] == want["legs"]
    # facts the oracle also shows: no leg of the lexical mode can place the CEO's shoe size
    if mode == "lexical":
        assert shoe.chunk_ids == [] and run.metrics["unanswerable_declined"] == 1.0
        assert run.settings["legs"] == {"lexical": 4}
    else:
        assert len(shoe.chunk_ids) == K and run.metrics["unanswerable_declined"] == 0.0
        assert run.settings["legs"]["dense"] == 5


def test_dense_baseline_facts(client, kb):
    # Each vector is its positive's own embedding for refund-time and approval: rank 1.
    run = evaluate(client, "kb", top_k=K, mode="dense", store=False)
    scores = {r.key: r.scores for r in run.questions}
    assert scores["refund-time"]["ndcg"] == 1.0 and scores["approval"]["mrr"] == 1.0
    assert run.settings["effective"]["hybrid"] is False


def test_knob_overrides_reach_search(client, db, kb):
    run = evaluate(client, "kb", top_k=K, knobs={"dense_weight": 1.0}, store=False)
    dense = evaluate(client, "kb", top_k=K, mode="dense", store=False)
    # w = 1: lexical-only chunks score 0, so the top k is exactly the dense order
    assert [r.chunk_ids for r in run.questions] == [r.chunk_ids for r in dense.questions]
    assert run.settings["knobs"] == {"dense_weight": 1.0}
    assert run.settings["effective"]["dense_weight"] == 1.0
    col = client.get_collection("kb")
    assert run.settings["effective"]["rrf_k"] == col.settings["rrf_k"]     # not overridden
    # every knob in force: the collection's settings with the run's overrides, as the database says
    assert run.settings["effective"] == {**col.settings, "dense_weight": 1.0}
    # refused by the database before any search: nothing is stored
    with pytest.raises(InvalidKnob, match="dense_weight"):
        evaluate(client, "kb", top_k=K, knobs={"dense_weight": 2.0})
    with pytest.raises(InvalidKnob, match=r'unknown knob "dense_wieght".*did you mean "dense_weight"'):
        evaluate(client, "kb", knobs={"dense_wieght": 0.5})
    with pytest.raises(InvalidArgument, match="decides 'hybrid'"):
        evaluate(client, "kb", mode="dense", knobs={"hybrid": True})
    assert history(client, "kb") == []


def test_ranking_knobs_pass_through(client, db, kb):
    # per_document_cap (the finalize stage's knob) reaches search like any other override
    capped = evaluate(client, "kb", top_k=K, mode="dense", knobs={"per_document_cap": 1}, store=False)
    doc_of = {cid: uri for (uri, _i), cid in kb.items()}
    for r in capped.questions:
        assert len({doc_of[c] for c in r.chunk_ids}) == len(r.chunk_ids), r
    assert capped.settings["effective"]["per_document_cap"] == 1


def test_document_level_counts_a_document_once(client, db, kb):
    both_shipping = [0.0, 0.0, 1 / math.sqrt(2), 1 / math.sqrt(2)] + [0.0] * (DIMS - 4)
    q = Question("returns", "where do returns go", positives=[Positive(source_uri="shipping.md")],
                 embedding=both_shipping)
    for name, level in (("chunks", "chunk"), ("docs", "document")):
        import_golden_set(client, "kb", name, [q], judged_at=level)
    by_chunk = evaluate(client, "kb", golden_set="chunks", top_k=K, mode="dense", store=False)
    by_doc = evaluate(client, "kb", golden_set="docs", top_k=K, mode="dense", store=False)
    # both shipping chunks are ranks 1 and 2
    assert by_chunk.questions[0].chunk_ids[:2] == [kb[("shipping.md", 0)], kb[("shipping.md", 1)]]
    assert by_chunk.metrics["precision"] == pytest.approx(2 / 3) and by_chunk.metrics["recall"] == 1.0
    # one relevant document, found once: the second chunk neither earns nor uses a slot
    assert by_doc.questions[0].ranked[:2] == ["doc:shipping.md", "doc:shipping.md"]
    assert by_doc.metrics["precision"] == pytest.approx(1 / 3)
    assert by_doc.metrics["ndcg"] == 1.0 and by_doc.metrics["recall"] == 1.0


def test_runs_are_stored_with_history_and_delta(client, db, kb):
    first = evaluate(client, "kb", top_k=K)
    dense = evaluate(client, "kb", top_k=K, mode="dense")
    second = evaluate(client, "kb", top_k=K, knobs={"dense_weight": 0.0})
    other_k = evaluate(client, "kb", top_k=1)
    assert first.run_id < dense.run_id < second.run_id < other_k.run_id
    assert first.previous_run_id is None and first.delta is None
    assert dense.previous_run_id is None                  # another label: its own series
    assert second.previous_run_id == first.run_id
    assert second.delta == pytest.approx({m: second.metrics[m] - first.metrics[m]
                                          for m in ("hit_rate", "mrr", "ndcg", "precision", "recall",
                                                    "mean_tokens", "mean_results", "unanswerable_declined",
                                                    "coverage")})
    assert other_k.previous_run_id is None                # another k: its own series

    rows = history(client, "kb")
    assert [r.run_id for r in rows] == [first.run_id, dense.run_id, second.run_id, other_k.run_id]
    assert [r.label for r in rows] == ["pipeline", "dense", "pipeline", "pipeline"]
    assert rows[2].metrics == pytest.approx(second.metrics) and rows[2].settings["knobs"] == {"dense_weight": 0.0}
    assert rows[2].delta == pytest.approx(second.delta)
    assert [r.run_id for r in history(client, "kb", max_runs=2)] == [second.run_id, other_k.run_id]
    assert history(client, "kb", golden_set="nope") == []
    # another tenant's collection of the same name sees none of it
    acme = Client(db, tenant="acme")
    build_kb(acme, db)
    assert history(acme, "kb") == []
    with pytest.raises(psycopg.Error, match="max_runs"):
        db.execute("select * from sift.eval_history(collection => 'kb', max_runs => 0)")

    # re-importing the set keeps its history (the run's set link goes, its name stays)
    import_golden_set(client, "kb", "gold", [Question("x", "refunds", positives=[Positive(text="Refunds are")])],
                      replace=True)
    assert len(history(client, "kb", golden_set="gold")) == 4
    assert db.execute("select count(*) from sift.eval_runs where golden_set_id is null").fetchone()[0] == 4
    client.drop_collection("kb")
    assert db.execute("select count(*) from sift.eval_runs").fetchone()[0] == 0


def test_unbound_positives_count_as_never_found_until_rebind(client, db, kb):
    before = evaluate(client, "kb", top_k=K, store=False)
    client.upsert_documents("kb", corpus_documents())      # same texts, new chunk ids
    stale = evaluate(client, "kb", top_k=K, store=False)
    assert stale.settings["questions"]["unbound_positives"] == 5
    assert stale.metrics["hit_rate"] == 0.0 and stale.metrics["ndcg"] == 0.0
    assert rebind(client, "kb").unbound == []
    after = evaluate(client, "kb", top_k=K, store=False)
    assert after.settings["questions"]["unbound_positives"] == 0
    assert after.metrics == pytest.approx(before.metrics)


class FakeEmbedder:
    dims = DIMS
    name = "fake"

    def __init__(self):
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return np.array([e(7) for _ in texts], dtype=np.float32)


def test_query_vectors_stored_else_embedded(client, db, kb):
    import_golden_set(client, "kb", "bare", [Question("a", "how many days until refunds are paid",
                                                      positives=[Positive(text="paid within 14 days")])])
    with pytest.raises(InvalidArgument, match="dense baseline needs a query vector"):
        evaluate(client, "kb", golden_set="bare", mode="dense", store=False)
    lexical_only = evaluate(client, "kb", golden_set="bare", store=False)
    assert lexical_only.settings["legs"] == {"lexical": 1}
    assert lexical_only.settings["embeddings"].startswith("none")

    fake = FakeEmbedder()
    embedded = Client(db, embedder=fake)
    run = evaluate(embedded, "kb", golden_set="bare", store=False)
    assert fake.calls == [["how many days until refunds are paid"]]       # one batch
    assert run.settings["legs"] == {"dense": 1, "lexical": 1} and run.settings["embeddings"] == "embedder fake"
    # stored vectors win unless reembed
    fake.calls.clear()
    evaluate(embedded, "kb", golden_set="gold", store=False)
    assert fake.calls == []
    evaluate(embedded, "kb", golden_set="gold", store=False, reembed=True)
    assert len(fake.calls[0]) == 5


# -- sweeps ----------------------------------------------------------------------------

def test_parse_values():
    assert parse_values("0,0.1,...,1") == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert parse_values("20, 40, 80", int) == [20, 40, 80]
    assert parse_values("10,20,...,50", int) == [10, 20, 30, 40, 50]
    assert parse_values("0:1:0.25") == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert parse_values("1,0.5,...,0") == [1.0, 0.5, 0.0]
    for bad, kind in (("0,0.5,...", float), ("a,b", float), ("0.5,1.5", int), ("1,1", float),
                      ("0,0,...,1", float), ("", float)):
        with pytest.raises(InvalidArgument):
            parse_values(bad, kind)


def test_sweep_stores_each_value_and_plots(client, db, kb, tmp_path):
    result = sweep(client, "kb", "dense_weight", [0.0, 0.5, 1.0], top_k=K, baselines=["dense"])
    assert isinstance(result, Sweep)
    assert [r.label for r in result.runs] == ["sweep dense_weight=0", "sweep dense_weight=0.5",
                                              "sweep dense_weight=1"]
    assert [r.settings["effective"]["dense_weight"] for r in result.runs] == [0.0, 0.5, 1.0]
    assert [b.mode for b in result.baselines] == ["dense"]
    # at w = 1 the pipeline ranks exactly as dense alone
    assert result.runs[2].metrics == pytest.approx(result.baselines[0].metrics)
    best_value, best_run = result.best
    ndcgs = [r.metrics["ndcg"] for r in result.runs]
    assert best_run.metrics["ndcg"] == max(ndcgs) and best_value == [0.0, 0.5, 1.0][ndcgs.index(max(ndcgs))]
    assert len(history(client, "kb")) == 4
    # the plot's title names the other knobs of the swept knob's stage, as the runs had them
    same_stage = {name for (name,) in db.execute(
        "select d.name from sift.knob_defs d join sift.knob_defs w on w.name = 'dense_weight' "
        "where d.stage = w.stage and d.name <> w.name and d.scope <> 'collection'")}
    assert set(result.fixed) == same_stage
    assert result.fixed == {name: result.runs[0].settings["effective"][name] for name in same_stage}

    path = plot_sweep(result, tmp_path / "sweep.png")
    from matplotlib.image import imread

    image = imread(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.shape[0] == 5 * 120 and image.shape[1] == 8 * 120     # figsize × dpi
    assert image[..., :3].std() > 0.05                                    # something was drawn

    # sweeping a rank-free knob: every value gives the same answer
    flat = sweep(client, "kb", "fetch_k", [10, 20], top_k=K, store=False)
    assert flat.runs[0].metrics == flat.runs[1].metrics and flat.best[0] == 10   # first on a tie


def test_sweepable_knobs_come_from_the_database(client, db):
    # Oracle: the catalog itself, numeric domains (pg_type's category N) a call may set.
    want = dict(db.execute("""
        select d.name, case when b.typname in ('int2', 'int4', 'int8') then 'int' else 'float' end
        from sift.knob_defs d
        join pg_type t on t.oid = d.type
        join pg_type b on b.oid = case when t.typbasetype <> 0 then t.typbasetype else t.oid end
        where b.typcategory = 'N' and d.scope <> 'collection'""").fetchall())
    got = sweepable_knobs(client)
    assert {name: kind.__name__ for name, kind in got.items()} == want
    assert "dense_weight" in got and "hybrid" not in got and "recency_ceiling" not in got


def test_sweep_checks_every_value_before_running(client, db, kb, monkeypatch):
    searched: list[str] = []
    search = client.search
    monkeypatch.setattr(client, "search", lambda *a, **kw: searched.append(a[1]) or search(*a, **kw))
    with pytest.raises(InvalidKnob, match="dense_weight"):                       # out of its domain
        sweep(client, "kb", "dense_weight", [0.5, 1.5], top_k=K)
    with pytest.raises(InvalidKnob, match="fetch_k"):
        sweep(client, "kb", "fetch_k", [10, 5000], top_k=K)
    with pytest.raises(InvalidKnob, match=r'unknown knob "dense_wieght".*did you mean "dense_weight"'):
        sweep(client, "kb", "dense_wieght", [0.1, 0.2])
    with pytest.raises(InvalidKnob, match="whole numbers"):
        sweep(client, "kb", "fetch_k", [10, 20.5])
    # another override out of range is refused with the first value, before any run
    with pytest.raises(InvalidKnob, match="rrf_k"):
        sweep(client, "kb", "dense_weight", [0.5], knobs={"rrf_k": 0})
    with pytest.raises(InvalidArgument, match="cannot sweep"):
        sweep(client, "kb", "hybrid", [0, 1])
    with pytest.raises(InvalidArgument, match="cannot sweep"):                   # the owner's, not a call's
        sweep(client, "kb", "recency_ceiling", [0.1, 0.2])
    with pytest.raises(InvalidArgument, match="being swept"):
        sweep(client, "kb", "rrf_k", [10], knobs={"rrf_k": 60})
    assert searched == [] and history(client, "kb") == []
    # what passes comes back as the knob's type
    assert check_values(client, "kb", "fetch_k", [10.0, 20]) == [10, 20]
    assert check_values(client, "kb", "dense_weight", [0, 1]) == [0.0, 1.0]


# -- CLI -----------------------------------------------------------------------------

def test_cli_eval_history_sweep(dsn, client, db, kb, tmp_path, capsys):
    assert main(["--dsn", dsn, "eval", "kb", "--top-k", str(K), "--baseline", "dense",
                 "--set", "dense_weight=0.5"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == ("collection kb, golden set gold (chunk-level): 4 answerable question(s), "
                        "1 without an answer; k = 3")
    assert lines[1].split()[:9] == ["run", "label", "hit@3", "MRR@3", "nDCG@3", "P@3", "R@3", "tokens", "results"]
    pipeline = evaluate(client, "kb", top_k=K, knobs={"dense_weight": 0.5}, store=False)
    row = lines[3].split()
    assert row[1] == "pipeline" and row[4] == f"{pipeline.metrics['ndcg']:.4f}"
    assert lines[4].split()[1] == "dense"
    assert "overrides: dense_weight=0.5" in out and "legs run dense 5, lexical 5" in out

    assert main(["--dsn", dsn, "eval", "kb", "--top-k", str(K), "--json"]) == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    assert run["label"] == "pipeline" and run["previous_run_id"] == 1
    assert run["delta"]["ndcg"] == pytest.approx(run["metrics"]["ndcg"] - pipeline.metrics["ndcg"])

    assert main(["--dsn", dsn, "eval", "history", "kb"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[2:5]] == ["1", "2", "3"]
    assert "dense_weight=0.5" in out[2]

    png = tmp_path / "w.png"
    assert main(["--dsn", dsn, "eval", "sweep", "kb", "--top-k", str(K), "--knob", "dense_weight",
                 "--values", "0,0.5,...,1", "--plot", str(png), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["values"] == [0.0, 0.5, 1.0] and result["plot"] == str(png) and png.stat().st_size > 0
    assert result["best"]["value"] in result["values"]

    assert main(["--dsn", dsn, "eval", "sweep", "kb", "--knob", "rrf_k", "--values", "30,60",
                 "--plot", str(tmp_path / "k.png")]) == 0
    assert "best rrf_k = " in capsys.readouterr().out

    # usage errors are errors, not tracebacks
    for argv, message in ((["eval", "kb", "--knob", "rrf_k"], "go with `pgsift eval sweep`"),
                          (["eval", "history"], "needs a collection"),
                          (["eval", "kb", "extra"], "unexpected argument"),
                          (["eval", "kb", "--set", "dense_weight"], "knob=value"),
                          (["eval", "kb", "--set", "nope=1"], "unknown knob"),
                          (["eval", "sweep", "kb", "--knob", "dense_weight", "--values", "0,2"], "dense_weight")):
        assert main(["--dsn", dsn, *argv]) == 2, argv
        assert message in capsys.readouterr().err, argv


# -- the same runs from SQL --------------------------------------------------------------

SCORES = ("hit_rate", "mrr", "ndcg", "precision", "recall")


def sql_scores(db, golden_set: str, mode: str, knobs: dict | None = None) -> dict:
    rows = db.execute("select question_key, answerable, chunk_ids, ranked, tokens, legs, hit_rate, mrr, ndcg, "
                      "precision, recall, coverage, merged from sift.score_golden_set(collection => 'kb', "
                      "golden_set => %s, k => %s, knobs => %s, mode => %s)",
                      [golden_set, K, json.dumps(knobs or {}), mode]).fetchall()
    return {r[0]: r for r in rows}


def assert_same_run(db, client, golden_set: str, mode: str, knobs: dict | None = None) -> None:
    """Python's evaluate and SQL's score_golden_set / evaluate_golden_set on the same set: the same
    answers, what each hit counts as, every metric of every question, the run's figures and
    settings."""
    run = evaluate(client, "kb", golden_set=golden_set, top_k=K, mode=mode, knobs=knobs, store=False)
    per_q = sql_scores(db, golden_set, mode, knobs)
    assert list(per_q) == [r.key for r in run.questions]
    for r in run.questions:
        _key, answerable, chunk_ids, ranked, tokens, legs, *scores, coverage, merged = per_q[r.key]
        assert (answerable, chunk_ids, ranked, tokens, legs, merged) == (
            r.answerable, r.chunk_ids, r.ranked, r.tokens, r.legs or None, r.merged), r.key
        got = dict(zip(SCORES, scores, strict=True))
        if r.scores is None:
            assert got == dict.fromkeys(SCORES), r.key
        else:
            assert got == pytest.approx(r.scores, abs=1e-12), r.key
        assert coverage == (None if r.coverage is None else pytest.approx(r.coverage, abs=1e-12)), r.key
    [(metrics, settings)] = db.execute(
        "select metrics, settings from sift.evaluate_golden_set(collection => 'kb', golden_set => %s, k => %s, "
        "knobs => %s, mode => %s, store => false)", [golden_set, K, json.dumps(knobs or {}), mode]).fetchall()
    assert set(metrics) == set(run.metrics)
    for name, value in run.metrics.items():
        assert metrics[name] == (None if value is None else pytest.approx(value, abs=1e-12)), name
    assert settings.pop("evaluated_by") == "sift.evaluate_golden_set"
    want = {k: v for k, v in run.settings.items() if k != "pgsift"}
    if want["embeddings"].startswith("none: no stored vectors"):
        want["embeddings"] = "none: no stored vectors (lexical leg only)"   # SQL has no embedder to name
    assert settings == want


@pytest.mark.parametrize("mode", ["pipeline", "dense", "lexical"])
def test_sql_evaluation_scores_as_python_does(client, db, kb, mode):
    assert_same_run(db, client, "gold", mode)


def test_sql_evaluation_agrees_on_documents_windows_grades_and_unbound_positives(client, db, kb):
    """The harder cases on the same data: a set judged by document (a document once, at its best
    rank; an unbound positive of a document already relevant adds nothing), windows of
    neighbours (a hit standing for the positive in its window, tokens counted once), grades,
    a question without a vector, and positives no chunk holds."""
    both_shipping = [0.0, 0.0, 1 / math.sqrt(2), 1 / math.sqrt(2)] + [0.0] * (DIMS - 4)
    questions = [
        Question("returns", "where do returns go", positives=[Positive(source_uri="shipping.md", grade=2),
                                                              Positive(text="Rotterdam every weekday")],
                 embedding=both_shipping),
        Question("refund", "refunds paid days", positives=[Positive(text="paid within 14 days", grade=3),
                                                           Positive(text="need approval by the finance team")]),
        Question("gone", "laptop encryption", positives=[Positive(text="text no chunk holds", grade=2),
                                                         Positive(text="full disk encryption")],
                 embedding=e(5)),
        Question("shoe", "shoe size", answerable=False, embedding=e(6)),
    ]
    for name, level in (("graded", "chunk"), ("docs", "document")):
        import_golden_set(client, "kb", name, questions, judged_at=level)
        for knobs in (None, {"neighbours": 1}, {"per_document_cap": 1, "dense_weight": 0.8}):
            assert_same_run(db, client, name, "pipeline", knobs)
        assert_same_run(db, client, name, "lexical")
    with pytest.raises(psycopg.Error, match="dense baseline needs a query vector") as info:
        sql_scores(db, "docs", "dense")
    assert info.value.sqlstate == "SF003"


def test_sql_evaluation_records_runs_in_the_history(client, db, kb):
    python = evaluate(client, "kb", top_k=K)
    [(run_id, created_at, set_name, metrics, previous, delta)] = db.execute(
        "select run_id, created_at, set_name, metrics, previous_run_id, delta "
        "from sift.evaluate_golden_set('kb', k => 3)").fetchall()
    assert set_name == "gold" and run_id > python.run_id and created_at is not None
    assert previous == python.run_id       # the same golden set, k and label: one series
    assert metrics == pytest.approx(python.metrics, abs=1e-12)
    assert delta == pytest.approx(dict.fromkeys(delta, 0.0), abs=1e-12)
    rows = history(client, "kb")
    assert [(r.run_id, r.label, r.k) for r in rows] == [(python.run_id, "pipeline", K), (run_id, "pipeline", K)]
    assert rows[1].settings["evaluated_by"] == "sift.evaluate_golden_set"
    labelled = db.execute("select run_id, previous_run_id from sift.evaluate_golden_set('kb', k => 3, "
                          "mode => 'dense', label => 'dense vs sql')").fetchone()
    assert labelled[1] is None and history(client, "kb")[-1].label == "dense vs sql"
    # a run of one's own, recorded as the Python package records it
    recorded = db.execute("select run_id, previous_run_id, delta from sift.record_eval_run('kb', 'gold', "
                          "'pipeline', 3, '{\"ndcg\": 0.5}', '{\"by\": \"hand\"}')").fetchone()
    assert recorded[1] == run_id and recorded[2] == pytest.approx({"ndcg": 0.5 - metrics["ndcg"]})
    # refused before any search: knobs, k, mode, a baseline's hybrid, an unknown set
    for call, state in (("sift.score_golden_set('kb', knobs => '{\"dense_weight\": 2}')", "23514"),
                        ("sift.score_golden_set('kb', knobs => '{\"dense_wieght\": 0.5}')", "SF009"),
                        ("sift.score_golden_set('kb', k => 0)", "SF003"),
                        ("sift.score_golden_set('kb', mode => 'sparse')", "SF003"),
                        ("sift.evaluate_golden_set('kb', mode => 'dense', knobs => '{\"hybrid\": true}')", "SF003"),
                        ("sift.evaluate_golden_set('kb', 'nope')", "SFG01"),
                        ("sift.record_eval_run('kb', 'nope', 'x', 3, '{}')", "SFG01")):
        with pytest.raises(psycopg.Error) as info:
            db.execute(f"select * from {call}")
        assert info.value.sqlstate == state, call
    assert len(history(client, "kb")) == 4
