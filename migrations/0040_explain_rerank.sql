-- pgsift 0040: explain shows the rerank. A row of sift.explain says which
-- reranker a search over the pool uses, the score and rank it gave the
-- candidate and whether this view includes it (SQL alone never calls out:
-- sift.explain takes the scores, which the Python client's explain fetches).

alter type sift.explanation
    add attribute reranker text,
    add attribute rerank_score double precision,
    add attribute rerank_rank integer,
    add attribute rerank_status text;

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

-- The signature gains rerank_ids, rerank_scores and scored_by: re-created by
-- the function files.
drop function if exists sift.explain(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[], bigint[],
                                     @extschema:vector@.vector[], text[], @extschema:vector@.vector[],
                                     double precision[]);
