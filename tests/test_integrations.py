"""The LangChain and LlamaIndex retrievers (pgsift.integrations) against the real packages and
a real database: each answers what Client.search answers, sync and async, with the knobs,
the filter and the embedder passed through, every hit's fields in the metadata, and the
framework's own calling conventions (invoke, ainvoke, batch; retrieve, aretrieve).
"""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys

import numpy as np
import psycopg
import psycopg_pool
import pydantic
import pytest
from conftest import unit
from llama_index.core.schema import MetadataMode, NodeRelationship, QueryBundle
from pgsift import AsyncClient, Chunk, Client, Document, Hit, InvalidArgument
from pgsift.integrations import IntegrationUnavailable
from pgsift.integrations import langchain as lc
from pgsift.integrations import llamaindex as li
from rerank_servers import RerankServer, keyword_scorer, loopback_only

DIMS = 8
WORDS = ["refund", "parcel", "laptop", "leave", "invoice", "badge", "printer", "holiday"]
QUERY = "refund parcel"
# The fields of a Hit each document or node carries under the same name.
FIELDS = ["chunk_id", "document_id", "source_uri", "title", "ordinal", "context", "score", "base_score", "rank",
          "position", "found_by", "legs", "dense_rank", "dense_distance", "lexical_rank", "lexical_score",
          "lexical_exact"]


class HashEmbedder:
    """Deterministic unit vectors from a text's words (md5, so not the process's hash seed)."""

    dims = DIMS

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        out = []
        for text in texts:
            v = np.zeros(DIMS)
            for word in text.lower().split():
                seed = int(hashlib.md5(word.encode()).hexdigest()[:8], 16)
                v += np.random.default_rng(seed).normal(size=DIMS)
            out.append(unit(v) if np.linalg.norm(v) else np.full(DIMS, DIMS ** -0.5))
        return np.asarray(out, dtype=np.float32)


@pytest.fixture
def kb(client):
    """12 documents of 3 chunks each: a document's chunks share its two words, so a question
    matches whole documents, and the per-document cap (5 by default) shows."""
    client.create_collection("kb", embedding_dims=DIMS)
    embedder = HashEmbedder()
    docs = []
    for i in range(12):
        words = f"{WORDS[i % 8]} {WORDS[(i * 3 + 1) % 8]}"
        texts = [f"{words} part {j} of doc {i}" for j in range(3)]
        docs.append(Document(source_uri=f"d{i}", title=f"Doc {i}", metadata={"n": i, "parity": ["even", "odd"][i % 2],
                                                                          "title": "the document's own"},
                             chunks=[Chunk(content=t, embedding=v, context=f"Doc {i} > part")
                                     for t, v in zip(texts, embedder.embed(texts))]))
    client.upsert_documents("kb", docs)
    return client


def expected(client: Client, query: str = QUERY, **kwargs) -> list[Hit]:
    """What Client.search gives, embedded as the retrievers embed."""
    embedding = HashEmbedder().embed([query])[0] if query.strip() else None
    return client.search("kb", query, embedding=embedding, **kwargs).hits


def check_metadata(metadata: dict, hit: Hit) -> None:
    for name in FIELDS:
        assert metadata[name] == getattr(hit, name), name
    assert metadata["collection"] == hit.collection_name == "kb"
    assert metadata["document_metadata"] == hit.metadata
    assert metadata["title"] == hit.title != metadata["document_metadata"]["title"]   # nested, not shadowed
    assert ("rerank_score" in metadata) == (hit.rerank_score is not None)
    assert metadata.get("reranker") == hit.reranker


def check_documents(docs, hits: list[Hit]) -> None:
    assert [d.id for d in docs] == [f"pgsift:{h.chunk_id}" for h in hits]
    assert [d.page_content for d in docs] == [h.text for h in hits]
    for d, h in zip(docs, hits):
        check_metadata(d.metadata, h)
        assert d.metadata["source"] == h.source_uri
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)


