"""BM25 in SQL against a plain Python BM25 over the same lexemes.

The oracle reads each chunk's lexemes and position counts straight from the
stored tsvector (what to_tsvector produced), computes N, avgdl, df and the
scores itself, and must agree with the lexical leg to 1e-9: through the
exhaustive path, through the impact lists (threshold algorithm, with lists
small enough to be read to the end and fall back on their floors), after
writes that move avgdl, and with per-call k1/b.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Client, Document

DIMS = 4
VOCAB = [f"w{i:03d}" for i in range(300)]


@pytest.fixture
def client(db) -> Client:
    """Every write through the client folds the statistics at once (refresh_backlog 1): these
    tests look at what each refresh did."""
    return Client(db, refresh_backlog=1)


def zipf_text(rng: np.random.Generator, length: int) -> str:
    # Heavy head: a few words occur in most chunks, most words are rare.
    ranks = np.minimum(rng.zipf(1.3, size=length), len(VOCAB)) - 1
    return " ".join(VOCAB[r] for r in ranks)


def corpus(rng: np.random.Generator, n_docs: int, prefix: str = "d") -> list[Document]:
    return [Document(source_uri=f"{prefix}{i}", title=None,
                     chunks=[Chunk(content=zipf_text(rng, int(rng.integers(5, 60))),
                                   embedding=unit(rng.normal(size=DIMS)))])
            for i in range(n_docs)]


def seeded_collection(client: Client, seed: int, docs: int):
    """Collection "c" holding `docs` random one-chunk documents; the generator goes on."""
    rng = np.random.default_rng(seed)
    col = client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", corpus(rng, docs))
    return rng, col


def python_bm25(db, collection_id: int, terms: list[str], k1: float, b: float) -> dict[int, float]:
    rows = db.execute(
        "select c.chunk_id, u.lexeme, array_length(u.positions, 1) from sift.chunks c, "
        "unnest(c.search_vector) u where c.collection_id = %s", [collection_id]).fetchall()
    tf: dict[int, Counter] = {}
    for chunk_id, lexeme, count in rows:
        tf.setdefault(chunk_id, Counter())[lexeme] = count
    n = len(tf)
    avgdl = sum(sum(c.values()) for c in tf.values()) / n
    df = Counter(lex for c in tf.values() for lex in c)
    scores = {}
    for chunk_id, counts in tf.items():
        dl = sum(counts.values())
        s = 0.0
        for t in set(terms):
            f = counts.get(t, 0)
            if f:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
        if s > 0:
            scores[chunk_id] = s
    return scores


def query_terms(db, text: str) -> list[str]:
    return db.execute("select (sift._parse_query(%s, array['english']::regconfig[])).terms", [text]).fetchone()[0] or []


def k1_b(col) -> tuple[float, float]:
    return col.settings["bm25_k1"], col.settings["bm25_b"]


def lexical_leg(client: Client, name: str, text: str, n: int, proven: bool | None = True,
                **knobs) -> list[tuple[int, float]]:
    """The lexical leg's top n; every hit says the top n is proven exact unless `proven` is None."""
    result = client.search(name, text, top_k=n, **knobs)
    assert all(h.found_by == "lexical" for h in result)
    if proven is not None:
        assert all(h.lexical_exact is proven for h in result)
    return [(h.chunk_id, h.lexical_score) for h in result]


def assert_same_top(sql: list[tuple[int, float]], oracle: dict[int, float], n: int) -> None:
    expected = sorted(oracle.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    assert [c for c, _ in sql] == [c for c, _ in expected]
    for (_, got), (_, want) in zip(sql, expected):
        assert got == pytest.approx(want, abs=1e-9, rel=0)


def random_queries(rng: np.random.Generator, count: int) -> list[str]:
    return [zipf_text(rng, int(rng.integers(1, 8))) for _ in range(count)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sql_bm25_equals_python_bm25(client, db, seed):
    rng = np.random.default_rng(seed)
    col = client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", corpus(rng, 80))
    for text in random_queries(rng, 15):
        oracle = python_bm25(db, col.collection_id, query_terms(db, text), *k1_b(col))
        assert_same_top(lexical_leg(client, "c", text, 30), oracle, 30)


def build_lists(db, list_size: int, **knobs) -> int:
    args = ", ".join(f"{k} => {v}" for k, v in knobs.items())
    return db.execute(f"select lists_built from sift.refresh_lexical_stats('c', min_df => 5, "
                      f"list_size => {list_size}, list_fraction => 0, rebuild => true"
                      f"{', ' + args if args else ''})").fetchone()[0]


def list_lengths(db) -> dict[str, int]:
    return dict(db.execute("select lexeme, sum(cardinality(chunk_ids)) from sift.term_blocks "
                           "group by 1").fetchall())


def assert_delta_counts(db) -> None:
    """Each list's delta_entries and delta_rows (what refreshes folded from the writers'
    pending rows) are what its delta holds, once every pending row is folded."""
    assert db.execute("select count(*) from sift.term_df_pending").fetchone()[0] == 0
    counted = {t: (e, r) for t, e, r in
               db.execute("select lexeme, delta_entries, delta_rows from sift.term_lists").fetchall()}
    held = {t: (e, r) for t, e, r in
            db.execute("select lexeme, sum(cardinality(chunk_ids)), count(*) from sift.term_deltas "
                       "group by 1").fetchall()}
    assert counted == {t: held.get(t, (0, 0)) for t in counted}
    assert set(held) <= set(counted)


def write_chunks(db, rng, collection_id: int, count: int, length: int, prefix: str) -> None:
    """Chunks written straight through SQL: no refresh runs, lists keep their deltas."""
    for i in range(count):
        doc_id = db.execute("insert into sift.documents (collection_id, source_uri) values (%s, %s) "
                            "returning document_id", [collection_id, f"{prefix}{i}"]).fetchone()[0]
        db.execute("insert into sift.chunks (document_id, ordinal, content, embedding) values (%s, 0, %s, %s)",
                   [doc_id, zipf_text(rng, length), str(unit(rng.normal(size=DIMS)).tolist())])


def assert_oracle(client, db, col, rng, queries: int, ns=(1, 5, 20), **knobs) -> None:
    for text in random_queries(rng, queries):
        oracle = python_bm25(db, col.collection_id, query_terms(db, text), *k1_b(col))
        for n in ns:
            assert_same_top(lexical_leg(client, "c", text, n, **knobs), oracle, n)


def test_impact_lists_give_the_exhaustive_answer(client, db):
    """Lists of 2-3 blocks force every path: deepening, lists read to the end, the floors."""
    rng, col = seeded_collection(client, seed=7, docs=500)
    assert build_lists(db, 250) > 10
    lengths = list_lengths(db)
    assert max(lengths.values()) == 250 and min(lengths.values()) < 250
    assert db.execute("select max(block_no) from sift.term_blocks").fetchone()[0] == 2
    assert_oracle(client, db, col, rng, 25)
    # and the rounds alone (whole lists, most of these, are summed otherwise)
    assert_oracle(client, db, col, rng, 25, lexical_list_limit=0)


def test_a_spent_budget_falls_back_to_exact_scoring_when_matches_are_few(client, db):
    rng, col = seeded_collection(client, seed=8, docs=400)
    build_lists(db, 120)
    assert_oracle(client, db, col, rng, 15, lexical_budget=100)
    assert_oracle(client, db, col, rng, 15, lexical_budget=100, lexical_list_limit=0)


def test_a_top_n_said_to_be_exact_is_exact_at_every_budget(client, db):
    """The rounds alone (no whole lists, no exhaustive fallback) at budgets that start at the
    budget's depth (it is at most three times the first round's) or with a first round, and
    candidates cut to what the scoring can reach: whenever the leg says its top n is exact,
    it is the exhaustive one, and it says so often."""
    rng, col = seeded_collection(client, seed=12, docs=500)
    build_lists(db, 250)
    said = total = 0
    for text in random_queries(rng, 12):
        oracle = python_bm25(db, col.collection_id, query_terms(db, text), *k1_b(col))
        for budget in (300, 900, 3000):
            for n in (1, 10, 40):
                result = client.search("c", text, top_k=n, fetch_k=n, lexical_budget=budget,
                                       lexical_exact_limit=0, lexical_list_limit=0)
                flags = {h.lexical_exact for h in result}
                assert len(flags) <= 1
                total += 1
                if flags == {True}:
                    said += 1
                    assert_same_top([(h.chunk_id, h.lexical_score) for h in result], oracle, n)
    assert said > total / 2, (said, total)


def test_past_the_budget_and_the_exact_limit_answers_are_bounded_and_exactly_scored(client, db):
    rng, col = seeded_collection(client, seed=9, docs=400)
    build_lists(db, 3)   # lists of 3 chunks: far too short to prove a top 10
    same = unproven = 0
    queries = [" ".join(VOCAB[i] for i in rng.choice(6, size=3, replace=False)) for _ in range(20)]
    for text in queries:
        oracle = python_bm25(db, col.collection_id, query_terms(db, text), *k1_b(col))
        result = client.search("c", text, top_k=10, lexical_budget=100, lexical_exact_limit=0)
        got = [(h.chunk_id, h.lexical_score) for h in result]
        # every chunk returned carries its exact score, best first; some may be missing
        assert 3 <= len(got) <= 10
        for chunk_id, score in got:
            assert score == pytest.approx(oracle[chunk_id], abs=1e-9, rel=0)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        expected = sorted(oracle.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        same += [c for c, _ in got] == [c for c, _ in expected]
        # never in silence: an answer that is not the exhaustive one says it is unproven
        flags = {h.lexical_exact for h in result}
        assert len(flags) == 1 and (flags == {True}) <= ([c for c, _ in got] == [c for c, _ in expected])
        unproven += flags == {False}
    assert same < len(queries)   # the bound really was hit (not every answer is the exhaustive one)
    assert unproven >= len(queries) - same and unproven > 0
    explained = client.explain("c", queries[0], top_k=10, lexical_budget=100, lexical_exact_limit=0)
    assert {e.lexical_exact for e in explained} <= {True, False} and explained[0].lexical_exact is not None
    # and lifting the limits gives the exhaustive answer again
    text = queries[0]
    oracle = python_bm25(db, col.collection_id, query_terms(db, text), *k1_b(col))
    assert_same_top(lexical_leg(client, "c", text, 10), oracle, 10)


def test_a_collection_without_a_word_answers_text_with_its_dense_leg_alone(client, db):
    """Chunks of punctuation and emoji only: no lexeme anywhere (average length 0). A text
    query finds nothing lexically, with either scorer, and never errs; the dense leg answers."""
    rng = np.random.default_rng(4)
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", [Document(source_uri=f"p{i}", title=None,
                                           chunks=[Chunk(content="!!! ... \U0001F642 ???",
                                                         embedding=unit(rng.normal(size=DIMS)))])
                                  for i in range(5)])
    assert db.execute("select sum(chunks), sum(tokens) from sift.collection_lexical_stats").fetchone() == (5, 0)
    for scorer in ("bm25", "ts_rank_cd"):
        assert len(client.search("c", "hello world", top_k=5, lexical_scorer=scorer)) == 0
        hits = client.search("c", "hello world", embedding=unit(rng.normal(size=DIMS)), top_k=5,
                             lexical_scorer=scorer)
        assert len(hits) == 5 and {h.found_by for h in hits} == {"dense"}
        assert all(h.lexical_rank is None for h in hits)


