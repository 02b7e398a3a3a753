"""Loopback stand-ins for the rerank endpoints, for tests (no network exists here).

One small HTTP server answers the three protocols by path, each in the shape the real
service uses, so the real client libraries run against it unchanged:

    POST /v1/rerank   Voyage: {model, query, documents, top_k, truncation}
                      -> {"object": "list", "data": [{"index", "relevance_score"}],
                          "model", "usage": {"total_tokens"}}
    POST /v2/rerank   Cohere v2: {model, query, documents, top_n}
                      -> {"id", "results": [{"index", "relevance_score"}],
                          "meta": {"billed_units": {"search_units"}}}
    POST /rerank      Text Embeddings Inference: {query, texts, truncate}
                      -> [{"index", "score"}]  (header x-compute-tokens)

`fault` injects one failure into every answer (or only the first `fail_first`, or only
those after the first `fail_after`): "slow"
(waits `delay` seconds first), "429", "500", "503", "400", "malformed" (invalid JSON),
"out_of_range", "negative_index", "duplicate", "nan", "missing_score", "partial" (ranks
half the documents), "empty", "301", "302", "307", "308" (a redirect to `redirect_to`
plus the request's path: a server that sends the request, and its key, elsewhere).
`retry_after` (seconds) goes out as a Retry-After header with every 429 and 5xx. Every
request is recorded (path, headers, JSON body; a GET too), so a test can assert that none
was made.

`limits` makes it enforce a provider's request limits as the real services do, counting a
token per SERVER_CHARS_PER_TOKEN characters: max_documents, max_query_tokens,
max_pair_tokens (query + one document; only when the request asks not to truncate, as
Voyage's truncation=false and TEI's truncate=false do), max_request_tokens (query tokens x
documents + every document's tokens). A violation is answered 400 (Voyage, Cohere) or 413
(TEI's answer to a batch past --max-client-batch-size) and recorded in `violations`.

Bounded: it binds 127.0.0.1 only, answers at most `max_requests` requests, stops itself
after `lifetime` seconds, and `stop()` (or leaving the `with` block) releases any handler
still waiting.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Scorer = Callable[[str, Sequence[str]], list[float]]

SERVER_CHARS_PER_TOKEN = 4   # what the stand-in's "tokenizer" counts (a real one: about 4 for English)

FAULTS = ("slow", "429", "500", "503", "400", "malformed", "out_of_range", "negative_index",
          "duplicate", "nan", "missing_score", "partial", "empty", "301", "302", "307", "308")
REDIRECTS = ("301", "302", "307", "308")


def reverse_scorer(query: str, documents: Sequence[str]) -> list[float]:
    """Scores that reverse the pool order (the last document is the best), all distinct."""
    n = len(documents)
    return [(i + 1) / (n + 1) for i in range(n)]


def keyword_scorer(weights: dict[str, float], default: float = 0.05) -> Scorer:
    """Score each document by the first keyword it contains."""
    def score(query: str, documents: Sequence[str]) -> list[float]:
        out = []
        for doc in documents:
            out.append(next((w for k, w in weights.items() if k.lower() in doc.lower()), default))
        return out
    return score


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        # No endpoint is a GET; recorded all the same (a 302 or 303 followed becomes one).
        self.server.owner._record(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, None))
        self._send(405, {"detail": "method not allowed"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        srv = self.server.owner
        number = srv._record(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        if number > srv.max_requests:
            return self._send(503, {"detail": "too many requests for a test server"})
        kind = {"/v1/rerank": "voyage", "/v2/rerank": "cohere", "/rerank": "tei"}.get(self.path)
        if kind is None or not isinstance(body, dict):
            return self._send(404, {"detail": f"no such endpoint {self.path}"})
        fault = srv.fault if ((srv.fail_first is None or number <= srv.fail_first)
                              and (srv.fail_after is None or number > srv.fail_after)) else None
        if fault == "slow":
            with srv._lock:
                srv.holding += 1
            try:
                srv._release.wait(srv.delay)
            finally:
                with srv._lock:
                    srv.holding -= 1
            fault = None
        if fault in REDIRECTS:
            target = (srv.redirect_to or "http://127.0.0.1:9").rstrip("/") + self.path
            return self._send_raw(int(fault), b"", {"Location": target})
        if fault in ("429", "500", "503", "400"):
            message = {"429": "rate limited", "500": "internal error", "503": "overloaded",
                       "400": "bad request: documents too long"}[fault]
            key = "message" if kind == "cohere" else "detail" if kind == "voyage" else "error"
            wait = {"retry-after": f"{srv.retry_after:g}"} if srv.retry_after is not None and fault != "400" else None
            return self._send(int(fault), {key: message}, wait)
        if fault == "malformed":
            return self._send_raw(200, b'{"data": [{"index": 0, "relevance_score": 0.5')
        query = body.get("query", "")
        docs = body.get("documents") if kind != "tei" else body.get("texts")
        docs = list(docs or [])
        violation = srv.violation(kind, body, query, docs)
        if violation is not None:
            srv.violations.append(violation)
            key = "message" if kind == "cohere" else "detail" if kind == "voyage" else "error"
            return self._send(413 if kind == "tei" else 400, {key: violation})
        scores = srv.scorer(query, docs)
        order = sorted(range(len(docs)), key=lambda i: (-scores[i], i))
        limit = body.get("top_k") if kind == "voyage" else body.get("top_n") if kind == "cohere" else None
        if isinstance(limit, int):
            order = order[:limit]
        items: list[dict[str, Any]] = [{"index": i, "score": scores[i]} for i in order]
        if fault == "out_of_range" and items:
            items[0]["index"] = len(docs) + 7
        elif fault == "negative_index" and items:
            items[0]["index"] = -1
        elif fault == "duplicate" and len(items) > 1:
            items[1]["index"] = items[0]["index"]
        elif fault == "nan" and items:
            items[0]["score"] = float("nan")
        elif fault == "missing_score" and items:
            del items[0]["score"]
        elif fault == "partial":
            items = items[: max(1, len(items) // 2)]
        elif fault == "empty":
            items = []
        tokens = len(re.findall(r"\w+", query)) + sum(len(re.findall(r"\w+", d)) for d in docs)
        if kind == "tei":
            return self._send(200, items, {"x-compute-tokens": str(tokens)})
        for item in items:
            if "score" in item:
                item["relevance_score"] = item.pop("score")
        if kind == "voyage":
            return self._send(200, {"object": "list", "data": items, "model": body.get("model"),
                                    "usage": {"total_tokens": tokens}})
        return self._send(200, {"id": f"rerank-{number}", "results": items,
                                "meta": {"api_version": {"version": "2"},
                                         "billed_units": {"search_units": 1},
                                         "tokens": {"input_tokens": tokens}}})

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), headers)   # NaN stays NaN, as Python writes it

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:   # the client gave up (timeout): nothing to answer
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:  # quiet
        pass


def loopback_only(monkeypatch: Any) -> None:
    """Nothing may go through a proxy: every server here is on 127.0.0.1."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def import_providers(*packages: str) -> None:
    """Import the providers' packages up front (default: Cohere's and Voyage's). A deadline
    covers building a reranker, and a package's first import (seconds on a loaded machine)
    is a process's one-off cost, not what a test of deadlines bounds."""
    for package in packages or ("cohere", "voyageai"):
        importlib.import_module(package)


