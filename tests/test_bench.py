"""The quality benchmark: metrics against hand-computed values, and run_quality on a
tiny synthetic BEIR folder whose every score is known in advance."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import unit
from pgsift import Client, InvalidArgument, metrics
from pgsift.bench import format_table, load_beir, run_quality

# -- metrics -------------------------------------------------------------------


def test_ndcg_hand_computed():
    # Ranking [a, b, c], qrels {b: 1, c: 2}; gain = relevance, discount log2(rank + 1):
    #   DCG@3  = 0/log2(2) + 1/log2(3) + 2/log2(4) = 0 + 0.63093 + 1.0 = 1.63093
    #   IDCG@3 = 2/log2(2) + 1/log2(3)             = 2 + 0.63093       = 2.63093
    #   nDCG@3 = 1.63093 / 2.63093 = 0.61991
    qrels = {"b": 1, "c": 2}
    assert metrics.ndcg_at_k(["a", "b", "c"], qrels, 3) == pytest.approx(0.619907, abs=1e-6)
    # Cut at 2: DCG@2 = 1/log2(3) = 0.63093; IDCG@2 is still 2.63093 -> 0.23981
    assert metrics.ndcg_at_k(["a", "b", "c"], qrels, 2) == pytest.approx(0.239812, abs=1e-6)
    # Ideal order scores 1; nothing relevant retrieved scores 0.
    assert metrics.ndcg_at_k(["c", "b", "a"], qrels, 3) == pytest.approx(1.0)
    assert metrics.ndcg_at_k(["x", "y"], qrels, 10) == 0.0
    # Ideal DCG counts judged ids the ranking never returned: {c: 2} is missing here,
    #   DCG@3 = 1/log2(2) = 1; IDCG@3 = 2.63093 -> 0.38010
    assert metrics.ndcg_at_k(["b"], qrels, 3) == pytest.approx(1 / (2 + 1 / math.log2(3)), abs=1e-9)


def test_zero_relevance_and_duplicates():
    # An explicit 0 judgment is not relevant (trec_eval): same as not judged.
    assert metrics.ndcg_at_k(["a", "b"], {"a": 0, "b": 1}, 2) == pytest.approx(1 / math.log2(3))
    assert metrics.recall_at_k(["a"], {"a": 0, "b": 1}, 10) == 0.0
    # A repeated id counts once, at its best rank, and does not use up a slot:
    # [b, b, c] is read as [b, c] -> ideal order for {b: 2, c: 1}.
    assert metrics.ndcg_at_k(["b", "b", "c"], {"b": 2, "c": 1}, 2) == pytest.approx(1.0)
    # No relevant judgment at all: every metric is 0.
    for fn in (metrics.ndcg_at_k, metrics.recall_at_k, metrics.mrr, metrics.hit_rate):
        assert fn(["a"], {"a": 0}) == 0.0


def test_recall_mrr_hit_rate_hand_computed():
    qrels = {"b": 1, "c": 2, "z": 1}            # three relevant ids, z never retrieved
    ranked = ["a", "b", "c", "d"]
    assert metrics.recall_at_k(ranked, qrels, 1) == 0.0
    assert metrics.recall_at_k(ranked, qrels, 2) == pytest.approx(1 / 3)
    assert metrics.recall_at_k(ranked, qrels, 100) == pytest.approx(2 / 3)
    assert metrics.mrr(ranked, qrels) == 0.5    # first relevant at rank 2
    assert metrics.mrr(ranked, qrels, k=1) == 0.0
    assert metrics.hit_rate(ranked, qrels, 1) == 0.0
    assert metrics.hit_rate(ranked, qrels, 2) == 1.0
    with pytest.raises(ValueError):
        metrics.recall_at_k(ranked, qrels, -1)


# -- a synthetic BEIR folder ------------------------------------------------------

DIMS = 16
FILLER = ["protein", "cell", "study", "patients", "results", "increase", "tissue", "signal"]


def write_beir(root: Path, rng: np.random.Generator) -> Path:
    """Six documents, random unit embeddings. Evaluated test queries:

    q1: text "zymurgy" (a word only d3 has), embedding = d3's; qrels d3: 2 (and d1: 0)
    q2: text "quokka" (a word only d5 has), embedding = d2's; qrels d2: 1
    Not evaluated: q3 (judged in train only), q4 (no judgment), q5 (only a 0 judgment).
    """
    root.mkdir()
    rare = {3: "zymurgy", 5: "quokka"}
    docs = []
    for i in range(6):
        words = list(rng.choice(FILLER, size=8)) + ([rare[i]] if i in rare else [])
        docs.append({"_id": f"d{i}", "title": f"Paper number {i}", "text": " ".join(words)})
    doc_emb = unit(rng.normal(size=(6, DIMS))).astype(np.float32)

    queries = [("q1", "zymurgy", doc_emb[3]), ("q2", "the quokka", doc_emb[2]),
               ("q3", "protein", unit(rng.normal(size=DIMS))), ("q4", "cell", unit(rng.normal(size=DIMS))),
               ("q5", "tissue", unit(rng.normal(size=DIMS)))]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t, "metadata": {}}) + "\n" for q, t, _ in queries))
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td3\t2\nq1\td1\t0\nq2\td2\t1\nq5\td4\t0\n")
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq3\td0\t1\n")
    emb = root / "embeddings" / "toy-model"
    emb.mkdir(parents=True)
    np.save(emb / "corpus.npy", doc_emb)
    np.save(emb / "queries.npy", np.stack([e for _, _, e in queries]).astype(np.float32))
    return root


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "toy", np.random.default_rng(7))


def test_load_beir(toy: Path):
    data = load_beir(toy)
    assert data.model == "toy-model" and data.name == "toy"
    assert data.doc_ids == [f"d{i}" for i in range(6)] and data.dims == DIMS
    assert data.query_ids == ["q1", "q2"]      # test queries with a relevant judgment only
    assert data.qrels == {"q1": {"d3": 2, "d1": 0}, "q2": {"d2": 1}}
    np.testing.assert_array_equal(data.query_embeddings[0], data.doc_embeddings[3])
    with pytest.raises(InvalidArgument, match="have: toy-model"):
        load_beir(toy, model="no-such-model")
    (toy / "qrels" / "test.tsv").unlink()
    with pytest.raises(InvalidArgument, match="not a BEIR folder: missing qrels/test.tsv"):
        load_beir(toy)


def test_load_beir_refuses_misaligned_embeddings(toy: Path):
    np.save(toy / "embeddings" / "toy-model" / "corpus.npy", np.zeros((5, DIMS), dtype=np.float32))
    with pytest.raises(InvalidArgument, match="corpus.jsonl has 6 documents"):
        load_beir(toy)


def test_run_quality_on_known_case(db, client, toy: Path):
    result = run_quality(db, toy)

    assert result["dataset"] == "toy"
    assert result["n_docs"] == 6 and result["n_queries"] == 2
    assert result["ingest_s"] >= 0
    assert len(client.search("bench", "zymurgy", top_k=10)) == 1   # really ingested, text searchable
    modes = result["modes"]
    assert set(modes) == {"dense", "lexical", "hybrid", "lexical_exhaustive",
                          "pgvector_hnsw", "fts_ts_rank_cd", "supabase_hybrid"}
    for m in modes.values():
        assert set(m) == {"ndcg@10", "recall@100", "p50_ms", "p95_ms", "p50_over_pgvector"}
        assert m["p50_ms"] > 0 and m["p95_ms"] >= m["p50_ms"]
        assert m["p50_over_pgvector"] == pytest.approx(m["p50_ms"] / modes["pgvector_hnsw"]["p50_ms"])
    assert modes["pgvector_hnsw"]["p50_over_pgvector"] == 1
    # The peers ran on a copy of the same 6 chunks, dropped afterwards.
    assert result["peer_rows"] == 6
    assert db.execute("select to_regnamespace('pgsift_peers')").fetchone()[0] is None
    # pgvector's own order: the relevant doc first, as the dense leg.
    assert modes["pgvector_hnsw"]["ndcg@10"] == pytest.approx(1.0)
    assert modes["pgvector_hnsw"]["recall@100"] == pytest.approx(1.0)
    # ts_rank_cd over the same OR of lexemes: d3 for q1; only d5 (not judged) for q2.
    assert modes["fts_ts_rank_cd"]["ndcg@10"] == pytest.approx(0.5)
    # Supabase's RRF (k 50): q1 d3 first; q2's d5 is in both lists and beats d2 (semantic only).
    assert modes["supabase_hybrid"]["ndcg@10"] == pytest.approx((1 + 1 / math.log2(3)) / 2)

    # Dense: each query's embedding is its relevant doc's, so that doc is rank 1.
    assert modes["dense"]["ndcg@10"] == pytest.approx(1.0)
    assert modes["dense"]["recall@100"] == pytest.approx(1.0)
    # Lexical: q1's word is only in d3 (nDCG 1); q2's word is only in d5, not judged (0).
    assert modes["lexical"]["ndcg@10"] == pytest.approx(0.5)
    assert modes["lexical"]["recall@100"] == pytest.approx(0.5)
    # The bounded leg is exhaustive BM25 on a corpus this small, ranking for ranking.
    assert modes["lexical_exhaustive"]["ndcg@10"] == modes["lexical"]["ndcg@10"]
    assert result["lexical_identical_to_exhaustive"] == {"top_10": 2, "top_100": 2}
    # Hybrid, w = 0.5, k = 3: q1 has d3 first in both legs (nDCG 1). For q2, d5 is in both
    # legs (0.5/(3 + r) + 0.5/4 > 0.125) and beats d2, dense rank 1 only
    # (0.5/4 = 0.125): d2 lands at rank 2, nDCG = 1/log2(3).
    assert modes["hybrid"]["ndcg@10"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert modes["hybrid"]["recall@100"] == pytest.approx(1.0)

    s = result["settings"]
    assert s["model"] == "toy-model" and s["dims"] == DIMS and s["top_k"] == 10 and s["depth"] == 100
    assert s["collection_settings"]["dense_weight"] == pytest.approx(0.5)
    json.dumps(result)   # the CLI's --json output

    table = format_table(result)
    assert "toy" in table and "6 docs" in table and "2 queries" in table
    assert "nDCG@10" in table and "recall@100" in table
    rows = {line.split()[0]: line.split() for line in table.splitlines()[3:-2]}
    assert set(rows) == {"dense", "lexical", "hybrid", "lexical_exhaustive",
                         "pgvector_hnsw", "fts_ts_rank_cd", "supabase_hybrid"}
    assert rows["pgvector_hnsw"][-1] == "1.00x"
    assert table.splitlines()[-2].endswith("top 10 2/2, top 100 2/2")
    assert "plain copy of the 6 chunks" in table.splitlines()[-1]
    assert rows["dense"][1] == "1.0000" and rows["lexical"][1] == "0.5000"


def test_run_quality_rerun_knobs_and_max_queries(db, client, toy: Path):
    run_quality(db, toy, collection="toy")
    # Second run replaces the collection (dropped first), takes knobs and a query cap.
    result = run_quality(db, toy, collection="toy", max_queries=1, knobs={"dense_weight": 1.0})
    assert result["n_docs"] == 6 and result["n_queries"] == 1
    assert [c.name for c in client.list_collections()] == ["toy"]
    assert result["settings"]["knobs"] == {"dense_weight": 1.0}
    assert result["modes"]["hybrid"]["ndcg@10"] == pytest.approx(1.0)

    # All queries at dense_weight 1: hybrid ranks exactly like dense (q2's d2 back on top).
    result = run_quality(db, toy, collection="toy", knobs={"dense_weight": 1.0})
    assert result["modes"]["hybrid"]["ndcg@10"] == pytest.approx(1.0)

    with pytest.raises(InvalidArgument, match="hybrid"):
        run_quality(db, toy, knobs={"hybrid": False})



def test_every_system_runs_in_turn_and_only_the_search_is_timed(toy: Path, monkeypatch):
    # A clock that moves only when told: each search takes its system's number of ms,
    # and the untimed hooks around b take far longer, which must not reach b's times.
    from pgsift.bench import quality
    from pgsift.bench import turns as bench_turns
    clock = [0.0]
    monkeypatch.setattr(bench_turns.time, "perf_counter", lambda: clock[0])
    data = load_beir(toy)
    log: list[str] = []

    def system(name: str, ms: float):
        def run(i: int) -> list[str]:
            log.append(f"{name}{i}")
            clock[0] += ms / 1000
            return [f"d{3 if i == 0 else 2}"]
        return run

    def hook(mark: str):
        def run() -> None:
            log.append(mark)
            clock[0] += 5.0
        return run

    runs = {"a": system("a", 1), "b": system("b", 2), "c": system("c", 3)}
    lists, modes = quality._time_in_turns(runs, {"b": (hook("<"), hook(">"))}, [0, 1, 0], data, 10, 100)
    # One untimed warm-up each, then every query through all three, the order changing
    # (turns.turn_order: for three systems, its first three orders rotate).
    assert log == ["a0", "<", "b0", ">", "c0",
                   "a0", "<", "b0", ">", "c0",
                   "<", "b1", ">", "c1", "a1",
                   "c0", "a0", "<", "b0", ">"]
    for name, ms in (("a", 1), ("b", 2), ("c", 3)):
        assert modes[name]["p50_ms"] == pytest.approx(ms) and modes[name]["p95_ms"] == pytest.approx(ms)
    # Each query's ranking scored against its own judgments (q1: d3 relevant, q2: d2).
    assert lists["a"] == [["d3"], ["d2"], ["d3"]]
    assert modes["a"]["ndcg@10"] == pytest.approx(1.0) and modes["c"]["recall@100"] == pytest.approx(1.0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8])
def test_turn_orders_put_every_system_after_every_other_alike(n: int):
    # A Williams design: over its rows (n, or 2n when n is odd) every order holds each
    # system once, each system stands in every place alike, and each follows every other
    # alike, so no system always runs right after the same one (and finds what that one
    # just read in the CPU's caches).
    from collections import Counter
    from itertools import pairwise

    from pgsift.bench.turns import turn_order
    rows = n if n % 2 == 0 else 2 * n
    orders = [turn_order(n, t) for t in range(rows)]
    assert all(sorted(o) == list(range(n)) for o in orders)
    assert turn_order(n, rows) == orders[0]   # and again from the first
    places = Counter((s, p) for o in orders for p, s in enumerate(o))
    assert set(places) == {(s, p) for s in range(n) for p in range(n)} and len(set(places.values())) == 1
    after = Counter(pair for o in orders for pair in pairwise(o))
    assert set(after) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert len(set(after.values())) <= 1


# -- ingest and row-level security benchmarks ------------------------------------------------

def test_run_ingest_writes_and_drops_its_collections(db, toy: Path):
    from pgsift.bench import ingest as bench_ingest
    result = bench_ingest.run_ingest(db, (40, 60), dims=DIMS, dataset=toy)
    runs = result["runs"]
    assert [(r["shape"], r["chunks"]) for r in runs] == [
        ("one document", 40), ("documents of 10", 40), ("one document", 60), ("documents of 10", 60)]
    assert [r["documents"] for r in runs] == [1, 4, 1, 6]
    assert all(r["chunks_per_s"] > 0 and r["total_s"] >= r["write_s"] >= 0 and r["vacuumed"] for r in runs)
    assert db.execute("select count(*) from sift.collections").fetchone() == (0,)
    table = bench_ingest.format_table(result)
    assert "one document" in table and "vs smallest" in table
    json.dumps(result)
    generated = bench_ingest.run_ingest(db, (20,), shapes=("one document",), dims=DIMS)
    assert generated["text"] == "generated (Zipf)" and generated["runs"][0]["documents"] == 1
    with pytest.raises(ValueError, match="unknown shapes"):
        bench_ingest.run_ingest(db, (20,), shapes=("triangles",), dims=DIMS)


def test_run_rls_compares_operator_and_reader(db, tmp_path: Path):
    from pgsift.bench import rls as bench_rls
    # Enough documents that the planner walks the HNSW index rather than scan a few rows.
    root = tmp_path / "rls"
    (root / "qrels").mkdir(parents=True)
    (root / "embeddings" / "toy-model").mkdir(parents=True)
    rng = np.random.default_rng(1)
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": f"d{i}", "title": "", "text": " ".join(rng.choice(FILLER, size=6))}) + "\n"
        for i in range(400)))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": FILLER[i]}) + "\n"
                                                for i in range(3)))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                             "".join(f"q{i}\td{i}\t1\n" for i in range(3)))
    np.save(root / "embeddings" / "toy-model" / "corpus.npy", unit(rng.normal(size=(400, DIMS))).astype(np.float32))
    np.save(root / "embeddings" / "toy-model" / "queries.npy", unit(rng.normal(size=(3, DIMS))).astype(np.float32))

    result = bench_rls.run_rls(db, root, queries_n=3, repeats=2)
    assert result["same_results"] is True
    assert set(result["timed"]) == {f"{m} {w}" for m in bench_rls.MODES for w in ("operator", "reader")}
    assert result["dense_plan"]["index_scan"] and result["dense_plan"]["policy_once"]
    assert db.execute("select count(*) from sift.collections").fetchone() == (0,)
    assert db.execute("select count(*) from sift.tenant_roles").fetchone() == (0,)
    assert db.execute("select count(*) from pg_roles where rolname like 'pgsift_bench_reader_%'").fetchone() == (0,)
    assert f"index scan on chunks_hnsw_cosine_{DIMS}" in bench_rls.format_table(result)


def test_run_compare_pairs_two_databases(db, dsn, toy: Path):
    import psycopg
    from pgsift.bench import compare as bench_compare
    run_quality(db, toy, collection="bench")
    with psycopg.connect(dsn, autocommit=True) as other:   # the same install on both sides
        result = bench_compare.run_compare(db, other, toy, rounds=2)
    assert set(result["modes"]) == set(bench_compare.MODES) and result["queries"] == 2
    assert all(m["a_p50_ms"] > 0 and m["b_p50_ms"] > 0 and m["ratio_p50"] > 0 for m in result["modes"].values())
    assert "ratio" in bench_compare.format_table(result)


def _xquad_toy(root: Path) -> Path:
    """Two articles of three paragraphs in XQuAD-R's layout (English and one translation)."""
    paragraphs = {
        ("Volcanoes", "p000"): "Magma rises through the crust. Pressure builds below the surface until it breaks.",
        ("Volcanoes", "p001"): "Seismometers record small earthquakes before an eruption begins.",
        ("Volcanoes", "p002"): "Ash clouds ground aircraft for days after a large eruption.",
        ("Tides", "p003"): "The moon pulls the oceans and makes the tides rise and fall twice a day.",
        ("Tides", "p004"): "Spring tides happen when the sun and moon line up.",
        ("Tides", "p005"): "Tidal power plants turn the moving water into electricity.",
    }
    questions = {"q1": ("what records earthquakes before an eruption", "p001"),
                 "q2": ("when do spring tides happen", "p004"),
                 "q3": ("how is electricity made from tides", "p005")}
    root.mkdir()
    (root / "qrels").mkdir()
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as f:
        for lang in ("en", "de"):
            for (title, pid), text in paragraphs.items():
                f.write(json.dumps({"_id": f"{lang}/{pid}", "title": title, "text": text,
                                    "metadata": {"language": lang, "source_uri": f"/{lang}/{title}/{pid}"}}) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as f:
        for qid, (text, _) in questions.items():
            f.write(json.dumps({"_id": f"en/{qid}", "text": text, "metadata": {"language": "en"}}) + "\n")
    with open(root / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, (_, pid) in questions.items():
            f.write(f"en/{qid}\ten/{pid}\t2\nen/{qid}\tde/{pid}\t1\n")
    return root


class _Bag:
    """A bag-of-words stand-in embedder: shared words, similar vectors."""

    dims = 64

    def embed(self, texts):
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace(".", " ").split():
                out[i, sum(map(ord, word)) % self.dims] += 1
        return np.stack([unit(v + 1e-3) for v in out]).astype(np.float32)


def test_run_structure_scores_sections_and_returned_text(db, tmp_path: Path):
    from pgsift.bench import structure as bench_structure

    dataset = _xquad_toy(tmp_path / "xq")
    articles, questions = bench_structure.load_articles(dataset)
    assert [pid for pid, _ in articles["Volcanoes"]] == ["p000", "p001", "p002"]
    assert sorted(q.section for q in questions) == [("Tides", "p004"), ("Tides", "p005"), ("Volcanoes", "p001")]
    result = bench_structure.run_structure(db, dataset, sizes=(8,), embedder=_Bag())
    rows = {(r["chunking"], r["parent_return"], r["neighbours"]): r for r in result["rows"]}
    assert len(rows) == 2 + 4 * 2 and result["questions"] == 3
    child, parent = rows[("hierarchical", "child", 0)], rows[("hierarchical", "parent", 0)]
    # A section returns all of its answer, for more text than its passages.
    assert parent["recall"] == 1.0 and parent["tokens"] >= child["tokens"] and parent["merged"] > 0
    assert child["merged"] == 0 and rows[("hierarchical", "child", 1)]["tokens"] >= child["tokens"]
    assert all(0 <= r["ndcg@10"] <= 1 and r["results"] > 0 for r in rows.values())
    assert "hierarchical" in bench_structure.format_table(result)
    # It cleans up after itself.
    assert db.execute("select count(*) from sift.collections").fetchone() == (0,)


def test_run_languages_collapses_translations_and_prefers_the_questions_language(db, tmp_path: Path):
    from pgsift.bench import languages as bench_languages

    root = tmp_path / "xq"
    (root / "qrels").mkdir(parents=True)
    (root / "embeddings" / "toy").mkdir(parents=True)
    texts = {"en": ["tides rise twice a day", "volcanoes erupt ash"],
             "de": ["Gezeiten steigen zweimal am Tag", "Vulkane speien Asche"],
             "zh": ["潮汐每天涨两次", "火山喷发火山灰"]}
    rng = np.random.default_rng(0)
    topics = [unit(rng.normal(size=8)) for _ in range(2)]
    corpus, vectors = [], []
    for lang, pair in texts.items():
        for p, text in enumerate(pair):
            corpus.append({"_id": f"{lang}/p{p}", "title": f"T{p}", "text": text,
                           "metadata": {"language": lang, "source_uri": f"/{lang}/T{p}/p{p}"}})
            vectors.append(unit(topics[p] + 0.05 * rng.normal(size=8)))
    questions = [("en/q0", "when do tides rise", "en", 0), ("de/q0", "Wann steigen Gezeiten", "de", 0),
                 ("zh/q1", "火山喷发什么", "zh", 1), ("en/q1", "what do volcanoes erupt", "en", 1)]
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in corpus)
    with open(root / "queries.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"_id": q, "text": t, "metadata": {"language": lang}}, ensure_ascii=False) + "\n"
                     for q, t, lang, _ in questions)
    with open(root / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q, _, lang, p in questions:
            f.writelines(f"{q}\t{other}/p{p}\t{2 if other == lang else 1}\n" for other in texts)
    np.save(root / "embeddings" / "toy" / "corpus.npy", np.array(vectors, dtype=np.float32))
    np.save(root / "embeddings" / "toy" / "queries.npy",
            np.array([unit(topics[p] + 0.05 * rng.normal(size=8)) for *_, p in questions], dtype=np.float32))

    result = bench_languages.run_languages(db, root, sample=4)
    rows = {r["mode"]: r for r in result["rows"]}
    assert result["questions"] == 4 and set(result["lexical_by_language"]) == {"en", "de", "zh"}
    assert rows["dense"]["duplicates"] > 0                      # every translation comes back
    for mode in ("hybrid + language", "hybrid + language, 3 collections"):
        assert rows[mode]["duplicates"] == 0 and rows[mode]["first_in_language"] == 1.0
        assert rows[mode]["page_ndcg@10"] == 1.0 and rows[mode]["answer_ndcg@10"] == 1.0
    assert result["lexical_by_language"]["zh"][1] == 1.0        # Chinese found lexically, by bigrams
    assert "hybrid + language" in bench_languages.format_table(result)
    assert db.execute("select count(*) from sift.collections").fetchone() == (0,)


def test_run_fusion_takes_the_mean_over_datasets(db, toy: Path, tmp_path: Path):
    from pgsift.bench import fusion as bench_fusion

    # A second dataset without a train split: it tunes on a sample of its test questions.
    other = write_beir(tmp_path / "other", np.random.default_rng(8))
    (other / "qrels" / "train.tsv").unlink()
    result = bench_fusion.run_fusion(db, [toy, other], split="train", tune_sample=5, answer_only=True)
    first, second = result["datasets"]
    assert first["split"] == "train" and first["queries"] == 1
    assert second["split"].startswith("a tuning sample") and second["queries"] == 1
    grid = result["grid"]
    assert len(grid) == len(bench_fusion.WEIGHTS) * len(bench_fusion.RRF_KS) * len(bench_fusion.FETCH_KS)
    assert all(g["mean"] == pytest.approx(sum(g["ndcg@10"]) / 2, abs=1e-4) for g in grid)
    assert grid[0]["mean"] == max(g["mean"] for g in grid)
    chosen = result["chosen"]
    assert all(loss >= 0 for loss in chosen["loss_vs_own_best"])
    assert "chosen: dense_weight" in bench_fusion.format_table(result)


def test_run_snippets_times_each_mode(db, toy: Path):
    from pgsift.bench import snippets as bench_snippets

    result = bench_snippets.run_snippets(db, toy, queries=2)
    assert result["queries"] == 2
    assert [(r["match_count"], r["snippets"]) for r in result["rows"]] == [
        (k, m) for k in (10, 50) for m in ("off", "text", "html")]
    assert all(r["p50_ms"] > 0 for r in result["rows"])
    assert "snippets" in bench_snippets.format_table(result)
    assert db.execute("select count(*) from sift.collections").fetchone() == (0,)


def test_run_transfer_sends_the_same_vectors_both_ways(db):
    from pgsift.bench import ingest as bench_ingest

    result = bench_ingest.run_transfer(db, count=50, dims=8, repeats=2)
    assert (result["count"], result["dims"], result["binary_bytes"]) == (50, 8, 50 * 36)
    assert result["text_s"] > 0 and result["binary_s"] > 0 and result["text_bytes"] > result["binary_bytes"]
    assert "binary" in bench_ingest.format_transfer(result)


def test_run_maxsim_times_the_stage_and_the_search(db):
    from pgsift.bench import maxsim as bench_maxsim

    result = bench_maxsim.run_maxsim(db, chunks=30, tokens=5, dims=8, query_tokens=3, top_ns=(5, 20), queries=2)
    assert [r["top_n"] for r in result["rows"]] == [5, 20] and result["chunks"] == 30
    assert all(r["maxsim_p50_ms"] > 0 and r["search_late_p50_ms"] > 0 for r in result["rows"])
    assert "MaxSim" in bench_maxsim.format_table(result)
    assert db.execute("select count(*) from sift.chunk_tokens").fetchone()[0] == 0   # it cleans up


def test_run_legs_tunes_on_train_and_scores_test_through_sql(db, toy: Path):
    from pgsift.bench import legs as bench_legs

    # A second model: other vectors of another size for the same corpus and queries.
    second = toy / "embeddings" / "toy-second"
    second.mkdir()
    rng = np.random.default_rng(3)
    np.save(second / "corpus.npy", unit(rng.normal(size=(6, 4))).astype(np.float32))
    np.save(second / "queries.npy", unit(rng.normal(size=(5, 4))).astype(np.float32))
    result = bench_legs.run_legs(db, toy, models=("toy-model", "toy-second"))
    assert result["train_queries"] == 1 and result["test_queries"] == 2
    systems = [r["system"] for r in result["rows"]]
    assert len(systems) == 8 and [s.split(",")[1].strip().split(" ")[0] for s in systems[5:]] == [
        "rrf", "dbsf", "convex"]
    assert result["python_matches_sql"] == "3 of 3"
    gain = result["third_leg_gain"]
    assert gain["ci95"][0] <= gain["mean"] <= gain["ci95"][1]
    assert all(0 <= r["ndcg_at_10"] <= 1 for r in result["rows"])
    assert "three legs" in bench_legs.format_table(result)
    assert db.execute("select count(*) from sift.collections where name = 'bench_legs'").fetchone()[0] == 0


def test_run_questions_compares_the_policies(db, tmp_path: Path):
    import hashlib

    from pgsift.bench import questions as bench_questions

    class Hash:
        def embed(self, texts):
            return np.array([unit(np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16))
                                  .normal(size=8)) for t in texts], dtype=np.float32)

    root = tmp_path / "xq"
    (root / "qrels").mkdir(parents=True)
    paragraphs = [{"_id": f"en/p{i}", "title": f"Topic_{i}", "text": f"Paragraph {i} about {FILLER[i]} things."}
                  for i in range(4)] + [{"_id": "de/p0", "title": "Topic_0", "text": "Absatz"}]
    questions = [(f"en/q{i}{j}", f"Which {FILLER[i]} thing number {j}?", f"en/p{i}")
                 for i in range(4) for j in range(4)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(p) + "\n" for p in paragraphs))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t, _ in questions))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{p}\t2\n{q}\tde/p0\t1\n" for q, _, p in questions))
    result = bench_questions.run_questions(db, root, embedder=Hash())
    assert (result["paragraphs"], result["indexed_questions"], result["asked_questions"]) == (4, 8, 8)
    assert [r["policy"] for r in result["rows"]] == ["off", "embedding", "vectors", "both"]
    by = {r["policy"]: r for r in result["rows"]}
    assert [by[p]["question_vectors"] for p in ("off", "embedding", "vectors", "both")] == [0, 0, 8, 8]
    assert all(0 <= r["hybrid_ndcg"] <= 1 for r in result["rows"])
    assert "policy" in bench_questions.format_table(result)
    assert db.execute("select count(*) from sift.collections").fetchone()[0] == 0


