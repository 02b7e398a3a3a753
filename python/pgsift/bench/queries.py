"""Every SQL string the benchmarks send (pgsift.bench), in one place: the client's own are in
pgsift.queries, which a benchmark uses where it sends what the client sends."""

from __future__ import annotations

from psycopg import sql

BENCH_INSERT_DOCUMENTS = """
insert into sift.documents (collection_id, source_uri)
select %(collection_id)s::bigint, 'doc-' || g from generate_series(%(first)s::int, %(last)s::int) g order by g
returning document_id
"""

BENCH_COPY_CHUNKS = "copy sift.chunks (document_id, ordinal, content, embedding) from stdin (format binary)"

BENCH_LISTS = """
select (select count(*) from sift.term_lists l where l.collection_id = c.collection_id),
       (select max(s.lists_min_df) from sift.collection_lexical_stats s where s.collection_id = c.collection_id)
from sift._collection(collection => %(collection)s::text) c
"""

BENCH_CHUNK_COUNT = """
select count(*) from sift.chunks
where collection_id = (select collection_id from sift._collection(collection => %(collection)s::text))
"""

BENCH_TERM_SHARES = """
select t.lexeme, t.df::float8 / %(n)s::float8 from sift.term_df t
where t.collection_id = (select collection_id from sift._collection(collection => %(collection)s::text))
"""

# Bulk loads drop the HNSW index and build it once at the end (as owner: the bench runs as
# the operator).
BENCH_ENSURE_INDEX = "select sift._ensure_dense_index(%(dims)s::integer, 'cosine')"


def bench_drop_index(name: str) -> sql.Composed:
    return sql.SQL("drop index {}").format(sql.Identifier("sift", name))


BENCH_WORK_MEM = "set work_mem = '1GB'"
BENCH_MAINTENANCE_WORK_MEM = "set maintenance_work_mem = '4GB'"
BENCH_RESET_WORK_MEM = "reset work_mem"
BENCH_VACUUM = "vacuum analyze sift.chunks, sift.term_blocks, sift.term_deltas, sift.term_lists"

# The vectors' trip alone (pgsift bench vectors): as pgvector text, parsed by the server (what
# 0.1.0 sent), and in binary. {vector} is pgvector's schema-qualified type.
BENCH_TRANSFER_TEXT = "select count(*) from unnest(%(v)s::text[]::{vector}[]) u(x) where x is not null"
BENCH_TRANSFER_BINARY = "select count(*) from unnest(%(v)b) u(x) where x is not null"

BENCH_SEARCH = """
select count(*) from sift.search(collection => %(c)s::text, query_text => %(q)s::text,
                                 query_embedding => %(e)s, match_count => 10, knobs => %(knobs)s::jsonb)
"""

# The candidate list the dense leg's HNSW walk runs with for a search of match_count rows
# (the collection's hnsw_ef_search, at least max(fetch_k, match_count)).
BENCH_LEG_EF_SEARCH = """
select sift._hnsw_ef_search((k ->> 'hnsw_ef_search')::integer,
                            greatest((k ->> 'fetch_k')::integer, %(match_count)s::integer))
from (select pg_catalog.jsonb_object_agg(x.name, x.value) as k
      from sift.knobs(collection => %(collection)s::text) x) s
"""

BENCH_LEXICAL_LEG = """
select array_agg(chunk_id order by lexical_rank) from sift.candidates(
    collection => %(c)s::text, query_text => %(q)s::text, query_embedding => null, knobs => %(knobs)s::jsonb)
"""

BENCH_STORAGE = """
select 'bm25 (stats + lists)', sum(pg_catalog.pg_total_relation_size(c.oid))
from pg_catalog.pg_class c where c.oid in ('sift.term_df'::regclass, 'sift.term_df_pending'::regclass,
                                'sift.collection_lexical_stats'::regclass, 'sift.term_lists'::regclass,
                                'sift.term_blocks'::regclass, 'sift.term_deltas'::regclass)
union all
select 'tsvector column + GIN', (select sum(pg_catalog.pg_column_size(search_vector)) from sift.chunks)
    + pg_catalog.pg_relation_size('sift.chunks_search_vector_idx')
"""

ROUNDTRIP = "select 1"

SERVER_VERSIONS = """
select pg_catalog.current_setting('server_version'),
       (select e.extversion from pg_catalog.pg_extension e where e.extname = 'vector')
"""

COLLECTION_CHUNK_IDS = """
select k.chunk_id from sift.chunks k
where k.collection_id = (select collection_id from sift._collection(collection => %(collection)s::text))
order by k.chunk_id
"""

CHUNK_SOURCES = """
select k.chunk_id, d.source_uri from sift.chunks k join sift.documents d using (document_id)
where k.collection_id = (select collection_id from sift._collection(collection => %(collection)s::text))
"""

