-- pgsift 0003: ranking knobs of the finalize stage (recency, boost, score
-- threshold, per-document cap, MMR, lost-in-the-middle order), and searches
-- over several collections of one tenant.
--
-- Every knob is a domain, so one CHECK guards both the stored collection
-- setting and the per-call override of sift.search / sift.explain /
-- sift.finalize.

-- Which date recency ranks on: the reserved 'created' / 'modified' (the
-- document's own dates) or 'uploaded' (when pgsift received it); any other
-- name is a top-level metadata key holding an ISO 8601 date. null = off.
create domain sift.recency_field as text
    constraint recency_field_not_blank check (btrim(value) <> '' and length(value) <= 200);
-- At the half-life a document has lost half of the recency weight.
create domain sift.recency_half_life as interval
    constraint recency_half_life_positive
    check (value > interval '0' and value <= interval '1000 years');
-- The most recency can take off a score: final = base * (1 - weight * (1 - 0.5^(age/half_life))).
create domain sift.recency_weight as double precision
    constraint recency_weight_range check (value >= 0 and value <= 1);
-- How far a call's recency_bias may raise the weight.
create domain sift.recency_ceiling as double precision
    constraint recency_ceiling_range check (value >= 0 and value <= 1);
-- Per call: 0 keeps the collection's weight, 1 raises it to the ceiling.
create domain sift.recency_bias as double precision
    constraint recency_bias_range check (value >= 0 and value <= 1);
-- Chunks of one document before the others get their turn (0 = off).
create domain sift.per_document_cap as integer
    constraint per_document_cap_range check (value between 0 and 1000);
-- Maximal Marginal Relevance: 1 = relevance only, 0 = spread only (null = off).
create domain sift.mmr_lambda as double precision
    constraint mmr_lambda_range check (value >= 0 and value <= 1);
-- Multiplies a collection's scores when several are searched together.
-- Bounded away from 0 and infinity so a product never underflows or overflows.
create domain sift.boost as double precision
    constraint boost_positive check (value >= 0.000001 and value <= 1000000);
-- Candidates whose relevance score is below it are dropped (null = off).
create domain sift.score_threshold as double precision
    constraint score_threshold_range check (value > '-Infinity' and value < 'Infinity');

alter table sift.collections
    add column recency_field      sift.recency_field,
    add column recency_half_life  sift.recency_half_life not null default '30 days',
    add column recency_weight     sift.recency_weight not null default 0.2,
    add column recency_ceiling    sift.recency_ceiling not null default 0.5,
    add column per_document_cap   sift.per_document_cap not null default 5,
    add column mmr_lambda         sift.mmr_lambda,
    add column boost              sift.boost not null default 1,
    add column score_threshold    sift.score_threshold,
    add column lost_in_the_middle boolean not null default false,
    add constraint recency_weight_within_ceiling check (recency_weight <= recency_ceiling);

-- Signatures this release replaces (sql/ re-creates the new ones right after).
drop function if exists sift.search(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, sift.lexical_scorer,
    sift.bm25_k1, sift.bm25_b);
drop function if exists sift.explain(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, sift.lexical_scorer,
    sift.bm25_k1, sift.bm25_b, bigint[]);
drop function if exists sift.candidates(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, sift.lexical_scorer,
    sift.bm25_k1, sift.bm25_b);
