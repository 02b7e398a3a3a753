"""Every SQL string the Python package sends, in one place.

Functions are called with named arguments and explicit casts, so a signature
change fails loudly. Embeddings travel as pgvector's text form with no cast:
the function's own vector parameter types them, so the client never needs to
know which schema the extension lives in. Knobs travel as one jsonb object;
no knob is named here.
"""

from __future__ import annotations

import dataclasses

from psycopg import sql

from . import models

# -- install -----------------------------------------------------------------------

MIGRATE_PRELUDE = (
    # With the caller's own search_path: the extension goes where they would put it.
    "create extension if not exists vector",
    "create schema if not exists sift",
    """create table if not exists sift.schema_migrations (
        version    text primary key,
        sha256     text not null,
        applied_at timestamptz not null default pg_catalog.now())""",
    # Two migrates run one after the other: this mode conflicts with itself, and no role
    # but the owner has a privilege on the ledger, so none can take a lock that holds a
    # migrate up (an advisory key could be taken by any role). Two first installs meet
    # on the statements above instead: the second fails there, and migrate tries again.
    "lock table sift.schema_migrations in share row exclusive mode",
    """create table if not exists sift.schema_functions (
        sha256     text not null,
        applied_at timestamptz not null default pg_catalog.now())""",
    # Nothing below resolves through a schema another role can create in.
    "select pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true)",
)

# A hot standby takes no DDL: migrate there only checks that it follows an up-to-date primary.
STANDBY_STATE = """
select pg_catalog.pg_is_in_recovery(),
       pg_catalog.to_regclass('sift.schema_migrations') is not null
       and pg_catalog.to_regclass('sift.schema_functions') is not null,
       exists (select 1 from pg_catalog.pg_extension where extname = 'pgsift')
"""

# Quoted as the install script quotes it, so both install the same text.
VECTOR_SCHEMA = """
select pg_catalog.quote_ident(n.nspname) from pg_catalog.pg_extension e
join pg_catalog.pg_namespace n on n.oid = e.extnamespace
where e.extname = 'vector'
"""

# pgvector's vector type and its array type, wherever the extension lives (not by search_path).
VECTOR_TYPES = """
select t.oid::integer, t.typarray::integer from pg_catalog.pg_extension e
join pg_catalog.pg_type t on t.typnamespace = e.extnamespace and t.typname = 'vector'
where e.extname = 'vector'
"""

APPLIED_MIGRATIONS = "select version, sha256 from sift.schema_migrations order by version"

RECORD_MIGRATION = (
    "insert into sift.schema_migrations (version, sha256) values (%(version)s::text, %(sha256)s::text)"
)

APPLIED_FUNCTIONS = "select sha256 from sift.schema_functions"

RECORD_FUNCTIONS = """
with gone as (delete from sift.schema_functions)
insert into sift.schema_functions (sha256) values (%(sha256)s::text)
"""

# DDL on tables that searches read waits at most this long for its locks, then
# gives them all back and retries: a search never waits on a migrate that
# waits on it (no deadlock), and never for long.
LOCK_TIMEOUT = "select pg_catalog.set_config('lock_timeout', %(ms)s::text, true)"

SIFT_TABLES = """
select c.oid::regclass::text from pg_catalog.pg_class c
where c.relnamespace = 'sift'::regnamespace and c.relkind in ('r', 'p')
order by c.relname
"""


def lock_tables(names: list[str]) -> sql.Composed:
    """LOCK every table of schema sift, in one order (names as regclass text: sift.x)."""
    return sql.SQL("lock table {} in access exclusive mode").format(
        sql.SQL(", ").join(sql.SQL(n) for n in names))


# -- rows the client reads: every column of a model, in its order ---------------------

def columns(model: type, alias: str = "") -> sql.Composable:
    prefix = f"{alias}." if alias else ""
    return sql.SQL(", ").join(sql.SQL(prefix) + sql.Identifier(f.name) for f in dataclasses.fields(model)
                              if not (model is models.Hit and f.name in ("rerank_score", "fused_score")))


def _select(model: type, function: str, args: str) -> str:
    """The statement reading a function's rows as the model's fields, rendered once, here: a
    composed statement is rendered again on every execute (~0.08 ms for a hit's columns)."""
    return sql.SQL("select {} from " + function + "(" + args + ")").format(columns(model)).as_string()