def test_bad_budget_knobs_are_refused_and_session_settings_ignored(client, db):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", corpus(np.random.default_rng(1), 20))
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.search("c", "w000 w001", lexical_budget=-1)
    assert info.value.knob == "lexical_budget"
    with pytest.raises(pgsift.InvalidKnob, match="JSON number"):
        client.search("c", "w000 w001", lexical_exact_limit="lots")
    for bad in (-1, 2_000_000_001):
        with pytest.raises(pgsift.InvalidKnob) as info:
            client.search("c", "w000 w001", lexical_list_limit=bad)
        assert info.value.knob == "lexical_list_limit"
    # The budget used to be a session setting: behind a transaction pooler one client's
    # garbage reached every other client's searches. It is a knob now; the old settings are
    # nothing pgsift reads.
    db.execute("set pgsift.lexical_budget = 'lots'")
    db.execute("set pgsift.lexical_exact_limit = '-5'")
    assert len(client.search("c", "w000 w001", top_k=5)) == 5
    with pytest.raises(psycopg.Error) as raw:
        db.execute("select * from sift.refresh_lexical_stats('c', list_size => 0)")
    assert raw.value.sqlstate == "SF003" and "list_size" in raw.value.diag.message_primary


def test_deltas_deletions_and_updates_keep_lists_exact(client, db):
    rng, col = seeded_collection(client, seed=12, docs=300)
    build_lists(db, 150)
    # new chunks beating a list's floor wait in its delta until a refresh
    write_chunks(db, rng, col.collection_id, 60, 40, "new")
    assert db.execute("select sum(cardinality(chunk_ids)) from sift.term_deltas").fetchone()[0] > 100
    assert_oracle(client, db, col, rng, 10)
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 5, list_size => 150, "
               "list_fraction => 0)")
    deltas = dict(db.execute("select lexeme, sum(cardinality(chunk_ids)) from sift.term_deltas "
                             "group by 1").fetchall())
    assert deltas and max(deltas.values()) < 100          # the long deltas were merged into blocks
    assert_delta_counts(db)
    assert max(list_lengths(db).values()) == 150
    assert_oracle(client, db, col, rng, 10)
    # deleted chunks stay in blocks and never come back
    dead = [r[0] for r in db.execute("select chunk_id from sift.chunks order by chunk_id limit 120")]
    db.execute("delete from sift.chunks where chunk_id = any(%s)", [dead])
    assert db.execute("select count(*) from sift.term_blocks where chunk_ids && %s::bigint[]",
                      [dead]).fetchone()[0] > 0
    assert_oracle(client, db, col, rng, 10)
    for n in (1, 10):
        assert not set(dead) & {c for c, _ in lexical_leg(client, "c", "w000 w001 w002", n)}
    # a third of the chunks gone: the next refresh rebuilds every list without them, the
    # deltas new chunks grew meanwhile with them (each list's count back to 0 with its delta)
    write_chunks(db, rng, col.collection_id, 10, 40, "late")
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 5, list_size => 150, "
               "list_fraction => 0)")
    assert db.execute("select count(*) from sift.term_blocks where chunk_ids && %s::bigint[]",
                      [dead]).fetchone()[0] == 0
    assert db.execute("select count(*) from sift.term_deltas").fetchone()[0] == 0
    assert_delta_counts(db)
    # a re-analysed chunk (new context) takes its terms' lists with it until the refresh
    target = db.execute("select chunk_id from sift.chunks order by chunk_id desc limit 1").fetchone()[0]
    write_chunks(db, rng, col.collection_id, 5, 40, "later")
    assert db.execute("select count(*) from sift.term_deltas where lexeme in ('w000', 'w001')").fetchone()[0] > 0
    db.execute("update sift.chunks set context = 'w000 w000 w000 w001' where chunk_id = %s", [target])
    assert db.execute("select count(*) from sift.term_lists where lexeme in ('w000', 'w001')").fetchone()[0] == 0
    # (their deltas with them: sift._term_lists_gone, where a foreign key cascaded)
    assert db.execute("select count(*) from sift.term_deltas where lexeme in ('w000', 'w001')").fetchone()[0] == 0
    assert_oracle(client, db, col, rng, 10)
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 5, list_size => 150, "
               "list_fraction => 0)")
    assert db.execute("select count(*) from sift.term_lists where lexeme in ('w000', 'w001')").fetchone()[0] == 2
    assert_delta_counts(db)
    assert_oracle(client, db, col, rng, 10)


LIST_ENTRIES = """
select l.lexeme, l.floor_impact, l.avgdl_ref, u.chunk_id, u.tf, u.dl,
       sift._bm25_impact(u.tf, u.dl, l.avgdl_ref, l.k1_ref, l.b_ref)
from sift.term_lists l
join (select b.lexeme, x.chunk_id, x.tf, x.dl
      from sift.term_blocks b, unnest(b.chunk_ids, b.tfs, b.dls) x(chunk_id, tf, dl)
      union all
      select d.lexeme, x.chunk_id, x.tf, x.dl
      from sift.term_deltas d, unnest(d.chunk_ids, d.tfs, d.dls) x(chunk_id, tf, dl)) u using (lexeme)
"""


