"""A LangChain retriever over pgsift: `PgsiftRetriever`. pip install 'pgsift[langchain]'.

    retriever = PgsiftRetriever(client=Client(conn), collection="handbook", top_k=4)
    docs = retriever.invoke("how long do refunds take")          # or: await retriever.ainvoke(...)

It is a `langchain_core.retrievers.BaseRetriever` (a Runnable: invoke, ainvoke, batch,
abatch, chains) that runs one Client.search per question.
"""

from __future__ import annotations

from typing import Any

from ..client import Client
from ..client_async import AsyncClient
from ..models import Hit
from . import _shared

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, Field, model_validator
except ImportError as exc:
    raise _shared.unavailable("LangChain", "langchain", exc) from exc

__all__ = ["PgsiftRetriever"]


class PgsiftRetriever(BaseRetriever):
    """Hybrid retrieval from pgsift collections as LangChain Documents.

    client: a pgsift `Client` or `AsyncClient`. With a Client, `invoke` searches and `ainvoke`
    runs that search in a worker thread; with an AsyncClient, `ainvoke` awaits its search and
    `invoke` is refused (an AsyncClient's connection belongs to its event loop).
    collection: a name, or a list of names searched as one pool.
    top_k: how many hits to ask for (Client.search's; 10 by default).
    filter: the metadata filter (Client.search's `filter`: equality or operators).
    embedder: embeds the question (anything with `embed(texts)`, pgsift.Embedder); left out,
    the client's embedder does, and with neither the search is lexical only.
    knobs: keyword knobs of Client.search (`{"per_document_cap": 1, "rerank": False}`), laid
    over the collections' settings. Reranking is one of them: a collection that reranks
    reranks here too, and its hits carry `rerank_score`.

    One call's `invoke(question, top_k=..., filter=..., **knobs)` overrides the retriever's.

    Each Document has `id` "pgsift:<chunk_id>", `page_content` the hit's text (its window
    with the neighbours knob) and `metadata`: chunk_id, document_id, collection, source_uri
    (and `source`, LangChain's usual name for it), title, ordinal, context, score,
    base_score, rank, position, found_by, legs, dense_rank, dense_distance, lexical_rank,
    lexical_score; rerank_score and fused_score when a reranker scored the hit;
    and the document's own metadata under "document_metadata". Nested rather than merged, so
    that a document's own "title" or "score" can never shadow pgsift's, and the document's
    metadata comes back exactly as written (the shape `filter` matches).

    Documents come in the order the search presents them (`rank` is the strength; they
    differ only with lost_in_the_middle). A hit whose text a better hit's window already
    holds is left out.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Client | AsyncClient
    collection: str | list[str]
    top_k: int = 10
    filter: dict[str, Any] | None = None
    embedder: Any = None
    knobs: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> PgsiftRetriever:
        _shared.check_client(self.client)
        self._settings()
        return self

    def _settings(self, overrides: dict[str, Any] | None = None) -> _shared.Settings:
        settings = _shared.Settings.checked(self.collection, self.top_k, self.filter, self.knobs, self.embedder)
        return settings.with_overrides(overrides) if overrides else settings

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **overrides: Any) -> list[Document]:
        client = _shared.sync_only(self.client, "invoke", "ainvoke")
        settings = self._settings(overrides)
        return [_document(h) for h in _shared.search(client, settings, query, [query])]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **overrides: Any) -> list[Document]:
        settings = self._settings(overrides)
        hits = await _shared.asearch(self.client, settings, query, [query])
        return [_document(h) for h in hits]


def _document(hit: Hit) -> Document:
    metadata = _shared.hit_metadata(hit)
    metadata["source"] = hit.source_uri
    return Document(id=_shared.node_id(hit), page_content=hit.text, metadata=metadata)
