-- Public search entry points: sift.search (the answer) and sift.explain (the
-- candidate view). Both are sift._finalize over sift.candidates, so they can
-- never disagree.

create or replace function sift.search(
    collection         text default null,
    query_text         text default '',
    query_embedding    vector default null,
    match_count        sift.match_count default 10,
    tenant             text default 'default',
    filter             jsonb default '{}',
    hybrid             boolean default null,
    dense_weight       sift.dense_weight default null,
    rrf_k              sift.rrf_k default null,
    fetch_k            sift.fetch_k default null,
    exact_search_limit sift.exact_search_limit default null,
    lexical_scorer     sift.lexical_scorer default null,
    bm25_k1            sift.bm25_k1 default null,
    bm25_b             sift.bm25_b default null,
    collections        text[] default null,
    recency_field      sift.recency_field default null,
    recency_half_life  sift.recency_half_life default null,
    recency_weight     sift.recency_weight default null,
    recency_bias       sift.recency_bias default null,
    per_document_cap   sift.per_document_cap default null,
    mmr_lambda         sift.mmr_lambda default null,
    boosts             sift.boost[] default null,
    score_threshold    sift.score_threshold default null,
    lost_in_the_middle boolean default null)
returns table (
    rank              integer,
    chunk_id          bigint,
    document_id       bigint,
    source_uri        text,
    title             text,
    ordinal           integer,
    content           text,
    context           text,
    metadata          jsonb,
    score             double precision,
    found_by          text,
    dense_rank        integer,
    dense_distance    double precision,
    lexical_rank      integer,
    lexical_score     double precision,
    legs              text[],
    lexical_query     text,
    collection_name   text,
    base_score        double precision,
    pool_rank         integer,
    recency_factor    double precision,
    boost             double precision,
    "position"        integer,
    threshold_applied boolean,
    below_threshold   integer)
language plpgsql stable security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    -- Check the arguments first: with nothing to join, the planner may never
    -- call candidates, and a typo must not look like an empty answer.
    cols sift.collections[] := sift._collections(search.tenant, search.collection, search.collections);
begin
    perform sift._check_dims(cols[1], search.query_embedding, 'query_embedding');
    perform sift._check_ranking(cols, search.recency_weight, search.boosts);
    return query
    with p as materialized (
        select *
        from sift.candidates(
                collection => search.collection, query_text => search.query_text,
                query_embedding => search.query_embedding, match_count => search.match_count,
                tenant => search.tenant, filter => search.filter, hybrid => search.hybrid,
                dense_weight => search.dense_weight, rrf_k => search.rrf_k,
                fetch_k => search.fetch_k, exact_search_limit => search.exact_search_limit,
                lexical_scorer => search.lexical_scorer, bm25_k1 => search.bm25_k1,
                bm25_b => search.bm25_b, collections => search.collections)
    ), f as (
        select *
        from sift._finalize(
                cols, (select array_agg(p.chunk_id order by p.fused_rank) from p),
                (select array_agg(p.score order by p.fused_rank) from p), search.match_count,
                search.recency_field, search.recency_half_life, search.recency_weight,
                search.recency_bias, search.per_document_cap, search.mmr_lambda, search.boosts,
                search.score_threshold, search.lost_in_the_middle, false) x
    )
    select f.final_rank, f.chunk_id, f.document_id, d.source_uri, d.title, c.ordinal,
           c.content, c.context, d.metadata, f.score, p.found_by,
           p.dense_rank, p.dense_distance, p.lexical_rank, p.lexical_score,
           p.legs, p.lexical_query, f.collection_name, f.base_score, f.pool_rank,
           f.recency_factor, f.boost, f.position, f.threshold_applied, f.below_threshold
    from f
    join p on p.chunk_id = f.chunk_id
    join sift.chunks c on c.chunk_id = f.chunk_id
    join sift.documents d on d.document_id = f.document_id
    order by f.position, f.chunk_id;
