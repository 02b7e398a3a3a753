-- pgsift 0018: what release 0.2.0 changes in the schema of 0.1.0, with 0019-0022.
-- These five files are the development migrations 0018_binary_vectors to
-- 0042_document_positives, squashed before the release (CONTRIBUTING.md rule 2),
-- each object in its final form: a database that ran those has these recorded in
-- their place by migrate, which runs nothing there (pgsift.schema.SQUASHES). The
-- upgrade steps that rewrite rows an older version wrote, whose tests run them on
-- such rows, keep files of their own: 0019 (delta entries), 0020 (pending
-- buckets), 0021 (references across tenants) and 0022 (which provider a mapped
-- secret is for).

-- Signatures of 0.1.0 that change (the function files make the new ones): the write
-- functions take vector[] (binary, 4 bytes a dimension; a text literal still casts); a space
-- takes its HNSW options; search, explain and candidates take query_tokens, the added spaces'
-- query vectors and explain's rerank scores; the staged pipeline reads its legs as arrays;
-- collection_info and vector_space_status report the index a space walks; pgsift's locks are
-- row and table locks, not advisory keys.
drop function if exists sift.write_chunks(bigint[], integer[], text[], text[], integer[], text[], integer[]);
drop function if exists sift.write_space_vectors(text, text, bigint[], text[]);
drop function if exists sift.create_collection(text, integer, text, text, text, jsonb);
drop function if exists sift.add_vector_space(text, text, integer, text, text);
drop function if exists sift.vector_space_status(text);
drop function if exists sift.collection_info(text);
drop function if exists sift._dense_leg_sql(integer, text, boolean, boolean, boolean);
drop function if exists sift._dense_leg(bigint[], integer, text, @extschema:vector@.vector, jsonb, integer, integer,
                                        bigint);
drop function if exists sift._lexical_leg(sift.collections, sift.knob_set, tsquery, text[], jsonb, integer, tsquery,
                                          tsquery);
drop function if exists sift._pool(sift.collections, sift.knob_set, text, @extschema:vector@.vector, integer, jsonb);
drop function if exists sift._candidates(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector,
                                         integer, jsonb);
drop function if exists sift._check_query(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector,
                                          integer, jsonb);
drop function if exists sift.search(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[]);
drop function if exists sift.explain(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[], bigint[]);
drop function if exists sift.candidates(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[]);
drop function if exists sift._lists_lock_key(bigint);

-- HNSW options per vector space (so per collection: its built-in space). A space may keep
-- its index in half precision (halfvec: half the index, re-scored at full precision; always
-- so past 2,000 dimensions) and set HNSW's m and ef_construction. A space with options other
-- than the defaults gets an index of its own (partial on its collection, or on its space in
-- sift.chunk_vectors), which only the operator builds; the others share one per (dimension,
-- distance). Options are set when the space is created: a space's index is built while it is
-- empty.

alter table sift.vector_spaces
    add column dense_precision text not null default 'full'
        constraint vector_space_precision check (dense_precision in ('full', 'half')),
    add column hnsw_m integer
        constraint vector_space_hnsw_m check (hnsw_m between 2 and 100),
    add column hnsw_ef_construction integer
        constraint vector_space_hnsw_ef_construction check (hnsw_ef_construction between 4 and 1000);

update sift.vector_spaces set dense_precision = 'half' where dimensions > 2000;

alter table sift.vector_spaces
    add constraint vector_space_half_past_2000 check (dimensions <= 2000 or dense_precision = 'half'),
    add constraint vector_space_ef_construction_vs_m
        check (hnsw_ef_construction is null or hnsw_ef_construction >= 2 * coalesce(hnsw_m, 16));

comment on column sift.vector_spaces.dense_precision is
    'The HNSW index''s precision: full (vector) or half (halfvec: half the index, candidates '
    're-scored at full precision; always half past 2,000 dimensions). Vectors are stored in full.';
comment on column sift.vector_spaces.hnsw_m is
    'HNSW m (links per node, 2 to 100) of the space''s own index; null: pgvector''s default, 16.';
comment on column sift.vector_spaces.hnsw_ef_construction is
    'HNSW ef_construction (4 to 1000, at least 2 m) of the space''s own index; null: pgvector''s '
    'default, 64.';

