-- Rerankers: which hosted reranker a search uses, and thresholds calibrated
-- for one (its pool: sql/81_rerank_pool.sql; what each call cost:
-- sql/82_rerank_usage.sql; endpoints and roles: sql/78_endpoints.sql). The
-- rerank call itself runs in the client (the one step that leaves the
-- database); every decision about WHICH
-- reranker runs, for which tenant, with which key and endpoint, is made here,
-- so psql users and every client agree.
-- In: the collections searched and a call's reranker knobs. Out: the reranker
-- a search uses (or why none), its key's location and endpoint, calibrated
-- thresholds.
--
-- Secrets: a reranker names a secret_ref; the operator maps (tenant,
-- secret_ref) to where the key is (sift.secret_mappings), the provider it is
-- for and the hosts it may go to besides that provider's own endpoint. A
-- tenant can only reach its own mappings, never a variable of the client
-- process by name, and its key reaches no other provider or host.
-- Endpoints: a provider's own, or a host the operator allowed
-- (sift.allowed_endpoints).


create or replace function sift.contextualize(context text, content text)
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The text a reranker scores: the chunk's context header, a blank line,
    -- then its text (the text alone when there is no header). The Python
    -- twin is pgsift.rerankers.contextualize.
    select case when context is null or pg_catalog.btrim(context) = '' then content
                else context || E'\n\n' || content end
$$;
comment on function sift.contextualize(text, text) is
    'The text a reranker scores for a chunk: context || E''\n\n'' || content, or content alone '
    'when the context header is null or blank.';


create or replace function sift.rerank_texts(chunk_ids bigint[])
returns table (ord integer, chunk_id bigint, document text)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- One statement for the whole pool (never one per candidate), in the
    -- order given; ids that are not chunks of this tenant are left out.
    select u.o::integer, k.chunk_id, sift.contextualize(k.context, k.content)
    from pg_catalog.unnest(rerank_texts.chunk_ids) with ordinality as u(id, o)
    join sift.chunks k on k.chunk_id = u.id
    join sift.collections c on c.collection_id = k.collection_id
    where c.tenant = sift.current_tenant()
    order by u.o
$$;
comment on function sift.rerank_texts(bigint[]) is
    'The texts a reranker scores for a candidate pool (sift.contextualize of each chunk), in the '
    'order of chunk_ids, with ord = the 1-based place in chunk_ids; chunks of other tenants are '
    'left out. Read-only.';


create or replace function sift.register_reranker(
    alias         text,
    provider      text,
    model         text default null,
    base_url      text default null,
    secret_ref    text default null,
    timeout_ms    sift.rerank_timeout_ms default 2000,
    deadline_ms   sift.rerank_deadline_ms default 3000,
    max_attempts  sift.rerank_attempts default 2,
    context_chars sift.rerank_context_chars default 1500,
    is_default    boolean default false)
returns sift.rerankers
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    bound   text := sift.current_tenant();
    known   sift.reranker_providers;
    saved   sift.rerankers;
    mapping sift.secret_mappings;
    why     text;