def check_nodes(nodes, hits: list[Hit]) -> None:
    assert [n.node.node_id for n in nodes] == [f"pgsift:{h.chunk_id}" for h in hits]
    assert [n.node.get_content() for n in nodes] == [h.text for h in hits]
    assert [n.score for n in nodes] == [h.score for h in hits]
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
    for n, h in zip(nodes, hits):
        check_metadata(n.node.metadata, h)
        assert n.node.ref_doc_id == f"pgsift:document:{h.document_id}"
        assert n.node.relationships[NodeRelationship.SOURCE].node_id == n.node.ref_doc_id


@pytest.fixture
async def aclient(dsn):
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        yield AsyncClient(conn)
    finally:
        await conn.close()


# -- LangChain ------------------------------------------------------------------------------

def test_langchain_invoke_is_client_search(kb):
    hits = expected(kb, top_k=6)
    assert len(hits) == 6 and len({h.document_id for h in hits}) < 6   # several chunks of a document
    retriever = lc.PgsiftRetriever(client=kb, collection="kb", top_k=6, embedder=HashEmbedder())
    check_documents(retriever.invoke(QUERY), hits)
    # the client's embedder when the retriever has none
    embedder = HashEmbedder()
    own = lc.PgsiftRetriever(client=Client(kb.source, embedder=embedder), collection=["kb"], top_k=6)
    check_documents(own.invoke(QUERY), hits)
    assert embedder.calls == [[QUERY]]
    # with neither, the search is lexical only
    lexical = lc.PgsiftRetriever(client=kb, collection="kb", top_k=6).invoke(QUERY)
    assert lexical and all(d.metadata["legs"] == ["lexical"] for d in lexical)


def test_langchain_knobs_filter_and_one_calls_overrides(kb):
    capped = lc.PgsiftRetriever(client=kb, collection="kb", top_k=5, embedder=HashEmbedder(),
                                knobs={"per_document_cap": 1})
    docs = capped.invoke(QUERY)
    check_documents(docs, expected(kb, top_k=5, per_document_cap=1))
    assert len({d.metadata["document_id"] for d in docs}) == len(docs) == 5

    even = lc.PgsiftRetriever(client=kb, collection="kb", top_k=5, embedder=HashEmbedder(), filter={"parity": "even"})
    docs = even.invoke(QUERY)
    check_documents(docs, expected(kb, top_k=5, filter={"parity": "even"}))
    assert docs and {d.metadata["document_metadata"]["parity"] for d in docs} == {"even"}

    # invoke(question, top_k=..., filter=..., **knobs) overrides the retriever's for one call
    docs = even.invoke(QUERY, top_k=3, filter={"parity": "odd"}, per_document_cap=1)
    check_documents(docs, expected(kb, top_k=3, filter={"parity": "odd"}, per_document_cap=1))
    check_documents(even.invoke(QUERY), expected(kb, top_k=5, filter={"parity": "even"}))


def test_langchain_batch_and_ainvoke_on_a_client(kb):
    retriever = lc.PgsiftRetriever(client=kb, collection="kb", top_k=4, embedder=HashEmbedder())
    questions = [QUERY, "laptop leave", "invoice badge", "printer holiday", "refund"]
    sequential = [retriever.invoke(q) for q in questions]
    # batch runs the questions in threads over the one connection
    assert retriever.batch(questions) == sequential
    assert retriever.batch(questions, config={"max_concurrency": 2}) == sequential
    assert asyncio.run(retriever.ainvoke(QUERY)) == sequential[0]     # the sync search, in a thread
    assert asyncio.run(retriever.abatch(questions)) == sequential