# The structure benchmark: each chunk's document, section heading (hierarchical) or heading path (flat).
BENCH_STRUCTURE_CHUNKS = """
select k.chunk_id, d.source_uri, s.heading, k.context, k.token_count
from sift.chunks k
join sift.documents d on d.document_id = k.document_id
left join sift.sections s on s.section_id = k.section_id
where k.collection_id = (select collection_id from sift._collection(collection => %(collection)s::text))
"""

COUNT_DOCUMENTS = """
select count(*) from sift.documents
where collection_id = (select collection_id from sift._collection(collection => %(collection)s::text))
"""

ANALYZE = "analyze sift.documents, sift.chunks"

# bench compare: only the arguments every version of sift.search has taken.
BENCH_COMPARE_SEARCH = """
select count(*) from sift.search(collection => %(collection)s, query_text => %(query_text)s,
                                 query_embedding => %(query_embedding)s, match_count => %(match_count)s)
"""

# The peers' SQL (pgsift.bench.peers), in schema pgsift_peers of the bench database: a plain
# table holding one collection's chunks as the peers index them, and the searches each peer
# documents. @extschema:vector@ is pgvector's schema, written in before they run.
# The schema is pgsift's only while it carries this comment: a user's schema of that name is
# never dropped. (The mark keeps the module's old name: a schema an earlier run left is
# still known.)
PEERS_MARK = "pgsift.bench_peers: made for a benchmark run and dropped after it"
PEERS_OWNED = "select pg_catalog.obj_description(pg_catalog.to_regnamespace('pgsift_peers'), 'pg_namespace')"
PEERS_EXISTS = "select pg_catalog.to_regnamespace('pgsift_peers') is not null"
PEERS_RESET = "drop schema if exists pgsift_peers cascade"
PEERS_SCHEMA = "create schema pgsift_peers"
PEERS_COMMENT = sql.SQL("comment on schema pgsift_peers is {}").format(sql.Literal(PEERS_MARK))
PEERS_TABLE = """
create table pgsift_peers.chunks (
    id         bigint primary key,
    source_uri text not null,
    content    text not null,
    -- Supabase's documented column: a stored tsvector of the text, indexed by GIN.
    fts        tsvector generated always as (pg_catalog.to_tsvector('english', content)) stored,
    embedding  @extschema:vector@.vector({dims}) not null
)
"""
PEERS_FILL = """
insert into pgsift_peers.chunks (id, source_uri, content, embedding)
select k.chunk_id, d.source_uri, coalesce(d.title || ' ', '') || k.content, k.embedding
from sift.chunks k join sift.documents d on d.document_id = k.document_id
where k.collection_id = (select collection_id from sift._collection(collection => %(collection)s::text))
  and k.embedding is not null and @extschema:vector@.vector_dims(k.embedding) = {dims}
"""
# Over pgsift's own table instead of a copy (bench scale: a copy of a million chunks would need
# its own HNSW build): the collection's chunks as the peers' columns, on pgsift's indexes.
PEERS_VIEW = """
create view pgsift_peers.chunks as
select c.chunk_id as id, c.chunk_id::text as source_uri, c.content, c.search_vector as fts,
       c.embedding::@extschema:vector@.vector({dims}) as embedding
from sift.chunks c
where c.collection_id = {collection_id} and @extschema:vector@.vector_dims(c.embedding) = {dims}
"""
PEERS_INDEXES = (
    "create index on pgsift_peers.chunks using gin (fts)",
    # pgvector's HNSW for cosine (the plain pgvector query), and Supabase's for inner product.
    "create index on pgsift_peers.chunks using hnsw (embedding @extschema:vector@.vector_cosine_ops)",
    "create index on pgsift_peers.chunks using hnsw (embedding @extschema:vector@.vector_ip_ops)",
    "analyze pgsift_peers.chunks",
)
# Supabase's hybrid_search as its guide documents it (supabase.com/docs/guides/ai/hybrid-search):
# full text by websearch_to_tsquery ranked by ts_rank_cd, semantic by inner product, each its
# top least(match_count, 30) * 2, fused by RRF (k 50, weights 1 and 1), least(match_count, 30) rows.
# {semantic} is its distance operator: <#> over the copy (its own inner-product index), <=> over
# the view (pgsift's cosine index; the same order for unit vectors).
PEERS_HYBRID_FUNCTION = """
create function pgsift_peers.hybrid_search(
    query_text text, query_embedding @extschema:vector@.vector({dims}), match_count integer,
    full_text_weight double precision = 1, semantic_weight double precision = 1, rrf_k integer = 50)
returns setof pgsift_peers.chunks
language sql
as $$
    with full_text as (
        select id, pg_catalog.row_number() over (
                   order by pg_catalog.ts_rank_cd(fts, pg_catalog.websearch_to_tsquery('english', query_text)) desc)
                   as rank_ix
        from pgsift_peers.chunks
        where fts @@ pg_catalog.websearch_to_tsquery('english', query_text)
        order by rank_ix
        limit least(match_count, 30) * 2
    ), semantic as (
        select id, pg_catalog.row_number() over (
                   order by embedding operator(@extschema:vector@.{semantic}) query_embedding) as rank_ix
        from pgsift_peers.chunks
        order by rank_ix
        limit least(match_count, 30) * 2
    )
    select c.*
    from full_text
    full outer join semantic on full_text.id = semantic.id
    join pgsift_peers.chunks c on coalesce(full_text.id, semantic.id) = c.id
    order by coalesce(1.0 / (rrf_k + full_text.rank_ix), 0.0) * full_text_weight
             + coalesce(1.0 / (rrf_k + semantic.rank_ix), 0.0) * semantic_weight desc
    limit least(match_count, 30)
$$
"""
# The plain pgvector query through HNSW (ef_search at least the rows asked for, so it returns
# them all), full-text search ranked by ts_rank_cd over the same OR of the question's lexemes
# pgsift's lexical leg matches, and Supabase's function.
COLLECTION_ID = "select collection_id from sift._collection(collection => %(collection)s::text)"
# The plain table beside pgsift's ingest (pgsift.bench.plain): the same chunks as anyone would
# store them without pgsift (a stored english tsvector with GIN, pgvector HNSW for cosine with
# its default build options, as pgsift's), written the way pgsift's are.
PLAIN_TABLE = """
create table pgsift_peers.plain_chunks (
    id          bigint generated always as identity primary key,
    document_id bigint not null,
    ordinal     integer not null,
    content     text not null,
    fts         tsvector generated always as (pg_catalog.to_tsvector('english', content)) stored,
    embedding   @extschema:vector@.vector({dims}) not null,
    unique (document_id, ordinal)
)
"""
PLAIN_INDEXES = ("create index on pgsift_peers.plain_chunks using gin (fts)",)
PLAIN_COPY = "copy pgsift_peers.plain_chunks (document_id, ordinal, content, embedding) from stdin (format binary)"
PLAIN_HNSW = "create index on pgsift_peers.plain_chunks using hnsw (embedding @extschema:vector@.vector_cosine_ops)"
PLAIN_ANALYZE = "vacuum analyze pgsift_peers.plain_chunks"
# pgsift's write path with no BM25 upkeep (bench scale's floor): the statistics triggers off
# while it writes and deletes its documents (the table's owner only; it locks sift.chunks).
BENCH_OWNS_CHUNKS = """
select pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE')
from pg_catalog.pg_class c where c.oid = 'sift.chunks'::pg_catalog.regclass
"""
BENCH_STATS_TRIGGERS_OFF = ("alter table sift.chunks disable trigger chunks_stats_insert, "
                            "disable trigger chunks_stats_delete, disable trigger chunks_stats_update")
