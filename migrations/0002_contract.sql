-- pgsift 0002: the contract. Knobs are data: each has a domain (its CHECK
-- names it), a row in sift.knob_defs (default, what "off" means, who may set
-- it, the stage that reads it) and an attribute of sift.knob_set, the typed
-- record every stage reads. Public functions return composite types, so a
-- feature that adds a column adds an attribute here instead of dropping and
-- re-creating every signature.
--
-- A new knob: its domain, its knob_defs row and its knob_set attribute in a
-- new migration; the stage that reads it; a test; the docs; the CHANGELOG.

create domain sift.dense_weight as double precision
    constraint dense_weight_range check (value >= 0 and value <= 1);
create domain sift.rrf_k as double precision
    constraint rrf_k_range check (value > 0 and value <= 100000);
create domain sift.fetch_k as integer
    constraint fetch_k_range check (value between 1 and 1000);
create domain sift.exact_search_limit as integer
    constraint exact_search_limit_range check (value between 0 and 1000000);
create domain sift.lexical_scorer as text
    constraint lexical_scorer_known check (value in ('bm25', 'ts_rank_cd'));
create domain sift.bm25_k1 as double precision
    constraint bm25_k1_range check (value >= 0 and value <= 10);
create domain sift.bm25_b as double precision
    constraint bm25_b_range check (value >= 0 and value <= 1);
create domain sift.lexical_budget as integer
    constraint lexical_budget_range check (value between 100 and 2000000000);
create domain sift.lexical_exact_limit as integer
    constraint lexical_exact_limit_range check (value between 0 and 2000000000);
create domain sift.recency_field as text
    constraint recency_field_shape check (btrim(value) <> '' and length(value) <= 200);
create domain sift.recency_half_life as interval
    constraint recency_half_life_range
    check (value > interval '0' and value <= interval '1000 years');
create domain sift.recency_weight as double precision
    constraint recency_weight_range check (value >= 0 and value <= 1);
create domain sift.recency_ceiling as double precision
    constraint recency_ceiling_range check (value >= 0 and value <= 1);
create domain sift.recency_bias as double precision
    constraint recency_bias_range check (value >= 0 and value <= 1);
create domain sift.per_document_cap as integer
    constraint per_document_cap_range check (value between 0 and 1000);
create domain sift.mmr_lambda as double precision
    constraint mmr_lambda_range check (value >= 0 and value <= 1);
-- Bounded away from 0 and infinity so a product never underflows or overflows.
create domain sift.boost as double precision
    constraint boost_range check (value >= 0.000001 and value <= 1000000);
create domain sift.score_threshold as double precision
    constraint score_threshold_range check (value > '-Infinity' and value < 'Infinity');
create domain sift.threshold_reranker as text
    constraint threshold_reranker_shape check (btrim(value) <> '' and length(value) <= 128);
create domain sift.rerank_top_n as integer
    constraint rerank_top_n_range check (value between 1 and 1000);
create domain sift.max_chunk_bytes as integer
    constraint max_chunk_bytes_range check (value between 1 and 16000000);