class RerankServer:
    """A loopback rerank endpoint; `with RerankServer(...) as s:` or start()/stop()."""

    def __init__(self, *, fault: str | None = None, fail_first: int | None = None,
                 delay: float = 5.0, scorer: Scorer = reverse_scorer, retry_after: float | None = None,
                 max_requests: int = 200, lifetime: float = 60.0, limits: dict[str, int] | None = None,
                 fail_after: int | None = None, redirect_to: str | None = None):
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        self.fault = fault
        self.fail_first = fail_first
        self.fail_after = fail_after
        self.redirect_to = redirect_to
        self.delay = delay
        self.scorer = scorer
        self.retry_after = retry_after
        self.max_requests = max_requests
        self.lifetime = lifetime
        self.limits = dict(limits or {})
        self.violations: list[str] = []
        self.requests: list[Request] = []
        # "slow" requests the server still holds unanswered: a caller that came back while it
        # holds one was cut off by its own deadline, not answered (no wall clock needed).
        self.holding = 0
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._httpd: _Server | None = None
        self._threads: list[threading.Thread] = []
        self._timer: threading.Timer | None = None

    def _record(self, request: Request) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests)

    def violation(self, kind: str, body: dict[str, Any], query: str, docs: list[str]) -> str | None:
        """Why the real service would refuse this request under `limits`, or None."""
        lim = self.limits
        tokens = [math.ceil(len(str(d)) / SERVER_CHARS_PER_TOKEN) for d in docs]
        q = math.ceil(len(str(query)) / SERVER_CHARS_PER_TOKEN)
        truncate = body.get("truncation", True) if kind == "voyage" else body.get("truncate", True)
        if "max_documents" in lim and len(docs) > lim["max_documents"]:
            return f"batch size {len(docs)} > maximum allowed batch size {lim['max_documents']}"
        if "max_query_tokens" in lim and q > lim["max_query_tokens"]:
            return f"the query has {q} tokens, more than {lim['max_query_tokens']}"
        if "max_pair_tokens" in lim and kind != "cohere" and not truncate and tokens \
                and q + max(tokens) > lim["max_pair_tokens"]:
            return f"a query and document of {q + max(tokens)} tokens, more than {lim['max_pair_tokens']}"
        if "max_request_tokens" in lim and q * len(docs) + sum(tokens) > lim["max_request_tokens"]:
            return (f"the request has {q * len(docs) + sum(tokens)} tokens, more than "
                    f"{lim['max_request_tokens']}")
        return None

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def base_url(self, provider: str) -> str:
        """What a reranker row's base_url is for this provider."""
        return f"{self.url}/v1" if provider == "voyage" else self.url

    def start(self) -> RerankServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                  name="rerank-test-server", daemon=True)
        thread.start()
        self._threads.append(thread)
        self._timer = threading.Timer(self.lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._timer is not None:
            self._timer.cancel()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> RerankServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
