-- Rerankers: which hosted reranker a search uses, what each call cost, and
-- thresholds calibrated for one. The rerank call itself runs in the client
-- (the one step that leaves the database); every decision about WHICH
-- reranker runs, for which tenant, with which key and endpoint, is made here,
-- so psql users and every client agree.
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


create or replace function sift._reranker_config(
    cols     sift.collections[],
    ks       sift.knob_set[],
    reranker text)
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
    rerank_top_n  integer,
    chosen_by     text,
    refused       text,
    limits        jsonb)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    choice  record;
    chosen  sift.rerankers;
    mapping sift.secret_mappings;
    why     text;
begin
    if _reranker_config.reranker is not null then
        -- A named reranker (calibration): the tenant's own, else refused.
        if not exists (select 1 from sift.rerankers r
                       where r.tenant = (cols[1]).tenant and r.alias = _reranker_config.reranker) then
            raise exception 'no reranker "%" is registered for tenant "%"', left(_reranker_config.reranker, 128),
                (cols[1]).tenant
                using errcode = 'SF008';
        end if;
        select _reranker_config.reranker as alias, 'named'::text as chosen_by, null::text as refused,
               (select max((ks[i]).rerank_top_n) from generate_subscripts(ks, 1) as i) as rerank_top_n
        into choice;
    else
        choice := sift._reranker_choice(cols, ks);
    end if;
    if choice.alias is null and choice.refused is null then
        return;   -- reranking is off: no row
    end if;
    if choice.refused is null then
        select r.* into chosen from sift.rerankers r
        where r.tenant = (cols[1]).tenant and r.alias = choice.alias;
        if chosen.reranker_id is null then
            why := format('reranker "%s" is not registered for tenant "%s"', choice.alias, (cols[1]).tenant);
        elsif not sift._endpoint_allowed(chosen.tenant, chosen.base_url) then
            why := format('reranker "%s" calls %s, which the operator no longer allows for tenant "%s"',
                          chosen.alias, chosen.base_url, chosen.tenant);
        else
            -- Its key goes only where its mapping sends it: that provider, those hosts.
            select m.* into mapping from sift.secret_mappings m
            where m.tenant = chosen.tenant and m.secret_ref = chosen.secret_ref;
            if found then
                why := 'reranker "' || chosen.alias || '": '
                       || sift._secret_refusal(mapping, chosen.provider, chosen.base_url);
            end if;
        end if;
    end if;
    why := coalesce(choice.refused, why);
    if why is not null then
        return query select null::bigint, (cols[1]).tenant::text, choice.alias, null::text, null::text,
            null::text, null::text, null::text, null::integer, null::integer, null::integer, null::integer,
            choice.rerank_top_n, case when choice.refused is null then 'refused' else choice.chosen_by end, why,
            null::jsonb;
        return;
    end if;
    return query select chosen.reranker_id, chosen.tenant::text, chosen.alias::text, chosen.provider,
        chosen.model, chosen.base_url, chosen.secret_ref, mapping.source, chosen.timeout_ms::integer,
        chosen.deadline_ms::integer, chosen.max_attempts::integer, chosen.context_chars::integer,
        choice.rerank_top_n, choice.chosen_by, null::text,
        -- The model's own limits, else the provider's ('*').
        (select pg_catalog.to_jsonb(l) from sift.reranker_limits l
         where l.provider = chosen.provider and l.model in (chosen.model, '*')
         order by l.model = '*', l.model limit 1);
end;
$$;
comment on function sift._reranker_config(sift.collections[], sift.knob_set[], text) is
    'Internal: sift.reranker_for''s answer for resolved collections and knobs (no row: reranking '
    'is off), without its warning.';


create or replace function sift.reranker_for(
    collection  text default null,
    knobs       jsonb default '{}',
    collections text[] default null,
    reranker    text default null)
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
    rerank_top_n  integer,
    chosen_by     text,
    refused       text,
    limits        jsonb)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cols sift.collections[] := sift._collections(reranker_for.collection, reranker_for.collections);
begin
    for reranker_id, tenant, alias, provider, model, base_url, secret_ref, secret_source, timeout_ms, deadline_ms,
        max_attempts, context_chars, rerank_top_n, chosen_by, refused, limits in
        select * from sift._reranker_config(cols, sift._resolve_all(cols, reranker_for.knobs), reranker_for.reranker)
    loop
        if refused is not null then
            raise warning 'pgsift: %', refused;
        end if;
        return next;
    end loop;