-- What a candidate, a hit and a row of explain say. lexical_exact: whether the lexical leg's
-- top n is proven (from the impact lists, or by scoring every matching chunk when few
-- enough match); when neither fits the budget the leg returns the best it scored, never in
-- silence. late_interaction_score: late interaction (ColBERT-style MaxSim, below).
-- leg_details: fusion of N legs (a search may bring query vectors for more of its
-- collection's vector spaces, each a dense leg of its own; the knob fusion says how the legs
-- combine). explain's rerank columns: which reranker a search over the pool uses, the score
-- and rank it gave the candidate and whether this view includes it (SQL alone never calls
-- out: sift.explain takes the scores, which the Python client's explain fetches).

alter type sift.candidate
    add attribute lexical_exact boolean,
    add attribute late_interaction_score double precision,
    add attribute leg_details jsonb;
alter type sift.hit
    add attribute lexical_exact boolean,
    add attribute late_interaction_score double precision,
    add attribute leg_details jsonb;
alter type sift.explanation
    add attribute lexical_exact boolean,
    add attribute late_interaction_score double precision,
    add attribute leg_details jsonb,
    add attribute reranker text,
    add attribute rerank_score double precision,
    add attribute rerank_rank integer,
    add attribute rerank_status text;

comment on column sift.candidate.lexical_exact is
    'Whether the lexical leg''s top n is proven exact (false: the budget ran out first; its scores '
    'are exact, the set may miss a better chunk); null when the leg did not run.';
comment on column sift.hit.lexical_exact is
    'Whether the lexical leg''s top n is proven exact (false: the budget ran out first; its scores '
    'are exact, the set may miss a better chunk); null when the leg did not run.';
comment on column sift.explanation.lexical_exact is
    'Whether the lexical leg''s top n is proven exact (false: the budget ran out first; its scores '
    'are exact, the set may miss a better chunk); null when the leg did not run.';
comment on column sift.candidate.late_interaction_score is
    'MaxSim of the query''s token vectors against the chunk''s (sum over query tokens of the best '
    'inner product); null when no query tokens were given or the chunk has no token vectors or '
    'was past late_interaction_top_n.';
comment on column sift.hit.late_interaction_score is
    'MaxSim of the query''s token vectors against the chunk''s (sum over query tokens of the best '
    'inner product); null when no query tokens were given or the chunk has no token vectors or '
    'was past late_interaction_top_n.';
comment on column sift.explanation.late_interaction_score is
    'MaxSim of the query''s token vectors against the chunk''s (sum over query tokens of the best '
    'inner product); null when no query tokens were given or the chunk has no token vectors or '
    'was past late_interaction_top_n.';
comment on column sift.candidate.leg_details is
    'What each leg that found the chunk gave it, by leg (dense, lexical, or an added space''s '
    'name): {"rank", "raw" (distance or BM25 score), "weight", "contribution" (its share of score)}.';
comment on column sift.hit.leg_details is
    'What each leg that found the chunk gave it, by leg (dense, lexical, or an added space''s '
    'name): {"rank", "raw" (distance or BM25 score), "weight", "contribution" (its share of score)}.';
comment on column sift.explanation.leg_details is
    'What each leg that found the chunk gave it, by leg (dense, lexical, or an added space''s '
    'name): {"rank", "raw" (distance or BM25 score), "weight", "contribution" (its share of score)}.';
comment on column sift.explanation.reranker is
    'The reranker a search over these collections reranks the pool with (the collections'' '
    'common one, else the tenant''s default); null when reranking is off.';
comment on column sift.explanation.rerank_score is
    'The rerank score the ranking used for this candidate (the rerank_scores given; the Python '
    'client puts the provider''s score here, as on a hit); null when the view is not reranked or '
    'the reranker did not score it.';
comment on column sift.explanation.rerank_rank is
    'The candidate''s place in the reranked pool (by rerank score, ties by chunk id); null when '
    'the view is not reranked or the candidate was outside the pool the reranker scored.';
comment on column sift.explanation.rerank_status is
    'Whether this view includes the rerank: null (no reranker), "reranked: ..." (ranked on the '
    'rerank scores given), "not reranked: ..." (the fused ranking; a search would rerank it; '
    'says how to see the reranked view) or "refused: ..." (no reranker can run, and why).';
comment on column sift.explanation.cut_by is
    'What cut it: score_threshold, translation, per_document_cap, mmr, match_count, merged, '
    'not_retrieved or rerank_pool (past the pool the reranker scored); null when kept.';

-- Knobs. late_interaction_top_n: with the question's token vectors, MaxSim reranks the fused
-- top n. fusion: rrf (weighted Reciprocal Rank Fusion, as in 0.1.0), dbsf (each leg's scores
-- normalised by its mean +- 3 standard deviations, weighted sum) or convex (min-max
-- normalised, weighted sum). lexical_list_limit: where every common query term's impact list
-- holds all of its chunks, the lexical leg answers exactly by summing the lists' entries (no
-- stored vector read); an entry summed costs ~2 us, a stored vector scored ~15-20 us, so the
-- whole lists stay cheaper well past lexical_exact_limit's 3,000 (SciFact's queries whose
-- terms hold 3,000-8,000 chunks: 23.7 to 17.3 ms p50, and exact). hnsw_ef_search: the dense
-- leg's HNSW candidate list, which it set itself to max(100, its rows), so that neither a
-- collection nor a call could trade recall for speed (150 SciFact queries against the exact
-- order: recall@10 0.985 at 40, 0.994 at 64, 0.999 at 100; bench/README.md).
-- exact_search_limit: 5,000 (was 10,000), chosen by measurement with `pgsift bench exact`: the
-- exact scan is 1.6-1.7x the HNSW walk at 5,000 chunks, 2.9x at 10,000 (issue 15 asks for at
-- most 2x at the limit); a collection of up to twice the limit that holds under a tenth of a
-- shared index is scanned exactly too. Collections that set it keep their value.

