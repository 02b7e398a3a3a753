"""The docs are tests: every code block of README.md and docs/*.md runs here, in order.

One test per Markdown file, on a fresh database. Each block is classified by its
language and run, so an example can never drift from the code:

* ```sql: run as the operator (the superuser that installed pgsift) on one
  connection, as psql would run it (several statements, `begin; ... commit;`).
* ```python: run in one namespace per file, given what the docs introduce: `url` (the
  test database), `standby_url` (the same database with every transaction read-only,
  a hot standby's stand-in) and `embed(text)` (the stand-in for an embedding model).
* ```sh: each `pgsift ...` line (also `.venv/bin/pgsift`) through pgsift.cli.main,
  with DATABASE_URL pointing at the test database; it must exit 0. An `export NAME=VALUE`
  line sets that variable for the file's later blocks ($NAME in a line is expanded).
* ```json: data: it must parse as JSON or JSON Lines.
* ```text and unlabelled blocks: output or layout, left alone.

An HTML comment on the line before a block says more about it:

* `<!-- not run: why -->`: the block cannot run here (make, pip, a remote host).
  A block that cannot run and has no reason is a failure.
* `<!-- raises: CODE -->`: the example shows an error: a sql block must fail with
  that SQLSTATE, a python block with an exception of that class.
* `<!-- file: NAME -->`: a json or text block is a file the later blocks read; it is
  written to the working directory.

What the examples assume is prepared here: the collection `handbook` (the files of
HANDBOOK, with a team in their metadata and a modified date) for the tenants a file
names in SEEDS, a `handbook/` folder and a `questions.jsonl` in the working directory,
a small BEIR folder at ../shared/datasets/scifact (where the repository keeps SciFact),
and SQL `embed(text)`, the same stand-in as the Python one; the command line's local
embedder is that stand-in too (python.md's LocalEmbedder example loads the real
all-MiniLM-L6-v2). No network exists here:
the rerankers' HTTP calls go to a loopback server that speaks each provider's protocol
(tests/rerank_servers.py); everything else (which reranker, its key from the operator's
mapping, the retry engine, metering, finalize) runs as it does in production.

Tables that restate a registry are checked against it: docs/sql.md's knobs against
sift.knobs(), docs/errors.md's codes against pgsift.errors.SQLSTATES.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import math
import os
import re
import shlex
import traceback
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import numpy.typing as npt
import pgsift
import psycopg
import pytest
from pgsift import Client, errors
from pgsift.cli import main
from pgsift.ingest import documents_from_folder
from pgsift.rerankers import registry
from rerank_servers import RerankServer

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
DIMS = 384

# Tenants whose collection `handbook` a file assumes (the others build their own).
SEEDS: dict[str, tuple[str, ...]] = {
    "README.md": ("default",),
    "docs/rerank.md": ("acme",),
    "docs/evaluation.md": ("default",),
    "docs/trust.md": ("acme",),
    "docs/errors.md": ("default",),
    "docs/scale-out.md": ("default",),
    "docs/operations.md": ("default",),
}
# Roles a file creates: dropped first, so a rerun on the same server starts clean.
ROLES: dict[str, tuple[str, ...]] = {"docs/trust.md": ("app", "support_acme")}

HANDBOOK = {
    "refunds.md": ("billing", "2025-03-01",
                   "# Refunds\n\nRefunds are paid within 14 days of a return.\n\n"
                   "## Approval\n\nRefunds over 500 euros are approved by the finance team.\n"),
    "returns.md": ("billing", "2024-06-15",
                   "# Returns\n\nItems can be returned within 30 days of delivery. The refund window "
                   "starts when the parcel arrives.\n"),
    "shipping.md": ("logistics", "2025-01-10",
                    "# Shipping\n\nParcels ship from Rotterdam every weekday morning.\n\n"
                    "Delivery inside the EU takes two to four days.\n"),
    "security.md": ("it", "2023-11-20",
                    "# Security\n\nThe laptop policy covers every company laptop: full-disk "
                    "encryption, a screen lock after five minutes.\n"),
    "leave.md": ("people", "2025-02-01",
                 "# Leave\n\nEmployees get 25 days of paid leave a year. Unused days expire in March.\n"),
}

QUESTIONS = [
    {"id": "q1", "question": "How long do refunds take?", "positives": ["Refunds are paid within 14 days"]},
    {"id": "q2", "question": "Who approves large refunds?",
     "positives": [{"text": "approved by the finance team", "source_uri": "refunds.md", "grade": 2}]},
    {"id": "q3", "question": "Which policy covers laptops?", "positives": [{"source_uri": "security.md"}]},
    {"id": "q4", "question": "What is the CEO's shoe size?", "answerable": False},
]

# A BEIR folder in miniature: corpus (id, title, text), queries (id, text), qrels of two splits.
SCIFACT_CORPUS = [("d1", "Vitamin D", "Vitamin D deficiency is linked to bone loss in older adults."),
                  ("d2", "Sleep", "Short sleep raises the risk of obesity in children."),
                  ("d3", "Exercise", "Aerobic exercise improves memory in older adults."),
                  ("d4", "Coffee", "Coffee intake is not linked to heart disease."),
                  ("d5", "Smoking", "Smoking during pregnancy lowers birth weight.")]
SCIFACT_QUERIES = [("t1", "does vitamin d deficiency cause bone loss"),
                   ("t2", "is short sleep linked to obesity in children"),
                   ("t3", "does exercise help memory"),
                   ("r1", "coffee and heart disease"),
                   ("r2", "smoking in pregnancy and birth weight")]
SCIFACT_QRELS = {"test": [("t1", "d1"), ("t2", "d2"), ("t3", "d3")], "train": [("r1", "d4"), ("r2", "d5")]}


# -- the stand-in embedder (Python and SQL compute the same vectors) ---------------------

def _words(text: str) -> list[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words]


def embed(text: str) -> list[float]:
    """A bag of words hashed into 384 dimensions, L2-normalised: texts sharing words are near."""
    vec = [0.0] * DIMS
    for word in _words(text) or ["0"]:
        vec[int(hashlib.md5(word.encode()).hexdigest()[:6], 16) % DIMS] += 1.0
    norm = math.sqrt(sum(v * v for v in vec))
    return [v / norm for v in vec]


EMBED_SQL = """
create or replace function public.embed(input text) returns vector
language sql immutable parallel safe as $$
    with words as (
        select case when length(m[1]) > 3 and right(m[1], 1) = 's' then left(m[1], -1) else m[1] end as w
        from regexp_matches(lower(coalesce(input, '')), '[a-z0-9]+', 'g') as m
    ), counts as (
        select ('x' || substr(md5(w), 1, 6))::bit(24)::integer % 384 as bucket, count(*)::float8 as n
        from words group by 1
    ), safe as (
        select bucket, n from counts
        union all select ('x' || substr(md5('0'), 1, 6))::bit(24)::integer % 384, 1
        where not exists (select 1 from counts)
    )
    select array(select coalesce(s.n, 0) / (select sqrt(sum(n * n)) from safe)
                 from generate_series(0, 383) as i left join safe s on s.bucket = i order by i)::vector
