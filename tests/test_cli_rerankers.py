"""`pgsift reranker add|list|test|spend|drop`, through the real CLI entry point, against the loopback
rerank servers (tests/rerank_servers.py) and a loopback endpoint that refuses every key (401).

The operator's side (allowing an endpoint, mapping a tenant's secret_ref to an environment
variable) is SQL as the superuser; the tenant's side is the command line. A test that fails
exits 1 with one line that says why (no traceback), and sends nothing when it cannot send.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pgsift import rerankers
from pgsift.cli import main
from rerank_servers import RerankServer, closed_port, keyword_scorer, loopback_only, reverse_scorer

KEY_VAR = "PGSIFT_CLI_TEI_KEY"
RIGHT = keyword_scorer({"Refunds reach": 0.93, "return an item": 0.41}, 0.02)


@pytest.fixture(autouse=True)
def _loopback(monkeypatch):
    loopback_only(monkeypatch)
    monkeypatch.setenv(KEY_VAR, "tei-key-123")
    rerankers.clear_reranker_cache()
    yield
    rerankers.clear_reranker_cache()


@pytest.fixture
def operator(db):
    """Loopback endpoints allowed, and the tenants' secret_ref "tei" mapped to KEY_VAR for TEI there."""
    db.execute("select sift.allow_endpoint(url_prefix => 'http://127.0.0.1:')")
    for tenant in ("default", "acme"):
        db.execute("select sift.map_secret(%s, 'tei', %s, provider => 'tei', endpoints => array['http://127.0.0.1:'])",
                   [tenant, f"env:{KEY_VAR}"])
    return db


@pytest.fixture
def server():
    with RerankServer(scorer=RIGHT) as s:
        yield s


def cli(dsn: str, *argv: str) -> int:
    return main(["--dsn", dsn, "reranker", *argv])


