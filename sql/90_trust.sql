-- Row-level security policies and the shipped roles' grants (roles and
-- `enable row level security`: migrations/0003_trust.sql). Re-applied with
-- the functions, so a new function or table is covered the moment it ships.
-- In: the tables and functions of schema sift. Out: their policies and the
-- shipped roles' grants.
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
    -- Only the policies call it, so only for roles they apply to: for those the
    -- collections' own policy already keeps the current tenant's rows.
    select coalesce(pg_catalog.array_agg(c.collection_id), '{}')
    from sift.collections c
$$;
comment on function sift._tenant_collection_ids() is
    'Internal: the ids of the collections the caller may see (what the row-level policies of the '
    'collection-scoped tables admit; the collections'' own policy does the filtering).';


create or replace function sift._ensure_policy(
    target regclass, policy name, using_expr text, check_expr text default null)
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    wanted text := md5(coalesce(using_expr, '') || '|' || coalesce(check_expr, ''));
    have   text;
begin
    -- A policy is (re)created only when its text changed (its comment keeps a hash
    -- of it): creating one locks its table against every reader, and re-running
    -- migrate must never make searches wait.
    select obj_description(p.oid, 'pg_policy') into have
    from pg_catalog.pg_policy p where p.polrelid = target and p.polname = policy;
    if have is not distinct from wanted then
        return false;
    end if;
    execute format('drop policy if exists %I on %s', policy, target);
    execute format('create policy %I on %s using (%s)', policy, target, using_expr)
            || case when check_expr is not null then format(' with check (%s)', check_expr) else '' end;
    execute format('comment on policy %I on %s is %L', policy, target, wanted);
    return true;
end;
$$;
comment on function sift._ensure_policy(regclass, name, text, text) is
    'Internal, writes (install time): creates or replaces a row-level policy when its text changed.';

select sift._ensure_policy('sift.collections', 'tenant_rows',
    $u$tenant = (select sift.current_tenant())$u$,
    $c$tenant = (select sift.current_tenant())$c$);
select sift._ensure_policy('sift.rerankers', 'tenant_rows',
    $u$tenant = (select sift.current_tenant())$u$,
    $c$tenant = (select sift.current_tenant())$c$);
select sift._ensure_policy('sift.rerank_usage', 'tenant_rows',
    $u$tenant = (select sift.current_tenant())$u$,
    $c$tenant = (select sift.current_tenant())$c$);
select sift._ensure_policy('sift.secret_mappings', 'tenant_rows',
    $u$tenant = (select sift.current_tenant())$u$);
select sift._ensure_policy('sift.allowed_endpoints', 'tenant_rows',
    $u$tenant is null or tenant = (select sift.current_tenant())$u$);
-- A tenant sees its own index requests and ceilings, and the default ceilings
-- (tenant null); only the operator writes the ceilings.
select sift._ensure_policy('sift.index_requests', 'tenant_rows',
    $u$tenant = (select sift.current_tenant())$u$,
    $c$tenant = (select sift.current_tenant())$c$);
select sift._ensure_policy('sift.tenant_limits', 'tenant_rows',
    $u$tenant is null or tenant = (select sift.current_tenant())$u$);
-- The rows pgsift's locks are taken on (sift._lock_collection, the index
-- requests' trigger): a tenant sees, so locks, its own only.
select sift._ensure_policy('sift.tenant_locks', 'tenant_rows',
    $u$tenant = (select sift.current_tenant())$u$,
    $c$tenant = (select sift.current_tenant())$c$);
select sift._ensure_policy('sift.collection_locks', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.tenant_roles', 'own_roles',
    $u$pg_catalog.pg_has_role(current_user, role_name, 'MEMBER')$u$);
select sift._ensure_policy('sift.documents', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.chunks', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.collection_configs', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.vector_spaces', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.chunk_vectors', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.question_vectors', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.chunk_enrichments', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.enrichment_runs', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.chunk_token_sizes', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.chunk_tokens', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.sections', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.collection_lexical_stats', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.term_df', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.term_df_pending', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.term_lists', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.term_blocks', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.term_deltas', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.list_build_plan', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.list_build_entries', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.golden_sets', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.eval_runs', 'tenant_rows',
    $u$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$u$,
    $c$collection_id = any ((select sift._tenant_collection_ids())::bigint[])$c$);
select sift._ensure_policy('sift.golden_questions', 'tenant_rows',
    $u$golden_set_id in (select g.golden_set_id from sift.golden_sets g)$u$,
    $c$golden_set_id in (select g.golden_set_id from sift.golden_sets g)$c$);
select sift._ensure_policy('sift.golden_positives', 'tenant_rows',
    $u$question_id in (select q.question_id from sift.golden_questions q)$u$,
    $c$question_id in (select q.question_id from sift.golden_questions q)$c$);


-- Questions and positives reach their tenant through their set (whose own
-- policy applies inside these subqueries).

