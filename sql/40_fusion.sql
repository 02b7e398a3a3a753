-- Fusion: weighted Reciprocal Rank Fusion (or dbsf, convex) over the legs'
-- rank lists, and the candidate pool (sift.candidates) that search, explain
-- and the rerank path share. In: the collections, their resolved knobs and
-- the query. Out: sift.candidate rows, the pool in fused order, each with
-- what every leg gave it. sift._legs decides which legs run, sift._pool runs
-- them (each leg's contract: sift._dense_ids) and fuses them all through
-- sift._fuse, two legs or N.

create or replace function sift.rrf(
    dense_ids    bigint[],
    lexical_ids  bigint[],
    dense_weight double precision,
    rrf_k        double precision)
returns table (chunk_id bigint, dense_rank integer, lexical_rank integer,
               score double precision, fused_rank integer)
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
-- Planned once a session (PostgreSQL 18 caches SQL functions' plans; a custom plan
-- per call re-planned the whole body). Leaf functions only: the setting holds for
-- whatever a function calls.
set plan_cache_mode = force_generic_plan
-- At most 2 x fetch_k rows. A pinned search_path keeps the planner from inlining it, so
-- without this it guesses 1,000 and joins the pool to sift.chunks by a full scan.
rows 100
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
    select j.id, j.dr, j.lr, j.s, (pg_catalog.row_number() over (order by j.s desc, j.id))::integer
    from j
    order by 5
$$;
comment on function sift.rrf(bigint[], bigint[], double precision, double precision) is
    'Weighted Reciprocal Rank Fusion of two ranked id lists (position 1 = best): '
    'score = w/(k + dense_rank) + (1 - w)/(k + lexical_rank); a list that lacks an id gives '
    'it nothing; ties go to the smaller id. The pool is the union of both lists. '
    'Known trap: with w = 0.7 and k = 60 (the "seeds" preset) a lexical-only hit (at best '
    '0.3/61 = 0.0049) can never outrank dense rank 40 (0.7/100 = 0.007); the defaults w = 0.5, '
    'k = 3 (the best mean of SciFact train and xquad-r-multi) let a top lexical hit (0.5/4) tie '
    'the best dense-only one and outrank the rest; lower w or raise k when exact-term matches '
    'must surface.';


create or replace function sift._fuse(
    names   text[],
    weights double precision[],
    leg_of  integer[],
    ids     bigint[],
    raws    double precision[],
    higher  boolean[],
    method  text,
    rrf_k   double precision)
returns table (chunk_id bigint, score double precision, fused_rank integer, legs integer[], ranks integer[],
               details jsonb)
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
-- Planned once a session (PostgreSQL 18 caches SQL functions' plans; a custom plan
-- per call re-planned the whole body). Leaf functions only: the setting holds for
-- whatever a function calls.
set plan_cache_mode = force_generic_plan
-- Its details turn floats into JSON: a session's extra_float_digits must not cut them.
set extra_float_digits = 1
-- At most (legs x n) rows: a pool, never the 1,000 a function is guessed at.
rows 100
as $$
    -- N legs given flat: entry i is chunk ids[i] of leg leg_of[i] (an index
    -- into names and weights) with its raw score raws[i]; a leg's entries
    -- come in its rank order. higher[leg]: whether a larger raw is better (a
    -- BM25 score) or a smaller one (a distance). Each entry contributes
    -- weight x its normalised score; a leg that lacks a chunk gives it 0.
    with e as (
        select u.id, u.leg, u.raw,
               (pg_catalog.row_number() over (partition by u.leg order by u.o))::integer as r,
               case when higher[u.leg] then u.raw else -u.raw end as s
        from unnest(ids, leg_of, raws) with ordinality as u(id, leg, raw, o)
    ), stats as (
        -- (rrf normalises by rank alone: no statistics.)
        select e.leg, pg_catalog.avg(e.s) as mu, coalesce(pg_catalog.stddev_pop(e.s), 0) as sigma,
               pg_catalog.min(e.s) as lo, pg_catalog.max(e.s) as hi
        from e where method <> 'rrf' group by e.leg
    ), c0 as (
        -- dbsf and convex count tiny weights as 0: weight x score would
        -- underflow float8 to an error. rrf takes them as given (below).
        select e.id, e.leg, e.r, e.raw,
               case when method <> 'rrf' and weights[e.leg] < 1e-150 then 0 else weights[e.leg] end as w,
               case method
                   when 'rrf' then 1 / (rrf_k + e.r)
                   when 'convex' then case when st.hi > st.lo then (e.s - st.lo) / (st.hi - st.lo) else 1 end
                   -- dbsf: [mu - 3 sigma, mu + 3 sigma] onto [0, 1], clipped; equal scores
                   -- (sigma 0, or float noise around it) are 1.
                   when 'dbsf' then case when st.sigma > 1e-9 * greatest(abs(st.mu), 1e-300)
                             then least(1, greatest(0, (e.s - (st.mu - 3 * st.sigma)) / (6 * st.sigma)))
                             else 1 end end as norm
        from e left join stats st on st.leg = e.leg
    ), c as (
        -- Each entry's part of its chunk's score. rrf as sift.rrf computes it,
        -- to the bit: a subnormal weight counts as 0 (w / (k + rank) could
        -- underflow), and leg_details say w / (k + rank) as the plain path
        -- does (for a subnormal w, what the part would have been).
        select c0.*,
               case when method = 'rrf'
                    then case when c0.w < 2.2250738585072014e-308 then 0 else c0.w end / (rrf_k + c0.r)
                    when c0.norm < 1e-150 then 0 else c0.w * c0.norm end as part,
               case when method = 'rrf' then c0.w / (rrf_k + c0.r) end as said
        from c0 c0
    ), j as (
        -- A chunk's parts summed in leg order: for two legs, dense + lexical,
        -- sift.rrf's sum.
        select c.id, pg_catalog.sum(c.part order by c.leg) as total,
               pg_catalog.array_agg(c.r order by c.leg) as ranks_by,
               pg_catalog.array_agg(c.leg order by c.leg) as legs_by,
               pg_catalog.jsonb_object_agg(names[c.leg], pg_catalog.jsonb_build_object(
                   'rank', c.r, 'raw', c.raw, 'weight', c.w,
                   'contribution', coalesce(c.said, c.part))) as details
        from c group by c.id
    )
    select j.id, j.total, (pg_catalog.row_number() over (order by j.total desc, j.id))::integer,
           j.legs_by, j.ranks_by, j.details
    from j
    order by 3
$$;
comment on function sift._fuse(text[], double precision[], integer[], bigint[], double precision[], boolean[],
                               text, double precision) is
    'Internal: fusion of N ranked legs, two included (rrf: w/(k + rank), a subnormal w counting as '
    '0, as sift.rrf; dbsf: scores normalised by the leg''s mean +- 3 standard deviations, clipped to '
    '[0, 1]; convex: min-max normalised; a weight under 1e-150 counts as 0 for both; summed with '
    'the legs'' weights), the legs that have each chunk (indexes into names, in order) with its rank '
    'in each, and what each leg gave it; ties go to the smaller id.';


create or replace function sift._legs(
    col sift.collections, knobs sift.knob_set, query_text text, has_embedding boolean,
    out legs text[], out lexical_query tsquery, out lexical_terms text[], out lift tsquery,
    out sink tsquery, out configs text[])
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Which legs a search runs: dense when there is a query embedding; lexical
    -- when hybrid is on (or there is no embedding) and the text has terms. The
    -- query is parsed in the question's language when it is known, else with
    -- every configuration the collection's documents use.
    -- No text, or hybrid off with an embedding: nothing is parsed or looked up.
    with t as (
        select case when (knobs.hybrid or not has_embedding) and query_text <> '' then query_text end as txt
    ), cfg as (
        select t.txt,
               case when t.txt is null then null
                    when knobs.query_language is not null
                    then array[sift.language_config(knobs.query_language)]
                    else array[col.search_language]
                         || array(select c.config from sift.collection_configs c
                                  where c.collection_id = col.collection_id
                                    and c.config <> col.search_language
                                  order by c.config::text) end as configs
        from t
    ), q as (
        select p.match, p.terms, p.lift, p.sink, cfg.configs
        from cfg
        left join lateral (select * from sift._parse_query(cfg.txt, cfg.configs, knobs.max_query_terms,
                                                           knobs.quoted_text = 'require')
                           where cfg.txt is not null) p on true)
    select array_remove(array[case when has_embedding then 'dense' end,
                              case when q.match is not null then 'lexical' end], null),
           q.match, q.terms, q.lift, q.sink,
           case when q.match is not null then q.configs::text[] end
    from q
$$;
comment on function sift._legs(sift.collections, sift.knob_set, text, boolean) is
    'Internal: the legs a search runs and its lexical query, terms, the quoted text that lifts '
    'or lowers chunks and the configurations the query was parsed with (shared by candidates '
    'and explain, so they always agree).';


create or replace function sift._check_query(
    cols sift.collections[], knobs sift.knob_set[], query_text text, query_embedding @extschema:vector@.vector,
    match_count integer, filter jsonb, spaces text[] default null,
    space_embeddings @extschema:vector@.vector[] default null, space_weights double precision[] default null)
returns void
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    space sift.vector_spaces;
begin
    -- Checked before anything runs: with nothing to search, a typo must not
    -- look like an empty answer. The query vector must fit the space each
    -- collection's dense leg searches (its active one unless dense_space names another).
    for i in 1 .. coalesce(cardinality(cols), 0) loop
        if (knobs[i]).dense_space is null then
            perform sift._check_vector(cols[i], query_embedding, 'query_embedding');
        else
            space := sift._space(cols[i], (knobs[i]).dense_space);   -- SF013 for an unknown one
            perform sift._check_dims(space.dimensions, space.distance,
                                     format('vector space "%s" of collection "%s"', space.name, (cols[i]).name),
                                     query_embedding, 'query_embedding');
        end if;
    end loop;
    if match_count is null or match_count not between 0 and 1000 then
        raise exception 'match_count must be between 0 and 1000, got %', match_count
            using errcode = '23514', constraint = 'match_count_valid';
    end if;
    -- Past its tenant's max_match_count (sift.tenant_limits, kept on the rows): SF015.
    perform sift._within_ceilings(cols, match_count);
    -- A malformed filter or an unknown operator: SF003 naming where.
    perform sift.filter_path(filter);
    -- Pools of several collections merge on one scale: one fusion for all.
    if (select count(distinct (knobs[i]).fusion) from generate_subscripts(knobs, 1) as i) > 1 then
        raise exception 'the collections searched together fuse differently (%): pass one fusion in knobs',
            (select string_agg(distinct (knobs[i]).fusion::text, ', ') from generate_subscripts(knobs, 1) as i)
            using errcode = 'SF003';
    end if;
    -- More spaces' query vectors: one per space, each space once and not the
    -- one the main dense leg searches, of each collection, of its size.
    if spaces is not null or space_embeddings is not null or space_weights is not null then
        if coalesce(cardinality(spaces), 0) <> coalesce(cardinality(space_embeddings), 0)
           or (space_weights is not null and cardinality(space_weights) <> coalesce(cardinality(spaces), 0)) then
            raise exception 'spaces, space_embeddings and space_weights need one entry per space (% spaces, '
                            '% embeddings, % weights)', coalesce(cardinality(spaces), 0),
                            coalesce(cardinality(space_embeddings), 0), coalesce(cardinality(space_weights), 0)
                using errcode = 'SF003';
        end if;
        if cardinality(spaces) > 8 then
            raise exception 'at most 8 more spaces a search, got %', cardinality(spaces) using errcode = 'SF003';
        end if;
        if exists (select 1 from unnest(spaces, space_embeddings) as u(s, e) where u.s is null or u.e is null)
           or (select count(distinct u.s) from unnest(spaces) as u(s)) <> cardinality(spaces) then
            raise exception 'spaces must name each space once, with its query vector (no nulls)'
                using errcode = 'SF003';
        end if;
        if exists (select 1 from unnest(space_weights) as u(w) where u.w is not null and not (u.w >= 0 and u.w <= 1000)) then
            raise exception 'space_weights must be numbers between 0 and 1,000 (null: dense_weight)'
                using errcode = 'SF003';
        end if;
        if 'dense' = any (spaces) or 'lexical' = any (spaces) then
            raise exception 'a space named "dense" or "lexical" cannot be a leg of its own: those are the legs'' names'
                using errcode = 'SF003', hint = 'search it as the main dense leg (the dense_space knob)';
        end if;
        for i in 1 .. coalesce(cardinality(cols), 0) loop
            for j in 1 .. coalesce(cardinality(spaces), 0) loop
                space := sift._space(cols[i], spaces[j]);   -- SF013 for an unknown one
                if space.name = (sift._space(cols[i], (knobs[i]).dense_space)).name and query_embedding is not null then
                    raise exception 'space "%" is the one query_embedding searches; name it once', space.name
                        using errcode = 'SF003';
                end if;
                perform sift._check_dims(space.dimensions, space.distance,
                                         format('vector space "%s" of collection "%s"', space.name, (cols[i]).name),
                                         space_embeddings[j], format('the query vector of space "%s"', spaces[j]));
            end loop;
        end loop;
    end if;
    if octet_length(query_text) > 1000000 then
        raise exception 'query_text has % bytes; at most 1,000,000 are searched', octet_length(query_text)
            using errcode = 'SF003';
    end if;
end;
$$;
comment on function sift._check_query(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector,
    integer, jsonb, text[], @extschema:vector@.vector[], double precision[]) is
    'Internal: the arguments every search entry point shares, checked once (SF002, SF003, SF013, 23514).';


create or replace function sift._pool(
    col             sift.collections,
    knobs           sift.knob_set,
    query_text      text,
    query_embedding @extschema:vector@.vector,
    match_count     integer,
    filter          jsonb,
    spaces          text[] default null,
    space_embeddings @extschema:vector@.vector[] default null,
    space_weights   double precision[] default null)
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
    lexical_query  text,
    lexical_configs text[],
    lexical_exact  boolean,
    leg_details    jsonb)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