end;
$$;
comment on function sift.reranker_for(text, jsonb, text[], text) is
    'The reranker a search over these collections (with these knobs) uses, or the one named by '
    'reranker (chosen_by = named; another tenant''s: SF008): no row when reranking '
    'is off (the rerank knob, and a reranker named); else one row: the collections'' common '
    'reranker (chosen_by = collection) or, when they name different ones, the tenant''s default '
    '(chosen_by = tenant_default), with rerank_top_n = the largest of theirs and secret_source = '
    'where the operator keeps this tenant''s key for its secret_ref (null: not mapped). refused is '
    'set (and the provider columns null) when it cannot run: different rerankers and no default, '
    'an endpoint the operator no longer allows, or a key mapped for another provider or host. '
    'limits: the row of sift.reranker_limits for its model (else the provider''s ''*'' row; null: '
    'none), how the client splits and clips the pool. '
    'Read-only.';


create or replace function sift._reranks(collection text, collections text[], knobs jsonb)
returns boolean
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cols sift.collections[];
begin
    -- Whether sift.search with these arguments names a reranker (its reranker
    -- column): then the client's search reranks, and takes its pool from
    -- sift.rerank_pool instead. Without a collection that names a reranker
    -- this is one lookup, no knob resolved: a search that cannot rerank pays
    -- next to nothing for asking. (Unknown names: false; the search says so.)
    if not exists (select 1 from sift.collections c
                   where c.tenant = sift.current_tenant() and c.reranker_alias is not null
                     and c.name = any (coalesce(_reranks.collections, array[_reranks.collection]))) then
        return false;
    end if;
    cols := sift._collections(_reranks.collection, _reranks.collections);
    return (sift._reranker_choice(cols, sift._resolve_all(cols, _reranks.knobs))).alias is not null;
end;
$$;
comment on function sift._reranks(text, text[], jsonb) is
    'Internal: whether a search over these collections with these knobs names a reranker '
    '(sift.search''s reranker column; the rerank knob on and a reranker named): the client then '
    'fetches the pool with sift.rerank_pool instead of searching twice.';


create or replace function sift.rerank_pool(
    collection      text default null,
    query_text      text default '',
    query_embedding @extschema:vector@.vector default null,
    match_count     integer default 10,
    filter          jsonb default '{}',
    knobs           jsonb default '{}',
    collections     text[] default null,
    spaces          text[] default null,
    space_embeddings @extschema:vector@.vector[] default null,
    space_weights   double precision[] default null,
    reranker        text default null,
    pool_size       integer default null)
returns table (
    ord                    integer,
    chunk_id               bigint,
    document_id            bigint,
    collection_name        text,
    fused_rank             integer,
    score                  double precision,
    found_by               text,
    dense_rank             integer,
    dense_distance         double precision,
    lexical_rank           integer,
    lexical_score          double precision,
    legs                   text[],
    lexical_query          text,
    lexical_configs        text[],
    lexical_exact          boolean,
    late_interaction_score double precision,
    leg_details            jsonb,
    document               text,
    more                   boolean,
    reranker_config        jsonb)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cols   sift.collections[] := sift._collections(rerank_pool.collection, rerank_pool.collections);
    ks     sift.knob_set[] := sift._resolve_all(cols, rerank_pool.knobs);
    config record;
    size   integer;
begin
    perform sift._check_query(cols, ks, rerank_pool.query_text, rerank_pool.query_embedding, rerank_pool.match_count,
                              rerank_pool.filter, rerank_pool.spaces, rerank_pool.space_embeddings,
                              rerank_pool.space_weights);
    select r.* into config from sift._reranker_config(cols, ks, rerank_pool.reranker) r;
    -- As many as the reranker scores: max(match_count, rerank_top_n), at most 1,000; the
    -- match_count alone when it cannot run (the search then falls back to these, fused).
    size := coalesce(rerank_pool.pool_size,
                     case when config.refused is null and config.provider is not null and rerank_pool.match_count > 0
                          then least(greatest(rerank_pool.match_count, coalesce(config.rerank_top_n, 0)), 1000)
                          else rerank_pool.match_count end);
    if size not between 0 and 1000 then
        raise exception 'pool_size must be between 0 and 1000, got %', size
            using errcode = '23514', constraint = 'pool_size_valid';
    end if;
    -- Past the tenant's max_match_count, as sift.candidates with that match_count is (SF015).
    perform sift._within_ceilings(cols, size);
    return query
    with pool as (
        -- The fused pool in fused order, and one more to tell whether it goes on.
        select c.*, pg_catalog.row_number() over (order by c.fused_rank, c.chunk_id)::integer as n
        from sift._candidates(cols, ks, rerank_pool.query_text, rerank_pool.query_embedding, size, rerank_pool.filter,
                              rerank_pool.spaces, rerank_pool.space_embeddings, rerank_pool.space_weights) c
        order by c.fused_rank, c.chunk_id
        limit size + 1
    )
    select p.n, p.chunk_id, p.document_id, p.collection_name, p.fused_rank, p.score, p.found_by, p.dense_rank,
           p.dense_distance, p.lexical_rank, p.lexical_score, p.legs, p.lexical_query, p.lexical_configs,
           p.lexical_exact, p.late_interaction_score, p.leg_details,
           coalesce(sift.contextualize(k.context, k.content), ''),
           (select pg_catalog.count(*) from pool) > size,
           case when config.chosen_by is not null then pg_catalog.to_jsonb(config) end
    from pool p
    left join sift.chunks k on k.chunk_id = p.chunk_id
    where p.n <= size
    order by p.n;