$$;
comment on function public.embed(text) is 'Test stand-in for an embedding model (tests/test_docs.py).';
"""


class StandInEmbedder:
    """The CLI's embedder here: `embed` behind pgsift's Embedder protocol."""

    dims = DIMS
    name = "stand-in"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.array([embed(t) for t in texts], dtype=np.float32)


def overlap_scorer(query: str, documents: Sequence[str]) -> list[float]:
    """The loopback rerank server's scores: the share of the query's words (by their first five
    letters) a document holds."""
    wanted = {w[:5] for w in _words(query) if len(w) > 2}
    return [round(len(wanted & {w[:5] for w in _words(d)}) / (len(wanted) or 1), 6) for d in documents]


# -- parsing ----------------------------------------------------------------------------

FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*([a-z ]+):\s*(.*?)\s*-->\s*$")
MARKERS = {"not run": ("sql", "python", "sh"), "raises": ("sql", "python"), "file": ("json", "text")}
RUNNABLE = ("sql", "python", "sh")
DATA = ("json", "text", "mermaid", "")


@dataclasses.dataclass
class Block:
    path: str
    line: int           # of the opening fence, 1-based
    lang: str
    text: str
    marker: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def parse(path: str) -> list[Block]:
    """The fenced blocks of a Markdown file with the marker before each. Indented code blocks
    and indented fences are refused: they would never run."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        where = f"{path}:{i + 1}"
        m = FENCE.match(line)
        if m is None:
            if re.match(r"^\s+```", line):
                raise AssertionError(f"{where}: an indented fence; put code blocks at column 0 so they run")
            if re.match(r"^( {4}|\t)\S", line) and (i == 0 or not lines[i - 1].strip()):
                raise AssertionError(f"{where}: an indented code block; use a fenced block so it runs")
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            i += 1
        if i == len(lines):
            raise AssertionError(f"{where}: a code block that is never closed")
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = None
        if before.startswith("<!--"):
            mm = MARKER.match(before)
            if mm is None or mm.group(1) not in MARKERS:
                raise AssertionError(f"{where}: unknown marker {before!r} (known: {', '.join(MARKERS)})")
            marker = (mm.group(1), mm.group(2))
        blocks.append(Block(path, start + 1, m.group(1), "\n".join(lines[start + 1:i]), marker))
        i += 1
    return blocks


