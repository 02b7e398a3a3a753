"""Tuning (sift.tune_golden_set, pgsift.tuning, `pgsift eval tune`): on synthetic collections
where one setting is clearly better (it is found, its interval excludes 0, store stores it)
and where nothing helps (nothing is stored, and the decision says why); the folds and the
interval are deterministic by seed; the cross-validation checked against a Python oracle
built from sift.score_golden_set (no question scores its own fold's pick); typed errors;
another tenant's collection and golden set are refused."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import psycopg
import pytest
from pgsift import (
    Chunk,
    Client,
    CollectionNotFound,
    Document,
    GoldenSetNotFound,
    InvalidArgument,
    InvalidKnob,
    PermissionDenied,
)
from pgsift.cli import main
from pgsift.golden import Positive, Question, import_golden_set
from pgsift.tuning import expand_grid, tune

DIMS = 8
GRID = [{"dense_weight": 0.1}, {"dense_weight": 0.5}]


def word(i: int, kind: str = "zq") -> str:
    """A made-up word of letters only, one per document (a lexical match nobody else has)."""
    return kind + "".join(chr(97 + int(d)) for d in f"{i:03d}") + "x"


def unit(v: np.ndarray) -> list[float]:
    return [float(x) for x in v / np.linalg.norm(v)]


def build(client: Client, name: str, kinds: list[str], seed: int = 0, dense_weight: float | None = 0.9) -> None:
    """A collection of one relevant document per question and as many distractors, and its
    golden set "gs". A question's kind says which leg finds its document:

    * lexical: its word is in the document alone; its vector points away from it (dense
      ranks it last), so only lexical weight finds it;
    * dense: its vector is the document's; its word is in a distractor alone, so the
      lexical leg ranks a wrong document first;
    * both: word and vector both point at it (every setting finds it first).
    """
    rng = np.random.default_rng(seed)
    docs, questions = [], []
    for i, kind in enumerate(kinds):
        vec = rng.normal(size=DIMS)
        rel_words = word(i) if kind in ("lexical", "both") else "plain text here"
        docs.append(Document(source_uri=f"rel-{i}", title=f"rel {i}",
                             chunks=[Chunk(content=f"{rel_words} about the subject", embedding=unit(vec))]))
        other = word(i) if kind == "dense" else "common filler words"
        docs.append(Document(source_uri=f"other-{i}", title=f"other {i}",
                             chunks=[Chunk(content=f"{other} and more filler",
                                           embedding=unit(rng.normal(size=DIMS)))]))
        query_vec = -vec if kind == "lexical" else vec
        questions.append(Question(f"q{i:03d}", word(i), positives=[Positive(source_uri=f"rel-{i}")],
                                  embedding=unit(query_vec)))
    settings = {} if dense_weight is None else {"dense_weight": dense_weight}
    client.create_collection(name, embedding_dims=DIMS, **settings)
    client.upsert_documents(name, docs)
    client.refresh_lexical_stats(name)
    import_golden_set(client, name, "gs", questions, judged_at="document")


def stored_weight(client: Client, name: str) -> float:
    return float(client.get_collection(name).knobs.get("dense_weight", 0.5))


def test_a_clearly_better_setting_is_found_significant_and_stored(client):
    # Every document is found by its word alone; the collection leans on the dense leg (0.9).
    build(client, "lex", ["lexical"] * 30)
    result = tune(client, "lex", golden_set="gs", k=5, folds=3, grid=GRID)
    assert result.current.knobs == {"dense_weight": 0.9} and result.current.ndcg == pytest.approx(0.0)
    assert [c.knobs for c in result.cells] == GRID
    assert result.decision.cell == 1 and result.decision.knobs == {"dense_weight": 0.1}
    assert [f.cell for f in result.fold_picks] == [1, 1, 1]
    held = result.held_out
    assert held.questions == 30 and held.ndcg == pytest.approx(1.0) and held.gain == pytest.approx(1.0)
    assert held.ci_low > 0 and held.ci_low <= held.gain <= held.ci_high
    assert result.significant and not result.stored
    assert result.decision.note.startswith("significant") and stored_weight(client, "lex") == 0.9
    # store => true stores the winner, and says so.
    stored = tune(client, "lex", golden_set="gs", k=5, folds=3, grid=GRID, store=True)
    assert stored.stored and stored.decision.note.startswith("stored on collection lex")
    assert stored_weight(client, "lex") == pytest.approx(0.1)
    # Tuned again, the stored knobs are the current ones: nothing left to store.
    again = tune(client, "lex", golden_set="gs", k=5, folds=3, grid=GRID, store=True)
    assert again.current.ndcg == pytest.approx(1.0) and not again.stored and not again.significant
    assert again.decision.note == "nothing stored: the current knobs score best on all the questions"


def test_when_nothing_helps_nothing_is_stored_and_it_says_why(client):
    # Every setting finds every document first: no cell beats the current knobs.
    build(client, "flat", ["both"] * 12)
    result = tune(client, "flat", k=5, folds=3, grid=GRID, store=True)
    assert {c.gain for c in result.cells} == {0.0}
    assert result.decision.cell == 0 and not result.stored and not result.significant
    assert result.decision.note == "nothing stored: the current knobs score best on all the questions"
    assert stored_weight(client, "flat") == 0.9
    # One question in 24 that lexical weight helps: on all the questions dense_weight 0.1
    # is best, but a fold holding that question never sees it (every cell ties on the others,
    # so it keeps the current knobs): the held-out gain is 0, not significant, nothing stored.
    build(client, "one", ["both"] * 23 + ["lexical"])
    result = tune(client, "one", k=5, folds=4, grid=GRID, store=True)
    assert result.decision.cell == 1 and result.cells[0].gain > 0
    assert result.held_out.gain == 0 and result.held_out.ci_low == 0 and result.held_out.ci_high == 0
    assert not result.stored and not result.significant
    assert result.decision.note == ("nothing stored: the held-out gain is not significant "
                                    "(its 95% interval [0.0000, 0.0000] includes 0)")
    assert stored_weight(client, "one") == 0.9


def _mixed(client: Client) -> list[str]:
    rng = np.random.default_rng(7)
    kinds = list(rng.choice(["lexical", "dense", "both"], size=45, p=[0.4, 0.35, 0.25]))
    build(client, "mix", kinds, seed=3, dense_weight=None)
    return kinds


def test_cross_validation_matches_an_oracle(client, db):
    """Each fold's pick is the best cell on the other folds' questions alone (ties: the lower
    cell), every question is scored with its fold's pick, and the means and gains follow."""
    _mixed(client)
    grid = [{"dense_weight": w} for w in (0.1, 0.3, 0.7, 0.9)] + [{"fusion": "convex", "dense_weight": 0.5}]
    folds = 5
    result = tune(client, "mix", k=10, folds=folds, grid=grid, seed=11, per_question=True)
    # Every cell's nDCG per question, straight from sift.score_golden_set (cell 0: no knobs).
    cells = [{}, *grid]
    scores = {}
    for i, knobs in enumerate(cells):
        rows = db.execute("select question_key, ndcg from sift.score_golden_set('mix', 'gs', k => 10, "
                          "knobs => %s::jsonb)", [json.dumps(knobs)]).fetchall()
        scores[i] = dict(rows)
    keys = sorted(scores[0])
    per_q = {r.question_key: r for r in result.per_question}
    assert sorted(per_q) == keys
    fold_of = {key: per_q[key].fold for key in keys}
    sizes = Counter(fold_of.values())
    assert sorted(sizes) == list(range(1, folds + 1)) and max(sizes.values()) - min(sizes.values()) <= 1

    def best(questions: list[str]) -> int:
        means = [round(sum(scores[c][q] for q in questions) / len(questions), 12) for c in range(len(cells))]
        return max(range(len(cells)), key=lambda c: (means[c], -c))

    picks = {f: best([q for q in keys if fold_of[q] != f]) for f in range(1, folds + 1)}
    own_fold_picks = {f: best(keys) for f in picks}
    assert {f.fold: f.cell for f in result.fold_picks} == picks
    for key in keys:
        row = per_q[key]
        assert row.cell == picks[row.fold]            # its fold's pick, chosen without its fold
        assert row.ndcg == pytest.approx(scores[row.cell][key])
        assert row.current_ndcg == pytest.approx(scores[0][key])
        assert row.gain == pytest.approx(scores[row.cell][key] - scores[0][key])
    for c in result.cells:
        assert c.ndcg == pytest.approx(np.mean([scores[c.cell][q] for q in keys]))
    held = result.held_out
    assert held.ndcg == pytest.approx(np.mean([scores[picks[fold_of[q]]][q] for q in keys]))
    assert held.gain == pytest.approx(np.mean([per_q[q].gain for q in keys]))
    assert held.ci_low <= held.gain <= held.ci_high
    assert result.decision.cell == best(keys)
    # The picks are not trivially the overall best everywhere: the data disagrees across folds
    # or the oracle above would not have been tested against a choice made without the fold.
    assert set(picks.values()) | set(own_fold_picks.values()) != {0}