# -- tenant and session settings ------------------------------------------------------------
# Every transaction of the client starts with one of these (Client._begin says in which round
# trip). A pooled server connection may carry another client's session settings, and three of
# them change an answer, not just its look: extra_float_digits (-15 cuts every float to one
# digit, in the text the server sends and wherever a function turns a float into text or JSON:
# Hit.leg_details, a collection's settings), IntervalStyle (a duration's text: "30 days" or
# "P30D") and gin_fuzzy_search_limit (a text index scan past it returns a random subset of its
# matches; pgsift's functions that scan the index set it themselves, this covers the client's
# own statements too). The client pins all three for its transaction: the first two to the
# server's defaults, the third to 0 (no limit). PgBouncer restores none of them for the next
# client; it gives each client back its own DateStyle, TimeZone, client_encoding,
# standard_conforming_strings and application_name, which stay the application's to set
# (docs/trust.md#poolers-and-standbys).
_PIN = ("pg_catalog.set_config('extra_float_digits', '1', true), "
        "pg_catalog.set_config('IntervalStyle', 'postgres', true), "
        "pg_catalog.set_config('gin_fuzzy_search_limit', '0', true)")

PIN_SETTINGS = "select " + _PIN

# Client._one_trip's own transaction, sent in the pipeline with its statements: COMMIT as a
# statement of its own, so that an error at commit (a deferred constraint, a serialization
# failure) comes back as its result; ROLLBACK when the block fails in Python, or after a
# statement failed (the transaction is then left aborted at the Sync).
BEGIN = "begin"
COMMIT = "commit"
ROLLBACK = "rollback"

SET_TENANT = "select sift.set_tenant(tenant => %(tenant)s::text), " + _PIN

CURRENT_TENANT = "select sift.current_tenant()"

# -- collections -------------------------------------------------------------------------

COLLECTION_INFO = _select(models.Collection, "sift.collection_info", "collection => %(collection)s::text")

# create_collection is composed from the arguments actually given, so the
# defaults live in one place: the SQL function's signature.
CREATE_COLLECTION_ARGS = {
    "collection": "text",
    "embedding_dims": "integer",
    "search_language": "text",
    "distance": "text",
    "description": "text",
    "knobs": "jsonb",
    "dense_precision": "text",
    "hnsw_m": "integer",
    "hnsw_ef_construction": "integer",
}


def create_collection(given: list[str]) -> sql.Composed:
    args = sql.SQL(", ").join(
        sql.SQL("{} => {}::" + CREATE_COLLECTION_ARGS[name]).format(sql.Identifier(name), sql.Placeholder(name))
        for name in given)
    return sql.SQL("select c.name from sift.create_collection({}) c").format(args)


ALTER_COLLECTION = """
select c.name from sift.alter_collection(
    collection => %(collection)s::text, settings => %(settings)s::jsonb, reset => %(reset)s::text[]) c
"""

DROP_COLLECTION = "select sift.drop_collection(collection => %(collection)s::text)"

KNOBS = _select(models.Knob, "sift.knobs", "collection => %(collection)s::text, knobs => %(knobs)s::jsonb")

# -- documents -----------------------------------------------------------------------------

UPSERT_DOCUMENT = """
insert into sift.documents as d
    (collection_id, source_uri, title, language, metadata, created_at, modified_at)
values (%(collection_id)s::bigint, %(source_uri)s::text, %(title)s::text, %(language)s::text,
        %(metadata)s::jsonb, %(created_at)s::timestamptz, %(modified_at)s::timestamptz)
on conflict (collection_id, source_uri) do update set
    title = excluded.title, language = excluded.language, metadata = excluded.metadata,
    created_at = excluded.created_at, modified_at = excluded.modified_at, uploaded_at = pg_catalog.now()
returning d.document_id
"""

DELETE_CHUNKS_OF_DOCUMENTS = "delete from sift.chunks where document_id = any(%(document_ids)s::bigint[])"

# After the chunks (which point at them): a re-written document gets its new heading tree.
DELETE_SECTIONS_OF_DOCUMENTS = "delete from sift.sections where document_id = any(%(document_ids)s::bigint[])"

WRITE_SECTIONS = """
select sift.write_sections(document_ids => %(document_ids)s::bigint[], ordinals => %(ordinals)s::integer[],
                           parent_ordinals => %(parent_ordinals)s::integer[], levels => %(levels)s::integer[],
                           headings => %(headings)s::text[])
"""