def test_run_exact_times_both_paths_and_cleans_up(db):
    from pgsift.bench.exact import format_table as exact_table
    from pgsift.bench.exact import run_exact

    result = run_exact(db, sizes=(60, 120), queries=3, beside=200)
    assert [r["chunks"] for r in result["rows"]] == [60, 120]
    for r in result["rows"]:
        assert r["exact_p50_ms"] > 0 and r["hnsw_p50_ms"] > 0
        assert r["ratio"] == pytest.approx(r["exact_p50_ms"] / r["hnsw_p50_ms"], rel=0.02)
        assert 0.9 <= r["hnsw_recall"] <= 1   # the walk finds (nearly) the scan's rows at this size
        assert r["index_rows"] >= 200         # the other collection shares the index
    assert result["beside"] == 200
    assert "beside 200 chunks" in exact_table(result)
    assert Client(db).list_collections() == []   # both collections dropped


def test_run_scale_times_pgsift_beside_the_peers(db, monkeypatch):
    from pgsift.bench import peers as bench_peers
    from pgsift.bench.scale import format_table as scale_table
    from pgsift.bench.scale import run_scale

    # Raw pgvector runs at its own ef_search and at the dense leg's: what each search ran with.
    efs: list[str] = []
    search = bench_peers.Peers.search

    def spy(self, mode, text, embedding, k):
        if mode == "pgvector_hnsw":
            efs.append(self.conn.execute("show hnsw.ef_search").fetchone()[0])
        return search(self, mode, text, embedding, k)

    monkeypatch.setattr(bench_peers.Peers, "search", spy)
    result = run_scale(db, 2_000, queries=2, exact_check=1, ingest_docs=1, baseline_queries=1)
    assert result["chunks"] == 2_000 and result["leg_ef_search"] == 100
    # 4 mixes x 2 raw legs x (a warm-up and 2 queries), half at each setting
    assert sorted(efs) == ["100"] * 12 + ["40"] * 12
    for mix in ("rare", "common", "mixed", "question"):
        m = result["modes"][mix]
        for leg in ("raw_pgvector", "raw_pgvector_ef", "dense", "lexical", "hybrid", "supabase_hybrid",
                    "lexical_ts_rank_cd", "fts_ts_rank_cd"):
            assert m[leg]["p50"] > 0
        assert m["over_raw_p50"]["hybrid"] == pytest.approx(m["hybrid"]["p50"] / m["raw_pgvector"]["p50"], rel=0.02)
        assert m["over_raw_ef_p50"]["dense"] == pytest.approx(
            m["dense"]["p50"] / m["raw_pgvector_ef"]["p50"], rel=0.02)
        # The comparable raw query: the walk's top 10 with each hit's text and document.
        assert m["raw_hits"]["p50"] > 0
        assert m["over_raw_hits_p50"]["hybrid"] == pytest.approx(
            m["hybrid"]["p50"] / m["raw_hits"]["p50"], rel=0.02)
        # recall@10 of the chunks exhaustive BM25 returns: a top 10 equal to it is 1, also where
        # fewer than 10 chunks match (rare terms at 2,000 chunks)
        ex = m["top10_equal_exhaustive"]
        assert 0 <= ex["recall_at_10"] <= 1
        assert ex["identical"] != "1/1" or ex["recall_at_10"] == 1.0
    for key in ("plain_load_chunks_per_s", "plain_live_chunks_per_s", "client_ingest_chunks_per_s",
                "client_one_chunks_per_s", "plain_one_chunks_per_s", "client_ingest_over_plain",
                "client_one_over_plain"):
        assert result[key] > 0
    assert result["live_rounds"] == 3   # pgsift and the plain table in turn, after both loads
    # the floor (the operator owns sift.chunks): pgsift's writes with no BM25 upkeep, in turn too
    assert result["floor_ingest_chunks_per_s"] > 0 and result["floor_one_over_plain"] > 0
    # the live writes were removed again, on both sides
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == 2_000
    # ... and the floor's were never counted: the statistics hold the 2,000 chunks, the triggers
    # are on again, and nothing is pending
    assert db.execute("select sum(chunks) from sift.collection_lexical_stats").fetchone()[0] == 2_000
    assert db.execute("select count(*) from sift.term_df_pending").fetchone()[0] == 0
    assert db.execute("select count(*) from pg_trigger where tgrelid = 'sift.chunks'::regclass"
                      " and tgname like 'chunks_stats_%' and tgenabled = 'O'").fetchone()[0] == 3
    assert result["plain_hnsw_build_s"] >= 0   # (2,000 rows: a fraction of a second)
    table = scale_table(result)
    assert "raw_pgvector" in table and "supabase_hybrid" in table and "p50/raw" in table
    assert "raw_pgvector_ef" in table and "p50/raw_ef" in table and "the dense leg's 100" in table
    assert "raw_hits" in table and "p50/raw_hits" in table
    assert "plain table, same rows" in table and "of its rate" in table and "(pgsift " in table
    assert "a document a call" in table and "median of 3 rounds in turn" in table
    assert "the floor, a document a call" in table
    # the refresh line says how many lists there are, and from which chunk count on (by the
    # collection's size: 20 under 200,000 chunks)
    assert result["lists"] > 0 and result["lists_min_df"] == 20
    assert f"{result['lists']:,} impact lists after it" in table and "every term in 20+" in table
    assert db.execute("select to_regnamespace('pgsift_peers')").fetchone()[0] is None