end;
$$;
comment on function sift.rerank_pool(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[], text[],
    @extschema:vector@.vector[], double precision[], text, integer) is
    'The pool a hosted reranker scores for a search (the arguments of sift.search, but '
    'query_tokens), in one statement: the first pool_size candidates of the fused pool in '
    'fused order (ord 1, 2, ...; sift.candidates'' columns), each with document, the text the '
    'reranker scores (sift.contextualize of its context and content). pool_size defaults to '
    'what a search reranks: max(match_count, rerank_top_n), at most 1,000, or match_count when '
    'no reranker can run. more: whether the fused pool goes on past it. reranker_config: '
    'sift.reranker_for''s row for these collections and knobs, or for the tenant''s reranker '
    'named by reranker (null: reranking is off). Hand the reranker''s scores to sift.finalize '
    '(chunk_ids in ord order) for the search''s answer. Read-only.';


create or replace function sift.record_rerank_usage(
    reranker_alias text,
    provider       text,
    model          text,
    documents      integer,
    latency_ms     double precision,
    ok             boolean,
    tokens         bigint default null,
    search_units   double precision default null,
    attempts       integer default 1,
    error          text default null)
returns bigint
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    id bigint;
begin
    insert into sift.rerank_usage as u
        (tenant, reranker_alias, provider, model, documents, tokens, search_units, latency_ms,
         attempts, ok, billed, error)
    values (sift.current_tenant(), left(reranker_alias, 128), left(provider, 64), left(model, 200), documents,
            tokens, search_units, greatest(latency_ms, 0), greatest(coalesce(attempts, 1), 1), ok,
            -- A failed call is never billed.
            coalesce(ok, false),
            case when coalesce(ok, false) then left(error, 2000) else left(coalesce(error, 'failed'), 2000) end)
    returning u.usage_id into id;
    return id;
end;
$$;
comment on function sift.record_rerank_usage(text, text, text, integer, double precision, boolean,
    bigint, double precision, integer, text) is
    'Meters one rerank call for the current tenant: reranker alias, provider, model, documents '
    'sent, the tokens (or Cohere search units) the provider reported, latency and attempts. ok = '
    'false records a failed call, never billed, with its error. The row is priced as it is written '
    '(cost and currency, at the price in effect: sift.rerank_cost). Returns the usage_id. Writes (on a '
    'hot standby it cannot: the client sends it to a primary or returns it).';


create or replace function sift.rerank_cost(
    provider     text,
    model        text,
    tokens       bigint default null,
    search_units double precision default null,
    at           timestamptz default pg_catalog.now(),
    billed       boolean default true,
    out price_id bigint,
    out cost     numeric,
    out currency text)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The price in effect at `at`: the model's own, else the provider's '*'
    -- (a model's first price may come later than the provider's). Each rate
    -- the price sets is charged on its unit; a unit the provider did not
    -- report leaves the cost unknown (null), unless its rate is 0. A call
    -- not billed costs 0. No price: nulls, never 0.
    with p as (
        select r.price_id, r.price_per_million_tokens, r.price_per_search_unit, r.currency
        from sift.rerank_prices r
        where r.provider = rerank_cost.provider and r.model in (rerank_cost.model, '*')
          and r.effective_from <= rerank_cost.at
        order by r.model = '*', r.effective_from desc, r.price_id desc
        limit 1
    ), c as (
        select p.price_id, p.currency,
               case when not coalesce(rerank_cost.billed, false) then 0::numeric
                    else case when coalesce(p.price_per_million_tokens, 0) = 0 then 0::numeric
                              else rerank_cost.tokens::numeric * p.price_per_million_tokens / 1000000 end
                       + case when coalesce(p.price_per_search_unit, 0) = 0 then 0::numeric
                              else rerank_cost.search_units::numeric * p.price_per_search_unit end
               end as cost
        from p
    )
    select c.price_id, pg_catalog.trim_scale(c.cost), case when c.cost is not null then c.currency end
    from c
