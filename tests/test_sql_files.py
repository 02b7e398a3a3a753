"""Every shipped SQL file parses (pglast, PostgreSQL's own parser); no database needed.

A syntax error is reported as file:line, so the failing file is in the test id
and the line is in the message.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pglast.parser import ParseError, parse_sql
from pgsift.schema import with_vector_schema

ROOT = Path(__file__).resolve().parent.parent
SQL_FILES = sorted([*(ROOT / "sql").glob("*.sql"), *(ROOT / "migrations").glob("*.sql")])


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


def test_there_are_files_to_check():
    names = {p.parent.name for p in SQL_FILES}
    assert names == {"sql", "migrations"}


@pytest.mark.parametrize("path", SQL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_file_parses(path: Path):
    # The installer writes pgvector's schema where the files say @extschema:vector@.
    text = with_vector_schema(path.read_text(encoding="utf-8"), "public")
    assert parse_or_explain(text, f"{path.parent.name}/{path.name}") > 0


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
