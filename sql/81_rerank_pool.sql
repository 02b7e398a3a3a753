-- The pool a reranker scores: sift.rerank_pool (one retrieval, with each
-- candidate's text and the reranker the search names), sift.reranker_for
-- and the client's gate (sift._reranks). In: a search's arguments. Out:
-- the fused pool in order, its texts, and the reranker's configuration.


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