def check_marker(block: Block) -> None:
    if block.lang not in RUNNABLE + DATA:
        raise AssertionError(f"{block.where}: unknown block language {block.lang!r} "
                             f"(run: {', '.join(RUNNABLE)}; data or output: json, text, mermaid, none)")
    if block.marker is None:
        return
    kind, value = block.marker
    if block.lang not in MARKERS[kind]:
        raise AssertionError(f"{block.where}: <!-- {kind}: --> does not apply to a {block.lang or 'plain'} block")
    if not value:
        raise AssertionError(f"{block.where}: <!-- {kind}: --> needs a value (a reason, a code or a file name)")


# -- running ------------------------------------------------------------------------------

@dataclasses.dataclass
class Context:
    db: psycopg.Connection[Any]
    workdir: Path
    namespace: dict[str, Any]
    output: io.StringIO
    setenv: Callable[[str, str], None]   # undone after the file's test


def run_sql(block: Block, ctx: Context) -> None:
    expected = block.marker[1] if block.marker and block.marker[0] == "raises" else None
    try:
        ctx.db.execute(block.text)   # no parameters: several statements in one call, as psql sends them
    except psycopg.Error as exc:
        if expected is None:
            raise
        if exc.sqlstate != expected:
            raise AssertionError(f"expected SQLSTATE {expected}, got {exc.sqlstate}: {exc}") from exc
        return
    finally:
        if ctx.db.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            ctx.db.execute("rollback")
    if expected is not None:
        raise AssertionError(f"expected an error with SQLSTATE {expected}, but the block ran")


def run_python(block: Block, ctx: Context) -> None:
    expected = block.marker[1] if block.marker and block.marker[0] == "raises" else None
    # Padded so that a traceback's line numbers are the Markdown file's.
    code = compile("\n" * block.line + block.text, str(ROOT / block.path), "exec")
    try:
        with contextlib.redirect_stdout(ctx.output):
            exec(code, ctx.namespace)
    except Exception as exc:
        if expected is None:
            raise
        if expected not in {c.__name__ for c in type(exc).__mro__}:
            raise AssertionError(f"expected {expected}, got {type(exc).__name__}: {exc}") from exc
        return
    if expected is not None:
        raise AssertionError(f"expected {expected} to be raised, but the block ran")


def sh_lines(text: str) -> Iterator[str]:
    """Logical lines of a shell block (a trailing backslash continues a line)."""
    pending = ""
    for raw in text.splitlines():
        line = pending + raw
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        if line.strip():
            yield line


def run_sh(block: Block, ctx: Context) -> None:
    ran = 0
    for line in sh_lines(block.text):
        argv = shlex.split(os.path.expandvars(line), comments=True)
        if not argv:
            continue
        if argv[0] == "export":
            for assignment in argv[1:]:
                name, eq, value = assignment.partition("=")
                if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                    raise AssertionError(f"`{line.strip()}`: export NAME=VALUE")
                ctx.setenv(name, value)
            ran += 1
            continue
        if argv[0] not in ("pgsift", ".venv/bin/pgsift"):
            raise AssertionError(f"cannot run {argv[0]!r} here: mark the block <!-- not run: <reason> -->")
        with contextlib.redirect_stdout(ctx.output), contextlib.redirect_stderr(ctx.output):
            code = main(argv[1:])
        if code != 0:
            raise AssertionError(f"`{line.strip()}` exited {code}:\n{ctx.output.getvalue()[-2000:]}")
        ran += 1
    if not ran:
        raise AssertionError("a shell block with no command")