create table sift.knob_defs (
    name          text primary key,
    -- Every value is cast to this type (a domain: its CHECK names the knob).
    type          regtype not null,
    -- JSON null: off unless set.
    default_value jsonb not null,
    -- Whether JSON null may switch the knob off, and the value off stands for.
    can_be_off    boolean not null,
    off_value     jsonb not null default 'null',
    -- collection: stored per collection only (an owner's limit); call: per
    -- call only; both: stored, and overridden per call.
    scope         text not null constraint knob_scope_known check (scope in ('collection', 'call', 'both')),
    stage         text not null
                  constraint knob_stage_known
                  check (stage in ('write', 'dense', 'lexical', 'fusion', 'finalize', 'rerank')),
    meaning       text not null,
    position      integer not null unique
);

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning) values
 (10, 'hybrid', 'boolean', 'true', false, 'null', 'both', 'fusion',
  'Run the lexical leg beside the dense one (false: the dense leg alone).'),
 (20, 'dense_weight', 'sift.dense_weight', '0.45', false, 'null', 'both', 'fusion',
  'w in the fused score w/(k + dense_rank) + (1 - w)/(k + lexical_rank).'),
 (30, 'rrf_k', 'sift.rrf_k', '5', false, 'null', 'both', 'fusion',
  'k in the fused score: larger k flattens the difference between ranks.'),
 (40, 'fetch_k', 'sift.fetch_k', '40', false, 'null', 'both', 'fusion',
  'Candidates each leg contributes to fusion (at least match_count).'),
 (50, 'exact_search_limit', 'sift.exact_search_limit', '10000', false, 'null', 'both', 'dense',
  'Collections with at most this many chunks are scanned exactly instead of through HNSW.'),
 (60, 'lexical_scorer', 'sift.lexical_scorer', '"bm25"', false, 'null', 'both', 'lexical',
  'bm25 (Okapi BM25 in SQL) or ts_rank_cd (PostgreSQL''s own ranking).'),
 (70, 'bm25_k1', 'sift.bm25_k1', '1.2', false, 'null', 'both', 'lexical',
  'BM25 term-frequency saturation.'),
 (80, 'bm25_b', 'sift.bm25_b', '0.4', false, 'null', 'both', 'lexical',
  'BM25 length normalisation (0: none, 1: full).'),
 (90, 'lexical_budget', 'sift.lexical_budget', '3000', false, 'null', 'both', 'lexical',
  'Impact-list entries the lexical leg reads per query at most.'),
 (100, 'lexical_exact_limit', 'sift.lexical_exact_limit', '3000', false, 'null', 'both', 'lexical',
  'When the lists cannot prove the top k within the budget, score every matching chunk if the terms'' chunk counts add up to at most this.'),
 (110, 'recency_field', 'sift.recency_field', 'null', true, 'null', 'both', 'finalize',
  'Date recency ranks on: created, modified, uploaded or a metadata key holding an ISO 8601 date (null: off).'),
 (120, 'recency_half_life', 'sift.recency_half_life', '"30 days"', false, 'null', 'both', 'finalize',
  'At one half-life a document has lost half the recency weight.'),
 (130, 'recency_weight', 'sift.recency_weight', '0.2', false, 'null', 'both', 'finalize',
  'The most recency can take off a score: score x (1 - weight x (1 - 0.5^(age/half_life))); at most recency_ceiling.'),
 (140, 'recency_ceiling', 'sift.recency_ceiling', '0.5', false, 'null', 'collection', 'finalize',
  'The collection owner''s limit on recency_weight, and how far recency_bias may raise it.'),
 (150, 'recency_bias', 'sift.recency_bias', '0', false, 'null', 'call', 'finalize',
  'Per call: 0 keeps the collection''s recency weight, 1 raises it to the ceiling.'),
 (160, 'per_document_cap', 'sift.per_document_cap', '5', true, '0', 'both', 'finalize',
  'Chunks of one document before the others get their turn (0 or null: off); backfilled if the rest cannot fill match_count.'),
 (170, 'mmr_lambda', 'sift.mmr_lambda', 'null', true, 'null', 'both', 'finalize',
  'Maximal Marginal Relevance: 1 = relevance only, 0 = spread only (null: off).'),
 (180, 'boost', 'sift.boost', '1', false, 'null', 'both', 'finalize',
  'Multiplies the collection''s scores when several collections are searched together.'),
 (190, 'score_threshold', 'sift.score_threshold', 'null', true, 'null', 'both', 'finalize',
  'Candidates whose relevance (fused or rerank score) is below it are dropped (null: off).'),
 (200, 'threshold_reranker', 'sift.threshold_reranker', 'null', true, 'null', 'collection', 'finalize',
  'The reranker the stored score_threshold was calibrated for: applied only to pools it scored (null: any).'),
 (210, 'lost_in_the_middle', 'boolean', 'false', true, 'false', 'both', 'finalize',
  'Put the strongest hits at both ends (rank 1, 3, 5, ..., 6, 4, 2).'),
 (220, 'rerank', 'boolean', 'false', true, 'false', 'both', 'rerank',
  'Rerank with the collection''s reranker (Python client; sift.search alone never calls out).'),
 (230, 'rerank_top_n', 'sift.rerank_top_n', '50', false, 'null', 'both', 'rerank',
  'Candidates the pool widens to when a reranker runs: max(match_count, rerank_top_n).'),
 (240, 'max_chunk_bytes', 'sift.max_chunk_bytes', '1000000', false, 'null', 'collection', 'write',
  'The largest chunk text a collection accepts, in bytes.');