$$;
comment on function sift.rerank_cost(text, text, bigint, double precision, timestamptz, boolean) is
    'What a rerank call of this provider and model, reporting these tokens and search units, cost '
    'at `at` (default now): the price in effect then (sift.rerank_prices: the model''s own, else the '
    'provider''s ''*''), tokens / 1e6 x price_per_million_tokens + search_units x '
    'price_per_search_unit, 0 when not billed. price_id, cost and currency are null when no price '
    'was in effect; cost and currency are null when a rate of the price needs a unit not reported. '
    'How each usage row is priced when written. Read-only.';


create or replace function sift._rerank_usage_before_insert()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Whoever writes the row (sift.record_rerank_usage or a direct insert),
    -- its cost is the operator's price at the row's time, never a value the
    -- writer gives.
    select c.price_id, c.cost, c.currency into new.price_id, new.cost, new.currency
    from sift.rerank_cost(new.provider, new.model, new.tokens, new.search_units, new.created_at, new.billed) c;
    return new;
end;
$$;
comment on function sift._rerank_usage_before_insert() is
    'Trigger: a new usage row is priced at the price in effect at its created_at '
    '(sift.rerank_cost); a cost, currency or price_id given by the writer is replaced.';

-- create or replace: re-applying it never locks out readers (PostgreSQL 14+).
create or replace trigger rerank_usage_before_insert
    before insert on sift.rerank_usage
    for each row execute function sift._rerank_usage_before_insert();


create or replace function sift.rerank_spend(
    since   timestamptz default null,
    until   timestamptz default null,
    tenants text[] default null)
returns table (
    tenant         text,
    provider       text,
    model          text,
    currency       text,
    calls          bigint,
    tokens         numeric,
    search_units   double precision,
    cost           numeric,
    unpriced_calls bigint)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Billed calls only (a failed call is never billed). A row's currency is
    -- null exactly when its cost is, so each group is priced throughout
    -- (cost: the sum) or unpriced throughout (cost null, every call counted
    -- in unpriced_calls): an unknown cost never adds up to 0.
    select u.tenant::text, u.provider, u.model, u.currency, pg_catalog.count(*), pg_catalog.sum(u.tokens),
           pg_catalog.sum(u.search_units), pg_catalog.sum(u.cost),
           pg_catalog.count(*) filter (where u.cost is null)
    from sift.rerank_usage u
    where u.billed
      and (rerank_spend.since is null or u.created_at >= rerank_spend.since)
      and (rerank_spend.until is null or u.created_at < rerank_spend.until)
      and (rerank_spend.tenants is null or u.tenant = any (rerank_spend.tenants))
    group by u.tenant, u.provider, u.model, u.currency
    order by u.tenant, u.provider, u.model, u.currency nulls last
$$;
comment on function sift.rerank_spend(timestamptz, timestamptz, text[]) is
    'Rerank spend from since (inclusive) to until (exclusive; null: no bound), one row per '
    'tenant, provider, model and currency: billed calls, the tokens and search units reported, '
    'and cost, the sum of the costs stored on the usage rows (sift.rerank_prices). Calls with no '
    'price make a row of their own with currency and cost null and unpriced_calls = calls. A '
    'tenant sees its own spend (row-level security); the operator every tenant''s, or those in '
    'tenants. Read-only.';


create or replace function sift.reprice_rerank_usage(
    since   timestamptz,
    until   timestamptz default null,
    tenants text[] default null)
returns bigint
language sql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- A usage row keeps the cost it was written with; after a late price fix
    -- the operator prices the period again. Only rows whose price or cost
    -- changes are written.
    with priced as (
        select u.usage_id, c.price_id, c.cost, c.currency
        from sift.rerank_usage u
        cross join lateral sift.rerank_cost(u.provider, u.model, u.tokens, u.search_units, u.created_at,
                                            u.billed) c
        where u.created_at >= reprice_rerank_usage.since
          and (reprice_rerank_usage.until is null or u.created_at < reprice_rerank_usage.until)
          and (reprice_rerank_usage.tenants is null or u.tenant = any (reprice_rerank_usage.tenants))
    ), changed as (
        update sift.rerank_usage u
        set price_id = p.price_id, cost = p.cost, currency = p.currency
        from priced p
        where u.usage_id = p.usage_id
          and (u.price_id, u.cost, u.currency) is distinct from (p.price_id, p.cost, p.currency)
        returning 1
    )
    select pg_catalog.count(*) from changed
$$;
comment on function sift.reprice_rerank_usage(timestamptz, timestamptz, text[]) is
    'Operator only: prices the usage rows from since (inclusive) to until (exclusive; null: no '
    'bound) again, of every tenant or of those in tenants, at the prices now in '
    'sift.rerank_prices (after a late price fix, or to price rows metered before their price was '
    'entered: since => ''-infinity''). Returns how many rows changed. Writes.';


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
