"""`pgsift db|migrate|install-sql|doctor|extension|collection|knobs|ingest|spaces|reembed|search|explain|demo`
(ingest with enrichment, its budgets and its dry run included)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from .. import embedded, enrich, ingest
from .. import queries as q
from ..client import Client
from ..errors import CollectionNotFound, InvalidArgument
from ..migrate import install_script, is_current, migrate
from ..models import Document, Embedder
from . import common
from .common import add_command, add_set_option, dump, json_cell, parse_filter, parse_settings, snippet, table

DEMO_COLLECTION = "pgsift-docs"
DEMO_QUESTIONS = (
    "How are dense and lexical results fused into one ranking?",
    "Can I install pgsift on a managed Postgres without C extensions?",
)


# -- server and install ----------------------------------------------------------------

def cmd_db(args: argparse.Namespace) -> int:
    if args.action == "start":
        print(embedded.start())
    elif args.action == "stop":
        print("stopped" if embedded.stop() else "not running")
    elif args.action == "status":
        for key, value in embedded.status().items():
            print(f"{key}: {value}")
    elif args.action == "url":
        url = embedded.status()["url"]
        if not url:
            print("error: the embedded server is not running (pgsift db start)", file=sys.stderr)
            return 1
        print(url)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    with common.connect(args) as conn:
        current = is_current(conn)
        applied = migrate(conn, force=args.force)
    if current and not args.force:
        print("up to date: nothing applied (--force re-applies the function files)")
    else:
        print(f"migrations applied: {', '.join(applied) if applied else 'none'}; function files re-applied")
    return 0


def cmd_install_sql(args: argparse.Namespace) -> int:
    sys.stdout.write(install_script())
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from .. import doctor

    with common.connect(args) as conn:
        found = doctor.checks(conn)
    if args.json:
        dump(common.rows_json(found))
    else:
        print(table([(c.status, c.name, c.value, c.advice) for c in found], ["status", "check", "found", "advice"]))
    return 0


def cmd_extension(args: argparse.Namespace) -> int:
    """Write the extension's files: into --out, or into the extension folder of the server
    whose pg_config is given (then `create extension pgsift cascade` in psql)."""
    import subprocess

    from .. import extension

    folder = Path(args.out)
    if args.pg_config:
        try:
            share = subprocess.run([args.pg_config, "--sharedir"], capture_output=True, text=True, check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise InvalidArgument(f"--pg-config {args.pg_config}: could not run it ({exc})") from exc
        folder = Path(share.stdout.strip()) / "extension"
    try:
        written = extension.write(folder, server=bool(args.pg_config))
    except OSError as exc:
        raise InvalidArgument(f"could not write into {folder}: {exc}") from exc
    print(f"wrote {len(written)} files into {folder}: {', '.join(p.name for p in written)}")
    if not args.pg_config:
        print("install: cp them into $(pg_config --sharedir)/extension, then in psql: create extension pgsift cascade;"
              " on RDS, Aurora or Supabase: psql -f pgsift_pg_tle.sql, then the same create extension")
    return 0


# -- collections and knobs ---------------------------------------------------------------

def cmd_collection(args: argparse.Namespace) -> int:
    if args.action != "list" and not args.name:
        raise InvalidArgument(f"collection {args.action} needs a name")
    knobs = parse_settings(args.set)
    if knobs and args.action not in ("create", "alter"):
        raise InvalidArgument("--set goes with collection create or alter")
    with common.connect(args) as conn:
        client = common.client_for(conn, args)
        if args.action == "list":
            cols = client.list_collections()
            if args.json:
                dump(common.rows_json(cols))
                return 0
            rows = [[c.name, c.search_language, c.embedding_dims, c.distance, c.reranker or "",
                     " ".join(f"{k}={json_cell(v)}" for k, v in sorted(c.knobs.items()))] for c in cols]
            print(table(rows, ["name", "language", "dims", "distance", "reranker", "knobs set"]))
        elif args.action == "create":
            col = client.create_collection(args.name, embedding_dims=args.dims, search_language=args.language,
                                           distance=args.distance, description=args.description,
                                           dense_precision=args.precision, hnsw_m=args.hnsw_m,
                                           hnsw_ef_construction=args.hnsw_ef_construction, **knobs)
            print(f"created {col.name} ({col.embedding_dims} dims, {col.search_language})")
        elif args.action == "alter":
            if not knobs and not args.reset:
                raise InvalidArgument("collection alter needs --set or --reset")
            col = client.alter_collection(args.name, reset=args.reset, **knobs)
            print(f"altered {col.name}: " + (" ".join(f"{k}={json_cell(v)}" for k, v in sorted(col.knobs.items()))
                                             or "every knob at its default"))
        elif args.action == "drop":
            client.drop_collection(args.name)
            print(f"dropped {args.name}")
    return 0


def cmd_knobs(args: argparse.Namespace) -> int:
    knobs = parse_settings(args.set)
    if knobs and not args.collection:
        raise InvalidArgument("--set shows the values in force for a collection: name one")
    with common.connect(args) as conn:
        rows = common.client_for(conn, args).knobs(args.collection, **knobs)
    if args.json:
        dump(common.rows_json(rows))
        return 0
    with_values = args.collection is not None
    out = []
    for k in rows:
        row: list[Any] = [k.name, k.type, json_cell(k.default_value), k.allowed,
                          json_cell(k.off_value) if k.can_be_off else "-", k.scope, k.stage]
        if with_values:
            row += [json_cell(k.value), k.source]
        out.append([*row, k.meaning])
    headers = ["name", "type", "default", "allowed", "off", "scope", "stage"]
    if with_values:
        headers += ["value", "source"]
    print(table(out, [*headers, "meaning"]))
    return 0


# -- documents -------------------------------------------------------------------------

def ingest_path(client: Client, collection: str, path: Path, embedder: Embedder | None, max_words: int,
                strategy: str = "flat", target_tokens: int = 128, detect_language: bool = False) -> int:
    """Write a folder of .md/.txt files (or a JSONL of chunks) into the collection; the chunk count.
    Two progress bars: embedding (most of the time on a CPU), then writing."""
    with contextlib.ExitStack() as stack:
        bars: list[Any] = []

        def embedded(done: int, total: int) -> None:
            if not bars:
                bars.append(stack.enter_context(common.progress_bar(total, f"embed {collection}", unit="chunk")))
            bars[0].update(done - bars[0].n)

        docs = ingest.documents_from_path(path, embedder, max_words=max_words, strategy=strategy,
                                          target_tokens=target_tokens, detect_language=detect_language,
                                          progress=embedded)
    with common.progress_bar(len(docs), f"ingest {collection}", unit="doc") as bar:
        client.upsert_documents(collection, docs, progress=lambda _doc: bar.update(1))
    # A load ends settled: its statistics folded, whatever the client's refresh backlog.
    client.refresh_lexical_stats(collection)
    return sum(len(d.chunks) for d in docs)


# -- enrichment at ingest ------------------------------------------------------------------

OPENAI_URL = "https://api.openai.com/v1"   # where the openai client sends a request without a base_url
WRITE_EVERY = 32   # enriched documents written per upsert: a stopped run keeps (and reuses) what it paid for


@dataclasses.dataclass(frozen=True)
class EnrichOptions:
    """What `pgsift ingest --enrich` asks: the model and its endpoint (OpenAIChatEnricher's
    arguments), where its key is, what is asked (enrich.Settings), and the budgets: tokens for the
    whole ingestion and per document (Client.enrich_documents' budget_tokens)."""

    model: str
    base_url: str | None
    key_env: str | None
    secret_ref: str | None
    timeout: float
    retries: int
    settings: enrich.Settings
    budget_tokens: int | None
    document_budget_tokens: int | None
    rates: dict[str, tuple[float, float]] | None


ENRICH_FLAGS = ("enrich_model", "enrich_base_url", "enrich_key_env", "enrich_secret_ref", "enrich_timeout",
                "enrich_retries", "questions", "no_context", "questions_as", "max_document_tokens", "budget_tokens",
                "document_budget_tokens", "rates")


def enrich_options(args: argparse.Namespace) -> EnrichOptions | None:
    """--enrich and its options, checked (None without --enrich; its options alone are an error)."""
    given = [f"--{name.replace('_', '-')}" for name in ENRICH_FLAGS
             if getattr(args, name) is not None and getattr(args, name) is not False]
    if not args.enrich:
        if given:
            raise InvalidArgument(f"{', '.join(given)}: only with --enrich")
        return None
    if args.enrich_key_env and args.enrich_secret_ref:
        raise InvalidArgument("--enrich-key-env or --enrich-secret-ref: one place for the key")
    for name in ("budget_tokens", "document_budget_tokens"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            raise InvalidArgument(f"--{name.replace('_', '-')} must be at least 0")
    model = args.enrich_model or "gpt-4o-mini"
    rates = None
    if args.rates:
        try:
            rate_in, rate_out = (float(v) for v in args.rates.split(","))
        except ValueError as exc:
            raise InvalidArgument(f"--rates takes INPUT,OUTPUT (USD per million tokens), got {args.rates!r}") from exc
        rates = {model: (rate_in, rate_out)}
    settings = enrich.Settings(context=not args.no_context, questions=3 if args.questions is None else args.questions,
                               questions_as=args.questions_as or "embedding",
                               max_document_tokens=6000 if args.max_document_tokens is None
                               else args.max_document_tokens)
    settings.check()
    return EnrichOptions(model=model, base_url=args.enrich_base_url, key_env=args.enrich_key_env,
                         secret_ref=args.enrich_secret_ref,
                         timeout=60.0 if args.enrich_timeout is None else args.enrich_timeout,
                         retries=2 if args.enrich_retries is None else args.enrich_retries, settings=settings,
                         budget_tokens=args.budget_tokens, document_budget_tokens=args.document_budget_tokens,
                         rates=rates)


def enrichment_api_key(client: Client, opts: EnrichOptions) -> str | None:
    """The key sent with every call: from the environment variable named (--enrich-key-env, else
    OPENAI_API_KEY for OpenAI's own endpoint), or from where the operator keeps the tenant's
    --enrich-secret-ref (sift.map_secret: a key mapped for provider 'any', to be sent under one
    of its endpoints). No key goes to --enrich-base-url unless one of the two names it."""
    target = opts.base_url or OPENAI_URL
    if opts.secret_ref:
        with client.transaction() as tx:
            row = tx.execute(q.SECRET_MAPPING, {"secret_ref": opts.secret_ref, "url": target},
                             prepare=False).fetchone()
        mapping = (f"sift.map_secret(tenant, {opts.secret_ref!r}, 'env:VARIABLE', provider => 'any', "
                   f"endpoints => array[{target!r}])")
        if row is None:
            raise InvalidArgument(f"secret_ref {opts.secret_ref!r} is not mapped to a key for this tenant: the "
                                  f"operator maps it with {mapping}")
        source, provider, url_allowed = row
        if provider != "any":
            raise InvalidArgument(f"the key of secret_ref {opts.secret_ref!r} is mapped for {provider} rerankers: "
                                  f"enrichment sends only a key mapped for provider 'any' ({mapping})")
        if not url_allowed:
            raise InvalidArgument(f"the key of secret_ref {opts.secret_ref!r} may not be sent to {target}: the "
                                  f"operator names the hosts it may go to ({mapping})")
        scheme, _, variable = source.partition(":")
        if scheme != "env":
            raise InvalidArgument(f"the key of secret_ref {opts.secret_ref!r} is kept at a {scheme}: reference: the "
                                  "command line reads keys kept in environment variables only")
        key = os.environ.get(variable)
        if not key:
            raise InvalidArgument(f"the key of secret_ref {opts.secret_ref!r} is not set: the operator keeps it in "
                                  f"the environment variable {variable}, which is not set here")
        return key
    if opts.key_env is None and opts.base_url is not None:
        return None   # a local server: no key unless one is named
    variable = opts.key_env or "OPENAI_API_KEY"
    key = os.environ.get(variable)
    if not key:
        raise InvalidArgument(f"the environment variable {variable} is not set: it holds the key for {target} "
                              "(or name another with --enrich-key-env, or a mapped one with --enrich-secret-ref)")
    return key


NOT_SENT = f"not sent: {enrich.MAX_FAILURES_IN_A_ROW} calls in a row failed"


class WatchedEnricher:
    """The enricher, counting failed calls in a row across documents: the client counts them
    within one enrich_documents call, which this command makes per document (so that a budget
    holds across them). Past MAX_FAILURES_IN_A_ROW it sends nothing more."""

    def __init__(self, inner: enrich.OpenAIChatEnricher) -> None:
        self.inner = inner
        self.model = inner.model
        self.fingerprint = inner.fingerprint   # part of the cache key: the same as the enricher's
        self.failures_in_a_row = 0
        self.last_error: str | None = None
        self.not_sent = 0   # chunks refused since the last reset (the client counts them failed)

    @property
    def stopped(self) -> bool:
        return self.failures_in_a_row >= enrich.MAX_FAILURES_IN_A_ROW

    def enrich(self, document: str, chunk: str, *, context: bool, questions: int) -> enrich.Enrichment:
        if self.stopped:
            self.not_sent += 1
            return enrich.Enrichment(None, [], warning=NOT_SENT, failed=True, call_error=True)
        got = self.inner.enrich(document, chunk, context=context, questions=questions)
        if got.call_error:
            self.failures_in_a_row += 1
            self.last_error = got.warning
        else:
            self.failures_in_a_row = 0
        return got


def _budget_of(opts: EnrichOptions, spent: int, stopped: bool) -> tuple[int | None, str | None]:
    """The next document's budget_tokens and what sets it: "document" (its own budget), "total" (what
    is left of the ingestion's), "failures" (0: the endpoint keeps failing), or None (no budget)."""
    if stopped:
        return 0, "failures"
    limits = []
    if opts.document_budget_tokens is not None:
        limits.append((opts.document_budget_tokens, "document"))
    if opts.budget_tokens is not None:
        limits.append((max(0, opts.budget_tokens - spent), "total"))
    return min(limits, key=lambda limit: limit[0]) if limits else (None, None)


def _said_why(run: Any, why: str | None, opts: EnrichOptions, not_sent: int) -> None:
    """The run's warning about its skipped chunks, in the ingestion's terms when it was the
    ingestion's budget or failures (not the document's budget) that stopped them; chunks the
    watched enricher did not send are skipped, not failed."""
    if not_sent:
        run.failed -= not_sent
        run.skipped += not_sent
        run.warnings = [w for w in run.warnings if not w.endswith(NOT_SENT)]
        why = "failures"
    if not run.skipped or why not in ("total", "failures"):
        return
    warnings = [w for w in run.warnings if not w.startswith(("token budget of ", f"{enrich.MAX_FAILURES_IN_A_ROW} "
                                                              "calls in a row failed"))]
    warnings.append(f"the ingestion's token budget of {opts.budget_tokens} was spent: {run.skipped} chunk(s) keep "
                    "the deterministic header" if why == "total" else
                    f"{enrich.MAX_FAILURES_IN_A_ROW} calls in a row failed: {run.skipped} chunk(s) not sent (check "
                    "the endpoint, model and key)")
    run.warnings = warnings


def enrich_and_write(client: Client, collection: str, docs: list[Document], embedder: Embedder,
                     opts: EnrichOptions, enricher: enrich.OpenAIChatEnricher) -> dict[str, Any]:
    """Enrich the documents one at a time (Client.enrich_documents: the cache, the per-document
    budget, the embedding) within the ingestion's budget, writing them WRITE_EVERY at a time; what
    was done, summed."""
    watched = WatchedEnricher(enricher)
    sums = dict.fromkeys(("enriched", "reused", "failed", "skipped", "input_tokens", "output_tokens"), 0)
    over_budget = {"documents": 0, "chunks": 0}
    failed_documents: list[str] = []
    pending: list[Document] = []
    s = opts.settings
    with common.progress_bar(sum(len(d.chunks) for d in docs), f"enrich {collection}", unit="chunk") as bar:
        for doc in docs:
            budget, why = _budget_of(opts, sums["input_tokens"] + sums["output_tokens"], watched.stopped)
            watched.not_sent = 0
            ready = client.enrich_documents(collection, [doc], watched, context=s.context, questions=s.questions,
                                            questions_as=s.questions_as, budget_tokens=budget,
                                            max_document_tokens=s.max_document_tokens, rates=opts.rates,
                                            embedder=embedder)[0]
            run = ready.enrichment_run
            assert run is not None
            _said_why(run, why, opts, watched.not_sent)
            for name in sums:
                sums[name] += getattr(run, name)
            if run.skipped and why == "total":
                over_budget["documents"] += 1
                over_budget["chunks"] += run.skipped
            if run.failed:
                failed_documents.append(doc.source_uri)
            pending.append(ready)
            if len(pending) >= WRITE_EVERY:
                client.upsert_documents(collection, pending)
                pending = []
            bar.update(len(doc.chunks))
            bar.set_postfix(tokens=sums["input_tokens"] + sums["output_tokens"], refresh=False)
        if pending:
            client.upsert_documents(collection, pending)
    client.refresh_lexical_stats(collection)
    cost = enrich.price(opts.model, sums["input_tokens"], sums["output_tokens"], opts.rates)
    return {"model": opts.model, "base_url": opts.base_url, **sums, "cost_usd": cost,
            "over_budget": over_budget, "stopped_after_failures": watched.stopped,
            "last_error": watched.last_error, "failed_documents": failed_documents}


def enrichment_estimate(client: Client, collection: str, exists: bool, docs: list[Document],
                        opts: EnrichOptions) -> dict[str, Any]:
    """What `--enrich` would send, without sending it: each chunk's prompt (enrich.prompt_parts),
    chunks whose text was enriched before with the same settings reused (no call), the budgets
    applied with each call counted at its most (enrich.expected_tokens: a real run, spending less,
    may fit more calls), tokens estimated at four characters a token."""
    s = opts.settings
    probe = enrich.OpenAIChatEnricher(opts.model, base_url=opts.base_url, client=object())   # its cache key only
    parts = [[enrich.prompt_parts(d, i, s.max_document_tokens) for i in range(len(d.chunks))] for d in docs]
    keys = [[enrich.enrichment_key(dp, cp, probe, s) for dp, cp in doc_parts] for doc_parts in parts]
    cached: set[str] = set()
    if exists and any(keys):
        with client.transaction() as tx:
            cached = {row[0] for row in tx.execute(q.CACHED_ENRICHMENTS, {
                "collection": collection, "keys": sorted({k for ks in keys for k in ks})}, prepare=False)}
    overhead = enrich.estimate_tokens(enrich.SYSTEM) + 30
    answer = (140 if s.context else 0) + 25 * s.questions + 10
    calls = reused = over_budget = input_tokens = output_tokens = total = 0
    for doc_parts, doc_keys in zip(parts, keys, strict=True):
        spent = 0
        for (doc_part, chunk_part), key in zip(doc_parts, doc_keys, strict=True):
            if key in cached:
                reused += 1
                continue
            most = enrich.expected_tokens(doc_part, chunk_part, s)
            if (opts.document_budget_tokens is not None and spent + most > opts.document_budget_tokens) or (
                    opts.budget_tokens is not None and total + most > opts.budget_tokens):
                over_budget += 1
                continue
            calls += 1
            spent += most
            total += most
            input_tokens += overhead + enrich.estimate_tokens(doc_part) + enrich.estimate_tokens(chunk_part)
            output_tokens += answer
    cost = enrich.price(opts.model, input_tokens, output_tokens, opts.rates)
    return {"model": opts.model, "base_url": opts.base_url or OPENAI_URL, "calls": calls, "reused": reused,
            "over_budget": over_budget, "input_tokens": input_tokens, "output_tokens": output_tokens,
            "cost_usd": cost, "tokens": "estimated: about 4 characters a token; output at its most",
            "budget_tokens": opts.budget_tokens, "document_budget_tokens": opts.document_budget_tokens}


def _cost(model: str, cost: float | None) -> str:
    return f"about ${cost:.4f}" if cost is not None else f"cannot price {model} (give --rates INPUT,OUTPUT)"


def dry_run(args: argparse.Namespace, opts: EnrichOptions | None) -> int:
    """What `pgsift ingest` would do, from the same files: documents, chunks, and with --enrich the
    calls and tokens; nothing is embedded, sent or written."""
    with common.connect(args) as conn:
        client = common.client_for(conn, args)
        try:
            client.get_collection(args.collection)
            exists = True
        except CollectionNotFound:
            if not args.create:
                raise
            exists = False
        docs = ingest.documents_from_path(Path(args.path), None, args.max_words, strategy=args.chunking,
                                          target_tokens=args.target_tokens, detect_language=args.detect_language,
                                          embed=False)
        chunks = sum(len(d.chunks) for d in docs)
        report: dict[str, Any] = {
            "dry_run": True, "collection": args.collection, "exists": exists, "documents": len(docs),
            "chunks": chunks,
            "chunks_to_embed": chunks if opts else sum(c.embedding is None for d in docs for c in d.chunks)}
        if opts is not None:
            report["enrichment"] = enrichment_estimate(client, args.collection, exists, docs, opts)
    if args.json:
        dump(report)
        return 0
    print(f"dry run: nothing embedded, sent or written; {args.collection}"
          + ("" if exists else " would be created"))
    print(f"documents: {len(docs)}")
    print(f"chunks: {chunks} ({report['chunks_to_embed']} to embed)")
    e = report.get("enrichment")
    if e is not None:
        print(f"enrichment: {e['model']} at {e['base_url']}")
        print(f"  LM calls: {e['calls']} ({e['reused']} chunk(s) reused from an earlier ingestion, "
              f"{e['over_budget']} past the budget keep their header)")
        print(f"  input tokens: ~{e['input_tokens']} (estimated at 4 characters a token)")
        print(f"  output tokens: at most ~{e['output_tokens']}")
        print(f"  cost: {_cost(e['model'], e['cost_usd'])} (output at its most)")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    opts = enrich_options(args)
    if args.dry_run:
        return dry_run(args, opts)
    required = opts is not None or not str(args.path).endswith(".jsonl")
    with common.connect(args) as conn:
        client = common.client_for(conn, args)
        enricher = None
        if opts is not None:   # the key and the client before anything is loaded or written
            enricher = enrich.OpenAIChatEnricher(opts.model, base_url=opts.base_url,
                                                 api_key=enrichment_api_key(client, opts) or "not-needed",
                                                 timeout=opts.timeout, max_retries=opts.retries)
        try:
            client.get_collection(args.collection)
            # The embedder of the space the collection searches (checked before the model loads).
            embedder = common.embedder_for(client, args.collection, required=required)
        except CollectionNotFound:
            if not args.create:
                raise
            embedder = common.load_embedder(required=required)
            dims = embedder.dims if embedder else args.dims
            client.create_collection(args.collection, embedding_dims=dims, search_language=args.language)
            created = True
        else:
            created = False
        try:
            if opts is None or enricher is None:
                n = ingest_path(client, args.collection, Path(args.path), embedder, args.max_words,
                                args.chunking, args.target_tokens, args.detect_language)
                summary: dict[str, Any] = {"collection": args.collection, "chunks": n}
            else:
                assert embedder is not None
                docs = ingest.documents_from_path(Path(args.path), None, args.max_words, strategy=args.chunking,
                                                  target_tokens=args.target_tokens,
                                                  detect_language=args.detect_language, embed=False)
                n = sum(len(d.chunks) for d in docs)
                summary = {"collection": args.collection, "chunks": n, "documents": len(docs),
                           "enrichment": enrich_and_write(client, args.collection, docs, embedder, opts, enricher)}
        except BaseException:
            if created:   # a failed --create leaves nothing behind
                with contextlib.suppress(Exception):
                    client.drop_collection(args.collection)
            raise
    if args.json:
        dump(summary)
    else:
        print(f"ingested {n} chunks into {args.collection}")
    e = summary.get("enrichment")
    if e is not None:
        _report_enrichment(e, opts, quiet=args.json)
    return 0


def _report_enrichment(e: dict[str, Any], opts: EnrichOptions | None, quiet: bool) -> None:
    if not quiet:
        print(f"enrichment ({e['model']}): {e['enriched']} enriched, {e['reused']} reused, {e['failed']} failed, "
              f"{e['skipped']} not sent; {e['input_tokens']} input + {e['output_tokens']} output tokens, "
              f"{_cost(e['model'], e['cost_usd'])}")
    if e["over_budget"]["chunks"] and opts is not None:
        print(f"warning: the token budget of {opts.budget_tokens} was spent: {e['over_budget']['chunks']} chunk(s) "
              f"of {e['over_budget']['documents']} document(s) were indexed without enrichment (their header "
              "only); ingest again to enrich them (what was enriched is reused, not sent again)", file=sys.stderr)
    if e["stopped_after_failures"]:
        print(f"warning: {enrich.MAX_FAILURES_IN_A_ROW} calls in a row failed (last: {e['last_error']}): the "
              "remaining chunks were indexed without enrichment; check --enrich-base-url, --enrich-model and the "
              "key, then ingest again", file=sys.stderr)
    elif e["failed"]:
        print(f"warning: {e['failed']} call(s) failed or gave nothing usable, in {len(e['failed_documents'])} "
              "document(s): those chunks keep their header (sift.enrichment_history says why)", file=sys.stderr)


# -- vector spaces -----------------------------------------------------------------------

def cmd_spaces(args: argparse.Namespace) -> int:
    with common.connect(args) as conn:
        spaces = common.client_for(conn, args).vector_spaces(args.collection)
    if args.json:
        dump(common.rows_json(spaces))
        return 0
    print(table([(s.name, s.dimensions, s.distance, s.model, "yes" if s.builtin else "", "yes" if s.active else "",
                  s.chunks, s.missing, s.index_name) for s in spaces],
                ["space", "dims", "distance", "model", "built-in", "active", "chunks", "missing", "hnsw index"]))
    return 0


def _file_vectors(path: Path) -> Any:
    """vectors(chunk_ids, texts) from an .npz holding `chunk_ids` (1-d) and `embeddings` (one row
    each), and the vectors' size; a file that is not that is an InvalidArgument."""
    import numpy as np

    try:
        with np.load(path) as data:
            ids, embeddings = data["chunk_ids"], data["embeddings"]
    except (OSError, ValueError, KeyError) as exc:
        raise InvalidArgument(f"{path}: an .npz with arrays chunk_ids and embeddings is needed ({exc})") from exc
    if ids.ndim != 1 or embeddings.ndim != 2 or len(ids) != len(embeddings):
        raise InvalidArgument(f"{path}: chunk_ids must be 1-d and embeddings have one row per chunk id, got "
                              f"{ids.shape} and {embeddings.shape}")
    row = {int(i): k for k, i in enumerate(ids)}
    if len(row) != len(ids):
        raise InvalidArgument(f"{path}: a chunk id appears twice")

    def vectors(chunk_ids: Any, _texts: Any) -> Any:
        missing = [i for i in chunk_ids if i not in row]
        if missing:
            raise InvalidArgument(f"{path} has no vector for chunk(s) {missing[:5]}: it must cover every chunk")
        return [embeddings[row[i]] for i in chunk_ids]

    return vectors, int(embeddings.shape[1])


def cmd_reembed(args: argparse.Namespace) -> int:
    vectors = None
    dims = args.dims
    embedder: Embedder | None = None
    if args.vectors:
        vectors, dims = _file_vectors(Path(args.vectors))
        if args.dims and args.dims != dims:
            raise InvalidArgument(f"--dims {args.dims}, but the vectors in {args.vectors} have {dims}")
    elif args.embedder == "static":
        from ..embed import StaticEmbedder

        embedder = StaticEmbedder(dims=args.dims or 256)
    else:
        embedder = common.load_embedder(required=True)
    with common.connect(args) as conn:
        client = common.client_for(conn, args)
        before = {s.name: s for s in client.vector_spaces(args.collection)}
        total = before[args.space].missing if args.space in before else before[next(iter(before))].chunks
        with common.progress_bar(total, f"reembed {args.collection} into {args.space}", unit="chunk") as bar:
            report = client.reembed(args.collection, args.space, embedder=embedder, vectors=vectors,
                                    dimensions=dims, distance=args.distance, model=args.model,
                                    batch_size=args.batch_size, switch=not args.no_switch, drop_old=args.drop_old,
                                    progress=lambda written, _left: bar.update(written - bar.n))
    print(f"wrote {report.written} vectors in {report.batches} batches into {report.space} "
          f"({report.seconds:.1f} s)"
          + (f"; searches now use {report.space} (was {report.previous})" if report.switched else "")
          + (f"; dropped {report.previous}" if report.dropped else ""))
    return 0


# -- search and explain ----------------------------------------------------------------

def _query(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments search and explain share, knobs included (checked by the database)."""
    return {"top_k": args.top_k, "filter": parse_filter(args.filter), **parse_settings(args.set)}


def cmd_search(args: argparse.Namespace) -> int:
    query = _query(args)
    with common.connect(args) as conn:
        client = common.client_for(conn, args)
        embedder = None if args.no_embed else common.embedder_for(client, args.collection, for_queries=True)
        result = common.client_for(conn, args, embedder).search(args.collection, args.query, **query)
    if args.json:
        dump(common.rows_json(result))
    else:
        common.print_hits(result)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    query = _query(args)
    with common.connect(args) as conn:
        client = common.client_for(conn, args)
        embedder = None if args.no_embed else common.embedder_for(client, args.collection, for_queries=True)
        pool = common.client_for(conn, args, embedder).explain(args.collection, args.query,
                                                               chunk_ids=args.chunk_id,
                                                               rerank=not args.no_rerank, **query)
    if args.json:
        dump(common.rows_json(pool))
        return 0
    # The rerank's columns only when this view is reranked: each row's place and score there.
    reranked = any(c.rerank_rank is not None for c in pool)
    rows = [[c.fused_rank, c.chunk_id, c.found_by, c.dense_rank,
             None if c.dense_distance is None else round(c.dense_distance, 4), c.lexical_rank,
             None if c.lexical_score is None else round(c.lexical_score, 4),
             *([c.rerank_rank, None if c.rerank_score is None else round(c.rerank_score, 4)] if reranked else []),
             None if c.score is None else round(c.score, 5), c.final_rank, "yes" if c.kept else "no",
             snippet(c.title or c.source_uri, 28), c.reason] for c in pool]
    print(table(rows, ["fused", "chunk", "leg", "dense", "distance", "lexical", "lex score",
                       *(["rerank", "rerank score"] if reranked else []), "score", "final", "kept", "title",
                       "reason"]))
    if pool:
        print(f"legs run: {', '.join(pool[0].legs) or '-'}; lexical query: {pool[0].lexical_query or '(none)'}")
        if pool[0].rerank_status:
            print(pool[0].rerank_status)
        if pool[0].threshold_skipped:
            print(f"score threshold not applied: {pool[0].threshold_skipped}")
        if any(c.lexical_exact is False for c in pool):
            print(common.UNPROVEN)
    return 0


# -- demo -----------------------------------------------------------------------------

def cmd_demo(args: argparse.Namespace) -> int:
    root = Path(args.docs_root).resolve()
    sources = [p for p in (root / "README.md", root / "docs") if p.exists()]
    t0 = time.perf_counter()
    dsn = embedded.resolve_dsn(args.dsn)
    where = "--dsn / DATABASE_URL" if (args.dsn or os.environ.get("DATABASE_URL")) else "embedded PostgreSQL"
    print(f"database: {where} ({dsn})")
    embedder = common.load_embedder(required=True)
    assert embedder is not None
    with psycopg.connect(dsn, autocommit=True) as conn:
        applied = migrate(conn)
        print(f"migrated (applied now: {', '.join(applied) or 'none'})")
        client = common.client_for(conn, args, embedder)
        with contextlib.suppress(CollectionNotFound):
            client.drop_collection(DEMO_COLLECTION)
        client.create_collection(DEMO_COLLECTION, embedding_dims=embedder.dims,
                                 description="pgsift's own README and docs")
        chunks = 0
        for source in sources:
            chunks += ingest_path(client, DEMO_COLLECTION, source, embedder, 180)
        print(f"ingested {chunks} chunks from {', '.join(str(s.relative_to(root)) for s in sources)} "
              f"in {time.perf_counter() - t0:.1f}s\n")
        for question in DEMO_QUESTIONS:
            print(f"Q: {question}")
            common.print_hits(client.search(DEMO_COLLECTION, question, top_k=args.top_k))
            print()
    print("Same search from psql:\n  select rank, found_by, dense_rank, lexical_rank, title, left(content, 60)\n"
          f"  from sift.search(collection => '{DEMO_COLLECTION}', query_text => 'fusion', match_count => 5);")
    return 0


# -- parser -----------------------------------------------------------------------------

def _add_query(p: argparse.ArgumentParser) -> None:
    p.add_argument("collection", help="the collection to search")
    p.add_argument("query", help="the question, as a user would type it")
    p.add_argument("--top-k", type=int, default=10, help="results to return (default 10)")
    p.add_argument("--filter", help='metadata filter, JSON: \'{"lang": "en"}\' or \'{"year": {"$gte": 2020}}\'')
    p.add_argument("--no-embed", action="store_true", help="skip the embedder: the lexical leg only")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_set_option(p, "for this call")


def register(sub: Any) -> None:
    """Add these commands to pgsift's subcommands."""
    p = add_command(sub, "db", "the embedded PostgreSQL server")
    p.add_argument("action", choices=["start", "stop", "status", "url"], help="what to do with it")
    p.set_defaults(func=cmd_db)

    p = add_command(sub, "migrate", "install or upgrade pgsift in the database")
    p.add_argument("--force", action="store_true",
                   help="re-apply the function files even when they are unchanged (after a hand edit)")
    p.set_defaults(func=cmd_migrate)
    add_command(sub, "install-sql", "print the install script for psql -f").set_defaults(func=cmd_install_sql)
    p = add_command(sub, "doctor", "what on this server will make a leg slow, and what to set")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.set_defaults(func=cmd_doctor)
    p = add_command(sub, "extension", "write the CREATE EXTENSION files (control, versioned scripts, pg_tle)")
    p.add_argument("--out", default="build/extension", help="folder to write them into (default build/extension)")
    p.add_argument("--pg-config", metavar="PATH",
                   help="write them into the extension folder of the server this pg_config belongs to instead")
    p.set_defaults(func=cmd_extension)

    p = add_command(sub, "collection", "create, list, alter or drop collections")
    p.add_argument("action", choices=["create", "list", "alter", "drop"], help="what to do")
    p.add_argument("name", nargs="?", help="the collection (create, alter, drop)")
    p.add_argument("--dims", type=int, default=384, help="create: embedding dimensions (default 384)")
    p.add_argument("--language", help="create: text search configuration (default: the database's, english)")
    p.add_argument("--distance", choices=["cosine", "l2", "inner_product"],
                   help="create: vector distance (default cosine)")
    p.add_argument("--precision", choices=["full", "half"],
                   help="create: the HNSW index's precision (half: halfvec, half the index; default full, "
                        "half past 2000 dims)")
    p.add_argument("--hnsw-m", type=int, metavar="M",
                   help="create: HNSW m (2-100) of the collection's own index (default: the shared index's 16)")
    p.add_argument("--hnsw-ef-construction", type=int, metavar="EF",
                   help="create: HNSW ef_construction (4-1000, at least 2 m) of its own index (default 64)")
    p.add_argument("--description", help="create: what the collection holds")
    p.add_argument("--reset", action="append", metavar="KNOB",
                   help="alter: put a knob back to its default (repeatable)")
    p.add_argument("--json", action="store_true", help="list: print the collections as JSON")
    add_set_option(p, "stored with the collection (create, alter)")
    p.set_defaults(func=cmd_collection)

    p = add_command(sub, "knobs", "every knob: type, default, allowed values, scope; with a collection, "
                                  "the value in force and where it comes from")
    p.add_argument("collection", nargs="?", help="show this collection's values in force")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_set_option(p, "as a call would set it (with a collection)")
    p.set_defaults(func=cmd_knobs)

    p = add_command(sub, "ingest", "ingest a folder of .md/.txt files or a JSONL of chunks")
    p.add_argument("collection", help="the collection to write into")
    p.add_argument("path", help="a folder or file of .md/.txt, or a .jsonl of chunks")
    p.add_argument("--create", action="store_true", help="create the collection if it does not exist")
    p.add_argument("--language", default="english", help="with --create: text search configuration")
    p.add_argument("--dims", type=int, default=384, help="with --create and a JSONL carrying embeddings")
    p.add_argument("--max-words", type=int, default=180, help="flat chunking: words per chunk at most (default 180)")
    p.add_argument("--chunking", choices=ingest.STRATEGIES, default="flat",
                   help="flat: headings then paragraphs (default); hierarchical: sections kept, for "
                        "parent_return and neighbours")
    p.add_argument("--target-tokens", type=int, default=128,
                   help="hierarchical chunking: tokens per passage, counted by the embedder's tokenizer (default 128)")
    p.add_argument("--detect-language", action="store_true",
                   help="set each file's language (lingua, offline; pip install 'pgsift[lang]'): its chunks are "
                        "analysed in it and searches can prefer it")
    p.add_argument("--dry-run", action="store_true",
                   help="say what the ingest would do (documents, chunks; with --enrich the LM calls and tokens) "
                        "and embed, send and write nothing")
    p.add_argument("--json", action="store_true", help="print the summary (or the dry run's estimate) as JSON")
    g = p.add_argument_group("enrichment at ingest", "a language model writes each chunk a context and questions "
                             "(python.md: Enrichment at ingest); the key comes from an environment variable or the "
                             "operator's mapping, never from the command line")
    g.add_argument("--enrich", action="store_true",
                   help="enrich every chunk through an OpenAI-compatible chat API (pip install 'pgsift[enrich]')")
    g.add_argument("--enrich-model", metavar="MODEL", help="the chat model (default gpt-4o-mini)")
    g.add_argument("--enrich-base-url", metavar="URL",
                   help="an OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LiteLLM...; default OpenAI's)")
    g.add_argument("--enrich-key-env", metavar="VAR",
                   help="the environment variable holding the key (default OPENAI_API_KEY for OpenAI's endpoint; "
                        "with --enrich-base-url no key is sent unless named)")
    g.add_argument("--enrich-secret-ref", metavar="NAME",
                   help="the tenant's secret_ref whose key the operator maps for provider 'any' and this endpoint "
                        "(sift.map_secret, an env: source)")
    g.add_argument("--enrich-timeout", type=float, metavar="S", help="seconds per call (default 60)")
    g.add_argument("--enrich-retries", type=int, metavar="N", help="retries of a 429 or 5xx per call (default 2)")
    g.add_argument("--questions", type=int, metavar="N", help=f"questions per chunk, 0 to {enrich.MAX_QUESTIONS} "
                                                               "(default 3)")
    g.add_argument("--no-context", action="store_true", help="ask for questions only, no context")
    g.add_argument("--questions-as", choices=enrich.POLICIES,
                   help="embedding: in the chunk's vector (default); vectors: a vector each; both")
    g.add_argument("--max-document-tokens", type=int, metavar="N",
                   help="a longer document is sent as its outline and the chunk's section (default 6000)")
    g.add_argument("--budget-tokens", type=int, metavar="N",
                   help="tokens (input + output) the whole ingestion may spend: no call is made that would pass "
                        "it; the chunks left keep their header and are indexed all the same")
    g.add_argument("--document-budget-tokens", type=int, metavar="N", help="the same, per document")
    g.add_argument("--rates", metavar="IN,OUT",
                   help="USD per million input and output tokens, to price a model pgsift has no rates for")
    p.set_defaults(func=cmd_ingest)

    p = add_command(sub, "spaces", "a collection's vector spaces: size, model, which is searched, what is missing")
    p.add_argument("collection", help="the collection")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=cmd_spaces)

    p = add_command(sub, "reembed", "move a collection to another embedding model without downtime: add a vector "
                                    "space, fill it (resumable), switch searches to it")
    p.add_argument("collection", help="the collection to move")
    p.add_argument("space", help="the vector space to fill (created when missing), e.g. the new model's name")
    p.add_argument("--embedder", choices=["local", "static"], default="local",
                   help="local: all-MiniLM-L6-v2 (384 dims); static: its token embeddings averaged and projected "
                        "(--dims, default 256; fast, weaker)")
    p.add_argument("--vectors", help="an .npz with chunk_ids and embeddings (vectors you computed) instead of an "
                                     "embedder")
    p.add_argument("--dims", type=int, help="the space's dimensions (default: the embedder's or the file's)")
    p.add_argument("--distance", choices=["cosine", "l2", "inner_product"], default="cosine",
                   help="the space's distance (default cosine)")
    p.add_argument("--model", help="the model's name, recorded with the space")
    p.add_argument("--batch-size", type=int, default=256, help="chunks embedded and written per transaction")
    p.add_argument("--no-switch", action="store_true", help="fill the space but keep searching the old one")
    p.add_argument("--drop-old", action="store_true", help="after switching, drop the space searched before")
    p.set_defaults(func=cmd_reembed)

    p = add_command(sub, "search", "hybrid search, as a table")
    _add_query(p)
    p.set_defaults(func=cmd_search)

    p = add_command(sub, "explain", "the whole candidate pool and why each made the cut")
    _add_query(p)
    p.add_argument("--chunk-id", type=int, action="append", help="also explain this chunk (repeatable)")
    p.add_argument("--no-rerank", action="store_true",
                   help="the fused view: do not rerank the pool even when the collection reranks (no call)")
    p.set_defaults(func=cmd_explain)

    p = add_command(sub, "demo", "ingest pgsift's own docs and answer two questions")
    p.add_argument("--docs-root", default=".", help="folder holding README.md and docs/ (default .)")
    p.add_argument("--top-k", type=int, default=5, help="results per question (default 5)")
    p.set_defaults(func=cmd_demo)
