"""`pgsift ingest --enrich`: enrichment at ingest from the command line, through the real CLI
entry point and the real `openai` client against a loopback chat server (tests/chat_server.py).

The embedder is a stand-in (no torch is loaded here): the command's own embedder lookup returns it.
What is checked: chunks are enriched and indexed, a second run reuses what was written, the token
budget holds across documents (the chunks past it index with their header, and it is said), a
failing endpoint stops being called, the dry run estimates what the library's estimate says and
sends and writes nothing, and a key comes only from where it may.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import psycopg
import pytest
from chat_server import ChatServer
from pgsift import Client, enrich
from pgsift.cli import main
from pgsift.ingest import documents_from_path

DIMS = 384
PAGES = {
    "refunds.md": "# Refunds\n\nRefunds are paid within fourteen days.\n\nLarge refunds need the finance team.\n",
    "shipping.md": "# Shipping\n\nParcels leave Rotterdam every weekday morning.\n\nDelivery takes two to four days.\n",
    "leave.md": "# Leave\n\nEmployees get twenty five paid days.\n\nUnused days expire each March.\n",
}
WORDS = "6"   # --max-words: each page's two paragraphs are two chunks


class StandIn:
    """A deterministic unit vector per text, behind the Embedder protocol."""

    dims = DIMS
    name = "stand-in"

    def embed(self, texts):
        out = np.array([np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).normal(size=DIMS)
                        for t in texts], dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(autouse=True)
def _stand_in(monkeypatch):
    monkeypatch.setattr("pgsift.cli.common.load_embedder", lambda required=False, for_queries=False: StandIn())
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def pages(tmp_path) -> Path:
    folder = tmp_path / "pages"
    folder.mkdir()
    for name, text in PAGES.items():
        (folder / name).write_text(text)
    return folder


def ingest(dsn: str, folder: Path, *extra: str) -> int:
    return main(["--dsn", dsn, "ingest", "kb", str(folder), "--create", "--max-words", WORDS, *extra])


def enriched(server: ChatServer, *extra: str) -> list[str]:
    return ["--enrich", "--enrich-base-url", server.base_url, "--enrich-retries", "0", "--enrich-timeout", "5",
            "--questions", "2", *extra]


def history(db: psycopg.Connection) -> list[tuple]:
    return [(r.source_uri, r.enriched, r.reused, r.failed, r.skipped, r.input_tokens + r.output_tokens, r.warnings)
            for r in Client(db).enrichment_history("kb")]


def test_ingest_enriches_every_chunk_and_a_second_run_reuses_them(dsn, db, pages, capsys):
    with ChatServer() as server:
        assert ingest(dsn, pages, *enriched(server)) == 0
        out = capsys.readouterr().out
        assert "ingested 6 chunks into kb" in out
        assert "enrichment (gpt-4o-mini): 6 enriched, 0 reused, 0 failed, 0 not sent" in out
        assert len(server.requests) == 6 and {r["model"] for r in server.requests} == {"gpt-4o-mini"}
        contexts = [c for (c,) in db.execute("select context from sift.chunks order by chunk_id")]
        assert len(contexts) == 6
        assert all("This chunk comes from a company page" in c and "Questions: " in c for c in contexts)
        assert [(uri, n, reused) for uri, n, reused, *_ in history(db)] == [
            ("leave.md", 2, 0), ("refunds.md", 2, 0), ("shipping.md", 2, 0)]

        # the same text again: what was written is reused, nothing is sent, as JSON
        assert ingest(dsn, pages, *enriched(server), "--json") == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["chunks"] == 6 and summary["enrichment"]["reused"] == 6
        assert summary["enrichment"]["enriched"] == 0 and summary["enrichment"]["input_tokens"] == 0
        assert len(server.requests) == 6


def test_the_budget_holds_across_documents_and_the_rest_index_unenriched(dsn, db, pages, capsys):
    docs = documents_from_path(pages, None, int(WORDS), embed=False)
    settings = enrich.Settings(questions=2)
    # enough for three calls at their most: the second page's second chunk is past it
    most = [enrich.expected_tokens(*enrich.prompt_parts(d, i, settings.max_document_tokens), settings)
            for d in docs for i in range(len(d.chunks))]
    budget = sum(most[:3])
    with ChatServer() as server:
        assert ingest(dsn, pages, *enriched(server, "--budget-tokens", str(budget))) == 0
        captured = capsys.readouterr()
    sent = len(server.requests)
    assert 3 <= sent < 6                        # a call at its most fits: the real one spent less
    assert f"warning: the token budget of {budget} was spent: {6 - sent} chunk(s)" in captured.err
    # every chunk is indexed; the ones past the budget with their header alone
    rows = db.execute("select context from sift.chunks order by chunk_id").fetchall()
    assert len(rows) == 6 and sum("Questions:" in c for (c,) in rows) == sent
    runs = history(db)
    assert sum(r[5] for r in runs) <= budget    # what was spent, as the provider reported it
    assert sum(r[4] for r in runs) == 6 - sent
    said = [w for r in runs for w in r[6]]
    assert any(f"the ingestion's token budget of {budget} was spent" in w for w in said), said
    # searchable all the same
    assert main(["--dsn", dsn, "search", "kb", "Rotterdam", "--no-embed", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["source_uri"] == "shipping.md"


def test_a_failing_endpoint_stops_being_called_and_the_documents_index(dsn, db, pages, capsys):
    with ChatServer(faults=["500"]) as server:
        assert ingest(dsn, pages, *enriched(server), "--json") == 0
        captured = capsys.readouterr()
    assert len(server.requests) == enrich.MAX_FAILURES_IN_A_ROW   # across documents, then nothing
    e = json.loads(captured.out)["enrichment"]
    assert (e["enriched"], e["failed"], e["skipped"], e["stopped_after_failures"]) == (0, 5, 1, True)
    assert [(r[3], r[4]) for r in history(db)] == [(2, 0), (2, 0), (1, 1)]
    assert any("5 calls in a row failed: 1 chunk(s) not sent" in w for w in history(db)[2][6])
    assert f"{enrich.MAX_FAILURES_IN_A_ROW} calls in a row failed" in captured.err
    assert "Traceback" not in captured.err
    assert db.execute("select count(*) from sift.chunks").fetchone() == (6,)
    assert db.execute("select count(*) from sift.chunks where context like '%%Questions:%%'").fetchone() == (0,)


def test_the_dry_run_estimates_and_sends_and_writes_nothing(dsn, db, pages, capsys):
    docs = documents_from_path(pages, None, int(WORDS), embed=False)
    oracle = enrich.estimate(docs, "gpt-4o-mini", enrich.Settings(questions=2))
    with ChatServer() as server:
        assert ingest(dsn, pages, *enriched(server), "--dry-run", "--json") == 0
        report = json.loads(capsys.readouterr().out)
        assert server.requests == []
        assert (report["documents"], report["chunks"], report["exists"]) == (3, 6, False)
        e = report["enrichment"]
        assert (e["calls"], e["reused"], e["over_budget"]) == (6, 0, 0)
        assert (e["input_tokens"], e["output_tokens"]) == (oracle.input_tokens, oracle.output_tokens)
        assert e["cost_usd"] == pytest.approx(oracle.cost_usd)
        assert Client(db).list_collections() == []          # --create did not create it

        # the text form says the same, labelled as estimates
        assert ingest(dsn, pages, *enriched(server), "--dry-run") == 0
        out = capsys.readouterr().out
        assert "dry run: nothing embedded, sent or written; kb would be created" in out
        assert "LM calls: 6 (0 chunk(s) reused" in out
        assert f"input tokens: ~{oracle.input_tokens} (estimated at 4 characters a token)" in out

        # after an ingest of two pages, the third alone would be sent; a budget is applied
        (pages / "leave.md").rename(pages.parent / "leave.md")
        assert ingest(dsn, pages, *enriched(server)) == 0
        (pages.parent / "leave.md").rename(pages / "leave.md")
        capsys.readouterr()
        sent = len(server.requests)
        assert ingest(dsn, pages, *enriched(server), "--dry-run", "--json") == 0
        e = json.loads(capsys.readouterr().out)["enrichment"]
        assert (e["calls"], e["reused"], e["over_budget"]) == (2, 4, 0)
        assert ingest(dsn, pages, *enriched(server), "--dry-run", "--json", "--budget-tokens", "10") == 0
        e = json.loads(capsys.readouterr().out)["enrichment"]
        assert (e["calls"], e["reused"], e["over_budget"], e["input_tokens"]) == (0, 4, 2, 0)
        assert len(server.requests) == sent
        assert db.execute("select count(*) from sift.chunks").fetchone() == (4,)

    # without --enrich: documents and chunks
    assert main(["--dsn", dsn, "ingest", "kb", str(pages), "--max-words", WORDS, "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["documents"], report["chunks"], report["chunks_to_embed"], report["exists"]) == (3, 6, 6, True)
    assert "enrichment" not in report


def test_the_key_comes_from_the_environment_or_the_operators_mapping(dsn, db, pages, capsys, monkeypatch):
    # OpenAI's own endpoint without a key: said before anything is created
    assert ingest(dsn, pages, "--enrich") == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY is not set" in err and len(err.splitlines()) == 1
    assert ingest(dsn, pages, "--enrich", "--enrich-base-url", "http://127.0.0.1:9/v1",
                  "--enrich-key-env", "PGSIFT_NO_SUCH_VARIABLE") == 2
    assert "PGSIFT_NO_SUCH_VARIABLE is not set" in capsys.readouterr().err
    assert Client(db).list_collections() == []
    # enrichment options without --enrich, and two places for a key
    assert ingest(dsn, pages, "--questions", "0", "--budget-tokens", "5") == 2
    assert "--questions, --budget-tokens: only with --enrich" in capsys.readouterr().err
    assert ingest(dsn, pages, "--enrich", "--enrich-key-env", "A", "--enrich-secret-ref", "b") == 2
    assert "one place for the key" in capsys.readouterr().err

    with ChatServer() as server:
        ref = ["--enrich-secret-ref", "llm"]
        assert ingest(dsn, pages, *enriched(server, *ref)) == 2
        assert "secret_ref 'llm' is not mapped" in capsys.readouterr().err
        db.execute("select sift.map_secret('default', 'llm', 'env:PGSIFT_CLI_LLM_KEY', provider => 'voyage')")
        assert ingest(dsn, pages, *enriched(server, *ref)) == 2
        assert "mapped for voyage rerankers" in capsys.readouterr().err
        db.execute("select sift.map_secret('default', 'llm', 'env:PGSIFT_CLI_LLM_KEY', provider => 'any', "
                   "endpoints => array['http://10.0.0.1:'])")
        assert ingest(dsn, pages, *enriched(server, *ref)) == 2
        assert f"may not be sent to {server.base_url}" in capsys.readouterr().err
        db.execute("select sift.map_secret('default', 'llm', 'env:PGSIFT_CLI_LLM_KEY', provider => 'any', "
                   "endpoints => array['http://127.0.0.1:'])")
        assert ingest(dsn, pages, *enriched(server, *ref)) == 2
        assert "environment variable PGSIFT_CLI_LLM_KEY, which is not set here" in capsys.readouterr().err
        assert server.requests == [] and Client(db).list_collections() == []
        monkeypatch.setenv("PGSIFT_CLI_LLM_KEY", "sk-loopback")
        assert ingest(dsn, pages, *enriched(server, *ref)) == 0
        assert len(server.requests) == 6
