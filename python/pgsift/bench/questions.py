"""Questions as part of the index: `pgsift bench questions --dataset ../shared/datasets/xquad-r-multi`.

No language model runs here, so human questions stand in for model-written ones (issue 13
calls this an upper bound; note the asked questions are other questions about the
paragraph, not paraphrases of the indexed ones): on the English part of XQuAD-R (240 paragraphs, 1,190
questions) each paragraph's questions (in id order) are split in two; the first half is
indexed as the chunk's questions through `Client.enrich_documents` (an enricher that
returns them), and the second half is asked. Every text, paragraphs, indexed questions and
asked questions, is embedded here with the local all-MiniLM-L6-v2 (English only), so the
four collections differ only by the policy: off (no questions), embedding (in the chunk's
vector), vectors (a vector each) and both. The lexical leg sees the questions in every
policy but off. Reported: hybrid and dense-only nDCG@10 and recall@10 over the asked half,
and what each collection stores (its chunks' rows and its question vectors).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg

from .. import metrics
from ..beir import read_jsonl
from ..client import Client
from ..enrich import Enrichment
from ..errors import CollectionNotFound
from ..models import Chunk, Document, embedding_text

POLICIES = ("off", "embedding", "vectors", "both")


class HumanQuestions:
    """An enricher that writes nothing: it returns each paragraph's indexed half."""

    model = "xquad-human-questions"

    def __init__(self, questions: dict[str, list[str]]):
        self.questions = questions

    def enrich(self, document: str, chunk: str, *, context: bool, questions: int) -> Enrichment:
        return Enrichment(None, self.questions.get(chunk, [])[:questions], input_tokens=1, output_tokens=1)


def _load(dataset: Path) -> tuple[list[dict[str, Any]], dict[str, list[tuple[str, str]]]]:
    paragraphs = [r for r in read_jsonl(dataset / "corpus.jsonl") if str(r["_id"]).startswith("en/")]
    text = {str(r["_id"]): r["text"] for r in read_jsonl(dataset / "queries.jsonl") if str(r["_id"]).startswith("en/")}
    asked: dict[str, list[tuple[str, str]]] = defaultdict(list)
    with open(dataset / "qrels" / "test.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, pid, grade = line.rstrip("\n").split("\t")
            if qid.startswith("en/") and pid.startswith("en/") and int(grade) == 2 and qid in text:
                asked[pid].append((qid, text[qid]))
    return paragraphs, {p: sorted(qs) for p, qs in asked.items()}


def _stored_bytes(conn: psycopg.Connection[Any], collection: str) -> int:
    row = conn.execute(
        "select coalesce((select sum(pg_catalog.pg_column_size(k.*)) from sift.chunks k "
        "where k.collection_id = c.collection_id), 0)"
        " + coalesce((select sum(pg_catalog.pg_column_size(v.*)) from sift.question_vectors v "
        "where v.collection_id = c.collection_id), 0) from sift.collections c where c.name = %s",
        [collection]).fetchone()
    return int(row[0]) if row else 0


def run_questions(conn: psycopg.Connection[Any], dataset: Path, *, embedder: Any = None,
                  keep: bool = False) -> dict[str, Any]:
    if embedder is None:
        from ..embed import LocalEmbedder
        embedder = LocalEmbedder()
    paragraphs, by_paragraph = _load(dataset)
    indexed: dict[str, list[str]] = {}
    asked: list[tuple[str, str]] = []   # (question, its paragraph's id)
    for p in paragraphs:
        qs = [t for _, t in by_paragraph.get(str(p["_id"]), [])]
        half = len(qs) // 2
        indexed[p["text"]] = qs[:half][:5]   # at most 5 a chunk; the rest of the half is not asked either
        asked += [(t, str(p["_id"])) for t in qs[half:]]
    asked_vectors = embedder.embed([t for t, _ in asked])
    client = Client(conn, embedder=embedder, refresh_backlog=1)   # settled statistics before the searches
    # Fewer questions than asked for is this benchmark's design, not a warning worth a line each.
    quiet = logging.getLogger("pgsift.enrich")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        rows = []
        for policy in POLICIES:
            name = f"bench_questions_{policy}"
            try:
                client.drop_collection(name)
            except CollectionNotFound:
                pass
            client.create_collection(name, embedding_dims=int(asked_vectors.shape[1]))
            docs = [Document(source_uri=str(p["_id"]), title=p.get("title") or None,
                             chunks=[Chunk(content=p["text"], embedding=None,
                                           context=(p.get("title") or "").replace("_", " ") or None)])
                    for p in paragraphs]
            started = time.perf_counter()
            if policy == "off":
                for doc in docs:
                    for c in doc.chunks:
                        c.embedding = embedder.embed([embedding_text(c.context, c.content)])[0]
            else:
                docs = client.enrich_documents(name, docs, HumanQuestions(indexed), context=False, questions=5,
                                               questions_as=policy)
                runs = [d.enrichment_run for d in docs if d.enrichment_run is not None]
                # Every paragraph with questions got them (one without has nothing to index: a failure).
                assert sum(r.enriched for r in runs) == sum(1 for qs in indexed.values() if qs), "enrichment missed"
            client.upsert_documents(name, docs)
            load_s = time.perf_counter() - started
            uri = dict(conn.execute("select k.chunk_id, d.source_uri from sift.chunks k join sift.documents d "
                                    "using (document_id) where k.collection_id = (select collection_id from "
                                    "sift.collections where name = %s)", [name]).fetchall())
            scores: dict[str, list[float]] = defaultdict(list)
            for (question, pid), vector in zip(asked, asked_vectors, strict=True):
                for mode in ("hybrid", "dense"):
                    hits = client.search(name, question, embedding=vector, top_k=10, hybrid=mode == "hybrid")
                    ranked = [uri[h.chunk_id] for h in hits]
                    scores[f"{mode}_ndcg"].append(metrics.ndcg_at_k(ranked, {pid: 1}, 10))
                    scores[f"{mode}_recall"].append(metrics.recall_at_k(ranked, {pid: 1}, 10))
            question_vectors = conn.execute("select count(*) from sift.question_vectors v join sift.collections c "
                                            "using (collection_id) where c.name = %s", [name]).fetchone()
            rows.append({"policy": policy, **{k: round(statistics.fmean(v), 4) for k, v in scores.items()},
                         "stored_kib": round(_stored_bytes(conn, name) / 1024, 1), "load_s": round(load_s, 1),
                         "question_vectors": int(question_vectors[0]) if question_vectors else 0})
            if not keep:
                client.drop_collection(name)
    finally:
        quiet.setLevel(level)
    return {"paragraphs": len(paragraphs), "indexed_questions": sum(len(v) for v in indexed.values()),
            "asked_questions": len(asked), "rows": rows}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"xquad-r-multi, English: {result['paragraphs']} paragraphs, {result['indexed_questions']} human "
             f"questions indexed as the chunks' questions, {result['asked_questions']} others asked "
             "(human questions standing in for model-written ones); all-MiniLM-L6-v2",
             f"{'policy':<10} {'hybrid nDCG@10':>15} {'recall@10':>10} {'dense nDCG@10':>14} {'recall@10':>10} "
             f"{'stored KiB':>11}"]
    for r in result["rows"]:
        lines.append(f"{r['policy']:<10} {r['hybrid_ndcg']:>15.4f} {r['hybrid_recall']:>10.4f} "
                     f"{r['dense_ndcg']:>14.4f} {r['dense_recall']:>10.4f} {r['stored_kib']:>11.1f}")
    return "\n".join(lines)