# Chunks go in one statement per batch: COPY is refused on a table with row-level security.
# The vectors go in binary (%b: a list would go as text by default), which takes a connection
# the client adapted (pgsift.vectors).
WRITE_CHUNKS = """
select sift.write_chunks(document_ids => %(document_ids)s::bigint[], ordinals => %(ordinals)s::integer[],
                         contents => %(contents)s::text[], contexts => %(contexts)s::text[],
                         token_counts => %(token_counts)s::integer[], embeddings => %(embeddings)b,
                         section_ordinals => %(section_ordinals)s::integer[])
"""

DELETE_DOCUMENT = """
select sift.delete_document(collection => %(collection)s::text, source_uri => %(source_uri)s::text)
"""

DELETE_DOCUMENTS = """
select sift.delete_documents(collection => %(collection)s::text, filter => %(filter)s::jsonb,
                             source_prefix => %(source_prefix)s::text, delete_all => %(delete_all)s::boolean,
                             keep => %(keep)s::text[])
"""

REFRESH_LEXICAL_STATS = """
select pending_folded, lists_built from sift.refresh_lexical_stats(collection => %(collection)s::text)
"""

# The refresh after a write, once `backlog` write statements of the collection (any writer's,
# as row-level security shows them) wait to be folded: each leaves a pending row of its chunk
# counts. No row comes back when fewer do: the count is a one-time filter over the refresh's
# scan (an uncorrelated subquery, so it gates the call whatever order the planner picks).
REFRESH_IF_DUE = """
select x.pending_folded, x.lists_built
from sift.refresh_lexical_stats(collection => %(collection)s::text) x
where (select pg_catalog.count(*)
       from sift.collection_lexical_stats s
       where s.collection_id = (select c.collection_id from sift._collection(collection => %(collection)s::text) c)
         and s.pending) >= %(backlog)s::integer
"""

# -- vector spaces -------------------------------------------------------------------------------

ADD_VECTOR_SPACE = """
select name from sift.add_vector_space(collection => %(collection)s::text, space => %(space)s::text,
                                       dimensions => %(dimensions)s::integer, distance => %(distance)s::text,
                                       model => %(model)s::text, dense_precision => %(dense_precision)s::text,
                                       hnsw_m => %(hnsw_m)s::integer,
                                       hnsw_ef_construction => %(hnsw_ef_construction)s::integer)
"""

VECTOR_SPACE_STATUS = _select(models.VectorSpace, "sift.vector_space_status", "collection => %(collection)s::text")

MISSING_SPACE_VECTORS = """
select chunk_id, document from sift.missing_space_vectors(collection => %(collection)s::text,
                                                          space => %(space)s::text,
                                                          max_count => %(max_count)s::integer,
                                                          after_chunk_id => %(after_chunk_id)s::bigint)
"""

WRITE_SPACE_VECTORS = """
select sift.write_space_vectors(collection => %(collection)s::text, space => %(space)s::text,
                                chunk_ids => %(chunk_ids)s::bigint[], embeddings => %(embeddings)b)
"""

# -- late interaction --------------------------------------------------------------------------

WRITE_TOKEN_VECTORS = """
select sift.write_token_vectors(collection => %(collection)s::text, chunk_ids => %(chunk_ids)s::bigint[],
                                token_vectors => %(token_vectors)b)
"""

DELETE_TOKEN_VECTORS = """
select sift.delete_token_vectors(collection => %(collection)s::text, chunk_ids => %(chunk_ids)s::bigint[])
"""

MAXSIM = _select(models.MaxSimScore, "sift.maxsim", """
    collection => %(collection)s::text,
    chunk_ids => %(chunk_ids)s::bigint[],
    query_tokens => %(query_tokens)s""")

# -- enrichment ----------------------------------------------------------------------------

CACHED_ENRICHMENTS = """
select distinct on (e.enrichment_key) e.enrichment_key, e.context, e.questions, e.model
from sift.chunk_enrichments e
where e.collection_id = (select c.collection_id from sift._collection(collection => %(collection)s::text) c)
  and e.enrichment_key = any (%(keys)s::text[])
order by e.enrichment_key, e.chunk_id
"""

