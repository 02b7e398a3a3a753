-- Fusion: weighted Reciprocal Rank Fusion over the legs' rank lists, and the
-- candidate pool (sift.candidates) that search, explain and the rerank path share.

create or replace function sift.rrf(
    dense_ids    bigint[],
    lexical_ids  bigint[],
    dense_weight double precision default 0.45,
    rrf_k        double precision default 5)
returns table (chunk_id bigint, dense_rank integer, lexical_rank integer,
               score double precision, fused_rank integer)
language sql immutable parallel safe security invoker
as $$
    with d as (select u.id, u.ord::integer as r
               from pg_catalog.unnest(dense_ids) with ordinality as u(id, ord)),
         l as (select u.id, u.ord::integer as r
               from pg_catalog.unnest(lexical_ids) with ordinality as u(id, ord)),
         -- Subnormal weights count as 0: float8 division would underflow to an error.
         w as (select case when dense_weight < 2.2250738585072014e-308 then 0 else dense_weight end as dw,
                      case when 1 - dense_weight < 2.2250738585072014e-308 then 0 else 1 - dense_weight end as lw),
         j as (select coalesce(d.id, l.id) as id, d.r as dr, l.r as lr,
                      coalesce(w.dw / (rrf_k + d.r), 0) + coalesce(w.lw / (rrf_k + l.r), 0) as s
               from d full join l on l.id = d.id cross join w)
    select j.id, j.dr, j.lr, j.s, (row_number() over (order by j.s desc, j.id))::integer
    from j
    order by 5
$$;
comment on function sift.rrf(bigint[], bigint[], double precision, double precision) is
    'Weighted Reciprocal Rank Fusion of two ranked id lists (position 1 = best): '
    'score = w/(k + dense_rank) + (1 - w)/(k + lexical_rank); a list that lacks an id gives '
    'it nothing; ties go to the smaller id. The pool is the union of both lists. '
    'Known trap, kept as a knob: with w = 0.7 and k = 60 (the seeds'' old defaults) a '
    'lexical-only hit (at best 0.3/61 = 0.0049) can never outrank dense rank 40 '
    '(0.7/100 = 0.007); the defaults w = 0.45, k = 5 (chosen on SciFact train) let a top '
    'lexical hit (0.55/6) outrank every dense-only one; lower w or raise k '
    'when exact-term matches must surface.';


create or replace function sift._legs(
    col sift.collections, query_text text, has_embedding boolean, hybrid boolean,
    out legs text[], out lexical_query tsquery, out lexical_terms text[])
language sql stable security invoker
as $$
    -- Which legs a search runs: dense when there is a query embedding; lexical
    -- when hybrid is on (or there is no embedding) and the text has terms.
    with q as (
        select p.match, p.terms
        from sift._parse_query(
            case when coalesce(hybrid, col.hybrid) or not has_embedding then query_text end,
            col.search_language) p)
    select array_remove(array[case when has_embedding then 'dense' end,
                              case when q.match is not null then 'lexical' end], null),
           q.match, q.terms
    from q
$$;
comment on function sift._legs(sift.collections, text, boolean, boolean) is
    'Internal: the legs a search runs and its lexical query and terms (shared by candidates '
    'and explain, so they always agree).';


create or replace function sift._collections(
    tenant text, collection text, collections text[])
returns sift.collections[]
language plpgsql stable security invoker
set search_path from current
as $$
declare
    names text[];
    one   text;
    cols  sift.collections[] := '{}';
    dims  text;
begin
    -- One name or several, never both: the same rule for every entry point.
    if (collection is null) = (collections is null) then
        raise exception 'name the collection(s) to search: either collection => ''name'' or collections => array[...]'
            using errcode = 'SF003';
    end if;
    names := coalesce(collections, array[collection]);
    if cardinality(names) = 0 or array_position(names, null) is not null then
        raise exception 'collections must be a non-empty array of names without nulls'
            using errcode = 'SF003';
    end if;
    if cardinality(names) <> (select count(distinct u.n) from pg_catalog.unnest(names) u(n)) then
        raise exception 'collections names a collection twice: %', names using errcode = 'SF003';
    end if;
    foreach one in array names loop
        cols := cols || sift._collection(tenant, one);
    end loop;
    -- One pool means one embedding space: a dense leg and MMR compare vectors
    -- across the collections, and vectors of two sizes cannot be compared.
    if (select count(distinct (cols[i]).embedding_dims)
        from pg_catalog.generate_subscripts(cols, 1) as i) > 1 then
        select string_agg(format('"%s" (%s)', (cols[i]).name, (cols[i]).embedding_dims), ', '
                          order by i)
        into dims
        from pg_catalog.generate_subscripts(cols, 1) as i;
        raise exception 'collections searched together must share one embedding size: %', dims
            using errcode = 'SF007',
                  hint = 'search collections of different embedding sizes separately';
    end if;
    return cols;
end;
$$;
comment on function sift._collections(text, text, text[]) is
    'Internal: the collection rows named by collection or collections (in the order given) for '
    'one tenant; SF003 when both or neither are given, SF001 for an unknown name, SF007 when '
    'their embedding sizes differ.';


create or replace function sift._pool(
    col                sift.collections,
    query_text         text,
    query_embedding    vector,
    match_count        integer,
    filter             jsonb,
    hybrid             boolean,
    dense_weight       double precision,
    rrf_k              double precision,
    fetch_k            integer,
    exact_search_limit integer,
    lexical_scorer     text,
    bm25_k1            double precision,
    bm25_b             double precision)