def test_plain_table_holds_the_rows_pgsift_loaded_and_writes_documents_live(db, monkeypatch):
    from pgsift.bench import peers as bench_peers
    from pgsift.bench import plain as bench_plain
    from pgsift.bench import scale as bench_scale

    # Batches of two documents: the plain table's source must draw them as the load did.
    monkeypatch.setattr(bench_scale, "BATCH_CHUNKS", 2 * bench_scale.CHUNKS_PER_DOC)
    bench_scale.build(db, bench_scale.Corpus(3), 3 * bench_scale.CHUNKS_PER_DOC)
    try:
        out = bench_plain.bulk(db, bench_scale.plain_source(3), 3 * bench_scale.CHUNKS_PER_DOC,
                               dims=bench_scale.DIMS, batch=bench_scale.BATCH_CHUNKS)
        assert out["plain_load_chunks_per_s"] > 0 and out["plain_hnsw_build_s"] >= 0   # (60 rows: ~0 s)
        ours = db.execute("select array_agg(content order by chunk_id), array_agg(embedding::text order by chunk_id)"
                          " from sift.chunks").fetchone()
        plain = db.execute("select array_agg(content order by id), array_agg(embedding::text order by id),"
                           " count(distinct document_id), bool_and(fts = to_tsvector('english', content))"
                           " from pgsift_peers.plain_chunks").fetchone()
        assert plain[:2] == ours and plain[2] == 3 and plain[3]
        # Written live as upsert_documents writes them; written again, they replace themselves.
        docs = bench_scale.Corpus(4).documents(0, 2)
        per_doc = bench_scale.CHUNKS_PER_DOC
        for _ in range(2):
            assert bench_plain.live(db, docs, first_id=100, batch_documents=1)["plain_live_chunks_per_s"] > 0
            written = db.execute("select document_id, array_agg(content order by ordinal)"
                                 " from pgsift_peers.plain_chunks where document_id >= 100"
                                 " group by 1 order by 1").fetchall()
            assert written == [(100 + i, [c.content for c in d.chunks]) for i, d in enumerate(docs)]
        assert db.execute("select count(*) from pgsift_peers.plain_chunks").fetchone()[0] == 5 * per_doc
        assert db.execute("select count(*) from pg_indexes where schemaname = 'pgsift_peers'"
                          " and indexdef like '%hnsw%'").fetchone()[0] == 1
    finally:
        bench_peers.drop(db)