INSERT_ENRICHMENT = """
insert into sift.chunk_enrichments (chunk_id, collection_id, enrichment_key, context, questions, model)
values (%(chunk_id)s::bigint, 0, %(key)s::text, %(context)s::text, %(questions)s::text[], %(model)s::text)
"""

INSERT_QUESTION_VECTORS = """
insert into sift.question_vectors (chunk_id, ordinal, collection_id, embedding)
select u.c, u.o, 0, u.e
from unnest(%(chunk_ids)s::bigint[], %(ordinals)s::smallint[], %(embeddings)b) as u(c, o, e)
"""

INSERT_ENRICHMENT_RUN = """
insert into sift.enrichment_runs (document_id, collection_id, model, chunks, enriched, reused, failed, skipped,
                                  input_tokens, output_tokens, cost_usd, warnings)
values (%(document_id)s::bigint, 0, %(model)s::text, %(chunks)s::integer, %(enriched)s::integer,
        %(reused)s::integer, %(failed)s::integer, %(skipped)s::integer, %(input_tokens)s::bigint,
        %(output_tokens)s::bigint, %(cost_usd)s::float8, %(warnings)s::text[])
"""

ENRICHMENT_HISTORY = _select(models.EnrichmentRecord, "sift.enrichment_history",
                             "collection => %(collection)s::text, source_uri => %(source_uri)s::text")

# The ids of the chunks a batch just wrote, by (document, ordinal), and their collection's
# name, for their token vectors.
CHUNK_IDS_OF_DOCUMENTS = """
select k.document_id, k.ordinal, k.chunk_id, c.name
from sift.chunks k join sift.collections c on c.collection_id = k.collection_id
where k.document_id = any (%(document_ids)s::bigint[])
"""

SWITCH_VECTOR_SPACE = """
select name from sift.switch_vector_space(collection => %(collection)s::text, space => %(space)s::text)
"""

DROP_VECTOR_SPACE = "select sift.drop_vector_space(collection => %(collection)s::text, space => %(space)s::text)"

# -- search ------------------------------------------------------------------------------------

_SEARCH_ARGS = """
    collection => %(collection)s::text,
    collections => %(collections)s::text[],
    query_text => %(query_text)s::text,
    query_embedding => %(query_embedding)s,
    match_count => %(match_count)s::integer,
    filter => %(filter)s::jsonb,
    knobs => %(knobs)s::jsonb,
    spaces => %(spaces)s::text[],
    space_embeddings => %(space_embeddings)s,
    space_weights => %(space_weights)s::float8[]"""

SEARCH = _select(models.Hit, "sift.search", _SEARCH_ARGS + ", query_tokens => %(query_tokens)s")

SEARCH_PAGE = _select(models.Hit, "sift.search_page", """
    collection => %(collection)s::text,
    collections => %(collections)s::text[],
    query_text => %(query_text)s::text,
    query_embedding => %(query_embedding)s,
    page_size => %(match_count)s::integer,
    cursor => %(cursor)s::text,
    filter => %(filter)s::jsonb,
    knobs => %(knobs)s::jsonb""")

CANDIDATES = _select(models.Candidate, "sift.candidates", _SEARCH_ARGS) + " order by fused_rank, chunk_id"

EXPLAIN = _select(models.Explanation, "sift.explain",
                  _SEARCH_ARGS + ", chunk_ids => %(chunk_ids)s::bigint[], query_tokens => %(query_tokens)s"
                  ", rerank_ids => %(rerank_ids)s::bigint[], rerank_scores => %(rerank_scores)s::float8[]"
                  ", scored_by => %(scored_by)s::text")

RESOLVE_SECTIONS = _select(models.ResolvedSection, "sift.resolve_sections",
                           "chunk_ids => %(chunk_ids)s::bigint[], skip_missing => %(skip_missing)s::boolean")

FINALIZE = _select(models.Hit, "sift.finalize", """
    collection => %(collection)s::text,
    collections => %(collections)s::text[],
    chunk_ids => %(chunk_ids)s::bigint[],
    scores => %(scores)s::float8[],
    match_count => %(match_count)s::integer,
    knobs => %(knobs)s::jsonb,
    scored_by => %(scored_by)s::text,
    query_text => %(query_text)s::text""")

