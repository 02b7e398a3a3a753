-- Rerankers: which hosted reranker a search uses, and what each call cost.
-- The rerank call itself runs in the client (it is the one step that leaves
-- the database); every decision about WHICH reranker runs, and for which
-- tenant, is made here, so psql users and every client agree.
--
-- Secrets: a reranker stores secret_ref, the NAME of the environment variable
-- (or "scheme:path" key of a custom resolver) that holds its API key. The
-- client process resolves it when it builds the reranker; no table holds a key.
--
-- Error codes added here:
--   SF008 a collection names a reranker that is not registered for its tenant


create or replace function sift.contextualize(context text, content text)
returns text
language sql immutable parallel safe security invoker
as $$
    -- The text a reranker scores: the chunk's context header, a blank line,
    -- then its text (the text alone when there is no header). The Python
    -- twin is pgsift.rerank.contextualize.
    select case when context is null or pg_catalog.btrim(context) = '' then content
                else context || E'\n\n' || content end
$$;
comment on function sift.contextualize(text, text) is
    'The text a reranker scores for a chunk: context || E''\n\n'' || content, or content alone '
    'when the context header is null or blank.';


create or replace function sift.rerank_texts(chunk_ids bigint[], tenant text default 'default')
returns table (ord integer, chunk_id bigint, document text)
language sql stable security invoker
set search_path from current
as $$
    -- One statement for the whole pool (never one per candidate), in the
    -- order given; ids that are not chunks of this tenant are left out.
    select u.o::integer, k.chunk_id, sift.contextualize(k.context, k.content)
    from pg_catalog.unnest(rerank_texts.chunk_ids) with ordinality as u(id, o)
    join sift.chunks k on k.chunk_id = u.id
    join sift.collections c on c.collection_id = k.collection_id
    where c.tenant = rerank_texts.tenant
    order by u.o
$$;
comment on function sift.rerank_texts(bigint[], text) is
    'The texts a reranker scores for a candidate pool (sift.contextualize of each chunk), in the '
    'order of chunk_ids, with ord = the 1-based place in chunk_ids; chunks of other tenants are '
    'left out. Read-only.';


