-- pgsift 0005: rerankers (per tenant), a collection's rerank settings, and
-- the metering ledger of rerank calls.
--
-- The rerank call is the one step that leaves the database, so it runs in
-- the Python client; these tables only say which reranker a search uses and
-- record what each call cost. No table holds a secret: a reranker names, in
-- secret_ref, the environment variable (or another key of the client's
-- secret resolver) that holds its API key, and the key is read in the client
-- process when the reranker is built. secret_ref is checked to look like such
-- a name (upper-case environment variable, or "scheme:path" for a custom
-- resolver), which refuses the usual shapes of API keys ("pa-...", "sk-...",
-- mixed-case tokens) by mistake.

-- How many candidates the pool widens to when a reranker runs: the search's
-- pool is max(match_count, rerank_top_n).
create domain sift.rerank_top_n as integer
    constraint rerank_top_n_range check (value between 1 and 1000);
-- One HTTP attempt's timeout, in milliseconds.
create domain sift.rerank_timeout_ms as integer
    constraint rerank_timeout_ms_range check (value between 50 and 60000);
-- A search's whole rerank budget (every attempt and backoff), in milliseconds.
create domain sift.rerank_deadline_ms as integer
    constraint rerank_deadline_ms_range check (value between 50 and 60000);
-- HTTP attempts per search (1 = no retry).
create domain sift.rerank_attempts as integer
    constraint rerank_attempts_range check (value between 1 and 5);
-- How much of the conversation (its tail, in characters) goes before the
-- reranker's query; 0 = none. The query itself is never clipped.
create domain sift.rerank_context_chars as integer
    constraint rerank_context_chars_range check (value between 0 and 100000);

create table sift.rerankers (
    reranker_id   bigint generated always as identity primary key,
    tenant        text not null
                  constraint reranker_tenant_not_blank check (btrim(tenant) <> ''),
    alias         text not null
                  constraint reranker_alias_not_blank check (btrim(alias) <> ''),
    provider      text not null
                  constraint reranker_provider_known check (provider in ('voyage', 'cohere', 'tei')),
    model         text not null
                  constraint reranker_model_not_blank check (btrim(model) <> ''),
    -- null: the provider's public endpoint (TEI has none: it needs one).
    base_url      text
                  constraint reranker_base_url_http check (base_url ~ '^https?://[^\s]+$'),
    -- The NAME of the variable holding the API key, never the key.
    secret_ref    text
                  constraint reranker_secret_ref_is_a_name
                  check (secret_ref ~ '^([A-Z_][A-Z0-9_]{0,127}|[a-z][a-z0-9_]{0,31}:[^\s]{1,200})$'),
    timeout_ms    sift.rerank_timeout_ms not null default 2000,
    deadline_ms   sift.rerank_deadline_ms not null default 3000,
    max_attempts  sift.rerank_attempts not null default 2,
    context_chars sift.rerank_context_chars not null default 1500,
    is_default    boolean not null default false,
    created_at    timestamptz not null default now(),
    constraint rerankers_tenant_alias_key unique (tenant, alias),
    constraint reranker_timeout_within_deadline check (timeout_ms <= deadline_ms),
    -- Hosted providers bill an account: they need a key.
    constraint reranker_hosted_needs_secret check (provider = 'tei' or secret_ref is not null),
    constraint reranker_tei_needs_base_url check (provider <> 'tei' or base_url is not null)
);
-- At most one default reranker per tenant: it scores searches over
-- collections that name different rerankers.
create unique index rerankers_one_default_per_tenant on sift.rerankers (tenant) where is_default;

alter table sift.collections
    add column reranker_alias text,
    add column rerank_enabled boolean not null default false,
    add column rerank_top_n   sift.rerank_top_n not null default 50,
    -- A collection can only name a reranker of its own tenant: the key
    -- includes the tenant (never cascade: that would move the collection to
    -- another tenant). sift.drop_reranker detaches collections first.
    add constraint collections_reranker_fkey foreign key (tenant, reranker_alias)
        references sift.rerankers (tenant, alias);
create index collections_reranker_idx on sift.collections (tenant, reranker_alias)
    where reranker_alias is not null;

-- One row per rerank call that left the process (skipped searches write
-- nothing). A failed call is recorded as failed and never as billed.
create table sift.rerank_usage (
    usage_id       bigint generated always as identity primary key,
    tenant         text not null,
    reranker_alias text,
    provider       text not null,
    model          text not null,
    documents      integer not null constraint usage_documents_non_negative check (documents >= 0),
    -- What the provider reported (null: it reported nothing): Voyage's
    -- total_tokens, Cohere's input tokens, TEI's x-compute-tokens header.
    tokens         bigint constraint usage_tokens_non_negative check (tokens >= 0),
    -- Cohere bills search units, not tokens.
    search_units   double precision constraint usage_search_units_non_negative check (search_units >= 0),
    latency_ms     double precision not null constraint usage_latency_non_negative check (latency_ms >= 0),
    attempts       integer not null default 1 constraint usage_attempts_positive check (attempts >= 1),
    ok             boolean not null,
    billed         boolean not null,
    error          text,
    created_at     timestamptz not null default now(),
    constraint usage_failed_never_billed check (ok or not billed),
    constraint usage_failed_says_why check (ok or error is not null)
);
create index rerank_usage_tenant_idx on sift.rerank_usage (tenant, created_at);
