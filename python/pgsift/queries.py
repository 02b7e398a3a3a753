"""Every SQL string the Python package sends, in one place.

Functions are called with named arguments and explicit casts so a signature
change fails loudly. Embeddings travel as pgvector's text form with no cast:
the function's own `vector` parameter types them, so the client never needs
to know which schema the extension lives in (public, extensions, ...).
"""

from psycopg import sql

MIGRATE_PRELUDE = (
    "select pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('pgsift.migrate', 0))",
    "create extension if not exists vector",
    "create schema if not exists sift",
    """create table if not exists sift.schema_migrations (
        version    text primary key,
        sha256     text not null,
        applied_at timestamptz not null default now())""",
    # Functions capture this path (`set search_path from current`), so vector
    # resolves wherever the extension was installed.
    """select pg_catalog.set_config('search_path', pg_catalog.format('sift, %I, pg_catalog, pg_temp',
        (select n.nspname from pg_catalog.pg_extension e
         join pg_catalog.pg_namespace n on n.oid = e.extnamespace
         where e.extname = 'vector')), true)""",
)

APPLIED_MIGRATIONS = "select version, sha256 from sift.schema_migrations order by version"

RECORD_MIGRATION = (
    "insert into sift.schema_migrations (version, sha256) values (%(version)s::text, %(sha256)s::text)"
)


COLLECTION_COLUMNS = (
    "collection_id, tenant, name, search_language::text as search_language, embedding_dims, "
    "distance::text as distance, hybrid, dense_weight::float8 as dense_weight, "
    "rrf_k::float8 as rrf_k, fetch_k::int as fetch_k, exact_search_limit::int as exact_search_limit, "
    "description, lexical_scorer::text as lexical_scorer, bm25_k1::float8 as bm25_k1, "
    "bm25_b::float8 as bm25_b, created_at, recency_field::text as recency_field, "
    "recency_half_life::interval as recency_half_life, recency_weight::float8 as recency_weight, "
    "recency_ceiling::float8 as recency_ceiling, per_document_cap::int as per_document_cap, "
    "mmr_lambda::float8 as mmr_lambda, boost::float8 as boost, "
    "score_threshold::float8 as score_threshold, lost_in_the_middle"
)

# create_collection is composed from the arguments actually given, so the
# defaults live in one place: the SQL function's signature.
CREATE_COLLECTION_CASTS = {
    "collection": "text",
    "embedding_dims": "integer",
    "tenant": "text",
    "search_language": "text",
    "distance": "text::sift.distance",
    "hybrid": "boolean",
    "dense_weight": "float8::sift.dense_weight",
    "rrf_k": "float8::sift.rrf_k",
    "fetch_k": "integer::sift.fetch_k",
    "exact_search_limit": "integer::sift.exact_search_limit",
    "description": "text",
    "lexical_scorer": "text::sift.lexical_scorer",
    "bm25_k1": "float8::sift.bm25_k1",
    "bm25_b": "float8::sift.bm25_b",
}


def create_collection(given: list[str]) -> sql.Composed:
    args = sql.SQL(", ").join(
        sql.SQL("{} => {}::" + CREATE_COLLECTION_CASTS[name]).format(
            sql.Identifier(name), sql.Placeholder(name))
        for name in given)
    return sql.SQL("select " + COLLECTION_COLUMNS + " from sift.create_collection({})").format(args)


ALTER_COLLECTION = f"""
select {COLLECTION_COLUMNS} from sift.alter_collection(
    collection => %(name)s::text,
    tenant => %(tenant)s::text,
    search_language => %(search_language)s::text,
    hybrid => %(hybrid)s::boolean,
    dense_weight => %(dense_weight)s::float8::sift.dense_weight,
    rrf_k => %(rrf_k)s::float8::sift.rrf_k,
    fetch_k => %(fetch_k)s::integer::sift.fetch_k,
    exact_search_limit => %(exact_search_limit)s::integer::sift.exact_search_limit,
    description => %(description)s::text,
    lexical_scorer => %(lexical_scorer)s::text::sift.lexical_scorer,
    bm25_k1 => %(bm25_k1)s::float8::sift.bm25_k1,
    bm25_b => %(bm25_b)s::float8::sift.bm25_b)
"""

