-- pgsift 0003: tenancy enforced by the database.
--
-- Every table that holds tenant data has row-level security; the policies
-- (sql/90_trust.sql) admit the rows of sift.current_tenant(), the tenant
-- bound to the session: by the role (sift.tenant_roles), or per transaction
-- by a trusted gateway role (sift.set_tenant). Roles ship with the schema:
--   sift_reader   search, explain, finalize; meters its own reranks
--   sift_writer   + documents, chunks, statistics, golden sets, eval runs
--   sift_admin    + collections and rerankers
--   sift_gateway  may bind any tenant per transaction (an application's
--                 server role, which serves many tenants)
-- The installing role (the operator) owns everything and maps roles to
-- tenants, secrets to tenants, and which endpoints tenants may call.

do $roles$
declare
    r text;
begin
    foreach r in array array['sift_reader', 'sift_writer', 'sift_admin', 'sift_gateway'] loop
        if not exists (select 1 from pg_catalog.pg_roles where rolname = r) then
            begin
                execute pg_catalog.format('create role %I nologin', r);
                -- They nest: an admin is a writer, a writer is a reader.
                if r = 'sift_writer' then
                    execute 'grant sift_reader to sift_writer';
                elsif r = 'sift_admin' then
                    execute 'grant sift_writer to sift_admin';
                end if;
            exception
                when duplicate_object then null;   -- another database's install made it first
                when insufficient_privilege then
                    raise exception 'pgsift needs the role %, and % may not create roles', r, current_user
                        using hint = 'create sift_reader, sift_writer, sift_admin and sift_gateway '
                                     '(nologin) as an administrator, or install with a role that has CREATEROLE';
            end;
        end if;
    end loop;
end
$roles$;

-- Roles whose members act for one tenant, whatever they set.
create table sift.tenant_roles (
    role_name name primary key,
    tenant    sift.name not null
);

-- The operator's map from a tenant's secret_ref to where the key is: an
-- environment variable of the client process ("env:PGSIFT_ACME_VOYAGE") or a
-- reference the application's resolver understands ("vault:kv/acme/voyage").
-- A tenant sees its own rows; only the operator writes them.
create table sift.secret_mappings (
    tenant     sift.name not null,
    secret_ref text not null,
    source     text not null
               constraint secret_source_shape
               check (source ~ '^[a-z][a-z0-9_]{0,31}:\S+$' and length(source) <= 533),
    primary key (tenant, secret_ref)
);

-- Hosts other than a provider's own endpoint that rerankers may call, as
-- allowed by the operator: for one tenant, or for every tenant (tenant null).
create table sift.allowed_endpoints (
    endpoint_id bigint generated always as identity primary key,
    tenant      sift.name,
    url_prefix  text not null
                constraint allowed_endpoint_shape check (url_prefix ~ '^https?://[^\s/]+(:\d+)?(/\S*)?$')
);

alter table sift.collections enable row level security;
alter table sift.documents enable row level security;
alter table sift.chunks enable row level security;
alter table sift.collection_lexical_stats enable row level security;
alter table sift.term_df enable row level security;
alter table sift.term_df_pending enable row level security;
alter table sift.term_lists enable row level security;
alter table sift.term_blocks enable row level security;
alter table sift.term_deltas enable row level security;
alter table sift.list_build_plan enable row level security;
alter table sift.list_build_entries enable row level security;
alter table sift.golden_sets enable row level security;
alter table sift.golden_questions enable row level security;
alter table sift.golden_positives enable row level security;
alter table sift.eval_runs enable row level security;
alter table sift.rerankers enable row level security;
alter table sift.rerank_usage enable row level security;
alter table sift.tenant_roles enable row level security;
alter table sift.secret_mappings enable row level security;
alter table sift.allowed_endpoints enable row level security;
