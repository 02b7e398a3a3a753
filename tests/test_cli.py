"""The command line and the local embedder, end to end against the test database."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pgsift.cli import main
from pgsift.embed import LocalEmbedder
from pgsift.ingest import chunk_markdown


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def test_local_embedder_loads_offline_and_embeds_meaningfully(embedder):
    vecs = embedder.embed(["How do refunds work?", "Refunds are paid within 14 days.",
                           "The cat sat on the mat."])
    assert vecs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2


def test_markdown_is_cut_at_headings_with_a_context_header():
    text = "# Guide\n\nIntro words.\n\n## Refunds\n\n" + "word " * 250 + "\n\nShort tail."
    chunks = chunk_markdown(text, "Guide", max_words=100)
    assert chunks[0].context == "Guide" and chunks[0].content == "Intro words."
    assert all(c.context == "Guide > Refunds" for c in chunks[1:])
    assert all(len(c.content.split()) <= 100 for c in chunks)
    assert "".join(c.content for c in chunks[1:]).count("word") == 250


def test_ingest_search_explain_through_the_cli(dsn, tmp_path, capsys, embedder, monkeypatch):
    monkeypatch.setattr("pgsift.cli._embedder", lambda required=False: embedder)
    (tmp_path / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days of a return.\n")
    (tmp_path / "shipping.txt").write_text("Parcels ship from Rotterdam every weekday morning.\n")
    assert main(["--dsn", dsn, "migrate"]) == 0
    assert main(["--dsn", dsn, "ingest", "kb", str(tmp_path), "--create"]) == 0
    assert "ingested 2 chunks into kb" in capsys.readouterr().out

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


def test_cli_errors_are_one_line(dsn, capsys):
    assert main(["--dsn", dsn, "search", "nope", "x", "--no-embed"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown collection") and "Traceback" not in err
    assert main(["--dsn", dsn, "search", "nope", "x", "--no-embed", "--filter", "{bad"]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_install_sql_prints_the_install_script(capsys):
    assert main(["install-sql"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("-- pgsift install script") and out.rstrip().endswith("commit;")
