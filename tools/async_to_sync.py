"""Generate pgsift's sync modules from their async sources (psycopg's approach).

    python tools/async_to_sync.py           # rewrite every generated file
    python tools/async_to_sync.py --check   # exit 1 if one is stale (tests run this)

Each `*_async.py` listed in SOURCES is written once, by hand; its sync twin is
derived here token by token (so comments and layout survive): `async` and
`await` are dropped and the names in RENAMES become their sync counterparts.
What cannot be derived that way (a thread with a deadline versus
asyncio.wait_for) lives in tiny pairs in pgsift/compat.py, named `aname` and
`name`, which the renaming picks up.
"""

from __future__ import annotations

import argparse
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "pgsift"

# async source -> generated sync module
SOURCES = {
    PACKAGE / "client_async.py": PACKAGE / "client.py",
    PACKAGE / "migrate_async.py": PACKAGE / "migrate.py",
    PACKAGE / "rerankers" / "engine_async.py": PACKAGE / "rerankers" / "engine.py",
}

RENAMES = {
    # psycopg
    "AsyncConnection": "Connection",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncCursor": "Cursor",
    "AsyncPipeline": "Pipeline",
    # typing and contextlib
    "AsyncIterator": "Iterator",
    "AsyncGenerator": "Generator",
    "asynccontextmanager": "contextmanager",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    # pgsift's own pairs
    "AsyncClient": "Client",
    "client_async": "client",
    "migrate_async": "migrate",
    "engine_async": "engine",
    "arerank": "rerank",
    "arun_bounded": "run_bounded",
    "asleep": "sleep",
    "abuild_reranker": "build_reranker",
}

HEADER = ("# DO NOT EDIT: generated from {source} by tools/async_to_sync.py.\n"
          "# Change the async source and run `make sync` (a test fails while this file is stale).\n")


def convert(source: str, name: str) -> str:
    """The sync twin of an async module's text: edits at token positions, the rest untouched."""
    line_starts = [0]
    for line in source.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(pos: tuple[int, int]) -> int:
        return line_starts[pos[0] - 1] + pos[1]

    edits: list[tuple[int, int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.NAME:
            continue
        start, end = offset(tok.start), offset(tok.end)
        if tok.string in ("async", "await"):
            while end < len(source) and source[end] == " ":
                end += 1          # the keyword and the space after it
            edits.append((start, end, ""))
        elif tok.string in RENAMES:
            edits.append((start, end, RENAMES[tok.string]))
    text = source
    for start, end, new in reversed(edits):
        text = text[:start] + new + text[end:]
    return HEADER.format(source=name) + text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report stale files instead of writing them")
    args = parser.parse_args(argv)
    stale = []
    for source, target in SOURCES.items():
        text = convert(source.read_text(encoding="utf-8"), source.relative_to(ROOT).as_posix())
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        if args.check:
            stale.append(target.relative_to(ROOT).as_posix())
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        print("stale (run `make sync`): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
