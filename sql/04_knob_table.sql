-- The knob table, re-applied with the function files: every knob's definition (its row of
-- sift.knob_defs: position in sift.knobs(), type, default, whether null switches it off and the
-- value off stands for, scope, stage, meaning) and the shipped presets (sift.knob_presets). In:
-- each knob's domain and its attribute of sift.knob_set, which a migration makes. Out: the rows as
-- declared here, and each knob's meaning as the comment of its sift.knob_set attribute and of
-- its domain (psql's \d+ sift.knob_set and \dD+ say what sift.knobs() says).
--
-- A row that differs from its declaration here is updated, a missing one inserted; when every row
-- is as declared nothing is written (a write fires sift._knob_definitions_changed, which locks
-- sift.collections against writes until migrate commits). A row of sift.knob_defs declared
-- nowhere here is deleted when sift.knob_set has no attribute of its name (a migration dropped
-- the knob: nothing can read it), and refused while it has one (its definition is missing here).
-- A knob declared here without its attribute is refused (its migration is missing). Presets
-- declared here are written as declared; any other row of sift.knob_presets is left as it is.

do $knob_defs$
declare
    -- In the table's column order (a new column of sift.knob_defs fails this cast until it is
    -- declared here too).
    wanted sift.knob_defs[];
    listed text;
