"""Languages benchmark: `pgsift bench languages --dataset ../shared/datasets/xquad-r-multi`.

XQuAD-R: 240 paragraphs, each in 11 languages, and every question in the 11 languages;
1,000 questions sampled as the dataset's README does (`np.random.default_rng(0).choice(
13090, 1000, replace=False)`; `--seed` draws another sample, 0 by default), with the
dataset's multilingual-e5-small vectors. Each paragraph is one document with its language
(metadata.language) and its source_uri (/<lang>/<title>/<paragraph id>: translations differ
only by the leading locale segment).

Modes, all through `Client.search` (top 10):

* dense, lexical, hybrid: the legs as they are, no language-aware ranking
  (one_translation off, no query_language);
* hybrid + language: query_language given (the question's), one_translation and
  other_language_weight at their defaults;
* the same two over one collection per language (11 here) searched together.

Metrics per mode: graded nDCG@10 (gain 2^rel - 1, as the dataset README; the answering
paragraph in the question's language is 2, its translations 1), page-level nDCG@10
(translations collapsed to their paragraph, the answering one relevant), answer nDCG@10
(only the answering paragraph in the question's language relevant), duplicates per
top 10 (hits whose paragraph is already listed above them), the share of first hits in
the question's language, and p50 ms. The lexical leg alone (parsed in the question's
language, no language-aware ranking) per language: graded nDCG@10, and answer nDCG@10 (the
answering paragraph in the question's language the only relevant one: a leg that cannot
read other scripts cannot find a translation, so graded nDCG has a ceiling near 0.46 for
it).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from .. import metrics
from ..beir import _pick_model, read_jsonl, read_qrels
from ..client import Client
from ..errors import CollectionNotFound, InvalidArgument
from ..models import Chunk, Document, Hit

TOP_K = 10
SAMPLE = 1000
PLAIN = {"one_translation": False}


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    language: str
    embedding: Any
    qrels: dict[str, int]      # corpus id -> grade


def sample_indices(n: int, sample: int, seed: int = 0) -> list[int]:
    """Which of n questions a run asks: `sample` of them (all when fewer), drawn without
    replacement by numpy's default generator seeded with `seed`; seed 0 is the dataset README's
    sample, the one bench/README reports on."""
    return [int(i) for i in np.random.default_rng(seed).choice(n, min(sample, n), replace=False)]


def load(dataset: Path, sample: int = SAMPLE, seed: int = 0) -> tuple[list[dict[str, Any]], Any, list[Question]]:
    model = _pick_model(dataset, None)
    corpus = list(read_jsonl(dataset / "corpus.jsonl"))
    doc_emb = np.load(dataset / "embeddings" / model / "corpus.npy")
    rows = list(read_jsonl(dataset / "queries.jsonl"))
    q_emb = np.load(dataset / "embeddings" / model / "queries.npy")
    if q_emb.shape[0] != len(rows) or doc_emb.shape[0] != len(corpus):
        raise InvalidArgument(f"{dataset}: the embeddings do not have one row per corpus line and question")
    if not all("language" in (row.get("metadata") or {}) and "source_uri" in row["metadata"] for row in corpus):
        raise InvalidArgument(f"{dataset} is not the xquad-r-multi layout (metadata.language and source_uri)")
    qrels = read_qrels(dataset / "qrels" / "test.tsv")
    # Seed 0: the dataset README's sample, 1,000 of the 13,090 lines.
    picked = sample_indices(len(rows), sample, seed)
    questions = [Question(str(rows[i]["_id"]), rows[i]["text"], rows[i]["metadata"]["language"], q_emb[i],
                          qrels.get(str(rows[i]["_id"]), {})) for i in picked]
    return corpus, doc_emb, questions


def documents(corpus: list[dict[str, Any]], doc_emb: Any, language: str | None = None) -> list[Document]:
    return [Document(source_uri=row["metadata"]["source_uri"], title=row.get("title") or None,
                     language=row["metadata"]["language"], metadata={"id": row["_id"]},
                     chunks=[Chunk(content=row["text"].strip() or row["title"], embedding=doc_emb[i])])
            for i, row in enumerate(corpus) if language is None or row["metadata"]["language"] == language]


def _ndcg(gains: list[float], ideal: list[float]) -> float:
    """nDCG@10 of gains already mapped (2^rel - 1 here), with pgsift.metrics' discount."""
    idcg = metrics.dcg(sorted(ideal, reverse=True)[:TOP_K])
    return metrics.dcg(gains[:TOP_K]) / idcg if idcg else 0.0


def _scores(hits: list[Hit], question: Question, corpus_id: dict[str, str]) -> dict[str, float]:
    ids = [corpus_id[h.source_uri] for h in hits]
    graded = _ndcg([2.0 ** question.qrels.get(i, 0) - 1 for i in ids],
                   [2.0 ** g - 1 for g in question.qrels.values()])
    answer = {i.split("/", 1)[1] for i, g in question.qrels.items() if g == 2}
    pages: list[str] = []
    duplicates = 0
    for i in ids:
        page = i.split("/", 1)[1]
        if page in pages:
            duplicates += 1
        else:
            pages.append(page)
    page_ndcg = _ndcg([1.0 if p in answer else 0.0 for p in pages], [1.0] * len(answer))
    first = bool(hits) and hits[0].language == question.language
    own = _ndcg([1.0 if question.qrels.get(i) == 2 else 0.0 for i in ids], [1.0])
    return {"ndcg@10": graded, "page_ndcg@10": page_ndcg, "duplicates": duplicates, "first_in_language": first,
            "answer_ndcg@10": own}