FINALIZE_PAGE = _select(models.Hit, "sift.finalize_page", """
    collection => %(collection)s::text,
    collections => %(collections)s::text[],
    chunk_ids => %(chunk_ids)s::bigint[],
    scores => %(scores)s::float8[],
    page_size => %(match_count)s::integer,
    cursor => %(cursor)s::text,
    knobs => %(knobs)s::jsonb,
    scored_by => %(scored_by)s::text,
    query_text => %(query_text)s::text,
    query_embedding => %(query_embedding)s,
    filter => %(filter)s::jsonb,
    more => %(more)s::boolean""")

# The window a paged search ranks (the page_window knob in force, the largest of several
# collections'): a reranked page reranks that many.
PAGE_WINDOW = """
select max((k.value #>> '{}')::integer) from pg_catalog.unnest(%(names)s::text[]) as c(name)
cross join lateral sift.knobs(collection => c.name, knobs => %(knobs)s::jsonb) k
where k.name = 'page_window'
"""

# -- rerankers ------------------------------------------------------------------------------------

RERANKER_FOR = sql.SQL("""
select reranker_id, tenant, alias, provider, model, base_url, secret_ref, secret_source, timeout_ms,
       deadline_ms, max_attempts, context_chars, rerank_top_n, chosen_by, refused, limits
from sift.reranker_for(collection => %(collection)s::text, collections => %(collections)s::text[],
                       knobs => %(knobs)s::jsonb, reranker => %(reranker)s::text)
""")

# The pool a reranker scores, in fused order, with the text it scores for each candidate, whether
# the fused pool goes on past it, and the reranker (sift.rerank_pool): one statement, one
# retrieval. pool_size null: the size a search reranks (max(match_count, rerank_top_n)).
RERANK_POOL = sql.SQL("select {}, document, more, reranker_config from sift.rerank_pool(" + _SEARCH_ARGS
                      + ", reranker => %(reranker)s::text, pool_size => %(pool_size)s::integer)").format(
    columns(models.Candidate)).as_string()

# A search's first statement: its hits, unless it reranks (sift.search would name a reranker);
# then one row of nulls (chunk_id null: never a hit) and no hit, and the search never runs (a
# one-time filter: its function is not called), so that the client takes the pool instead
# (RERANK_POOL) and the legs run once. Without a collection that names a reranker the test is
# one lookup. (Rendered once, here: composed of many identifiers, it costs a render a call.)
SEARCH_UNLESS_RERANKED = sql.SQL("""
select {} from (
    select sift._reranks(collection => %(collection)s::text, collections => %(collections)s::text[],
                         knobs => %(knobs)s::jsonb) as reranks
    offset 0) g
left join lateral (
    select * from sift.search(""" + _SEARCH_ARGS + """, query_tokens => %(query_tokens)s) s
    where not g.reranks
    offset 0) h on true
where g.reranks or h.chunk_id is not null""").format(columns(models.Hit, "h")).as_string()

REGISTER_RERANKER_ARGS = {
    "alias": "text",
    "provider": "text",
    "model": "text",
    "base_url": "text",
    "secret_ref": "text",
    "timeout_ms": "integer::sift.rerank_timeout_ms",
    "deadline_ms": "integer::sift.rerank_deadline_ms",
    "max_attempts": "integer::sift.rerank_attempts",
    "context_chars": "integer::sift.rerank_context_chars",
    "is_default": "boolean",
}


def register_reranker(given: list[str]) -> sql.Composed:
    """Composed from the arguments given: the defaults are sift.register_reranker's."""
    args = sql.SQL(", ").join(
        sql.SQL("{} => {}::" + REGISTER_RERANKER_ARGS[name]).format(sql.Identifier(name), sql.Placeholder(name))
        for name in given)
    return sql.SQL("""select r.reranker_id, r.tenant::text, r.alias::text, r.provider, r.model, r.base_url,
       r.secret_ref, r.timeout_ms::integer, r.deadline_ms::integer, r.max_attempts::integer,
       r.context_chars::integer, r.is_default
from sift.register_reranker({}) r""").format(args)


DROP_RERANKER = "select sift.drop_reranker(alias => %(alias)s::text)"

# The current tenant's rerankers, with why a search cannot use each (sift.list_rerankers):
# `pgsift reranker list`.
LIST_RERANKERS = "select * from sift.list_rerankers()"

