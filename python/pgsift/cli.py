"""The `pgsift` command: embedded server, install, ingest, search, explain, demo, bench.

Where the database is: --dsn, else DATABASE_URL, else the embedded server
(started on demand and left running; `pgsift db stop` stops it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import psycopg

from . import embedded, ingest
from .client import Client
from .errors import CollectionNotFound, EmbedderUnavailable, PgsiftError
from .migrate import install_script, migrate

DEMO_COLLECTION = "pgsift-docs"
DEMO_QUESTIONS = (
    "How are dense and lexical results fused into one ranking?",
    "Can I install pgsift on a managed Postgres without C extensions?",
)


# -- output ------------------------------------------------------------------

def table(rows: list[list], headers: list[str]) -> str:
    """Aligned plain-text table (numbers right-aligned)."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None for r in rows) if rows else False
               for i in range(len(headers))]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _snippet(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def print_hits(result, out=None) -> None:
    out = out or sys.stdout   # looked up at call time, so redirection and capture work
    rows = [[h.rank, round(h.score, 5), h.found_by, h.dense_rank, h.lexical_rank,
             _snippet(h.title or h.source_uri, 30), _snippet(h.content)] for h in result]
    print(table(rows, ["rank", "score", "leg", "dense", "lexical", "title", "text"]), file=out)
    print(f"legs run: {', '.join(result.legs) or '-'}; lexical query: {result.lexical_query or '(none)'}",
          file=out)


# -- helpers -----------------------------------------------------------------

def _connect(args) -> psycopg.Connection:
    return psycopg.connect(embedded.resolve_dsn(args.dsn), autocommit=True)


def _embedder(required: bool = False):
    from .embed import LocalEmbedder

    try:
        return LocalEmbedder()
    except EmbedderUnavailable:
        if required:
            raise
        print("note: no local embedder (pip install 'pgsift[embed]'): searching lexically only",
              file=sys.stderr)
        return None


def _knobs(args) -> dict:
    knobs = {"hybrid": args.hybrid, "dense_weight": args.dense_weight, "rrf_k": args.rrf_k,
             "fetch_k": args.fetch_k}
    return {k: v for k, v in knobs.items() if v is not None}


# -- commands ----------------------------------------------------------------

def cmd_db(args) -> int:
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
            print("the embedded server is not running (pgsift db start)", file=sys.stderr)
            return 1
        print(url)
    return 0


def cmd_migrate(args) -> int:
    with _connect(args) as conn:
        applied = migrate(conn)
    print(f"migrations applied: {', '.join(applied) if applied else 'none (up to date)'}; functions re-applied")
    return 0


def cmd_install_sql(args) -> int:
    sys.stdout.write(install_script())
    return 0


def cmd_collection(args) -> int:
    with _connect(args) as conn:
        client = Client(conn, tenant=args.tenant)
        if args.action == "list":
            rows = [[c.name, c.search_language, c.embedding_dims, c.distance, c.hybrid, c.dense_weight,
                     c.rrf_k, c.fetch_k] for c in client.list_collections()]
            print(table(rows, ["name", "language", "dims", "distance", "hybrid", "dense_weight", "rrf_k",
                               "fetch_k"]))
        elif args.action == "create":
            col = client.create_collection(args.name, embedding_dims=args.dims, search_language=args.language,
                                           **_knobs(args))
            print(f"created {col.name} ({col.embedding_dims} dims, {col.search_language})")
        elif args.action == "drop":
            client.drop_collection(args.name)
            print(f"dropped {args.name}")
    return 0


def _ingest(client: Client, collection: str, path: Path, embedder, max_words: int) -> int:
    from tqdm import tqdm

    docs = ingest.documents_from_path(path, embedder, max_words=max_words)
    with tqdm(total=len(docs), unit="doc", desc=f"ingest {collection}", file=sys.stderr) as bar:
        client.upsert_documents(collection, docs, progress=lambda _doc: bar.update(1))
    return sum(len(d.chunks) for d in docs)


def cmd_ingest(args) -> int:
    embedder = _embedder(required=not str(args.path).endswith(".jsonl"))
    with _connect(args) as conn:
        client = Client(conn, tenant=args.tenant)
        try:
            client.get_collection(args.collection)
        except CollectionNotFound:
            if not args.create:
                raise
            dims = embedder.dims if embedder else args.dims
            client.create_collection(args.collection, embedding_dims=dims, search_language=args.language)
        n = _ingest(client, args.collection, Path(args.path), embedder, args.max_words)
    print(f"ingested {n} chunks into {args.collection}")
    return 0


def _query_args(args, embedder) -> dict:
    filter_ = json.loads(args.filter) if args.filter else None
    embedding = embedder.embed([args.query])[0] if embedder and args.query.strip() else None
    return dict(embedding=embedding, top_k=args.top_k, filter=filter_, **_knobs(args))


def cmd_search(args) -> int:
    embedder = None if args.no_embed else _embedder()
    with _connect(args) as conn:
        result = Client(conn, tenant=args.tenant).search(args.collection, args.query,
                                                         **_query_args(args, embedder))
    if args.json:
        print(json.dumps([h.__dict__ for h in result], default=str, indent=2))
    else:
        print_hits(result)
    return 0


def cmd_explain(args) -> int:
    embedder = None if args.no_embed else _embedder()
    with _connect(args) as conn:
        pool = Client(conn, tenant=args.tenant).explain(args.collection, args.query,
                                                        chunk_ids=args.chunk_id, **_query_args(args, embedder))
    if args.json:
        print(json.dumps([c.__dict__ for c in pool], default=str, indent=2))
        return 0
    rows = [[c.fused_rank, c.chunk_id, c.found_by, c.dense_rank,
             None if c.dense_distance is None else round(c.dense_distance, 4), c.lexical_rank,
             None if c.lexical_score is None else round(c.lexical_score, 4),
             None if c.score is None else round(c.score, 5), "yes" if c.kept else "no",
             _snippet(c.title or c.source_uri, 28), c.reason] for c in pool]
    print(table(rows, ["fused", "chunk", "leg", "dense", "distance", "lexical", "lex score", "score",
                       "kept", "title", "reason"]))
    if pool:
        print(f"legs run: {', '.join(pool[0].legs) or '-'}; lexical query: {pool[0].lexical_query or '(none)'}")
    return 0


def cmd_demo(args) -> int:
    root = Path(args.docs_root).resolve()
    sources = [p for p in (root / "README.md", root / "docs") if p.exists()]
    t0 = time.perf_counter()
    dsn = embedded.resolve_dsn(args.dsn)
    where = "--dsn / DATABASE_URL" if (args.dsn or os.environ.get("DATABASE_URL")) else "embedded PostgreSQL"
    print(f"database: {where} ({dsn})")
    embedder = _embedder(required=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        applied = migrate(conn)
        print(f"migrated (applied now: {', '.join(applied) or 'none'})")
        client = Client(conn, tenant=args.tenant, embedder=embedder)
        try:
            client.drop_collection(DEMO_COLLECTION)
        except CollectionNotFound:
            pass
        client.create_collection(DEMO_COLLECTION, embedding_dims=embedder.dims,
                                 description="pgsift's own README and docs")
        chunks = 0
        for source in sources:
            chunks += _ingest(client, DEMO_COLLECTION, source, embedder, 180)
        print(f"ingested {chunks} chunks from {', '.join(str(s.relative_to(root)) for s in sources)} "
              f"in {time.perf_counter() - t0:.1f}s\n")
        for question in DEMO_QUESTIONS:
            print(f"Q: {question}")
            print_hits(client.search(DEMO_COLLECTION, question, top_k=args.top_k))
            print()
    print("Same search from psql:\n  select rank, found_by, dense_rank, lexical_rank, title, left(content, 60)\n"
          f"  from sift.search(collection => '{DEMO_COLLECTION}', query_text => 'fusion', match_count => 5);")
    return 0


def cmd_bench(args) -> int:
    from . import bench

    with _connect(args) as conn:
        migrate(conn)
        result = bench.run_quality(conn, Path(args.dataset), model=args.model, collection=args.collection,
                                   max_queries=args.max_queries)
    print(json.dumps(result, indent=2) if args.json else bench.format_table(result))
    return 0


def cmd_bench_scale(args) -> int:
    from . import bench_scale

    with _connect(args) as conn:
        migrate(conn)
        result = bench_scale.run_scale(conn, args.chunks, queries=args.queries, reuse=args.reuse,
                                       exact_check=args.exact_check, ingest_docs=args.ingest_docs,
                                       baseline_queries=args.baseline_queries)
    print(json.dumps(result, indent=2) if args.json else bench_scale.format_table(result))
    return 0


def cmd_bench_finalize(args) -> int:
    from . import bench_finalize

    with _connect(args) as conn:
        migrate(conn)
        result = bench_finalize.run_finalize(conn, repeats=args.repeats)
    print(json.dumps(result, indent=2) if args.json else bench_finalize.format_table(result))
    return 0


def cmd_bench_fusion(args) -> int:
    from . import bench_fusion

    with _connect(args) as conn:
        migrate(conn)
        result = bench_fusion.run_fusion(conn, Path(args.dataset), split=args.split, model=args.model)
    print(json.dumps(result, indent=2) if args.json else bench_fusion.format_table(result))
    return 0


# -- parser ------------------------------------------------------------------

def _add_knobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hybrid", dest="hybrid", action="store_true", default=None, help="use both legs")
    p.add_argument("--no-hybrid", dest="hybrid", action="store_false", help="dense leg only")
    p.add_argument("--dense-weight", type=float, help="w in w/(k+dense) + (1-w)/(k+lexical)")
    p.add_argument("--rrf-k", type=float, help="RRF k")
    p.add_argument("--fetch-k", type=int, help="candidates per leg")


def _add_query(p: argparse.ArgumentParser) -> None:
    p.add_argument("collection")
    p.add_argument("query")
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--filter", help='metadata containment, JSON: \'{"lang": "en"}\'')
    p.add_argument("--no-embed", action="store_true", help="skip the embedder: lexical only")
    p.add_argument("--json", action="store_true")
    _add_knobs(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pgsift", description=__doc__)
    parser.add_argument("--dsn", help="PostgreSQL URL (default: DATABASE_URL, else the embedded server)")
    parser.add_argument("--tenant", default="default")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("db", help="the embedded PostgreSQL server")
    p.add_argument("action", choices=["start", "stop", "status", "url"])
    p.set_defaults(func=cmd_db)

    sub.add_parser("migrate", help="install or upgrade pgsift in the database").set_defaults(func=cmd_migrate)
    sub.add_parser("install-sql", help="print the install script for psql -f").set_defaults(
        func=cmd_install_sql)

    p = sub.add_parser("collection", help="create, list or drop collections")
    p.add_argument("action", choices=["create", "list", "drop"])
    p.add_argument("name", nargs="?")
    p.add_argument("--dims", type=int, default=384)
    p.add_argument("--language", default="english")
    _add_knobs(p)
    p.set_defaults(func=cmd_collection)

    p = sub.add_parser("ingest", help="ingest a folder of .md/.txt files or a JSONL of chunks")
    p.add_argument("collection")
    p.add_argument("path")
    p.add_argument("--create", action="store_true", help="create the collection if it does not exist")
    p.add_argument("--language", default="english")
    p.add_argument("--dims", type=int, default=384, help="with --create and a JSONL carrying embeddings")
    p.add_argument("--max-words", type=int, default=180)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("search", help="hybrid search, as a table")
    _add_query(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("explain", help="the whole candidate pool and why each made the cut")
    _add_query(p)
    p.add_argument("--chunk-id", type=int, action="append", help="also explain this chunk (repeatable)")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("demo", help="ingest pgsift's own docs and answer two questions")
    p.add_argument("--docs-root", default=".")
    p.add_argument("--top-k", type=int, default=5)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("bench", help="benchmarks")
    bench_sub = p.add_subparsers(dest="bench", required=True)
    q = bench_sub.add_parser("quality", help="nDCG@10 / recall@100 / latency on a BEIR-layout dataset")
    q.add_argument("--dataset", required=True)
    q.add_argument("--model", help="embeddings/<model> folder (default: the only one)")
    q.add_argument("--collection", default="bench")
    q.add_argument("--max-queries", type=int)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_bench)
    q = bench_sub.add_parser("scale", help="lexical/dense/hybrid latency on a generated corpus of N chunks")
    q.add_argument("--chunks", type=int, default=100_000)
    q.add_argument("--queries", type=int, default=100, help="per query mix")
    q.add_argument("--reuse", action="store_true", help="keep a loaded corpus of this size")
    q.add_argument("--exact-check", type=int, default=20,
                   help="queries per mix compared with exhaustive BM25")
    q.add_argument("--ingest-docs", type=int, default=50,
                   help="documents written through the client afterwards, for its throughput")
    q.add_argument("--baseline-queries", type=int, default=10**9,
                   help="cap on queries per mix for the ts_rank_cd leg (seconds each at 1M chunks)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_bench_scale)
    q = bench_sub.add_parser("finalize", help="latency of the finalize stage at pools of 50 and 200")
    q.add_argument("--repeats", type=int, default=50)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_bench_finalize)
    q = bench_sub.add_parser("fusion", help="sweep dense_weight, rrf_k and fetch_k on a BEIR split")
    q.add_argument("--dataset", required=True)
    q.add_argument("--split", default="train")
    q.add_argument("--model")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_bench_fusion)

    from . import eval_cli
    eval_cli.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "collection" and args.action in ("create", "drop") and not args.name:
        print("error: collection create/drop needs a name", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except PgsiftError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except psycopg.OperationalError as exc:
        print(f"error: cannot reach the database: {exc}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"error: --filter is not valid JSON: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
