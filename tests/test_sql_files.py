"""Every shipped SQL file parses (pglast, PostgreSQL's own parser), and no function of sql/
runs past LONG lines without saying why; no database needed.

A syntax error is reported as file:line, so the failing file is in the test id
and the line is in the message.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pglast.parser import ParseError, parse_sql
from pgsift.schema import with_vector_schema

ROOT = Path(__file__).resolve().parent.parent
SQL_FILES = sorted([*(ROOT / "sql").glob("*.sql"), *(ROOT / "migrations").glob("*.sql")])
FUNCTION_FILES = sorted((ROOT / "sql").glob("*.sql"))
# A function longer than this (from its `create or replace function` to the `$$;` that closes
# it) is split into smaller ones, or its body says why it is one, on a line that starts with
# `-- Not split:` and gives the reason.
LONG = 120
REASON = re.compile(r"^\s*-- Not split: \S.{20,}$", re.M)


def line_of(text: str, offset: int | None) -> int | None:
    """1-based line of a character offset (pglast reports character offsets, not bytes)."""
    if offset is None or offset < 0:
        return None
    return text.count("\n", 0, min(offset, len(text))) + 1


def parse_or_explain(text: str, name: str) -> int:
    """Number of statements in `text`; a parse error becomes an AssertionError naming file:line."""
    try:
        return len(parse_sql(text))
    except ParseError as exc:
        message = exc.args[0] if exc.args else str(exc)
        offset = exc.args[1] if len(exc.args) > 1 else None
        line = line_of(text, offset)
        where = f"{name}:{line}" if line else name
        snippet = text.splitlines()[line - 1].strip() if line else ""
        raise AssertionError(f"{where}: {message}\n    {snippet}") from exc


def long_functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every function in a file of sql/ longer than LONG lines whose
    body gives no `-- Not split:` reason. A function starts at a line that begins with `create or
    replace function` (one made by a string inside another starts further in) and ends at the
    first line after it that begins with `$$;`."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        m = re.match(r"create or replace function (sift\.\w+)\(", line)
        if not m:
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("$$;"))
        whole = "\n".join(lines[i:end + 1])
        body = whole[whole.index("$$") + 2:]
        if end - i + 1 > LONG and not REASON.search(body):
            found.append((m.group(1), i + 1, end - i + 1))
    return found


def test_there_are_files_to_check():
    names = {p.parent.name for p in SQL_FILES}
    assert names == {"sql", "migrations"}


@pytest.mark.parametrize("path", SQL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_file_parses(path: Path):
    # The installer writes pgvector's schema where the files say @extschema:vector@.
    text = with_vector_schema(path.read_text(encoding="utf-8"), "public")
    assert parse_or_explain(text, f"{path.parent.name}/{path.name}") > 0


@pytest.mark.parametrize("path", FUNCTION_FILES, ids=lambda p: p.name)
def test_no_function_is_long_without_a_reason(path: Path):
    long = long_functions(path.read_text(encoding="utf-8"))
    assert not long, "\n".join(
        f"sql/{path.name}:{line}: {name} is {n} lines (more than {LONG}): split it, or say why it is one "
        "in its body, on a line starting `-- Not split:`" for name, line, n in long)


@pytest.mark.parametrize("path", FUNCTION_FILES, ids=lambda p: p.name)
def test_every_file_says_what_goes_in_and_comes_out(path: Path):
    """A file of sql/ is one stage: its opening comment says what it takes and what it gives."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = " ".join(line for line in lines[:next(i for i, line in enumerate(lines) if not line.startswith("--"))])
    assert "In:" in header and "Out:" in header, f"sql/{path.name}: its opening comment has no `In:` and `Out:`"


def test_a_long_function_is_found_and_a_reason_is_read():
    def function(name: str, body_lines: int, comment: str = "") -> str:
        body = [f"    select {i};" for i in range(body_lines)]
        return "\n".join([f"create or replace function sift.{name}()", "returns void", "language sql",
                          "as $$", *([comment] if comment else []), *body, "$$;",
                          f"comment on function sift.{name}() is 'x';", ""])

    assert long_functions(function("short", LONG - 5)) == []
    # A string that makes a function inside another is no function of its own.
    nested = function("maker", 10).replace("select 3;", "'create or replace function sift.made() ' || 'x';")
    assert long_functions(nested) == []
    text = function("short", 3) + function("long", LONG) + function("explained", LONG,
                                                                    "    -- Not split: one statement planned once.")
    first = len(function("short", 3).splitlines()) + 1
    assert long_functions(text) == [("sift.long", first, LONG + 5)]
    # The reason is in the body, and says something.
    assert [f[0] for f in long_functions(function("bare", LONG, "    -- Not split:"))] == ["sift.bare"]
    moved = function("before_body", LONG).replace("as $$", "-- Not split: said before the body, not in it.\nas $$")
    assert [f[0] for f in long_functions(moved)] == ["sift.before_body"]


def test_parse_error_names_file_and_line():
    # The reporting path itself: a typo on line 3 (after a multi-byte character,
    # so a byte offset would point at the wrong place) is reported as name:3.
    text = "select 'héllo wörld';\n\nselect 1 frm nowhere;\nselect 2;\n"
    with pytest.raises(AssertionError) as info:
        parse_or_explain(text, "sql/broken.sql")
    assert str(info.value).startswith("sql/broken.sql:3: syntax error")
    assert "select 1 frm nowhere;" in str(info.value)


def test_line_of():
    assert line_of("a\nb\nc", 0) == 1
    assert line_of("a\nb\nc", 2) == 2
    assert line_of("a\nb\nc", 4) == 3
    assert line_of("a", None) is None
