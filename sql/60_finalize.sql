-- Finalize: the ranking knobs applied to a candidate pool that retrieval (or
-- a reranker) already ordered. Recency and boost rescale the scores, the
-- score threshold drops what is not relevant enough, the per-document cap
-- and MMR pick the top match_count, and lost-in-the-middle orders them for
-- presentation. sift.search runs it on sift.candidates in one statement;
-- sift.finalize runs it on any pool given as chunk ids (and rerank scores).
-- In: the collections, their resolved knobs, the pool (ids in pool order and
-- base scores), match_count and the reranker that scored it, if one did. Out:
-- each candidate with its adjusted score, its place, whether it is kept and
-- why not (sql/58_recency_language.sql has what it reads of each document).

create or replace function sift._merge_pool(
    cols   sift.collections[],
    knobs  sift.knob_set[],
    ids    bigint[],
    scores double precision[])
returns table (chunk_id bigint, score double precision, pool_rank integer, merged_into bigint, merged boolean)
language sql stable security invoker
rows 50
set search_path = pg_catalog, pg_temp
-- Planned once a session (PostgreSQL 18 caches SQL functions' plans; a custom plan
-- per call re-planned the whole body). Leaf functions only: the setting holds for
-- whatever a function calls.
set plan_cache_mode = force_generic_plan
as $$
    -- parent_return on a pool (distinct ids in pool order): the passages of a
    -- section that merges fold into its first one in the pool (the section's
    -- representative: its place, its embedding for MMR), which takes the best
    -- score among them. parent: every section merges; auto: a section merges
    -- when the share of its passages in the pool reaches merge_threshold.
    -- merged says the representative now stands for more text than itself.
    -- Materialized, as every per-collection row below: inlined, each
    -- (knobs[i]).x would copy the whole knob set out of its array once per
    -- chunk (~20 us a chunk).
    with e as materialized (
        select (cols[i]).collection_id as cid, (knobs[i]).parent_return::text as pr,
               (knobs[i]).merge_threshold::double precision as mt
        from pg_catalog.generate_subscripts(cols, 1) as i
    ), p as materialized (
        select u.id, u.s, u.o::integer as o, k.section_id as sec, e.pr, e.mt
        from unnest(ids, scores) with ordinality as u(id, s, o)
        join sift.chunks k on k.chunk_id = u.id
        join e on e.cid = k.collection_id
    ), g as (
        select p.sec, min(p.pr) as pr, min(p.mt) as mt, count(*) as n_matched,
               (pg_catalog.array_agg(p.id order by p.o))[1] as rep, max(p.s) as best, min(p.o) as first_o
        from p
        where p.sec is not null and p.pr <> 'child'
        group by p.sec
    ), m as (
        select g.*, t.n_total
        from g
        cross join lateral (select count(*) as n_total from sift.chunks c where c.section_id = g.sec) t
        where g.pr = 'parent' or g.n_matched::double precision / t.n_total >= g.mt
    )
    select p.id, coalesce(m.best, p.s), coalesce(m.first_o, p.o),
           case when m.rep is not null and p.id <> m.rep then m.rep end,
           m.rep is not null and p.id = m.rep and m.n_total > 1
    from p
    left join m on m.sec = p.sec
    order by 3, 1
$$;
comment on function sift._merge_pool(sift.collections[], sift.knob_set[], bigint[], double precision[]) is
    'Internal: parent_return on a pool: each chunk with the pool rank and score it ranks with, and, '
    'when its section merged, the representative it folded into (merged_into) or whether it is the '
    'representative of a merged section (merged). Chunks without a section never merge.';


create or replace function sift._finalize(
    cols            sift.collections[],
    knobs           sift.knob_set[],
    ids             bigint[],
    scores          double precision[],
    match_count     integer,
    scored_by       text,
    every_candidate boolean)
returns table (
    chunk_id          bigint,
    document_id       bigint,
    collection_name   text,
    pool_rank         integer,
    base_score        double precision,
    recency_date      timestamptz,
    recency_factor    double precision,
    boost             double precision,
    score             double precision,
    cap_status        text,
    mmr_similarity    double precision,
    mmr_penalty       double precision,
    final_rank        integer,
    "position"        integer,
    kept              boolean,
    cut_by            text,
    reason            text,
    threshold_applied boolean,
    below_threshold   integer,
    threshold_skipped text,
    merged            boolean,
    matched_chunk_ids bigint[],
    merged_into       bigint,
    language          text,
    language_factor   double precision)