def test_folds_and_interval_are_deterministic_by_seed(client):
    _mixed(client)
    grid = [{"dense_weight": 0.2}, {"dense_weight": 0.8}]
    one = tune(client, "mix", folds=3, grid=grid, seed=5, per_question=True)
    two = tune(client, "mix", folds=3, grid=grid, seed=5, per_question=True)
    other = tune(client, "mix", folds=3, grid=grid, seed=6, per_question=True)
    assert one.rows == two.rows
    fold_of = {r.question_key: r.fold for r in one.per_question}
    assert fold_of != {r.question_key: r.fold for r in other.per_question}
    assert [c.ndcg for c in one.cells] == [c.ndcg for c in other.cells]   # the folds move, the cells do not


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"k": 0}, InvalidArgument),
    ({"k": 1001}, InvalidArgument),
    ({"folds": 1}, InvalidArgument),
    ({"folds": 21}, InvalidArgument),
    ({"folds": 13}, InvalidArgument),                              # 12 scored questions
    ({"seed": None}, InvalidArgument),
    ({"grid": []}, InvalidArgument),
    ({"grid": [{}]}, InvalidArgument),
    ({"grid": [{"dense_weight": 0.3}] * 201}, InvalidArgument),
    ({"grid": [{"dense_wieght": 0.3}]}, InvalidKnob),              # unknown, with a suggestion
    ({"grid": [{"dense_weight": 2}]}, InvalidKnob),                # out of range
    ({"grid": [{"dense_weight": "high"}]}, InvalidKnob),           # wrong type
    ({"grid": [{"fusion": "sum"}]}, InvalidKnob),
    ({"grid": [{"rerank": True}]}, InvalidKnob),                   # SQL never reranks
    ({"grid": [{"recency_ceiling": 0.3}]}, InvalidKnob),           # stored only, not per call
    ({"grid": [{"query_language": "en"}]}, InvalidKnob),           # per call only, not storable
    ({"grid": [{"boost": {"elsewhere": 2}}]}, InvalidKnob),        # another collection's value
    ({"golden_set": "nope"}, GoldenSetNotFound),
])
def test_bad_arguments_are_typed_errors(client, kwargs, error):
    build(client, "flat", ["both"] * 12)
    args = {"golden_set": "gs", "folds": 3, "grid": GRID, **kwargs}
    with pytest.raises(error):
        tune(client, "flat", **args)
    with pytest.raises(CollectionNotFound):
        tune(client, "missing")
    assert stored_weight(client, "flat") == 0.9