begin
    select p.* into known from sift.reranker_providers p where p.provider = register_reranker.provider;
    if known.provider is null then
        raise exception 'unknown reranker provider "%"', left(provider, 100)
            using errcode = 'SF003',
                  hint = 'providers: ' || (select string_agg(p.provider, ', ' order by p.provider)
                                           from sift.reranker_providers p);
    end if;
    if secret_ref is not null and secret_ref !~ '^[a-z][a-z0-9_.-]{0,63}$' then
        -- Never echo the value: it may be the key itself.
        raise exception 'secret_ref must be a short lower-case name the operator maps to the key, not the key'
            using errcode = 'SF003',
                  hint = 'e.g. secret_ref => ''voyage''; the operator maps it with '
                         'sift.map_secret(tenant, ''voyage'', ''env:VAR'', provider => ''voyage'')';
    end if;
    if known.needs_secret and secret_ref is null then
        raise exception '% bills an account: register it with a secret_ref', provider using errcode = 'SF003';
    end if;
    if known.needs_base_url and base_url is null then
        raise exception '% has no public endpoint: register it with a base_url', provider using errcode = 'SF003';
    end if;
    if not sift._endpoint_allowed(bound, base_url) then
        raise exception 'base_url % is not an endpoint the operator allows for tenant "%"', left(base_url, 200), bound
            using errcode = 'SF008',
                  hint = 'leave base_url out for the provider''s own endpoint, or ask the operator to allow it '
                         '(sift.allow_endpoint)';
    end if;
    -- A key goes to the provider and the hosts it is mapped for. A secret_ref
    -- not mapped yet is checked once it is (sift.reranker_for, every search).
    select m.* into mapping from sift.secret_mappings m
    where m.tenant = bound and m.secret_ref = register_reranker.secret_ref;
    if found then
        why := sift._secret_refusal(mapping, provider, base_url);
        if why is not null then
            raise exception '%', why
                using errcode = 'SF008',
                      hint = 'name a secret_ref mapped for this provider and endpoint, or ask the operator to map '
                             'one (sift.map_secret(tenant, secret_ref, source, provider => ..., endpoints => ...))';
        end if;
    end if;
    if is_default then
        update sift.rerankers r set is_default = false
        where r.tenant = bound and r.is_default and r.alias <> alias;
    end if;
    insert into sift.rerankers as r
        (tenant, alias, provider, model, base_url, secret_ref, timeout_ms, deadline_ms,
         max_attempts, context_chars, is_default)
    values (bound, alias, provider, coalesce(model, known.default_model), base_url, secret_ref,
            timeout_ms, deadline_ms, max_attempts, context_chars, coalesce(is_default, false))
    on conflict on constraint rerankers_tenant_alias_key do update set
        provider = excluded.provider, model = excluded.model, base_url = excluded.base_url,
        secret_ref = excluded.secret_ref, timeout_ms = excluded.timeout_ms,
        deadline_ms = excluded.deadline_ms, max_attempts = excluded.max_attempts,
        context_chars = excluded.context_chars, is_default = excluded.is_default
    returning r.* into saved;
    return saved;
end;
$$;
comment on function sift.register_reranker(text, text, text, text, text, sift.rerank_timeout_ms,
    sift.rerank_deadline_ms, sift.rerank_attempts, sift.rerank_context_chars, boolean) is
    'Registers (or replaces, every setting) a reranker of the current tenant under an alias. '
    'provider: a row of sift.reranker_providers (voyage, cohere, tei); model defaults to the '
    'provider''s. base_url: null for the provider''s own endpoint, else one the operator allowed '
    '(SF008). secret_ref: a name the operator maps to this tenant''s key (sift.map_secret), never '
    'the key; one mapped for another provider, or not for this base_url, is refused (SF008). '
    'timeout_ms per HTTP attempt, deadline_ms for the whole rerank of a search, max_attempts, '
    'context_chars of conversation before the query. is_default makes it the '
    'tenant''s default (it scores a search over collections naming different rerankers). Writes.';


create or replace function sift.drop_reranker(alias text)
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    bound text := sift.current_tenant();
begin
    -- Collections that named it stop reranking (they fall back to the fused
    -- order) rather than point at nothing.
    update sift.collections c set reranker_alias = null, knobs = c.knobs - 'rerank'
    where c.tenant = bound and c.reranker_alias = alias;
    delete from sift.rerankers r where r.tenant = bound and r.alias = alias;
    return found;
end;
$$;
comment on function sift.drop_reranker(text) is
    'Deletes a reranker of the current tenant; the collections that named it are detached. '
    'Returns false when there was none. Writes.';


create or replace function sift._reranker_choice(
    cols sift.collections[], knobs sift.knob_set[],
    out alias text, out chosen_by text, out refused text, out rerank_top_n integer)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    aliases text[];
