-- pgsift 0037: what one tenant may cost the others (issue 37, items 2 and 5).
--
-- HNSW indexes on the shared tables are the operator's to build. A tenant's
-- admin who created a collection (or added a space) of a size without an
-- index built it in its own transaction: CREATE INDEX locks sift.chunks,
-- sift.chunk_vectors and sift.question_vectors against every tenant's writes
-- until that transaction ends, which the admin could keep open, and any
-- admin could create hundreds of them. Now such a size is a request
-- (sift.index_requests, a row per tenant and shape, kept after the build so
-- a tenant's shapes stay counted): the collection is searched by exact scan
-- until the operator's sift.ensure_dense_indexes() builds it. A size that
-- has its index already costs no DDL at all.
--
-- The operator's ceilings per tenant (sift.tenant_limits; the row whose
-- tenant is null holds every tenant's without a row of its own): how many
-- index shapes a tenant may cause and have waiting, and the work one call
-- may ask for (knob ceilings an admin cannot raise, match_count, a time
-- limit). A collection keeps its tenant's ceilings on its row
-- (sift.collections.ceilings, written by its trigger and again whenever the
-- ceilings change), so a search reads them without a lookup.
--
-- sift.collection_info and sift.vector_space_status say whether the index a
-- space walks is built: new columns, so the functions are made again by the
-- function files.

create table sift.index_requests (
    request_id   bigint generated always as identity primary key,
    tenant       sift.name not null,
    dimensions   integer not null constraint index_request_dimensions check (dimensions between 1 and 4000),
    distance     sift.distance not null,
    builtin      boolean not null,
    requested_by name not null default current_user,
    requested_at timestamptz not null default pg_catalog.now(),
    built_at     timestamptz,
    constraint index_requests_shape_key unique (tenant, dimensions, distance, builtin)
);
comment on table sift.index_requests is
    'HNSW indexes a tenant''s collections or vector spaces need and the operator builds '
    '(sift.ensure_dense_indexes): one row per tenant and shape, kept once built so that the '
    'shapes a tenant caused stay counted against its max_index_shapes (sift.tenant_limits).';
comment on column sift.index_requests.request_id is 'Identity of the request.';
comment on column sift.index_requests.tenant is 'The tenant whose collection or space needs the index.';
comment on column sift.index_requests.dimensions is 'The embedding size the index holds (its shape, with distance).';
comment on column sift.index_requests.distance is 'The distance the index orders by: cosine, l2 or inner_product.';
comment on column sift.index_requests.builtin is
    'True: a built-in space (the index on sift.chunks too); false: an added space (sift.chunk_vectors '
    'and sift.question_vectors only).';
comment on column sift.index_requests.requested_by is 'The role that caused the request.';
comment on column sift.index_requests.requested_at is 'When the request was made.';
comment on column sift.index_requests.built_at is
    'When the operator''s build found the indexes in place; null while the request waits (the '
    'collection is searched by exact scan meanwhile).';
alter table sift.index_requests enable row level security;

create table sift.tenant_limits (
    tenant             sift.name constraint tenant_limits_tenant_key unique,
    knob_ceilings      jsonb not null default '{}'
                       constraint tenant_limits_knob_ceilings_object check (pg_catalog.jsonb_typeof(knob_ceilings) = 'object'),
    max_match_count    integer constraint tenant_limits_max_match_count check (max_match_count between 0 and 1000),
    call_time_limit    interval constraint tenant_limits_call_time_limit
                       check (call_time_limit > '0'::interval and call_time_limit <= '1 day'::interval),
    max_index_shapes   integer constraint tenant_limits_max_index_shapes check (max_index_shapes >= 0),
    max_index_requests integer constraint tenant_limits_max_index_requests check (max_index_requests >= 0)
);
-- One row for every tenant without a row of its own (tenant null).
create unique index tenant_limits_one_default on sift.tenant_limits ((true)) where tenant is null;
comment on table sift.tenant_limits is
    'The operator''s ceilings per tenant (a tenant''s row; the row whose tenant is null, if any, for '
    'every tenant without one, and for each value a tenant''s row leaves null): the knob values and '
    'match_count one call may ask for, its time limit, and the HNSW index shapes a tenant may '
    'cause. Only the operator writes it; a tenant reads its own row and the default.';
comment on column sift.tenant_limits.tenant is
    'The tenant these ceilings are for; null: every tenant without a row of its own (and the value '
    'a tenant''s row leaves null).';
comment on column sift.tenant_limits.knob_ceilings is
    'The most each numeric knob may be, by name ({"fetch_k": 200, "neighbours": 3}): refused above it '
    'in a call or a stored setting (SF015), and a value stored before the ceiling is searched with '
    'the ceiling. A tenant''s object is laid over the default row''s.';
comment on column sift.tenant_limits.max_match_count is
    'The most hits (match_count, a page''s window) one call may ask for; null: no ceiling (1,000).';
comment on column sift.tenant_limits.call_time_limit is
    'How long one search may run: its stages check the time between steps and stop with SF015 past '
    'it (docs/trust.md says what this bounds); null: no limit.';
comment on column sift.tenant_limits.max_index_shapes is
    'How many HNSW index shapes (dimensions and distance without an index) a tenant may cause, built '
    'or waiting; null: the default row''s, else 4.';
comment on column sift.tenant_limits.max_index_requests is
    'How many of those may wait for the operator''s build at once; null: the default row''s, else 2.';
alter table sift.tenant_limits enable row level security;
-- No row at first (a dump restores the operator's rows as they are): no
-- ceiling on the work of a call (today's behaviour, the knobs' own domains),
-- and index shapes bounded (4, 2 waiting), since an index costs every tenant's
-- writes.

alter table sift.collections add column ceilings jsonb;
comment on column sift.collections.ceilings is
    'Its tenant''s ceilings in force (sift.tenant_limits, the default row under the tenant''s): knob '
    'names, match_count and call_time_limit; null: none. Kept by the collection''s trigger and '
    'written again whenever the ceilings change.';

drop function if exists sift.collection_info(text);
drop function if exists sift.vector_space_status(text);