create domain sift.late_interaction_top_n as integer
    constraint late_interaction_top_n_range check (value between 1 and 200);
create domain sift.fusion as text
    constraint fusion_known check (value in ('rrf', 'dbsf', 'convex'));
create domain sift.lexical_list_limit as integer
    constraint lexical_list_limit_range check (value between 0 and 2000000000);
create domain sift.hnsw_ef_search as integer
    constraint hnsw_ef_search_range check (value between 1 and 1000);

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (235, 'late_interaction_top_n', 'sift.late_interaction_top_n', '50', false, 'null', 'both', 'rerank',
  'With query_tokens, MaxSim rescores the fused top this many (the most any searched collection '
  'asks for) against their token vectors; the rest, and chunks without token vectors, keep '
  'their fused order behind.'),
 (35, 'fusion', 'sift.fusion', '"rrf"', false, 'null', 'both', 'fusion',
  'How the legs combine: rrf (weight / (rrf_k + rank), summed), dbsf (each leg''s scores '
  'normalised by its mean +- 3 standard deviations, clipped to [0, 1], weighted sum) or convex '
  '(each leg''s scores min-max normalised, weighted sum); a leg that lacks a chunk gives it 0.'),
 (101, 'lexical_list_limit', 'sift.lexical_list_limit', '12000', false, 'null', 'both', 'lexical',
  'Where every common query term''s impact list holds all its chunks and holding a term is enough to match, '
  'answer exactly by summing the lists if the terms'' chunk counts add up to at most this (0: never). No '
  'stored vector is read.'),
 (51, 'hnsw_ef_search', 'sift.hnsw_ef_search', '100', false, 'null', 'both', 'dense',
  'HNSW''s candidate list (pgvector''s hnsw.ef_search) for the dense leg''s index walk, at least the rows '
  'the leg asks for (a question-vector walk: five times that): higher finds more of the nearest chunks, '
  'lower answers sooner (pgvector''s own default is 40). Unused by exact scans.');

alter type sift.knob_set
    add attribute late_interaction_top_n sift.late_interaction_top_n,
    add attribute fusion sift.fusion,
    add attribute lexical_list_limit sift.lexical_list_limit,
    add attribute hnsw_ef_search sift.hnsw_ef_search;

update sift.knob_defs set default_value = '5000',
       meaning = 'Collections with at most this many chunks are scanned exactly instead of through HNSW '
                 '(and one of up to twice that holding under a tenth of a shared index).'
where name = 'exact_search_limit';

-- Each knob's attribute and domain say what sift.knob_defs says (as 0016 set for the others;
-- a new knob's migration does this for its own name).
do $comments$
declare
    knob record;
begin
    for knob in select d.name, d.meaning from sift.knob_defs d
                where d.name in ('late_interaction_top_n', 'fusion', 'lexical_list_limit', 'hnsw_ef_search',
                                 'exact_search_limit')
                order by d.position loop
        execute pg_catalog.format('comment on column sift.knob_set.%I is %L', knob.name, knob.meaning);
        execute pg_catalog.format('comment on domain sift.%I is %L', knob.name,
                                  'Values of the knob ' || knob.name || ' (sift.knob_defs): ' || knob.meaning);
    end loop;
end
$comments$;

-- Late interaction (ColBERT-style MaxSim) in SQL. A chunk may carry token vectors (a
-- multivector: one vector per token of its text, from a late-interaction model); a search
-- given the question's token vectors reranks its fused top late_interaction_top_n by MaxSim:
-- for each query token, the best inner product over the chunk's tokens, summed. Chunks
-- without token vectors keep their fused order behind the scored ones.

