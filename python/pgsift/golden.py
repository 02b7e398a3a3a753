"""Golden sets: labelled questions for a collection, to measure retrieval against.

A golden set belongs to one collection. Each question either has positives
(the chunks that answer it, graded) or is marked as having no answer in the
collection. A positive keeps its text as well as its chunk id, so after a
re-chunk or a re-ingest (which gives chunks new ids) ``rebind`` finds the
chunk that now holds the text (whitespace aside; where it starts when the new
chunks split it), makes a positive given by its document every chunk the
document has now, and reports every positive it could not bind instead of
guessing.

Everything here runs through the public Client: the SQL functions a psql user
calls too (sift.create_golden_set, sift.add_golden_question,
sift.rebind_golden_set, sift.list_golden_sets, sift.drop_golden_set; see
docs/evaluation.md), inside ``client.transaction()``, so the tenant is the
client's and errors are typed (GoldenSetNotFound, GoldenSetExists, ...).

Sources:

* a simple JSONL file (:func:`read_jsonl`), one question per line::

      {"id": "q1", "question": "How long do refunds take?", "positives": ["Refunds are paid within 14 days."]}
      {"id": "q2", "question": "Who approves refunds?",
       "positives": [{"text": "approved by the finance team", "source_uri": "refunds.md", "grade": 2},
                     {"chunk_id": 17}, {"source_uri": "policy.md"}]}
      {"id": "q3", "question": "What is the CEO's shoe size?", "answerable": false}

  A positive is its text (bound to the chunk that contains it), a chunk id
  (its text is the chunk's), or a source_uri alone (every chunk of that
  document). An optional first line ``{"pgsift_golden_set": {"name": ...,
  "judged_at": ..., "description": ...}}`` carries the set's own settings
  (:func:`export_golden_set` writes it).
* a BEIR folder (:func:`beir_questions`): the split's queries with a relevant
  judgment, each judged document mapped to all of its chunks, with the query
  vectors when the folder has precomputed embeddings. Judgments are about
  documents, so such a set is scored at the document level.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import numpy as np
import psycopg
from psycopg.rows import class_row

from . import calls
from . import queries as q
from .beir import load_beir, read_qrels
from .client import Client
from .errors import DimensionMismatch, GoldenSetExists, GoldenSetNotFound, InvalidArgument
from .models import Chunk, Document
from .vectors import Vec

JUDGED_AT = ("chunk", "document")
HEADER_KEY = "pgsift_golden_set"

__all__ = [
    "HEADER_KEY", "JUDGED_AT", "Binding", "GoldenSet", "GoldenSetExists", "GoldenSetNotFound", "ImportReport",
    "Positive", "Question", "RebindReport", "StoredPositive", "StoredQuestion", "beir_documents",
    "beir_questions", "delete_golden_set", "export_golden_set", "get_golden_set", "import_golden_set",
    "list_golden_sets", "load_questions", "question_from_json", "read_jsonl", "rebind", "write_jsonl",
]


# -- rows ------------------------------------------------------------------------

@dataclass
class Positive:
    """One positive of a question: give its text, a chunk id, or a document's source_uri."""

    text: str | None = None
    chunk_id: int | None = None
    source_uri: str | None = None
    grade: int = 1