returns table (
    chunk_id       bigint,
    document_id    bigint,
    dense_rank     integer,
    dense_distance double precision,
    lexical_rank   integer,
    lexical_score  double precision,
    score          double precision,
    found_by       text,
    legs           text[],
    lexical_query  text)
language plpgsql stable security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    n     integer := greatest(coalesce(_pool.fetch_k, col.fetch_k), _pool.match_count);
    w     double precision := coalesce(_pool.dense_weight, col.dense_weight);
    k     double precision := coalesce(_pool.rrf_k, col.rrf_k);
    tsq   tsquery;
    terms text[];
    ran   text[] := '{}';
    dense_ids   bigint[];
    dense_raw   double precision[];
    lexical_ids bigint[];
    lexical_raw double precision[];
begin
    select x.legs, x.lexical_query, x.lexical_terms into ran, tsq, terms
    from sift._legs(col, query_text, query_embedding is not null, _pool.hybrid) x;
    -- A leg that did not run leaves the other one's order untouched.
    if not ('lexical' = any (ran)) then w := 1; end if;
    if not ('dense' = any (ran)) then w := 0; end if;

    if 'dense' = any (ran) then
        select array_agg(x.chunk_id order by x.rank), array_agg(x.distance order by x.rank)
        into dense_ids, dense_raw
        from sift._dense_leg(array[col.collection_id], col.embedding_dims, col.distance,
                             query_embedding, _pool.filter, n,
                             coalesce(_pool.exact_search_limit, col.exact_search_limit)) x;
    end if;
    if 'lexical' = any (ran) then
        select array_agg(x.chunk_id order by x.rank), array_agg(x.score order by x.rank)
        into lexical_ids, lexical_raw
        from sift._lexical_leg(col, tsq, terms, _pool.filter, n,
                               coalesce(_pool.lexical_scorer, col.lexical_scorer),
                               coalesce(_pool.bm25_k1, col.bm25_k1),
                               coalesce(_pool.bm25_b, col.bm25_b)) x;
    end if;

    return query
    select f.chunk_id, c.document_id, f.dense_rank, dense_raw[f.dense_rank],
           f.lexical_rank, lexical_raw[f.lexical_rank], f.score,
           case when f.dense_rank is not null and f.lexical_rank is not null then 'both'
                when f.dense_rank is not null then 'dense' else 'lexical' end,
           ran, tsq::text
    from sift.rrf(dense_ids, lexical_ids, w, k) f
    join sift.chunks c on c.chunk_id = f.chunk_id
    order by f.fused_rank, f.chunk_id;
end;
$$;
comment on function sift._pool(sift.collections, text, vector, integer, jsonb, boolean,
    double precision, double precision, integer, integer, text, double precision,
    double precision) is
    'Internal: one collection''s fused pool: both legs (each its top max(fetch_k, match_count), '
    'filter inside), weighted RRF over their union, in fused order.';


create or replace function sift.candidates(
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
    collections        text[] default null)
returns table (
    chunk_id       bigint,
    document_id    bigint,
    dense_rank     integer,
    dense_distance double precision,
    lexical_rank   integer,
    lexical_score  double precision,
    score          double precision,
    fused_rank     integer,
    found_by       text,
    legs           text[],
    lexical_query  text,
    collection_name text)
language plpgsql stable security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    cols sift.collections[] := sift._collections(candidates.tenant, candidates.collection,
                                                 candidates.collections);
begin
    perform sift._check_dims(cols[1], query_embedding, 'query_embedding');
    if candidates.filter is not null and jsonb_typeof(candidates.filter) <> 'object' then
        raise exception 'filter must be a JSON object, got %', jsonb_typeof(candidates.filter)
            using errcode = 'SF003';
    end if;

    -- Each collection runs its own legs (its language, BM25 statistics and
    -- knobs) and fuses them; the pools are then one list on one RRF scale.
    return query
    select p.chunk_id, p.document_id, p.dense_rank, p.dense_distance, p.lexical_rank,
           p.lexical_score, p.score,
           (row_number() over (order by p.score desc, p.chunk_id))::integer,
           p.found_by, p.legs, p.lexical_query, (cols[i]).name::text
    from pg_catalog.generate_subscripts(cols, 1) as i
    cross join lateral sift._pool(
        cols[i], candidates.query_text, candidates.query_embedding, candidates.match_count,
        candidates.filter, candidates.hybrid, candidates.dense_weight, candidates.rrf_k,
        candidates.fetch_k, candidates.exact_search_limit, candidates.lexical_scorer,
        candidates.bm25_k1, candidates.bm25_b) p
    order by 8, p.chunk_id;
end;
$$;
comment on function sift.candidates(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, sift.lexical_scorer,
    sift.bm25_k1, sift.bm25_b, text[]) is
    'The fused candidate pool (the retrieval stage): each leg''s top max(fetch_k, match_count) '
    'chunks (metadata filter inside both legs), weighted RRF over their union, with every leg''s '
    'rank and raw score and which leg found each chunk. legs says which legs ran (lexical does '
    'not run for stopword-only or empty text; dense does not run without query_embedding); '
    'lexical_query is the tsquery used. collections => array[...] searches several collections '
    'of the tenant (same embedding size, else SF007): each runs its own legs and the pools '
    'merge on one RRF scale (fused_rank across them; collection_name says where a chunk came from). '
    'Knob arguments left null take each collection''s settings; hybrid => false gives exactly '
    'the dense-only order. Ranking knobs (recency, boost, cap, MMR, threshold) are not applied '
    'here: see sift.finalize. Read-only.';