create table sift.chunk_tokens (
    chunk_id      bigint primary key references sift.chunks on delete cascade,
    -- The chunk's (set by trigger), so the policy and a collection's lookups
    -- need no join.
    collection_id bigint not null,
    -- halfvec: 2 bytes a dimension (200 tokens of 128 dimensions: 53 kB).
    tokens        @extschema:vector@.halfvec[] not null,
    dimensions    integer not null,
    token_count   integer not null,
    written_at    timestamptz not null default now(),
    constraint chunk_tokens_count check (token_count between 1 and 2048),
    constraint chunk_tokens_dimensions check (dimensions between 1 and 4000)
);
-- Half-precision floats do not compress: stored out of line as they are,
-- read without a decompression attempt.
alter table sift.chunk_tokens alter column tokens set storage external;
create index chunk_tokens_collection_idx on sift.chunk_tokens (collection_id);
alter table sift.chunk_tokens enable row level security;

comment on table sift.chunk_tokens is
    'A chunk''s token vectors for late interaction (MaxSim), written by sift.write_token_vectors '
    'or with its chunk; one size per collection, set by its first write. Gone with the chunk.';
comment on column sift.chunk_tokens.chunk_id is 'The chunk (sift.chunks).';
comment on column sift.chunk_tokens.collection_id is 'The chunk''s collection (set by the write trigger).';
comment on column sift.chunk_tokens.tokens is
    'One vector per token, in the chunk''s token order, in half precision.';
comment on column sift.chunk_tokens.dimensions is
    'Dimensions of every vector in tokens (the collection''s token size).';
comment on column sift.chunk_tokens.token_count is 'How many token vectors (1 to 2,048).';
comment on column sift.chunk_tokens.written_at is 'When they were written.';

-- A collection's token size: one row, so concurrent writers agree on it (the
-- first write inserts it; writers lock it for share, a full delete for update).
create table sift.chunk_token_sizes (
    collection_id bigint primary key references sift.collections on delete cascade,
    dimensions    integer not null,
    constraint chunk_token_sizes_dimensions check (dimensions between 1 and 4000)
);
alter table sift.chunk_token_sizes enable row level security;
comment on table sift.chunk_token_sizes is
    'The size of a collection''s token vectors (sift.chunk_tokens): set by its first write, gone '
    'when sift.delete_token_vectors removes the last of them.';
comment on column sift.chunk_token_sizes.collection_id is 'The collection.';
comment on column sift.chunk_token_sizes.dimensions is 'Dimensions of every token vector of the collection.';

-- Enrichment at ingest. A language model may write, per chunk, a short context placing it in
-- its document and questions it answers (pgsift.enrich). The chunk's text never changes:
-- what the model wrote is kept apart here, keyed on the chunk's text and the settings, so
-- indexing unchanged text again reuses it and spends nothing; each ingestion of a document
-- records what it spent and its warnings.

create table sift.chunk_enrichments (
    chunk_id       bigint primary key references sift.chunks on delete cascade,
    -- The chunk's (set by trigger), for the policy and the cache lookup.
    collection_id  bigint not null,
    enrichment_key text not null,
    context        text,
    questions      text[] not null default '{}',
    model          text,
    created_at     timestamptz not null default now(),
    constraint chunk_enrichments_questions check (cardinality(questions) <= 5),
    constraint chunk_enrichments_key_shape check (enrichment_key ~ '^[0-9a-f]{64}$')
);
create index chunk_enrichments_key_idx on sift.chunk_enrichments (collection_id, enrichment_key);
alter table sift.chunk_enrichments enable row level security;
comment on table sift.chunk_enrichments is
    'What a language model wrote for a chunk at ingest (pgsift.enrich): a context placing it in its '
    'document and up to 5 questions it answers, kept apart from the chunk''s text; keyed on that '
    'text and the settings, so unchanged text is never sent again. Gone with the chunk.';
comment on column sift.chunk_enrichments.chunk_id is 'The chunk (sift.chunks).';
comment on column sift.chunk_enrichments.collection_id is 'The chunk''s collection (set by the write trigger).';
comment on column sift.chunk_enrichments.enrichment_key is
    'sha256 of the chunk''s text, its document''s text and the enrichment settings (model, prompt, '
    'what was asked for): the cache key.';
comment on column sift.chunk_enrichments.context is 'The model''s context for the chunk (null: none written).';
comment on column sift.chunk_enrichments.questions is 'Questions the chunk answers, as the model wrote them (0 to 5).';
comment on column sift.chunk_enrichments.model is 'The model that wrote them.';
comment on column sift.chunk_enrichments.created_at is 'When they were written.';