def test_a_merge_keeps_the_best_entries_of_a_list_and_its_delta(client, db):
    """A delta of a quarter of its list (or 100 entries) is merged into the list's blocks: the
    list then holds, best first in blocks of 100, the list_size best of its entries and its
    delta's above its floor (each at the list's reference), its floor is the first left out,
    and its delta and counts are empty. Checked entry by entry against that merge done here."""
    rng, col = seeded_collection(client, seed=18, docs=300)
    build_lists(db, 150)
    write_chunks(db, rng, col.collection_id, 200, 40, "new")
    before: dict[str, list] = {}
    for lexeme, floor, ref, chunk_id, tf, dl, impact in db.execute(LIST_ENTRIES).fetchall():
        before.setdefault(lexeme, [floor, ref, []])[2].append((impact, chunk_id, tf, dl))
    in_delta = dict(db.execute("select lexeme, sum(cardinality(chunk_ids)) from sift.term_deltas "
                               "group by 1").fetchall())
    listed = list_lengths(db)
    due = {t for t, n in in_delta.items() if n >= max(100, listed.get(t, 0) // 4)}
    assert len(due) >= 3 and any(listed.get(t, 0) == 150 for t in due)   # capped lists among them
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 5, list_size => 150, "
               "list_fraction => 0)")
    rows = {t: (f, ref, e, de, dr) for t, f, ref, e, de, dr in db.execute(
        "select lexeme, floor_impact, avgdl_ref, entries, delta_entries, delta_rows from sift.term_lists")}
    blocks: dict[str, list] = {}
    for lexeme, block_no, top, ids, tfs, dls in db.execute(
            "select lexeme, block_no, max_impact, chunk_ids, tfs, dls from sift.term_blocks "
            "order by lexeme, block_no"):
        blocks.setdefault(lexeme, []).append((block_no, top, list(zip(ids, tfs, dls))))
    merged = [t for t in due if rows[t][1] == before[t][1]]   # (not rebuilt at a new reference)
    assert len(merged) >= 3
    for t in merged:
        floor, _, entries = before[t]
        ranked = sorted((e for e in entries if e[0] > floor), key=lambda e: (-e[0], e[1]))
        new_floor = max(floor, ranked[150][0] if len(ranked) > 150 else 0)
        kept = [e for e in ranked[:150] if e[0] > new_floor]
        assert rows[t][0] == new_floor and rows[t][2] == len(kept) and rows[t][3:] == (0, 0)
        assert [b[0] for b in blocks.get(t, [])] == list(range(-(-len(kept) // 100)))
        assert [e for b in blocks.get(t, []) for e in b[2]] == [(c, tf, dl) for _, c, tf, dl in kept]
        assert [b[1] for b in blocks.get(t, [])] == [kept[100 * i][0] for i in range(len(blocks.get(t, [])))]
    assert db.execute("select count(*) from sift.term_deltas where lexeme = any (%s)", [merged]).fetchone()[0] == 0
    assert_delta_counts(db)
    assert_oracle(client, db, col, rng, 10)


def test_0019_counts_the_deltas_and_pending_rows_it_finds(client, db):
    """Migration 0019 counts each list's existing delta, and marks the pending rows written
    before it as growing every term they counted (by 0): the first refresh after it still
    merges the deltas due, as the code before would have."""
    rng, col = seeded_collection(client, seed=14, docs=300)
    build_lists(db, 150)
    # Another collection's 20,000 terms: the refresh after the writes below looks up the
    # folded terms by key (a fold of a large share of the terms looks at every list anyway).
    client.create_collection("pad", embedding_dims=DIMS)
    client.upsert_documents("pad", [Document(source_uri="pad", chunks=[Chunk(
        content=" ".join(f"p{i:05d}" for i in range(20000)), embedding=unit(rng.normal(size=DIMS)))])])
    db.execute("analyze sift.term_df")   # (its row count decides)
    write_chunks(db, rng, col.collection_id, 200, 40, "new")     # deltas and pending rows
    before = dict(db.execute("select lexeme, sum(cardinality(chunk_ids)) from sift.term_deltas "
                             "group by 1").fetchall())
    assert max(before.values()) >= 100                            # some due for a merge
    # As 0.1.x left them: no counts on the lists, none on the pending rows.
    db.execute("update sift.term_lists set delta_entries = 0")
    db.execute("update sift.term_df_pending set delta_lexemes = null, delta_entries = null")
    migration = next(m for m in pgsift.schema.migration_files() if m.version == "0019_delta_entries")
    updates = [st for st in migration.text.split(";") if re.search(r"^update sift\.", st, re.M)]
    assert len(updates) == 2
    for statement in updates:
        db.execute(statement)
    count_delta_rows(db)                                         # (0027 after it)
    counted = dict(db.execute("select lexeme, delta_entries from sift.term_lists "
                              "where delta_entries > 0").fetchall())
    assert counted == before
    assert db.execute("select bool_and(delta_lexemes = lexemes) from sift.term_df_pending").fetchone()[0]
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 5, list_size => 150, "
               "list_fraction => 0)")
    deltas = dict(db.execute("select lexeme, sum(cardinality(chunk_ids)) from sift.term_deltas "
                             "group by 1").fetchall())
    assert deltas and max(deltas.values()) < 100          # the long deltas were merged
    assert_delta_counts(db)
    assert_oracle(client, db, col, rng, 10)
    # A pending row written by hand with arrays of unequal length fails no refresh.
    db.execute("insert into sift.term_df_pending (collection_id, bucket, lexemes, counts, delta_lexemes, "
               "delta_entries) values (%s, 0, '{}', '{}', '{w000, w001}', '{1}')", [col.collection_id])
    db.execute("select * from sift.refresh_lexical_stats('c')")


def test_a_delta_of_many_write_statements_is_read_as_one_row(client, db):
    """Each write statement leaves its own delta row in every list it adds to, and a search
    reads them all; a refresh merges a delta of 32 rows or more into one row (the lists found
    by their count of rows, delta_rows), with the same entries, so rankings stay exact."""
    rng, col = seeded_collection(client, seed=16, docs=300)
    build_lists(db, 150)
    write_chunks(db, rng, col.collection_id, 60, 40, "new")          # 60 statements, no refresh
    rows_of = "select lexeme, count(*) from sift.term_deltas group by 1"
    entries_of = ("select d.lexeme, array_agg(array[u.chunk_id, u.tf, u.dl] order by u.chunk_id, u.tf, u.dl) "
                  "from sift.term_deltas d, unnest(d.chunk_ids, d.tfs, d.dls) u(chunk_id, tf, dl) group by 1")
    before_rows = dict(db.execute(rows_of).fetchall())
    before_entries = dict(db.execute(entries_of).fetchall())
    assert max(before_rows.values()) >= 32
    # the lists the refresh merges into their blocks (a quarter of the list) apart
    kept = {t for t, e in before_entries.items() if len(e) < 100}
    assert any(before_rows[t] >= 32 for t in kept)                   # some to merge into one row
    assert_oracle(client, db, col, rng, 5)
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 5, list_size => 150, "
               "list_fraction => 0)")
    after_rows = dict(db.execute(rows_of).fetchall())
    after_entries = dict(db.execute(entries_of).fetchall())
    assert max(after_rows.values()) < 32
    for t in kept:
        assert after_entries[t] == before_entries[t]                 # the same entries ...
        assert after_rows[t] == (1 if before_rows[t] >= 32 else before_rows[t])   # ... in one row
    assert_delta_counts(db)
    assert_oracle(client, db, col, rng, 10)
    # A merged delta that gathers 32 rows again is merged again, its earlier row with them.
    merged = {t for t in kept if before_rows[t] >= 32}
    write_chunks(db, rng, col.collection_id, 40, 40, "more")
    grown = dict(db.execute(rows_of).fetchall())
    again = {t for t in merged if grown.get(t, 0) >= 32}
    assert again
    before_entries = dict(db.execute(entries_of).fetchall())
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 5, list_size => 150, "
               "list_fraction => 0)")
    after_rows, after_entries = dict(db.execute(rows_of).fetchall()), dict(db.execute(entries_of).fetchall())
    still = again & set(after_entries)                               # (the rest merged into their lists)
    assert still
    for t in still:
        assert after_rows[t] == 1 and after_entries[t] == before_entries[t]
    assert max(after_rows.values()) < 32
    assert_delta_counts(db)
    assert_oracle(client, db, col, rng, 10)
    # Migration 0027 counts the rows of the deltas that exist when it runs, less those of
    # statements still pending, whose fold adds them.
    write_chunks(db, rng, col.collection_id, 5, 40, "late")
    count_delta_rows(db)
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 5, list_size => 150, "
               "list_fraction => 0)")
    assert_delta_counts(db)


