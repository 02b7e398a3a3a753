-- pgsift 0041: rerank metering with a price (issue 36, item 7). A usage row
-- carries the tokens and search units the provider reported; the operator
-- now keeps what they cost (sift.rerank_prices, edited like
-- sift.reranker_limits), and each usage row stores the cost of its call at
-- the price in effect when it was made, so a tenant's spend is a SUM.
--
-- The cost is written when the row is (by the table's trigger, whoever
-- inserts, from the price in effect at the row's created_at) and then kept:
-- a bill already sent never changes because a price did. A late correction
-- of a price is priced into past rows on purpose, by the operator's
-- sift.reprice_rerank_usage(since). Usage with no price in effect, or whose
-- price needs a unit the provider did not report, has a null cost (and
-- currency), never 0: it is counted as unpriced.
--
-- Shipped empty: providers change their prices, and shipped figures would go
-- stale and mislead. Rows metered before this migration have no cost until
-- the operator fills the prices and reprices them. The functions and the
-- trigger are made by the function files.

create table sift.rerank_prices (
    price_id                 bigint generated always as identity primary key,
    provider                 text not null references sift.reranker_providers,
    model                    text not null
                             constraint rerank_prices_model_shape check (btrim(model) <> '' and length(model) <= 200),
    effective_from           timestamptz not null
                             constraint rerank_prices_effective_from check (effective_from < 'infinity'),
    -- Bounded above: a numeric NaN or Infinity would pass ">= 0".
    price_per_million_tokens numeric
                             constraint rerank_prices_per_million_tokens
                             check (price_per_million_tokens between 0 and 1000000000),
    price_per_search_unit    numeric
                             constraint rerank_prices_per_search_unit
                             check (price_per_search_unit between 0 and 1000000000),
    currency                 text not null
                             constraint rerank_prices_currency check (currency ~ '^[A-Z]{3}$'),
    source                   text
                             constraint rerank_prices_source check (btrim(source) <> '' and length(source) <= 500),
    created_at               timestamptz not null default pg_catalog.now(),
    constraint rerank_prices_key unique (provider, model, effective_from),
    constraint rerank_prices_some_rate
        check (price_per_million_tokens is not null or price_per_search_unit is not null)
);
comment on table sift.rerank_prices is
    'What a rerank call costs, per provider and model (''*'': the provider''s other models), from '
    'effective_from on: a price change is a new row, so the past keeps its price. A usage row is '
    'priced when it is written, by the row in effect at its created_at (the model''s own, else '
    'the provider''s ''*''). Edited by the operator; every tenant may read it. Shipped empty.';
comment on column sift.rerank_prices.price_id is 'Identity of the price (sift.rerank_usage.price_id).';
comment on column sift.rerank_prices.provider is 'The provider (a row of sift.reranker_providers).';
comment on column sift.rerank_prices.model is
    'The model, as sift.rerank_usage.model names it; ''*'': any model of the provider without a '
    'price of its own in effect.';
comment on column sift.rerank_prices.effective_from is
    'When the price takes effect (''-infinity'': always); it holds until a later row of the same '
    'provider and model.';
comment on column sift.rerank_prices.price_per_million_tokens is
    'Price of a million tokens (the tokens a usage row reports: Voyage''s total_tokens, TEI''s '
    'x-compute-tokens); null: not priced by tokens.';
comment on column sift.rerank_prices.price_per_search_unit is
    'Price of one search unit (Cohere''s billed search_units); null: not priced by search units.';
comment on column sift.rerank_prices.currency is 'ISO 4217 code of the prices (USD, EUR, ...).';
comment on column sift.rerank_prices.source is
    'Where the figure comes from (a pricing page and the day it was read, a contract); free text.';
comment on column sift.rerank_prices.created_at is 'When the row was written.';

alter table sift.rerank_usage
    add column price_id bigint references sift.rerank_prices,
    add column cost     numeric constraint usage_cost_non_negative check (cost >= 0),
    add column currency text,
    add constraint usage_cost_has_currency check ((cost is null) = (currency is null));
comment on column sift.rerank_usage.price_id is
    'The price in effect when the call was made (sift.rerank_prices), null when none was; a '
    'price that priced rows cannot be deleted (update it and reprice instead).';
comment on column sift.rerank_usage.cost is
    'What the call cost, priced when the row was written (sift.reprice_rerank_usage prices it '
    'again): tokens / 1e6 x price_per_million_tokens + search_units x price_per_search_unit, 0 for '
    'a call not billed. Null (unpriced, never 0) when no price was in effect, or when a rate of the '
    'price needs a unit the provider did not report.';
comment on column sift.rerank_usage.currency is 'The currency of cost; null exactly when cost is.';