begin
    -- The collections that ask for a rerank: switched on, with a reranker named.
    select array_agg(distinct (cols[i]).reranker_alias::text order by (cols[i]).reranker_alias::text),
           max((knobs[i]).rerank_top_n)
    into aliases, rerank_top_n
    from generate_subscripts(cols, 1) as i
    where (knobs[i]).rerank and (cols[i]).reranker_alias is not null;
    if aliases is null then
        rerank_top_n := null;
        return;   -- reranking is off
    end if;
    -- One reranker scores the whole pool (one score scale): the collections'
    -- common one, else the tenant's default.
    if cardinality(aliases) = 1 then
        alias := aliases[1];
        chosen_by := 'collection';
        return;
    end if;
    select r.alias into alias from sift.rerankers r
    where r.tenant = (cols[1]).tenant and r.is_default;
    chosen_by := 'tenant_default';
    if alias is null then
        refused := format('the collections name different rerankers (%s) and tenant "%s" has no '
                          'default reranker', array_to_string(aliases, ', '), (cols[1]).tenant);
    end if;
end;
$$;
comment on function sift._reranker_choice(sift.collections[], sift.knob_set[]) is
    'Internal: which reranker scores a search over these collections (their common one, else the '
    'tenant''s default), or why none can; null alias when reranking is off.';


create or replace function sift.list_rerankers()
returns table (
    reranker_id   bigint,
    tenant        text,
    alias         text,
    provider      text,
    model         text,
    base_url      text,
    secret_ref    text,
    secret_source text,
    timeout_ms    integer,
    deadline_ms   integer,
    max_attempts  integer,
    context_chars integer,
    is_default    boolean,
    refused       text,
    limits        jsonb)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Each reranker with what sift.reranker_for would refuse it for (an
    -- endpoint the operator no longer allows, a key mapped for another
    -- provider or host) and where its key is kept (secret_source null: its
    -- secret_ref is not mapped).
    select r.reranker_id, r.tenant::text, r.alias::text, r.provider, r.model, r.base_url, r.secret_ref,
           m.source, r.timeout_ms::integer, r.deadline_ms::integer, r.max_attempts::integer,
           r.context_chars::integer, r.is_default,
           case when not sift._endpoint_allowed(r.tenant, r.base_url)
                    then pg_catalog.format('reranker "%s" calls %s, which the operator no longer allows for '
                                           'tenant "%s"', r.alias, r.base_url, r.tenant)
                when m.secret_ref is not null
                    then 'reranker "' || r.alias || '": ' || sift._secret_refusal(m, r.provider, r.base_url)
           end,
           (select pg_catalog.to_jsonb(l) from sift.reranker_limits l
            where l.provider = r.provider and l.model in (r.model, '*')
            order by l.model = '*', l.model limit 1)
    from sift.rerankers r
    left join sift.secret_mappings m on m.tenant = r.tenant and m.secret_ref = r.secret_ref
    where r.tenant = sift.current_tenant()
    order by r.alias, r.reranker_id;
$$;
comment on function sift.list_rerankers() is
    'The current tenant''s rerankers: provider, model, endpoint, secret_ref and where the operator '
    'keeps its key (secret_source; null: not mapped, so no search can call it), timeouts, whether '
    'it is the default, why a search cannot use it (refused: an endpoint no longer allowed, a key '
    'mapped for another provider or host; null: nothing) and the provider''s limits that apply. '
    'No network call. `pgsift reranker list` prints it.';


create or replace function sift.store_calibrated_threshold(
    collection     text,
    reranker_alias text,
    value          sift.score_threshold)
returns sift.collections
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    col     sift.collections := sift._collection(collection);
    changed sift.collections;
