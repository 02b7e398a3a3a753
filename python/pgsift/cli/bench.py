"""`pgsift bench quality|profile|scale|exact|finalize|fusion|ingest|vectors|rls|compare|structure|languages|
snippets|reembed|pages|maxsim|legs|questions|adaptive`: the benchmarks, each on a migrated database."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from ..migrate import migrate
from . import common
from .common import add_command


def _bench(args: argparse.Namespace, module: Any, run: Callable[[psycopg.Connection[Any]], dict[str, Any]]) -> int:
    """Run one benchmark on a migrated database and print its table (or JSON)."""
    with common.connect(args) as conn:
        migrate(conn)
        result = run(conn)
    print(json.dumps(result, indent=2) if args.json else module.format_table(result))
    return 0


def cmd_bench_quality(args: argparse.Namespace) -> int:
    from ..bench import quality
    return _bench(args, quality, lambda conn: quality.run_quality(
        conn, Path(args.dataset), model=args.model, collection=args.collection, max_queries=args.max_queries,
        peers_too=not args.no_peers))


def cmd_bench_profile(args: argparse.Namespace) -> int:
    from ..bench import profile
    return _bench(args, profile, lambda conn: profile.run_profile(
        conn, Path(args.dataset), model=args.model, collection=args.collection, queries=args.queries,
        match_count=args.match_count, reuse=args.reuse, peers_too=not args.no_peers))


def cmd_bench_scale(args: argparse.Namespace) -> int:
    from ..bench import scale
    return _bench(args, scale, lambda conn: scale.run_scale(
        conn, args.chunks, queries=args.queries, seed=args.seed, reuse=args.reuse, exact_check=args.exact_check,
        ingest_docs=args.ingest_docs, baseline_queries=args.baseline_queries, plain=not args.no_plain))


def cmd_bench_finalize(args: argparse.Namespace) -> int:
    from ..bench import finalize
    return _bench(args, finalize, lambda conn: finalize.run_finalize(conn, repeats=args.repeats, seed=args.seed))


def cmd_bench_exact(args: argparse.Namespace) -> int:
    from ..bench import exact
    return _bench(args, exact, lambda conn: exact.run_exact(
        conn, sizes=tuple(args.sizes) if args.sizes else exact.SIZES, queries=args.queries,
        match_count=args.match_count, seed=args.seed, beside=args.beside))


def cmd_bench_fusion(args: argparse.Namespace) -> int:
    from ..bench import fusion
    return _bench(args, fusion, lambda conn: fusion.run_fusion(
        conn, [Path(d) for d in args.dataset], split=args.split, model=args.model, tune_sample=args.tune_sample,
        answer_only=args.answer_only, seed=args.seed))


def cmd_bench_vectors(args: argparse.Namespace) -> int:
    from ..bench import ingest

    with common.connect(args) as conn:
        result = ingest.run_transfer(conn, count=args.count, dims=args.dims, repeats=args.repeats)
    print(json.dumps(result, indent=2) if args.json else ingest.format_transfer(result))
    return 0


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    from ..bench import ingest
    return _bench(args, ingest, lambda conn: ingest.run_ingest(
        conn, tuple(args.sizes), shapes=tuple(args.shapes), dims=args.dims,
        dataset=Path(args.dataset) if args.dataset else None, seed=args.seed))


def cmd_bench_rls(args: argparse.Namespace) -> int:
    from ..bench import rls
    return _bench(args, rls, lambda conn: rls.run_rls(
        conn, Path(args.dataset), model=args.model, queries_n=args.queries, repeats=args.repeats))


def cmd_bench_structure(args: argparse.Namespace) -> int:
    from ..bench import structure
    return _bench(args, structure, lambda conn: structure.run_structure(
        conn, Path(args.dataset), sizes=tuple(args.sizes), max_questions=args.max_questions, seed=args.seed,
        keep=args.keep))


def cmd_bench_languages(args: argparse.Namespace) -> int:
    from ..bench import languages
    return _bench(args, languages, lambda conn: languages.run_languages(
        conn, Path(args.dataset), sample=args.questions, seed=args.seed, keep=args.keep))


def cmd_bench_snippets(args: argparse.Namespace) -> int:
    from ..bench import snippets
    return _bench(args, snippets, lambda conn: snippets.run_snippets(
        conn, Path(args.dataset), queries=args.queries))


def cmd_bench_questions(args: argparse.Namespace) -> int:
    from ..bench import questions
    return _bench(args, questions, lambda conn: questions.run_questions(
        conn, Path(args.dataset), keep=args.keep))


def cmd_bench_legs(args: argparse.Namespace) -> int:
    from ..bench import legs
    return _bench(args, legs, lambda conn: legs.run_legs(
        conn, Path(args.dataset), models=tuple(args.models) if args.models else None, keep=args.keep,
        seed=args.seed))


def cmd_bench_adaptive(args: argparse.Namespace) -> int:
    from ..bench import adaptive
    return _bench(args, adaptive, lambda conn: adaptive.run_adaptive(conn, args.dataset, seed=args.seed))


def cmd_bench_maxsim(args: argparse.Namespace) -> int:
    from ..bench import maxsim
    return _bench(args, maxsim, lambda conn: maxsim.run_maxsim(
        conn, chunks=args.chunks, tokens=args.tokens, dims=args.dims, query_tokens=args.query_tokens,
        top_ns=tuple(args.top_n), queries=args.queries, seed=args.seed))


def cmd_bench_reembed(args: argparse.Namespace) -> int:
    from ..bench import reembed
    return _bench(args, reembed, lambda conn: reembed.run_reembed(
        conn, Path(args.dataset), dims=args.dims, batch_size=args.batch_size, keep=args.keep))


def cmd_bench_pages(args: argparse.Namespace) -> int:
    from ..bench import pages
    return _bench(args, pages, lambda conn: pages.run_pages(conn, Path(args.dataset), queries=args.queries))


def cmd_bench_compare(args: argparse.Namespace) -> int:
    from ..bench import compare

    with common.connect(args) as conn_a, psycopg.connect(args.against, autocommit=True) as conn_b:
        result = compare.run_compare(conn_a, conn_b, Path(args.dataset), model=args.model,
                                     rounds=args.rounds)
    print(json.dumps(result, indent=2) if args.json else compare.format_table(result))
    return 0


def add_seed(parser: argparse.ArgumentParser, default: int, what: str) -> None:
    """--seed: what a benchmark draws at random is drawn from it, so a run can be repeated."""
    parser.add_argument("--seed", type=int, default=default, help=f"seed of {what} (default {default})")


def register(sub: Any) -> None:
    """Add `bench` and its benchmarks to pgsift's subcommands."""
    p = add_command(sub, "bench", "benchmarks")
    bench_sub = p.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")
    json_help = "print the result as JSON"

    q = add_command(bench_sub, "quality", "nDCG@10 / recall@100 / latency on a BEIR-layout dataset")
    q.add_argument("--dataset", required=True, help="BEIR folder with embeddings/<model>/")
    q.add_argument("--model", help="embeddings/<model> folder (default: the only one)")
    q.add_argument("--collection", default="bench", help="collection to load it into (default bench)")
    q.add_argument("--max-queries", type=int, help="run at most this many queries")
    q.add_argument("--json", action="store_true", help=json_help)
    q.add_argument("--no-peers", action="store_true",
                   help="skip the peers' SQL (pgvector HNSW, ts_rank_cd, Supabase's hybrid_search)")
    q.set_defaults(func=cmd_bench_quality)

    q = add_command(bench_sub, "profile", "a search's time against raw pgvector and Supabase, and by function")
    q.add_argument("--dataset", required=True, help="BEIR folder with embeddings/<model>/")
    q.add_argument("--model", help="embeddings/<model> folder (default: the only one)")
    q.add_argument("--collection", default="bench", help="collection to load it into (default bench)")
    q.add_argument("--queries", type=int, default=60, help="queries, taken in turn (default 60)")
    q.add_argument("--match-count", type=int, default=10, help="match_count of each search (default 10)")
    q.add_argument("--reuse", action="store_true", help="keep the collection when it holds the dataset already")
    q.add_argument("--no-peers", action="store_true", help="skip Supabase's hybrid_search")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_profile)

    q = add_command(bench_sub, "scale", "lexical/dense/hybrid latency on a generated corpus of N chunks")
    q.add_argument("--chunks", type=int, default=100_000, help="corpus size in chunks (default 100000)")
    q.add_argument("--queries", type=int, default=100, help="queries per query mix (default 100)")
    q.add_argument("--reuse", action="store_true", help="keep a loaded corpus of this size")
    q.add_argument("--exact-check", type=int, default=20,
                   help="queries per mix compared with exhaustive BM25 (default 20)")
    q.add_argument("--ingest-docs", type=int, default=50,
                   help="documents written through the client afterwards, for its throughput (default 50)")
    q.add_argument("--baseline-queries", type=int, default=10**9,
                   help="cap on queries per mix for the ts_rank_cd leg (seconds each at 1M chunks)")
    q.add_argument("--no-plain", action="store_true",
                   help="skip the plain table's ingest beside pgsift's (it loads the same rows again)")
    add_seed(q, 7, "the generated corpus and queries")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_scale)

    q = add_command(bench_sub, "finalize", "latency of the finalize stage at pools of 50 and 200")
    q.add_argument("--repeats", type=int, default=50, help="timed calls per case (default 50)")
    add_seed(q, 0, "the generated documents, pools and queries")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_finalize)

    q = add_command(bench_sub, "exact", "the dense leg's exact scan vs its HNSW walk by collection size")
    q.add_argument("--sizes", type=int, nargs="+", default=None,
                   help="collection sizes in chunks (default 1000 2000 5000 7500 10000 20000)")
    q.add_argument("--queries", type=int, default=100, help="timed query vectors per size (default 100)")
    q.add_argument("--match-count", type=int, default=10, help="match_count of each search (default 10)")
    q.add_argument("--beside", type=int, default=0,
                   help="chunks of another collection of the same size sharing the index (default 0)")
    add_seed(q, 11, "the generated corpus and query vectors")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_exact)

    q = add_command(bench_sub, "ingest", "chunks/s writing one large document vs many small ones")
    q.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000, 50_000],
                   help="chunks per run (default 2000 10000 50000)")
    q.add_argument("--shapes", nargs="+", default=["one document", "documents of 10"],
                   help='"one document" and/or "documents of 10" (default both)')
    q.add_argument("--dims", type=int, default=384, help="embedding size (default 384)")
    q.add_argument("--dataset", help="BEIR folder whose corpus sentences are the chunk text (default: generated)")
    add_seed(q, 0, "the vectors and the generated text")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_ingest)

    q = add_command(bench_sub, "vectors", "the vectors' trip alone: pgvector text vs binary, one vector[] parameter")
    q.add_argument("--count", type=int, default=5000, help="vectors (default 5000)")
    q.add_argument("--dims", type=int, default=384, help="dimensions (default 384)")
    q.add_argument("--repeats", type=int, default=5, help="timed rounds, median reported (default 5)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_vectors)

    q = add_command(bench_sub, "rls", "search latency as the operator vs a role under row-level security")
    q.add_argument("--dataset", required=True, help="BEIR folder with embeddings/<model>/")
    q.add_argument("--model", help="embeddings/<model> folder (default: the only one)")
    q.add_argument("--queries", type=int, default=100, help="queries, taken in turn (default 100)")
    q.add_argument("--repeats", type=int, default=3, help="rounds over the queries (default 3)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_rls)

    q = add_command(bench_sub, "compare", "search latency of two databases (A: --dsn, B: --against), paired")
    q.add_argument("--against", required=True, metavar="URL", help="database B, loaded by `bench quality` too")
    q.add_argument("--dataset", required=True, help="the BEIR folder both were loaded from")
    q.add_argument("--model", help="embeddings/<model> folder (default: the only one)")
    q.add_argument("--rounds", type=int, default=1, help="timed rounds over the queries (default 1)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_compare)

    q = add_command(bench_sub, "structure", "parent_return and neighbours: section-level quality vs tokens")
    q.add_argument("--dataset", required=True, help="the xquad-r-multi folder (articles rebuilt from source_uri)")
    q.add_argument("--sizes", type=int, nargs="+", default=[64, 128],
                   help="passage sizes in tokens (default 64 128)")
    q.add_argument("--max-questions", type=int, help="a sample of the English questions, drawn with --seed "
                   "(default all)")
    add_seed(q, 0, "the --max-questions sample")
    q.add_argument("--keep", action="store_true", help="keep the collections it loads (bench_structure_*)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_structure)

    q = add_command(bench_sub, "languages", "translations, languages and CJK/Thai lexical search on xquad-r-multi")
    q.add_argument("--dataset", required=True, help="the xquad-r-multi folder")
    q.add_argument("--questions", type=int, default=1000, help="questions sampled with --seed (default 1000)")
    add_seed(q, 0, "the questions (0: the dataset README's 1,000, the ones bench/README reports on)")
    q.add_argument("--keep", action="store_true", help="keep the collections it loads (bench_languages*)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_languages)

    q = add_command(bench_sub, "snippets", "what snippets cost a search at match_count 10 and 50")
    q.add_argument("--dataset", required=True, help="BEIR folder with embeddings/<model>/")
    q.add_argument("--queries", type=int, default=100, help="queries, the first of the split (default 100)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_snippets)

    q = add_command(bench_sub, "questions", "questions in the index (off, embedding, vectors, both) on xquad English")
    q.add_argument("--dataset", required=True, help="the xquad-r-multi folder")
    q.add_argument("--keep", action="store_true", help="keep the collections it loads (bench_questions_*)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_questions)

    q = add_command(bench_sub, "legs", "two dense spaces + BM25 fused by rrf, dbsf and convex vs two legs")
    q.add_argument("--dataset", required=True, help="BEIR folder with two models under embeddings/")
    q.add_argument("--models", nargs=2, help="the built-in space's model and the added one's (default: by name)")
    add_seed(q, 0, "the bootstrap's resamples")
    q.add_argument("--keep", action="store_true", help="keep the collection it loads (bench_legs)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_legs)

    q = add_command(bench_sub, "adaptive", "a per-question dense_weight from the legs' signals vs the fixed default")
    q.add_argument("--dataset", required=True, action="append",
                   help="BEIR folder, optionally DIR:MODEL for embeddings/MODEL (repeat: every set must gain)")
    add_seed(q, 0, "the folds, the bootstrap and, without a train split, the questions held out")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_adaptive)

    q = add_command(bench_sub, "maxsim", "what the late-interaction (MaxSim) rerank costs at N = 50 and 100")
    q.add_argument("--chunks", type=int, default=500, help="chunks of the synthetic collection (default 500)")
    q.add_argument("--tokens", type=int, default=200, help="token vectors per chunk (default 200)")
    q.add_argument("--dims", type=int, default=128, help="dimensions of a token vector (default 128)")
    q.add_argument("--query-tokens", type=int, default=32, help="token vectors per question (default 32)")
    q.add_argument("--top-n", type=int, nargs="+", default=[50, 100], help="late_interaction_top_n values (50 100)")
    q.add_argument("--queries", type=int, default=50, help="questions per N (default 50)")
    add_seed(q, 0, "the generated chunks, questions and pools")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_maxsim)

    q = add_command(bench_sub, "pages", "what a page of search_page costs against a plain search")
    q.add_argument("--dataset", required=True, help="BEIR folder with embeddings/<model>/")
    q.add_argument("--queries", type=int, default=100, help="queries, the first of the split (default 100)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_pages)

    q = add_command(bench_sub, "reembed", "move a collection to a second embedder while searches run")
    q.add_argument("--dataset", required=True, help="BEIR folder with embeddings/<model>/")
    q.add_argument("--dims", type=int, default=256, help="the new space's size (static embedder; default 256)")
    q.add_argument("--batch-size", type=int, default=256, help="chunks per backfill transaction (default 256)")
    q.add_argument("--keep", action="store_true", help="keep the collection it loads (reembed)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_reembed)

    q = add_command(bench_sub, "fusion", "sweep dense_weight, rrf_k and fetch_k on BEIR splits, the mean over datasets")
    q.add_argument("--dataset", required=True, action="append",
                   help="BEIR folder with embeddings/<model>/ (repeat: the defaults maximise the mean)")
    q.add_argument("--split", default="train", help="qrels split to tune on (default train)")
    q.add_argument("--tune-sample", type=int, default=500,
                   help="without that split: questions sampled from test, the reported 1,000 left out (default 500)")
    add_seed(q, 0, "the tuning sample: bench languages' sample of that seed left out, the rest drawn with seed + 1")
    q.add_argument("--answer-only", action="store_true",
                   help="count only each question's highest-graded judgments (xquad-r-multi: not the translations)")
    q.add_argument("--model", help="embeddings/<model> folder (default: the only one)")
    q.add_argument("--json", action="store_true", help=json_help)
    q.set_defaults(func=cmd_bench_fusion)