-- The resolved knobs of one collection for one call: every stage reads this.
create type sift.knob_set as (
    hybrid              boolean,
    dense_weight        sift.dense_weight,
    rrf_k               sift.rrf_k,
    fetch_k             sift.fetch_k,
    exact_search_limit  sift.exact_search_limit,
    lexical_scorer      sift.lexical_scorer,
    bm25_k1             sift.bm25_k1,
    bm25_b              sift.bm25_b,
    lexical_budget      sift.lexical_budget,
    lexical_exact_limit sift.lexical_exact_limit,
    recency_field       sift.recency_field,
    recency_half_life   sift.recency_half_life,
    recency_weight      sift.recency_weight,
    recency_ceiling     sift.recency_ceiling,
    recency_bias        sift.recency_bias,
    per_document_cap    sift.per_document_cap,
    mmr_lambda          sift.mmr_lambda,
    boost               sift.boost,
    score_threshold     sift.score_threshold,
    threshold_reranker  sift.threshold_reranker,
    lost_in_the_middle  boolean,
    rerank              boolean,
    rerank_top_n        sift.rerank_top_n,
    max_chunk_bytes     sift.max_chunk_bytes
);

-- Named sets of knob values: knobs => '{"preset": "pgvector"}' applies one
-- before the keys given beside it.
create table sift.knob_presets (
    name    text primary key,
    knobs   jsonb not null constraint preset_knobs_is_object check (jsonb_typeof(knobs) = 'object'),
    meaning text not null
);
insert into sift.knob_presets (name, knobs, meaning) values
 ('pgvector', '{"hybrid": false, "per_document_cap": null, "mmr_lambda": null, "recency_field": null,
                "score_threshold": null, "lost_in_the_middle": null, "boost": 1, "rerank": null,
                "exact_search_limit": 1000000}',
  'Exactly pgvector''s order: the dense leg alone by exact distance, no cap, MMR, recency, threshold or rerank.'),
 ('seeds', '{"dense_weight": 0.7, "rrf_k": 60, "fetch_k": 40}',
  'The seeds'' fusion (w 0.7, k 60, 40 per leg): lexical-only hits never outrank dense rank 40.');

-- What the public functions return. A feature adds an attribute here.
create type sift.candidate as (
    chunk_id        bigint,
    document_id     bigint,
    collection_name text,
    fused_rank      integer,
    score           double precision,
    found_by        text,
    dense_rank      integer,
    dense_distance  double precision,
    lexical_rank    integer,
    lexical_score   double precision,
    legs            text[],
    lexical_query   text
);

create type sift.hit as (
    rank              integer,
    "position"        integer,
    chunk_id          bigint,
    document_id       bigint,
    collection_name   text,
    source_uri        text,
    title             text,
    ordinal           integer,
    content           text,
    context           text,
    metadata          jsonb,
    score             double precision,
    base_score        double precision,
    pool_rank         integer,
    found_by          text,
    dense_rank        integer,
    dense_distance    double precision,
    lexical_rank      integer,
    lexical_score     double precision,
    legs              text[],
    lexical_query     text,
    recency_factor    double precision,
    boost             double precision,
    threshold_applied boolean,
    below_threshold   integer,
    threshold_skipped text,
    reranker          text,
    rerank_refused    text
);

create type sift.explanation as (
    fused_rank        integer,
    chunk_id          bigint,
    document_id       bigint,
    collection_name   text,
    source_uri        text,
    title             text,
    ordinal           integer,
    found_by          text,
    dense_rank        integer,
    dense_distance    double precision,
    lexical_rank      integer,
    lexical_score     double precision,
    base_score        double precision,
    score             double precision,
    kept              boolean,
    cut_by            text,
    reason            text,
    legs              text[],
    lexical_query     text,
    recency_date      timestamptz,
    recency_factor    double precision,
    boost             double precision,
    cap_status        text,
    mmr_similarity    double precision,
    mmr_penalty       double precision,
    final_rank        integer,
    "position"        integer,
    threshold_applied boolean,
    below_threshold   integer,
    threshold_skipped text
);