BENCH_STATS_TRIGGERS_ON = ("alter table sift.chunks enable trigger chunks_stats_insert, "
                           "enable trigger chunks_stats_delete, enable trigger chunks_stats_update")
PLAIN_DELETE = "delete from pgsift_peers.plain_chunks where document_id = any (%(ids)s::bigint[])"
PLAIN_INSERT = """
insert into pgsift_peers.plain_chunks (document_id, ordinal, content, embedding)
select * from unnest(%(doc)s::bigint[], %(ordinal)s::integer[], %(content)s::text[], %(embedding)b)
"""
PEERS_COUNT = "select count(*) from pgsift_peers.chunks"
PEERS_GET_EF_SEARCH = "select pg_catalog.current_setting('hnsw.ef_search', true)"
PEERS_EF_SEARCH = "select pg_catalog.set_config('hnsw.ef_search', %(ef)s::text, false)"
PEERS_PGVECTOR = """
select source_uri from pgsift_peers.chunks
order by embedding operator(@extschema:vector@.<=>) %(e)s::@extschema:vector@.vector limit %(k)s
"""
PEERS_TS_RANK_CD = """
select c.source_uri
from pgsift_peers.chunks c, sift.lexical_query(query_text => %(q)s::text) q
where c.fts @@ q
order by pg_catalog.ts_rank_cd(c.fts, q) desc, c.id
limit %(k)s
"""
PEERS_SUPABASE = """
select source_uri from pgsift_peers.hybrid_search(query_text => %(q)s::text,
    query_embedding => %(e)s::@extschema:vector@.vector, match_count => %(k)s)
"""

