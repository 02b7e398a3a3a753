"""The command line, end to end against the test database (no torch: the numpy MiniLM embeds)."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pgsift.cli
import pytest
from conftest import SOCKET_DIR
from pgsift import Client
from pgsift.cli import build_parser, main
from pgsift.embed import NumpyMiniLM
from pgsift.ingest import chunk_markdown


@pytest.fixture(scope="module")
def embedder() -> NumpyMiniLM:
    """all-MiniLM-L6-v2 in numpy: the torch model's vectors (tests/test_embed.py), without
    importing torch (seconds): the command line's tests load no torch."""
    return NumpyMiniLM()


@pytest.fixture(autouse=True)
def _no_torch(embedder, monkeypatch) -> None:
    """The command line ingests with the torch model; here with its numpy twin (the same
    vectors). Questions go through the command's own lookup, unpatched, so it is tested too."""
    queries = pgsift.cli.common.load_embedder
    monkeypatch.setattr("pgsift.cli.common.load_embedder",
                        lambda required=False, for_queries=False:
                        queries(required, for_queries=True) if for_queries else embedder)


@pytest.fixture
def kb(dsn, tmp_path, capsys) -> Path:
    """Collection kb ingested through the CLI: a refunds chunk and a shipping chunk."""
    (tmp_path / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days of a return.\n")
    (tmp_path / "shipping.txt").write_text("Parcels ship from Rotterdam every weekday morning.\n")
    assert main(["migrate", "--dsn", dsn]) == 0
    assert main(["--dsn", dsn, "ingest", "kb", str(tmp_path), "--create"]) == 0
    assert "ingested 2 chunks into kb" in capsys.readouterr().out
    return tmp_path


def test_a_cli_search_imports_no_torch(dsn, kb):
    """A question is embedded without torch (seconds to import): `pgsift search` answers at once."""
    script = ("import sys; from pgsift.cli import main; "
              f"code = main(['--dsn', {dsn!r}, 'search', 'kb', 'refund', '--json']); "
              "assert code == 0 and 'torch' not in sys.modules and 'sentence_transformers' not in sys.modules, "
              "sorted(m for m in sys.modules if 'torch' in m)[:5]")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)[0]["source_uri"] == "refunds.md"


class CountingEmbedder:
    """The Embedder protocol without a model (no torch): a vector per text from its words, and
    a record of every call (the texts it was given, and what `seen` said then)."""

    dims = 384

    def __init__(self, seen=None):
        self.calls: list[list[str]] = []
        self.seen = seen or (lambda: None)
        self.states: list[object] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        self.states.append(self.seen())
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, sum(map(ord, word)) % self.dims] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_embedding_reports_progress_from_the_first_batch(tmp_path, monkeypatch):
    """documents_from_path calls progress(0, total) before the first batch, then after each batch
    (EMBED_STEP texts a call), and each chunk gets its own text's vector whatever the batches."""
    from pgsift import ingest

    monkeypatch.setattr(ingest, "EMBED_STEP", 2)
    for name in "abcde":
        (tmp_path / f"{name}.txt").write_text(f"Document {name} says {'something ' * (ord(name) - 96)}about {name}.\n")
    seen: list[tuple[int, int]] = []
    fake = CountingEmbedder(seen=lambda: list(seen))
    docs = ingest.documents_from_path(tmp_path, fake, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 5), (2, 5), (4, 5), (5, 5)]
    assert [len(c) for c in fake.calls] == [2, 2, 1]
    assert fake.states[0] == [(0, 5)]                         # the bar was at 0 before the first call
    for d in docs:
        for c in d.chunks:
            assert np.allclose(c.embedding, fake.embed([f"{c.context}\n\n{c.content}"])[0])


class RecordingBar:
    def __init__(self, total, desc, unit="q"):
        self.total, self.desc, self.n, self.history = total, desc, 0, [0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, k=1):
        self.n += k
        self.history.append(self.n)

    def set_postfix(self, *args, **kwargs):
        pass


def test_the_ingest_bar_shows_before_the_first_batch_and_moves_per_batch(dsn, tmp_path, monkeypatch, capsys):
    """`pgsift ingest`: the embedding bar is up (at 0, with the chunk total) when the first batch is
    sent to the embedder, and moves after every batch (no torch: a stand-in embedder)."""
    from pgsift import ingest

    bars: list[RecordingBar] = []

    def bar(total, desc, unit="q"):
        bars.append(RecordingBar(total, desc, unit))
        return bars[-1]

    fake = CountingEmbedder(seen=lambda: [(b.desc, b.total, b.n) for b in bars])
    monkeypatch.setattr(ingest, "EMBED_STEP", 2)
    monkeypatch.setattr("pgsift.cli.common.progress_bar", bar)
    monkeypatch.setattr("pgsift.cli.common.load_embedder", lambda required=False, for_queries=False: fake)
    for name in "abcde":
        (tmp_path / f"{name}.txt").write_text(f"Document {name} is about {name}.\n")
    assert main(["--dsn", dsn, "ingest", "kb", str(tmp_path), "--create"]) == 0
    assert "ingested 5 chunks into kb" in capsys.readouterr().out
    assert fake.states[0] == [("embed kb", 5, 0)]
    assert bars[0].desc == "embed kb" and bars[0].history == [0, 0, 2, 4, 5]
    assert bars[1].desc == "ingest kb" and bars[1].n == 5


