"""Structure benchmark: `pgsift bench structure --dataset ../shared/datasets/xquad-r-multi`.

What returning sections and neighbours costs and buys. XQuAD-R's English
paragraphs, ordered by paragraph id within their article (`source_uri` =
/en/<title>/<paragraph id>), rebuild 48 articles; each article becomes one
Markdown document with a heading per paragraph, so each paragraph is one
section. Every English question's answering paragraph is its relevant section.

The articles are ingested as users ingest a folder (pgsift.ingest, the local
MiniLM embedder, the hierarchical strategy at each passage size and, for
reference, the flat one at about the same size), then every question is
searched (hybrid, the collection's defaults, top 10) with each parent_return
policy (auto at merge_threshold 0.5, the default, and 0.75) and neighbours 0
and 1, from the same index. Scored at section level:

* hit@5, MRR@10, nDCG@10: a hit counts as the answering section when the text
  it returns covers part of it (once: a later hit on it counts as its own
  section), else as its own chunk's section;
* recall: the share of the answering section's chunks whose text came back;
* tokens: the text returned per question (tokenizer counts; a window once,
  nothing twice); results per question; the share of hits that were merges;
* p50 ms of the search call.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from .. import metrics
from ..beir import read_jsonl, read_qrels
from ..client import Client
from ..errors import CollectionNotFound, InvalidArgument
from ..evaluation import covered_chunks, returned_chunks
from ..ingest import documents_from_folder
from ..models import Embedder, Hit
from . import queries as q

SIZES = (64, 128)
# parent_return with the merge_threshold it runs at (auto at the default 0.5, and stricter).
POLICIES: tuple[tuple[str, float | None], ...] = (("child", None), ("parent", None), ("auto", 0.5), ("auto", 0.75))
NEIGHBOURS = (0, 1)
TOP_K = 10
# Flat chunks are cut by words; about 1.3 MiniLM tokens to an English word.
TOKENS_PER_WORD = 1.3


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    section: tuple[str, str]    # (article, paragraph id)


def load_articles(dataset: Path, language: str = "en") -> tuple[dict[str, list[tuple[str, str]]], list[Question]]:
    """Articles as (paragraph id, text) in paragraph order, and the questions whose answering
    paragraph (relevance 2: the question's own language) is one of them."""
    articles: dict[str, list[tuple[str, str]]] = defaultdict(list)
    by_id: dict[str, tuple[str, str]] = {}
    for row in read_jsonl(dataset / "corpus.jsonl"):
        if not str(row["_id"]).startswith(f"{language}/"):
            continue
        _, _lang, title, pid = row["metadata"]["source_uri"].split("/", 3)
        articles[title].append((pid, row["text"].strip()))
        by_id[row["_id"]] = (title, pid)
    if not articles:
        raise InvalidArgument(f"{dataset}: no {language} documents (expected XQuAD-R's layout)")
    for paragraphs in articles.values():
        paragraphs.sort()
    qrels = read_qrels(dataset / "qrels" / "test.tsv")
    questions = []
    for row in read_jsonl(dataset / "queries.jsonl"):
        qid = str(row["_id"])
        answer = [doc for doc, grade in qrels.get(qid, {}).items() if grade == 2 and doc in by_id]
        if qid.startswith(f"{language}/") and len(answer) == 1:
            questions.append(Question(qid, row["text"], by_id[answer[0]]))
    return dict(articles), questions


def write_articles(articles: dict[str, list[tuple[str, str]]], folder: Path) -> None:
    """One Markdown file per article: its title, then a section per paragraph (its id as heading)."""
    folder.mkdir(parents=True, exist_ok=True)
    for title, paragraphs in articles.items():
        body = "".join(f"## {pid}\n\n{text}\n\n" for pid, text in paragraphs)
        (folder / f"{title}.md").write_text(f"# {title.replace('_', ' ')}\n\n{body}", encoding="utf-8")


def _load(client: Client, name: str, folder: Path, embedder: Embedder, strategy: str, size: int) -> float:
    try:
        client.drop_collection(name)
    except CollectionNotFound:
        pass
    client.create_collection(name, embedding_dims=embedder.dims)
    started = time.perf_counter()
    docs = documents_from_folder(folder, embedder, strategy=strategy, target_tokens=size,
                                 max_words=max(8, round(size / TOKENS_PER_WORD)))
    client.upsert_documents(name, docs)
    return time.perf_counter() - started


def _chunk_sections(conn: psycopg.Connection[Any], name: str) -> tuple[dict[int, tuple[str, str]],
                                                                        dict[int, int],
                                                                        dict[tuple[str, str], list[int]]]:
    """chunk -> (article, paragraph id), chunk -> tokens, and each section's chunks. A flat chunk's
    paragraph is the last part of its heading path; the title's own chunk belongs to no paragraph."""
    rows = conn.execute(q.BENCH_STRUCTURE_CHUNKS, {"collection": name}).fetchall()
    section: dict[int, tuple[str, str]] = {}
    tokens: dict[int, int] = {}
    chunks: dict[tuple[str, str], list[int]] = defaultdict(list)
    for chunk_id, uri, heading, context, token_count in rows:
        title = Path(uri).stem
        pid = heading if heading is not None else (context or "").rsplit(" > ", 1)[-1]
        key = (title, pid)
        section[chunk_id] = key
        tokens[chunk_id] = token_count or 0
        chunks[key].append(chunk_id)
    return section, tokens, dict(chunks)


def _units(hits: list[Hit], section: dict[int, tuple[str, str]], answer: tuple[str, str]) -> list[Any]:
    credited = False
    units: list[Any] = []
    for h in hits:
        covered = {section.get(c) for c in covered_chunks(h)}
        if answer in covered and not credited:
            credited = True
            units.append(answer)
        else:
            units.append(section.get(h.chunk_id, ("chunk", str(h.chunk_id))))
    return units


def _score(client: Client, name: str, questions: list[Question], vectors: Any, knobs: dict[str, Any],
           section: dict[int, tuple[str, str]], tokens: dict[int, int],
           chunks: dict[tuple[str, str], list[int]]) -> dict[str, float]:
    sums: dict[str, float] = defaultdict(float)
    ms: list[float] = []
    merged = n_hits = 0
    for question, vector in zip(questions, vectors, strict=True):
        started = time.perf_counter()
        hits = sorted(client.search(name, question.text, embedding=vector, top_k=TOP_K, **knobs).hits,
                      key=lambda h: (h.rank, h.chunk_id))
        ms.append((time.perf_counter() - started) * 1000)
        qrels = {question.section: 1}
        units = _units(hits, section, question.section)
        sums["hit@5"] += metrics.hit_rate(units, qrels, 5)
        sums["mrr@10"] += metrics.mrr(units, qrels, TOP_K)
        sums["ndcg@10"] += metrics.ndcg_at_k(units, qrels, TOP_K)
        sent = [c for h in hits for c in returned_chunks(h)]
        answer = chunks.get(question.section, [])
        sums["recall"] += len(set(answer) & set(sent)) / len(answer) if answer else 0.0
        sums["tokens"] += sum(tokens.get(c, 0) for c in sent)
        sums["results"] += len(hits)
        merged += sum(1 for h in hits if h.merged)
        n_hits += len(hits)
    n = len(questions)
    out = {k: round(v / n, 4) for k, v in sums.items()}
    out["merged"] = round(merged / n_hits, 4) if n_hits else 0.0
    out["p50_ms"] = round(statistics.median(ms), 2)
    return out


def sample_questions(questions: list[Question], max_questions: int | None, seed: int = 0) -> list[Question]:
    """The questions a run asks: all of them, or `max_questions` drawn by random.Random(seed)
    (the same seed, the same sample)."""
    if max_questions is None or max_questions >= len(questions):
        return questions
    return random.Random(seed).sample(questions, max_questions)


def run_structure(conn: psycopg.Connection[Any], dataset: Path, *, sizes: tuple[int, ...] = SIZES,
                  max_questions: int | None = None, seed: int = 0, embedder: Embedder | None = None,
                  keep: bool = False) -> dict[str, Any]:
    if embedder is None:
        from ..embed import LocalEmbedder
        embedder = LocalEmbedder()
    articles, every = load_articles(dataset)
    questions = sample_questions(every, max_questions, seed)
    vectors = embedder.embed([question.text for question in questions])
    client = Client(conn, refresh_backlog=1)   # settled statistics before the searches
    rows: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "articles"
        write_articles(articles, folder)
        for size in sizes:
            for strategy in ("flat", "hierarchical"):
                name = f"bench_structure_{strategy}_{size}"
                seconds = _load(client, name, folder, embedder, strategy, size)
                section, tokens, chunks = _chunk_sections(conn, name)
                loads.append({"collection": name, "chunks": len(section), "seconds": round(seconds, 1)})
                policies = POLICIES[:1] if strategy == "flat" else POLICIES
                for policy, threshold in policies:
                    for n in NEIGHBOURS:
                        knobs: dict[str, Any] = {"parent_return": policy, "neighbours": n}
                        if threshold is not None:
                            knobs["merge_threshold"] = threshold
                        scored = _score(client, name, questions, vectors, knobs, section, tokens, chunks)
                        label = policy if threshold is None else f"{policy} {threshold:g}"
                        rows.append({"size": size, "chunking": strategy, "parent_return": label,
                                     "neighbours": n, **scored})
                if not keep:
                    client.drop_collection(name)
    return {"dataset": dataset.name, "articles": len(articles),
            "sections": sum(len(p) for p in articles.values()), "questions": len(questions),
            "seed": seed if len(questions) < len(every) else None, "loads": loads, "rows": rows}


COLUMNS = ("hit@5", "mrr@10", "ndcg@10", "recall", "tokens", "results", "merged", "p50_ms")


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['dataset']} (English): {result['articles']} articles, {result['sections']} sections "
             f"(one per paragraph), {result['questions']} questions"
             + (f" (seed {result['seed']})" if result.get("seed") is not None else "")
             + f"; hybrid, defaults, top {TOP_K}; "
             "section-level metrics",
             f"{'size':>4} {'chunking':<12} {'return':<9} {'nbrs':>4} "
             + " ".join(f"{c:>8}" for c in COLUMNS)]
    for r in result["rows"]:
        lines.append(f"{r['size']:>4} {r['chunking']:<12} {r['parent_return']:<9} {r['neighbours']:>4} "
                     + " ".join(f"{r[c]:>8.4g}" if isinstance(r[c], float) else f"{r[c]:>8}" for c in COLUMNS))
    lines.append("loads: " + "; ".join(f"{x['collection']} {x['chunks']} chunks in {x['seconds']} s"
                                       for x in result["loads"]))
    return "\n".join(lines)
