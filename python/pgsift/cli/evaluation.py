"""`pgsift golden ...`, `pgsift eval ...` and `pgsift calibrate`: golden sets, evaluation runs,
history, knob sweeps and reranker thresholds.

    pgsift golden import COLLECTION --beir DIR [--split test] [--ingest] [--name NAME]
    pgsift golden import COLLECTION --jsonl FILE [--name NAME]
    pgsift golden list|export|rebind|delete COLLECTION [--name NAME]
    pgsift eval COLLECTION --top-k K [--set knob=value ...] [--baseline dense] [--json]
    pgsift eval history COLLECTION
    pgsift eval sweep COLLECTION --knob dense_weight --values 0,0.1,...,1 [--plot out.png]
    pgsift eval tune COLLECTION [--golden-set NAME] [--folds 5] [--k 10] [--grid FILE.json] [--seed 0] [--store]
    pgsift calibrate COLLECTION --reranker ALIAS [--golden NAME] [--top-k K] [--store] [--json]

`calibrate` exits 1 when it proposes no threshold (no question scored, or none helps);
--store then stores nothing. `eval tune` exits 1 when no cell's held-out gain is significant;
--store then stores nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import psycopg

from .. import calibration, evaluation, golden, tuning
from ..client import Client
from ..errors import CollectionNotFound, InvalidArgument
from . import common
from .common import Num, add_command, add_set_option, dump, num, parse_settings, progress_bar, rows_json, table

EVAL_ACTIONS = ("run", "history", "sweep", "tune")
TUNE_OPTIONS = ("folds", "grid", "seed", "store")


# -- golden ------------------------------------------------------------------------

def _ingest_beir(client: Client, collection: str, dataset: Path, model: str | None, language: str) -> None:
    from ..beir import load_beir

    data = load_beir(dataset, model)
    try:
        client.get_collection(collection)
    except CollectionNotFound:
        client.create_collection(collection, embedding_dims=data.dims, search_language=language)
    with progress_bar(len(data), f"ingest {collection}", unit="doc") as bar:
        client.upsert_documents(collection, golden.beir_documents(dataset, model=model),
                                progress=lambda _doc: bar.update(1))
    # A load ends settled: its statistics folded, whatever the client's refresh backlog.
    client.refresh_lexical_stats(collection)


def _print_import(report: golden.ImportReport, collection: str) -> None:
    gs = report.golden_set
    print(f"golden set {gs.name} of {collection} ({gs.judged_at}-level): {gs.questions} questions "
          f"({gs.unanswerable} without an answer), {gs.positives} positives "
          f"({gs.positives - gs.unbound} bound, {gs.unbound} unbound)")
    if report.skipped:
        print(f"skipped {len(report.skipped)} judgment(s) of documents found neither in the collection "
              "nor in the corpus: " + ", ".join(f"{key} -> {uri}" for key, uri in report.skipped[:20])
              + (" ..." if len(report.skipped) > 20 else ""))
    if report.skipped_questions:
        print(f"left out {len(report.skipped_questions)} question(s) with no known document: "
              + ", ".join(report.skipped_questions[:20]))
    _print_unbound(report.rebind)


def _print_unbound(report: golden.RebindReport, limit: int = 20) -> None:
    unbound = report.unbound
    if not unbound:
        return
    print(f"{len(unbound)} positive(s) not bound to any chunk (the text is gone, "
          "or several documents hold it):")
    rows = [[b.positive_id, b.question_key, b.status, b.source_uri] for b in unbound[:limit]]
    print(table(rows, ["positive", "question", "status", "source_uri"]))
    if len(unbound) > limit:
        print(f"... and {len(unbound) - limit} more (--json lists them all)")


def cmd_golden(args: argparse.Namespace) -> int:
    with common.connect(args) as conn:
        client = common.client_for(conn, args)
        if args.golden_action == "import":
            return _golden_import(client, args)
        if args.golden_action == "list":
            sets = golden.list_golden_sets(client, args.collection)
            if args.json:
                dump(rows_json(sets))
            else:
                rows = [[s.name, s.judged_at, s.questions, s.unanswerable, s.positives, s.unbound,
                         s.questions - s.without_embedding, s.source or "",
                         s.created_at.strftime("%Y-%m-%d %H:%M")] for s in sets]
                print(table(rows, ["name", "level", "questions", "no answer", "positives", "unbound",
                                   "with vector", "source", "created"]))
            return 0
        if args.golden_action == "export":
            lines = golden.export_golden_set(client, args.collection, args.name,
                                             with_embeddings=args.with_embeddings)
            if args.out:
                with open(args.out, "w", encoding="utf-8") as out:
                    n = golden.write_jsonl(lines, out)
                print(f"wrote {n - 1} questions to {args.out}", file=sys.stderr)
            else:
                golden.write_jsonl(lines, sys.stdout)
            return 0
        if args.golden_action == "rebind":
            report = golden.rebind(client, args.collection, args.name)
            if args.json:
                dump({"golden_set": report.golden_set, "counts": report.counts,
                      "unbound": rows_json(report.unbound)})
            else:
                print(f"golden set {report.golden_set}: "
                      + ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in report.counts.items()))
                _print_unbound(report)
            return 0 if not report.unbound else 1
        if args.golden_action == "delete":
            if not args.name:
                raise InvalidArgument("golden delete needs --name")
            deleted = golden.delete_golden_set(client, args.collection, args.name)
            print(f"deleted golden set {args.name}" if deleted else f"no golden set {args.name}")
            return 0 if deleted else 1
    return 2


def _golden_import(client: Client, args: argparse.Namespace) -> int:
    fallback: dict[str, str]
    if args.beir:
        dataset = Path(args.beir)
        if args.ingest:
            _ingest_beir(client, args.collection, dataset, args.model, args.language)
        questions, fallback, source = golden.beir_questions(dataset, split=args.split, model=args.model)
        name = args.name or f"{dataset.resolve().name}-{args.split}"
        judged_at, description = args.judged_at or "document", args.description
    else:
        if args.ingest:
            raise InvalidArgument("--ingest goes with --beir (a JSONL golden set has no corpus)")
        header, questions = golden.read_jsonl(args.jsonl)
        fallback, source = {}, f"jsonl {Path(args.jsonl).name}"
        name = args.name or header.get("name") or Path(args.jsonl).stem
        judged_at = args.judged_at or header.get("judged_at") or "chunk"
        description = args.description or header.get("description")
    report = golden.import_golden_set(client, args.collection, name, questions, judged_at=judged_at,
                                      source=source, description=description, replace=args.replace,
                                      fallback_text=fallback, skip_missing=bool(args.beir))
    if args.json:
        dump({"golden_set": rows_json([report.golden_set])[0], "counts": report.rebind.counts,
              "unbound": rows_json(report.rebind.unbound),
              "skipped": [{"question": key, "source_uri": uri} for key, uri in report.skipped],
              "skipped_questions": report.skipped_questions})
    else:
        _print_import(report, args.collection)
    return 0


# -- eval --------------------------------------------------------------------------

def _metric_row(run: evaluation.EvalRun | evaluation.HistoryRow) -> list[Num | None]:
    m = run.metrics
    return [num(m.get(name)) for name in evaluation.METRICS] + [
        num(m.get("mean_tokens"), ".1f"), num(m.get("mean_results"), ".1f")]


def _metric_headers(k: int | None) -> list[str]:
    at = f"@{k}" if k else ""
    return [evaluation.METRIC_LABELS[name] + at for name in evaluation.METRICS] + ["tokens", "results"]


def _delta(delta: dict[str, float] | None, name: str) -> Num | None:
    return None if not delta or delta.get(name) is None else Num(delta[name], "+.4f")


def _describe_set(collection: str, run: evaluation.EvalRun) -> str:
    qs = run.settings["questions"]
    return (f"collection {collection}, golden set {run.golden_set} ({run.settings['judged_at']}-level): "
            f"{qs['answerable']} answerable question(s), {qs['unanswerable']} without an answer; "
            f"k = {run.k}")


def _notes(runs: list[evaluation.EvalRun]) -> list[str]:
    notes = []
    for run in runs:
        legs = ", ".join(f"{leg} {n}" for leg, n in run.settings["legs"].items()) or "none"
        notes.append(f"{run.label}: legs run {legs}; query vectors: {run.settings['embeddings']}")
    unbound = runs[0].settings["questions"]["unbound_positives"] if runs else 0
    if unbound:
        notes.append(f"warning: {unbound} positive(s) are not bound to a chunk and count as never "
                     "found: run `pgsift golden rebind`")
    declined = runs[0].metrics.get("unanswerable_declined") if runs else None
    if declined is not None:
        notes.append("share of questions without an answer that got no result: "
                     + ", ".join(f"{r.label} {r.metrics['unanswerable_declined']:.2f}" for r in runs))
    return notes


def _client_for(conn: psycopg.Connection[Any], args: argparse.Namespace, collection: str,
                golden_set: str | None, reembed: bool, modes: list[str]) -> tuple[Client, golden.GoldenSet]:
    """A client for the run and the golden set; with the local embedder only when some
    question has no stored vector (or --reembed) and a mode needs vectors."""
    client = common.client_for(conn, args)
    gs = golden.get_golden_set(client, collection, golden_set)
    if any(m in ("pipeline", "dense") for m in modes) and (reembed or gs.without_embedding):
        client.embedder = common.load_embedder(required="dense" in modes)
    return client, gs


def _structure_variants(args: argparse.Namespace) -> list[dict[str, Any]]:
    """--parent-return and --neighbours: one pipeline run per combination, from the same index."""
    policies = _listed(args.parent_return, str)
    counts = _listed(args.neighbours, int)
    return [{**({"parent_return": p} if p is not None else {}), **({"neighbours": n} if n is not None else {})}
            for p in policies for n in counts]


def _listed(value: str | None, kind: type) -> list[Any]:
    if value is None:
        return [None]
    try:
        return list(dict.fromkeys(kind(v.strip()) for v in value.split(",") if v.strip())) or [None]
    except ValueError as exc:
        raise InvalidArgument(f"expected a comma-separated list, got {value!r}") from exc


def _eval_run(conn: psycopg.Connection[Any], args: argparse.Namespace, collection: str) -> int:
    knobs = parse_settings(args.set)
    variants = _structure_variants(args)
    modes = ["pipeline", *dict.fromkeys(args.baseline or [])]
    client, gs = _client_for(conn, args, collection, args.golden, args.reembed, modes)
    for variant in variants:
        client.knobs(collection, **knobs, **variant)    # the database refuses a bad knob before any run
    plan = [("pipeline", {**knobs, **variant}) for variant in variants]
    plan += [(mode, {k: v for k, v in knobs.items() if k != "hybrid"}) for mode in modes[1:]]
    runs = []
    with progress_bar(gs.questions * len(plan), f"eval {collection}") as bar:
        for mode, run_knobs in plan:
            variant = {k: v for k, v in run_knobs.items() if k in ("parent_return", "neighbours")}
            label = " ".join(f"{k}={v}" for k, v in variant.items()) if len(variants) > 1 else None
            runs.append(evaluation.evaluate(client, collection, golden_set=gs.name, top_k=args.top_k,
                                            knobs=run_knobs, mode=mode, store=not args.no_store,
                                            reembed=args.reembed, progress=bar.update,
                                            label=label if mode == "pipeline" else None))
    if args.json:
        dump({"runs": [r.to_json(per_question=args.per_question) for r in runs]})
        return 0
    print(_describe_set(collection, runs[0]))
    structure = args.parent_return is not None or args.neighbours is not None
    extra = [[num(r.metrics.get("coverage")), num(r.metrics.get("merge_rate"))] if structure else []
             for r in runs]
    rows = [[r.run_id, r.label, *_metric_row(r), *more, _delta(r.delta, "ndcg"), _delta(r.delta, "recall"),
             r.previous_run_id] for r, more in zip(runs, extra, strict=True)]
    print(table(rows, ["run", "label", *_metric_headers(args.top_k), *(["coverage", "merged"] if structure else []),
                       f"ΔnDCG@{args.top_k}", f"ΔR@{args.top_k}", "vs run"]))
    if structure:
        print("coverage: share of each answer's chunks whose text came back; merged: share of hits that "
              "were whole sections (parent_return); tokens: text returned per question, nothing twice")
    if knobs:
        print("overrides: " + ", ".join(f"{k}={common.json_cell(v)}" for k, v in knobs.items()))
    for note in _notes(runs):
        print(note)
    return 0


def _eval_history(conn: psycopg.Connection[Any], args: argparse.Namespace, collection: str) -> int:
    client = common.client_for(conn, args)
    rows = evaluation.history(client, collection, golden_set=args.golden,
                              max_runs=None if args.all else args.limit)
    if args.json:
        dump(rows_json(rows))
        return 0
    out = []
    for r in rows:
        knobs = r.settings.get("knobs") or {}
        out.append([r.run_id, r.created_at.strftime("%Y-%m-%d %H:%M"), r.set_name, r.label, r.k,
                    *_metric_row(r), _delta(r.delta, "ndcg"), _delta(r.delta, "recall"),
                    r.previous_run_id, " ".join(f"{k}={common.json_cell(v)}" for k, v in knobs.items())])
    print(table(out, ["run", "when", "golden set", "label", "k", *_metric_headers(None), "ΔnDCG", "ΔR",
                      "vs run", "overrides"]))
    if rows:
        print("Δ: against the previous run with the same golden set, k and label")
    return 0


def _eval_sweep(conn: psycopg.Connection[Any], args: argparse.Namespace, collection: str) -> int:
    if not args.knob or not args.values:
        raise InvalidArgument("eval sweep needs --knob and --values")
    knobs = parse_settings(args.set)
    baselines = list(dict.fromkeys(args.baseline or []))
    client, gs = _client_for(conn, args, collection, args.golden, args.reembed, ["pipeline", *baselines])
    kind = evaluation.sweepable_knobs(client).get(args.knob, float)
    # Checked by the database (the knob, each value's range) before any run.
    values = evaluation.check_values(client, collection, args.knob, evaluation.parse_values(args.values, kind),
                                     knobs)
    with progress_bar(gs.questions * (len(values) + len(baselines)), f"sweep {args.knob}") as bar:
        result = evaluation.sweep(client, collection, args.knob, values, golden_set=gs.name,
                                  top_k=args.top_k, knobs=knobs, baselines=baselines, metric=args.metric,
                                  store=not args.no_store, reembed=args.reembed, progress=bar.update)
    plot = Path(args.plot or f"sweep-{collection}-{args.knob}.png")
    evaluation.plot_sweep(result, plot)
    best_value, best_run = result.best
    if args.json:
        dump({**result.to_json(), "plot": str(plot)})
        return 0
    print(_describe_set(collection, result.runs[0]))
    rows = [[args.knob + "=" + evaluation.format_value(v), *_metric_row(r), r.run_id,
             "*" if v == best_value else ""] for v, r in zip(result.values, result.runs, strict=True)]
    rows += [[f"{r.mode} only", *_metric_row(r), r.run_id, ""] for r in result.baselines]
    print(table(rows, ["setting", *_metric_headers(args.top_k), "run", "best"]))
    label = evaluation.METRIC_LABELS[result.metric]
    best = best_run.metrics[result.metric]
    print(f"best {args.knob} = {evaluation.format_value(best_value)} "
          f"({label}@{args.top_k} {'-' if best is None else f'{best:.4f}'}); plot: {plot}")
    for note in _notes([result.runs[0], *result.baselines]):
        print(note)
    return 0


def _knob_text(knobs: dict[str, Any] | None) -> str:
    return " ".join(f"{k}={common.json_cell(v)}" for k, v in sorted((knobs or {}).items()))


def _print_tuning(result: tuning.Tuning, set_name: str) -> None:
    k, held, decision = result.k, result.held_out, result.decision
    print(f"collection {result.collection}, golden set {set_name}: {held.questions} scored question(s), "
          f"nDCG@{k}, {result.folds} folds, seed {result.seed}")
    cur = result.current
    rows = [[0, "current: " + _knob_text(cur.knobs), num(cur.ndcg), None, "", ""]]
    rows += [[c.cell, _knob_text(c.knobs), num(c.ndcg), num(c.gain, "+.4f"),
              ",".join(str(f.fold) for f in result.fold_picks if f.cell == c.cell),
              "*" if c.cell == decision.cell else ""] for c in result.cells]
    print(table(rows, ["cell", "knobs", f"nDCG@{k}", "gain", "picked by folds", "best"]))
    picks = [[f.fold, f.questions, f.cell, num(f.ndcg), num(f.current_ndcg), num(f.gain, "+.4f")]
             for f in result.fold_picks]
    print(table(picks, ["fold", "questions", "pick (other folds)", f"held-out nDCG@{k}", "current", "gain"]))
    print(f"held-out (cross-validated) nDCG@{k} {num(held.ndcg)} vs current {num(held.current_ndcg)}: "
          f"gain {num(held.gain, '+.4f')}, 95% CI [{num(held.ci_low, '+.4f')}, {num(held.ci_high, '+.4f')}] "
          "(paired bootstrap over questions)")
    print(held.note)
    print(f"best on all the questions: cell {decision.cell} ({_knob_text(decision.knobs)}), "
          f"nDCG@{k} {num(decision.ndcg)} in-sample")
    print(decision.note)


def _eval_tune(conn: psycopg.Connection[Any], args: argparse.Namespace, collection: str) -> int:
    client = common.client_for(conn, args)
    gs = golden.get_golden_set(client, collection, args.golden)
    grid = tuning.read_grid(args.grid) if args.grid else None
    result = tuning.tune(client, collection, golden_set=gs.name, k=args.top_k,
                         folds=5 if args.folds is None else args.folds, grid=grid,
                         seed=0 if args.seed is None else args.seed, store=args.store,
                         per_question=args.per_question)
    if args.json:
        dump(result.to_json())
    else:
        _print_tuning(result, gs.name)
    return 0 if result.significant else 1


def cmd_eval(args: argparse.Namespace) -> int:
    if args.action in EVAL_ACTIONS:
        if not args.collection:
            raise InvalidArgument(f"eval {args.action} needs a collection")
        action, collection = args.action, args.collection
    else:
        if args.collection:
            raise InvalidArgument(f"unexpected argument {args.collection!r} "
                                  f"(pgsift eval COLLECTION, or eval {{{'|'.join(EVAL_ACTIONS)}}} COLLECTION)")
        action, collection = "run", args.action
    if action != "sweep" and (args.knob or args.values or args.plot):
        raise InvalidArgument("--knob, --values and --plot go with `pgsift eval sweep`")
    if action != "tune" and any(getattr(args, o) not in (None, False) for o in TUNE_OPTIONS):
        raise InvalidArgument("--folds, --grid, --seed and --store go with `pgsift eval tune`")
    with common.connect(args) as conn:
        if action == "tune":
            return _eval_tune(conn, args, collection)
        if action == "history":
            return _eval_history(conn, args, collection)
        if action == "sweep":
            return _eval_sweep(conn, args, collection)
        return _eval_run(conn, args, collection)


# -- calibrate ----------------------------------------------------------------------

def _print_calibration(result: calibration.Calibration) -> None:
    c = result.counts
    print(f"collection {result.collection}, golden set {result.golden_set}, reranker {result.reranker}, "
          f"k = {result.k}: {c['unanswerable']} question(s) without an answer, {c['answerable']} answerable "
          f"({c['working_today']} working today)")
    if result.band is None:
        print("nothing to calibrate: no question was scored")
    elif not result.helps:
        print(f"no threshold helps: {result.why}")
        low, high = result.band
        print(f"(best objective {num(result.objective)}, for thresholds {num(low)} to {num(high)}: "
              "no value is proposed)")
    else:
        rows = [[num(result.band[0]), num(result.band[1]), num(result.value), num(result.objective),
                 num(result.declined_share), num(result.pushed_below_share),
                 f"{c['declined']}/{c['scored_unanswerable']}", f"{c['pushed_below']}/{c['scored_working']}",
                 c["failed"]]]
        print(table(rows, ["band low", "band high", "value", "objective", "declined", "pushed below",
                           "declined n", "pushed n", "failed"]))
    if c["relevant_not_in_pool"]:
        print(f"{c['relevant_not_in_pool']} working question(s) had no relevant chunk in the reranked pool "
              "(left out of the pushed-below share)")
    if result.failures:
        print(f"{len(result.failures)} question(s) left out, their rerank call failed or was not made "
              "(never guessed):")
        for key, reason in result.failures[:20]:
            print(f"  {key}: {reason}")
    if result.stored and result.value is not None:
        print(f"stored: score_threshold {result.value:.4f} of {result.collection}, calibrated for reranker "
              f"{result.reranker} (applied only to pools that reranker scores)")
    elif result.value is not None:
        print("not stored (--store to store it against the reranker)")
    elif result.threshold_in_force is not None:
        value, reranker = result.threshold_in_force
        if value is None:
            print(f"nothing stored: no score_threshold is set on {result.collection}")
        else:
            whose = f"calibrated for reranker {reranker}" if reranker else "set by hand"
            print(f"nothing stored: {result.collection} keeps its score_threshold {value:.4f} ({whose}); "
                  f"`pgsift collection alter {result.collection} --reset score_threshold` clears it")


def cmd_calibrate(args: argparse.Namespace) -> int:
    with common.connect(args) as conn:
        client, gs = _client_for(conn, args, args.collection, args.golden, False, ["pipeline"])
        calibration.reranker_config(client, args.collection, args.reranker)   # refused before any call
        with progress_bar(gs.questions, f"calibrate {args.collection}") as bar:
            result = calibration.calibrate(client, args.collection, args.reranker, golden_set=gs.name,
                                           top_k=args.top_k, progress=bar.update)
        if args.store and result.helps:
            calibration.store_calibration(client, result)
        elif args.store:
            # Nothing to store: a threshold stored before is left as it was, and shown.
            result.threshold_in_force = calibration.threshold_in_force(client, args.collection)
    if args.json:
        dump(result.to_json(per_question=args.per_question))
    else:
        _print_calibration(result)
    return 0 if result.value is not None else 1


# -- parser -------------------------------------------------------------------------

def register(sub: Any) -> None:
    """Add `golden`, `eval` and `calibrate` to pgsift's subcommands."""
    p = add_command(sub, "golden", "golden sets: labelled questions to evaluate a collection with")
    gsub = p.add_subparsers(dest="golden_action", required=True, metavar="ACTION")

    g = add_command(gsub, "import", "import a golden set from a BEIR folder or a JSONL file")
    g.add_argument("collection", help="the collection the questions are about")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--beir", metavar="DIR", help="BEIR layout: corpus.jsonl, queries.jsonl, qrels/")
    src.add_argument("--jsonl", metavar="FILE", help="one question per line (see docs/evaluation.md)")
    g.add_argument("--name", help="golden set name (default: DIR-SPLIT, the header's, or the file stem)")
    g.add_argument("--split", default="test", help="BEIR qrels split (default test; tune on train)")
    g.add_argument("--model", help="BEIR embeddings/<model> folder (default: the only one)")
    g.add_argument("--ingest", action="store_true",
                   help="BEIR: first write the corpus into the collection (created if missing), "
                        "one document and one chunk per entry, as pgsift bench does")
    g.add_argument("--language", default="english", help="with --ingest, for a new collection")
    g.add_argument("--judged-at", choices=golden.JUDGED_AT,
                   help="score chunks or whole documents (default: document for BEIR, chunk for JSONL)")
    g.add_argument("--description", help="what the set is about (default: the JSONL header's)")
    g.add_argument("--replace", action="store_true", help="replace a set of that name (history stays)")
    g.add_argument("--json", action="store_true", help="print the report as JSON")

    for action, text in (("list", "golden sets of a collection"),
                         ("export", "write a golden set as JSONL"),
                         ("rebind", "after re-chunking: bind each positive to the chunk that now holds "
                                    "its text (exit 1 if some could not be bound)"),
                         ("delete", "delete a golden set (its run history stays)")):
        g = add_command(gsub, action, text)
        g.add_argument("collection", help="the collection the set belongs to")
        if action != "list":
            g.add_argument("--name", help="golden set (default: the collection's only one)")
        if action == "export":
            g.add_argument("--out", help="file to write (default: stdout)")
            g.add_argument("--with-embeddings", action="store_true", help="include stored query vectors")
        if action in ("list", "rebind"):
            g.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_golden)

    p = add_command(sub, "eval", "evaluate search on a golden set; history; knob sweeps; tuning",
                    description="pgsift eval COLLECTION | eval history COLLECTION | "
                                "eval sweep COLLECTION --knob K --values V | eval tune COLLECTION",
                    epilog="eval tune exits 1 when no cell's held-out gain is significant (nothing stored)",
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", metavar="COLLECTION|run|history|sweep|tune",
                   help="a collection to evaluate, or run, history, sweep or tune followed by one")
    p.add_argument("collection", nargs="?", help="the collection, after run, history, sweep or tune")
    p.add_argument("--golden", "--golden-set", dest="golden", help="golden set (default: the collection's only one)")
    p.add_argument("--top-k", "--k", dest="top_k", type=int, default=10, help="k of every metric (default 10)")
    add_set_option(p, "for this evaluation")
    p.add_argument("--baseline", action="append", choices=["dense", "lexical"],
                   help="also run this leg alone beside the pipeline (repeatable)")
    p.add_argument("--reembed", action="store_true",
                   help="embed the questions with the local embedder even when vectors are stored")
    p.add_argument("--parent-return", metavar="POLICIES",
                   help="run: child, parent, auto or a list (child,parent,auto): one run each, same index")
    p.add_argument("--neighbours", metavar="N",
                   help="run: chunks around each hit (0-20) or a list (0,1): one run each, same index")
    p.add_argument("--no-store", action="store_true", help="do not record the run(s) in the history")
    p.add_argument("--json", action="store_true", help="print the run(s) as JSON")
    p.add_argument("--per-question", action="store_true", help="with --json: each question's result")
    p.add_argument("--knob", help="sweep: the knob, a number a call can set (see `pgsift knobs`)")
    p.add_argument("--values", help="sweep: 0,0.1,...,1 (a series), 20,40,80, or start:stop:step")
    p.add_argument("--metric", default="ndcg", choices=evaluation.METRICS,
                   help="sweep: the metric that picks the best value (default ndcg)")
    p.add_argument("--plot", help="sweep: PNG to write (default sweep-COLLECTION-KNOB.png)")
    p.add_argument("--folds", type=int, help="tune: cross-validation folds, 2-20 (default 5)")
    p.add_argument("--grid", metavar="FILE.json",
                   help="tune: a JSON array of knob objects, or {knob: [values]} for every combination "
                        "(default: the database's grid over fusion, dense_weight, rrf_k and fetch_k)")
    p.add_argument("--seed", type=int, help="tune: deals the questions into folds and draws the bootstrap "
                                            "(default 0)")
    p.add_argument("--store", action="store_true",
                   help="tune: store the best cell on the collection if its held-out gain is significant")
    p.add_argument("--limit", type=int, default=50, help="history: the latest N runs (default 50)")
    p.add_argument("--all", action="store_true", help="history: every run")
    p.set_defaults(func=cmd_eval)

    p = add_command(sub, "calibrate", "propose a score threshold for a reranker from a golden set",
                    epilog="exit status: 0 a threshold is proposed (and stored with --store); 1 none is: "
                           "no question was scored, or no threshold helps (nothing is stored, a threshold "
                           "stored before stays); 2 an error")
    p.add_argument("collection", help="the collection to calibrate")
    p.add_argument("--reranker", required=True, metavar="ALIAS", help="a reranker of this tenant")
    p.add_argument("--golden", "--golden-set", dest="golden",
                   help="golden set (default: the collection's only one)")
    p.add_argument("--top-k", type=int, default=10,
                   help="a question works today when a relevant hit is within top k (default 10)")
    p.add_argument("--store", action="store_true",
                   help="store the value as the collection's threshold, against this reranker "
                        "(nothing when no threshold helps)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--per-question", action="store_true", help="with --json: each question's scores")
    p.set_defaults(func=cmd_calibrate)