begin
    select pg_catalog.array_agg(row(v.name, v.type::pg_catalog.regtype, v.default_value::jsonb, v.can_be_off,
                                    v.off_value::jsonb, v.scope, v.stage, v.meaning, v.position)::sift.knob_defs
                                order by v.position)
    into wanted
    from (values
        (10, 'hybrid', 'boolean', 'true', false, 'null', 'both', 'fusion',
         'Run the lexical leg beside the dense one (false: the dense leg alone).'),
        (20, 'dense_weight', 'sift.dense_weight', '0.5', false, 'null', 'both', 'fusion',
         'w in the fused score w/(k + dense_rank) + (1 - w)/(k + lexical_rank).'),
        (30, 'rrf_k', 'sift.rrf_k', '3', false, 'null', 'both', 'fusion',
         'k in the fused score: larger k flattens the difference between ranks.'),
        (35, 'fusion', 'sift.fusion', '"rrf"', false, 'null', 'both', 'fusion',
         'How the legs combine: rrf (weight / (rrf_k + rank), summed), dbsf (each leg''s scores '
         'normalised by its mean +- 3 standard deviations, clipped to [0, 1], weighted sum) or convex '
         '(each leg''s scores min-max normalised, weighted sum); a leg that lacks a chunk gives it 0.'),
        (40, 'fetch_k', 'sift.fetch_k', '40', false, 'null', 'both', 'fusion',
         'Candidates each leg contributes to fusion (at least match_count).'),
        (50, 'exact_search_limit', 'sift.exact_search_limit', '5000', false, 'null', 'both', 'dense',
         'Collections with at most this many chunks are scanned exactly instead of through HNSW (and '
         'one of up to twice that holding under a tenth of a shared index).'),
        (51, 'hnsw_ef_search', 'sift.hnsw_ef_search', '100', false, 'null', 'both', 'dense',
         'HNSW''s candidate list (pgvector''s hnsw.ef_search) for the dense leg''s index walk, at '
         'least the rows the leg asks for (a question-vector walk: five times that): higher finds more '
         'of the nearest chunks, lower answers sooner (pgvector''s own default is 40). Unused by exact '
         'scans.'),
        (52, 'dense_space', 'sift.dense_space', 'null', true, 'null', 'call', 'dense',
         'The vector space the dense leg searches (sift.vector_spaces); null: the collection''s active '
         'one. Hits say how many chunks it lacks (dense_space_missing).'),
        (60, 'lexical_scorer', 'sift.lexical_scorer', '"bm25"', false, 'null', 'both', 'lexical',
         'bm25 (Okapi BM25 in SQL) or ts_rank_cd (PostgreSQL''s own ranking).'),
        (70, 'bm25_k1', 'sift.bm25_k1', '1.2', false, 'null', 'both', 'lexical',
         'BM25 term-frequency saturation.'),
        (80, 'bm25_b', 'sift.bm25_b', '0.4', false, 'null', 'both', 'lexical',
         'BM25 length normalisation (0: none, 1: full).'),
        (90, 'lexical_budget', 'sift.lexical_budget', '3000', false, 'null', 'both', 'lexical',
         'Impact-list entries the lexical leg reads per query at most.'),
        (100, 'lexical_exact_limit', 'sift.lexical_exact_limit', '3000', false, 'null', 'both', 'lexical',
         'When the lists cannot prove the top k within the budget, score every matching chunk if the '
         'terms'' chunk counts add up to at most this.'),
        (101, 'lexical_list_limit', 'sift.lexical_list_limit', '12000', false, 'null', 'both', 'lexical',
         'Where every common query term''s impact list holds all its chunks and holding a term is '
         'enough to match, answer exactly by summing the lists if the terms'' chunk counts add up to '
         'at most this (0: never). No stored vector is read.'),
        (105, 'max_query_terms', 'sift.max_query_terms', '64', false, 'null', 'both', 'lexical',
         'Distinct query words the lexical leg ORs together, the first ones in query order (a pasted '
         'paragraph costs a bounded scan); excluded words and phrases are capped alike.'),
        (106, 'quoted_text', 'sift.quoted_text', '"boost"', false, 'null', 'both', 'lexical',
         'boost: a "quoted phrase" lifts the chunks that hold it and a -word lowers those that hold '
         'it, the other matches stay; require: the phrase is required and the -word excludes.'),
        (110, 'recency_field', 'sift.recency_field', 'null', true, 'null', 'both', 'finalize',
         'Date recency ranks on: created, modified, uploaded or a metadata key holding an ISO 8601 '
         'date (null: off).'),
        (120, 'recency_half_life', 'sift.recency_half_life', '"30 days"', false, 'null', 'both', 'finalize',
         'At one half-life a document has lost half the recency weight.'),
        (130, 'recency_weight', 'sift.recency_weight', '0.2', false, 'null', 'both', 'finalize',
         'The most recency can take off a score: score x (1 - weight x (1 - 0.5^(age/half_life))); at '
         'most recency_ceiling.'),
        (140, 'recency_ceiling', 'sift.recency_ceiling', '0.5', false, 'null', 'collection', 'finalize',
         'The collection owner''s limit on recency_weight, and how far recency_bias may raise it.'),
        (150, 'recency_bias', 'sift.recency_bias', '0', false, 'null', 'call', 'finalize',
         'Per call: 0 keeps the collection''s recency weight, 1 raises it to the ceiling.'),
        (160, 'per_document_cap', 'sift.per_document_cap', '5', true, '0', 'both', 'finalize',
         'Chunks of one document before the others get their turn (0 or null: off); backfilled if the '
         'rest cannot fill match_count.'),
        (170, 'mmr_lambda', 'sift.mmr_lambda', 'null', true, 'null', 'both', 'finalize',
         'Maximal Marginal Relevance: 1 = relevance only, 0 = spread only (null: off).'),
        (180, 'boost', 'sift.boost', '1', false, 'null', 'both', 'finalize',
         'Multiplies the collection''s scores when several collections are searched together.'),
        (190, 'score_threshold', 'sift.score_threshold', 'null', true, 'null', 'both', 'finalize',
         'Candidates whose relevance (fused or rerank score) is below it are dropped (null: off).'),
        (200, 'threshold_reranker', 'sift.threshold_reranker', 'null', true, 'null', 'collection', 'finalize',
         'The reranker the stored score_threshold was calibrated for: applied only to pools it scored '
         '(null: any).'),
        (205, 'query_language', 'sift.query_language', 'null', true, 'null', 'call', 'finalize',
         'The question''s language (ISO 639-1; the Python client detects it for "auto"): the lexical '
         'leg parses the query in it, hits in other languages are weighed by other_language_weight, '
         'and the translation in it is the one kept of a page (null: unknown).'),
        (206, 'other_language_weight', 'sift.other_language_weight', '0.8', true, '1', 'both', 'finalize',
         'Multiplies the score of a hit whose document is in another language than query_language '
         '(null: 1).'),
        (207, 'one_translation', 'boolean', 'true', true, 'false', 'both', 'finalize',
         'Documents whose source_uri differs only by a leading locale segment (/en/..., /de-AT/...), '
         'or that share metadata.page_key, are one page: only one translation of it is kept, the one '
         'in query_language when it was retrieved, else the best.'),
        (210, 'lost_in_the_middle', 'boolean', 'false', true, 'false', 'both', 'finalize',
         'Put the strongest hits at both ends (rank 1, 3, 5, ..., 6, 4, 2).'),
        (211, 'page_window', 'sift.page_window', '100', false, 'null', 'both', 'finalize',
         'Hits the pages of sift.search_page are cut from: one ranking of this many, so page 2 '
         'continues page 1; past it, the last hit says cursor_end = window.'),
        (212, 'parent_return', 'sift.parent_return', '"child"', true, '"child"', 'both', 'finalize',
         'child: matched passages as they are; parent: each is replaced by its section '
         '(de-duplicated); auto: a section replaces its passages when at least merge_threshold of them '
         'matched. Before the cap, MMR and lost-in-the-middle, which see the merged hits. Chunks '
         'without a section stay.'),
        (214, 'merge_threshold', 'sift.merge_threshold', '0.5', false, 'null', 'both', 'finalize',
         'For parent_return auto: the share of a section''s passages in the pool that merges them into '
         'it, in (0, 1].'),
        (216, 'neighbours', 'sift.neighbours', '0', true, '0', 'both', 'finalize',
         'Each hit''s window holds the n chunks before and after it in its document (fetched by id); '
         'overlapping windows merge into the better hit''s (0 or null: off).'),
        (218, 'snippets', 'sift.snippets', 'null', true, 'null', 'both', 'finalize',
         'A snippet per hit: text (matched words between **) or html (escaped, matched words in '
         '<mark>); null: none.'),
        (219, 'snippet_words', 'sift.snippet_words', '30', false, 'null', 'both', 'finalize',
         'The most words a snippet holds.'),
        (220, 'rerank', 'boolean', 'false', true, 'false', 'both', 'rerank',
         'Rerank with the collection''s reranker (Python client; sift.search alone never calls out).'),
        (230, 'rerank_top_n', 'sift.rerank_top_n', '50', false, 'null', 'both', 'rerank',
         'Candidates the pool widens to when a reranker runs: max(match_count, rerank_top_n).'),
        (235, 'late_interaction_top_n', 'sift.late_interaction_top_n', '50', false, 'null', 'both', 'rerank',
         'With query_tokens, MaxSim rescores the fused top this many (the most any searched collection '
         'asks for) against their token vectors; the rest, and chunks without token vectors, keep '
         'their fused order behind.'),
        (240, 'max_chunk_bytes', 'sift.max_chunk_bytes', '1000000', false, 'null', 'collection', 'write',
         'The largest chunk text a collection accepts, in bytes.')
    ) v(position, name, type, default_value, can_be_off, off_value, scope, stage, meaning);

    select pg_catalog.string_agg(w.name, ', ' order by w.position) into listed
    from pg_catalog.unnest(wanted) w
    where not exists (select 1 from pg_catalog.pg_attribute a
                      where a.attrelid = 'sift.knob_set'::pg_catalog.regclass and a.attname = w.name
                        and a.attnum > 0 and not a.attisdropped);
    if listed is not null then
        raise exception 'sql/04_knob_table.sql declares knobs that sift.knob_set lacks: %', listed
            using hint = 'a knob''s domain and its attribute of sift.knob_set are made by a migration';
    end if;

    select pg_catalog.string_agg(d.name, ', ' order by d.position) into listed
    from sift.knob_defs d
    where d.name <> all (select w.name from pg_catalog.unnest(wanted) w)
      and exists (select 1 from pg_catalog.pg_attribute a
                  where a.attrelid = 'sift.knob_set'::pg_catalog.regclass and a.attname = d.name
                    and a.attnum > 0 and not a.attisdropped);
    if listed is not null then
        raise exception 'sift.knob_defs has knobs that sql/04_knob_table.sql does not declare: %', listed
            using hint = 'declare each knob''s row there (CONTRIBUTING.md, Add a knob)';
    end if;

    if exists (select 1 from sift.knob_defs d
               where d.name <> all (select w.name from pg_catalog.unnest(wanted) w)) then
        delete from sift.knob_defs d where d.name <> all (select w.name from pg_catalog.unnest(wanted) w);
    end if;

    if exists (select 1 from pg_catalog.unnest(wanted) w left join sift.knob_defs d on d.name = w.name
               where d is distinct from w) then
        insert into sift.knob_defs as d
        select w.* from pg_catalog.unnest(wanted) w
        on conflict (name) do update
        set type = excluded.type, default_value = excluded.default_value, can_be_off = excluded.can_be_off,
            off_value = excluded.off_value, scope = excluded.scope, stage = excluded.stage,
            meaning = excluded.meaning, position = excluded.position
        where d is distinct from excluded;
    end if;