def test_peers_over_a_view_and_never_a_schema_of_the_users(db, client, toy: Path):
    from pgsift.bench import peers as bench_peers
    from pgsift.bench.quality import load_collection

    data = load_beir(toy)
    load_collection(client, "toy", data)
    # Over a view of pgsift's own table (rows named by chunk id): d3 first, as over the copy.
    assert bench_peers.install(db, "toy", data.dims, copy=False) == 6
    d3 = str(db.execute("select k.chunk_id from sift.chunks k join sift.documents d using (document_id) "
                        "where d.source_uri = 'd3'").fetchone()[0])
    peers = bench_peers.Peers(db)
    peers.begin("pgvector_hnsw", 6)
    assert peers.search("pgvector_hnsw", "", data.query_embeddings[0], 3)[0] == d3
    peers.end()
    assert peers.search("fts_ts_rank_cd", "zymurgy", data.query_embeddings[0], 3) == [d3]
    assert peers.search("supabase_hybrid", "zymurgy", data.query_embeddings[0], 3)[0] == d3
    bench_peers.drop(db)
    assert db.execute("select to_regnamespace('pgsift_peers')").fetchone()[0] is None
    # A schema of that name the benchmark did not make is neither replaced nor dropped.
    db.execute("create schema pgsift_peers")
    db.execute("create table pgsift_peers.mine (x int)")
    with pytest.raises(bench_peers.PeersUnavailable, match="did not make"):
        bench_peers.install(db, "toy", data.dims)
    bench_peers.drop(db)
    assert db.execute("select to_regclass('pgsift_peers.mine')").fetchone()[0] is not None
    # And the quality benchmark says why it ran without them.
    result = run_quality(db, toy, collection="bench")
    assert "pgvector_hnsw" not in result["modes"] and "did not make" in result["peers_skipped"]
    assert "peers skipped" in format_table(result)
    assert db.execute("select to_regclass('pgsift_peers.mine')").fetchone()[0] is not None


