"""The `pgsift` command: embedded server, install, collections, knobs, ingest (with
enrichment), search, explain, rerankers, demo, benchmarks, golden sets, evaluation and
calibration.

Where the database is: --dsn, else DATABASE_URL, else the embedded server
(started on demand and left running; `pgsift db stop` stops it). --dsn and
--tenant go before or after the subcommand.
"""

from __future__ import annotations

import argparse
import json
import sys

import psycopg

from ..errors import PgsiftError
from . import bench, commands, common, evaluation, rerankers

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pgsift", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     parents=[common.connection_options(None)])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.register(sub)
    rerankers.register(sub)
    bench.register(sub)
    evaluation.register(sub)
    return parser


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except PgsiftError as exc:
        print(f"error: {_first_line(exc)}", file=sys.stderr)
    except psycopg.OperationalError as exc:
        print(f"error: cannot reach the database: {_first_line(exc)}", file=sys.stderr)
    except json.JSONDecodeError as exc:
        print(f"error: not valid JSON: {exc}", file=sys.stderr)
    except (psycopg.errors.InvalidSchemaName, psycopg.errors.UndefinedFunction,
            psycopg.errors.UndefinedTable) as exc:
        if "sift" not in str(exc):
            print(f"error: {_first_line(exc)}", file=sys.stderr)
        else:
            print(f"error: pgsift is not installed in this database ({_first_line(exc)})\n"
                  "hint: run `pgsift migrate` (with the same --dsn or DATABASE_URL)", file=sys.stderr)
    except psycopg.Error as exc:
        print(f"error: {_first_line(exc)}", file=sys.stderr)
    return 2
