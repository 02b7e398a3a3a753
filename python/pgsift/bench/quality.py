"""Quality benchmark: nDCG / recall / latency of sift.search on a BEIR dataset.

``pgsift bench quality --dataset DIR`` loads a folder in the BEIR layout with
precomputed embeddings, writes every corpus document into a fresh collection
(one document, one chunk), and runs each test query three ways through
``sift.search``: dense only, lexical only, and hybrid (weighted RRF); then the
peers' SQL on a plain copy of the same chunks (pgsift.bench.peers: pgvector
HNSW, full text by ts_rank_cd, Supabase's hybrid_search), each latency also as a
ratio of pgvector's. The dataset is read from its path; nothing of it is copied.

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
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from .. import metrics
from ..client import Client
from ..errors import CollectionNotFound, InvalidArgument
from ..models import Chunk, Document
from . import peers as bench_peers
from . import queries
from . import turns as bench_turns

log = logging.getLogger(__name__)

MODES = ("dense", "lexical", "hybrid")
# Exhaustive BM25: the lexical leg with its read budget and exhaustive limit lifted.
EXHAUSTIVE = {"lexical_budget": 2_000_000_000, "lexical_exact_limit": 2_000_000_000}
_INGEST_BATCH = 500


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


def load_collection(client: Client, collection: str, data: BeirDataset) -> None:
    """A fresh collection holding the dataset's corpus (one replaced if it was there), 500
    documents a call, its statistics folded at the end (whatever the client's backlog)."""
    try:
        client.drop_collection(collection)
    except CollectionNotFound:
        pass
    client.create_collection(collection, embedding_dims=data.dims)
    for start in range(0, len(data.doc_ids), 500):
        client.upsert_documents(collection, corpus_documents(data, start, min(start + 500, len(data.doc_ids))))
    client.refresh_lexical_stats(collection)


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def _server_info(conn: psycopg.Connection[Any]) -> dict[str, str | None]:
    with conn.transaction():
        row = conn.execute(queries.SERVER_VERSIONS).fetchone()
    return {"postgres": row[0] if row else None, "pgvector": row[1] if row else None}


def run_quality(conn: psycopg.Connection[Any], dataset: Path, *, model: str | None = None,
                collection: str = "bench", search_language: str = "english", top_k: int = 10,
                depth: int = 100, max_queries: int | None = None,
                knobs: dict[str, Any] | None = None, peers_too: bool = True) -> dict[str, Any]:
    """Ingest a BEIR dataset into a fresh collection and score dense, lexical and hybrid search.

    The collection ``collection`` is dropped first if it exists, then created with the
    dataset's embedding size and ``search_language`` (every other setting at the
    database's defaults). Each test query runs once per mode through ``sift.search``
    with ``top_k=depth``:

    * dense: the query embedding, ``hybrid=False``;
    * lexical: the query text only (no embedding);
    * hybrid: embedding and text, the collection's settings overridden by ``knobs``.

    ``knobs`` (fetch_k, dense_weight, rrf_k, exact_search_limit) apply to every mode;
    ``hybrid`` is not allowed in it since the mode decides. Hits map to corpus ids by
    source_uri. Reported per mode: mean nDCG@top_k and recall@depth over the queries,
    and p50 / p95 latency in ms of the client call (perf_counter, after one untimed
    warm-up search per mode). With ``peers_too`` the peers' SQL runs too
    (:mod:`pgsift.bench.peers`; skipped with the reason where it cannot run), and every
    p50 is also a ratio of pgvector's. Every mode and peer runs in turn on each query,
    in an order rotated from query to query, so all are timed under the same load.
    """
    knobs = dict(knobs or {})
    if "hybrid" in knobs:
        raise InvalidArgument("knobs may not set 'hybrid': each mode sets it")
    if top_k < 1 or depth < top_k:
        raise InvalidArgument(f"need 1 <= top_k <= depth, got top_k={top_k}, depth={depth}")

    data = load_beir(Path(dataset), model)
    query_idx = list(range(len(data.query_ids)))
    if max_queries is not None:
        query_idx = query_idx[:max_queries]
    if not query_idx:
        raise InvalidArgument(f"{dataset}: no test query has a relevant judgment")

    # Each load call folds its statistics (refresh_backlog 1): the searches run on a settled
    # collection, as a production one is between writes.
    client = Client(conn, refresh_backlog=1)
    try:
        client.drop_collection(collection)
    except CollectionNotFound:
        pass
    col = client.create_collection(collection, embedding_dims=data.dims, search_language=search_language)

    log.info("ingesting %d documents into %r", len(data), collection)
    started = time.perf_counter()
    n_written = 0
    for start in range(0, len(data), _INGEST_BATCH):
        n_written += len(client.upsert_documents(
            collection, corpus_documents(data, start, min(start + _INGEST_BATCH, len(data)))))
    ingest_s = time.perf_counter() - started
    with client.transaction() as tx:
        n_docs = (tx.execute(queries.COUNT_DOCUMENTS, {"collection": collection}).fetchone() or (0,))[0]
        # Fresh planner statistics, as autovacuum would give a settled table.
        tx.execute(queries.ANALYZE)

    def call(mode: str, i: int) -> list[str]:
        if mode == "dense":
            result = client.search(collection, "", embedding=data.query_embeddings[i], top_k=depth,
                                   hybrid=False, **knobs)
        elif mode == "lexical":
            result = client.search(collection, data.query_texts[i], top_k=depth, **knobs)
        elif mode == "lexical_exhaustive":
            # The same leg with its read budget and exhaustive limit lifted:
            # exhaustive BM25, for what the bounded leg gives up (if anything).
            result = client.search(collection, data.query_texts[i], top_k=depth,
                                   **{**knobs, **EXHAUSTIVE})
        else:
            result = client.search(collection, data.query_texts[i], embedding=data.query_embeddings[i],
                                   top_k=depth, hybrid=True, **knobs)
        return [hit.source_uri for hit in result]

    # Every system in turn on each query, the order rotating from query to query, so
    # that none is timed only while the machine is busy or the cache cold (timed one
    # system after another, the first measured right after the ingest could run at
    # twice the time of the same searches later).
    runs: dict[str, Callable[[int], list[str]]] = {m: partial(call, m) for m in (*MODES, "lexical_exhaustive")}
    around: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {}
    n_peer_rows, skipped = 0, None
    try:
        if peers_too:
            try:
                n_peer_rows = bench_peers.install(conn, collection, data.dims)
                peers = bench_peers.Peers(conn)
                for peer in bench_peers.MODES:
                    runs[peer] = partial(_peer_search, peers, peer, data, depth)
                    # pgvector's ef_search raised to the depth around that peer's searches
                    # only, untimed (each of the other systems runs at its own setting).
                    around[peer] = (partial(peers.begin, peer, depth), peers.end)
            except bench_peers.PeersUnavailable as exc:
                skipped = str(exc)
                log.warning("peers skipped: %s", exc)
        lists, modes = _time_in_turns(runs, around, query_idx, data, top_k, depth)
    finally:
        if peers_too:
            bench_peers.drop(conn)
    if "pgvector_hnsw" in modes:
        base = modes["pgvector_hnsw"]["p50_ms"]
        for m in modes.values():
            m["p50_over_pgvector"] = m["p50_ms"] / base if base else math.nan

    same = {n: sum(a[:n] == b[:n] for a, b in zip(lists["lexical"], lists["lexical_exhaustive"]))
            for n in (top_k, depth)}
    return {
        "dataset": data.name,
        "n_docs": int(n_docs),
        "n_queries": len(query_idx),
        "ingest_s": ingest_s,
        "modes": modes,
        "lexical_identical_to_exhaustive": {f"top_{n}": count for n, count in same.items()},
        **({"peer_rows": n_peer_rows} if "pgvector_hnsw" in modes else {}),
        **({"peers_skipped": skipped} if skipped else {}),
        "settings": {
            "path": str(dataset),
            "model": data.model,
            "dims": data.dims,
            "collection": collection,
            "search_language": search_language,
            "top_k": top_k,
            "depth": depth,
            "max_queries": max_queries,
            "knobs": knobs,
            "distance": col.distance,
            "collection_settings": col.settings,
            **_server_info(conn),
        },
    }


def _peer_search(peers: bench_peers.Peers, mode: str, data: BeirDataset, depth: int, i: int) -> list[str]:
    return peers.search(mode, data.query_texts[i], data.query_embeddings[i], depth)


def _time_in_turns(runs: dict[str, Callable[[int], list[str]]],
                   around: dict[str, tuple[Callable[[], None], Callable[[], None]]], query_idx: list[int],
                   data: BeirDataset, top_k: int,
                   depth: int) -> tuple[dict[str, list[list[str]]], dict[str, dict[str, float]]]:
    """Each query through every system in turn (bench_turns.in_turn; around: what to do,
    untimed, before and after a system's search). Each system's ranked lists, and its mean
    nDCG@top_k, recall@depth and p50 / p95 latency in ms."""
    names = list(runs)
    lists, times_ms = bench_turns.in_turn(runs, query_idx, around)
    modes: dict[str, dict[str, float]] = {}
    for name in names:
        judged = [data.qrels[data.query_ids[i]] for i in query_idx]
        modes[name] = {
            f"ndcg@{top_k}": float(np.mean([metrics.ndcg_at_k(r, j, top_k) for r, j in zip(lists[name], judged)])),
            f"recall@{depth}": float(np.mean([metrics.recall_at_k(r, j, depth)
                                              for r, j in zip(lists[name], judged)])),
            "p50_ms": _percentile(times_ms[name], 50),
            "p95_ms": _percentile(times_ms[name], 95),
        }
        log.info("%s: %s", name, modes[name])
    return lists, modes


def format_table(result: dict[str, Any]) -> str:
    """The result of :func:`run_quality` as an aligned plain-text table."""
    settings = result.get("settings", {})
    k, depth = settings.get("top_k", 10), settings.get("depth", 100)
    header = (f"dataset {result['dataset']}: {result['n_docs']:,} docs, "
              f"{result['n_queries']:,} queries"
              + (f", model {settings['model']}" if settings.get("model") else "")
              + (f", ingest {result['ingest_s']:.1f} s" if "ingest_s" in result else ""))
    columns = ["mode", f"nDCG@{k}", f"recall@{depth}", "p50 ms", "p95 ms", "p50 / pgvector"]
    rows = []
    for mode, m in result["modes"].items():
        ratio = m.get("p50_over_pgvector")
        rows.append([mode, f"{m[f'ndcg@{k}']:.4f}", f"{m[f'recall@{depth}']:.4f}",
                     f"{m['p50_ms']:.1f}", f"{m['p95_ms']:.1f}", "" if ratio is None else f"{ratio:.2f}x"])
    widths = [max(len(columns[c]), *(len(r[c]) for r in rows)) for c in range(len(columns))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                         for c, (cell, w) in enumerate(zip(cells, widths))).rstrip()

    out = [header, line(columns), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    if "lexical_identical_to_exhaustive" in result:
        same = ", ".join(f"top {n.removeprefix('top_')} {c}/{result['n_queries']}"
                         for n, c in result["lexical_identical_to_exhaustive"].items())
        out.append(f"lexical (bounded) ranking identical to lexical_exhaustive: {same}")
    if "peers_skipped" in result:
        out.append(f"peers skipped: {result['peers_skipped']}")
    if "peer_rows" in result:
        out.append("pgvector_hnsw, fts_ts_rank_cd, supabase_hybrid: the peers' SQL on a plain copy of the "
                   f"{result['peer_rows']:,} chunks (pgsift.bench.peers); supabase_hybrid returns at most 30 rows")
    return "\n".join(out)