# The finalize stage's settings of a collection (sift.alter_ranking); create and
# alter send them after sift.create_collection / sift.alter_collection, in the
# same transaction.
RANKING_SETTING_CASTS = {
    "recency_field": "text::sift.recency_field",
    "recency_half_life": "interval::sift.recency_half_life",
    "recency_weight": "float8::sift.recency_weight",
    "recency_ceiling": "float8::sift.recency_ceiling",
    "per_document_cap": "integer::sift.per_document_cap",
    "mmr_lambda": "float8::sift.mmr_lambda",
    "boost": "float8::sift.boost",
    "score_threshold": "float8::sift.score_threshold",
    "lost_in_the_middle": "boolean",
}

ALTER_RANKING = f"""
select {COLLECTION_COLUMNS} from sift.alter_ranking(
    collection => %(name)s::text,
    tenant => %(tenant)s::text,
    recency_field => %(recency_field)s::text::sift.recency_field,
    recency_half_life => %(recency_half_life)s::interval::sift.recency_half_life,
    recency_weight => %(recency_weight)s::float8::sift.recency_weight,
    recency_ceiling => %(recency_ceiling)s::float8::sift.recency_ceiling,
    per_document_cap => %(per_document_cap)s::integer::sift.per_document_cap,
    mmr_lambda => %(mmr_lambda)s::float8::sift.mmr_lambda,
    boost => %(boost)s::float8::sift.boost,
    score_threshold => %(score_threshold)s::float8::sift.score_threshold,
    lost_in_the_middle => %(lost_in_the_middle)s::boolean,
    reset => %(reset)s::text[])
"""

GET_COLLECTION = f"""
select {COLLECTION_COLUMNS} from sift._collection(tenant => %(tenant)s::text, collection => %(name)s::text)
"""

LIST_COLLECTIONS = f"""
select {COLLECTION_COLUMNS} from sift.collections
where tenant = %(tenant)s::text order by name, collection_id
"""

DROP_COLLECTION = "select sift.drop_collection(collection => %(name)s::text, tenant => %(tenant)s::text)"

UPSERT_DOCUMENT = """
insert into sift.documents as d
    (collection_id, source_uri, title, language, metadata, created_at, modified_at)
values (%(collection_id)s::bigint, %(source_uri)s::text, %(title)s::text, %(language)s::text,
        %(metadata)s::jsonb, %(created_at)s::timestamptz, %(modified_at)s::timestamptz)
on conflict (collection_id, source_uri) do update set
    title = excluded.title, language = excluded.language, metadata = excluded.metadata,
    created_at = excluded.created_at, modified_at = excluded.modified_at, uploaded_at = now()
returning d.document_id
"""

# Exhaustive BM25 for the rest of the transaction (benchmarks compare the bounded leg with it).
LIFT_LEXICAL_BUDGET = (
    "select set_config('pgsift.lexical_budget', '2000000000', true), "
    "set_config('pgsift.lexical_exact_limit', '2000000000', true)"
)

DELETE_CHUNKS_OF_DOCUMENTS = "delete from sift.chunks where document_id = any(%(document_ids)s::bigint[])"

COPY_CHUNKS = (
    "copy sift.chunks (document_id, ordinal, content, context, token_count, embedding) from stdin"
)

DELETE_DOCUMENT = """
select sift.delete_document(collection => %(collection)s::text, source_uri => %(source_uri)s::text,
                            tenant => %(tenant)s::text)
"""

# Per-call overrides of the finalize stage, shared by search, explain and finalize.
_RANKING_ARGS = """
    recency_field => %(recency_field)s::text::sift.recency_field,
    recency_half_life => %(recency_half_life)s::interval::sift.recency_half_life,
    recency_weight => %(recency_weight)s::float8::sift.recency_weight,
    recency_bias => %(recency_bias)s::float8::sift.recency_bias,
    per_document_cap => %(per_document_cap)s::integer::sift.per_document_cap,
    mmr_lambda => %(mmr_lambda)s::float8::sift.mmr_lambda,
    boosts => %(boosts)s::float8[]::sift.boost[],
    score_threshold => %(score_threshold)s::float8::sift.score_threshold,
    lost_in_the_middle => %(lost_in_the_middle)s::boolean"""

