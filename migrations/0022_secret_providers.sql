-- pgsift 0022 (before the squash of release 0.2.0: 0036): a mapped key goes to
-- its provider, and to the hosts named for it, only (issue 37). A tenant's
-- reranker named any secret_ref of its tenant, whatever provider it called and
-- wherever: sift.register_reranker('x', 'tei', base_url => <a host allowed for
-- the tenant>, secret_ref => 'voyage') sent the operator's Voyage key, as a
-- bearer token, to that host. A mapping now says which provider its key is for
-- (or 'any', which only the operator's explicit choice gives) and the hosts,
-- other than that provider's own endpoint, it may go to; sift.register_reranker
-- refuses a reranker that does not fit its key's mapping (SF008), and
-- sift.reranker_for refuses it at search time (the search goes on without
-- reranking, fault not_allowed).
--
-- Mappings written before say neither, so this upgrade fills them in, failing
-- closed where it cannot tell:
--   provider:  the one provider the mapping's own words name (its secret_ref or
--              its source, as a word: 'voyage', 'env:PGSIFT_ACME_VOYAGE',
--              'vault:kv/acme/cohere'), which the operator chose; else the one
--              provider of every reranker of the tenant that names it, when that
--              provider has an endpoint of its own; else none: the mapping is
--              used by no reranker until the operator maps it again
--              (sift.map_secret with a provider).
--   endpoints: for a provider without an endpoint of its own (tei), the
--              base_urls of the tenant's rerankers of that provider that name
--              it and are still under an endpoint the operator allows the
--              tenant (a reranker registered before an endpoint was taken
--              back gets none); else none, i.e.
--              the provider's own endpoint only (a hosted provider's key behind
--              a proxy must be mapped again, naming the proxy).
-- Each mapping left without a provider, and each reranker whose key no longer
-- goes where it calls, is reported as a warning.
--
-- sift.map_secret takes the provider (and the endpoints): its old signature is
-- dropped, so a script calling it without one fails rather than map a key for
-- every provider.
--
-- Also (issue 37): page cursors were signed by sift._cursor_sign, a security
-- definer any reader could call with any payload, so a tenant could re-sign a
-- cursor it had edited. sift._cursor_encode now builds and signs the payload
-- itself from fields it checks, and sift._cursor_verify checks a signature
-- (sql/68_pages.sql); both are re-created by the function files.

alter table sift.secret_mappings
    add column provider text
        constraint secret_provider_shape check (provider ~ '^[a-z][a-z0-9_]{0,31}$'),
    add column endpoints text[]
        constraint secret_endpoints_shape check (
            cardinality(endpoints) between 1 and 64
            and array_position(endpoints, null) is null
            and array_to_string(endpoints, ' ')
                ~ '^https?://[^\s/?#@\\]+(/\S*)?( https?://[^\s/?#@\\]+(/\S*)?)*$');

comment on column sift.secret_mappings.provider is
    'The provider the key is for (sift.reranker_providers), or any: only its rerankers may name '
    'secret_ref. Null (a mapping an upgrade could not place): no reranker may, until the operator '
    'maps it again with sift.map_secret.';
comment on column sift.secret_mappings.endpoints is
    'URL prefixes (as sift.allowed_endpoints'') the key may be sent to besides the provider''s own '
    'endpoint; null: that endpoint only. A reranker with a base_url must also be allowed it.';

with words as (
    -- The providers a mapping's own words name.
    select m.tenant, m.secret_ref, array_agg(p.provider order by p.provider) as providers
    from sift.secret_mappings m
    join sift.reranker_providers p
      on m.secret_ref ~ ('(^|[^a-z])' || p.provider || '([^a-z]|$)')
      or lower(m.source) ~ ('(^|[^a-z])' || p.provider || '([^a-z]|$)')
    group by m.tenant, m.secret_ref),
used as (
    -- The providers of the rerankers that name it.
    select r.tenant, r.secret_ref, array_agg(distinct r.provider order by r.provider) as providers
    from sift.rerankers r
    where r.secret_ref is not null
    group by r.tenant, r.secret_ref),
placed as (
    select m.tenant, m.secret_ref,
           case when cardinality(w.providers) = 1 then w.providers[1]
                when cardinality(u.providers) = 1
                     and not (select p.needs_base_url from sift.reranker_providers p
                              where p.provider = u.providers[1])
                    then u.providers[1] end as provider
    from sift.secret_mappings m
    left join words w on w.tenant = m.tenant and w.secret_ref = m.secret_ref
    left join used u on u.tenant = m.tenant and u.secret_ref = m.secret_ref)
update sift.secret_mappings m
set provider = pl.provider,
    endpoints = case when (select p.needs_base_url from sift.reranker_providers p where p.provider = pl.provider)
                     then nullif(array(select distinct r.base_url from sift.rerankers r
                                       where r.tenant = m.tenant and r.secret_ref = m.secret_ref
                                         and r.provider = pl.provider and r.base_url is not null
                                         and r.base_url ~ '^https?://[^\s/?#@\\]+(/\S*)?$'
                                         -- still under a prefix the operator allows the tenant (as
                                         -- sift._url_under, which the function files make later)
                                         and exists (
                                             select 1 from sift.allowed_endpoints e
                                             where (e.tenant is null or e.tenant = r.tenant)
                                               and left(r.base_url, length(e.url_prefix)) = e.url_prefix
                                               and case when right(e.url_prefix, 1) = ':'
                                                        then substr(r.base_url, length(e.url_prefix) + 1)
                                                             ~ '^[0-9]+([/?#].*)?$'
                                                        when right(e.url_prefix, 1) = '/' then true
                                                        else length(r.base_url) = length(e.url_prefix)
                                                             or substr(r.base_url, length(e.url_prefix) + 1, 1)
                                                                in ('/', ':', '?', '#') end)
                                       order by r.base_url limit 64), '{}') end
from placed pl
where pl.tenant = m.tenant and pl.secret_ref = m.secret_ref and pl.provider is not null;

do $report$
declare
    r record;
begin
    for r in select m.tenant, m.secret_ref from sift.secret_mappings m where m.provider is null
             order by 1, 2 loop
        raise warning 'pgsift: the key of tenant "%" secret_ref "%" is used by no reranker until the operator '
                      'says which provider it is for: select sift.map_secret(%L, %L, <source>, provider => ...)',
                      r.tenant, r.secret_ref, r.tenant, r.secret_ref;
    end loop;
    for r in select x.tenant, x.alias, x.secret_ref, x.provider, m.provider as mapped
             from sift.rerankers x
             join sift.secret_mappings m on m.tenant = x.tenant and m.secret_ref = x.secret_ref
             where m.provider is not null
               and (m.provider not in ('any', x.provider)
                    or (x.base_url is not null and not coalesce(x.base_url = any (m.endpoints), false)))
             order by 1, 2 loop
        raise warning 'pgsift: reranker "%" of tenant "%" no longer gets the key of secret_ref "%" (mapped for %): '
                      'it is refused until the operator maps the key for its provider and endpoint',
                      r.alias, r.tenant, r.secret_ref, r.mapped;
    end loop;
end
$report$;

drop function if exists sift.map_secret(text, text, text);
drop function if exists sift._cursor_sign(text, name);
drop function if exists sift._cursor_encode(text, text, integer, integer, bigint[]);