def count_delta_rows(db) -> None:
    """Migration 0027's count of each list's delta rows, over lists as an earlier version left
    them (no count)."""
    db.execute("update sift.term_lists set delta_rows = 0")
    migration = next(m for m in pgsift.schema.migration_files() if m.version == "0027_delta_rows")
    updates = [st for st in migration.text.split(";") if re.search(r"^update sift\.", st, re.M)]
    assert len(updates) == 1
    db.execute(updates[0])


PENDING_TOTALS = """
select u.lexeme, sum(u.n) from sift.term_df_pending p, unnest(p.lexemes, p.counts) u(lexeme, n) group by 1
"""
DELTA_TOTALS = """
select u.lexeme, sum(u.n) from sift.term_df_pending p, unnest(p.delta_lexemes, p.delta_entries) u(lexeme, n)
group by 1
"""


def test_pending_counts_are_bucketed_and_searches_read_them_exactly(client, db):
    """A write statement leaves one row of pending counts per bucket of the lexemes it
    changed, each lexeme in its own bucket's row, so a search reads only its terms' rows;
    searches before the refresh still rank as exhaustive BM25 over what is written."""
    rng, col = seeded_collection(client, seed=15, docs=300)
    build_lists(db, 150)
    write_chunks(db, rng, col.collection_id, 30, 40, "new")          # 30 statements, no refresh
    db.execute("delete from sift.documents where source_uri = 'd3'")   # and a deletion's, unrefreshed
    rows = db.execute("select bucket, lexemes from sift.term_df_pending").fetchall()
    assert len(rows) > 64                                              # rows of many statements
    assert all(b == db.execute("select sift._pending_bucket(%s)", [lex]).fetchone()[0]
               for b, lexemes in rows[:200] for lex in lexemes)
    assert db.execute("select bool_and(b.ok) from (select bucket, bool_and(sift._pending_bucket(u.l) = bucket) "
                      "as ok from sift.term_df_pending p, unnest(p.lexemes) u(l) group by 1) b").fetchone()[0]
    assert max(len(lexemes) for _, lexemes in rows) < 100              # small rows, stored inline
    assert_oracle(client, db, col, rng, 10)
    db.execute("select * from sift.refresh_lexical_stats('c')")
    assert_delta_counts(db)
    assert_oracle(client, db, col, rng, 5)


def test_0020_splits_the_pending_rows_it_finds(client, db):
    """Migration 0020 splits each pending row of every lexeme (as 0.1.x and 0019 wrote them)
    into one row per bucket, counts and delta counts alike; searches and the refresh after it
    answer as before."""
    rng, col = seeded_collection(client, seed=16, docs=300)
    build_lists(db, 150)
    write_chunks(db, rng, col.collection_id, 40, 40, "new")
    db.execute("delete from sift.documents where source_uri = 'd5'")   # (no refresh, as the client's)
    totals, deltas = dict(db.execute(PENDING_TOTALS).fetchall()), dict(db.execute(DELTA_TOTALS).fetchall())
    assert deltas and max(deltas.values()) > 0
    # As 0019 left them: a row of every lexeme per statement (here one for the writes, with
    # their deltas, and one for the deletion, with none), no bucket column, the old index.
    db.execute("""
        create temp table old_rows as
        select x.collection_id, array_agg(x.lexeme) as lexemes, array_agg(x.n) as counts, x.writes
        from (select p.collection_id, u.lexeme, sum(u.n) as n, u.n > 0 as writes
              from sift.term_df_pending p, unnest(p.lexemes, p.counts) u(lexeme, n)
              group by 1, 2, 4) x
        group by x.collection_id, x.writes""")
    db.execute("""
        create temp table old_deltas as
        select u.lexeme, sum(u.n)::integer as n
        from sift.term_df_pending p, unnest(p.delta_lexemes, p.delta_entries) u(lexeme, n) group by 1""")
    db.execute("delete from sift.term_df_pending")
    db.execute("alter table sift.term_df_pending drop column bucket")
    db.execute("create index term_df_pending_idx on sift.term_df_pending (collection_id)")
    db.execute("""
        insert into sift.term_df_pending (collection_id, lexemes, counts, delta_lexemes, delta_entries)
        select o.collection_id, o.lexemes, o.counts,
               case when o.writes then (select array_agg(d.lexeme order by d.lexeme) from old_deltas d) end,
               case when o.writes then (select array_agg(d.n order by d.lexeme) from old_deltas d) end
        from old_rows o""")
    # And one written by hand: deltas only, a lexeme twice.
    db.execute("insert into sift.term_df_pending (collection_id, lexemes, counts, delta_lexemes, delta_entries) "
               "values (%s, '{w000, w000}', '{100, 200}', '{w001, w002}', '{1000, 2000}')", [col.collection_id])
    assert db.execute("select count(*) from sift.term_df_pending").fetchone()[0] == 3
    migration = next(m for m in pgsift.schema.migration_files() if m.version == "0020_pending_buckets")
    db.execute(migration.text)
    assert dict(db.execute(PENDING_TOTALS).fetchall()) == {**totals, "w000": totals.get("w000", 0) + 300}
    assert dict(db.execute(DELTA_TOTALS).fetchall()) == {
        **deltas, "w001": deltas.get("w001", 0) + 1000, "w002": deltas.get("w002", 0) + 2000}
    assert db.execute("select max(cardinality(array_positions(p.lexemes, 'w000'))) "
                      "from sift.term_df_pending p").fetchone()[0] == 1   # summed: once a row
    # The hand row goes again (its deltas have no delta rows behind them to count).
    db.execute("""
        delete from sift.term_df_pending p where exists (
            select 1 from unnest(p.delta_lexemes, p.delta_entries) u(l, n)
            where (u.l, u.n) in (('w001', 1000), ('w002', 2000)))
           or (p.lexemes = '{w000}' and p.counts = '{300}')""")
    assert dict(db.execute(PENDING_TOTALS).fetchall()) == totals
    assert dict(db.execute(DELTA_TOTALS).fetchall()) == deltas
    assert db.execute("select count(*) from sift.term_df_pending where delta_lexemes is null").fetchone()[0] > 0
    assert db.execute("select bool_and(sift._pending_bucket(u.l) = p.bucket) from sift.term_df_pending p, "
                      "unnest(p.lexemes) u(l)").fetchone()[0]
    assert db.execute("select bool_and(sift._pending_bucket(u.l) = p.bucket) from sift.term_df_pending p, "
                      "unnest(p.delta_lexemes) u(l)").fetchone()[0]
    # One row per bucket each old row had lexemes in.
    assert db.execute("select count(*) from sift.term_df_pending").fetchone()[0] == db.execute(
        "select count(distinct (o.writes, sift._pending_bucket(u.l))) from old_rows o, unnest(o.lexemes) u(l)"
    ).fetchone()[0] >= 32
    count_delta_rows(db)                                         # (0027 after it)
    assert_oracle(client, db, col, rng, 10)
    db.execute("select * from sift.refresh_lexical_stats('c')")
    assert_delta_counts(db)
    assert_oracle(client, db, col, rng, 5)