language plpgsql stable security invoker
-- A pool is tens of rows, not the 1,000 a function is guessed at: joined by
-- key to chunks and documents, never hashed against every row of them.
rows 50
set search_path = pg_catalog, pg_temp
-- Every query here takes arrays; a custom plan per call costs more than it saves.
set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_variable
-- Not split: its steps hand each other the pool as fourteen arrays in adjusted
-- order (p_*) and the selection (sel, sel_ph, sel_sim and MMR's sim), PL/pgSQL
-- variables; the MMR picks carry their state from one pick to the next; and
-- the statement at the end decides every chunk's cut_by and reason from all
-- of them at once. One body is what search, explain and finalize share, so
-- they always agree; a function per step would take and give back those
-- arrays on every staged search.
declare
    cap      integer;
    lam      double precision;
    thr      double precision;
    skipped  text;
    litm     boolean;
    -- The pool, best adjusted score first (ties: smaller chunk id); every
    -- index below is a place in this order.
    p_id     bigint[];
    p_doc    bigint[];
    p_col    text[];
    p_pool   integer[];
    p_base   double precision[];
    p_date   timestamptz[];
    p_factor double precision[];
    p_boost  double precision[];
    p_score  double precision[];
    p_ok     boolean[];
    p_thr    boolean[];   -- relevant enough for the score threshold
    p_dup    boolean[];   -- another translation of its page is kept
    p_lang   text[];
    p_lf     double precision[];
    qlang    text;
    one_tr   boolean;
    n_below  integer;
    -- The selection: indices in the order chosen, the phase that chose each
    -- (1 within the per-document cap, 2 backfilled past it) and, for MMR,
    -- its largest similarity to the chunks chosen before it.
    sel      integer[] := '{}';
    sel_ph   integer[] := '{}';
    sel_sim  double precision[] := '{}';
    sim      double precision[];   -- MMR: largest similarity to any chosen chunk (null: none yet)
    rel      double precision[];
    embs     @extschema:vector@.vector[];
    alive    boolean[];
    full_docs bigint[] := '{}';
    phase    integer := 1;
    pick     integer;
    picked   @extschema:vector@.vector;
    lo       double precision;
    hi       double precision;
    -- parent_return: the representatives of merged sections, and the pool's
    -- chunks folded into them (with their pool place and own score).
    merged_ids bigint[] := '{}';
    f_id     bigint[] := '{}';
    f_into   bigint[] := '{}';
    f_o      integer[] := '{}';
    f_s      double precision[] := '{}';
begin
    if exists (select 1 from pg_catalog.unnest(knobs) as k where k.parent_return <> 'child') then
        select array_agg(m.chunk_id order by m.pool_rank, m.chunk_id) filter (where m.merged_into is null),
               array_agg(m.score order by m.pool_rank, m.chunk_id) filter (where m.merged_into is null),
               coalesce(array_agg(m.chunk_id) filter (where m.merged), '{}'),
               coalesce(array_agg(m.chunk_id order by u.o) filter (where m.merged_into is not null), '{}'),
               coalesce(array_agg(m.merged_into order by u.o) filter (where m.merged_into is not null), '{}'),
               coalesce(array_agg(u.o::integer order by u.o) filter (where m.merged_into is not null), '{}'),
               coalesce(array_agg(u.s order by u.o) filter (where m.merged_into is not null), '{}')
        into ids, scores, merged_ids, f_id, f_into, f_o, f_s
        from sift._merge_pool(cols, knobs, ids, scores) m
        join unnest(ids, scores) with ordinality as u(id, s, o) on u.id = m.chunk_id;
    end if;

    -- Several collections: the strictest setting wins (smallest non-zero
    -- cap, smallest lambda, highest threshold); lost-in-the-middle if any
    -- asks for it. A value given in the call is every collection's.
    select coalesce(min(nullif((knobs[i]).per_document_cap, 0)), 0),
           min((knobs[i]).mmr_lambda),
           coalesce(bool_or((knobs[i]).lost_in_the_middle), false),
           sift._language(min((knobs[i]).query_language)),
           coalesce(bool_or((knobs[i]).one_translation), false)
    into cap, lam, litm, qlang, one_tr
    from generate_subscripts(knobs, 1) as i;
    -- A threshold is on the scale of whatever scored the pool: one calibrated
    -- for a reranker applies only to that reranker's scores.
    select max((knobs[i]).score_threshold) filter (
               where (knobs[i]).threshold_reranker is null or (knobs[i]).threshold_reranker = scored_by),
           string_agg(format('score threshold %s of collection "%s" was calibrated for reranker "%s"',
                             (knobs[i]).score_threshold, (cols[i]).name, (knobs[i]).threshold_reranker), '; '
                      order by i) filter (
               where (knobs[i]).score_threshold is not null
                 and (knobs[i]).threshold_reranker is distinct from scored_by
                 and (knobs[i]).threshold_reranker is not null)
    into thr, skipped
    from generate_subscripts(knobs, 1) as i;
    if skipped is not null then
        skipped := skipped || case when scored_by is null
                                   then ', but no reranker scored this pool (fused scores): not applied'
                                   else format(', but reranker "%s" scored this pool: not applied', scored_by) end;
    end if;

    -- Recency and boost, per chunk with its own collection's settings (c is
    -- one row per collection, materialized so the knobs are read once each).
    with c as materialized (
        select (cols[i]).collection_id as cid, (cols[i]).name::text as cname,
               (knobs[i]).boost::double precision as boost,
               (knobs[i]).recency_field::text as field,
               (knobs[i]).recency_half_life::interval as half_life,
               (knobs[i]).recency_weight::double precision as w,
               (knobs[i]).recency_ceiling::double precision as ceiling,
               (knobs[i]).recency_bias::double precision as bias,
               coalesce((knobs[i]).other_language_weight::double precision, 1) as lw
        from generate_subscripts(cols, 1) as i
    ), e as (
        -- recency_bias moves the weight toward the ceiling; it cannot turn on
        -- recency where there is no field or the weight is 0.
        select c.cid, c.cname, c.boost, c.field, c.half_life, c.lw,
               case when c.field is null or c.w = 0 then null
                    else c.w + coalesce(c.bias, 0) * (c.ceiling - c.w) end as weight
        from c
    ), u as (
        select u.id, u.s, u.o::integer as o
        from unnest(ids, scores) with ordinality as u(id, s, o)
    ), r as materialized (
        -- Materialized: each date is parsed once, and recency_factor below
        -- inlines on plain columns.
        select u.id, k.document_id as doc, e.cname, u.o,
               -- scores this small count as 0: a product would underflow to an error
               case when u.s < 1e-200 then 0 else u.s end as base,
               e.boost, e.weight, e.half_life, l.lang,
               -- Another language than the question's weighs less.
               case when qlang is null or l.lang is null or l.lang = qlang then 1 else e.lw end as lf,
               case when one_tr then sift._page_key(d.source_uri, d.metadata, l.lang) end as page,
               case when e.weight is not null
                    then sift._recency_date(e.field, d.created_at, d.modified_at,
                                            d.uploaded_at, d.metadata) end as dt
        from u
        join sift.chunks k on k.chunk_id = u.id
        join e on e.cid = k.collection_id
        join sift.documents d on d.document_id = k.document_id
        cross join lateral (select sift._language(d.language) as lang) l
    ), f as (
        select r.*, case when r.weight is not null
                         then sift.recency_factor(r.dt, pg_catalog.now(), r.half_life, r.weight) end as factor
        from r
    ), a0 as (
        select f.*, f.base * coalesce(f.factor, 1) * f.boost * f.lf as adjusted,
               -- The threshold is on relevance (the fused or rerank score), before
               -- recency, boost and language: those reorder what is relevant enough.
               thr is null or f.base >= thr as thr_ok
        from f
    ), a as (
        -- One translation of a page: among those relevant enough for the
        -- threshold, the question's language when it was retrieved, else the
        -- best-scored document of the page.
        select a0.*,
               a0.page is not null
               and a0.doc <> first_value(a0.doc) over (
                       partition by a0.page
                       order by a0.thr_ok desc, coalesce(a0.lang = qlang, false) desc, a0.adjusted desc,
                                a0.id) as dup
        from a0
    )
    select array_agg(a.id order by a.adjusted desc, a.id),
           array_agg(a.doc order by a.adjusted desc, a.id),
           array_agg(a.cname order by a.adjusted desc, a.id),
           array_agg(a.o order by a.adjusted desc, a.id),
           array_agg(a.base order by a.adjusted desc, a.id),
           array_agg(a.dt order by a.adjusted desc, a.id),
           array_agg(a.factor order by a.adjusted desc, a.id),
           array_agg(a.boost order by a.adjusted desc, a.id),
           array_agg(a.adjusted order by a.adjusted desc, a.id),
           array_agg(a.thr_ok and not a.dup order by a.adjusted desc, a.id),
           array_agg(a.thr_ok order by a.adjusted desc, a.id),
           array_agg(a.dup order by a.adjusted desc, a.id),
           array_agg(a.lang order by a.adjusted desc, a.id),
           array_agg(a.lf order by a.adjusted desc, a.id)
    into p_id, p_doc, p_col, p_pool, p_base, p_date, p_factor, p_boost, p_score, p_ok, p_thr, p_dup, p_lang,
         p_lf
    from a;

    if p_id is null then
        return;   -- an empty pool
    end if;
    n_below := (select count(*) from pg_catalog.unnest(p_thr) as o where not o);

    if lam is null then
        -- Greedy in score order, skipping chunks of a document that already
        -- has cap chunks, then backfilling from the skipped ones in score
        -- order: the same as sorting by (beyond the cap, score).
        select coalesce(array_agg(s.i order by s.late, s.i), '{}'),
               coalesce(array_agg(case when s.late then 2 else 1 end order by s.late, s.i), '{}')
        into sel, sel_ph
        from (select x.i, cap > 0 and x.dr > cap as late
              from (select u.i::integer as i,
                           row_number() over (partition by u.d order by u.i) as dr
                    from unnest(p_doc, p_ok) with ordinality as u(d, ok, i)
                    where u.ok) x
              order by 2, 1
              limit match_count) s;
    else
        -- MMR: pick the chunk maximising lam * relevance - (1 - lam) * its
        -- largest cosine similarity to the chunks already picked, relevance
        -- being the score rescaled to [0, 1] over the pool (ties: pool order).
        -- Documents at the cap wait until nothing else is left (phase 2).
        select min(s), max(s) into lo, hi
        from unnest(p_score, p_ok) as u(s, ok) where u.ok;
        rel := array(select case when hi > lo then (u.s - lo) / (hi - lo) else 1 end
                     from pg_catalog.unnest(p_score) with ordinality as u(s, i) order by u.i);
        -- Similarity in each chunk's active vector space (an added one's
        -- vectors are in sift.chunk_vectors).
        -- (A chunk missing from its active space has no vector: similarity 0.)
        embs := array(select case when s.space_id is null then k.embedding else v.embedding end
                      from pg_catalog.unnest(p_id) with ordinality as u(id, i)
                      join sift.chunks k on k.chunk_id = u.id
                      left join sift.vector_spaces s
                             on s.collection_id = k.collection_id and s.active and not s.builtin
                      left join lateral (select x.embedding from sift.chunk_vectors x
                                         where x.space_id = s.space_id and x.chunk_id = k.chunk_id
                                         limit 1) v on true
                      order by u.i);
        sim := pg_catalog.array_fill(null::double precision, array[cardinality(p_id)]);
        alive := p_ok;
        while cardinality(sel) < match_count loop
            -- The tenant's call_time_limit, when one is armed (sift._check_deadline).
            if pg_catalog.current_setting('pgsift.deadline', true) <> '' then
                perform sift._check_deadline('mmr');
            end if;
            pick := (select u.i
                     from unnest(rel, sim, p_doc, alive) with ordinality as u(r, m, d, a, i)
                     where u.a and (phase = 2 or cap = 0 or u.d <> all (full_docs))
                     order by lam * u.r - (1 - lam) * coalesce(u.m, 0) desc, u.i
                     limit 1);
            if pick is null then
                exit when phase = 2 or cap = 0;
                phase := 2;
                continue;
            end if;
            sel := sel || pick;
            sel_ph := sel_ph || phase;
            sel_sim := sel_sim || coalesce(sim[pick], 0);
            alive[pick] := false;
            if phase = 1 and cap > 0
               and (select count(*) from pg_catalog.unnest(sel) as j where p_doc[j] = p_doc[pick]) >= cap then
                full_docs := full_docs || p_doc[pick];
            end if;
            picked := embs[pick];
            -- Cosine similarity (greatest ignores the null of "nothing chosen
            -- yet"); a zero vector's NaN counts as 0.
            sim := array(select greatest(u.m, coalesce(nullif(1 - (u.e operator(@extschema:vector@.<=>) picked),
                                                              'NaN'::double precision), 0))
                         from unnest(sim, embs) with ordinality as u(m, e, i)
                         order by u.i);
        end loop;
    end if;

    return query
    with u as (
        select *
        from unnest(p_id, p_doc, p_col, p_pool, p_base, p_date, p_factor, p_boost, p_score, p_ok, sim,
                    p_thr, p_dup, p_lang, p_lf)
             with ordinality as u(id, doc, cname, pool, base, dt, factor, boost, score, ok, msim, thr_ok, dup,
                                  lang, lf, i)
        -- search and finalize need only what is kept; explain wants every candidate.
        where every_candidate or u.i = any (sel)
    ), s as (
        select * from unnest(sel, sel_ph, sel_sim) with ordinality as s(i, ph, msim, fr)
    ), capped_docs as (
        -- Documents that reached the cap among the chunks picked within it.
        select u.doc from s join u on u.i = s.i
        where s.ph = 1 group by u.doc having count(*) >= cap
    ), o as (
        select u.*, s.fr::integer as fr, s.ph, coalesce(s.msim, u.msim) as sim_at,
               cap > 0 and u.ok and s.fr is null
                   and u.doc in (select c.doc from capped_docs c) as capped
        from u left join s on s.i = u.i
    ), w as (
        select o.*,
               case when o.fr is not null then null
                    when not o.thr_ok then 'score_threshold'
                    when o.dup then 'translation'
                    when o.capped then 'per_document_cap'
                    when lam is not null then 'mmr'
                    else 'match_count' end as cut
        from o
    )
    select w.id, w.doc, w.cname, w.pool, w.base, w.dt, coalesce(w.factor, 1), w.boost, w.score,
           case when cap = 0 or not w.ok then null
                when w.ph = 2 then 'backfilled'
                when w.capped then 'capped'
                else 'kept' end,
           case when lam is not null and w.ok then w.sim_at end,
           case when lam is not null and w.ok then (1 - lam) * w.sim_at end,
           w.fr,
           case when w.fr is null then null
                when not litm then w.fr
                when w.fr % 2 = 1 then (w.fr + 1) / 2
                else cardinality(sel) - w.fr / 2 + 1 end,
           w.fr is not null,
           w.cut,
           case w.cut
               when 'score_threshold' then
                   format('cut: score %s is below the score threshold %s', w.base, thr)
               when 'per_document_cap' then
                   format('cut: its document already has %s chunk(s) in the result (per_document_cap)', cap)
               when 'translation' then
                   'cut: another translation of its page is kept (one_translation)'
                   || case when qlang is not null then format(', in %s when retrieved', qlang) else '' end
               when 'mmr' then
                   format('cut: not among the %s MMR picks (similarity %s to a kept chunk)',
                          match_count, round(w.sim_at::numeric, 4))
               when 'match_count' then
                   format('cut: score rank %s is below match_count %s', w.i, match_count)
               else format('kept: rank %s of %s', w.fr, match_count)
                   || case when w.ph = 2
                           then format(', backfilled past the per-document cap of %s', cap) else '' end
                   || case when lam is not null
                           then format(', MMR penalty %s', round(((1 - lam) * w.sim_at)::numeric, 4))
                           else '' end
           end
           || case when w.factor is not null
                   then format('; recency x%s', round(w.factor::numeric, 4)) else '' end
           || case when w.boost <> 1 then format('; boost x%s', w.boost) else '' end
           || case when w.lf <> 1 then format('; language %s x%s', w.lang, w.lf) else '' end,
           thr is not null,
           n_below,
           skipped,
           w.id = any (merged_ids),
           array(select x.id
                 from (select w.id, 0 as o
                       union all
                       select f.id, f.o from unnest(f_id, f_into, f_o) as f(id, into_id, o)
                       where f.into_id = w.id) x
                 order by x.o, x.id),
           null::bigint,
           w.lang,
           w.lf
    from w
    order by 4, 1;
    if every_candidate and cardinality(f_id) > 0 then
        -- explain: the passages folded into a merged section, and which hit
        -- took them (a statement of its own: a search never starts its plan).
        return query
        select f.id, k.document_id, c.name::text, null::integer, f.s, null::timestamptz, 1::double precision,
               1::double precision, f.s, null::text, null::double precision, null::double precision,
               null::integer, null::integer, false, 'merged',
               format('merged: its section (%s) is returned as hit chunk %s (parent_return)', k.section_id, f.into_id),
               thr is not null, n_below, skipped, false, array[f.id], f.into_id, null::text, null::double precision
        from unnest(f_id, f_into, f_s) as f(id, into_id, s)
        join sift.chunks k on k.chunk_id = f.id
        join unnest(cols) as c on c.collection_id = k.collection_id
        order by 1;
    end if;
end;
$$;
comment on function sift._finalize(sift.collections[], sift.knob_set[], bigint[], double precision[],
    integer, text, boolean) is
    'Internal: the finalize stage on a pool (distinct ids in pool order, their base scores, and '
    'the reranker that scored them, if one did): every candidate with its recency factor, boost, '
    'adjusted score, threshold, cap and MMR decisions, final rank and presentation position, and '
    'why it was cut (every_candidate => false: only the kept ones), its language and the factor '
    'other_language_weight gave it; one_translation cuts the other translations of a page. Shared '
    'by search, explain and finalize, so they always agree.';
