-- The plain search: one collection whose call uses only the stages every
-- search has (the dense and lexical legs, weighted RRF, boost, recency,
-- language weight, score threshold, per-document cap, one translation,
-- lost-in-the-middle). In: the collection and its resolved knobs, the query.
-- Out: sift.hit rows, the same to the bit as the staged pipeline's
-- (sift._candidates -> sift._finalize -> sift._hits; tests/test_plain.py
-- holds the two side by side). Each leg is one call and everything after the
-- legs is one statement planned once a session, so a search pays for the
-- stages it uses and nothing else.

create or replace function sift._plain_backfill(
    knobs       sift.knob_set,
    match_count integer,
    ids         bigint[],
    dense_ranks bigint[],
    lex_ranks   bigint[],
    bases       double precision[],
    pool_ranks  integer[])
returns table (id bigint, dr bigint, lr bigint, doc bigint, lang text, pool_rank integer, base double precision,
               lf double precision, fr integer, ordinal integer, content text, context text, section_id bigint,
               token_count integer, source_uri text, title text, metadata jsonb)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
-- Planned once a session, as sift._plain_hits.
set plan_cache_mode = force_generic_plan
rows 10
as $$
    -- sift._plain_hits' hits when its first match_count places are not the
    -- answer (a chunk past the per-document cap, or another translation of a
    -- better chunk's page, among them): the whole pool, given in place order
    -- (sift._plain_hits' i) with each chunk's leg ranks, base score and pool
    -- rank, each chunk with its document and page. Narrow rows: the text is
    -- read for the kept hits alone.
    with p as materialized (
        select u.id, u.dr, u.lr, u.base, u.pool_rank, u.i::integer as i, c.document_id as doc, l.lang,
               case when knobs.one_translation then sift._page_key(d.source_uri, d.metadata, l.lang) end as page
        from rows from (pg_catalog.unnest(ids), pg_catalog.unnest(dense_ranks), pg_catalog.unnest(lex_ranks),
                        pg_catalog.unnest(bases), pg_catalog.unnest(pool_ranks))
             with ordinality as u(id, dr, lr, base, pool_rank, i)
        join sift.chunks c on c.chunk_id = u.id
        join sift.documents d on d.document_id = c.document_id
        cross join lateral (select sift._language(d.language) as lang) l
    ), a as (
        -- Another translation of a kept page (sift._finalize's a).
        select p.*,
               p.page is not null
               and p.doc <> pg_catalog.first_value(p.doc) over (partition by p.page
                                                               order by p.base * knobs.boost desc, p.id) as dup
        from p
    )
    -- Greedy in score order within the per-document cap, then backfilled
    -- past it: sorted by (beyond the cap, score); the kept ones' text.
    select z.id, z.dr, z.lr, z.doc, z.lang, z.pool_rank, z.base, z.lf, z.fr,
           c.ordinal, c.content, c.context, c.section_id, c.token_count, d.source_uri, d.title, d.metadata
    from (select y.*, 1::double precision as lf,
                 (pg_catalog.row_number() over (order by y.late, y.i))::integer as fr
          from (select a.*, coalesce(knobs.per_document_cap, 0) > 0
                            and pg_catalog.row_number() over (partition by a.doc order by a.i)
                                > coalesce(knobs.per_document_cap, 0) as late
                from a where not a.dup) y
          order by y.late, y.i
          limit match_count) z
    join sift.chunks c on c.chunk_id = z.id
    join sift.documents d on d.document_id = z.doc
$$;
comment on function sift._plain_backfill(sift.knob_set, integer, bigint[], bigint[], bigint[], double precision[],
    integer[]) is
    'Internal: sift._plain_hits'' kept hits when its first match_count places are not the answer: the '
    'whole pool (given in place order) with one translation a page and the per-document cap with '
    'backfill, each kept hit with its text.';


create or replace function sift._plain_hits(
    col             sift.collections,
    knobs           sift.knob_set,
    match_count     integer,
    dense_ids       bigint[],
    dense_raw       double precision[],
    lexical_ids     bigint[],
    lexical_raw     double precision[],
    w               double precision,
    legs            text[],
    lexical_query   text,
    lexical_configs text[],
    lexical_exact   boolean,
    space_name      text,
    reranker        text)
returns setof sift.hit
language sql stable security invoker
set search_path = pg_catalog, pg_temp
-- Planned once a session (PostgreSQL 18 caches SQL functions' plans): the
-- arrays are tens of ids, never worth a plan of their own.
set plan_cache_mode = force_generic_plan
-- leg_details turns floats into JSON here: a session's extra_float_digits
-- (one a pooler left behind) must not cut them.
set extra_float_digits = 1
rows 10
as $$
    -- Not split: one statement, planned once a session (force_generic_plan),
    -- is what makes the plain path cheap: the fusion, finalize and the hits'
    -- text in one plan and one execution after the legs, and the rest of the
    -- pool never read when the first match_count places settle it. A function
    -- per stage would be a call, a plan and rows handed over each, on the path
    -- every default search takes.
    -- Fusion, finalize and the hits' text in one statement, for the stages a
    -- default search has (per-document cap, one translation, boost,
    -- lost-in-the-middle): nothing rescales one chunk's score against
    -- another's, so the pool's order is the ranking's and no expression of
    -- an idle stage is built (the plan's expressions are compiled on every
    -- execution; those of recency, the language weight and the threshold
    -- cost a default search ~60 us: sift._plain_hits_adjusted has them).
    -- Every expression is the staged pipeline's own (sift._fuse's rrf, which
    -- is sift.rrf's; sift._finalize, sift._hits): a chunk scores the same
    -- float and lands in the same place on both paths.
    with f as materialized (
        -- Weighted RRF (sift.rrf, sift._fuse; subnormal weights count as 0). Materialized:
        -- the chunks are then looked up by a plain column, which row-level
        -- security lets into the index (through the full join's coalesce it
        -- is no index condition under a policy, and the pool was hashed
        -- against a scan of every chunk of the tenant).
        select coalesce(d.id, l.id) as id, d.r as dr, l.r as lr,
               coalesce(case when w < 2.2250738585072014e-308 then 0 else w end / (knobs.rrf_k + d.r), 0)
               + coalesce(case when 1 - w < 2.2250738585072014e-308 then 0 else 1 - w end
                          / (knobs.rrf_k + l.r), 0) as s
        from pg_catalog.unnest(dense_ids) with ordinality as d(id, r)
        full join pg_catalog.unnest(lexical_ids) with ordinality as l(id, r) on l.id = d.id
    ), r as materialized (
        -- The pool ranked without a row read: by fused score (pool_rank) and
        -- by place (i: sift._finalize's, where a score under 1e-200 counts as
        -- 0: its adjusted score, base x boost, which two bases a float step
        -- apart may share).
        select b.*, (pg_catalog.row_number() over (order by b.s desc, b.id))::integer as pool_rank,
               (pg_catalog.row_number() over (order by b.base * knobs.boost desc, b.id))::integer as i
        from (select f.*, case when f.s < 1e-200 then 0 else f.s end as base from f) b
    ), t as materialized (
        -- The first match_count places, each chunk with its document (the
        -- cap) and page (one translation). A chunk's place, whether it is
        -- beyond the cap and whether it is another translation of a better
        -- one's page are decided by the chunks above it: when none of these
        -- is cut, they are the answer whatever the rest of the pool holds,
        -- and the rest is never read (a default search's pool is 40-80
        -- chunks for 10 hits).
        -- Their text is read here too, once.
        select r.*, c.document_id as doc, l.lang,
               case when knobs.one_translation then sift._page_key(d.source_uri, d.metadata, l.lang) end as page,
               c.ordinal, c.content, c.context, c.section_id, c.token_count, d.source_uri, d.title, d.metadata
        from r
        join sift.chunks c on c.chunk_id = r.id
        join sift.documents d on d.document_id = c.document_id
        cross join lateral (select sift._language(d.language) as lang) l
        where r.i <= match_count
    ), settled as (
        -- (Every one of them read: a chunk gone would leave a gap in the places.)
        select (select pg_catalog.count(*) from t) = (select pg_catalog.count(*) from r where r.i <= match_count)
               and not exists (select 1 from t where t.page is not null
                           group by t.page having pg_catalog.count(distinct t.doc) > 1)
               and not (coalesce(knobs.per_document_cap, 0) > 0
                        and exists (select 1 from t group by t.doc
                                    having pg_catalog.count(*) > coalesce(knobs.per_document_cap, 0))) as yes
    ), sel as materialized (
        select t.id, t.dr, t.lr, t.doc, t.lang, t.pool_rank, t.base, 1::double precision as lf, t.i as fr,
               t.ordinal, t.content, t.context, t.section_id, t.token_count, t.source_uri, t.title, t.metadata
        from t
        where (select settled.yes from settled)
        union all
        -- Otherwise the whole pool, capped and backfilled (sift._plain_backfill;
        -- its own function, so that a settled search never initialises its
        -- plan: it is called only when its arm runs).
        select b.*
        from (select pg_catalog.array_agg(r.id order by r.i) as ids, pg_catalog.array_agg(r.dr order by r.i) as drs,
                     pg_catalog.array_agg(r.lr order by r.i) as lrs, pg_catalog.array_agg(r.base order by r.i) as bases,
                     pg_catalog.array_agg(r.pool_rank order by r.i) as pool_ranks
              from r) pool
        cross join lateral sift._plain_backfill(knobs, match_count, pool.ids, pool.drs, pool.lrs, pool.bases,
                                                pool.pool_ranks) b
        where not (select settled.yes from settled)
    )
    select sel.fr,
           case when not coalesce(knobs.lost_in_the_middle, false) then sel.fr
                when sel.fr % 2 = 1 then (sel.fr + 1) / 2
                else (select pg_catalog.count(*) from sel)::integer - sel.fr / 2 + 1 end,
           sel.id, sel.doc, col.name::text, sel.source_uri, sel.title, sel.ordinal, sel.content, sel.context,
           sel.metadata, sel.base * knobs.boost, sel.base, sel.pool_rank,
           case when sel.dr is not null and sel.lr is not null then 'both'
                when sel.dr is not null then 'dense' else 'lexical' end,
           sel.dr, dense_raw[sel.dr], sel.lr, lexical_raw[sel.lr], coalesce(legs, '{}'), lexical_query,
           1::double precision, knobs.boost::double precision, false, 0, null::text,
           reranker, null::text,
           sel.section_id, false, array[sel.id], array[sel.id], sel.token_count, null::bigint[], null::text,
           null::bigint, sel.lang, sel.lf, lexical_configs, null::text, null::text, null::text,
           case when 'dense' = any (legs) then space_name end,
           case when 'dense' = any (legs) then 0 end,
           lexical_exact, null::double precision,
           pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
               'dense', case when sel.dr is not null then pg_catalog.jsonb_build_object(
                   'rank', sel.dr, 'raw', dense_raw[sel.dr], 'weight', w,
                   'contribution', w / (knobs.rrf_k + sel.dr), 'question', null::smallint) end,
               'lexical', case when sel.lr is not null then pg_catalog.jsonb_build_object(
                   'rank', sel.lr, 'raw', lexical_raw[sel.lr], 'weight', 1 - w,
                   'contribution', (1 - w) / (knobs.rrf_k + sel.lr)) end))
    from sel
    order by 2, 3
$$;
comment on function sift._plain_hits(sift.collections, sift.knob_set, integer, bigint[], double precision[],
    bigint[], double precision[], double precision, text[], text, text[], boolean, text, text) is
    'Internal: a plain search''s hits from its legs'' ranked ids and raw scores when no stage rescales '
    'a score (recency, language weight and threshold off: sift._plain_hits_adjusted): weighted RRF, '
    'per-document cap with backfill, one translation, boost, lost-in-the-middle and each hit''s text, '
    'in one statement.';


create or replace function sift._plain_hits_adjusted(
    col             sift.collections,
    knobs           sift.knob_set,
    match_count     integer,
    dense_ids       bigint[],
    dense_raw       double precision[],
    lexical_ids     bigint[],
    lexical_raw     double precision[],
    w               double precision,
    legs            text[],
    lexical_query   text,
    lexical_configs text[],
    lexical_exact   boolean,
    space_name      text,
    reranker        text)
returns setof sift.hit
language sql stable security invoker
set search_path = pg_catalog, pg_temp
-- Planned once a session (PostgreSQL 18 caches SQL functions' plans): the
-- arrays are tens of ids, never worth a plan of their own.
set plan_cache_mode = force_generic_plan
-- leg_details turns floats into JSON here: a session's extra_float_digits
-- (one a pooler left behind) must not cut them.
set extra_float_digits = 1
rows 10
as $$
    -- Not split: one statement planned once a session, as sift._plain_hits
    -- (which says why); kept apart from it so that a search with none of
    -- these stages on never compiles their expressions.
    -- sift._plain_hits with the stages that rescale one chunk's score against
    -- another's: recency, the weight of another language than the question's
    -- and the score threshold (on the fused score, before the others).
    with f as materialized (
        -- Weighted RRF, materialized (sift._plain_hits says why).
        select coalesce(d.id, l.id) as id, d.r as dr, l.r as lr,
               coalesce(case when w < 2.2250738585072014e-308 then 0 else w end / (knobs.rrf_k + d.r), 0)
               + coalesce(case when 1 - w < 2.2250738585072014e-308 then 0 else 1 - w end
                          / (knobs.rrf_k + l.r), 0) as s
        from pg_catalog.unnest(dense_ids) with ordinality as d(id, r)
        full join pg_catalog.unnest(lexical_ids) with ordinality as l(id, r) on l.id = d.id
    ), p as materialized (
        -- The pool in fused order, each chunk with what the ranking knobs
        -- weigh: its document (the cap), language, page (one translation) and
        -- recency factor.
        select f.id, f.dr, f.lr, f.s, c.document_id as doc, l.lang,
               (pg_catalog.row_number() over (order by f.s desc, f.id))::integer as pool_rank,
               case when f.s < 1e-200 then 0 else f.s end as base,
               case when knobs.one_translation then sift._page_key(d.source_uri, d.metadata, l.lang) end as page,
               case when knobs.query_language is null or l.lang is null
                         or l.lang = sift._language(knobs.query_language) then 1
                    else coalesce(knobs.other_language_weight::double precision, 1) end as lf,
               -- recency_bias moves the weight toward the ceiling; it cannot turn on
               -- recency where there is no field or the weight is 0.
               case when knobs.recency_field is not null and knobs.recency_weight <> 0
                    then sift.recency_factor(
                             sift._recency_date(knobs.recency_field, d.created_at, d.modified_at, d.uploaded_at,
                                                d.metadata),
                             pg_catalog.now(), knobs.recency_half_life,
                             knobs.recency_weight + coalesce(knobs.recency_bias, 0)
                             * (knobs.recency_ceiling - knobs.recency_weight)) end as factor
        from f
        join sift.chunks c on c.chunk_id = f.id
        join sift.documents d on d.document_id = c.document_id
        cross join lateral (select sift._language(d.language) as lang) l
    ), a as (
        -- Scored: base x recency x boost x language; relevant enough for the
        -- threshold (on the fused score; one calibrated for a reranker is
        -- not applied to fused scores); another translation of a kept page
        -- (sift._finalize's a0, a).
        select x.*,
               x.page is not null
               and x.doc <> pg_catalog.first_value(x.doc) over (
                       partition by x.page
                       order by x.thr_ok desc, coalesce(x.lang = sift._language(knobs.query_language), false) desc,
                                x.adjusted desc, x.id) as dup,
               (pg_catalog.row_number() over (order by x.adjusted desc, x.id))::integer as i
        from (select p.*, p.base * coalesce(p.factor, 1) * knobs.boost * p.lf as adjusted,
                     knobs.threshold_reranker is not null or knobs.score_threshold is null
                     or p.base >= knobs.score_threshold as thr_ok
              from p) x
    ), sel as materialized (
        -- Greedy in score order within the per-document cap, then backfilled
        -- past it: sorted by (beyond the cap, score).
        select y.*, (pg_catalog.row_number() over (order by y.late, y.i))::integer as fr
        from (select a.*, coalesce(knobs.per_document_cap, 0) > 0
                          and pg_catalog.row_number() over (partition by a.doc order by a.i)
                              > coalesce(knobs.per_document_cap, 0) as late
              from a where a.thr_ok and not a.dup) y
        order by y.late, y.i
        limit match_count
    )
    select sel.fr,
           case when not coalesce(knobs.lost_in_the_middle, false) then sel.fr
                when sel.fr % 2 = 1 then (sel.fr + 1) / 2
                else (select pg_catalog.count(*) from sel)::integer - sel.fr / 2 + 1 end,
           sel.id, sel.doc, col.name::text, d.source_uri, d.title, c.ordinal, c.content, c.context,
           d.metadata, sel.adjusted, sel.base, sel.pool_rank,
           case when sel.dr is not null and sel.lr is not null then 'both'
                when sel.dr is not null then 'dense' else 'lexical' end,
           sel.dr, dense_raw[sel.dr], sel.lr, lexical_raw[sel.lr], coalesce(legs, '{}'), lexical_query,
           coalesce(sel.factor, 1), knobs.boost::double precision,
           knobs.threshold_reranker is null and knobs.score_threshold is not null,
           (select pg_catalog.count(*) from a where not a.thr_ok)::integer,
           case when knobs.score_threshold is not null and knobs.threshold_reranker is not null
                then pg_catalog.format('score threshold %s of collection "%s" was calibrated for reranker "%s"',
                                       knobs.score_threshold, col.name, knobs.threshold_reranker)
                     || ', but no reranker scored this pool (fused scores): not applied' end,
           reranker, null::text,
           c.section_id, false, array[sel.id], array[sel.id], c.token_count, null::bigint[], null::text,
           null::bigint, sel.lang, sel.lf, lexical_configs, null::text, null::text, null::text,
           case when 'dense' = any (legs) then space_name end,
           case when 'dense' = any (legs) then 0 end,
           lexical_exact, null::double precision,
           pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
               'dense', case when sel.dr is not null then pg_catalog.jsonb_build_object(
                   'rank', sel.dr, 'raw', dense_raw[sel.dr], 'weight', w,
                   'contribution', w / (knobs.rrf_k + sel.dr), 'question', null::smallint) end,
               'lexical', case when sel.lr is not null then pg_catalog.jsonb_build_object(
                   'rank', sel.lr, 'raw', lexical_raw[sel.lr], 'weight', 1 - w,
                   'contribution', (1 - w) / (knobs.rrf_k + sel.lr)) end))
    from sel
    join sift.chunks c on c.chunk_id = sel.id
    join sift.documents d on d.document_id = sel.doc
    order by 2, 3
$$;
comment on function sift._plain_hits_adjusted(sift.collections, sift.knob_set, integer, bigint[],
    double precision[], bigint[], double precision[], double precision, text[], text, text[], boolean, text,
    text) is
    'Internal: sift._plain_hits with recency, the weight of another language than the question''s and '
    'the score threshold: each chunk''s score rescaled before the cap, the translations and the order.';


create or replace function sift._plain_legs(
    col             sift.collections,
    knobs           sift.knob_set,
    query_text      text,
    query_embedding @extschema:vector@.vector,
    match_count     integer,
    filter          jsonb,
    space           sift.vector_spaces,
    exact           boolean,
    iterative       boolean,
    out dense_ids     bigint[],
    out dense_raw     double precision[],
    out lexical_ids   bigint[],
    out lexical_raw   double precision[],
    out w             double precision,
    out legs          text[],
    out lexical_query tsquery,
    out configs       text[],
    out lexical_exact boolean)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    n     integer := greatest(knobs.fetch_k, match_count);
    terms text[];
    lift  tsquery;
    sink  tsquery;
begin
    -- The legs sift._legs would run, each once for its top n (fetch_k, at
    -- least match_count): the text is parsed only when the lexical leg can
    -- run (hybrid on, or no embedding).
    legs := '{}';
    w := knobs.dense_weight;
    if (knobs.hybrid or query_embedding is null) and query_text <> '' then
        select x.legs, x.lexical_query, x.lexical_terms, x.lift, x.sink, x.configs
        into legs, lexical_query, terms, lift, sink, configs
        from sift._legs(col, knobs, query_text, query_embedding is not null) x;
    elsif query_embedding is not null then
        legs := array['dense'];
    end if;
    if not ('lexical' = any (legs)) then w := 1; end if;
    if not ('dense' = any (legs)) then w := 0; end if;

    if 'dense' = any (legs) then
        select d.ids, d.dists into dense_ids, dense_raw
        from sift._dense_ids(array[col.collection_id], space.dimensions, space.distance, query_embedding,
                                 sift.filter_path(filter), n, _plain_legs.exact,
                                 case when space.builtin then null else space.space_id end,
                                 space.dense_precision = 'half',
                                 sift._space_own_index(space),
                                 knobs.hnsw_ef_search, iterative) d;
    end if;
    if 'lexical' = any (legs) then
        select x.ids, x.raws, x.exact into lexical_ids, lexical_raw, lexical_exact
        from sift._lexical_ids(col, knobs, lexical_query, terms, filter, n, lift, sink) x;
    end if;
end;
$$;
comment on function sift._plain_legs(sift.collections, sift.knob_set, text, @extschema:vector@.vector, integer,
    jsonb, sift.vector_spaces, boolean, boolean) is
    'Internal: a plain search''s legs (sift._plain_plan gives space, exact and iterative), each once for '
    'its top max(fetch_k, match_count): their ranked ids and raw scores, the dense weight fusion uses '
    '(1 or 0 when one leg ran alone), the legs run, the lexical query and configurations, and whether '
    'the lexical top n is proven.';


create or replace function sift._plain_plan(col sift.collections, knobs sift.knob_set, dense boolean)
returns table (space sift.vector_spaces, exact boolean, iterative boolean)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Plain: weighted RRF of the two legs in the collection's active space,
    -- with no stage that needs a loop or more text (MMR, parent_return,
    -- neighbours, snippets) and no question vectors to search beside the
    -- chunks'. Then the dense leg's space, and when a dense leg can run
    -- (dense: the search has an embedding) whether it scans exactly
    -- (sift._dense_exact) and whether pgvector walks iteratively: a lexical
    -- search does not look them up (null and false). No row otherwise: the
    -- staged pipeline runs.
    select s,
           case when dense then
               sift._dense_exact(array[col.collection_id], knobs.exact_search_limit,
                                 case when not sift._space_dedicated(s) then sift._space_index_name(s) end) end,
           case when dense then sift._pgvector_has_iterative_scan() else false end
    from sift.vector_spaces s
    where s.collection_id = col.collection_id and s.active
      and knobs.fusion = 'rrf' and knobs.dense_space is null and knobs.mmr_lambda is null
      and knobs.parent_return = 'child' and coalesce(knobs.neighbours, 0) = 0 and knobs.snippets is null
      and not exists (select 1 from sift.question_vectors q where q.collection_id = col.collection_id)
$$;
comment on function sift._plain_plan(sift.collections, sift.knob_set, boolean) is
    'Internal: whether a search of one collection is plain (sift._plain_legs, then sift._plain_hits) '
    'and, when it is, its dense leg''s space and, when it has an embedding (dense), whether that leg '
    'scans exactly and whether pgvector walks iteratively; no row when a stage it uses needs the '
    'staged pipeline.';


create or replace function sift._plain_ready(collection text, query_embedding @extschema:vector@.vector,
                                             match_count integer, knobs jsonb default null)
returns table (col sift.collections, knobs sift.knob_set, space sift.vector_spaces, exact boolean,
               iterative boolean)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The most common call (one collection by name, no time limit, valid
    -- arguments, no knob in the call or only switches: true or false for a
    -- boolean knob a call may set, such as {"hybrid": false}) looked up and
    -- checked in one statement: the collection of the current tenant
    -- (sift._collection), its resolved knobs kept on its row with the
    -- switches cast onto them (sift._resolve_knobs: a boolean has no ceiling
    -- and no rule across knobs), the checks of sift._check_query that such a
    -- call can fail (the vector's size and a zero vector under cosine,
    -- match_count and its ceiling; the filter is compiled by the caller), and
    -- sift._plain_plan. No row when any of it does not hold: the caller then
    -- takes the full path, which says why (or searches through every stage).
    -- A time limit is left to that path too, since it arms one
    -- (sift._resolve_all), as is a deadline a session left set, which it
    -- clears.
    select c, k.knobs, p.space, p.exact, p.iterative
    from (select coalesce(_plain_ready.knobs, '{}') as given,
                 case when pg_catalog.jsonb_typeof(_plain_ready.knobs) is distinct from 'object' then false
                      else not exists (
                          select 1
                          from pg_catalog.jsonb_each(_plain_ready.knobs) e
                          left join sift.knob_defs d
                                 on d.name = e.key and d.type = 'pg_catalog.bool'::pg_catalog.regtype
                                and d.scope in ('call', 'both')
                          where d.name is null or pg_catalog.jsonb_typeof(e.value) <> 'boolean') end as switches) g
    join sift.collections c on g.given = '{}' or g.switches
    cross join lateral (
        select case when g.given = '{}' then c.resolved_knobs
                    when g.switches then pg_catalog.jsonb_populate_record(c.resolved_knobs, g.given) end as knobs) k
    cross join lateral sift._plain_plan(c, k.knobs, query_embedding is not null) p
    where c.tenant = sift.current_tenant() and c.name = _plain_ready.collection
      and pg_catalog.length(_plain_ready.collection) <= 128
      and c.resolved_from is not distinct from c.knobs
      and c.ceilings -> 'call_time_limit' is null
      and coalesce(pg_catalog.current_setting('pgsift.deadline', true), '') = ''
      and _plain_ready.match_count between 0 and 1000
      and (c.ceilings -> 'match_count' is null
           or _plain_ready.match_count <= (c.ceilings ->> 'match_count')::integer)
      and (query_embedding is null
           or (@extschema:vector@.vector_dims(query_embedding) = c.embedding_dims
               and not (c.distance = 'cosine' and @extschema:vector@.vector_norm(query_embedding) = 0)))
$$;
comment on function sift._plain_ready(text, @extschema:vector@.vector, integer, jsonb) is
    'Internal: for a call of sift.search naming one collection with no knob or only switches (true or '
    'false for boolean knobs a call may set), the collection, its knobs and sift._plain_plan''s row, '
    'when the arguments pass every check and the search is plain; no row otherwise (the full path '
    'then checks, raises or stages).';