def run_data(block: Block, ctx: Context) -> None:
    if block.lang == "json":
        try:
            json.loads(block.text)
        except json.JSONDecodeError:
            for n, line in enumerate(block.text.splitlines(), start=1):
                if line.strip():
                    try:
                        json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise AssertionError(f"line {n} of the block is neither JSON nor JSON Lines: {exc}") from exc
    if block.marker and block.marker[0] == "file":
        (ctx.workdir / block.marker[1]).write_text(block.text + "\n", encoding="utf-8")


RUNNERS: dict[str, Callable[[Block, Context], None]] = {
    "sql": run_sql, "python": run_python, "sh": run_sh, "json": run_data, "text": run_data, "mermaid": run_data,
    "": run_data}


# -- what the examples assume ----------------------------------------------------------------

def write_workdir(tmp_path: Path) -> Path:
    """The working directory: handbook/ and questions.jsonl, next to ../shared/datasets/scifact."""
    work = tmp_path / "main"
    (work / "handbook").mkdir(parents=True)
    for name, (_team, _date, text) in HANDBOOK.items():
        (work / "handbook" / name).write_text(text, encoding="utf-8")
    (work / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    beir = tmp_path / "shared" / "datasets" / "scifact"
    (beir / "qrels").mkdir(parents=True)
    (beir / "embeddings" / "stand-in").mkdir(parents=True)
    corpus, queries = SCIFACT_CORPUS, SCIFACT_QUERIES
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n"
                                               for i, t, x in corpus), encoding="utf-8")
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": x}) + "\n" for i, x in queries),
                                        encoding="utf-8")
    for split, judged in SCIFACT_QRELS.items():
        qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in judged)
        (beir / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    np.save(beir / "embeddings" / "stand-in" / "corpus.npy",
            np.array([embed(f"{t} {x}") for _, t, x in corpus], dtype=np.float32))
    np.save(beir / "embeddings" / "stand-in" / "queries.npy",
            np.array([embed(x) for _, x in queries], dtype=np.float32))
    return work


def drop_roles(db: psycopg.Connection[Any], doc: str) -> None:
    """Login roles are the server's, not the database's: the ones a file creates go again."""
    for role in ROLES.get(doc, ()):
        if db.execute("select 1 from pg_roles where rolname = %s", [role]).fetchone():
            db.execute(f'drop owned by "{role}"')
            db.execute(f'drop role "{role}"')


def seed(db: psycopg.Connection[Any], doc: str, work: Path) -> None:
    db.execute(EMBED_SQL)
    drop_roles(db, doc)
    for tenant in SEEDS.get(doc, ()):
        documents = documents_from_folder(work / "handbook", StandInEmbedder())
        for d in documents:
            team, date, _ = HANDBOOK[d.source_uri]
            d.metadata["team"] = team
            d.modified_at = datetime.fromisoformat(date).replace(tzinfo=timezone.utc)
        client = Client(db, tenant=tenant)
        client.create_collection("handbook", embedding_dims=DIMS, description="The company handbook")
        client.upsert_documents("handbook", documents)


@pytest.fixture
def loopback_rerankers(monkeypatch: pytest.MonkeyPatch) -> Iterator[RerankServer]:
    """Every provider's client, built as pgsift builds it, sends its request to a loopback
    server speaking that provider's protocol instead of the provider's host."""
    server = RerankServer(scorer=overlap_scorer, max_requests=10_000, lifetime=900)
    server.start()
    for provider, implementation in list(registry.IMPLEMENTATIONS.items()):
        def build(*args: Any, _impl: Any = implementation, _provider: str = provider, **kwargs: Any) -> Any:
            return _impl(*args, **{**kwargs, "base_url": server.base_url(_provider)})
        monkeypatch.setitem(registry.IMPLEMENTATIONS, provider, build)
    for variable in ("PGSIFT_ACME_VOYAGE", "PGSIFT_VOYAGE_KEY", "PGSIFT_ACME_TEI"):
        monkeypatch.setenv(variable, "loopback-test-key")
    registry.clear_reranker_cache()
    yield server
    registry.clear_reranker_cache()
    server.stop()


def standby(dsn: str) -> str:
    """A hot standby's stand-in: the same database, every transaction read-only."""
    return f"{dsn}&options={quote('-c default_transaction_read_only=on')}"


def close_all(namespace: dict[str, Any]) -> None:
    """Close what the examples opened (the test database is dropped after the test)."""
    for value in namespace.values():
        if isinstance(value, (Client, pgsift.AsyncClient)):
            value = value.source
        if isinstance(value, psycopg.Connection):
            value.close()
        elif type(value).__name__ in ("ConnectionPool",):
            with contextlib.suppress(Exception):
                value.close()


# -- the tests ----------------------------------------------------------------------------

@pytest.mark.parametrize("doc", DOCS)
def test_every_block_runs(doc: str, db: psycopg.Connection[Any], dsn: str, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch, loopback_rerankers: RerankServer) -> None:
    blocks = parse(doc)
    for block in blocks:
        check_marker(block)
    work = write_workdir(tmp_path)
    seed(db, doc, work)
    monkeypatch.chdir(work)
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setattr("pgsift.cli.common.load_embedder", lambda required=False, for_queries=False: StandInEmbedder())
    namespace: dict[str, Any] = {"__name__": "__docs__", "url": dsn, "standby_url": standby(dsn), "embed": embed}
    ctx = Context(db=db, workdir=work, namespace=namespace, output=io.StringIO(), setenv=monkeypatch.setenv)
    try:
        for block in blocks:
            if block.marker and block.marker[0] == "not run":
                continue
            failure = run_block(block, ctx)
            if failure:
                pytest.fail(failure, pytrace=False)
    finally:
        close_all(namespace)
        drop_roles(db, doc)


def run_block(block: Block, ctx: Context) -> str | None:
    """Run one block; on failure, a report that starts with the block's file and line."""
    try:
        RUNNERS[block.lang](block, ctx)
    except Exception as exc:
        frames = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, chain=False)[-8:])
        return (f"{block.where}: the {block.lang} block failed: {type(exc).__name__}: {exc}\n\n"
                f"{block.text}\n\n{frames}\noutput so far:\n{ctx.output.getvalue()[-1500:]}")
    return None


