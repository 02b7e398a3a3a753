-- Endpoints and roles: where a tenant's reranker may call and which role
-- acts for which tenant. In: URL prefixes the operator allows
-- (sift.allow_endpoint), roles mapped to tenants (sift.map_role). Out: the
-- checks sift.register_reranker and sift.map_secret run before a key is
-- bound to a provider and its hosts.


create or replace function sift._url_under(url text, prefix text)
returns boolean
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Whether url starts with an operator's prefix and ends there or goes on at
    -- a boundary (https://api.example.com never admits
    -- https://api.example.com.attacker.net): a prefix ending in ':' admits a
    -- port, nothing else; one ending in '/' anything below it; any other goes
    -- on only with '/', ':', '?' or '#'. The host part never holds
    -- credentials (user:password@host sends the request elsewhere).
    select coalesce(
        url !~ '^[a-z]+://[^/?#]*[@\\]'
        and pg_catalog.left(url, pg_catalog.length(prefix)) = prefix
        and case when pg_catalog.right(prefix, 1) = ':'
                 then pg_catalog.substr(url, pg_catalog.length(prefix) + 1) ~ '^[0-9]+([/?#].*)?$'
                 when pg_catalog.right(prefix, 1) = '/' then true
                 else pg_catalog.length(url) = pg_catalog.length(prefix)
                      or pg_catalog.substr(url, pg_catalog.length(prefix) + 1, 1) in ('/', ':', '?', '#') end,
        false)
$$;
comment on function sift._url_under(text, text) is
    'Internal: whether url is under an operator''s URL prefix (sift.allowed_endpoints, '
    'sift.secret_mappings.endpoints), at a boundary, with no credentials before its host.';


create or replace function sift._endpoint_allowed(tenant text, url text)
returns boolean
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- No url: the provider's own endpoint. Otherwise under a prefix the
    -- operator allowed for the tenant, or for every tenant (sift._url_under).
    select url is null or exists (
        select 1 from sift.allowed_endpoints e
        where (e.tenant is null or e.tenant = _endpoint_allowed.tenant)
          and sift._url_under(url, e.url_prefix))
$$;
comment on function sift._endpoint_allowed(text, text) is
    'Internal: whether a reranker of this tenant may call url (null: the provider''s own endpoint).';


create or replace function sift._secret_refusal(mapping sift.secret_mappings, provider text, base_url text)
returns text
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Why a reranker of this provider, calling base_url (null: the provider's
    -- own endpoint), may not be given the key of this mapping; null when it
    -- may. A key goes to the provider it is mapped for (or any, the operator's
    -- explicit choice), at its own endpoint or under one of the mapping's
    -- endpoints, and nowhere else.
    select case
        when mapping.provider is null then
            pg_catalog.format('the operator has not said which provider the key of secret_ref "%s" is for: no '
                              'reranker gets it until it is mapped again (sift.map_secret(%L, %L, ..., '
                              'provider => ...))', mapping.secret_ref, mapping.tenant, mapping.secret_ref)
        when mapping.provider not in ('any', provider) then
            pg_catalog.format('the key of secret_ref "%s" is mapped for %s, not for %s: a %s reranker names a '
                              'secret_ref the operator mapped for %s', mapping.secret_ref, mapping.provider,
                              provider, provider, provider)
        when base_url is not null and not exists (
                select 1 from pg_catalog.unnest(mapping.endpoints) as e(prefix)
                where sift._url_under(base_url, e.prefix)) then
            pg_catalog.format('the key of secret_ref "%s" may not be sent to %s: the operator mapped it for %s',
                              mapping.secret_ref, pg_catalog.left(base_url, 200),
                              pg_catalog.concat_ws(' and ', pg_catalog.array_to_string(mapping.endpoints, ', '),
                                                   case when mapping.provider = 'any'
                                                        then 'the providers'' own endpoints'
                                                        else mapping.provider || '''s own endpoint' end))
    end
$$;
comment on function sift._secret_refusal(sift.secret_mappings, text, text) is
    'Internal: why the key of a secret mapping may not go to a reranker of this provider calling '
    'base_url (null: the provider''s own endpoint), or null when it may: the mapping names that '
    'provider (or any) and, for a base_url, an endpoint it is under.';


create or replace function sift.allow_endpoint(url_prefix text, tenant text default null)
returns bigint
language sql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
    insert into sift.allowed_endpoints (tenant, url_prefix) values (tenant, url_prefix)
    returning endpoint_id
$$;
comment on function sift.allow_endpoint(text, text) is
    'Operator only: lets rerankers of one tenant (or of every tenant: null) call a host other than '
    'their provider''s own, e.g. a self-hosted TEI server. Writes.';


create or replace function sift.map_role(role_name name, tenant text)
returns void
language sql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
    insert into sift.tenant_roles (role_name, tenant) values (role_name, tenant)
    on conflict on constraint tenant_roles_pkey do update set tenant = excluded.tenant
$$;
comment on function sift.map_role(name, text) is
    'Operator only: the role (and its members) acts for this tenant, whatever it binds. Writes.';