def test_one_pass_build_with_sampled_cutoffs_gives_valid_lists(client, db):
    """Many lists at once are built in one pass over the collection, each term's
    chunks cut at an impact estimated from a sample; the lists stay exact."""
    rng = np.random.default_rng(13)
    col = client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", [Document(source_uri=f"d{i}", title=None,
                                           chunks=[Chunk(content=zipf_text(rng, 300),
                                                         embedding=unit(rng.normal(size=DIMS)))])
                                  for i in range(400)])
    build_lists(db, 40)
    total_df, n = db.execute("select (select sum(df) from sift.term_df t join sift.term_lists l "
                             "using (collection_id, lexeme)), (select count(*) from sift.chunks)").fetchone()
    assert total_df > 20 * n                 # so the sampled one-pass build ran
    lengths = list_lengths(db)
    assert max(lengths.values()) == 40
    floors = dict(db.execute("select lexeme, floor_impact from sift.term_lists").fetchall())
    # every chunk outside a list scores at most its floor (at the list's reference)
    worst = db.execute("""
        select max(sift._bm25_impact(array_length(u.positions, 1), c.lexical_length, l.avgdl_ref,
                                     l.k1_ref, l.b_ref) - l.floor_impact)
        from sift.chunks c, unnest(c.search_vector) u, sift.term_lists l
        where l.lexeme = u.lexeme and l.collection_id = c.collection_id
          and not exists (select 1 from sift.term_blocks b where b.lexeme = l.lexeme
                          and c.chunk_id = any (b.chunk_ids))""").fetchone()[0]
    assert worst <= 1e-12 and floors
    assert_oracle(client, db, col, rng, 15)


def test_lists_stay_exact_when_avgdl_moves_without_a_refresh(client, db):
    rng, col = seeded_collection(client, seed=11, docs=100)
    build_lists(db, 20)
    # Longer chunks written straight through SQL: no refresh, the lists' avgdl is stale.
    for i in range(30):
        doc_id = db.execute("insert into sift.documents (collection_id, source_uri) values (%s, %s) "
                            "returning document_id", [col.collection_id, f"long{i}"]).fetchone()[0]
        db.execute("insert into sift.chunks (document_id, ordinal, content, embedding) values (%s, 0, %s, %s)",
                   [doc_id, zipf_text(rng, 200), str(unit(rng.normal(size=DIMS)).tolist())])
    for text in random_queries(rng, 20):
        oracle = python_bm25(db, col.collection_id, query_terms(db, text), *k1_b(col))
        assert_same_top(lexical_leg(client, "c", text, 10), oracle, 10)


def test_per_call_k1_b_and_the_ts_rank_cd_knob(client, db):
    _rng, col = seeded_collection(client, seed=5, docs=120)
    build_lists(db, 10)
    text = "w000 w001 w007 w050"
    oracle = python_bm25(db, col.collection_id, query_terms(db, text), 2.0, 0.9)
    assert_same_top(lexical_leg(client, "c", text, 15, bm25_k1=2.0, bm25_b=0.9), oracle, 15)
    cd = client.search("c", text, top_k=15, lexical_scorer="ts_rank_cd")
    expected = db.execute(
        "select chunk_id from sift.chunks where search_vector @@ sift.lexical_query(%s) "
        "order by ts_rank_cd(search_vector, sift.lexical_query(%s)) desc, chunk_id limit 15",
        [text, text]).fetchall()
    assert [h.chunk_id for h in cd] == [r[0] for r in expected]
    client.alter_collection("c", lexical_scorer="ts_rank_cd")
    assert [h.chunk_id for h in client.search("c", text, top_k=15)] == [r[0] for r in expected]


def recount(db, collection_id: int) -> tuple[tuple, dict[str, int]]:
    totals = db.execute("select count(*), coalesce(sum(lexical_length), 0) from sift.chunks "
                        "where collection_id = %s", [collection_id]).fetchone()
    df = dict(db.execute("select u.lexeme, count(*) from sift.chunks c, unnest(c.search_vector) u "
                         "where c.collection_id = %s group by 1", [collection_id]).fetchall())
    return tuple(int(x) for x in totals), df


def ledger(db, collection_id: int) -> tuple[tuple, dict[str, int]]:
    totals = db.execute("select coalesce(sum(chunks), 0), coalesce(sum(tokens), 0) "
                        "from sift.collection_lexical_stats where collection_id = %s",
                        [collection_id]).fetchone()
    df = dict(db.execute(
        "select lexeme, sum(df) from (select lexeme, df from sift.term_df where collection_id = %s "
        "union all select u.l, u.n from sift.term_df_pending p, unnest(p.lexemes, p.counts) u(l, n) "
        "where p.collection_id = %s) x group by 1 having sum(df) <> 0",
        [collection_id, collection_id]).fetchall())
    return tuple(int(x) for x in totals), {k: int(v) for k, v in df.items()}


def test_statistics_match_a_recount_after_concurrent_writers(client, db, dsn):
    rng = np.random.default_rng(3)
    col = client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", corpus(rng, 40, prefix="base"))
    # Lists for terms in 3 chunks or more (kept by every refresh after), so the writers grow
    # their deltas too.
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 3, list_size => 20)")
    assert db.execute("select count(*) from sift.term_lists").fetchone()[0] > 0
    errors: list[Exception] = []

    def writer(worker: int) -> None:
        try:
            local = np.random.default_rng(100 + worker)
            with psycopg.connect(dsn, autocommit=True) as conn:
                c = Client(conn)
                for round_ in range(3):
                    # new documents, a replacement of a shared one, and a delete
                    c.upsert_documents("c", corpus(local, 10, prefix=f"w{worker}-{round_}-"),
                                       refresh_every=4)
                    c.upsert_documents("c", corpus(local, 1, prefix=f"base{worker}"))
                    c.delete_document("c", f"w{worker}-{round_}-3")
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ledger(db, col.collection_id) == recount(db, col.collection_id)
    client.refresh_lexical_stats("c")
    assert ledger(db, col.collection_id) == recount(db, col.collection_id)
    pending = db.execute("select count(*) from sift.term_df_pending").fetchone()[0]
    assert pending == 0
    assert db.execute("select count(*) from sift.term_deltas").fetchone()[0] > 0
    assert_delta_counts(db)
    # and the answers are still the oracle's
    text = "w000 w003 w020"
    oracle = python_bm25(db, col.collection_id, query_terms(db, text), *k1_b(col))
    assert_same_top(lexical_leg(client, "c", text, 10), oracle, 10)


def test_dropping_a_collection_leaves_no_statistics(client, db):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", corpus(np.random.default_rng(1), 20))
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 2)")
    # a write after the refresh leaves list deltas, which go with their lists
    client.upsert_documents("c", corpus(np.random.default_rng(2), 5, prefix="late"))
    assert db.execute("select count(*) from sift.term_deltas").fetchone()[0] > 0
    client.drop_collection("c")
    for table in ("collection_lexical_stats", "term_df", "term_df_pending", "term_lists", "term_blocks",
                  "term_deltas"):
        assert db.execute(f"select count(*) from sift.{table}").fetchone()[0] == 0


def test_ten_thousand_distinct_terms_are_capped(client, db):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", corpus(np.random.default_rng(2), 30))
    text = " ".join(f"term{i}" for i in range(10_000)) + " w000"
    terms = query_terms(db, text)
    assert len(terms) <= 128
    assert client.search("c", text, top_k=5) is not None


def test_the_lexical_flag_is_null_where_the_leg_did_not_run(client, db):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", corpus(np.random.default_rng(3), 20))
    dense = client.search("c", embedding=unit(np.ones(DIMS)), top_k=3)
    assert dense and all(h.lexical_exact is None for h in dense)
    hybrid = client.search("c", VOCAB[0], embedding=unit(np.ones(DIMS)), top_k=5)
    assert all(h.lexical_exact is True for h in hybrid)               # per call: on every hit
    assert all(c.lexical_exact is True for c in client.candidates("c", VOCAB[0], top_k=5))


