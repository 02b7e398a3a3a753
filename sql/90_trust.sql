-- Row-level security policies and the shipped roles' grants (roles and
-- `enable row level security`: migrations/0003_trust.sql). Re-applied with
-- the functions, so a new function or table is covered the moment it ships.
--
-- Every policy admits the rows of sift.current_tenant(). Collection-scoped
-- tables check collection_id against the tenant's collections, computed once
-- per statement (a scalar subquery is an InitPlan), so the dense leg still
-- walks its HNSW index with one extra filter.

create or replace function sift._tenant_collection_ids()
returns bigint[]
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    select coalesce(pg_catalog.array_agg(c.collection_id), '{}')
    from sift.collections c
    where c.tenant = sift.current_tenant()
$$;
comment on function sift._tenant_collection_ids() is
    'Internal: the ids of the current tenant''s collections (what the row-level policies admit).';

drop policy if exists tenant_rows on sift.collections;
create policy tenant_rows on sift.collections
    using (tenant = (select sift.current_tenant()))
    with check (tenant = (select sift.current_tenant()));
drop policy if exists tenant_rows on sift.rerankers;
create policy tenant_rows on sift.rerankers
    using (tenant = (select sift.current_tenant()))
    with check (tenant = (select sift.current_tenant()));
drop policy if exists tenant_rows on sift.rerank_usage;
create policy tenant_rows on sift.rerank_usage
    using (tenant = (select sift.current_tenant()))
    with check (tenant = (select sift.current_tenant()));
drop policy if exists tenant_rows on sift.secret_mappings;
create policy tenant_rows on sift.secret_mappings
    using (tenant = (select sift.current_tenant()));
drop policy if exists tenant_rows on sift.allowed_endpoints;
create policy tenant_rows on sift.allowed_endpoints
    using (tenant is null or tenant = (select sift.current_tenant()));
drop policy if exists own_roles on sift.tenant_roles;
create policy own_roles on sift.tenant_roles
    using (role_name = any (sift._member_roles()));

drop policy if exists tenant_rows on sift.documents;
create policy tenant_rows on sift.documents
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.chunks;
create policy tenant_rows on sift.chunks
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.collection_lexical_stats;
create policy tenant_rows on sift.collection_lexical_stats
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.term_df;
create policy tenant_rows on sift.term_df
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.term_df_pending;
create policy tenant_rows on sift.term_df_pending
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.term_lists;
create policy tenant_rows on sift.term_lists
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.term_blocks;
create policy tenant_rows on sift.term_blocks
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.term_deltas;
create policy tenant_rows on sift.term_deltas
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.list_build_plan;
create policy tenant_rows on sift.list_build_plan
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.list_build_entries;
create policy tenant_rows on sift.list_build_entries
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.golden_sets;
create policy tenant_rows on sift.golden_sets
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
drop policy if exists tenant_rows on sift.eval_runs;
create policy tenant_rows on sift.eval_runs
    using (collection_id = any ((select sift._tenant_collection_ids())::bigint[]))
    with check (collection_id = any ((select sift._tenant_collection_ids())::bigint[]));
-- Questions and positives reach their tenant through their set (whose own
-- policy applies inside these subqueries).
drop policy if exists tenant_rows on sift.golden_questions;
create policy tenant_rows on sift.golden_questions
    using (golden_set_id in (select g.golden_set_id from sift.golden_sets g))
    with check (golden_set_id in (select g.golden_set_id from sift.golden_sets g));
drop policy if exists tenant_rows on sift.golden_positives;
create policy tenant_rows on sift.golden_positives
    using (question_id in (select q.question_id from sift.golden_questions q))
    with check (question_id in (select q.question_id from sift.golden_questions q));

-- Grants. Nothing is PUBLIC's; the shipped roles nest (admin is a writer,
-- a writer is a reader: granted once, when 0003 creates them).
revoke all on schema sift from public;
grant usage on schema sift to sift_reader, sift_gateway;
revoke all on all tables in schema sift from public;
revoke all on all functions in schema sift from public;
-- Functions run with the caller's rights (security invoker): what a role may
-- do is decided by the table grants and policies below, not by EXECUTE.
grant execute on all functions in schema sift to sift_reader, sift_gateway;
-- The one security definer function builds an index as the table's owner.
revoke execute on function sift._ensure_dense_index(integer, sift.distance) from sift_reader, sift_gateway;
grant execute on function sift._ensure_dense_index(integer, sift.distance) to sift_admin;

grant select on sift.collections, sift.documents, sift.chunks, sift.collection_lexical_stats,
    sift.term_df, sift.term_df_pending, sift.term_lists, sift.term_blocks, sift.term_deltas,
    sift.golden_sets, sift.golden_questions, sift.golden_positives, sift.eval_runs,
    sift.rerankers, sift.rerank_usage, sift.reranker_providers, sift.knob_defs, sift.knob_presets,
    sift.tenant_roles, sift.secret_mappings, sift.allowed_endpoints
    to sift_reader;
-- Readers meter the reranks of their own searches.
grant insert on sift.rerank_usage to sift_reader;
-- current_tenant reads the role map for gateways too.
grant select on sift.tenant_roles to sift_gateway;

grant insert, update, delete on sift.documents, sift.chunks, sift.collection_lexical_stats,
    sift.term_df, sift.term_df_pending, sift.term_lists, sift.term_blocks, sift.term_deltas,
    sift.golden_sets, sift.golden_questions, sift.golden_positives, sift.eval_runs
    to sift_writer;
grant select, insert, update, delete on sift.list_build_plan, sift.list_build_entries to sift_writer;

grant insert, update, delete on sift.collections, sift.rerankers to sift_admin;

do $maintain$
begin
    -- PostgreSQL 17+: refresh may ANALYZE its work tables (fresh row counts
    -- keep its big joins hashed) without owning them.
    if current_setting('server_version_num')::integer >= 170000 then
        execute 'grant maintain on sift.list_build_plan, sift.list_build_entries to sift_writer';
    end if;
end
$maintain$;
