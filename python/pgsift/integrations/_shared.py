"""What the LangChain and LlamaIndex retrievers share: checking their settings, the query
vector, the search call (sync or async) and the metadata each hit carries.

Nothing here imports a framework.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg

from .. import calls
from ..client import Client
from ..client_async import AsyncClient
from ..errors import InvalidArgument
from ..models import Hit
from . import IntegrationUnavailable

# Client.search's own parameters: a knob of one of these names would collide with them.
SEARCH_PARAMETERS = frozenset({"collection", "query", "embedding", "top_k", "filter", "context"})


def unavailable(framework: str, extra: str, exc: ImportError) -> IntegrationUnavailable:
    """The error an integration module raises when its framework is missing."""
    return IntegrationUnavailable(f"pgsift's {framework} retriever needs {framework}: "
                                  f"pip install 'pgsift[{extra}]' (missing: {exc.name or exc})")


@dataclass(frozen=True)
class Settings:
    """A retriever's search, checked once when it is built: the collection name(s), top_k, the
    metadata filter, the knobs (keyword arguments of Client.search) and the embedder."""

    collection: str | list[str]
    top_k: int = 10
    filter: dict[str, Any] | None = None
    knobs: dict[str, Any] = field(default_factory=dict)
    embedder: Any = None

    @classmethod
    def checked(cls, collection: Any, top_k: Any, filter: Any, knobs: Any, embedder: Any) -> Settings:
        calls.collection_args(collection)
        calls.check_top_k(top_k)
        calls.filter_json(filter)
        if knobs is not None and not isinstance(knobs, Mapping):
            raise InvalidArgument("knobs must be a dict of knob names to values (see Client.knobs())")
        knobs = dict(knobs or {})
        if not all(isinstance(k, str) for k in knobs):
            raise InvalidArgument("knob names must be strings")
        clash = sorted(SEARCH_PARAMETERS & set(knobs))
        if clash:
            raise InvalidArgument(f"{', '.join(clash)} is a parameter of the retriever or of Client.search, "
                                  "not a knob")
        calls.knobs_json(knobs)
        if embedder is not None and not callable(getattr(embedder, "embed", None)):
            raise InvalidArgument("embedder must have an embed(texts) method returning one vector per text "
                                  f"(pgsift.Embedder), got {type(embedder).__name__}")
        names = collection if isinstance(collection, str) else list(collection)
        return cls(names, top_k, None if filter is None else dict(filter), knobs, embedder)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Settings:
        """These settings with one call's `top_k`, `filter` and knobs laid over them."""
        given = dict(overrides)
        top_k = given.pop("top_k", self.top_k)
        filter = given.pop("filter", self.filter)
        return Settings.checked(self.collection, top_k, filter, {**self.knobs, **given}, self.embedder)


def check_client(client: Any) -> Client | AsyncClient:
    if not isinstance(client, (Client, AsyncClient)):
        raise InvalidArgument(f"client must be a pgsift Client or AsyncClient, got {type(client).__name__}")
    return client


def query_vector(embedder: Any, texts: Sequence[str]) -> Any:
    """The query vector from the embedder, or None (no embedder, or only blank texts: a blank
    question is not embedded, as Client.search does not embed one). Several texts (LlamaIndex's
    custom_embedding_strs) give the mean of their vectors, scaled back to unit length."""
    texts = [t for t in texts if t.strip()]
    if embedder is None or not texts:
        return None
    vectors = np.asarray(embedder.embed(texts), dtype=np.float64)
    if len(texts) == 1:
        return vectors[0]
    mean = vectors.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else mean


def search(client: Client, settings: Settings, query: str, texts: Sequence[str], embedding: Any = None) -> list[Hit]:
    """Client.search with the settings; the question's vector is `embedding`, else the
    settings' embedder's of `texts` (else the client's embedder, in Client.search)."""
    if embedding is None:
        embedding = query_vector(settings.embedder, texts)
    with _serialized(client.source):
        result = client.search(settings.collection, query, embedding=embedding, top_k=settings.top_k,
                               filter=settings.filter, **settings.knobs)
    return passed(result.hits)