begin
    if value is null then
        raise exception 'value must be a number' using errcode = 'SF003';
    end if;
    if reranker_alias is null or not exists (
            select 1 from sift.rerankers r where r.tenant = col.tenant and r.alias = reranker_alias) then
        raise exception 'no reranker "%" is registered for tenant "%" (collection "%")',
            left(reranker_alias, 128), col.tenant, col.name
            using errcode = 'SF008',
                  hint = 'a threshold is calibrated for one of the collection''s own tenant''s rerankers';
    end if;
    -- Two steps: the collections trigger forgets the reranker of a threshold
    -- that changes under an unchanged tag; the new tag marks it calibrated.
    update sift.collections c set knobs = c.knobs - 'threshold_reranker'
    where c.collection_id = col.collection_id;
    update sift.collections c
    set knobs = c.knobs || jsonb_build_object('score_threshold', value, 'threshold_reranker', reranker_alias)
    where c.collection_id = col.collection_id
    returning c.* into changed;
    return changed;
end;
$$;
comment on function sift.store_calibrated_threshold(text, text, sift.score_threshold) is
    'Stores a score threshold calibrated for a reranker (pgsift calibrate --store): the '
    'collection''s score_threshold and threshold_reranker knobs, the alias registered for the '
    'collection''s tenant (else SF008). Finalize applies it only to pools that reranker scored; '
    'changing the collection''s reranker clears it. Writes.';


-- The operator's side (owner-only tables; these fail for anyone else).

create or replace function sift.map_secret(
    tenant     text,
    secret_ref text,
    source     text,
    provider   text,
    endpoints  text[] default null)
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    known sift.reranker_providers;
    bad   text;
begin
    -- A key is for one provider (or any, said so), at its own endpoint and at
    -- the hosts named here: a reranker of another provider, or calling another
    -- host, never gets it (sift._secret_refusal).
    select p.* into known from sift.reranker_providers p where p.provider = map_secret.provider;
    if known.provider is null and provider is distinct from 'any' then
        raise exception 'say which provider the key of secret_ref "%" is for (got %)', left(secret_ref, 64),
                coalesce('"' || left(provider, 64) || '"', 'none')
            using errcode = 'SF003',
                  hint = 'provider => one of ' || (select string_agg(p.provider, ', ' order by p.provider)
                                                   from sift.reranker_providers p)
                         || ', or ''any'' for a key any provider''s reranker may be given';
    end if;
    select e into bad from pg_catalog.unnest(endpoints) as e
    where e is null or e !~ '^https?://[^\s/?#@\\]+(/\S*)?$' limit 1;
    if found or cardinality(endpoints) not between 1 and 64 then
        raise exception 'endpoints must be 1 to 64 http(s) URL prefixes with no credentials before the host (got %)',
                coalesce('"' || left(bad, 200) || '"', cardinality(endpoints)::text || ' of them')
            using errcode = 'SF003';
    end if;
    if known.needs_base_url and endpoints is null then
        raise exception '% has no endpoint of its own: name the hosts its key may be sent to', provider
            using errcode = 'SF003', hint = 'endpoints => array[''http://tei.internal:8080'']';
    end if;
    insert into sift.secret_mappings as m (tenant, secret_ref, source, provider, endpoints)
    values (tenant, secret_ref, source, provider, endpoints)
    on conflict on constraint secret_mappings_pkey do update
        set source = excluded.source, provider = excluded.provider, endpoints = excluded.endpoints;
end;
$$;
comment on function sift.map_secret(text, text, text, text, text[]) is
    'Operator only: where the key of a tenant''s secret_ref is, e.g. ''env:PGSIFT_ACME_VOYAGE'' '
    '(an environment variable of the client process) or ''vault:kv/acme/voyage'' (for the '
    'application''s resolver), and where it may go: provider, whose rerankers alone may name it '
    '(voyage, cohere, tei, or ''any''), and endpoints, URL prefixes it may be sent to besides that '
    'provider''s own endpoint (required for tei, which has none). A reranker of another provider, '
    'or calling another host, is refused (SF008 when registered; refused at search time). Writes.';