end;
$$;
comment on function sift.search(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, sift.lexical_scorer,
    sift.bm25_k1, sift.bm25_b, text[], sift.recency_field, sift.recency_half_life,
    sift.recency_weight, sift.recency_bias, sift.per_document_cap, sift.mmr_lambda, sift.boost[],
    sift.score_threshold, boolean) is
    'Hybrid search in one statement: dense (pgvector HNSW, or exact for small collections) and '
    'lexical (tsvector, OR over terms, "phrases" required, -exclusions) legs, each taking its '
    'top max(fetch_k, match_count) inside the metadata filter (jsonb containment), fused by '
    'weighted RRF: base_score = w/(k + dense_rank) + (1 - w)/(k + lexical_rank); then the '
    'ranking knobs of sift.finalize: score = base_score x recency factor x boost, score '
    'threshold (threshold_applied, below_threshold), per-document cap with backfill, MMR, '
    'lost-in-the-middle order (position; rank is the strength). Returns the top match_count with '
    'each leg''s rank and raw score, found_by (dense, lexical, both), legs (which legs ran) and '
    'lexical_query (the tsquery used; null when the text had no terms). Collection by name '
    'within tenant, or collections => array[...] for one pool over several (same embedding '
    'size); knob arguments override the collections'' settings for this call. Trap: at w = 0.7, '
    'k = 60 a lexical-only hit never outranks dense rank 40 (defaults are w = 0.45, k = 5). Read-only (runs on a hot standby).';


create or replace function sift.explain(
    collection         text default null,
    query_text         text default '',
    query_embedding    vector default null,
    match_count        sift.match_count default 10,
    tenant             text default 'default',
    filter             jsonb default '{}',
    hybrid             boolean default null,
    dense_weight       sift.dense_weight default null,
    rrf_k              sift.rrf_k default null,
    fetch_k            sift.fetch_k default null,
    exact_search_limit sift.exact_search_limit default null,
    lexical_scorer     sift.lexical_scorer default null,
    bm25_k1            sift.bm25_k1 default null,
    bm25_b             sift.bm25_b default null,
    chunk_ids          bigint[] default null,
    collections        text[] default null,
    recency_field      sift.recency_field default null,
    recency_half_life  sift.recency_half_life default null,
    recency_weight     sift.recency_weight default null,
    recency_bias       sift.recency_bias default null,
    per_document_cap   sift.per_document_cap default null,
    mmr_lambda         sift.mmr_lambda default null,
    boosts             sift.boost[] default null,
    score_threshold    sift.score_threshold default null,
    lost_in_the_middle boolean default null)
returns table (
    fused_rank        integer,
    chunk_id          bigint,
    document_id       bigint,
    source_uri        text,
    title             text,
    ordinal           integer,
    found_by          text,
    dense_rank        integer,
    dense_distance    double precision,
    lexical_rank      integer,
    lexical_score     double precision,
    score             double precision,
    kept              boolean,
    reason            text,
    legs              text[],
    lexical_query     text,
    collection_name   text,
    base_score        double precision,
    recency_date      timestamptz,
    recency_factor    double precision,
    boost             double precision,
    cap_status        text,
    mmr_similarity    double precision,
    mmr_penalty       double precision,
    final_rank        integer,
    "position"        integer,
    cut_by            text,
    threshold_applied boolean,
    below_threshold   integer)
language plpgsql stable security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    -- Check the arguments first: with nothing to join, the planner may never
    -- call candidates, and a typo must not look like an empty answer.
    cols sift.collections[] := sift._collections(explain.tenant, explain.collection, explain.collections);