@dataclass
class Question:
    """A question to import: its positives, or answerable=False for one the collection cannot answer."""

    key: str
    text: str
    answerable: bool = True
    positives: list[Positive] = field(default_factory=list)
    embedding: Sequence[float] | np.ndarray[Any, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GoldenSet:
    """A stored golden set with its counts (unbound: positives no chunk holds now)."""

    golden_set_id: int
    name: str
    judged_at: str
    source: str | None
    description: str | None
    created_at: datetime
    questions: int
    unanswerable: int
    positives: int
    unbound: int
    without_embedding: int


@dataclass(frozen=True)
class StoredQuestion:
    """A question as stored (what evaluation and calibration read back)."""

    question_id: int
    question_key: str
    question: str
    answerable: bool
    embedding: list[float] | None
    metadata: dict[str, Any]


@dataclass(frozen=True)
class StoredPositive:
    """A positive as stored; source_uri is the document its chunk is in now (as stored when unbound);
    whole_document: one of the rows of a positive given by its document alone (one per chunk)."""

    positive_id: int
    question_id: int
    chunk_id: int | None
    source_uri: str | None
    content: str
    grade: int
    whole_document: bool = False


@dataclass(frozen=True)
class Binding:
    """What rebind did with one positive (status: kept, rebound, moved, ambiguous, not_found)."""

    positive_id: int
    question_key: str
    old_chunk_id: int | None
    chunk_id: int | None
    source_uri: str | None
    status: str


@dataclass(frozen=True)
class RebindReport:
    golden_set: str
    bindings: list[Binding]

    @property
    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(("kept", "rebound", "moved", "ambiguous", "not_found"), 0)
        for b in self.bindings:
            out[b.status] += 1
        return out

    @property
    def unbound(self) -> list[Binding]:
        return [b for b in self.bindings if b.chunk_id is None]


@dataclass(frozen=True)
class ImportReport:
    golden_set: GoldenSet
    rebind: RebindReport
    # (question key, source_uri) of judged documents with no text anywhere (skip_missing)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    # questions left out because every positive of theirs was skipped
    skipped_questions: list[str] = field(default_factory=list)


# -- reading sources -------------------------------------------------------------------

def _positive(raw: Any, where: str) -> Positive:
    if isinstance(raw, str):
        return Positive(text=raw)
    if not isinstance(raw, dict):
        raise InvalidArgument(f"{where}: a positive is a text or an object, got {type(raw).__name__}")
    unknown = set(raw) - {"text", "content", "chunk_id", "source_uri", "grade"}
    if unknown:
        raise InvalidArgument(f"{where}: unknown positive field(s) {', '.join(sorted(unknown))}")
    grade = raw.get("grade", 1)
    if not isinstance(grade, int) or isinstance(grade, bool) or grade < 1:
        raise InvalidArgument(f"{where}: grade must be an integer >= 1, got {grade!r}")
    chunk_id = raw.get("chunk_id")
    if chunk_id is not None and (not isinstance(chunk_id, int) or isinstance(chunk_id, bool)):
        raise InvalidArgument(f"{where}: chunk_id must be an integer, got {chunk_id!r}")
    return Positive(text=raw.get("text", raw.get("content")), chunk_id=chunk_id,
                    source_uri=raw.get("source_uri"), grade=grade)


def question_from_json(row: Mapping[str, Any], default_key: str, where: str) -> Question:
    """One JSONL line as a Question (see the module docstring for the fields)."""
    unknown = set(row) - {"id", "_id", "question", "text", "answerable", "positives", "embedding",
                          "metadata"}
    if unknown:
        raise InvalidArgument(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    text = row.get("question", row.get("text"))
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f'{where}: "question" must be a non-empty text')
    raw_positives = row.get("positives") or []
    if not isinstance(raw_positives, list):
        raise InvalidArgument(f'{where}: "positives" must be a list')
    answerable = row.get("answerable", True)
    if not isinstance(answerable, bool):
        raise InvalidArgument(f'{where}: "answerable" must be true or false')
    metadata = row.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidArgument(f'{where}: "metadata" must be an object')
    key = row.get("id", row.get("_id", default_key))
    return Question(key=str(key), text=text, answerable=answerable, metadata=metadata,
                    positives=[_positive(p, where) for p in raw_positives],
                    embedding=row.get("embedding"))


def _json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, parsed object) for each non-blank line of a JSONL file."""
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                yield where, json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:   # (Python's parser recurses once a level)
                raise InvalidArgument(f"{where}: not JSON or nested too deep ({exc})") from exc


def read_jsonl(path: Path | str) -> tuple[dict[str, Any], list[Question]]:
    """A golden-set JSONL file: (the optional header's settings, the questions)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidArgument(f"{path} does not exist")
    header: dict[str, Any] = {}
    questions: list[Question] = []
    for where, row in _json_lines(path):
        if not isinstance(row, dict):
            raise InvalidArgument(f"{where}: each line must be a JSON object")
        if HEADER_KEY in row:
            if questions or header:
                raise InvalidArgument(f"{where}: the {HEADER_KEY} header must be the first line")
            header = dict(row[HEADER_KEY] or {})
            continue
        questions.append(question_from_json(row, str(len(questions) + 1), where))
    return header, questions


def beir_questions(dataset: Path | str, *, split: str = "test", model: str | None = None
                   ) -> tuple[list[Question], dict[str, str], str]:
    """The questions of a BEIR folder's split: (questions, fallback text per judged
    corpus id, a description of the source).

    Only queries with a judgment > 0 are kept (as pgsift.bench does). Each positive
    names its corpus document (source_uri = corpus ``_id``), graded by the qrels
    score; importing expands it to every chunk of that document. The query vectors
    come along when the folder has ``embeddings/<model>/``; without that folder the
    questions are imported without vectors (the evaluating client embeds them).
    """
    dataset = Path(dataset)
    vectors: Sequence[Any]
    if (dataset / "embeddings").is_dir():
        data = load_beir(dataset, model, split=split)
        keys, texts, qrels = data.query_ids, data.query_texts, data.qrels
        vectors = list(data.query_embeddings)
        corpus = {doc_id: _beir_chunk_text(data.titles[i], data.texts[i])
                  for i, doc_id in enumerate(data.doc_ids)}
        source = f"beir {data.name} split={split} model={data.model}"
    else:
        needed = [dataset / "corpus.jsonl", dataset / "queries.jsonl", dataset / "qrels" / f"{split}.tsv"]
        missing = [str(p.relative_to(dataset)) for p in needed if not p.is_file()]
        if not dataset.is_dir() or missing:
            raise InvalidArgument(f"{dataset} is not a BEIR folder: missing {', '.join(missing) or 'it all'}")
        all_qrels = read_qrels(needed[2])
        qrels = {qid: judged for qid, judged in all_qrels.items() if any(s > 0 for s in judged.values())}
        rows = [r for _where, r in _json_lines(needed[1]) if str(r["_id"]) in qrels]
        keys, texts = [str(r["_id"]) for r in rows], [r.get("text") or "" for r in rows]
        vectors = [None] * len(keys)
        corpus = {str(r["_id"]): _beir_chunk_text(r.get("title") or "", r.get("text") or "")
                  for _where, r in _json_lines(needed[0])}
        source = f"beir {dataset.resolve().name} split={split} (no query vectors)"
    questions = []
    for key, text, vec in zip(keys, texts, vectors, strict=True):
        positives = [Positive(source_uri=doc_id, grade=score)
                     for doc_id, score in sorted(qrels[key].items()) if score > 0]
        questions.append(Question(key=key, text=text, positives=positives, embedding=vec))
    judged = {p.source_uri for question in questions for p in question.positives if p.source_uri}
    return questions, {doc_id: corpus[doc_id] for doc_id in judged if doc_id in corpus}, source


def _beir_chunk_text(title: str, text: str) -> str:
    # As pgsift.bench ingests it: the text, or the title when the text is blank.
    return text if text.strip() else title


def beir_documents(dataset: Path | str, *, model: str | None = None) -> Iterator[Document]:
    """A BEIR corpus as pgsift Documents, the way pgsift.bench ingests it: one document per
    corpus entry (source_uri = ``_id``), one chunk (its text) with the precomputed vector."""
    data = load_beir(Path(dataset), model)
    for i, doc_id in enumerate(data.doc_ids):
        yield Document(source_uri=doc_id, title=data.titles[i] or None,
                       chunks=[Chunk(content=_beir_chunk_text(data.titles[i], data.texts[i]),
                                     embedding=data.doc_embeddings[i])])


# -- sets ---------------------------------------------------------------------------

def list_golden_sets(client: Client, collection: str) -> list[GoldenSet]:
    """The collection's golden sets with their counts (sift.list_golden_sets)."""
    with client.transaction() as conn:
        cur = conn.cursor(row_factory=class_row(GoldenSet))
        return cur.execute(q.GOLDEN_SETS, {"collection": collection}, prepare=False).fetchall()


def get_golden_set(client: Client, collection: str, name: str | None = None) -> GoldenSet:
    """The named set; without a name, the collection's only one."""
    if name is not None:
        with client.transaction() as conn:
            cur = conn.cursor(row_factory=class_row(GoldenSet))
            found = cur.execute(q.GOLDEN_SET, {"collection": collection, "name": name}, prepare=False).fetchone()
        if found is None:
            raise GoldenSetNotFound(f'unknown golden set "{name}" in collection "{collection}"')
        return found
    sets = list_golden_sets(client, collection)
    if not sets:
        raise GoldenSetNotFound(f'collection "{collection}" has no golden set '
                                "(import one with `pgsift golden import`)")
    if len(sets) > 1:
        raise InvalidArgument(f'collection "{collection}" has {len(sets)} golden sets '
                              f"({', '.join(s.name for s in sets)}): name one")
    return sets[0]


def delete_golden_set(client: Client, collection: str, name: str) -> bool:
    """Delete a golden set with its questions (sift.drop_golden_set); its evaluation runs stay
    in the history."""
    with client.transaction() as conn:
        row = conn.execute(q.DROP_GOLDEN_SET, {"collection": collection, "name": name}, prepare=False).fetchone()
    return bool(row and row[0])


def load_questions(client: Client, gs: GoldenSet) -> tuple[list[StoredQuestion], dict[int, list[StoredPositive]]]:
    """A stored set's questions (in import order) and each question's positives, by question_id."""
    with client.transaction() as conn:
        questions = conn.cursor(row_factory=class_row(StoredQuestion)).execute(
            q.QUESTIONS, {"golden_set_id": gs.golden_set_id}, prepare=False).fetchall()
        positives: dict[int, list[StoredPositive]] = {}
        for row in conn.cursor(row_factory=class_row(StoredPositive)).execute(
                q.POSITIVES, {"golden_set_id": gs.golden_set_id}, prepare=False):
            positives.setdefault(row.question_id, []).append(row)
    return questions, positives


def _vector(embedding: Any, dims: int, where: str) -> list[float] | None:
    if embedding is None:
        return None
    try:
        arr = np.asarray(embedding, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{where}: the embedding must be a list of numbers") from exc
    if arr.ndim != 1 or not np.all(np.isfinite(arr)):
        raise InvalidArgument(f"{where}: the embedding must be a flat list of finite numbers")
    if arr.size != dims:
        raise DimensionMismatch(f"{where}: the embedding has {arr.size} dimensions; "
                                f"the collection expects {dims}", got=int(arr.size), expected=dims)
    return [float(x) for x in arr]


def _validate(questions: list[Question]) -> None:
    seen: set[str] = set()
    for question in questions:
        where = f"question {question.key!r}"
        if not str(question.key).strip():
            raise InvalidArgument("a question has a blank id")
        if question.key in seen:
            raise InvalidArgument(f"{where} appears twice")
        seen.add(question.key)
        if not isinstance(question.text, str) or not question.text.strip():
            raise InvalidArgument(f"{where} has no text")
        if question.answerable and not question.positives:
            raise InvalidArgument(f"{where} has no positive: give one, or mark it as having no "
                                  'answer in the collection ("answerable": false)')
        if not question.answerable and question.positives:
            raise InvalidArgument(f"{where} is marked as having no answer but has positives")
        for p in question.positives:
            if p.chunk_id is None and not p.source_uri and not (p.text and p.text.strip()):
                raise InvalidArgument(f"{where}: a positive needs a text, a chunk_id or a source_uri")
            if not isinstance(p.grade, int) or isinstance(p.grade, bool) or p.grade < 1:
                raise InvalidArgument(f"{where}: grade must be an integer >= 1, got {p.grade!r}")


def _positives_json(question: Question, fallback_text: Mapping[str, str]) -> list[dict[str, Any]]:
    """A question's positives as sift.add_golden_question takes them; a document given alone
    carries its fallback text, which stores it unbound when the collection lacks the document."""
    out = []
    for p in question.positives:
        row: dict[str, Any] = {"text": p.text, "chunk_id": p.chunk_id, "source_uri": p.source_uri,
                               "grade": p.grade}
        if p.chunk_id is None and not (p.text and p.text.strip()) and p.source_uri in fallback_text:
            row["fallback_text"] = fallback_text[str(p.source_uri)]
        out.append({k: v for k, v in row.items() if v is not None})
    return out


def import_golden_set(client: Client, collection: str, name: str, questions: Iterable[Question], *,
                      judged_at: str = "chunk", source: str | None = None,
                      description: str | None = None, replace: bool = False,
                      fallback_text: Mapping[str, str] | None = None,
                      skip_missing: bool = False) -> ImportReport:
    """Store questions as golden set ``name`` of the collection, in one transaction
    (sift.create_golden_set, then sift.add_golden_question for each question).

    Positives given by text are bound to the chunk that holds it (as
    :func:`rebind` does); the report lists those that could not be bound. A
    document given by source_uri alone that is not in the collection is refused,
    unless ``fallback_text`` has its text (then it is stored unbound and reported), or
    ``skip_missing`` is set (then it is left out and reported in ``skipped``; a
    question left without any positive is left out too). ``replace`` deletes an
    existing set of that name first (its run history stays).
    """
    questions = list(questions)
    if judged_at not in JUDGED_AT:
        raise InvalidArgument(f"judged_at must be one of {', '.join(JUDGED_AT)}, got {judged_at!r}")
    if not name or not name.strip():
        raise InvalidArgument("a golden set needs a name")
    _validate(questions)
    dims = client.get_collection(collection).embedding_dims
    vectors = [_vector(qu.embedding, dims, f"question {qu.key!r}") for qu in questions]
    params = {"collection": collection, "name": name}
    rows = [{**params, "question_key": qu.key, "question": qu.text, "answerable": qu.answerable,
             "positives": calls.json_arg(_positives_json(qu, fallback_text or {}),
                                         f"the positives of question {qu.key!r}"),
             "embedding": None if vector is None else Vec(vector, f"the embedding of question {qu.key!r}"),
             "metadata": calls.json_arg(dict(qu.metadata or {}), f"the metadata of question {qu.key!r}"),
             "skip_missing": skip_missing}
            for qu, vector in zip(questions, vectors, strict=True)]
    skipped: list[tuple[str, str]] = []
    left_out: list[str] = []
    with client.transaction() as conn:
        conn.execute(q.CREATE_GOLDEN_SET, {**params, "judged_at": judged_at, "source": source,
                                           "description": description, "replace": replace}, prepare=False)
        # One round trip (pipelined), never a server-side prepared statement (transaction poolers).
        cursors = [conn.cursor() for _ in rows]
        with conn.pipeline():
            for cur, row in zip(cursors, rows, strict=True):
                cur.execute(q.ADD_GOLDEN_QUESTION, row, prepare=False)
        for question, cur in zip(questions, cursors, strict=True):
            question_id, _added, missing = cur.fetchone() or (None, 0, [])
            skipped += [(question.key, uri) for uri in missing]
            if question_id is None:
                left_out.append(question.key)
        if len(left_out) == len(questions):
            raise InvalidArgument("no question is left to import (none of their documents is known)")
        bindings = _rebind(conn, params)
    return ImportReport(golden_set=get_golden_set(client, collection, name),
                        rebind=RebindReport(golden_set=name, bindings=bindings), skipped=skipped,
                        skipped_questions=left_out)


def _rebind(conn: psycopg.Connection[Any], params: dict[str, Any]) -> list[Binding]:
    return conn.cursor(row_factory=class_row(Binding)).execute(q.REBIND, params, prepare=False).fetchall()


def rebind(client: Client, collection: str, name: str | None = None) -> RebindReport:
    """Bind every positive of the set to the chunk that holds its text now, whatever the
    chunking (sift.rebind_golden_set): compared whitespace aside, split text bound to the
    chunk it starts in, a positive given by its document alone made every chunk the
    document has now. Positives whose text is gone, or that several documents hold, are
    left unbound and listed in the report."""
    name = get_golden_set(client, collection, name).name
    with client.transaction() as conn:
        bindings = _rebind(conn, {"collection": collection, "name": name})
    return RebindReport(golden_set=name, bindings=bindings)


# -- export -------------------------------------------------------------------------

def export_golden_set(client: Client, collection: str, name: str | None = None, *,
                      with_embeddings: bool = False) -> Iterator[dict[str, Any]]:
    """The set as JSONL-ready objects: the header, then one per question (read_jsonl reads
    them back; positives carry chunk_id, source_uri, text and grade)."""
    gs = get_golden_set(client, collection, name)
    questions, positives = load_questions(client, gs)
    yield {HEADER_KEY: {"name": gs.name, "judged_at": gs.judged_at, "source": gs.source,
                        "description": gs.description}}
    for qu in questions:
        line: dict[str, Any] = {"id": qu.question_key, "question": qu.question, "answerable": qu.answerable}
        if qu.answerable:
            line["positives"] = _exported(positives.get(qu.question_id, []))
        if qu.metadata:
            line["metadata"] = qu.metadata
        if with_embeddings and qu.embedding is not None:
            line["embedding"] = [float(x) for x in qu.embedding]
        yield line


def _exported(positives: list[StoredPositive]) -> list[dict[str, Any]]:
    """A question's positives as JSONL objects. A document given alone is written once, by its
    source_uri, while it is in the collection (imported again, it is its chunks then); else, and
    for the others, each row's text, chunk id, source_uri and grade."""
    bound = {p.source_uri for p in positives if p.whole_document and p.chunk_id is not None}
    documents: dict[str | None, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for p in positives:
        if p.whole_document and p.source_uri in bound:
            if p.source_uri not in documents:
                documents[p.source_uri] = {"source_uri": p.source_uri, "grade": p.grade}
                out.append(documents[p.source_uri])
            documents[p.source_uri]["grade"] = max(documents[p.source_uri]["grade"], p.grade)
            continue
        out.append({"text": p.content, "chunk_id": p.chunk_id, "source_uri": p.source_uri, "grade": p.grade})
    return out


def write_jsonl(lines: Iterable[Mapping[str, Any]], out: IO[str]) -> int:
    n = 0
    for line in lines:
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
        n += 1
    return n
