-- Rerank usage: what each hosted rerank call cost. In: the client's record
-- of a call (sift.record_rerank_usage) and the operator's prices
-- (sift.rerank_prices). Out: usage rows priced when written (a trigger), a
-- tenant's own spend (sift.rerank_spend) and repricing for the operator.


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