def test_run_profile_times_every_call_and_splits_a_search_by_function(db, toy: Path):
    from pgsift.bench import profile as bench_profile
    # The raw walks' settings are set around them alone: the session's own are there after.
    db.execute("select set_config('hnsw.ef_search', '55', false), case when sift._pgvector_has_iterative_scan() "
               "then set_config('hnsw.iterative_scan', 'strict_order', false) end")
    settings = "select current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan', true)"
    own = db.execute(settings).fetchone()
    assert own[0] == "55"
    result = bench_profile.run_profile(db, toy, collection="bench", queries=2, match_count=3)
    assert db.execute(settings).fetchone() == own
    assert result["chunks"] == 6 and result["queries"] == 2 and result["match_count"] == 3
    assert result["ef_search"] == 100   # the dense leg's: hnsw_ef_search's default, over fetch_k
    assert set(result["calls"]) == {"raw_ids", "raw_hits", "dense", "lexical", "hybrid", "hybrid_client",
                                    "hybrid_client_prepared",
                                    "supabase_hybrid"}
    raw_ids, raw_hits = result["calls"]["raw_ids"]["p50_ms"], result["calls"]["raw_hits"]["p50_ms"]
    for m in result["calls"].values():
        assert m["p50_ms"] > 0 and m["p95_ms"] >= m["p50_ms"]
        assert m["over_raw_ids"] == pytest.approx(m["p50_ms"] / raw_ids)
        assert m["over_raw_hits"] == pytest.approx(m["p50_ms"] / raw_hits)
    for mode in bench_profile.MODES:
        prof = result["profiles"][mode]
        # Every search went through sift.search once, and through its plain path.
        assert prof["functions"]["search"]["calls"] == 1
        assert prof["functions"]["_plain_legs"]["calls"] == 1
        assert prof["search_ms"] > prof["legs_ms"] > 0
        assert prof["outside_legs_ms"] == pytest.approx(prof["search_ms"] - prof["legs_ms"])
        assert prof["read_hits_ms"] > 0
    assert "_dense_ids" in result["profiles"]["dense"]["functions"]
    assert "_lexical_ids" in result["profiles"]["lexical"]["functions"]
    assert "_lexical_ids" not in result["profiles"]["dense"]["functions"]
    # The lexical leg's time is the legs' (its parse and its scoring).
    lexical = result["profiles"]["lexical"]
    assert lexical["legs_ms"] >= lexical["functions"]["_lexical_ids"]["total_ms"]
    assert "_dense_ids" not in result["profiles"]["lexical"]["functions"]
    # The schema the peers ran on is gone, the collection stays (--reuse keeps it next time).
    assert db.execute("select to_regnamespace('pgsift_peers')").fetchone() == (None,)
    # Walked (no exact scan), the dense and hybrid searches go through the walk function; the
    # table shows it in their columns alone, and _plain_hits in every mode's.
    Client(db).alter_collection("bench", exact_search_limit=0)
    again = bench_profile.run_profile(db, toy, collection="bench", queries=2, match_count=3, reuse=True,
                                      peers_too=False)
    assert "supabase_hybrid" not in again["calls"]
    table = bench_profile.format_table(again)
    assert "outside the legs" in table and "raw_hits" in table
    walk = db.execute("select sift._walk_name(%s, 'cosine', false, null, null)", (DIMS,)).fetchone()[0]
    rows = {line.split()[0]: [line[29 + 10 * i:38 + 10 * i].strip() for i in range(3)]
            for line in table.splitlines() if line.startswith("_")}
    assert list(again["profiles"]) == ["dense", "lexical", "hybrid"]
    assert all(float(cell) > 0 for cell in rows["_plain_hits"])
    assert float(rows[walk][0]) > 0 and rows[walk][1] == "" and float(rows[walk][2]) > 0