def test_a_grid_is_a_list_of_cells_or_every_combination(db, client):
    assert expand_grid({"fusion": ["rrf", "dbsf"], "dense_weight": [0.3, 0.7]}) == [
        {"fusion": "rrf", "dense_weight": 0.3}, {"fusion": "rrf", "dense_weight": 0.7},
        {"fusion": "dbsf", "dense_weight": 0.3}, {"fusion": "dbsf", "dense_weight": 0.7}]
    assert expand_grid([{"rrf_k": 10}]) == [{"rrf_k": 10}]
    for bad in ({}, {"rrf_k": []}, {"rrf_k": 10}, [1], "rrf_k"):
        with pytest.raises(InvalidArgument):
            expand_grid(bad)
    build(client, "flat", ["both"] * 6)
    # From SQL the grid must be an array of objects (SF003), and the default grid is checked as any.
    for grid in ('{"dense_weight": 0.3}', '[1]', '"x"'):
        with pytest.raises(psycopg.Error) as exc:
            db.execute("select * from sift.tune_golden_set('flat', grid => %s::jsonb, folds => 2)", [grid])
        assert exc.value.sqlstate == "SF003"
    cells = db.execute("select sift._tuning_grid()").fetchone()[0]
    assert len(cells) == 29 and {c["fusion"] for c in cells} == {"rrf", "dbsf", "convex"}
    for cell in cells:
        db.execute("select 1 from sift.knobs('flat', %s::jsonb)", [json.dumps(cell)])


