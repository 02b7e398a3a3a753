"""A LlamaIndex retriever over pgsift: `PgsiftRetriever`. pip install 'pgsift[llamaindex]'.

    retriever = PgsiftRetriever(Client(conn), "handbook", top_k=4)
    nodes = retriever.retrieve("how long do refunds take")       # or: await retriever.aretrieve(...)

It is a `llama_index.core.retrievers.BaseRetriever` (usable in a RetrieverQueryEngine,
a router, a fusion retriever) that runs one Client.search per question and returns
`NodeWithScore`s of `TextNode`s. Nothing here needs LlamaIndex's Settings (no LLM, no
embedding model, no tokenizer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..client import Client
from ..client_async import AsyncClient
from ..models import Hit
from . import _shared

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
except ImportError as exc:
    raise _shared.unavailable("LlamaIndex", "llamaindex", exc) from exc

__all__ = ["PgsiftRetriever"]

# The metadata a node shows the LLM by default (LlamaIndex puts a node's metadata in front
# of its text); ranks and distances are for the application, not the model.
LLM_METADATA = ("title", "source_uri")


class PgsiftRetriever(BaseRetriever):
    """Hybrid retrieval from pgsift collections as LlamaIndex nodes.

    client: a pgsift `Client` or `AsyncClient`. With a Client, `retrieve` searches and
    `aretrieve` runs that search in a worker thread; with an AsyncClient, `aretrieve` awaits
    its search and `retrieve` is refused (an AsyncClient's connection belongs to its event
    loop).
    collection: a name, or a list of names searched as one pool.
    top_k: how many hits to ask for (Client.search's; 10 by default).
    filter: the metadata filter (Client.search's `filter`: equality or operators).
    embedder: embeds the question (anything with `embed(texts)`, pgsift.Embedder); left out,
    the client's embedder does, and with neither the search is lexical only. A QueryBundle
    that carries an `embedding` is searched with it; one with `custom_embedding_strs` (HyDE)
    with the mean of their vectors.
    knobs: keyword knobs of Client.search (`{"per_document_cap": 1, "rerank": False}`), laid
    over the collections' settings. Reranking is one of them: a collection that reranks
    reranks here too, and its hits carry `rerank_score`.
    llm_metadata_keys: the metadata keys the LLM sees in front of each node's text (the
    others go to `excluded_llm_metadata_keys`); none is embedded again
    (`excluded_embed_metadata_keys` holds them all).

    Each node's score is the hit's `score`; its TextNode has id "pgsift:<chunk_id>", the
    hit's text (its window with the neighbours knob), its document as SOURCE relationship
    ("pgsift:document:<document_id>", so `node.ref_doc_id` works) and metadata: chunk_id,
    document_id, collection, source_uri, title, ordinal, context, score, base_score, rank,
    position, found_by, legs, dense_rank, dense_distance, lexical_rank, lexical_score;
    rerank_score and fused_score when a reranker scored the hit; and the
    document's own metadata under "document_metadata". Nested rather than merged, so that a
    document's own "title" or "score" can never shadow pgsift's, and the document's metadata
    comes back exactly as written (the shape `filter` matches).

    Nodes come in the order the search presents them (`rank` is the strength; they differ
    only with lost_in_the_middle). A hit whose text a better hit's window already holds is
    left out.
    """

    def __init__(self, client: Client | AsyncClient, collection: str | Sequence[str], *, top_k: int = 10,
                 filter: dict[str, Any] | None = None, embedder: Any = None,
                 knobs: dict[str, Any] | None = None, llm_metadata_keys: Sequence[str] = LLM_METADATA,
                 callback_manager: CallbackManager | None = None, verbose: bool = False) -> None:
        self.client = _shared.check_client(client)
        self.settings = _shared.Settings.checked(collection, top_k, filter, knobs, embedder)
        self.llm_metadata_keys = tuple(llm_metadata_keys)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _query(self, query_bundle: QueryBundle) -> tuple[_shared.Settings, list[str], Any]:
        """The settings, the texts to embed and a ready vector. The bundle's own embedding is
        used only when neither this retriever nor its client has an embedder: LlamaIndex's
        other retrievers write their model's vector into the bundle they share (a fusion
        retriever hands one bundle to all), which would search pgsift's space with another
        model's vector."""
        settings = self.settings
        embedder = settings.embedder or self.client.embedder
        if settings.embedder is None and query_bundle.custom_embedding_strs:
            settings = _shared.Settings(settings.collection, settings.top_k, settings.filter, settings.knobs,
                                        self.client.embedder)
        ready = query_bundle.embedding if embedder is None else None
        return settings, list(query_bundle.custom_embedding_strs or [query_bundle.query_str]), ready

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        client = _shared.sync_only(self.client, "retrieve", "aretrieve")
        settings, texts, embedding = self._query(query_bundle)
        return [self._node(h) for h in _shared.search(client, settings, query_bundle.query_str, texts, embedding)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        settings, texts, embedding = self._query(query_bundle)
        hits = await _shared.asearch(self.client, settings, query_bundle.query_str, texts, embedding)
        return [self._node(h) for h in hits]

    def _node(self, hit: Hit) -> NodeWithScore:
        metadata = _shared.hit_metadata(hit)
        node = TextNode(
            id_=_shared.node_id(hit), text=hit.text, metadata=metadata,
            excluded_llm_metadata_keys=[k for k in metadata if k not in self.llm_metadata_keys],
            excluded_embed_metadata_keys=list(metadata),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"pgsift:document:{hit.document_id}")})
        return NodeWithScore(node=node, score=hit.score)