begin
    perform sift._check_dims(cols[1], explain.query_embedding, 'query_embedding');
    perform sift._check_ranking(cols, explain.recency_weight, explain.boosts);
    return query
    with p as materialized (
        select *
        from sift.candidates(
                collection => explain.collection, query_text => explain.query_text,
                query_embedding => explain.query_embedding, match_count => explain.match_count,
                tenant => explain.tenant, filter => explain.filter, hybrid => explain.hybrid,
                dense_weight => explain.dense_weight, rrf_k => explain.rrf_k,
                fetch_k => explain.fetch_k, exact_search_limit => explain.exact_search_limit,
                lexical_scorer => explain.lexical_scorer, bm25_k1 => explain.bm25_k1,
                bm25_b => explain.bm25_b, collections => explain.collections)
    ), f as materialized (
        select *
        from sift._finalize(
                cols, (select array_agg(p.chunk_id order by p.fused_rank) from p),
                (select array_agg(p.score order by p.fused_rank) from p), explain.match_count,
                explain.recency_field, explain.recency_half_life, explain.recency_weight,
                explain.recency_bias, explain.per_document_cap, explain.mmr_lambda, explain.boosts,
                explain.score_threshold, explain.lost_in_the_middle, true) x
    ), pool as (
        select p.fused_rank, p.chunk_id, p.document_id, p.found_by, p.dense_rank,
               p.dense_distance, p.lexical_rank, p.lexical_score, f.score, f.kept, f.reason,
               p.legs, p.lexical_query, f.collection_name, f.base_score, f.recency_date,
               f.recency_factor, f.boost, f.cap_status, f.mmr_similarity, f.mmr_penalty,
               f.final_rank, f.position, f.cut_by, f.threshold_applied, f.below_threshold
        from p
        join f on f.chunk_id = p.chunk_id
    ), summary as (
        select bool_or(f.threshold_applied) as threshold_applied, max(f.below_threshold) as below_threshold
        from f
    ), missing as (
        -- Chunks the caller asked about that no leg retrieved: say why.
        select null::integer, c.chunk_id, c.document_id, null::text, null::integer,
               case col.distance
                   when 'cosine' then c.embedding <=> explain.query_embedding
                   when 'l2' then c.embedding <-> explain.query_embedding
                   else c.embedding <#> explain.query_embedding end,
               null::integer, null::double precision, null::double precision, false,
               'not retrieved: outside both legs'' top '
                   || greatest(coalesce(explain.fetch_k, col.fetch_k), explain.match_count)
                   || case when explain.filter is not null and explain.filter <> '{}'::jsonb
                                and not (d.metadata @> explain.filter)
                           then '; excluded by the metadata filter' else '' end
                   || case when plan.lexical_query is null
                           then '; lexical leg did not run'
                           when c.search_vector @@ plan.lexical_query
                           then '; matches the lexical query'
                           else '; does not match the lexical query' end,
               plan.legs, plan.lexical_query::text, col.name::text,
               null::double precision, null::timestamptz, null::double precision,
               null::double precision, null::text, null::double precision, null::double precision,
               null::integer, null::integer, 'not_retrieved',
               coalesce(summary.threshold_applied, false), coalesce(summary.below_threshold, 0)
        from pg_catalog.unnest(cols) as col
        cross join lateral sift._legs(col, explain.query_text, explain.query_embedding is not null,
                                      explain.hybrid) plan
        cross join summary
        join sift.chunks c on c.collection_id = col.collection_id
        join sift.documents d on d.document_id = c.document_id
        where c.chunk_id = any (explain.chunk_ids)
          and not exists (select 1 from p where p.chunk_id = c.chunk_id)
    ), rows as (
        select * from pool
        union all
        select * from missing
    )
    select r.fused_rank, r.chunk_id, r.document_id, d.source_uri, d.title, c.ordinal,
           r.found_by, r.dense_rank, r.dense_distance, r.lexical_rank, r.lexical_score,
           r.score, r.kept, r.reason, r.legs, r.lexical_query, r.collection_name, r.base_score,
           r.recency_date, r.recency_factor, r.boost, r.cap_status, r.mmr_similarity,
           r.mmr_penalty, r.final_rank, r.position, r.cut_by, r.threshold_applied,
           r.below_threshold
    from rows r
    join sift.chunks c on c.chunk_id = r.chunk_id
    join sift.documents d on d.document_id = r.document_id
    order by r.fused_rank nulls last, r.chunk_id;
end;
$$;
comment on function sift.explain(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, sift.lexical_scorer,
    sift.bm25_k1, sift.bm25_b, bigint[], text[], sift.recency_field, sift.recency_half_life,
    sift.recency_weight, sift.recency_bias, sift.per_document_cap, sift.mmr_lambda, sift.boost[],
    sift.score_threshold, boolean) is
    'The candidate view: the whole fused pool behind sift.search with the same arguments, each '
    'chunk''s rank and raw score in every leg, fused score (base_score) and rank, and what each '
    'ranking knob did to it: recency_date and recency_factor, boost, score (after both), '
    'cap_status (kept, capped, backfilled), mmr_similarity and mmr_penalty, final_rank and '
    'position, whether it made the cut (kept) and if not, cut_by (score_threshold, '
    'per_document_cap, mmr, match_count) and reason. Pass chunk_ids to also see chunks no leg '
    'retrieved and why (distance, filter, lexical match; cut_by = not_retrieved): "never '
    'retrieved" versus "ranked too low". Read-only.';