def test_another_tenants_collection_and_golden_set_are_refused(db):
    a, b = Client(db, tenant="acme"), Client(db, tenant="globex")
    build(a, "lex", ["lexical"] * 9)
    build(b, "own", ["both"] * 9)
    with pytest.raises(CollectionNotFound):
        tune(b, "lex", golden_set="gs", folds=3, grid=GRID, store=True)
    a_set = db.execute("select golden_set_id from sift.golden_sets s join sift.collections c using (collection_id) "
                       "where c.tenant = 'acme'").fetchone()[0]
    # Naming the other tenant's set on one's own collection finds nothing either.
    b.create_collection("empty", embedding_dims=DIMS)
    with pytest.raises(GoldenSetNotFound):
        tune(b, "empty", golden_set="gs", folds=3, grid=GRID)
    # A boost naming the other tenant's collection is refused as any other collection's.
    with pytest.raises(InvalidKnob):
        tune(b, "own", golden_set="gs", folds=3, grid=[{"boost": {"lex": 2}}])
    assert stored_weight(a, "lex") == 0.9
    assert db.execute("select count(*) from sift.golden_sets where golden_set_id = %s", [a_set]).fetchone()[0] == 1


def test_a_reader_may_tune_but_not_store(db, connect_as):
    """sift_reader can score its tenant's collection (tuning reads) but storing the winner is a
    collection owner's write: refused, and nothing changes."""
    build(Client(db, tenant="acme"), "lex", ["lexical"] * 9)
    db.execute("select sift.map_role('t_reader', 'acme')")
    reader = Client(connect_as("t_reader"))
    result = tune(reader, "lex", golden_set="gs", k=5, folds=3, grid=GRID)
    assert result.significant and not result.stored
    with pytest.raises(PermissionDenied, match="permission denied"):
        tune(reader, "lex", golden_set="gs", k=5, folds=3, grid=GRID, store=True)
    assert stored_weight(Client(db, tenant="acme"), "lex") == 0.9


def test_the_cli_prints_the_table_and_stores_only_a_significant_winner(client, dsn, tmp_path, capsys):
    build(client, "lex", ["lexical"] * 15)
    build(client, "flat", ["both"] * 9)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"dense_weight": [0.1, 0.5]}))
    assert main(["--dsn", dsn, "eval", "tune", "flat", "--grid", str(grid), "--folds", "3", "--store"]) == 1
    out = capsys.readouterr().out
    assert "nothing stored: the current knobs score best" in out and "95% CI" in out
    assert stored_weight(client, "flat") == 0.9
    assert main(["--dsn", dsn, "eval", "tune", "lex", "--golden-set", "gs", "--grid", str(grid), "--folds", "3",
                 "--k", "5", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "significant" in out and "dense_weight=0.1" in out and "nDCG@5" in out
    assert stored_weight(client, "lex") == 0.9
    assert main(["--dsn", dsn, "eval", "tune", "lex", "--grid", str(grid), "--folds", "3", "--store",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stored"] and report["decision"]["knobs"] == {"dense_weight": 0.1}
    assert stored_weight(client, "lex") == pytest.approx(0.1)
    # Tuning's options go with tune alone.
    assert main(["--dsn", dsn, "eval", "flat", "--folds", "3"]) == 2