def test_an_empty_unproven_answer_still_says_so(client, db):
    """Past the budget, nothing the leg read passes the filter although a chunk matches: the
    lexical leg comes back empty, and the hits the dense leg found still say it is unproven."""
    _rng, col = seeded_collection(client, seed=9, docs=400)
    build_lists(db, 3)
    text = " ".join(VOCAB[i] for i in range(3))
    terms = query_terms(db, text)
    listed = [r[0] for r in db.execute("select distinct unnest(chunk_ids) from sift.term_blocks "
                                       "where collection_id = %s and lexeme = any(%s)",
                                       [col.collection_id, terms]).fetchall()]
    target = db.execute("select c.chunk_id, c.document_id from sift.chunks c where c.collection_id = %s "
                        "and c.search_vector @@ to_tsquery('simple', %s) and not (c.chunk_id = any(%s)) "
                        "order by c.chunk_id limit 1",
                        [col.collection_id, " | ".join(terms), listed]).fetchone()
    db.execute("update sift.documents set metadata = '{\"only\": true}' where document_id = %s", [target[1]])
    knobs = dict(filter={"only": True}, embedding=unit(np.ones(DIMS)), top_k=10)
    bounded = client.search("c", text, lexical_budget=100, lexical_exact_limit=0, **knobs)
    assert [h.chunk_id for h in bounded] == [target[0]] and bounded[0].found_by == "dense"
    assert bounded[0].lexical_exact is False
    exhaustive = client.search("c", text, **knobs)     # default limits: it is found, and proven
    assert [(h.chunk_id, h.found_by, h.lexical_exact) for h in exhaustive] == [(target[0], "both", True)]


def test_a_refresh_looks_at_the_terms_it_folds_and_at_every_term_when_min_df_changes(client, db):
    """A refresh considers only the terms its fold changed (the others cannot have crossed
    min_df), with nested loops on when they are a small share of the vocabulary; called with
    another min_df than its lists were built under (or after an upgrade, none recorded), every
    term. Either way the lists are those of the terms in at least min_df chunks, and exact."""
    rng, col = seeded_collection(client, seed=21, docs=200)
    # Another collection's 3,000 terms: the fold is then a small share of the table's terms,
    # and every step below looks its terms up by key (a large share scans them all).
    client.create_collection("pad", embedding_dims=DIMS)
    client.upsert_documents("pad", [Document(source_uri="pad", chunks=[Chunk(
        content=" ".join(f"p{i:04d}" for i in range(3000)), embedding=unit(rng.normal(size=DIMS)))])])
    db.execute("analyze sift.term_df")   # (its row count decides)

    def refresh(min_df: int, **more: object) -> None:
        args = "".join(f", {k} => {v}" for k, v in more.items())
        db.execute(f"select * from sift.refresh_lexical_stats('c', min_df => %s, list_size => 40, "
                   f"list_fraction => 0{args})", [min_df])

    def listed() -> set[str]:
        return {r[0] for r in db.execute("select lexeme from sift.term_lists where collection_id = %s",
                                         [col.collection_id])}

    def check(min_df: int) -> None:
        df = recount(db, col.collection_id)[1]
        assert listed() == {t for t, n in df.items() if n >= min_df}
        assert db.execute("select lists_min_df from sift.collection_lexical_stats "
                          "where lists_min_df is not null and collection_id = %s",
                          [col.collection_id]).fetchall() == [(min_df,)]
        assert_oracle(client, db, col, rng, 5)

    def one_chunk(uri: str, text: str) -> None:
        doc_id = db.execute("insert into sift.documents (collection_id, source_uri) values (%s, %s) "
                            "returning document_id", [col.collection_id, uri]).fetchone()[0]
        db.execute("insert into sift.chunks (document_id, ordinal, content, embedding) values (%s, 0, %s, %s)",
                   [doc_id, text, str(unit(rng.normal(size=DIMS)).tolist())])

    refresh(5)
    check(5)
    df = recount(db, col.collection_id)[1]
    below = sorted(t for t, n in df.items() if n == 4)[:3]
    at = sorted(t for t, n in df.items() if n == 5)[:3]
    assert below and at
    # Terms written up to min_df get lists from the fold alone.
    one_chunk("up", " ".join(below))
    refresh(5)
    check(5)
    # Terms whose chunks went below min_df lose theirs.
    holders = [r[0] for r in db.execute(
        "select distinct d.document_id from sift.chunks c join sift.documents d using (document_id) "
        "where c.search_vector @@ %s::tsquery and d.source_uri <> 'up'", [" | ".join(at)])]
    db.execute("delete from sift.documents where document_id = any (%s)", [holders[:len(holders) // 2 + 1]])
    refresh(5)
    check(5)
    # A re-analysed chunk takes its terms' lists; the fold holds those terms, so they come back.
    target, terms = db.execute("select chunk_id, tsvector_to_array(search_vector) from sift.chunks c "
                               "where exists (select 1 from sift.term_lists l, unnest(tsvector_to_array("
                               "c.search_vector)) u where l.lexeme = u) and c.collection_id = %s "
                               "order by length(c.search_vector), chunk_id limit 1", [col.collection_id]).fetchone()
    db.execute("update sift.chunks set context = 'w299' where chunk_id = %s", [target])
    assert not listed() & set(terms)
    refresh(5)
    check(5)
    # Incremental indeed: a list gone without its term being written stays gone ...
    gone = sorted(listed())[0]
    db.execute("delete from sift.term_lists where lexeme = %s", [gone])
    refresh(5)
    assert gone not in listed()
    # ... until a refresh looks at every term: another min_df, rebuild, or an upgrade.
    refresh(5, rebuild="true")
    check(5)
    for min_df in (3, 8):
        refresh(min_df)
        check(min_df)
    db.execute("delete from sift.term_lists where lexeme = %s", [gone])
    db.execute("update sift.collection_lexical_stats set lists_min_df = null where collection_id = %s",
               [col.collection_id])
    refresh(8)
    check(8)


def test_a_refresh_without_min_df_keeps_a_chosen_one_and_else_takes_the_size_s(client, db):
    """min_df left out is the collection's own: the client's refresh after each write (which
    gives none) keeps the lists a min_df chosen once added, and looks at the written terms
    only; none chosen (a first build, 0, or the record lost), the collection's size picks it
    (sift._auto_min_df)."""
    rng, col = seeded_collection(client, seed=23, docs=200)

    def state() -> tuple[set[str], list[tuple[int, bool]]]:
        return ({r[0] for r in db.execute("select lexeme from sift.term_lists where collection_id = %s",
                                          [col.collection_id])},
                db.execute("select lists_min_df, lists_min_df_chosen from sift.collection_lexical_stats "
                           "where lists_min_df is not null and collection_id = %s", [col.collection_id]).fetchall())

    def common(min_df: int) -> set[str]:
        return {t for t, n in recount(db, col.collection_id)[1].items() if n >= min_df}

    # The client's refreshes so far built lists by the size: under 200,000 chunks, every term
    # in 20 chunks or more.
    assert state() == (common(20), [(20, False)])
    assert common(6) > common(20)
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 6)")
    assert state() == (common(6), [(6, True)])
    # A write through the client refreshes with no min_df: the lists of terms in 6 chunks or
    # more stay, the written terms that reached 6 get theirs, and no other list is rebuilt.
    built_at = dict(db.execute("select lexeme, chunks_ref from sift.term_lists where collection_id = %s",
                               [col.collection_id]).fetchall())
    client.upsert_documents("c", corpus(rng, 5, prefix="more"))
    lists, recorded = state()
    assert lists == common(6) and recorded == [(6, True)]
    written = {t for d in db.execute("select tsvector_to_array(c.search_vector) from sift.chunks c "
                                     "join sift.documents d using (document_id) "
                                     "where d.source_uri like 'more%%'").fetchall() for t in d[0]}
    rebuilt = {t for t, n in db.execute("select lexeme, chunks_ref from sift.term_lists "
                                        "where collection_id = %s", [col.collection_id]).fetchall()
               if built_at.get(t) != n}
    assert rebuilt <= written
    assert_oracle(client, db, col, rng, 5)
    # SQL without min_df too, and a null one.
    db.execute("select * from sift.refresh_lexical_stats('c')")
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => null)")
    assert state() == (common(6), [(6, True)])
    # 0: back to the size's, and later refreshes keep following it.
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 0)")
    assert state() == (common(20), [(20, False)])
    assert_oracle(client, db, col, rng, 5)
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 6)")
    # Nothing recorded (an upgrade from 0.1.0): by the size.
    db.execute("update sift.collection_lexical_stats set lists_min_df = null where collection_id = %s",
               [col.collection_id])
    db.execute("select * from sift.refresh_lexical_stats('c')")
    assert state() == (common(20), [(20, False)])
    with pytest.raises(psycopg.Error) as bad:
        db.execute("select * from sift.refresh_lexical_stats('c', min_df => -1)")
    assert bad.value.sqlstate == "SF003"
    # The size's steps.
    assert [db.execute("select sift._auto_min_df(%s)", [n]).fetchone()[0]
            for n in (0, 5183, 199_999, 200_000, 10**9)] == [20, 20, 20, 100, 100]
    # ... and lists built under one step's min_df keep it within a quarter of the step: a
    # collection that hovers about 200,000 chunks is not rebuilt at each crossing.
    def by_size(chunks: int, built: int) -> int:
        db.execute("update sift.collection_lexical_stats set chunks = chunks + %s, lists_min_df = %s "
                   "where collection_id = %s and lists_min_df is not null",
                   [chunks - db.execute("select sum(chunks) from sift.collection_lexical_stats "
                                        "where collection_id = %s", [col.collection_id]).fetchone()[0],
                    built, col.collection_id])
        return int(db.execute("select m.min_df from sift._lists_min_df(%s, null) m",
                              [col.collection_id]).fetchone()[0])

    assert [by_size(n, 20) for n in (190_000, 240_000, 260_000)] == [20, 20, 100]
    assert [by_size(n, 100) for n in (210_000, 160_000, 150_000, 140_000)] == [100, 100, 20, 20]
    assert by_size(10_000, 6) == 20   # a min_df no step gives: the size's