# -- seeds: a benchmark that samples draws the same sample from the same seed ----------------

def test_the_same_seed_draws_the_same_questions_and_another_seed_others():
    import random

    from pgsift.bench import fusion as bench_fusion
    from pgsift.bench import languages as bench_languages
    from pgsift.bench import structure as bench_structure

    # languages: seed 0 is the dataset README's sample, the one bench/README reports on.
    zero = bench_languages.sample_indices(13_090, 1000, 0)
    assert zero == bench_languages.sample_indices(13_090, 1000, 0)
    assert zero == np.random.default_rng(0).choice(13_090, 1000, replace=False).tolist()
    one = bench_languages.sample_indices(13_090, 1000, 1)
    assert one != zero and len(set(one)) == len(set(zero)) == 1000 and set(one) != set(zero)
    assert sorted(bench_languages.sample_indices(5, 1000, 3)) == [0, 1, 2, 3, 4]   # fewer: all of them
    # structure: --max-questions draws with random.Random(seed); without it, every question.
    questions = [bench_structure.Question(f"q{i}", f"question {i}", ("A", f"p{i}")) for i in range(200)]
    picked = bench_structure.sample_questions(questions, 20, 0)
    assert picked == bench_structure.sample_questions(questions, 20, 0)
    assert picked == random.Random(0).sample(questions, 20)
    assert set(picked) != set(bench_structure.sample_questions(questions, 20, 5))
    assert bench_structure.sample_questions(questions, None, 5) is questions
    # fusion: the tuning sample leaves out what bench languages reports on at that seed.
    tuning = bench_fusion.tuning_indices(13_090, 500, 0)
    assert tuning == bench_fusion.tuning_indices(13_090, 500, 0) and len(set(tuning)) == 500
    reported = np.random.default_rng(0).choice(13_090, 1000, replace=False).tolist()
    rest = [i for i in range(13_090) if i not in set(reported)]
    assert tuning == sorted(rest[i] for i in np.random.default_rng(1).choice(len(rest), 500, replace=False))
    other = bench_fusion.tuning_indices(13_090, 500, 2)
    assert other != tuning
    assert not set(other) & set(bench_languages.sample_indices(13_090, 1000, 2))