async def test_langchain_ainvoke_on_an_async_client(kb, aclient):
    retriever = lc.PgsiftRetriever(client=aclient, collection="kb", top_k=6, embedder=HashEmbedder(),
                                   knobs={"per_document_cap": 2})
    docs = await retriever.ainvoke(QUERY)
    check_documents(docs, expected(kb, top_k=6, per_document_cap=2))
    questions = [QUERY, "laptop leave", "invoice badge"]
    sync = lc.PgsiftRetriever(client=kb, collection="kb", top_k=6, embedder=HashEmbedder(),
                              knobs={"per_document_cap": 2})
    assert await retriever.abatch(questions) == [sync.invoke(q) for q in questions]
    with pytest.raises(InvalidArgument, match="AsyncClient.*await ainvoke"):
        retriever.invoke(QUERY)


async def test_langchain_over_an_async_pool(kb, dsn):
    async with psycopg_pool.AsyncConnectionPool(dsn, min_size=1, max_size=3, open=False) as pool:
        retriever = lc.PgsiftRetriever(client=AsyncClient(pool), collection="kb", top_k=4, embedder=HashEmbedder())
        questions = [QUERY, "laptop leave", "invoice badge", "printer holiday"]
        got = await retriever.abatch(questions)
    sync = lc.PgsiftRetriever(client=kb, collection="kb", top_k=4, embedder=HashEmbedder())
    assert got == [sync.invoke(q) for q in questions]


@pytest.mark.parametrize("question", ["", "   ", "?!", "zzzz"])
def test_langchain_blank_and_odd_questions_answer_as_search_does(kb, question):
    retriever = lc.PgsiftRetriever(client=kb, collection="kb", top_k=4, embedder=HashEmbedder())
    check_documents(retriever.invoke(question), expected(kb, question, top_k=4))


def test_langchain_settings_are_checked(kb):
    # pydantic reports what the checks raised (InvalidArgument) as a ValidationError
    with pytest.raises(pydantic.ValidationError, match="top_k is a parameter"):
        lc.PgsiftRetriever(client=kb, collection="kb", knobs={"top_k": 3})
    with pytest.raises(pydantic.ValidationError, match="filter"):
        lc.PgsiftRetriever(client=kb, collection="kb", filter="team = 'billing'")
    with pytest.raises(pydantic.ValidationError, match="embed"):
        lc.PgsiftRetriever(client=kb, collection="kb", embedder=object())
    with pytest.raises(pydantic.ValidationError):
        lc.PgsiftRetriever(client="postgresql://", collection="kb")
    with pytest.raises(pydantic.ValidationError):
        lc.PgsiftRetriever(client=kb, collection=[])   # a collection, or a non-empty list of them
    # a misspelt knob is the database's to name, at the first search
    from pgsift import InvalidKnob
    with pytest.raises(InvalidKnob, match="per_document_cap"):
        lc.PgsiftRetriever(client=kb, collection="kb", knobs={"per_doc_cap": 1}).invoke(QUERY)


# -- LlamaIndex -----------------------------------------------------------------------------

def test_llamaindex_retrieve_is_client_search(kb):
    hits = expected(kb, top_k=6)
    retriever = li.PgsiftRetriever(kb, "kb", top_k=6, embedder=HashEmbedder())
    nodes = retriever.retrieve(QUERY)
    check_nodes(nodes, hits)
    # the LLM sees the title and source in front of the text, nothing of the ranking
    shown = nodes[0].node.get_content(MetadataMode.LLM)
    assert f"source_uri: {hits[0].source_uri}" in shown and "dense_distance" not in shown
    assert nodes[0].node.get_content(MetadataMode.EMBED) == hits[0].text
    check_nodes(li.PgsiftRetriever(Client(kb.source, embedder=HashEmbedder()), "kb", top_k=6).retrieve(QUERY), hits)