end
$knob_defs$;

do $knob_presets$
declare
    wanted sift.knob_presets[];
begin
    select pg_catalog.array_agg(row(v.name, v.knobs::jsonb, v.meaning)::sift.knob_presets order by v.name)
    into wanted
    from (values
        ('pgvector',
         '{"hybrid": false, "per_document_cap": null, "mmr_lambda": null, "recency_field": null,
           "score_threshold": null, "lost_in_the_middle": null, "boost": 1, "rerank": null,
           "exact_search_limit": 1000000}',
         'Exactly pgvector''s order: the dense leg alone by exact distance, no cap, MMR, recency, '
         'threshold or rerank.'),
        ('seeds',
         '{"rrf_k": 60, "fetch_k": 40, "dense_weight": 0.7}',
         'The seeds'' fusion (w 0.7, k 60, 40 per leg): lexical-only hits never outrank dense rank 40.')
    ) v(name, knobs, meaning);

    if exists (select 1 from pg_catalog.unnest(wanted) w left join sift.knob_presets p on p.name = w.name
               where p is distinct from w) then
        insert into sift.knob_presets as p
        select w.* from pg_catalog.unnest(wanted) w
        on conflict (name) do update set knobs = excluded.knobs, meaning = excluded.meaning
        where p is distinct from excluded;
    end if;
end
$knob_presets$;

-- Each knob's attribute of sift.knob_set and its domain (a boolean knob has none) say what its
-- row says.
do $knob_comments$
declare
    k record;
begin
    for k in select d.name, d.meaning, t.typname
             from sift.knob_defs d
             left join pg_catalog.pg_type t
                 on t.oid = d.type and t.typtype = 'd' and t.typnamespace = 'sift'::pg_catalog.regnamespace
             order by d.position loop
        execute pg_catalog.format('comment on column sift.knob_set.%I is %L', k.name, k.meaning);
        if k.typname is not null then
            execute pg_catalog.format('comment on domain sift.%I is %L', k.typname,
                                      pg_catalog.format('Values of the knob %s (sift.knob_defs): %s',
                                                        k.name, k.meaning));
        end if;
    end loop;
end
$knob_comments$;