create or replace function sift.register_reranker(
    alias         text,
    provider      text,
    tenant        text default 'default',
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
set search_path from current
as $$
#variable_conflict use_variable
declare
    chosen_model text := coalesce(model, case provider when 'voyage' then 'rerank-2'
                                                      when 'cohere' then 'rerank-v3.5'
                                                      when 'tei' then 'tei' end);
    saved sift.rerankers;
begin
    if provider is null or provider not in ('voyage', 'cohere', 'tei') then
        raise exception 'unknown reranker provider "%"', provider
            using errcode = 'SF003', hint = 'providers: voyage, cohere, tei';
    end if;
    if secret_ref is not null and secret_ref !~ '^([A-Z_][A-Z0-9_]{0,127}|[a-z][a-z0-9_]{0,31}:[^\s]{1,200})$' then
        -- Never echo the value: it may be the key itself.
        raise exception 'secret_ref must name the variable that holds the API key, not hold the key'
            using errcode = 'SF003',
                  hint = 'e.g. secret_ref => ''PGSIFT_VOYAGE_KEY'' (an environment variable of the '
                         'client process) or ''scheme:path'' for a custom resolver';
    end if;
    if is_default then
        update sift.rerankers r set is_default = false
        where r.tenant = tenant and r.is_default and r.alias <> alias;
    end if;
    insert into sift.rerankers as r
        (tenant, alias, provider, model, base_url, secret_ref, timeout_ms, deadline_ms,
         max_attempts, context_chars, is_default)
    values (tenant, alias, provider, chosen_model, base_url, secret_ref, timeout_ms, deadline_ms,
            max_attempts, context_chars, coalesce(is_default, false))
    on conflict on constraint rerankers_tenant_alias_key do update set
        provider = excluded.provider, model = excluded.model, base_url = excluded.base_url,
        secret_ref = excluded.secret_ref, timeout_ms = excluded.timeout_ms,
        deadline_ms = excluded.deadline_ms, max_attempts = excluded.max_attempts,
        context_chars = excluded.context_chars, is_default = excluded.is_default
    returning r.* into saved;
    return saved;
end;
$$;
comment on function sift.register_reranker(text, text, text, text, text, text, sift.rerank_timeout_ms,
    sift.rerank_deadline_ms, sift.rerank_attempts, sift.rerank_context_chars, boolean) is
    'Registers (or replaces, every setting) a reranker of a tenant under an alias: provider '
    'voyage (model default rerank-2), cohere (rerank-v3.5) or tei (base_url required); '
    'secret_ref names the environment variable holding the API key (never the key: it is '
    'resolved in the client process); timeout_ms per HTTP attempt, deadline_ms for the whole '
    'rerank of a search, max_attempts, context_chars of conversation before the query. '
    'is_default makes it the tenant''s default (the one that scores a search over collections '
    'naming different rerankers); at most one per tenant. Writes.';


create or replace function sift.drop_reranker(alias text, tenant text default 'default')
returns boolean
language plpgsql volatile security invoker
set search_path from current
as $$
#variable_conflict use_variable
begin
    -- Collections that named it stop reranking (they fall back to the fused
    -- order) rather than point at nothing.
    update sift.collections c set reranker_alias = null, rerank_enabled = false
    where c.tenant = tenant and c.reranker_alias = alias;
    delete from sift.rerankers r where r.tenant = tenant and r.alias = alias;
    return found;
end;
$$;
comment on function sift.drop_reranker(text, text) is
    'Deletes a tenant''s reranker; the collections that named it are detached and switched off. '
    'Returns false when there was none. Writes.';


create or replace function sift.set_collection_reranker(
    collection   text,
    tenant       text default 'default',
    alias        text default null,
    enabled      boolean default null,
    rerank_top_n sift.rerank_top_n default null,
    reset        text[] default null)
returns sift.collections
language plpgsql volatile security invoker
set search_path from current
as $$
#variable_conflict use_variable
declare
    col     sift.collections := sift._collection(tenant, collection);
    known   text[] := array['reranker_alias', 'rerank_enabled', 'rerank_top_n'];
    unknown text[] := array(select r from pg_catalog.unnest(reset) as r where r is null or r <> all (known));
    owner   text;
    changed sift.collections;
begin
    if cardinality(unknown) > 0 then
        raise exception 'reset names unknown setting(s): %', unknown
            using errcode = 'SF003', hint = 'settings that can be reset: ' || array_to_string(known, ', ');
    end if;
    if alias is not null and not exists (
            select 1 from sift.rerankers r where r.tenant = col.tenant and r.alias = alias) then
        select r.tenant into owner from sift.rerankers r
        where r.alias = alias order by r.tenant limit 1;
        if owner is not null then
            raise exception 'reranker "%" is registered for tenant "%", not for tenant "%" of collection "%"',
                alias, owner, col.tenant, col.name
                using errcode = 'SF008',
                      hint = 'a collection can only use its own tenant''s rerankers (another tenant''s '
                             'would bill that tenant and send this tenant''s queries to its account): '
                             'register one with sift.register_reranker(..., tenant => ' || quote_literal(col.tenant) || ')';
        end if;
        raise exception 'no reranker "%" is registered for tenant "%" (collection "%")',
            alias, col.tenant, col.name
            using errcode = 'SF008',
                  hint = 'register it first with sift.register_reranker(..., tenant => ' || quote_literal(col.tenant) || ')';
    end if;
    update sift.collections c set
        reranker_alias = case when 'reranker_alias' = any (reset) then null
                              else coalesce(alias, c.reranker_alias) end,
        rerank_enabled = case when 'rerank_enabled' = any (reset) then false
                              else coalesce(enabled, c.rerank_enabled) end,
        rerank_top_n   = case when 'rerank_top_n' = any (reset) then 50
                              else coalesce(rerank_top_n, c.rerank_top_n) end
    where c.collection_id = col.collection_id
    returning c.* into changed;
    return changed;
end;
$$;
comment on function sift.set_collection_reranker(text, text, text, boolean, sift.rerank_top_n, text[]) is
    'Sets which reranker a collection uses (alias, registered for the collection''s own tenant, '
    'else SF008 naming both tenants), whether reranking is on (enabled), and how many candidates '
    'the pool widens to when it runs (rerank_top_n in [1, 1000], default 50). Reranking runs only '
    'when enabled and an alias is set. null leaves a setting as it is; reset => array[...] puts '
    'reranker_alias (null), rerank_enabled (false) or rerank_top_n (50) back. Writes.';


create or replace function sift.reranker_for(tenant text, collections text[])
returns table (
    reranker_id     bigint,
    reranker_tenant text,
    alias           text,
    provider      text,
    model         text,
    base_url      text,
    secret_ref    text,
    timeout_ms    integer,
    deadline_ms   integer,
    max_attempts  integer,
    context_chars integer,
    rerank_top_n  integer,
    chosen_by     text,
    refused       text)
language plpgsql stable security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    one      text;
    cols     sift.collections[] := '{}';
    n_on     integer;
    aliases  text[];
    top_n    integer;
    pick     text;
    why      text;
    owner    text;
    chosen   sift.rerankers;
begin
    if reranker_for.collections is null or cardinality(reranker_for.collections) = 0 then
        raise exception 'collections must be a non-empty array of names' using errcode = 'SF003';
    end if;
    foreach one in array reranker_for.collections loop
        cols := cols || sift._collection(reranker_for.tenant, one);
    end loop;

    -- Switched on and named: the collections that ask for a rerank.
    select count(*)::integer,
           array_agg(distinct (cols[i]).reranker_alias order by (cols[i]).reranker_alias),
           max((cols[i]).rerank_top_n)::integer
    into n_on, aliases, top_n
    from pg_catalog.generate_subscripts(cols, 1) as i
    where (cols[i]).rerank_enabled and (cols[i]).reranker_alias is not null;
    if n_on = 0 then
        return;   -- reranking is off: no row
    end if;

    -- One reranker scores the whole pool (one score scale): the collections'
    -- common one, else the tenant's default.
    if cardinality(aliases) = 1 then
        pick := aliases[1];
        why := 'collection';
    else
        select r.alias into pick from sift.rerankers r
        where r.tenant = reranker_for.tenant and r.is_default;
        why := 'tenant_default';
        if pick is null then
            return query select null::bigint, reranker_for.tenant, null::text, null::text, null::text,
                null::text, null::text, null::integer, null::integer, null::integer, null::integer,
                top_n, why,
                format('the collections name different rerankers (%s) and tenant "%s" has no '
                       'default reranker', array_to_string(aliases, ', '), reranker_for.tenant);
            return;
        end if;
    end if;

    -- The run-time tenant check: only a reranker registered for this tenant.
    select r.* into chosen from sift.rerankers r
    where r.tenant = reranker_for.tenant and r.alias = pick;
    if chosen.reranker_id is null then
        select r.tenant into owner from sift.rerankers r where r.alias = pick order by r.tenant limit 1;
        why := case when owner is null
            then format('reranker "%s" is not registered for tenant "%s"', pick, reranker_for.tenant)
            else format('reranker "%s" belongs to tenant "%s", not to tenant "%s": refused (it would '
                        'bill tenant "%s" and send this tenant''s queries to its account)',
                        pick, owner, reranker_for.tenant, owner) end;
        raise warning 'pgsift: %', why;
        return query select null::bigint, reranker_for.tenant, pick, null::text, null::text,
            null::text, null::text, null::integer, null::integer, null::integer, null::integer,
            top_n, 'refused'::text, why;
        return;
    end if;

    return query select chosen.reranker_id, chosen.tenant, chosen.alias, chosen.provider,
        chosen.model, chosen.base_url, chosen.secret_ref, chosen.timeout_ms::integer,
        chosen.deadline_ms::integer, chosen.max_attempts::integer, chosen.context_chars::integer,
        top_n, why, null::text;
end;
$$;
comment on function sift.reranker_for(text, text[]) is
    'The reranker a search over these collections of a tenant uses: no row when no collection '
    'has reranking switched on with a reranker named; else one row: the collections'' common '
    'reranker (chosen_by = collection) or, when they name different ones, the tenant''s default '
    '(chosen_by = tenant_default), with rerank_top_n = the largest of theirs. refused is set '
    '(and the provider columns null) when it cannot run: different rerankers and no default, '
    'or a reranker not registered for this tenant (checked here at run time too; another '
    'tenant''s is refused with a warning in the server log). Secrets are not here: secret_ref '
    'names the variable the client reads. Read-only.';


create or replace function sift.record_rerank_usage(
    tenant         text,
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
set search_path from current
as $$
#variable_conflict use_variable
declare
    id bigint;
begin
    insert into sift.rerank_usage as u
        (tenant, reranker_alias, provider, model, documents, tokens, search_units, latency_ms,
         attempts, ok, billed, error)
    values (tenant, reranker_alias, provider, model, documents, tokens, search_units,
            greatest(latency_ms, 0), greatest(coalesce(attempts, 1), 1), ok,
            -- A failed call is never billed.
            coalesce(ok, false),
            case when coalesce(ok, false) then error else coalesce(error, 'failed') end)
    returning u.usage_id into id;
    return id;
end;
$$;
comment on function sift.record_rerank_usage(text, text, text, text, integer, double precision,
    boolean, bigint, double precision, integer, text) is
    'Meters one rerank call: tenant, reranker alias, provider, model, documents sent, the tokens '
    '(or Cohere search units) the provider reported, latency and attempts. ok = false records a '
    'failed call, never billed, with its error. Returns the usage_id. Writes.';