def test_llamaindex_query_bundle_knobs_and_filter(kb):
    embedder = HashEmbedder()
    retriever = li.PgsiftRetriever(kb, ["kb"], top_k=4, embedder=embedder, filter={"parity": "odd"},
                                   knobs={"per_document_cap": 1})
    check_nodes(retriever.retrieve(QUERY), expected(kb, top_k=4, filter={"parity": "odd"}, per_document_cap=1))
    # A bundle's own embedding may be another model's (a fusion retriever shares one bundle):
    # with an embedder, the question is embedded with it; without one, the bundle's is used.
    embedder.calls.clear()
    foreign = (-HashEmbedder().embed(["laptop leave"])[0]).tolist()
    nodes = retriever.retrieve(QueryBundle(QUERY, embedding=foreign))
    assert embedder.calls == [[QUERY]]
    check_nodes(nodes, expected(kb, top_k=4, filter={"parity": "odd"}, per_document_cap=1))
    vector = HashEmbedder().embed(["laptop leave"])[0].tolist()
    bare = li.PgsiftRetriever(kb, ["kb"], top_k=4, filter={"parity": "odd"}, knobs={"per_document_cap": 1})
    nodes = bare.retrieve(QueryBundle(QUERY, embedding=vector))
    want = kb.search("kb", QUERY, embedding=vector, top_k=4, filter={"parity": "odd"}, per_document_cap=1).hits
    check_nodes(nodes, want)
    # custom_embedding_strs (HyDE): the mean of their vectors, at unit length
    strs = ["laptop leave", "invoice badge"]
    embedder.calls.clear()
    nodes = retriever.retrieve(QueryBundle(QUERY, custom_embedding_strs=strs))
    assert embedder.calls == [strs]
    mean = HashEmbedder().embed(strs).astype(np.float64).mean(axis=0)
    want = kb.search("kb", QUERY, embedding=mean / np.linalg.norm(mean), top_k=4, filter={"parity": "odd"},
                     per_document_cap=1).hits
    check_nodes(nodes, want)


async def test_llamaindex_aretrieve(kb, aclient):
    retriever = li.PgsiftRetriever(aclient, "kb", top_k=5, embedder=HashEmbedder(), knobs={"per_document_cap": 2})
    check_nodes(await retriever.aretrieve(QUERY), expected(kb, top_k=5, per_document_cap=2))
    with pytest.raises(InvalidArgument, match="AsyncClient.*await aretrieve"):
        retriever.retrieve(QUERY)
    on_client = li.PgsiftRetriever(kb, "kb", top_k=5, embedder=HashEmbedder(), knobs={"per_document_cap": 2})
    assert [n.node.node_id for n in await on_client.aretrieve(QUERY)] == \
        [n.node.node_id for n in on_client.retrieve(QUERY)]


@pytest.mark.parametrize("question", ["", "?!"])
def test_llamaindex_blank_and_odd_questions_answer_as_search_does(kb, question):
    check_nodes(li.PgsiftRetriever(kb, "kb", top_k=4, embedder=HashEmbedder()).retrieve(question),
                expected(kb, question, top_k=4))


def test_llamaindex_settings_are_checked(kb):
    with pytest.raises(InvalidArgument, match="client must be a pgsift Client"):
        li.PgsiftRetriever(kb.source, "kb")
    with pytest.raises(InvalidArgument, match="embedding is a parameter"):
        li.PgsiftRetriever(kb, "kb", knobs={"embedding": [0.0] * DIMS})
    with pytest.raises(InvalidArgument, match="top_k must be an integer"):
        li.PgsiftRetriever(kb, "kb", top_k="5")


# -- both -------------------------------------------------------------------------------------

