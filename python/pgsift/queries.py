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

SCHEMA_VERSION = (
    "select coalesce(max(version), '') from sift.schema_migrations"
)

COLLECTION_COLUMNS = (
    "collection_id, tenant, name, search_language::text as search_language, embedding_dims, "
    "distance::text as distance, hybrid, dense_weight::float8 as dense_weight, "
    "rrf_k::float8 as rrf_k, fetch_k::int as fetch_k, exact_search_limit::int as exact_search_limit, "
    "description, lexical_scorer::text as lexical_scorer, bm25_k1::float8 as bm25_k1, "
    "bm25_b::float8 as bm25_b, created_at"
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

DELETE_CHUNKS_OF_DOCUMENT = "delete from sift.chunks where document_id = %(document_id)s::bigint"

COPY_CHUNKS = (
    "copy sift.chunks (document_id, ordinal, content, context, token_count, embedding) from stdin"
)

DELETE_DOCUMENT = """
select sift.delete_document(collection => %(collection)s::text, source_uri => %(source_uri)s::text,
                            tenant => %(tenant)s::text)
"""

_SEARCH_ARGS = """
    collection => %(collection)s::text,
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

SEARCH = f"""
select rank, chunk_id, document_id, source_uri, title, ordinal, content, context, metadata,
       score, found_by, dense_rank, dense_distance, lexical_rank, lexical_score, legs, lexical_query
from sift.search({_SEARCH_ARGS})
"""

EXPLAIN = f"""
select fused_rank, chunk_id, document_id, source_uri, title, ordinal, found_by, dense_rank,
       dense_distance, lexical_rank, lexical_score, score, kept, reason, legs, lexical_query
from sift.explain({_SEARCH_ARGS},
    chunk_ids => %(chunk_ids)s::bigint[])
"""

LEXICAL_QUERY = """
select sift.lexical_query(query_text => %(query_text)s::text,
                          search_language => %(search_language)s::regconfig)::text
"""

REFRESH_LEXICAL_STATS = """
select pending_folded, lists_built
from sift.refresh_lexical_stats(collection => %(collection)s::text, tenant => %(tenant)s::text)
"""