# Where the operator keeps the current tenant's key named secret_ref, whom it is for, and
# whether `url` is under one of the hosts it may be sent to: `pgsift ingest --enrich-secret-ref`.
SECRET_MAPPING = """
select m.source, m.provider,
       coalesce((select pg_catalog.bool_or(sift._url_under(%(url)s::text, e.prefix))
                 from pg_catalog.unnest(m.endpoints) as e(prefix)), false) as url_allowed
from sift.secret_mappings m
where m.tenant = sift.current_tenant() and m.secret_ref = %(secret_ref)s::text
"""

RECORD_USAGE = """
select sift.record_rerank_usage(
    reranker_alias => %(reranker_alias)s::text, provider => %(provider)s::text, model => %(model)s::text,
    documents => %(documents)s::integer, latency_ms => %(latency_ms)s::float8, ok => %(ok)s::boolean,
    tokens => %(tokens)s::bigint, search_units => %(search_units)s::float8,
    attempts => %(attempts)s::integer, error => %(error)s::text)
"""

# A tenant's rerank spend at the operator's prices (the operator's: every tenant's):
# `pgsift reranker spend`.
RERANK_SPEND = """
select s.tenant, s.provider, s.model, s.currency, s.calls, s.tokens, s.search_units, s.cost, s.unpriced_calls
from sift.rerank_spend(since => %(since)s::timestamptz, until => %(until)s::timestamptz,
                       tenants => %(tenants)s::text[]) s
"""

STORE_THRESHOLD = """
select c.name from sift.store_calibrated_threshold(
    collection => %(collection)s::text, reranker_alias => %(alias)s::text, value => %(value)s::float8) c
"""

# -- golden sets and evaluation --------------------------------------------------------------

GOLDEN_SETS = """
select golden_set_id, name, judged_at, source, description, created_at, questions, unanswerable, positives,
       unbound, without_embedding
from sift.list_golden_sets(collection => %(collection)s::text)
"""

GOLDEN_SET = GOLDEN_SETS + "where name = %(name)s::text"

CREATE_GOLDEN_SET = """
select sift.create_golden_set(collection => %(collection)s::text, golden_set => %(name)s::text,
                              judged_at => %(judged_at)s::text, source => %(source)s::text,
                              description => %(description)s::text, replace => %(replace)s::boolean)
"""

DROP_GOLDEN_SET = """
select sift.drop_golden_set(collection => %(collection)s::text, golden_set => %(name)s::text)
"""

# A question and its positives (a JSON array: text, chunk_id, source_uri, grade, fallback_text);
# bound once at the end of an import (REBIND), not one question at a time.
ADD_GOLDEN_QUESTION = """
select question_id, positives_added, skipped
from sift.add_golden_question(collection => %(collection)s::text, golden_set => %(name)s::text,
                              question_key => %(question_key)s::text, question => %(question)s::text,
                              positives => %(positives)s::jsonb, answerable => %(answerable)s::boolean,
                              embedding => %(embedding)s, metadata => %(metadata)s::jsonb,
                              skip_missing => %(skip_missing)s::boolean, bind => false)
"""

# The document of each chunk (calibration judges documents).
CHUNK_DOCUMENTS = """
select k.chunk_id, d.source_uri
from sift.chunks k join sift.documents d on d.document_id = k.document_id
where k.chunk_id = any(%(chunk_ids)s::bigint[])
"""

REBIND = """
select positive_id, question_key, old_chunk_id, chunk_id, source_uri, status
from sift.rebind_golden_set(collection => %(collection)s::text, golden_set => %(name)s::text)
"""

QUESTIONS = """
select q.question_id, q.question_key, q.question, q.answerable, q.embedding::float4[] as embedding,
       q.metadata
from sift.golden_questions q
where q.golden_set_id = %(golden_set_id)s::bigint
order by q.question_id
"""

# Each positive with the document its chunk is in now (source_uri as stored
# when it is unbound).
POSITIVES = """
select p.positive_id, p.question_id, p.chunk_id, coalesce(d.source_uri, p.source_uri) as source_uri,
       p.content, p.grade, p.whole_document
from sift.golden_positives p
join sift.golden_questions q on q.question_id = p.question_id
left join sift.chunks k on k.chunk_id = p.chunk_id
left join sift.documents d on d.document_id = k.document_id
where q.golden_set_id = %(golden_set_id)s::bigint
order by p.question_id, p.positive_id
"""

