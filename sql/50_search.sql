-- Public search entry points: sift.search (the answer) and sift.explain (the
-- candidate view). Both read sift.candidates, so they can never disagree.

create or replace function sift.search(
    collection         text,
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
    bm25_b             sift.bm25_b default null)
returns table (
    rank           integer,
    chunk_id       bigint,
    document_id    bigint,
    source_uri     text,
    title          text,
    ordinal        integer,
    content        text,
    context        text,
    metadata       jsonb,
    score          double precision,
    found_by       text,
    dense_rank     integer,
    dense_distance double precision,
    lexical_rank   integer,
    lexical_score  double precision,
    legs           text[],
    lexical_query  text)
language plpgsql stable security invoker
set search_path from current
as $$
#variable_conflict use_column
begin
    -- Check the arguments first: with nothing to join, the planner may never
    -- call candidates, and a typo must not look like an empty answer.
    perform sift._check_dims(sift._collection(search.tenant, search.collection),
                             search.query_embedding, 'query_embedding');
    return query
    select p.fused_rank, p.chunk_id, p.document_id, d.source_uri, d.title, c.ordinal,
           c.content, c.context, d.metadata, p.score, p.found_by,
           p.dense_rank, p.dense_distance, p.lexical_rank, p.lexical_score,
           p.legs, p.lexical_query
    from sift.candidates(
            collection => search.collection, query_text => search.query_text,
            query_embedding => search.query_embedding, match_count => search.match_count,
            tenant => search.tenant, filter => search.filter, hybrid => search.hybrid,
            dense_weight => search.dense_weight, rrf_k => search.rrf_k,
            fetch_k => search.fetch_k, exact_search_limit => search.exact_search_limit,
            lexical_scorer => search.lexical_scorer, bm25_k1 => search.bm25_k1,
            bm25_b => search.bm25_b) p
    join sift.chunks c on c.chunk_id = p.chunk_id
    join sift.documents d on d.document_id = p.document_id
    where p.fused_rank <= search.match_count
    order by p.fused_rank, p.chunk_id;
end;
$$;
comment on function sift.search(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, sift.lexical_scorer,
    sift.bm25_k1, sift.bm25_b) is
    'Hybrid search in one statement: dense (pgvector HNSW, or exact for small collections) and '
    'lexical (tsvector, OR over terms, "phrases" required, -exclusions) legs, each taking its '
    'top max(fetch_k, match_count) inside the metadata filter (jsonb containment), fused by '
    'weighted RRF: score = w/(k + dense_rank) + (1 - w)/(k + lexical_rank). Returns the top '
    'match_count with each leg''s rank and raw score, found_by (dense, lexical, both), legs '
    '(which legs ran) and lexical_query (the tsquery used; null when the text had no terms). '
    'Collection by name within tenant; knob arguments override the collection''s settings for '
    'this call. Trap: at w = 0.7, k = 60 a lexical-only hit never outranks dense rank 40. '
    'Read-only (runs on a hot standby).';


create or replace function sift.explain(
    collection         text,
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
    chunk_ids          bigint[] default null)
returns table (
    fused_rank     integer,
    chunk_id       bigint,
    document_id    bigint,
    source_uri     text,
    title          text,
    ordinal        integer,
    found_by       text,
    dense_rank     integer,
    dense_distance double precision,
    lexical_rank   integer,
    lexical_score  double precision,
    score          double precision,
    kept           boolean,
    reason         text,
    legs           text[],
    lexical_query  text)
language plpgsql stable security invoker
set search_path from current
as $$
#variable_conflict use_column
begin
    -- Check the arguments first: with nothing to join, the planner may never
    -- call candidates, and a typo must not look like an empty answer.
    perform sift._check_dims(sift._collection(explain.tenant, explain.collection),
                             explain.query_embedding, 'query_embedding');
    return query
    with p as (
        select *
        from sift.candidates(
                collection => explain.collection, query_text => explain.query_text,
                query_embedding => explain.query_embedding, match_count => explain.match_count,
                tenant => explain.tenant, filter => explain.filter, hybrid => explain.hybrid,
                dense_weight => explain.dense_weight, rrf_k => explain.rrf_k,
                fetch_k => explain.fetch_k, exact_search_limit => explain.exact_search_limit,
                lexical_scorer => explain.lexical_scorer, bm25_k1 => explain.bm25_k1,
                bm25_b => explain.bm25_b)
    ), col as (
        select * from sift._collection(explain.tenant, explain.collection)
    ), plan as (
        select x.legs, x.lexical_query
        from sift._collection(explain.tenant, explain.collection) c,
             lateral sift._legs(c, explain.query_text, explain.query_embedding is not null,
                                explain.hybrid) x
    ), pool as (
        select p.fused_rank, p.chunk_id, p.document_id, p.found_by, p.dense_rank,
               p.dense_distance, p.lexical_rank, p.lexical_score, p.score,
               p.fused_rank <= explain.match_count as kept,
               case when p.fused_rank <= explain.match_count
                    then format('kept: fused rank %s of %s', p.fused_rank, explain.match_count)
                    else format('cut: fused rank %s is below match_count %s',
                                p.fused_rank, explain.match_count) end as reason,
               p.legs, p.lexical_query
        from p
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
               plan.legs, plan.lexical_query::text
        from col
        cross join plan
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
           r.score, r.kept, r.reason, r.legs, r.lexical_query
    from rows r
    join sift.chunks c on c.chunk_id = r.chunk_id
    join sift.documents d on d.document_id = r.document_id
    order by r.fused_rank nulls last, r.chunk_id;
end;
$$;
comment on function sift.explain(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, sift.lexical_scorer,
    sift.bm25_k1, sift.bm25_b, bigint[]) is
    'The candidate view: the whole fused pool behind sift.search with the same arguments, each '
    'chunk''s rank and raw score in every leg, fused score and rank, and whether it made the cut '
    '(kept, reason). Pass chunk_ids to also see chunks no leg retrieved and why (distance, '
    'filter, lexical match): "never retrieved" versus "ranked too low". Read-only.';