def test_a_new_collection_language_rebuilds_every_list_when_documents_keep_theirs(client, db):
    """alter_collection drops the lists on a language change and rebuilds them all: where every
    document names its own language no chunk analyses differently, so no term is folded, and
    a refresh of the folded terms alone would leave the collection without lists."""
    rng = np.random.default_rng(22)
    col = client.create_collection("c", embedding_dims=DIMS)
    docs = corpus(rng, 300)
    for d in docs:
        d.language = "en"
    client.upsert_documents("c", docs)   # (refreshes with min_df by the size: 20)
    common = {t for t, n in recount(db, col.collection_id)[1].items() if n >= 20}
    listed = lambda: {r[0] for r in db.execute("select lexeme from sift.term_lists")}  # noqa: E731
    assert common and listed() == common
    client.alter_collection("c", search_language="simple")
    assert listed() == common
    assert_oracle(client, db, col, rng, 5)


def test_refresh_keeps_no_term_that_no_chunk_holds(client, db):
    """The fold drops a term whose last chunk went, and never adds one written and deleted
    again between refreshes; every other term's df is the recount's."""
    col = client.create_collection("c", embedding_dims=DIMS)

    def doc(uri: str, text: str) -> Document:
        return Document(source_uri=uri, chunks=[Chunk(content=text, embedding=unit(np.ones(DIMS)))])

    client.upsert_documents("c", [doc("keep", "zebra alpaca"), doc("gone", "quokka alpaca")])
    client.delete_document("c", "gone")   # refreshes: quokka's df reaches 0 in the fold
    # Written and deleted with no refresh between: the ledger nets to 0 for okapi.
    doc_id = db.execute("insert into sift.documents (collection_id, source_uri) values (%s, 'brief') "
                        "returning document_id", [col.collection_id]).fetchone()[0]
    db.execute("insert into sift.chunks (document_id, ordinal, content, embedding) values (%s, 0, 'okapi', %s)",
               [doc_id, str(unit(np.ones(DIMS)).tolist())])
    db.execute("delete from sift.documents where document_id = %s", [doc_id])
    client.refresh_lexical_stats("c")
    terms = dict(db.execute("select lexeme, df from sift.term_df where collection_id = %s",
                            [col.collection_id]).fetchall())
    assert terms == recount(db, col.collection_id)[1] == {"zebra": 1, "alpaca": 1}
    assert db.execute("select count(*) from sift.term_df_pending where collection_id = %s",
                      [col.collection_id]).fetchone()[0] == 0


def test_lists_built_in_one_sampled_pass_hold_each_terms_best_chunks(client, db):
    """Many common terms (their chunks outnumber the collection 20 times over) take the
    one-pass build with sampled cutoffs: each list is still its term's best list_size chunks
    by impact at the list's reference, and its floor bounds every chunk left out."""
    rng = np.random.default_rng(21)
    col = client.create_collection("c", embedding_dims=DIMS)
    head = VOCAB[:40]   # every chunk holds most of these, with varied counts
    docs = [Document(source_uri=f"s{i}", chunks=[Chunk(
        content=" ".join(w for w in head for _ in range(int(rng.integers(0, 4)))) + " " + zipf_text(rng, 20),
        embedding=unit(rng.normal(size=DIMS)))]) for i in range(300)]
    client.upsert_documents("c", docs)
    df_total, n = db.execute(
        "select sum(df) filter (where df >= 5), (select sum(chunks) from sift.collection_lexical_stats "
        "where collection_id = %s) from sift.term_df where collection_id = %s",
        [col.collection_id, col.collection_id]).fetchone()
    assert df_total > 20 * n   # the one-pass branch
    assert build_lists(db, 30) > 30
    # Per list: its entries, the chunks above its floor, and those at it or above.
    rows = db.execute("""
        with lists as (select l.lexeme, l.entries, l.floor_impact, l.avgdl_ref, l.k1_ref, l.b_ref
                       from sift.term_lists l where l.collection_id = %(c)s),
        truth as (select l.lexeme, c.chunk_id,
                         sift._bm25_impact(array_length(u.positions, 1), c.lexical_length,
                                           l.avgdl_ref, l.k1_ref, l.b_ref) as impact
                  from sift.chunks c, unnest(c.search_vector) u join lists l on l.lexeme = u.lexeme
                  where c.collection_id = %(c)s),
        listed as (select b.lexeme, u.chunk_id from sift.term_blocks b, unnest(b.chunk_ids) u(chunk_id)
                   where b.collection_id = %(c)s)
        select l.lexeme, l.entries,
               (select count(*) from truth t where t.lexeme = l.lexeme and t.impact > l.floor_impact),
               (select count(*) from truth t where t.lexeme = l.lexeme and t.impact >= l.floor_impact),
               (select count(*) from truth t where t.lexeme = l.lexeme),
               (select count(*) from listed x join truth t using (lexeme, chunk_id)
                where x.lexeme = l.lexeme and t.impact > l.floor_impact)
        from lists l""", {"c": col.collection_id}).fetchall()
    assert len(rows) > 30
    for lexeme, entries, above, at_or_above, df, listed_above in rows:
        # exactly the chunks above the floor are listed, at most list_size of them ...
        assert entries == above == listed_above and entries <= 30, lexeme
        # ... and the floor is no higher than the 31st best: the list lost only ties at the floor.
        # (At 300 chunks the sample is the whole collection, so the cutoff is exact; past 30,000
        # a sampled cutoff may shorten a list, which the rule above still holds for.)
        assert at_or_above >= min(31, df), lexeme
    assert sum(1 for r in rows if r[4] > 45) >= 30   # the head terms, given cutoffs
    assert_oracle(client, db, col, rng, 10)