def test_a_reranked_hit_carries_its_rerank_score(kb, db, monkeypatch):
    loopback_only(monkeypatch)
    db.execute("select sift.allow_endpoint(url_prefix => 'http://127.0.0.1:')")
    with RerankServer(scorer=keyword_scorer({"part 2": 0.9}), max_requests=10) as server:
        kb.register_reranker("tei", "tei", base_url=server.url)
        kb.alter_collection("kb", reranker="tei", rerank=True)
        docs = lc.PgsiftRetriever(client=kb, collection="kb", top_k=3, embedder=HashEmbedder()).invoke(QUERY)
        nodes = li.PgsiftRetriever(kb, "kb", top_k=3, embedder=HashEmbedder()).retrieve(QUERY)
        calls = len(server.requests)
        plain = lc.PgsiftRetriever(client=kb, collection="kb", top_k=3, embedder=HashEmbedder(),
                                   knobs={"rerank": False}).invoke(QUERY)
    assert calls >= 2 and len(server.requests) == calls    # rerank=False made no call
    for meta in [d.metadata for d in docs] + [n.node.metadata for n in nodes]:
        assert meta["rerank_score"] == pytest.approx(0.9)
        assert meta["fused_score"] is not None and meta["base_score"] == meta["rerank_score"]
    assert all("part 2" in d.page_content for d in docs)
    assert all("rerank_score" not in d.metadata for d in plain)


def test_the_neighbours_knob_hands_each_text_on_once(kb):
    hits = expected(kb, top_k=6, neighbours=1)
    assert any(h.window_of is not None for h in hits)     # a hit inside a better hit's window
    kept = [h for h in hits if h.window_of is None]
    docs = lc.PgsiftRetriever(client=kb, collection="kb", top_k=6, embedder=HashEmbedder(),
                              knobs={"neighbours": 1}).invoke(QUERY)
    check_documents(docs, kept)
    assert all(d.page_content for d in docs) and "window_chunk_ids" in docs[0].metadata


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def test_importing_pgsift_imports_no_framework():
    out = run_python("import sys, pgsift, pgsift.integrations\n"
                     "print(sorted({m.split('.')[0] for m in sys.modules} & {'langchain_core', 'llama_index', "
                     "'langsmith'}))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "blocked", "extra"), [("langchain", "langchain_core", "langchain"),
                                                          ("llamaindex", "llama_index", "llamaindex")])
def test_a_missing_framework_names_the_extra(module, blocked, extra):
    out = run_python(f"import sys\nsys.modules[{blocked!r}] = None\n"
                     "from pgsift import PgsiftError\n"
                     "from pgsift.integrations import IntegrationUnavailable\n"
                     "try:\n"
                     f"    import pgsift.integrations.{module}\n"
                     "except ImportError as exc:\n"
                     "    assert isinstance(exc, IntegrationUnavailable) and isinstance(exc, PgsiftError)\n"
                     "    print(exc)\n")
    assert out.returncode == 0, out.stderr
    assert f"pip install 'pgsift[{extra}]'" in out.stdout
    assert issubclass(IntegrationUnavailable, ImportError)


def test_llamaindex_in_a_query_engine_and_a_fusion_retriever(kb):
    """Where LlamaIndex takes a retriever, offline: MockLLM echoes the prompt it is given."""
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever

    retriever = li.PgsiftRetriever(kb, "kb", top_k=3, embedder=HashEmbedder())
    response = RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query(QUERY)
    hits = expected(kb, top_k=3)
    assert [n.node.node_id for n in response.source_nodes] == [f"pgsift:{h.chunk_id}" for h in hits]
    assert hits[0].text in str(response) and "dense_distance" not in str(response)

    # use_async: both searches side by side (aretrieve, in threads), over the one connection
    odd = li.PgsiftRetriever(kb, "kb", top_k=3, embedder=HashEmbedder(), filter={"parity": "odd"})
    fused = QueryFusionRetriever([retriever, odd], llm=MockLLM(), num_queries=1, mode="reciprocal_rerank",
                                 similarity_top_k=4, use_async=True)
    ids = [n.node.node_id for n in fused.retrieve(QUERY)]
    odd_hits = expected(kb, top_k=3, filter={"parity": "odd"})
    assert len(ids) == 4 and set(ids) <= {f"pgsift:{h.chunk_id}" for h in hits + odd_hits}