@pytest.mark.parametrize(("benchmark", "args", "default"), [
    ("languages", ["--dataset", "d"], 0), ("structure", ["--dataset", "d"], 0), ("fusion", ["--dataset", "d"], 0),
    ("legs", ["--dataset", "d"], 0), ("maxsim", [], 0), ("finalize", [], 0), ("ingest", [], 0),
    ("scale", [], 7), ("exact", [], 11)])
def test_every_benchmark_that_samples_takes_a_seed(benchmark, args, default):
    """--seed reaches the benchmark's run function (its default there is the CLI's: a run without
    --seed repeats the figures bench/README records)."""
    import importlib
    import inspect

    from pgsift.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["bench", benchmark, *args]).seed == default
    assert parser.parse_args(["bench", benchmark, *args, "--seed", "5"]).seed == 5
    run = getattr(importlib.import_module(f"pgsift.bench.{benchmark}"), f"run_{benchmark}")
    assert inspect.signature(run).parameters["seed"].default == default


def write_adaptive_beir(root: Path, rng: np.random.Generator, questions: int = 24) -> Path:
    """30 documents of filler and one rare word each; each question names one document's rare
    word and has a noisy copy of its vector (half train, half test)."""
    root.mkdir()
    docs = [{"_id": f"d{i}", "title": f"Paper {i}", "text": " ".join([*rng.choice(FILLER, size=6), f"rare{i}x"])}
            for i in range(30)]
    doc_emb = unit(rng.normal(size=(30, DIMS))).astype(np.float32)
    answer = rng.integers(0, 30, size=questions)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(
        json.dumps({"_id": f"q{j}", "text": f"rare{a}x {FILLER[j % len(FILLER)]}"}) + "\n"
        for j, a in enumerate(answer)))
    (root / "qrels").mkdir()
    for split, part in (("train", range(0, questions, 2)), ("test", range(1, questions, 2))):
        (root / "qrels" / f"{split}.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"q{j}\td{answer[j]}\t1\n" for j in part))
    emb = root / "embeddings" / "toy-model"
    emb.mkdir(parents=True)
    np.save(emb / "corpus.npy", doc_emb)
    np.save(emb / "queries.npy", unit(doc_emb[answer] + rng.normal(scale=0.8, size=(questions, DIMS)))
            .astype(np.float32))
    return root


def test_adaptive_fusion_is_sift_rrf(db):
    from pgsift.bench import adaptive

    rng = np.random.default_rng(5)
    for _ in range(20):
        dense = [int(i) for i in rng.permutation(60)[:rng.integers(0, 50)]]
        lexical = [int(i) for i in rng.permutation(60)[:rng.integers(0, 50)]]
        w = float(rng.choice(adaptive.WEIGHTS))
        legs = adaptive.Legs("q", [(c, 0.0) for c in dense], [(c, 0.0) for c in lexical])
        sql = [r[0] for r in db.execute(
            "select chunk_id from sift.rrf(%s::bigint[], %s::bigint[], %s, %s) order by fused_rank",
            [dense[:adaptive.FETCH_K], lexical[:adaptive.FETCH_K], w, adaptive.RRF_K]).fetchall()]
        assert adaptive.fuse(legs, w) == sql


def test_adaptive_rule_takes_each_thirds_best_weight():
    from pgsift.bench import adaptive

    # Questions 0-8: signal i; the low third scores best at 0.2, the middle at 0.5, the top at 0.8.
    values = {i: float(i) for i in range(9)}
    best = {0: 0.2, 1: 0.5, 2: 0.8}

    def score(i: int, w: float) -> float:
        return 1.0 - abs(w - best[i // 3])

    rule = adaptive.make_rule("s", values, list(range(9)), score)
    assert rule.weights == (0.2, 0.5, 0.8)
    assert [rule.weight(v) for v in (0.0, 4.0, 8.0, 100.0)] == [0.2, 0.5, 0.8, 0.8]
    # Cross-validated, every fold's rule is made without it: here still right for each.
    assert adaptive.cross_validated("s", values, list(range(9)), score, seed=0) == pytest.approx(1.0, abs=0.2)
    low, high = adaptive.bootstrap([0.1] * 10, seed=0)
    assert low == pytest.approx(0.1) and high == pytest.approx(0.1)


def test_run_adaptive_holds_the_rule_to_the_default_on_held_out_questions(db, tmp_path: Path):
    from pgsift.bench import adaptive

    folder = write_adaptive_beir(tmp_path / "adaptive", np.random.default_rng(11))
    result = adaptive.run_adaptive(db, [f"{folder}:toy-model"], seed=0)
    (row,) = result["datasets"]
    assert (row["tuning"], row["held_out"]) == (12, 12) and row["split"] == "train / test"
    assert row["signal"] in adaptive.SIGNALS and set(row["cv"]) == set(adaptive.SIGNALS)
    assert all(w in adaptive.WEIGHTS for w in row["weights"])
    assert row["ci"][0] <= row["gain"] <= row["ci"][1]
    assert row["gain"] == pytest.approx(row["adaptive_held_out"] - row["default_held_out"], abs=2e-4)
    assert result["verdict"].startswith("ships" if row["ci"][0] > 0 else "not shipped")
    assert "gain [95% CI]" in adaptive.format_table(result)
    assert db.execute("select count(*) from sift.collections").fetchone() == (0,)


def test_run_adaptive_needs_questions_to_tune_on(db, toy: Path):
    from pgsift.bench import adaptive

    with pytest.raises(InvalidArgument, match="1 tuning and 2 held-out questions"):
        adaptive.run_adaptive(db, [str(toy)])


def test_run_scale_reuse_on_a_database_without_the_corpus_builds_it(db):
    from pgsift.bench import scale as bench_scale

    # --reuse asks whether the corpus is there first: no collection is "no", not an error
    # (run_scale then builds it, as test_run_scale_times_pgsift_beside_the_peers does).
    assert bench_scale._existing(db, 1_000) is False
    Client(db).create_collection(bench_scale.COLLECTION, embedding_dims=4)
    assert bench_scale._existing(db, 1_000) is False   # there, but not this size