create table sift.enrichment_runs (
    run_id        bigint generated always as identity primary key,
    document_id   bigint not null references sift.documents on delete cascade,
    -- The document's (set by trigger).
    collection_id bigint not null,
    model         text,
    chunks        integer not null default 0,
    enriched      integer not null default 0,
    reused        integer not null default 0,
    failed        integer not null default 0,
    skipped       integer not null default 0,
    input_tokens  bigint not null default 0,
    output_tokens bigint not null default 0,
    cost_usd      double precision,
    warnings      text[] not null default '{}',
    created_at    timestamptz not null default now(),
    constraint enrichment_runs_counts check (chunks >= 0 and enriched >= 0 and reused >= 0 and failed >= 0
                                             and skipped >= 0 and input_tokens >= 0 and output_tokens >= 0)
);
create index enrichment_runs_document_idx on sift.enrichment_runs (document_id, run_id);
create index enrichment_runs_collection_idx on sift.enrichment_runs (collection_id, run_id);
alter table sift.enrichment_runs enable row level security;
comment on table sift.enrichment_runs is
    'One row per ingestion of a document with enrichment: what it spent (tokens, cost when the '
    'model''s rates are known) and what went wrong (warnings), readable per document.';
comment on column sift.enrichment_runs.run_id is 'The run.';
comment on column sift.enrichment_runs.document_id is 'The document (sift.documents).';
comment on column sift.enrichment_runs.collection_id is 'The document''s collection (set by the write trigger).';
comment on column sift.enrichment_runs.model is 'The model called.';
comment on column sift.enrichment_runs.chunks is 'Chunks of the document.';
comment on column sift.enrichment_runs.enriched is 'Chunks the model wrote for in this run.';
comment on column sift.enrichment_runs.reused is 'Chunks whose enrichment was reused (unchanged text and settings): no call.';
comment on column sift.enrichment_runs.failed is 'Chunks whose call failed (they keep only the deterministic header).';
comment on column sift.enrichment_runs.skipped is 'Chunks past the document''s token budget (not sent).';
comment on column sift.enrichment_runs.input_tokens is 'Input tokens the provider reported.';
comment on column sift.enrichment_runs.output_tokens is 'Output tokens the provider reported.';
comment on column sift.enrichment_runs.cost_usd is 'What those tokens cost at the model''s rates (null: cannot price).';
comment on column sift.enrichment_runs.warnings is 'What went wrong, one line each (failed calls, malformed output, budget).';
comment on column sift.enrichment_runs.created_at is 'When the run wrote.';