def test_every_doc_is_found_and_has_a_block() -> None:
    assert "docs/errors.md" in DOCS and "docs/trust.md" in DOCS
    for doc in DOCS:
        if doc != "docs/architecture.md":
            assert any(b.lang in RUNNABLE for b in parse(doc)), f"{doc} has no runnable block"


def test_skipped_blocks_say_why_and_are_few() -> None:
    skipped = [b for doc in DOCS for b in parse(doc) if b.marker and b.marker[0] == "not run"]
    for b in skipped:
        assert len(b.marker[1]) >= 10, f"{b.where}: say why the block cannot run"   # type: ignore[index]
    runnable = [b for doc in DOCS for b in parse(doc) if b.lang in RUNNABLE]
    assert len(skipped) * 5 <= len(runnable), [b.where for b in skipped]


def test_the_knob_table_is_sift_knobs(db: psycopg.Connection[Any]) -> None:
    """docs/sql.md's table of knobs is sift.knobs(): every knob, its default, scope and stage."""
    rows = re.findall(r"^\| `(\w+)` \| `(.+?)` \| (\w+) \| (\w+) \|$",
                      (ROOT / "docs/sql.md").read_text(encoding="utf-8"), re.M)
    table = [(name, json.loads(default), scope, stage) for name, default, scope, stage in rows]
    knobs = db.execute("select name, default_value, scope, stage from sift.knobs()").fetchall()
    assert table == [tuple(k) for k in knobs]


def test_the_errors_page_is_the_registry() -> None:
    """docs/errors.md lists every SQLSTATE of errors.SQLSTATES, with its exception and meaning, and
    nothing else; every exception docs/python.md names exists and is a PgsiftError."""
    rows = re.findall(r"^\| `([0-9A-Z]{5})` \| `(\w+)` \| (.+?) \|$",
                      (ROOT / "docs/errors.md").read_text(encoding="utf-8"), re.M)
    table = {code: (cls, meaning) for code, cls, meaning in rows}
    assert len(table) == len(rows), "a code is listed twice"
    assert table == {code: (c.error.__name__, c.meaning) for code, c in errors.SQLSTATES.items()}
    named = re.findall(r"^\| `(\w+)` \|", (ROOT / "docs/python.md").read_text(encoding="utf-8"), re.M)
    assert named, "docs/python.md has no table of exceptions"
    for name in named:
        assert issubclass(getattr(pgsift, name), pgsift.PgsiftError), name