def test_whole_lists_score_without_reading_stored_vectors(client, db):
    """Where every common term's list holds all its chunks (floor 0) and few chunks match,
    the leg sums list entries instead of reading each chunk's stored vector: the same
    chunks, bit for bit the same scores (so ties break alike), with terms too rare for a list
    scored from their vectors beside it, entries waiting in deltas, a -word lowering the top n,
    and deleted chunks and the filter checked best first until n pass."""
    rng = np.random.default_rng(22)
    col = client.create_collection("c", embedding_dims=DIMS)
    docs = corpus(rng, 400)
    for i, doc in enumerate(docs):
        doc.metadata = {"half": i % 2}
    client.upsert_documents("c", docs)
    build_lists(db, 1000)   # longer than any term's chunks: every list is whole
    assert db.execute("select count(*), max(floor_impact) from sift.term_lists").fetchone()[0] > 10
    assert db.execute("select max(floor_impact) from sift.term_lists").fetchone()[0] == 0
    listed = {r[0] for r in db.execute("select lexeme from sift.term_lists")}

    def exhaustive(text: str, fpath: str | None = None) -> list[tuple[int, float]]:
        """The exhaustive path's scores (stored vectors, sift._bm25_scores), best first."""
        terms = sorted(query_terms(db, text))
        n_chunks, avgdl = db.execute(
            "select sum(chunks)::float8, sum(tokens)::float8 / sum(chunks) from sift.collection_lexical_stats "
            "where collection_id = %s", [col.collection_id]).fetchone()
        idfs = [r[0] for r in db.execute(   # as the leg takes them: folded counts and those pending
            "select ln(1 + (%(n)s - d.df + 0.5) / (d.df + 0.5)) from unnest(%(t)s::text[]) with ordinality q(l, o), "
            "lateral (select coalesce((select df from sift.term_df t where t.lexeme = q.l), 0) + coalesce(("
            "select sum(p.counts[array_position(p.lexemes, q.l)]) from sift.term_df_pending p), 0) as df) d "
            "order by q.o", {"n": n_chunks, "t": terms})]
        k1, b = k1_b(col)
        return [tuple(r) for r in db.execute(
            "select x.chunk_id, x.score from sift._bm25_scores("
            "array(select chunk_id from sift.chunks where collection_id = %(c)s), %(t)s, %(i)s, %(a)s, "
            "%(k1)s, %(b)s, sift._tsquery_or(%(t)s), %(f)s::jsonpath, 100000) x",
            {"c": col.collection_id, "t": terms, "i": idfs, "a": avgdl, "k1": k1, "b": b, "f": fpath})]

    queries = [" ".join(VOCAB[i] for i in rng.choice(12, size=int(rng.integers(2, 5)), replace=False))
               for _ in range(12)]
    # and with a term too rare for a list (its chunks scored from their vectors, the rest summed)
    rare = [r[0] for r in db.execute("select t.lexeme from sift.term_df t where not exists ("
                                     "select 1 from sift.term_lists l where l.lexeme = t.lexeme) "
                                     "order by t.df desc, t.lexeme limit 6")]
    with_rare = [f"{q} {r}" for q, r in zip(queries, rare)]
    assert len(with_rare) == 6 and all(set(query_terms(db, t)) - listed for t in with_rare)

    def assert_as_exhaustive(texts: list[str]) -> None:
        for text in texts:
            want = exhaustive(text)
            for n in (1, 10, 40):
                # equal floats, not approximately equal: the sums run in the same order
                assert lexical_leg(client, "c", text, n) == want[:n]
            half = exhaustive(text, 'strict $.half == 1')
            assert lexical_leg(client, "c", text, 10, filter={"half": 1}) == half[:10]

    assert all(set(query_terms(db, t)) <= listed for t in queries)
    assert_as_exhaustive(queries + with_rare)

    # A -word (boost mode) lowers the chunks of the leg's top n (fetch_k, 40) that hold it, which
    # are ranked again.
    text, sink = queries[0], next(w for w in VOCAB[:12] if w not in queries[0].split())
    best = exhaustive(text)[:col.settings["fetch_k"]]
    holding = {r[0] for r in db.execute("select chunk_id from sift.chunks where search_vector @@ %s::tsquery",
                                        [sink])}
    lowered = sorted(((c, s * 0.5 if c in holding else s) for c, s in best), key=lambda cs: (-cs[1], cs[0]))
    assert holding & {c for c, _ in best[:10]}
    assert lexical_leg(client, "c", f"{text} -{sink}", 10) == lowered[:10]

    # The lists are the source: a doctored entry shows through (and nothing else reads them so).
    text = queries[0]
    top, score = exhaustive(text)[0]
    lexeme = sorted(query_terms(db, text))[0]
    doctored = ("update sift.term_blocks set tfs[array_position(chunk_ids, %(c)s)] = %(tf)s "
                "where lexeme = %(l)s and %(c)s = any (chunk_ids)")
    tf = db.execute("select tfs[array_position(chunk_ids, %s)] from sift.term_blocks where lexeme = %s "
                    "and %s = any (chunk_ids)", [top, lexeme, top]).fetchone()
    assert tf is not None
    db.execute(doctored, {"c": top, "tf": tf[0] + 50, "l": lexeme})
    assert lexical_leg(client, "c", text, 1)[0][1] > score
    # lexical_list_limit, not lexical_exact_limit, bounds the path: past the exact limit the
    # lists are still summed; past the list limit (or at 0) they are read by rounds and the
    # top n scored from the stored vectors, so the doctored entry no longer shows.
    matching = db.execute("select sum(df)::integer from sift.term_df where lexeme = any(%s)",
                          [query_terms(db, text)]).fetchone()[0]
    assert matching > 40
    assert lexical_leg(client, "c", text, 1, lexical_exact_limit=0)[0][1] > score
    assert lexical_leg(client, "c", text, 1, lexical_list_limit=matching)[0][1] > score
    for list_limit in (matching - 1, 0):
        assert lexical_leg(client, "c", text, 1, lexical_list_limit=list_limit) == [(top, score)]
    # a required phrase is checked in each chunk's vector: the exhaustive path, not the lists
    phrase = client.search("c", f'"{lexeme}" {text}', top_k=40, quoted_text="require")
    assert [(h.chunk_id, h.lexical_score) for h in phrase] == [
        (c, s) for c, s in exhaustive(text) if c in {h.chunk_id for h in phrase}]
    db.execute(doctored, {"c": top, "tf": tf[0], "l": lexeme})

    # Chunks written since the lists were built wait in their deltas (floor 0: every one), read whole.
    write_chunks(db, rng, col.collection_id, 30, 40, "late")
    assert db.execute("select sum(cardinality(chunk_ids)) from sift.term_deltas").fetchone()[0] >= 30
    assert_as_exhaustive(queries[:4] + with_rare[:2])

    # Deleted chunks stay in their lists until a rebuild: the 70 best gone, the next are checked.
    dead = [c for c, _ in exhaustive(text)[:70]]
    db.execute("delete from sift.chunks where chunk_id = any(%s)", [dead])
    assert db.execute("select count(*) from sift.term_blocks where chunk_ids && %s::bigint[]",
                      [dead]).fetchone()[0] > 0
    oracle = python_bm25(db, col.collection_id, query_terms(db, text), *k1_b(col))
    # (fetch_k = n: the leg's own n; at n 1 and 10 more of the best 4n sums are gone than n
    # remain, so the leg sorts all of them and checks on)
    for n in (1, 10, 40):
        assert_same_top(lexical_leg(client, "c", text, n, fetch_k=n), oracle, n)
    assert lexical_leg(client, "c", text, 40) == exhaustive(text)[:40]


def test_a_sessions_gin_fuzzy_search_limit_loses_no_match(client, db):
    """gin_fuzzy_search_limit (any role may set it; a pooled connection keeps it) makes a text
    index scan return a random subset: impact lists built under it missed chunks until the next
    rebuild, and exact matching dropped hits. The functions that scan the index set it to 0."""
    rng, col = seeded_collection(client, seed=31, docs=500)
    build_lists(db, 250)
    want = list_lengths(db)
    texts = random_queries(rng, 8)
    sql = ("select chunk_id, lexical_score from sift.search('c', %s, match_count => 20, "
           "knobs => '{\"lexical_exact_limit\": 100000}') order by lexical_score desc, chunk_id")
    before = [db.execute(sql, [t]).fetchall() for t in texts]
    db.execute("set gin_fuzzy_search_limit = 3")
    build_lists(db, 250)
    assert list_lengths(db) == want
    assert [db.execute(sql, [t]).fetchall() for t in texts] == before
    for text in texts:   # and each against the oracle, exhaustive
        oracle = python_bm25(db, col.collection_id, query_terms(db, text), *k1_b(col))
        assert_same_top(lexical_leg(client, "c", text, 20, lexical_exact_limit=100000), oracle, 20)
    db.execute("reset gin_fuzzy_search_limit")