# bench profile: the comparable raw queries (pgsift's own table and HNSW index, the collection
# filter inside the walk; {dims} and pgvector's schema written in by peers.render), the
# search itself, and the function statistics it is split by.
PROFILE_WALK = """
select c.chunk_id, c.document_id, c.content
from sift.chunks c
where c.collection_id = %(cid)s::bigint and @extschema:vector@.vector_dims(c.embedding) = {dims}
order by c.embedding::@extschema:vector@.vector({dims}) operator(@extschema:vector@.<=>)
         %(e)s::@extschema:vector@.vector({dims})
limit %(k)s
"""
PROFILE_RAW_IDS = PROFILE_WALK.replace("c.chunk_id, c.document_id, c.content", "c.chunk_id", 1)
PROFILE_RAW_HITS = (
    "select w.chunk_id, w.content, d.title, d.source_uri, d.metadata\nfrom (" + PROFILE_WALK + ") w\n"
    "join sift.documents d on d.document_id = w.document_id")
# The raw walks' settings (pgsift.bench.peers.RawWalk), set before each and restored after: a
# relaxed-order iterative scan where pgvector has one (older versions reject the setting), as the
# dense leg walks; a null value resets a setting to the session's default.
PROFILE_WALK_SAVED = """
select pg_catalog.current_setting('hnsw.ef_search', true), pg_catalog.current_setting('hnsw.iterative_scan', true)
"""
PROFILE_WALK_SETTINGS = """
select pg_catalog.set_config('hnsw.ef_search', %(ef)s::text, false),
       case when sift._pgvector_has_iterative_scan()
            then pg_catalog.set_config('hnsw.iterative_scan', %(iterative)s::text, false) end
"""
PROFILE_SEARCH = """
select * from sift.search(collection => %(c)s::text, query_text => %(q)s::text, query_embedding => %(e)s,
                          match_count => %(k)s::integer, knobs => %(knobs)s::jsonb)
"""
PROFILE_SEARCH_IDS = "select chunk_id from (" + PROFILE_SEARCH + ") h"
PROFILE_READ_HITS = """
select c.chunk_id, c.content, d.title, d.source_uri, d.metadata
from sift.chunks c join sift.documents d on d.document_id = c.document_id
where c.chunk_id = any (%(ids)s::bigint[])
"""
# The same read timed by the server (its execution, as sift.search's time is): a client's
# round trip and the rows' decoding are no part of a search's time on the server.
PROFILE_READ_HITS_TIMED = "explain (analyze, timing off, summary on, format json) " + PROFILE_READ_HITS
PROFILE_TRACK_FUNCTIONS = "set track_functions = 'all'"
PROFILE_TRACK_FUNCTIONS_OFF = "reset track_functions"
PROFILE_FLUSH = "select pg_catalog.pg_stat_force_next_flush()"
PROFILE_CLEAR_SNAPSHOT = "select pg_catalog.pg_stat_clear_snapshot()"
PROFILE_FUNCTIONS = """
select f.funcname::text, f.calls, f.total_time, f.self_time
from pg_catalog.pg_stat_user_functions f where f.schemaname = 'sift'
"""

# bench exact: the dense leg alone (sift.candidates without text), exact or through HNSW by knob.
BENCH_EXACT_DENSE = """
select chunk_id from sift.candidates(collection => %(c)s::text, query_text => '', query_embedding => %(e)s,
                                     match_count => %(n)s::integer, knobs => %(knobs)s::jsonb)
order by dense_rank, chunk_id
"""
BENCH_EXACT_VACUUM = "vacuum sift.chunks"
BENCH_EXACT_ANALYZE = "analyze sift.chunks"
BENCH_EXACT_INDEX_ROWS = """
select c.reltuples::bigint from pg_catalog.pg_class c
where c.oid = pg_catalog.to_regclass('sift.chunks_hnsw_cosine_' || %(dims)s::integer)
"""

# bench rls: a role mapped to the bench tenant, and the dense leg's statement explained as it.
BENCH_MAP_ROLE = "select sift.map_role(role_name => %(role)s::name, tenant => %(tenant)s::text)"
BENCH_UNMAP_ROLE = "delete from sift.tenant_roles where role_name = %(role)s::name"
BENCH_DENSE_LEG_SQL = """
select sift._dense_leg_sql(dims => %(dims)s::integer, distance => 'cosine', exact => false, filtered => false)
"""


def bench_explain_leg(vector: str, collection_ids: list[int]) -> sql.Composed:
    """explain (analyze, buffers) of the prepared dense leg, its arguments as literals
    (EXPLAIN EXECUTE takes no bound parameters)."""
    return sql.SQL("explain (analyze, buffers, format json) execute pgsift_bench_leg({}, {}, '{{}}', 10)").format(
        sql.Literal(vector), sql.Literal(collection_ids))


RRF = """
select chunk_id from sift.rrf(dense_ids => %(d)s::bigint[], lexical_ids => %(l)s::bigint[],
                              dense_weight => %(w)s::float8, rrf_k => %(k)s::float8)
order by fused_rank limit %(n)s
"""