-- Grants. Nothing is PUBLIC's; the shipped roles nest (admin is a writer,
-- a writer is a reader: granted once, when 0003 creates them).
revoke all on schema sift from public;
grant usage on schema sift to sift_reader, sift_gateway;
revoke all on all tables in schema sift from public;
revoke all on all functions in schema sift from public;
-- Functions run with the caller's rights (security invoker): what a role may
-- do is decided by the table grants and policies below, not by EXECUTE.
grant execute on all functions in schema sift to sift_reader, sift_gateway;
-- Of the security definer functions, those that build or drop an index as the
-- table's owner are for collection admins, whose new collection of a size
-- with its indexes has them name the index; building and dropping indexes,
-- and making their walk functions, is the operator's session's (each
-- function checks).
-- (sift._text_matches checks its caller itself.)
revoke execute on function sift._ensure_dense_index(integer, sift.distance, boolean)
    from sift_reader, sift_gateway;
grant execute on function sift._ensure_dense_index(integer, sift.distance, boolean) to sift_admin;
revoke execute on function sift._ensure_space_index(bigint, name), sift._drop_orphan_indexes(text)
    from sift_reader, sift_gateway;
grant execute on function sift._ensure_space_index(bigint, name), sift._drop_orphan_indexes(text) to sift_admin;
-- The builders' helper that changes the chunks table's storage runs only inside them, as its owner.
revoke execute on function sift._set_search_vector_storage(integer) from sift_reader, sift_gateway;
-- and the one that cleans the text index's pending list is for writers (refresh runs it).
revoke execute on function sift._clean_text_index() from sift_reader, sift_gateway;
grant execute on function sift._clean_text_index() to sift_writer;
-- The cursor key's signature runs only inside the cursor signer and checker, as the key's
-- owner (who alone reads sift.cursor_keys); they are every reader's, as paging calls them.
revoke execute on function sift._cursor_mac(text, text) from sift_reader, sift_gateway;

grant select on sift.collections, sift.documents, sift.chunks, sift.sections, sift.collection_configs,
    sift.vector_spaces, sift.chunk_vectors, sift.chunk_tokens, sift.chunk_token_sizes,
    sift.chunk_enrichments, sift.enrichment_runs, sift.question_vectors,
    sift.language_configs, sift.collection_lexical_stats,
    sift.term_df, sift.term_df_pending, sift.term_lists, sift.term_blocks, sift.term_deltas,
    sift.golden_sets, sift.golden_questions, sift.golden_positives, sift.eval_runs,
    sift.rerankers, sift.rerank_usage, sift.reranker_providers, sift.reranker_limits, sift.knob_defs, sift.knob_presets,
    sift.tenant_roles, sift.secret_mappings, sift.allowed_endpoints, sift.index_requests, sift.tenant_limits
    to sift_reader;
-- sift.cursor_keys has no grant: only sift._cursor_encode and sift._cursor_verify, running as its
-- owner, read the key.
-- Readers meter the reranks of their own searches.
grant insert on sift.rerank_usage to sift_reader;
-- Rerank prices are no secret: every tenant reads them (its usage rows are priced
-- from them, by the trigger, as the writer); only the operator writes them, so the
-- table has no row-level security and no other grant.
grant select on sift.rerank_prices to sift_reader;
-- current_tenant reads the role map for gateways too.
grant select on sift.tenant_roles to sift_gateway;

grant insert, update, delete on sift.documents, sift.chunks, sift.sections, sift.collection_configs,
    sift.chunk_vectors, sift.chunk_tokens, sift.chunk_token_sizes, sift.chunk_enrichments, sift.enrichment_runs,
    sift.question_vectors,
    sift.collection_lexical_stats,
    sift.term_df, sift.term_df_pending, sift.term_lists, sift.term_blocks, sift.term_deltas,
    sift.golden_sets, sift.golden_questions, sift.golden_positives, sift.eval_runs
    to sift_writer;
grant select, insert, update, delete on sift.list_build_plan, sift.list_build_entries to sift_writer;

grant insert, update, delete on sift.collections, sift.rerankers, sift.vector_spaces to sift_admin;
-- A collection or space of a size without its index asks for it (the table's
-- trigger holds the tenant to its limits); only the operator marks it built.
grant insert on sift.index_requests to sift_admin;
-- Writers lock the active space's row (for share, which needs an update grant)
-- so a concurrent switch is seen even at repeatable read; the model's label is
-- the one column a direct write may change (the guard trigger).
grant update (model) on sift.vector_spaces to sift_writer;
-- The lock rows: a writer locks its collections' rows (row locks need an
-- update grant: the key is the one column, and the policy keeps it the
-- tenant's), an admin's new collection makes one and its index requests lock
-- the tenant's. sift.operator_locks has no grant, nor has
-- sift.schema_migrations, whose lock serializes migrate: a role without any
-- privilege on a table cannot LOCK it.
grant select, update (collection_id) on sift.collection_locks to sift_writer;
grant insert on sift.collection_locks to sift_admin;
grant select, insert, update (tenant) on sift.tenant_locks to sift_admin;

do $maintain$
begin
    -- PostgreSQL 17+: refresh may ANALYZE its work tables (fresh row counts
    -- keep its big joins hashed) without owning them.
    if current_setting('server_version_num')::integer >= 170000 then
        execute 'grant maintain on sift.list_build_plan, sift.list_build_entries to sift_writer';
    end if;
end
$maintain$;