def test_markdown_is_cut_at_headings_with_a_context_header():
    text = "# Guide\n\nIntro words.\n\n## Refunds\n\n" + "word " * 250 + "\n\nShort tail."
    chunks = chunk_markdown(text, "Guide", max_words=100)
    assert chunks[0].context == "Guide" and chunks[0].content == "Intro words."
    assert all(c.context == "Guide > Refunds" for c in chunks[1:])
    assert all(len(c.content.split()) <= 100 for c in chunks)
    assert "".join(c.content for c in chunks[1:]).count("word") == 250


def test_markdown_comments_are_not_text():
    text = "# Guide\n\n<!-- not run: needs a server -->\nRun it.\n\nA <!-- two\nlines --> note."
    chunks = chunk_markdown(text, "Guide")
    assert [c.content for c in chunks] == ["Run it.\n\nA  note."]


def test_ingest_search_explain_through_the_cli(dsn, kb, capsys):
    assert main(["--dsn", dsn, "search", "kb", "how long until my refund is paid", "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["rank", "score", "leg", "dense", "lexical"]
    assert "Refunds" in lines[2]                                  # the refund chunk ranks first
    assert "legs run: dense, lexical" in out

    assert main(["--dsn", dsn, "search", "kb", "Rotterdam", "--json", "--no-embed"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["source_uri"] for h in hits] == ["shipping.txt"] and hits[0]["found_by"] == "lexical"

    assert main(["--dsn", dsn, "explain", "kb", "refund", "--top-k", "1"]) == 0
    out = capsys.readouterr().out
    assert "kept" in out and "cut" in out                       # one kept, one below the cut


def test_reembed_moves_a_collection_through_the_cli(dsn, db, kb, capsys, tmp_path):
    """`pgsift reembed` with the static embedder, then with vectors from a file; `pgsift spaces`."""
    assert main(["--dsn", dsn, "reembed", "kb", "static-64", "--embedder", "static", "--dims", "64"]) == 0
    out = capsys.readouterr().out
    assert "wrote 2 vectors" in out and "searches now use static-64 (was default)" in out
    # the CLI embeds its questions as the active space was embedded
    assert main(["--dsn", dsn, "search", "kb", "how long until my refund is paid", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["source_uri"] == "refunds.md" and hits[0]["dense_space"] == "static-64"
    ids = [r[0] for r in db.execute("select chunk_id from sift.chunks order by chunk_id").fetchall()]
    np.savez(tmp_path / "v.npz", chunk_ids=np.array(ids), embeddings=np.eye(len(ids), 16, dtype=np.float32))
    assert main(["--dsn", dsn, "reembed", "kb", "mine", "--vectors", str(tmp_path / "v.npz"), "--drop-old"]) == 0
    assert "dropped static-64" in capsys.readouterr().out
    assert main(["--dsn", dsn, "search", "kb", "refund"]) == 2   # a model the CLI does not have: said so
    assert "cannot embed for" in capsys.readouterr().err
    assert main(["--dsn", dsn, "search", "kb", "refund", "--no-embed"]) == 0
    capsys.readouterr()
    assert main(["--dsn", dsn, "spaces", "kb", "--json"]) == 0
    spaces = json.loads(capsys.readouterr().out)
    assert [(s["name"], s["dimensions"], s["active"], s["missing"]) for s in spaces] == [
        ("mine", 16, True, 0), ("default", 384, False, 0)]
    np.savez(tmp_path / "short.npz", chunk_ids=np.array(ids[:1]), embeddings=np.eye(1, 8, dtype=np.float32))
    assert main(["--dsn", dsn, "reembed", "kb", "short", "--vectors", str(tmp_path / "short.npz")]) == 2
    assert "no vector for chunk" in capsys.readouterr().err
    (tmp_path / "bad.npz").write_bytes(b"not a numpy file")
    assert main(["--dsn", dsn, "reembed", "kb", "bad", "--vectors", str(tmp_path / "bad.npz")]) == 2
    assert "an .npz with arrays chunk_ids and embeddings" in capsys.readouterr().err


def test_set_reaches_search_and_explain(dsn, db, kb, capsys, embedder):
    question = "how long until my refund is paid"
    vector = embedder.embed([question])[0]
    plain = Client(db)

    # the dense leg alone: what the client returns with the same knob
    assert main(["search", "kb", question, "--set", "hybrid=false", "--json", "--dsn", dsn]) == 0
    hits = json.loads(capsys.readouterr().out)
    want = plain.search("kb", question, embedding=vector, hybrid=False)
    assert [h["chunk_id"] for h in hits] == [h.chunk_id for h in want]
    assert {h["found_by"] for h in hits} == {"dense"} and hits[0]["legs"] == ["dense"]

    # JSON values, text values and null (off) in one call, as the client takes them
    knobs = {"dense_weight": 0.9, "lexical_scorer": "ts_rank_cd", "mmr_lambda": None, "per_document_cap": 1}
    assert main(["--dsn", dsn, "search", "kb", question, "--json", "--set", "dense_weight=0.9",
                 "--set", "lexical_scorer=ts_rank_cd", "--set", "mmr_lambda=null",
                 "--set", "per-document-cap=1"]) == 0
    hits = json.loads(capsys.readouterr().out)
    want = plain.search("kb", question, embedding=vector, **knobs)
    assert [(h["chunk_id"], round(h["score"], 9)) for h in hits] == [(h.chunk_id, round(h.score, 9)) for h in want]

    # explain takes them too: every candidate found by the dense leg alone
    assert main(["--dsn", dsn, "explain", "kb", "refund", "--set", "hybrid=false", "--json"]) == 0
    pool = json.loads(capsys.readouterr().out)
    want_pool = plain.explain("kb", "refund", embedding=embedder.embed(["refund"])[0], hybrid=False)
    assert [(c["chunk_id"], c["kept"]) for c in pool] == [(c.chunk_id, c.kept) for c in want_pool]
    assert {c["lexical_rank"] for c in pool} == {None} and pool[0]["legs"] == ["dense"]

    # the database refuses a bad knob: one line, exit 2
    for argv, message in ((["search", "kb", "x", "--set", "dense_wieght=0.5"],
                           'unknown knob "dense_wieght"'),
                          (["explain", "kb", "x", "--set", "fetch_k=5000"], "fetch_k"),
                          (["search", "kb", "x", "--set", "hybrid=null"], "hybrid cannot be switched off"),
                          (["search", "kb", "x", "--set", "dense_weight"], "--set takes knob=value")):
        assert main(["--dsn", dsn, *argv, "--no-embed"]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1, (argv, err)


def test_knobs_command_prints_sift_knobs(dsn, db, kb, capsys):
    names = [name for (name,) in db.execute("select name from sift.knobs()")]
    assert main(["--dsn", dsn, "knobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "type", "default", "allowed", "off", "scope", "stage", "meaning"]
    assert [line.split()[0] for line in lines[2:]] == names
    dense = next(line for line in lines if line.startswith("dense_weight "))
    assert "0.5" in dense and "fusion" in dense

    # with a collection: the value in force and where it comes from, a call's --set included
    assert main(["knobs", "kb", "--set", "dense_weight=0.3", "--dsn", dsn, "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(rows) == names
    want = {k.name: (k.value, k.source) for k in Client(db).knobs("kb", dense_weight=0.3)}
    assert {name: (r["value"], r["source"]) for name, r in rows.items()} == want
    assert want["dense_weight"] == (0.3, "call") and want["rrf_k"][1] == "default"

    assert main(["--dsn", dsn, "knobs", "kb"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[7:9] == ["value", "source"]
    assert main(["--dsn", dsn, "knobs", "--set", "dense_weight=0.3"]) == 2
    assert "name one" in capsys.readouterr().err


def test_dsn_and_tenant_before_or_after_the_subcommand(dsn, db, capsys):
    # (the fixture installed pgsift) it says so and re-applies nothing, unless forced (after a hand
    # edit of a function)
    assert main(["migrate", "--dsn", dsn]) == 0
    assert capsys.readouterr().out.startswith("up to date: nothing applied")
    db.execute("create or replace function sift.current_tenant() returns text language sql stable "
               "set search_path = pg_catalog, pg_temp as $$ select 'edited'::text $$")
    assert main(["migrate", "--dsn", dsn, "--force"]) == 0
    assert "function files re-applied" in capsys.readouterr().out
    assert db.execute("select position('edited' in prosrc) from pg_proc "
                      "where oid = 'sift.current_tenant()'::regprocedure").fetchone() == (0,)
    assert main(["collection", "create", "notes", "--dims", "8", "--tenant", "acme", "--dsn", dsn,
                 "--set", "dense_weight=0.7", "--set", "recency_field=modified"]) == 0
    assert "created notes (8 dims, english)" in capsys.readouterr().out
    assert main(["--dsn", dsn, "--tenant", "acme", "collection", "create", "more", "--dims", "8",
                 "--language", "simple", "--description", "more notes"]) == 0
    assert "created more (8 dims, simple)" in capsys.readouterr().out
    # the collections are acme's, with the knobs given stored
    acme = Client(db, tenant="acme")
    assert [c.name for c in acme.list_collections()] == ["more", "notes"]
    assert acme.get_collection("notes").knobs == {"dense_weight": 0.7, "recency_field": "modified"}
    assert Client(db).list_collections() == []            # the operator unbound acts as "default"
    assert main(["--tenant", "acme", "collection", "list", "--dsn", dsn]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["name", "language", "dims", "distance", "reranker", "knobs", "set"]
    assert out[3].split()[:4] == ["notes", "english", "8", "cosine"]
    assert out[3].endswith("dense_weight=0.7 recency_field=modified")
    # alter stores and resets knobs; drop goes
    assert main(["collection", "alter", "notes", "--set", "mmr_lambda=0.5", "--reset", "dense_weight",
                 "--dsn", dsn, "--tenant", "acme"]) == 0
    assert acme.get_collection("notes").knobs == {"mmr_lambda": 0.5, "recency_field": "modified"}
    assert main(["collection", "drop", "more", "--dsn", dsn, "--tenant", "acme"]) == 0
    assert [c.name for c in acme.list_collections()] == ["notes"]
    # a bad stored knob is the database's error, one line
    assert main(["collection", "create", "bad", "--set", "per_document_cap=-1", "--dsn", dsn]) == 2
    assert "per_document_cap" in capsys.readouterr().err
    assert main(["collection", "drop", "--dsn", dsn]) == 2
    assert "needs a name" in capsys.readouterr().err


def test_cli_errors_are_one_line(dsn, capsys):
    assert main(["--dsn", dsn, "search", "nope", "x", "--no-embed"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown collection") and "Traceback" not in err
    assert main(["--dsn", dsn, "search", "nope", "x", "--no-embed", "--filter", "{bad"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    unreachable = "postgresql://nobody@/nowhere?host=/nonexistent-socket-dir&connect_timeout=1"
    assert main(["migrate", "--dsn", unreachable]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the database") and len(err.splitlines()) == 1


def test_an_unmigrated_database_and_a_failed_create_are_said_plainly(dsn, db, capsys, tmp_path):
    name = f"pgsift_bare_{uuid.uuid4().hex[:8]}"
    db.execute(f'create database "{name}"')
    try:
        bare = f"postgresql://{db.info.user}@/{name}?host={SOCKET_DIR}&port={db.info.port}"
        assert main(["--dsn", bare, "search", "kb", "refund", "--no-embed"]) == 2
        err = capsys.readouterr().err
        assert "pgsift is not installed in this database" in err and "pgsift migrate" in err
    finally:
        db.execute(f'drop database if exists "{name}" with (force)')
    (tmp_path / "bad.jsonl").write_text('{"not": "a chunk"}\n')
    assert main(["--dsn", dsn, "ingest", "fresh", str(tmp_path / "bad.jsonl"), "--create"]) == 2
    capsys.readouterr()
    assert main(["--dsn", dsn, "collection", "list", "--json"]) == 0
    assert "fresh" not in capsys.readouterr().out           # a failed --create leaves nothing behind


def test_install_sql_prints_the_install_script(capsys):
    assert main(["install-sql"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("-- pgsift install script") and out.rstrip().endswith("commit;")


def _parsers(parser: argparse.ArgumentParser, path: str = "pgsift"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, f"{path} {name}")


def test_every_option_has_help_and_takes_the_connection_options():
    seen = set()
    for path, parser in _parsers(build_parser()):
        seen.add(path)
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            assert action.help, f"{path}: {action.dest} has no help"
        options = {o for a in parser._actions for o in a.option_strings}
        assert {"--dsn", "--tenant"} <= options, path
    assert {"pgsift search", "pgsift explain", "pgsift knobs", "pgsift bench quality", "pgsift golden import",
            "pgsift eval", "pgsift calibrate", "pgsift collection", "pgsift reranker add", "pgsift reranker list",
            "pgsift reranker test", "pgsift reranker drop"} <= seen


def test_cli_modules_import_no_sibling_but_common():
    """No import cycle: the command modules share pgsift.cli.common and never import each other."""
    folder = Path(pgsift.cli.__file__).parent
    for path in folder.glob("*.py"):
        siblings = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                siblings |= {node.module} if node.module else {a.name for a in node.names}
        if path.name == "__init__.py":
            assert siblings <= {"bench", "commands", "common", "evaluation", "rerankers"}
        elif path.name == "__main__.py":
            assert siblings == {"main"}                     # the package's own main()
        elif path.name == "common.py":
            assert siblings == set(), siblings
        else:
            assert siblings <= {"common"}, (path.name, siblings)