_RETRIEVAL_ARGS = """
    collection => %(collection)s::text,
    collections => %(collections)s::text[],
    query_text => %(query_text)s::text,
    query_embedding => %(query_embedding)s,
    match_count => %(match_count)s::integer::sift.match_count,
    tenant => %(tenant)s::text,
    filter => %(filter)s::jsonb,
    hybrid => %(hybrid)s::boolean,
    dense_weight => %(dense_weight)s::float8::sift.dense_weight,
    rrf_k => %(rrf_k)s::float8::sift.rrf_k,
    fetch_k => %(fetch_k)s::integer::sift.fetch_k,
    exact_search_limit => %(exact_search_limit)s::integer::sift.exact_search_limit,
    lexical_scorer => %(lexical_scorer)s::text::sift.lexical_scorer,
    bm25_k1 => %(bm25_k1)s::float8::sift.bm25_k1,
    bm25_b => %(bm25_b)s::float8::sift.bm25_b"""

# The rerank path: the fused pool (widened to the reranker's rerank_top_n), best first.
RERANK_POOL = f"""
select chunk_id, score, found_by, dense_rank, dense_distance, lexical_rank, lexical_score, legs,
       lexical_query
from sift.candidates({_RETRIEVAL_ARGS})
order by fused_rank, chunk_id
limit %(match_count)s
"""

_SEARCH_ARGS = _RETRIEVAL_ARGS + "," + _RANKING_ARGS

SEARCH = f"""
select rank, chunk_id, document_id, source_uri, title, ordinal, content, context, metadata,
       score, found_by, dense_rank, dense_distance, lexical_rank, lexical_score, legs, lexical_query,
       collection_name, base_score, pool_rank, recency_factor, boost, position, threshold_applied,
       below_threshold
from sift.search({_SEARCH_ARGS})
"""

EXPLAIN = f"""
select fused_rank, chunk_id, document_id, source_uri, title, ordinal, found_by, dense_rank,
       dense_distance, lexical_rank, lexical_score, score, kept, reason, legs, lexical_query,
       collection_name, base_score, recency_date, recency_factor, boost, cap_status,
       mmr_similarity, mmr_penalty, final_rank, position, cut_by, threshold_applied,
       below_threshold
from sift.explain({_SEARCH_ARGS},
    chunk_ids => %(chunk_ids)s::bigint[])
"""

FINALIZE = f"""
select rank, position, chunk_id, document_id, collection_name, source_uri, title, ordinal,
       content, context, metadata, score, base_score, pool_rank, recency_factor, boost,
       threshold_applied, below_threshold
from sift.finalize(
    collection => %(collection)s::text,
    collections => %(collections)s::text[],
    chunk_ids => %(chunk_ids)s::bigint[],
    scores => %(scores)s::float8[],
    match_count => %(match_count)s::integer::sift.match_count,
    tenant => %(tenant)s::text,{_RANKING_ARGS})
"""


REFRESH_LEXICAL_STATS = """
select pending_folded, lists_built
from sift.refresh_lexical_stats(collection => %(collection)s::text, tenant => %(tenant)s::text)
"""

# The finalize benchmark (bench_finalize.py): its scratch collection's chunks, versions,
# and the cheapest statement there is (the round trip the timings sit on).
ROUNDTRIP = "select 1"

COLLECTION_CHUNK_IDS = """
select k.chunk_id from sift.chunks k
join sift.collections c on c.collection_id = k.collection_id
where c.tenant = %(tenant)s::text and c.name = %(name)s::text
order by k.chunk_id
"""

SERVER_VERSIONS = """
select pg_catalog.current_setting('server_version'),
       (select e.extversion from pg_catalog.pg_extension e where e.extname = 'vector')
"""
