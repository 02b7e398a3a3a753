"""Every SQL string of pgsift.rerank: named arguments, explicit casts (see queries.py)."""

from __future__ import annotations

RERANKER_COLUMNS = (
    "reranker_id, reranker_tenant as tenant, alias, provider, model, base_url, secret_ref, "
    "timeout_ms, deadline_ms, max_attempts, context_chars, rerank_top_n, chosen_by, refused"
)

RERANKER_FOR = f"""
select {RERANKER_COLUMNS}
from sift.reranker_for(tenant => %(tenant)s::text, collections => %(collections)s::text[])
"""

RERANK_TEXTS = """
select ord, chunk_id, document
from sift.rerank_texts(chunk_ids => %(chunk_ids)s::bigint[], tenant => %(tenant)s::text)
"""

REGISTER_RERANKER = """
select reranker_id, tenant, alias, provider, model, base_url, secret_ref,
       timeout_ms::int as timeout_ms, deadline_ms::int as deadline_ms,
       max_attempts::int as max_attempts, context_chars::int as context_chars, is_default
from sift.register_reranker(
    alias => %(alias)s::text, provider => %(provider)s::text, tenant => %(tenant)s::text,
    model => %(model)s::text, base_url => %(base_url)s::text, secret_ref => %(secret_ref)s::text,
    timeout_ms => %(timeout_ms)s::integer::sift.rerank_timeout_ms,
    deadline_ms => %(deadline_ms)s::integer::sift.rerank_deadline_ms,
    max_attempts => %(max_attempts)s::integer::sift.rerank_attempts,
    context_chars => %(context_chars)s::integer::sift.rerank_context_chars,
    is_default => %(is_default)s::boolean)
"""

DROP_RERANKER = "select sift.drop_reranker(alias => %(alias)s::text, tenant => %(tenant)s::text)"

SET_COLLECTION_RERANKER = """
select reranker_alias, rerank_enabled, rerank_top_n::int as rerank_top_n
from sift.set_collection_reranker(
    collection => %(collection)s::text, tenant => %(tenant)s::text, alias => %(alias)s::text,
    enabled => %(enabled)s::boolean,
    rerank_top_n => %(rerank_top_n)s::integer::sift.rerank_top_n,
    reset => %(reset)s::text[])
"""

RECORD_USAGE = """
select sift.record_rerank_usage(
    tenant => %(tenant)s::text, reranker_alias => %(reranker_alias)s::text,
    provider => %(provider)s::text, model => %(model)s::text, documents => %(documents)s::integer,
    latency_ms => %(latency_ms)s::float8, ok => %(ok)s::boolean, tokens => %(tokens)s::bigint,
    search_units => %(search_units)s::float8, attempts => %(attempts)s::integer,
    error => %(error)s::text)
"""