TOKEN_COUNTS = """
select k.chunk_id, coalesce(k.token_count, 0) as token_count
from sift.chunks k
where k.chunk_id = any (%(chunk_ids)s::bigint[])
order by k.chunk_id
"""

RECORD_RUN = """
select run_id, created_at, previous_run_id, delta
from sift.record_eval_run(collection => %(collection)s::text, golden_set => %(golden_set)s::text,
                          label => %(label)s::text, k => %(k)s::integer, metrics => %(metrics)s::jsonb,
                          settings => %(settings)s::jsonb)
"""

HISTORY = """
select run_id, created_at, set_name, label, k, metrics, settings, previous_run_id, delta
from sift.eval_history(collection => %(collection)s::text, golden_set => %(golden_set)s::text,
                       max_runs => %(max_runs)s::integer)
"""

# Knobs chosen from a golden set by cross-validation (pgsift.tuning, `pgsift eval tune`).
TUNE_GOLDEN_SET = """
select kind, cell, fold, question_key, knobs, questions, ndcg, current_ndcg, gain, ci_low, ci_high, stored, note
from sift.tune_golden_set(collection => %(collection)s::text, golden_set => %(golden_set)s::text,
                          k => %(k)s::integer, folds => %(folds)s::integer, grid => %(grid)s::jsonb,
                          seed => %(seed)s::integer, store => %(store)s::boolean,
                          per_question => %(per_question)s::boolean)
"""

# -- doctor (pgsift.doctor): settings and catalog only, no table scan --------------------------

DOCTOR_SETTINGS = """
select name, setting, unit from pg_catalog.pg_settings
where name in ('shared_buffers', 'effective_cache_size', 'maintenance_work_mem', 'max_parallel_maintenance_workers',
               'jit', 'random_page_cost')
"""

DOCTOR_HNSW_INDEXES = """
select c.relname::text, pg_catalog.pg_relation_size(c.oid)
from pg_catalog.pg_class c join pg_catalog.pg_am a on a.oid = c.relam
where c.relnamespace = 'sift'::regnamespace and c.relkind = 'i' and a.amname = 'hnsw'
order by 1
"""

DOCTOR_PGVECTOR = "select extversion from pg_catalog.pg_extension where extname = 'vector'"

# Where search vectors are stored, and the largest embedding an HNSW index on sift.chunks holds
# (from the index's cast, shared or a space's own: the catalog, whatever the role's tenant).
DOCTOR_SEARCH_VECTORS = """
select a.attstorage::text,
       (select max(((pg_catalog.regexp_match(pg_catalog.pg_get_indexdef(i.indexrelid),
                                             '::\\w*\\.?(?:vector|halfvec)\\(([0-9]+)\\)'))[1])::integer)
        from pg_catalog.pg_index i
        join pg_catalog.pg_class c on c.oid = i.indexrelid
        join pg_catalog.pg_am m on m.oid = c.relam
        where i.indrelid = 'sift.chunks'::regclass and m.amname = 'hnsw')
from pg_catalog.pg_attribute a
where a.attrelid = 'sift.chunks'::regclass and a.attname = 'search_vector'
"""

# The HNSW indexes the vector spaces walk (each its own or the shared one of its size, the test
# collection_info's dense_index makes) that are not built: queued for the operator's
# sift.ensure_dense_indexes() (a tenant's request, or after a restore), as row-level security
# shows the spaces. Each as its size and distance, and its name when it is a space's own.
DOCTOR_QUEUED_INDEXES = """
select pg_catalog.count(*)::integer,
       pg_catalog.string_agg(w.dimensions || ' ' || w.distance
                             || case when w.own then ' (' || w.name || ')' else '' end,
                             ', ' order by w.dimensions, w.distance, w.name)
from (select distinct sift._space_index_name(s) as name, s.dimensions, s.distance::text as distance,
                      sift._space_dedicated(s) as own
      from sift.vector_spaces s
      where pg_catalog.to_regclass('sift.' || sift._space_index_name(s)) is null) w
"""
# The collection with the most write statements not yet folded (one pending row each of chunk
# counts; the table holds one more row a collection), as row-level security shows them.
DOCTOR_PENDING_STATS = """
select c.name::text, s.n
from (select s.collection_id, pg_catalog.count(*) as n
      from sift.collection_lexical_stats s where s.pending group by 1) s
join sift.collections c on c.collection_id = s.collection_id
order by s.n desc, c.collection_id
limit 1
"""
