"""BEIR datasets read from their path (corpus, queries, qrels, precomputed embeddings): what
the benchmarks and golden-set imports (pgsift.golden) both read, kept apart from both.

Layout read by :func:`load_beir`::

    DIR/corpus.jsonl                       {"_id", "title", "text"} per line
    DIR/queries.jsonl                      {"_id", "text"} per line
    DIR/qrels/test.tsv                     header line, then query-id, corpus-id, score
    DIR/embeddings/<model>/corpus.npy      row i = line i of corpus.jsonl
    DIR/embeddings/<model>/queries.npy     row i = line i of queries.jsonl
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import metrics
from .errors import InvalidArgument
from .models import Chunk, Document

log = logging.getLogger(__name__)


@dataclass
class BeirDataset:
    """A BEIR folder in memory: corpus, the test queries that have qrels, their embeddings."""

    name: str
    path: Path
    model: str
    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    doc_embeddings: np.ndarray          # [n_docs, dims], row i = doc_ids[i]
    query_ids: list[str]                # test queries with at least one relevant judgment
    query_texts: list[str]
    query_embeddings: np.ndarray        # [n_queries, dims], row i = query_ids[i]
    qrels: dict[str, dict[str, int]]    # query id -> {corpus id: relevance}, test split
    languages: list[str | None] | None = None   # per document: metadata.language, when the corpus has it

    @property
    def dims(self) -> int:
        return int(self.doc_embeddings.shape[1])

    def __len__(self) -> int:
        return len(self.doc_ids)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSONL file (BEIR's corpus and queries), a bad line named."""
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InvalidArgument(f"{path}:{line_no}: not JSON ({exc})") from exc


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3 or not line.strip():
                continue
            try:
                score = int(float(fields[2]))
            except ValueError:
                if line_no == 1:   # the header line: query-id, corpus-id, score
                    continue
                raise InvalidArgument(f"{path}:{line_no}: score {fields[2]!r} is not a number") from None
            qrels.setdefault(fields[0], {})[fields[1]] = score
    return qrels


def _pick_model(dataset: Path, model: str | None) -> str:
    root = dataset / "embeddings"
    if model is not None:
        if not (root / model).is_dir():
            have = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
            raise InvalidArgument(f"no embeddings for model {model!r} under {root} "
                                  f"(have: {', '.join(have) or 'none'})")
        return model
    found = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if not found:
        raise InvalidArgument(f"no embeddings/<model>/ folder under {dataset}")
    if len(found) > 1:
        log.info("several embedding models under %s (%s); using %s", root, ", ".join(found), found[0])
    return found[0]


def load_beir(dataset: Path, model: str | None = None, split: str = "test") -> BeirDataset:
    """Read a BEIR-layout folder (see the module docstring) with precomputed embeddings.

    ``model`` names the folder under embeddings/ (None: the only one, or the first by
    name). Only queries of the split's qrels that have a relevant judgment (score > 0)
    are kept, in queries.jsonl order.
    """
    dataset = Path(dataset)
    if not dataset.is_dir():
        raise InvalidArgument(f"dataset folder {dataset} does not exist")
    model = _pick_model(dataset, model)
    emb_dir = dataset / "embeddings" / model
    needed = [dataset / "corpus.jsonl", dataset / "queries.jsonl", dataset / "qrels" / f"{split}.tsv",
              emb_dir / "corpus.npy", emb_dir / "queries.npy"]
    missing_files = [str(p.relative_to(dataset)) for p in needed if not p.is_file()]
    if missing_files:
        raise InvalidArgument(f"{dataset} is not a BEIR folder: missing {', '.join(missing_files)}")

    doc_ids, titles, texts, languages = [], [], [], []
    for row in read_jsonl(dataset / "corpus.jsonl"):
        doc_ids.append(str(row["_id"]))
        titles.append(row.get("title") or "")
        texts.append(row.get("text") or "")
        languages.append((row.get("metadata") or {}).get("language"))
    doc_emb = np.load(emb_dir / "corpus.npy", mmap_mode="r")
    if doc_emb.ndim != 2 or doc_emb.shape[0] != len(doc_ids):
        raise InvalidArgument(f"{emb_dir / 'corpus.npy'} has shape {doc_emb.shape}; "
                         f"corpus.jsonl has {len(doc_ids)} documents")

    all_qrels = read_qrels(dataset / "qrels" / f"{split}.tsv")
    qrels = {q: judged for q, judged in all_qrels.items() if metrics.relevant(judged)}

    query_rows = list(read_jsonl(dataset / "queries.jsonl"))
    q_emb = np.load(emb_dir / "queries.npy", mmap_mode="r")
    if q_emb.ndim != 2 or q_emb.shape[0] != len(query_rows):
        raise InvalidArgument(f"{emb_dir / 'queries.npy'} has shape {q_emb.shape}; "
                         f"queries.jsonl has {len(query_rows)} queries")
    if q_emb.shape[1] != doc_emb.shape[1]:
        raise InvalidArgument(f"query embeddings have {q_emb.shape[1]} dimensions, "
                         f"corpus embeddings {doc_emb.shape[1]}")
    keep = [i for i, row in enumerate(query_rows) if str(row["_id"]) in qrels]
    missing = set(qrels) - {str(query_rows[i]["_id"]) for i in keep}
    if missing:
        raise InvalidArgument(f"{len(missing)} query id(s) in qrels/{split}.tsv are not in queries.jsonl, "
                         f"e.g. {sorted(missing)[:3]}")

    return BeirDataset(
        name=dataset.resolve().name, path=dataset, model=model,
        doc_ids=doc_ids, titles=titles, texts=texts,
        doc_embeddings=np.asarray(doc_emb, dtype=np.float32),
        query_ids=[str(query_rows[i]["_id"]) for i in keep],
        query_texts=[query_rows[i].get("text") or "" for i in keep],
        query_embeddings=np.asarray(q_emb[keep], dtype=np.float32),
        qrels={str(query_rows[i]["_id"]): qrels[str(query_rows[i]["_id"])] for i in keep},
        languages=languages if any(languages) else None,
    )


def corpus_documents(data: BeirDataset, start: int, stop: int) -> list[Document]:
    """Corpus entries start..stop as Documents: one document and one chunk per entry."""
    docs = []
    for i in range(start, stop):
        # Chunk text may not be blank (the client refuses it): fall back to the title.
        content = data.texts[i] if data.texts[i].strip() else data.titles[i]
        docs.append(Document(source_uri=data.doc_ids[i], title=data.titles[i] or None,
                             language=data.languages[i] if data.languages else None,
                             chunks=[Chunk(content=content, embedding=data.doc_embeddings[i])]))
    return docs