def _run(client: Client, collections: list[str], questions: list[Question], corpus_id: dict[str, str],
         mode: str) -> tuple[dict[str, float], dict[str, list[tuple[float, float]]]]:
    sums: dict[str, float] = defaultdict(float)
    per_language: dict[str, list[tuple[float, float]]] = defaultdict(list)
    ms = []
    for q in questions:
        knobs: dict[str, Any]
        if mode == "dense":
            args: dict[str, Any] = {"embedding": q.embedding}
            knobs = {**PLAIN, "hybrid": False}
        elif mode == "lexical":
            args, knobs = {}, {**PLAIN, "query_language": q.language, "other_language_weight": None}
        elif mode == "hybrid":
            args, knobs = {"embedding": q.embedding}, dict(PLAIN)
        else:
            args, knobs = {"embedding": q.embedding}, {"query_language": q.language}
        started = time.perf_counter()
        hits = sorted(client.search(collections, q.text, top_k=TOP_K, **args, **knobs).hits,
                      key=lambda h: (h.rank, h.chunk_id))
        ms.append((time.perf_counter() - started) * 1000)
        scored = _scores(hits, q, corpus_id)
        for key, value in scored.items():
            sums[key] += float(value)
        per_language[q.language].append((scored["ndcg@10"], scored["answer_ndcg@10"]))
    n = len(questions)
    out = {k: round(v / n, 4) for k, v in sums.items()}
    out["p50_ms"] = round(statistics.median(ms), 2)
    return out, per_language


def _load(client: Client, name: str, docs: list[Document]) -> None:
    try:
        client.drop_collection(name)
    except CollectionNotFound:
        pass
    client.create_collection(name, embedding_dims=len(docs[0].chunks[0].embedding))   # type: ignore[arg-type]
    client.upsert_documents(name, docs)


def run_languages(conn: psycopg.Connection[Any], dataset: Path, *, sample: int = SAMPLE, seed: int = 0,
                  keep: bool = False) -> dict[str, Any]:
    corpus, doc_emb, questions = load(dataset, sample, seed)
    corpus_id = {row["metadata"]["source_uri"]: row["_id"] for row in corpus}
    languages = sorted({row["metadata"]["language"] for row in corpus})
    client = Client(conn, refresh_backlog=1)   # settled statistics before the searches
    started = time.perf_counter()
    _load(client, "bench_languages", documents(corpus, doc_emb))
    per_language_names = [f"bench_languages_{lang}" for lang in languages]
    for lang, name in zip(languages, per_language_names, strict=True):
        _load(client, name, documents(corpus, doc_emb, lang))
    load_s = time.perf_counter() - started

    rows = []
    lexical_by_language: dict[str, tuple[float, float]] = {}
    for label, names, mode in [("dense", ["bench_languages"], "dense"),
                               ("lexical", ["bench_languages"], "lexical"),
                               ("hybrid", ["bench_languages"], "hybrid"),
                               ("hybrid + language", ["bench_languages"], "language"),
                               (f"hybrid, {len(languages)} collections", per_language_names, "hybrid"),
                               (f"hybrid + language, {len(languages)} collections", per_language_names,
                                "language")]:
        scored, per_language = _run(client, names, questions, corpus_id, mode)
        rows.append({"mode": label, **scored})
        if mode == "lexical":
            lexical_by_language = {lang: (round(float(np.mean([g for g, _ in v])), 4),
                                          round(float(np.mean([a for _, a in v])), 4))
                                   for lang, v in sorted(per_language.items())}
    if not keep:
        for name in ["bench_languages", *per_language_names]:
            client.drop_collection(name)
    return {"dataset": dataset.name, "documents": len(corpus), "questions": len(questions), "seed": seed,
            "load_s": round(load_s, 1), "rows": rows, "lexical_by_language": lexical_by_language}


COLUMNS = ("ndcg@10", "page_ndcg@10", "answer_ndcg@10", "duplicates", "first_in_language", "p50_ms")


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['dataset']}: {result['documents']} documents, {result['questions']} questions "
             f"(seed {result.get('seed', 0)}); top {TOP_K}; nDCG gain 2^rel - 1; loaded in {result['load_s']} s",
             f"{'mode':<36}" + "".join(f"{c:>18}" for c in COLUMNS)]
    for r in result["rows"]:
        lines.append(f"{r['mode']:<36}" + "".join(f"{r[c]:>18}" for c in COLUMNS))
    lines.append("lexical leg alone by question language, graded nDCG@10 / answer nDCG@10 (the paragraph in the "
                 "question's language): " + ", ".join(f"{k} {g} / {a}"
                                                      for k, (g, a) in result["lexical_by_language"].items()))
    return "\n".join(lines)