-- Questions as vectors of their own (enrichment's questions_as "vectors" or "both"). Each
-- question a model wrote for a chunk may carry its own vector, in the collection's active
-- space; the dense leg then also searches them, takes each chunk at its best (its own vector
-- or its best question's) and says which question matched.

create table sift.question_vectors (
    chunk_id      bigint not null references sift.chunks on delete cascade,
    ordinal       smallint not null,
    -- The chunk's (set by trigger), for the policy and the leg's filter.
    collection_id bigint not null,
    embedding     @extschema:vector@.vector not null,
    constraint question_vectors_pkey primary key (chunk_id, ordinal),
    constraint question_vectors_ordinal check (ordinal between 0 and 4)
);
alter table sift.question_vectors alter column embedding set storage main;
create index question_vectors_collection_idx on sift.question_vectors (collection_id);
alter table sift.question_vectors enable row level security;
comment on table sift.question_vectors is
    'The vector of a question a model wrote for a chunk (sift.chunk_enrichments.questions[ordinal + 1]), '
    'in the collection''s active space: the dense leg searches them with the chunks'' own vectors. '
    'Gone with the chunk.';
comment on column sift.question_vectors.chunk_id is 'The chunk the question is about.';
comment on column sift.question_vectors.ordinal is 'Which of its questions (0-based).';
comment on column sift.question_vectors.collection_id is 'The chunk''s collection (set by the write trigger).';
comment on column sift.question_vectors.embedding is 'The question''s vector, in the collection''s active space.';

-- The partial HNSW index of each size and distance a collection already uses (the table is
-- new, so each is built empty at once; sift._ensure_dense_index builds them for new sizes).
do $indexes$
declare
    s record;
begin
    for s in select distinct v.dimensions, v.distance from sift.vector_spaces v order by 1, 2 loop
        execute format(
            'create index if not exists %I on sift.question_vectors using hnsw '
            '((embedding::@extschema:vector@.%s(%s)) @extschema:vector@.%s) '
            'where @extschema:vector@.vector_dims(embedding) = %s',
            format('question_vectors_hnsw_%s_%s', s.distance, s.dimensions),
            case when s.dimensions > 2000 then 'halfvec' else 'vector' end, s.dimensions,
            case when s.dimensions > 2000 then 'halfvec' else 'vector' end
                || case s.distance when 'cosine' then '_cosine_ops' when 'l2' then '_l2_ops' else '_ip_ops' end,
            s.dimensions);
    end loop;
end
$indexes$;

-- The lexical statistics. The statistics trigger writes a statement's term counts from the
-- lexemes alone, unsorted (sorting ~200,000 lexemes a 10,000-chunk batch bought nothing:
-- readers look a term up, and the fold groups them); existing rows are sorted, which is one
-- of the orders.
comment on column sift.term_df_pending.lexemes is
    'The lexemes whose counts changed, in no particular order (counts follows it).';

-- Each collection's statistics remember the min_df its impact lists were built under, so
-- sift.refresh_lexical_stats looks only at the terms a write touched (it looked at every
-- term of the collection on every call: ~0.7 s of a one-document upsert's ~0.85 s at 100,000
-- chunks), unless it is called with another min_df or with rebuild. Collections from before
-- have none recorded: their first refresh looks at every term once.
alter table sift.collection_lexical_stats add column lists_min_df integer;
comment on column sift.collection_lexical_stats.lists_min_df is
    'On the row a refresh consolidates: the min_df its impact lists were built under (null on writers'' '
    'rows). A refresh called with another considers every term of the collection again.';

-- Search vectors stay in the chunk's row. A chunk of a few hundred words has a stored vector
-- of ~1.5-3 kB; with its text and a 384-dimension embedding the row passed PostgreSQL's 2 kB
-- TOAST target, and the vector went out of line: every chunk the lexical leg scores from its
-- vector then paid a TOAST lookup, about half of what scoring it costs. Storage main keeps it
-- in the row (the text still moves out first). A row past ~8 kB moves its largest main column
-- out, and an embedding of more than 1,024 dimensions (4 kB) would then be the one to go; so
-- while a built-in space has such embeddings the vectors stay out of line (here, and
-- sift._set_search_vector_storage switches back when one is created). Rows already written
-- keep their place until rewritten (VACUUM FULL). The change locks sift.chunks against
-- searches until the migration commits, so it waits 5 s at most for the table; a busy one
-- keeps the old storage (pgsift doctor says so; the ALTER TABLE it prints does it later).
do $storage$
declare
    saved text := pg_catalog.current_setting('lock_timeout');
begin
    if not exists (select 1 from sift.vector_spaces s where s.builtin and s.dimensions > 1024) then
        perform pg_catalog.set_config('lock_timeout', '5s', true);
        begin
            alter table sift.chunks alter column search_vector set storage main;
        exception when lock_not_available then
            raise notice 'search vectors stay out of line: sift.chunks was busy (see pgsift doctor)';
        end;
        perform pg_catalog.set_config('lock_timeout', saved, true);
    end if;
end;
$storage$;

-- A collection's row keeps the knobs a search that sets none runs with: merging the
-- defaults, the stored values and the domains on every search cost a default search ~0.1 ms.
-- The collections' trigger writes it with the stored values it was merged from (a row
-- written past the trigger is merged at search time again); the function files merge it
-- again on every migrate (sift._refresh_resolved_knobs), and so do changes to
-- sift.knob_defs and sift.knob_presets. It keeps its tenant's ceilings too (below).
alter table sift.collections
    add column resolved_knobs sift.knob_set,
    add column resolved_from jsonb,
    add column ceilings jsonb;
comment on column sift.collections.resolved_knobs is
    'The knobs in force when a call sets none (sift._merge_knobs of the stored knobs), kept by the '
    'collection''s trigger; null until the first migrate that fills it.';
comment on column sift.collections.resolved_from is
    'The stored knobs resolved_knobs was merged from: it is used only while they are the row''s.';
comment on column sift.collections.ceilings is
    'Its tenant''s ceilings in force (sift.tenant_limits, the default row under the tenant''s): knob '
    'names, match_count and call_time_limit; null: none. Kept by the collection''s trigger and '
    'written again whenever the ceilings change.';

-- What one tenant may cost the others (issue 37, items 2 and 5). HNSW indexes on the shared
-- tables are the operator's to build: a tenant's admin who created a collection (or added a
-- space) of a size without an index built it in its own transaction, and CREATE INDEX locks
-- sift.chunks, sift.chunk_vectors and sift.question_vectors against every tenant's writes
-- until that transaction ends. Now such a size is a request (sift.index_requests, a row per
-- tenant and shape, kept after the build so a tenant's shapes stay counted): the collection
-- is searched by exact scan until the operator's sift.ensure_dense_indexes() builds it.
--
-- The operator's ceilings per tenant (sift.tenant_limits; the row whose tenant is null holds
-- every tenant's without a row of its own): how many index shapes a tenant may cause and have
-- waiting, and the work one call may ask for (knob ceilings an admin cannot raise,
-- match_count, a time limit), kept on each collection's row (sift.collections.ceilings).

create table sift.index_requests (
    request_id   bigint generated always as identity primary key,
    tenant       sift.name not null,
    dimensions   integer not null constraint index_request_dimensions check (dimensions between 1 and 4000),
    distance     sift.distance not null,
    builtin      boolean not null,
    requested_by name not null default current_user,
    requested_at timestamptz not null default pg_catalog.now(),
    built_at     timestamptz,
    constraint index_requests_shape_key unique (tenant, dimensions, distance, builtin)
);
comment on table sift.index_requests is
    'HNSW indexes a tenant''s collections or vector spaces need and the operator builds '
    '(sift.ensure_dense_indexes): one row per tenant and shape, kept once built so that the '
    'shapes a tenant caused stay counted against its max_index_shapes (sift.tenant_limits).';
comment on column sift.index_requests.request_id is 'Identity of the request.';
comment on column sift.index_requests.tenant is 'The tenant whose collection or space needs the index.';
comment on column sift.index_requests.dimensions is 'The embedding size the index holds (its shape, with distance).';
comment on column sift.index_requests.distance is 'The distance the index orders by: cosine, l2 or inner_product.';
comment on column sift.index_requests.builtin is
    'True: a built-in space (the index on sift.chunks too); false: an added space (sift.chunk_vectors '
    'and sift.question_vectors only).';
comment on column sift.index_requests.requested_by is 'The role that caused the request.';
comment on column sift.index_requests.requested_at is 'When the request was made.';
comment on column sift.index_requests.built_at is
    'When the operator''s build found the indexes in place; null while the request waits (the '
    'collection is searched by exact scan meanwhile).';
alter table sift.index_requests enable row level security;

create table sift.tenant_limits (
    tenant             sift.name constraint tenant_limits_tenant_key unique,
    knob_ceilings      jsonb not null default '{}'
                       constraint tenant_limits_knob_ceilings_object check (pg_catalog.jsonb_typeof(knob_ceilings) = 'object'),
    max_match_count    integer constraint tenant_limits_max_match_count check (max_match_count between 0 and 1000),
    call_time_limit    interval constraint tenant_limits_call_time_limit
                       check (call_time_limit > '0'::interval and call_time_limit <= '1 day'::interval),
    max_index_shapes   integer constraint tenant_limits_max_index_shapes check (max_index_shapes >= 0),
    max_index_requests integer constraint tenant_limits_max_index_requests check (max_index_requests >= 0)
);
-- One row for every tenant without a row of its own (tenant null).
create unique index tenant_limits_one_default on sift.tenant_limits ((true)) where tenant is null;
comment on table sift.tenant_limits is
    'The operator''s ceilings per tenant (a tenant''s row; the row whose tenant is null, if any, for '
    'every tenant without one, and for each value a tenant''s row leaves null): the knob values and '
    'match_count one call may ask for, its time limit, and the HNSW index shapes a tenant may '
    'cause. Only the operator writes it; a tenant reads its own row and the default.';
comment on column sift.tenant_limits.tenant is
    'The tenant these ceilings are for; null: every tenant without a row of its own (and the value '
    'a tenant''s row leaves null).';
comment on column sift.tenant_limits.knob_ceilings is
    'The most each numeric knob may be, by name ({"fetch_k": 200, "neighbours": 3}): refused above it '
    'in a call or a stored setting (SF015), and a value stored before the ceiling is searched with '
    'the ceiling. A tenant''s object is laid over the default row''s.';
comment on column sift.tenant_limits.max_match_count is
    'The most hits (match_count, a page''s window) one call may ask for; null: no ceiling (1,000).';
comment on column sift.tenant_limits.call_time_limit is
    'How long one search may run: its stages check the time between steps and stop with SF015 past '
    'it (docs/trust.md says what this bounds); null: no limit.';
comment on column sift.tenant_limits.max_index_shapes is
    'How many HNSW index shapes (dimensions and distance without an index) a tenant may cause, built '
    'or waiting; null: the default row''s, else 4.';
comment on column sift.tenant_limits.max_index_requests is
    'How many of those may wait for the operator''s build at once; null: the default row''s, else 2.';
alter table sift.tenant_limits enable row level security;
-- No row at first (a dump restores the operator's rows as they are): no
-- ceiling on the work of a call (today's behaviour, the knobs' own domains),
-- and index shapes bounded (4, 2 waiting), since an index costs every tenant's
-- writes.

-- No tenant can stall another through pgsift's own locks (issue 37 item 2). Every lock
-- pgsift took was an advisory lock on a key anyone could compute (pg_advisory_lock and
-- hashtextextended are PUBLIC's, collection ids are sequential, and pg_locks shows every
-- session's keys anyway): a reader of one tenant could stall another tenant's writes,
-- refreshes, space switches and drops, hang every migrate, or block another tenant's new
-- collection sizes. pgsift's locks are now row and table locks that only their owners can
-- take:
--
-- - sift.collection_locks, a row per collection (the collections' insert trigger makes it;
--   rows for the collections there are made below), under the same row-level security as
--   the collection's other rows: its writers lock it for key share, a list build, space
--   switch or drop for update (sift._lock_collection). A tenant cannot see, so cannot lock,
--   another tenant's row, and no table references it (a foreign key check locks as the
--   owner, past the policies).
-- - sift.tenant_locks, a row per tenant that asked for an HNSW index: its index requests
--   take it in turn, after the trigger has checked that the request is the tenant's own.
-- - sift.operator_locks, rows no role but the owner may read or lock: the text index's
--   cleaner tries its row (security definer, as the owner).
-- - migrate serializes on a lock of sift.schema_migrations, on which no role but the owner
--   has any privilege (so no other role can LOCK it).

create table sift.collection_locks (
    collection_id bigint primary key references sift.collections (collection_id) on delete cascade
);
comment on table sift.collection_locks is
    'One row per collection, locked and never written: the collection''s chunk writers hold it for '
    'key share, a list build (sift.refresh_lexical_stats), a vector space switch or drop and a '
    'collection''s drop for update (sift._lock_collection), so none of these runs while the '
    'collection''s chunks change. Row-level security keeps every tenant to its own rows.';
comment on column sift.collection_locks.collection_id is 'The collection this row orders the work of.';
alter table sift.collection_locks enable row level security;

insert into sift.collection_locks (collection_id)
select c.collection_id from sift.collections c order by c.collection_id;

create table sift.tenant_locks (
    tenant sift.name primary key
);
comment on table sift.tenant_locks is
    'One row per tenant that asked for an HNSW index, locked and never written: a tenant''s index '
    'requests take it in turn (sift.index_requests'' trigger), so two cannot both pass its limits. '
    'Row-level security keeps every tenant to its own row.';
comment on column sift.tenant_locks.tenant is 'The tenant whose index requests this row orders.';
alter table sift.tenant_locks enable row level security;

create table sift.operator_locks (
    name text primary key
);
comment on table sift.operator_locks is
    'Rows locked by the operator''s own upkeep, never written: no role but the owner may read or '
    'lock them (no grant). clean_text_index: one cleaner of the text index at a time '
    '(sift._clean_text_index, which skips while another holds it).';
comment on column sift.operator_locks.name is 'The upkeep step the row orders.';
insert into sift.operator_locks (name) values ('clean_text_index');

-- Rerank metering with a price (issue 36, item 7). A usage row carries the tokens and search
-- units the provider reported; the operator keeps what they cost (sift.rerank_prices, edited
-- like sift.reranker_limits), and each usage row stores the cost of its call at the price in
-- effect when it was made, so a tenant's spend is a SUM. The cost is written when the row is
-- (by the table's trigger, whoever inserts, from the price in effect at the row's created_at)
-- and then kept: a bill already sent never changes because a price did. A late correction of
-- a price is priced into past rows on purpose, by the operator's
-- sift.reprice_rerank_usage(since). Usage with no price in effect, or whose price needs a
-- unit the provider did not report, has a null cost (and currency), never 0: it is counted as
-- unpriced. Shipped empty: providers change their prices, and shipped figures would go stale
-- and mislead. Rows metered before have no cost until the operator fills the prices and
-- reprices them.

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

-- A positive given by its document alone (a source_uri, a BEIR judgment) is about the
-- document, not about the chunks it had when the set was imported. It is still stored as one
-- row per chunk (evaluation scores chunks), now marked, so sift.rebind_golden_set can make it
-- every chunk the document has after a re-chunk, whatever their text, instead of searching
-- for the old chunks' texts. Rows stored before are not marked (nothing tells them from
-- positives given by text): re-import such a set to mark them.

alter table sift.golden_positives
    add column whole_document boolean not null default false,
    add constraint whole_document_has_source check (not whole_document or source_uri is not null);

comment on column sift.golden_positives.whole_document is
    'True for a positive given by its document alone (source_uri): one row per chunk of that '
    'document, which sift.rebind_golden_set re-makes from the chunks the document has now; '
    'false for one given by text or by chunk (rebound by its text).';
