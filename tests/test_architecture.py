"""docs/architecture.md's picture of a search is the code: every box a function of sql/, every
arrow a call that function's body makes, and every stage a stage function calls is drawn.

Read from the files, no server: a renamed, split or newly called stage fails here until the
picture follows it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"

# The functions whose calls the picture must show in full: the search's path, stage by stage.
STAGES = ("search", "_plain_legs", "_staged_search", "_late_pool", "_candidates", "_pool", "_hits",
          "_finalize", "_dense_ids", "_space_dense_ids", "_question_ids")
# What those call that is no stage of its own: a helper the picture leaves out, and why.
HELPERS = {
    "filter_path": "compiles the metadata filter each leg applies",
    "_space_own_index": "names the index a space walks",
    "_space": "looks a vector space up by name",
    "_space_missing": "says why a space has no vector for a chunk",
    "_query_tokens": "checks the query's token vectors",
    "_merge_questions": "merges the question leg into the dense leg (no statement on a table)",
    "language_config": "a language's text search configuration",
    "_section_body": "a section's text for parent_return",
    "_check_deadline": "the tenant's call_time_limit between steps",
    "_language": "a language code's primary subtag",
    "_page_key": "the page a translation belongs to",
    "_recency_date": "a document's date for recency",
    "recency_factor": "the recency formula",
    "_hnsw_ef_search": "the walk's candidate list",
    "_distance_operator": "a distance's pgvector operator",
    "_walk_name": "the walk function's name",
    "_dense_ids_sql": "the leg's statement when no walk function exists",
    "_dense_rows_sql": "the leg's statement when no walk function exists",
    "_dense_exact": "whether a space scans exactly",
    "_pgvector_has_iterative_scan": "whether pgvector walks iteratively",
    "_space_dedicated": "whether a space has an index of its own",
    "_space_index_name": "the index a space walks",
}


def _bodies() -> dict[str, str]:
    """Each sift function's bodies (every overload), comments removed."""
    bodies: dict[str, str] = {}
    for path in sorted((ROOT / "sql").glob("*.sql")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"create or replace function sift\.(\w+)\(.*?\$\$(.*?)\$\$;", text, re.S):
            bodies[m.group(1)] = bodies.get(m.group(1), "") + re.sub(r"--[^\n]*", "", m.group(2))
    return bodies


def _calls(body: str) -> set[str]:
    return set(re.findall(r"\bsift\.(\w+)\s*\(", body))


def _picture() -> tuple[dict[str, str], set[tuple[str, str]]]:
    """The mermaid block's boxes (id -> function) and arrows (function, function)."""
    block = re.search(r"```mermaid\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block, "docs/architecture.md has no mermaid picture of a search"
    boxes = {m.group(1): m.group(2) for m in re.finditer(r"(\w+)[\[{(]+\"sift\.(\w+)", block.group(1))}
    arrows = set()
    for m in re.finditer(r"^\s*(\w+)\b.*?-->\s*(?:\|[^|]*\|\s*)?(\w+)", block.group(1), re.M):
        assert m.group(1) in boxes and m.group(2) in boxes, f"an arrow between unknown boxes: {m.group(0)}"
        arrows.add((boxes[m.group(1)], boxes[m.group(2)]))
    return boxes, arrows


def test_every_box_is_a_function_and_every_arrow_a_call() -> None:
    bodies = _bodies()
    boxes, arrows = _picture()
    assert set(boxes.values()) <= set(bodies), sorted(set(boxes.values()) - set(bodies))
    for caller, callee in sorted(arrows):
        assert callee in _calls(bodies[caller]), f"sift.{caller} does not call sift.{callee}"


def test_every_stage_a_stage_calls_is_drawn() -> None:
    bodies = _bodies()
    boxes, arrows = _picture()
    for stage in STAGES:
        assert stage in boxes.values(), f"sift.{stage} is not in the picture"
        missing = sorted(_calls(bodies[stage]) - {callee for caller, callee in arrows if caller == stage}
                         - set(HELPERS))
        assert not missing, f"sift.{stage} calls {missing}: draw them, or name them in HELPERS"


def test_every_helper_left_out_exists() -> None:
    bodies = _bodies()
    assert set(HELPERS) <= set(bodies), sorted(set(HELPERS) - set(bodies))