async def asearch(client: Client | AsyncClient, settings: Settings, query: str, texts: Sequence[str],
                  embedding: Any = None) -> list[Hit]:
    """`search`, awaited on an AsyncClient; a Client's search (and the embedding) runs in a
    worker thread, so that the event loop is not held up while the database answers."""
    if isinstance(client, Client):
        return await asyncio.to_thread(search, client, settings, query, texts, embedding)
    if embedding is None:
        embedding = query_vector(settings.embedder, texts)
    async with _aserialized(client.source):
        result = await client.search(settings.collection, query, embedding=embedding, top_k=settings.top_k,
                                     filter=settings.filter, **settings.knobs)
    return passed(result.hits)


# One search at a time on a single connection. A framework runs a retriever's questions
# side by side (LangChain's batch in threads, abatch and LlamaIndex's fusion retrievers as
# tasks), and two transactions cannot share one connection: psycopg would interleave them.
# A pool hands each search its own connection and needs no lock.
_LOCKS: weakref.WeakKeyDictionary[psycopg.Connection[Any], threading.Lock] = weakref.WeakKeyDictionary()
_ALOCKS: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], asyncio.Lock] = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()


def _serialized(source: Any) -> contextlib.AbstractContextManager[Any]:
    if not isinstance(source, psycopg.Connection):
        return contextlib.nullcontext()
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(source, threading.Lock())


def _aserialized(source: Any) -> contextlib.AbstractAsyncContextManager[Any]:
    if not isinstance(source, psycopg.AsyncConnection):
        return contextlib.nullcontext()
    with _LOCKS_LOCK:
        return _ALOCKS.setdefault(source, asyncio.Lock())


def sync_only(client: Client | AsyncClient, framework_call: str, async_call: str) -> Client:
    if isinstance(client, AsyncClient):
        raise InvalidArgument(f"this retriever holds an AsyncClient, which {framework_call} cannot drive: "
                              f"await {async_call}, or build the retriever with a Client")
    return client


def passed(hits: list[Hit]) -> list[Hit]:
    """The hits to hand on, in the order the search presents them: a hit whose text a better
    hit's window already holds (the neighbours knob: `window_of` set, `Hit.text` empty) is left
    out, so no text reaches the model twice."""
    return [h for h in hits if h.window_of is None]


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """What a retrieved document or node carries besides its text: where the chunk is, how
    it ranked and why, and the document's own metadata under "document_metadata"."""
    meta: dict[str, Any] = {
        "chunk_id": hit.chunk_id,
        "document_id": hit.document_id,
        "collection": hit.collection_name,
        "source_uri": hit.source_uri,
        "title": hit.title,
        "ordinal": hit.ordinal,
        "context": hit.context,
        "score": hit.score,
        "base_score": hit.base_score,
        "rank": hit.rank,
        "position": hit.position,
        "found_by": hit.found_by,
        "legs": list(hit.legs) if hit.legs is not None else None,
        "dense_rank": hit.dense_rank,
        "dense_distance": hit.dense_distance,
        "lexical_rank": hit.lexical_rank,
        "lexical_score": hit.lexical_score,
        "lexical_exact": hit.lexical_exact,
    }
    if hit.reranker is not None:
        meta["reranker"] = hit.reranker
    if hit.rerank_score is not None:
        meta["rerank_score"] = hit.rerank_score
        meta["fused_score"] = hit.fused_score
    if hit.merged:
        meta["chunk_ids"] = list(hit.chunk_ids or ())
    if hit.window_chunk_ids:
        meta["window_chunk_ids"] = list(hit.window_chunk_ids)
    meta["document_metadata"] = dict(hit.metadata)
    return meta


def node_id(hit: Hit) -> str:
    """A stable id: the chunk's (unique in its database; a merged hit is named by its best
    chunk)."""
    return f"pgsift:{hit.chunk_id}"