-- leg_details turns floats into JSON: a session's extra_float_digits must not cut them.
set extra_float_digits = 1
as $$
#variable_conflict use_column
declare
    n       integer := greatest(knobs.fetch_k, _pool.match_count);
    w       double precision := knobs.dense_weight;
    fpath   jsonpath := sift.filter_path(_pool.filter);
    parsed  record;   -- sift._legs: the legs to run, and the parsed query
    ran     text[];
    space   sift.vector_spaces;
    dense_ids   bigint[];
    dense_raw   double precision[];
    qmatch      smallint[];
    lexical_ids bigint[];
    lexical_raw double precision[];
    exact       boolean;
    extra       sift.vector_spaces;
    leg         record;
    -- Every leg as sift._fuse takes them: names, weights, higher; entries flat.
    names   text[] := array['dense', 'lexical'];
    weights double precision[];
    higher  boolean[] := array[false, true];
    leg_of  integer[];
    ids     bigint[];
    raws    double precision[];
begin
    select * into parsed from sift._legs(col, knobs, query_text, query_embedding is not null);
    ran := parsed.legs;
    -- A leg that did not run leaves the other one's order untouched.
    if not ('lexical' = any (ran)) then w := 1; end if;
    if not ('dense' = any (ran)) then w := 0; end if;
    -- Each leg: its top n inside the filter (ids best first, raw scores).
    if 'dense' = any (ran) then
        -- The active space, or the one dense_space names.
        space := sift._space(col, knobs.dense_space);
        select nullif(d.ids, '{}'), nullif(d.dists, '{}') into dense_ids, dense_raw
        from sift._space_dense_ids(space, knobs, query_embedding, fpath, n) d;
        -- The question leg (in the active space), merged into this one;
        -- qmatch says which question placed a chunk (null: its own vector).
        if space.active
           and exists (select 1 from sift.question_vectors q where q.collection_id = col.collection_id) then
            select m.ids, m.dists, m.questions into dense_ids, dense_raw, qmatch
            from sift._question_ids(space, knobs, query_embedding, fpath, n) x
            cross join sift._merge_questions(dense_ids, dense_raw, x.ids, x.dists, x.questions, n) m;
        end if;
    end if;
    if 'lexical' = any (ran) then
        select nullif(x.ids, '{}'), nullif(x.raws, '{}'), coalesce(x.exact, true)
        into lexical_ids, lexical_raw, exact
        from sift._lexical_ids(col, knobs, parsed.lexical_query, parsed.lexical_terms, _pool.filter, n,
                               parsed.lift, parsed.sink) x;
    end if;
    -- The dense and lexical legs weigh w and 1 - w (all to the one that ran).
    weights := array[w, 1 - w];
    leg_of := array_fill(1, array[coalesce(cardinality(dense_ids), 0)])
              || array_fill(2, array[coalesce(cardinality(lexical_ids), 0)]);
    ids := coalesce(dense_ids, '{}') || coalesce(lexical_ids, '{}');
    raws := coalesce(dense_raw, '{}') || coalesce(lexical_raw, '{}');
    -- One dense leg more per added space's query vector.
    for j in 1 .. coalesce(cardinality(spaces), 0) loop
        extra := sift._space(col, spaces[j]);
        select d.ids, d.dists into leg from sift._space_dense_ids(extra, knobs, space_embeddings[j], fpath, n) d;
        names := names || extra.name::text;
        weights := weights || coalesce(space_weights[j], knobs.dense_weight);
        higher := higher || false;
        ran := ran || extra.name::text;
        leg_of := leg_of || array_fill(cardinality(names), array[coalesce(cardinality(leg.ids), 0)]);
        ids := ids || coalesce(leg.ids, '{}');
        raws := raws || coalesce(leg.dists, '{}');
    end loop;
    if cardinality(spaces) > 0 then
        -- Beside added spaces a weight under 1e-150 counts as 0, rrf's too (the two
        -- legs alone, only a subnormal one: sift.rrf's rule, the plain path's).
        weights := array(select case when u.w < 1e-150 then 0 else u.w end
                         from unnest(weights) with ordinality as u(w, o) order by u.o);
    end if;

    return query
    select f.chunk_id, c.document_id, r.d, dense_raw[r.d], r.l, lexical_raw[r.l], f.score,
           case when r.l is null then 'dense' when cardinality(f.legs) > 1 then 'both' else 'lexical' end,
           ran, parsed.lexical_query::text, parsed.configs, exact,
           -- What each leg gave (the weights: this call's, after a leg that did not run).
           case when qmatch[r.d] is null then f.details
                else pg_catalog.jsonb_set(f.details, '{dense,question}', pg_catalog.to_jsonb(qmatch[r.d])) end
    from sift._fuse(names, weights, leg_of, ids, raws, higher, knobs.fusion, knobs.rrf_k) f
    -- Its rank in the dense leg (leg 1) and the lexical one (leg 2).
    cross join lateral (select f.ranks[pg_catalog.array_position(f.legs, 1)] as d,
                               f.ranks[pg_catalog.array_position(f.legs, 2)] as l) r
    join sift.chunks c on c.chunk_id = f.chunk_id
    order by f.fused_rank, f.chunk_id;
end;
$$;
comment on function sift._pool(sift.collections, sift.knob_set, text, @extschema:vector@.vector, integer, jsonb,
    text[], @extschema:vector@.vector[], double precision[]) is
    'Internal: one collection''s fused pool: its legs (dense, with the question vectors merged in; '
    'lexical; one per added space''s query vector; each its top max(fetch_k, match_count), filter '
    'inside), fused by sift._fuse (the fusion knob) over their union, in fused order, with what '
    'each leg gave each chunk.';


create or replace function sift._candidates(
    cols            sift.collections[],
    knobs           sift.knob_set[],
    query_text      text,
    query_embedding @extschema:vector@.vector,
    match_count     integer,
    filter          jsonb,
    spaces          text[] default null,
    space_embeddings @extschema:vector@.vector[] default null,
    space_weights   double precision[] default null)
returns setof sift.candidate
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Each collection runs its own legs (its language, BM25 statistics and
    -- knobs) and fuses them; the pools are then one list on one scale (one
    -- fusion for all: sift._check_query).
    select p.chunk_id, p.document_id, (cols[i]).name::text,
           (pg_catalog.row_number() over (order by p.score desc, p.chunk_id))::integer,
           p.score, p.found_by, p.dense_rank, p.dense_distance, p.lexical_rank,
           p.lexical_score, p.legs, p.lexical_query, p.lexical_configs, p.lexical_exact,
           null::double precision,   -- late_interaction_score: sift.search's, with query_tokens
           p.leg_details
    from pg_catalog.generate_subscripts(cols, 1) as i
    cross join lateral sift._pool(cols[i], knobs[i], query_text, query_embedding, match_count, filter,
                                  spaces, space_embeddings, space_weights) p
    order by 4, p.chunk_id
$$;
comment on function sift._candidates(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector,
    integer, jsonb, text[], @extschema:vector@.vector[], double precision[]) is
    'Internal: the fused pool over several collections, on one RRF scale.';


create or replace function sift.candidates(
    collection      text default null,
    query_text      text default '',
    query_embedding @extschema:vector@.vector default null,
    match_count     integer default 10,
    filter          jsonb default '{}',
    knobs           jsonb default '{}',
    collections     text[] default null,
    spaces          text[] default null,
    space_embeddings @extschema:vector@.vector[] default null,
    space_weights   double precision[] default null)
returns setof sift.candidate
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cols sift.collections[] := sift._collections(candidates.collection, candidates.collections);
    ks   sift.knob_set[] := sift._resolve_all(cols, candidates.knobs);
begin
    perform sift._check_query(cols, ks, query_text, query_embedding, match_count, filter, spaces, space_embeddings,
                              space_weights);
    return query select * from sift._candidates(cols, ks, query_text, query_embedding, match_count, filter, spaces,
                                                space_embeddings, space_weights);
end;
$$;
comment on function sift.candidates(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[], text[],
    @extschema:vector@.vector[], double precision[]) is
    'The fused candidate pool (the retrieval stage): each leg''s top max(fetch_k, match_count) '
    'chunks (metadata filter inside every leg), fused over their union (weighted RRF by default), with every leg''s '
    'rank and raw score and which leg found each chunk. legs says which legs ran (lexical does '
    'not run for stopword-only or empty text; dense does not run without query_embedding); '
    'lexical_query is the tsquery used. collections => array[...] searches several collections '
    'of the tenant (same embedding size, else SF007): each runs its own legs and the pools merge '
    'on one RRF scale. knobs override the collections'' settings for this call (sift.knobs() lists '
    'them). spaces => array[...] with space_embeddings (and space_weights, default dense_weight) '
    'adds a dense leg per named vector space of the collections; the fusion knob (rrf, dbsf, '
    'convex) combines every leg; leg_details says what each gave. The ranking knobs (recency, '
    'boost, cap, MMR, threshold) are not applied here: see sift.finalize. Read-only.';