def listed(dsn: str, capsys, *tenant: str) -> dict[str, dict[str, Any]]:
    assert main(["--dsn", dsn, *tenant, "reranker", "list", "--json"]) == 0
    return {r["alias"]: r for r in json.loads(capsys.readouterr().out)}


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_add_list_test_drop(dsn, operator, server, capsys):
    assert cli(dsn, "add", "tei-main", "tei", "--base-url", server.url, "--secret-ref", "tei", "--model", "bge",
               "--timeout-ms", "1500", "--deadline-ms", "2500", "--max-attempts", "1", "--default") == 0
    out = capsys.readouterr()
    assert out.out.strip() == f"registered tei-main: tei bge at {server.url} (the tenant's default)"
    assert out.err == ""                                   # usable: no note

    row = listed(dsn, capsys)["tei-main"]
    assert (row["provider"], row["model"], row["base_url"], row["secret_ref"]) == ("tei", "bge", server.url, "tei")
    assert (row["timeout_ms"], row["deadline_ms"], row["max_attempts"], row["is_default"]) == (1500, 2500, 1, True)
    assert row["usable"] is True and row["why_not"] is None and row["key"] == f"env:{KEY_VAR} (set)"
    assert cli(dsn, "list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["alias", "provider", "model", "base_url"]
    assert lines[2].split()[:3] == ["tei-main", "tei", "bge"] and " yes " in lines[2]

    assert cli(dsn, "test", "tei-main") == 0
    out = capsys.readouterr().out
    assert f"reranker: tei-main (tei bge at {server.url})" in out
    assert "ok: yes" in out and "order_ok: yes (relevant > near_miss > irrelevant)" in out
    assert "min_score: 0.0200" in out and "max_score: 0.9300" in out and "latency_ms: " in out
    assert len(server.requests) == 1
    assert server.requests[0].headers["authorization"] == "Bearer tei-key-123"   # the mapped key, sent
    assert cli(dsn, "test", "tei-main", "--json") == 0
    check = json.loads(capsys.readouterr().out)
    assert check["ok"] and check["order_ok"] and check["order"] == ["relevant", "near_miss", "irrelevant"]

    # another tenant sees none of it
    assert listed(dsn, capsys, "--tenant", "acme") == {}
    assert main(["--dsn", dsn, "--tenant", "acme", "reranker", "test", "tei-main"]) == 1
    assert "no reranker 'tei-main' is registered for tenant 'acme'" in one_error_line(capsys)

    assert cli(dsn, "drop", "tei-main") == 0
    assert "dropped tei-main" in capsys.readouterr().out
    assert listed(dsn, capsys) == {}
    assert cli(dsn, "drop", "tei-main") == 1
    assert "no reranker 'tei-main'" in one_error_line(capsys)


def test_a_wrong_order_an_unreachable_endpoint_and_a_server_error_fail(dsn, operator, capsys):
    with RerankServer(scorer=reverse_scorer) as wrong, RerankServer(fault="500") as broken:
        for alias, url in (("wrong", wrong.url), ("down", f"http://127.0.0.1:{closed_port()}"),
                           ("broken", broken.url)):
            assert cli(dsn, "add", alias, "tei", "--base-url", url, "--secret-ref", "tei") == 0
        capsys.readouterr()
        assert cli(dsn, "test", "wrong") == 1
        captured = capsys.readouterr()
        assert "ok: yes" in captured.out and "order_ok: no" in captured.out
        assert "ranked three passages of an obvious order as near_miss > relevant > irrelevant" in captured.err
        assert cli(dsn, "test", "down", "--timeout-s", "2") == 1
        captured = capsys.readouterr()
        assert "ok: no" in captured.out
        assert "error: down (tei tei at http" in captured.err and "connection_error" in captured.err
        assert cli(dsn, "test", "broken", "--timeout-s", "2") == 1
        assert "server_error: HTTP 500" in capsys.readouterr().err


class _Refuses(BaseHTTPRequestHandler):
    """An endpoint that refuses every key, as a provider does a wrong one."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"error": "invalid api key"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_refused_a_missing_and_an_unmapped_key_are_said(dsn, operator, server, capsys, monkeypatch):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        assert cli(dsn, "add", "refused", "tei", "--base-url", f"http://127.0.0.1:{httpd.server_address[1]}",
                   "--secret-ref", "tei") == 0
        capsys.readouterr()
        assert cli(dsn, "test", "refused") == 1
        captured = capsys.readouterr()
        assert "ok: no" in captured.out
        err = captured.err
        assert "client_error: HTTP 401" in err and "Traceback" not in err
        assert f"the provider refused the key: check the one kept at env:{KEY_VAR}" in err
    finally:
        httpd.shutdown()
        httpd.server_close()

    # the key's variable is not set here: the test says which, and sends nothing
    assert cli(dsn, "add", "tei-main", "tei", "--base-url", server.url, "--secret-ref", "tei") == 0
    capsys.readouterr()
    monkeypatch.delenv(KEY_VAR)
    assert listed(dsn, capsys)["tei-main"]["key"] == f"env:{KEY_VAR} (not set here)"
    assert cli(dsn, "test", "tei-main") == 1
    err = one_error_line(capsys)
    assert "unavailable" in err and f"the operator keeps it at env:{KEY_VAR}" in err
    assert server.requests == []

    # a secret_ref the operator has not mapped: registered, said unusable, and why
    assert cli(dsn, "add", "voyage", "voyage", "--secret-ref", "voyage-key") == 0
    note = capsys.readouterr().err
    assert note.startswith("note: searches cannot use it yet: secret_ref 'voyage-key' is not mapped to a key")
    row = listed(dsn, capsys)["voyage"]
    assert row["usable"] is False and "sift.map_secret('default', 'voyage-key'" in row["why_not"]
    assert row["key"] == "not mapped" and row["model"] == "rerank-2"   # the provider's default model
    assert cli(dsn, "test", "voyage") == 1
    assert "cannot be used: secret_ref 'voyage-key' is not mapped" in one_error_line(capsys)

    # a key mapped for another provider is refused for this one, as searches refuse it
    operator.execute("select sift.map_secret('default', 'voyage-key', 'env:X', provider => 'cohere')")
    row = listed(dsn, capsys)["voyage"]
    assert row["usable"] is False and "is mapped for cohere, not for voyage" in row["why_not"]
    assert cli(dsn, "test", "voyage") == 1
    assert "mapped for cohere" in one_error_line(capsys)


def test_the_database_refuses_a_bad_registration_in_one_line(dsn, operator, capsys):
    assert cli(dsn, "add", "x", "nosuch") == 2
    assert 'unknown reranker provider "nosuch"' in one_error_line(capsys)
    assert cli(dsn, "add", "x", "voyage") == 2                       # bills an account: needs a secret_ref
    assert "register it with a secret_ref" in one_error_line(capsys)
    assert cli(dsn, "add", "x", "tei", "--base-url", "http://10.1.2.3:8080") == 2
    assert "not an endpoint the operator allows" in one_error_line(capsys)
    assert cli(dsn, "add", "x", "tei", "--base-url", "http://127.0.0.1:9", "--timeout-ms", "0") == 2
    one_error_line(capsys)
    assert cli(dsn, "list", "--json") == 0 and json.loads(capsys.readouterr().out) == []


def test_spend_sums_what_reranking_cost_and_says_what_is_unpriced(dsn, db, capsys):
    """`pgsift reranker spend`: sift.rerank_spend per provider and model at the operator's prices;
    a tenant sees its own, a model with no price is unpriced (never 0)."""
    db.execute("insert into sift.rerank_prices (provider, model, effective_from, price_per_million_tokens, "
               "currency) values ('voyage', 'rerank-2', '-infinity', 50, 'USD')")
    for tenant, model, tokens in (("acme", "rerank-2", 200_000), ("acme", "rerank-2", 100_000),
                                  ("acme", "rerank-9", 10), ("globex", "rerank-2", 1_000_000)):
        db.execute("insert into sift.rerank_usage (tenant, provider, model, documents, tokens, latency_ms, ok, "
                   "billed) values (%s, 'voyage', %s, 3, %s, 10, true, true)", [tenant, model, tokens])
    assert main(["--dsn", dsn, "--tenant", "acme", "reranker", "spend", "--json"]) == 0
    rows = {r["model"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"rerank-2", "rerank-9"} and {r["tenant"] for r in rows.values()} == {"acme"}
    priced = rows["rerank-2"]
    assert (priced["calls"], float(priced["cost"]), priced["currency"]) == (2, 15.0, "USD")
    assert rows["rerank-9"]["cost"] is None and rows["rerank-9"]["unpriced_calls"] == 1
    assert main(["--dsn", dsn, "reranker", "spend", "--tenant-of", "globex", "--json"]) == 0
    assert [(r["tenant"], float(r["cost"])) for r in json.loads(capsys.readouterr().out)] == [("globex", 50.0)]
    assert main(["--dsn", dsn, "reranker", "spend", "--since", "2000-01-01"]) == 0
    out = capsys.readouterr().out
    assert "15.0000 USD" in out and "50.0000 USD" in out and "unpriced" in out   # the operator's view
