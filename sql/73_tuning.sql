-- Tuning: a collection's fusion knobs chosen from its golden set, with k-fold
-- cross-validation. In: a collection, its golden set, k, folds, a grid of knob
-- objects (cells) and a seed. Out: each cell's mean nDCG@k, each fold's pick
-- (chosen on the other folds) and its score on the held-out fold, the
-- cross-validated gain over the collection's current knobs with a 95% paired
-- bootstrap interval, and the decision; the winner is stored on the collection
-- (store => true) only when the interval lies above 0. sift.tune_golden_set checks its
-- arguments and runs the steps, each an internal function: sift._tune_cells (the grid's
-- cells checked), sift._tune_scores (every cell on every question), sift._tune_folds (the
-- folds dealt and each fold's pick), sift._tune_interval (the paired bootstrap interval),
-- sift._tune_decision (the winner, stored or not) and sift._tune_report (the rows).


create or replace function sift._tuning_grid()
returns jsonb
language sql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- 29 cells: rrf over dense_weight x rrf_k, rrf with fetch_k 100 at the default
    -- weight, dbsf and convex over dense_weight x fetch_k.
    select pg_catalog.jsonb_agg(c.cell order by c.o, c.p)
    from (select 1 as o, w * 100 + r as p,
                 pg_catalog.jsonb_build_object('fusion', 'rrf', 'dense_weight', w, 'rrf_k', (array[3, 10, 60])[r],
                                               'fetch_k', 40) as cell
          from pg_catalog.unnest(array[0.3, 0.4, 0.5, 0.6, 0.7]::numeric[]) w,
               pg_catalog.generate_series(1, 3) r
          union all
          select 2, r, pg_catalog.jsonb_build_object('fusion', 'rrf', 'dense_weight', 0.5, 'rrf_k', r, 'fetch_k', 100)
          from pg_catalog.unnest(array[3, 60]) r
          union all
          select 3 + f.n, w * 1000 + fk,
                 pg_catalog.jsonb_build_object('fusion', f.kind, 'dense_weight', w, 'fetch_k', fk)
          from (values (0, 'dbsf'), (1, 'convex')) f(n, kind),
               pg_catalog.unnest(array[0.3, 0.5, 0.7]::numeric[]) w,
               pg_catalog.unnest(array[40, 100]) fk) c(o, p, cell)
$$;
comment on function sift._tuning_grid() is
    'Internal: the default grid of sift.tune_golden_set, 29 knob objects: fusion rrf with '
    'dense_weight 0.3-0.7 and rrf_k 3, 10, 60 (fetch_k 40), rrf with fetch_k 100 (dense_weight 0.5, '
    'rrf_k 3 and 60), and dbsf and convex with dense_weight 0.3, 0.5, 0.7 and fetch_k 40, 100.';


create or replace function sift._tune_cells(collection text, cells jsonb)
returns jsonb
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    checked jsonb := '[{}]';   -- cell 0: the collection's knobs as they are
    one     jsonb;
    i       integer;
    bad     text;
begin
    if pg_catalog.jsonb_typeof(cells) <> 'array' or pg_catalog.jsonb_array_length(cells) = 0
       or pg_catalog.jsonb_array_length(cells) > 200 then
        raise exception 'grid must be a JSON array of 1 to 200 knob objects, got %',
            case when pg_catalog.jsonb_typeof(cells) = 'array'
                 then pg_catalog.jsonb_array_length(cells)::text || ' element(s)'
                 else 'a JSON ' || pg_catalog.jsonb_typeof(cells) end
            using errcode = 'SF003';
    end if;
    for i in 1 .. pg_catalog.jsonb_array_length(cells) loop
        one := cells -> (i - 1);
        if pg_catalog.jsonb_typeof(one) <> 'object' or one = '{}'::jsonb then
            raise exception 'grid cell % must be a non-empty JSON object of knobs, got %', i, one
                using errcode = 'SF003';
        end if;
        -- A cell is what a search is called with and what would be stored: knobs of scope
        -- both alone, checked as a search's knobs are (a preset expanded).
        one := sift._check_knobs(one, array['both'], array[collection], pg_catalog.format('grid cell %s', i));
        perform 1 from sift.knobs(collection, one);
        select pg_catalog.min(d.name) into bad
        from pg_catalog.jsonb_object_keys(one) x(name) join sift.knob_defs d on d.name = x.name
        where d.stage = 'rerank';
        if bad is not null then
            raise exception 'grid cell % sets %: SQL scores the fused ranking, never a reranker''s', i, bad
                using errcode = 'SF009';
        end if;
        checked := checked || pg_catalog.jsonb_build_array(one);
    end loop;
    return checked;
end;
$$;
comment on function sift._tune_cells(text, jsonb) is
    'Internal: sift.tune_golden_set''s grid checked before any search runs: a JSON array of 1 to 200 '
    'non-empty knob objects (SF003), each checked as a search''s knobs are (a preset expanded), of '
    'scope both and no rerank knob (SF009). Returns the checked cells after cell 0, {} (the '
    'collection''s knobs as they are).';


create or replace function sift._tune_scores(
    collection text,
    golden_set text,
    k          integer,
    checked    jsonb,
    out p_cell integer[],
    out p_key  text[],
    out p_ndcg double precision[])
returns record
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Only answerable questions with a relevant unit have an nDCG.
    select pg_catalog.array_agg(s.cell order by s.cell, s.question_key),
           pg_catalog.array_agg(s.question_key order by s.cell, s.question_key),
           pg_catalog.array_agg(s.ndcg order by s.cell, s.question_key)
    from (select (c.o - 1)::integer as cell, r.question_key, r.ndcg
          from pg_catalog.jsonb_array_elements(_tune_scores.checked) with ordinality c(v, o)
          cross join lateral sift.score_golden_set(_tune_scores.collection, _tune_scores.golden_set,
                                                   _tune_scores.k, c.v) r
          where r.answerable and r.ndcg is not null) s
$$;
comment on function sift._tune_scores(text, text, integer, jsonb) is
    'Internal: every cell of sift.tune_golden_set (checked, cell 0 first) scored on every answerable '
    'question with a relevant unit (sift.score_golden_set, nDCG@k), as parallel arrays of cell '
    '(0-based), question key and nDCG, ordered by cell, then question key.';


create or replace function sift._tune_folds(
    p_cell     integer[],
    p_key      text[],
    p_ndcg     double precision[],
    folds      integer,
    seed       integer,
    out q_key  text[],
    out q_fold integer[],
    out q_pick integer[],
    out q_held double precision[],
    out q_now  double precision[])
returns record
language sql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Folds: the questions in the order of a hash of their key seeded by seed, dealt in turn.
    -- Each fold's pick: the best cell on the other folds' questions (ties: the lower cell,
    -- so the current knobs first), scored on the fold's own questions.
    with per as (
        select x.cell, x.key, x.ndcg
        from rows from (pg_catalog.unnest(p_cell), pg_catalog.unnest(p_key), pg_catalog.unnest(p_ndcg)) x(cell, key, ndcg)
    ), dealt as (
        select d.key, (pg_catalog.mod(pg_catalog.row_number() over (
                           order by pg_catalog.hashtextextended(d.key, _tune_folds.seed), d.key) - 1,
                       _tune_folds.folds) + 1)::integer as fold
        from (select distinct per.key from per) d
    ), trained as (
        select f.fold, per.cell,
               pg_catalog.round((pg_catalog.sum(per.ndcg order by per.key) / pg_catalog.count(*))::numeric, 12) as mean
        from (select distinct dealt.fold from dealt) f
        join dealt on dealt.fold <> f.fold
        join per on per.key = dealt.key
        group by f.fold, per.cell
    ), picked as (
        select distinct on (t.fold) t.fold, t.cell
        from trained t
        order by t.fold, t.mean desc, t.cell
    )
    select pg_catalog.array_agg(dealt.key order by dealt.key),
           pg_catalog.array_agg(dealt.fold order by dealt.key),
           pg_catalog.array_agg(picked.cell order by dealt.key),
           pg_catalog.array_agg(held.ndcg order by dealt.key),
           pg_catalog.array_agg(base.ndcg order by dealt.key)
    from dealt
    join picked on picked.fold = dealt.fold
    join per held on held.key = dealt.key and held.cell = picked.cell
    join per base on base.key = dealt.key and base.cell = 0
$$;
comment on function sift._tune_folds(integer[], text[], double precision[], integer, integer) is
    'Internal: sift.tune_golden_set''s cross-validation over the scores of sift._tune_scores: the '
    'questions dealt into folds in the order of a hash of their key seeded by seed, each fold''s pick '
    '(the best cell on the other folds; ties: the lower cell). Per question, ordered by key: its '
    'fold, the fold''s pick, its nDCG under the pick (held out) and under cell 0 (current).';


create or replace function sift._tune_interval(
    held      double precision[],
    base      double precision[],
    n         integer,
    seed      integer,
    resamples integer,
    out lo    double precision,
    out hi    double precision)
returns record
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    gains float8[] := array(select h - c from rows from (pg_catalog.unnest(held), pg_catalog.unnest(base)) x(h, c));
begin
    -- 95% interval of the mean paired gain: a percentile bootstrap over questions, each
    -- resample drawn by a hash of (resample, draw) seeded by seed, so the same seed gives
    -- the same interval.
    select pg_catalog.percentile_cont(0.025) within group (order by b.m),
           pg_catalog.percentile_cont(0.975) within group (order by b.m)
    into lo, hi
    from (select (select pg_catalog.avg(gains[1 + pg_catalog.mod(pg_catalog.mod(
                                   pg_catalog.hashint8extended(r::bigint * n + j, _tune_interval.seed), n) + n, n)])
                  from pg_catalog.generate_series(1, n) j) as m
          from pg_catalog.generate_series(1, resamples) r) b;
end;
$$;
comment on function sift._tune_interval(double precision[], double precision[], integer, integer, integer) is
    'Internal: sift.tune_golden_set''s 95% percentile bootstrap interval of the mean paired gain '
    '(held out minus current, per question) over n questions: resamples resamples, each draw by a '
    'hash of (resample, draw) seeded by seed, so the same seed gives the same interval.';


create or replace function sift._tune_decision(
    collection   text,
    checked      jsonb,
    now_knobs    jsonb,
    p_cell       integer[],
    p_key        text[],
    p_ndcg       double precision[],
    lo           double precision,
    hi           double precision,
    store        boolean,
    out best     integer,
    out stored   boolean,
    out decision text)
returns record
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    best_knobs jsonb;
    same       boolean;
begin
    stored := false;
    -- The winner: the best cell on every question (ties: the lower cell).
    select s.cell into best
    from (select x.cell, pg_catalog.round((pg_catalog.sum(x.ndcg order by x.key) / pg_catalog.count(*))::numeric, 12) as mean
          from rows from (pg_catalog.unnest(p_cell), pg_catalog.unnest(p_key), pg_catalog.unnest(p_ndcg)) x(cell, key, ndcg)
          group by x.cell) s
    order by s.mean desc, s.cell
    limit 1;
    best_knobs := checked -> best;
    select coalesce(pg_catalog.bool_and(x.value is not distinct from now_knobs -> x.name), true) into same
    from sift.knobs(collection, best_knobs) x
    where best_knobs ? x.name;
    if best = 0 or same then
        decision := 'nothing stored: the current knobs score best on all the questions';
    elsif lo is null or lo <= 0 then
        decision := pg_catalog.format(
            'nothing stored: the held-out gain is not significant (its 95%% interval [%s, %s] %s)',
            pg_catalog.round(lo::numeric, 4), pg_catalog.round(hi::numeric, 4),
            case when hi < 0 then 'lies below 0' else 'includes 0' end);
    elsif store then
        perform sift.alter_collection(collection, best_knobs);
        stored := true;
        decision := pg_catalog.format('stored on collection %s: the held-out gain''s 95%% interval [%s, %s] lies above 0',
                                      collection, pg_catalog.round(lo::numeric, 4), pg_catalog.round(hi::numeric, 4));
    else
        decision := pg_catalog.format(
            'significant (the held-out gain''s 95%% interval [%s, %s] lies above 0): store => true stores it',
            pg_catalog.round(lo::numeric, 4), pg_catalog.round(hi::numeric, 4));
    end if;
end;
$$;
comment on function sift._tune_decision(text, jsonb, jsonb, integer[], text[], double precision[], double precision,
                                        double precision, boolean) is
    'Internal: sift.tune_golden_set''s decision: the best cell on every question (ties: the lower '
    'cell), stored on the collection with sift.alter_collection only when store is true, it differs '
    'from the current knobs and the interval [lo, hi] lies above 0; the note says what was done and why.';


create or replace function sift._tune_report(
    checked jsonb, now_knobs jsonb, n integer,
    p_cell integer[], p_key text[], p_ndcg double precision[],
    q_key text[], q_fold integer[], q_pick integer[], q_held double precision[], q_now double precision[],
    lo double precision, hi double precision, best integer, did_store boolean, decision text,
    k integer, folds integer, seed integer, per_question boolean, resamples integer)
returns table (
    kind text, cell integer, fold integer, question_key text, knobs jsonb, questions integer,
    ndcg double precision, current_ndcg double precision, gain double precision,
    ci_low double precision, ci_high double precision, stored boolean, note text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    -- The report: the current knobs, each cell, each fold, each question (per_question),
    -- the cross-validated figure and the decision.
    return query
    with per as (
        select x.cell, x.key, x.ndcg from rows from (pg_catalog.unnest(p_cell), pg_catalog.unnest(p_key), pg_catalog.unnest(p_ndcg)) x(cell, key, ndcg)
    ), qs as (
        select x.key, x.fold, x.pick, x.held, x.now
        from rows from (pg_catalog.unnest(q_key), pg_catalog.unnest(q_fold), pg_catalog.unnest(q_pick), pg_catalog.unnest(q_held), pg_catalog.unnest(q_now)) x(key, fold, pick, held, now)
    ), means as (
        select per.cell, pg_catalog.avg(per.ndcg) as mean from per group by per.cell
    ), report as (
        select 1 as part, 0 as o, 'current'::text as kind, 0 as cell, null::integer as fold, null::text as key,
               now_knobs as knobs, n as questions, m.mean as ndcg, m.mean as current_ndcg, 0::float8 as gain,
               null::float8 as ci_low, null::float8 as ci_high, null::boolean as stored,
               'the collection''s knobs as they are (the grid''s knobs shown)'::text as note
        from means m where m.cell = 0
        union all
        select 2, m.cell, 'cell', m.cell, null, null, checked -> m.cell, n, m.mean, z.mean, m.mean - z.mean,
               null, null, null,
               pg_catalog.concat_ws('; ', case when m.cell = best then 'best on all the questions' end,
                                    (select 'picked by fold' || case when pg_catalog.count(*) > 1 then 's ' else ' ' end
                                            || pg_catalog.string_agg(f.fold::text, ', ' order by f.fold)
                                     from (select distinct qs.fold from qs where qs.pick = m.cell) f))
        from means m cross join (select means.mean from means where means.cell = 0) z
        where m.cell > 0
        union all
        select 3, f.fold, 'fold', f.pick, f.fold, null,
               case when f.pick = 0 then now_knobs else checked -> f.pick end, f.n::integer, f.held, f.now, f.held - f.now,
               null, null, null,
               pg_catalog.format('cell %s, picked on the other %s folds, scored on this fold''s questions',
                                 f.pick, _tune_report.folds - 1)
        from (select qs.fold, pg_catalog.min(qs.pick) as pick, pg_catalog.count(*) as n,
                     pg_catalog.avg(qs.held) as held, pg_catalog.avg(qs.now) as now
              from qs group by qs.fold) f
        union all
        select 4, pg_catalog.row_number() over (order by qs.fold, qs.key), 'question', qs.pick, qs.fold, qs.key,
               null, 1, qs.held, qs.now, qs.held - qs.now, null, null, null, null
        from qs where _tune_report.per_question
        union all
        select 5, 0, 'held_out', null, null, null, null, n, a.held, a.now, a.held - a.now, lo, hi, null,
               pg_catalog.format('%s-fold cross-validated nDCG@%s (seed %s): %s question(s) gained, %s lost, %s unchanged; '
                                 '95%% paired bootstrap interval, %s resamples',
                                 _tune_report.folds, _tune_report.k, _tune_report.seed,
                                 a.up, a.down, a.flat, resamples)
        from (select pg_catalog.avg(qs.held) as held, pg_catalog.avg(qs.now) as now,
                     pg_catalog.count(*) filter (where qs.held > qs.now) as up,
                     pg_catalog.count(*) filter (where qs.held < qs.now) as down,
                     pg_catalog.count(*) filter (where qs.held = qs.now) as flat
              from qs) a
        union all
        select 6, 0, 'decision', best, null, null, case when best = 0 then now_knobs else checked -> best end,
               n, m.mean, z.mean,
               (select pg_catalog.avg(qs.held) - pg_catalog.avg(qs.now) from qs), lo, hi, did_store, decision
        from means m cross join (select means.mean from means where means.cell = 0) z
        where m.cell = best
    )
    select r.kind, r.cell, r.fold, r.key, r.knobs, r.questions, r.ndcg, r.current_ndcg, r.gain,
           r.ci_low, r.ci_high, r.stored, r.note
    from report r
    order by r.part, r.o;
end;
$$;
comment on function sift._tune_report(jsonb, jsonb, integer, integer[], text[], double precision[], text[], integer[],
                                      integer[], double precision[], double precision[], double precision,
                                      double precision, integer, boolean, text, integer, integer, integer, boolean,
                                      integer) is
    'Internal: sift.tune_golden_set''s rows from its steps'' figures, in order: current, each cell, '
    'each fold, each question (per_question), held_out and decision.';


create or replace function sift.tune_golden_set(
    collection   text,
    golden_set   text default null,
    k            integer default 10,
    folds        integer default 5,
    grid         jsonb default null,
    seed         integer default 0,
    store        boolean default false,
    per_question boolean default false)
returns table (
    kind         text,
    cell         integer,
    fold         integer,
    question_key text,
    knobs        jsonb,
    questions    integer,
    ndcg         double precision,
    current_ndcg double precision,
    gain         double precision,
    ci_low       double precision,
    ci_high      double precision,
    stored       boolean,
    note         text)
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    col        sift.collections := sift._collection(tune_golden_set.collection);
    gs         sift.golden_sets := sift._golden_set(col, tune_golden_set.golden_set);
    resamples  constant integer := 2000;
    checked    jsonb;     -- cell 0 (the collection's knobs as they are), then the grid's cells
    names      text[];
    now_knobs  jsonb;
    n          integer;
    -- every (cell, question) score, in parallel arrays ordered by cell, then question key
    p_cell     integer[];
    p_key      text[];
    p_ndcg     float8[];
    -- per question, ordered by key: its fold, the fold's pick, its held-out and current nDCG
    q_key      text[];
    q_fold     integer[];
    q_pick     integer[];
    q_held     float8[];
    q_now      float8[];
    lo         float8;
    hi         float8;
    best       integer;
    did_store  boolean;
    decision   text;
begin
    -- Arguments, then every cell's knobs (names, scope, types, ranges), before any search runs.
    if tune_golden_set.k is null or tune_golden_set.k < 1 or tune_golden_set.k > 1000 then
        raise exception 'k must be an integer in [1, 1000], got %', coalesce(tune_golden_set.k::text, 'null')
            using errcode = 'SF003';
    end if;
    if tune_golden_set.folds is null or tune_golden_set.folds < 2 or tune_golden_set.folds > 20 then
        raise exception 'folds must be an integer in [2, 20], got %', coalesce(tune_golden_set.folds::text, 'null')
            using errcode = 'SF003';
    end if;
    if tune_golden_set.seed is null then
        raise exception 'seed must be an integer, got null' using errcode = 'SF003';
    end if;
    if tune_golden_set.store is null or tune_golden_set.per_question is null then
        raise exception 'store and per_question must be true or false, not null' using errcode = 'SF003';
    end if;
    checked := sift._tune_cells(col.name, coalesce(tune_golden_set.grid, sift._tuning_grid()));
    select pg_catalog.array_agg(distinct x.name order by x.name) into names
    from pg_catalog.jsonb_array_elements(checked) c(v), pg_catalog.jsonb_object_keys(c.v) x(name);
    select coalesce(pg_catalog.jsonb_object_agg(x.name, x.value order by x.name), '{}') into now_knobs
    from sift.knobs(col.name) x where x.name = any (names);

    -- Every cell on every question (cell 0 is the collection as it is).
    select s.p_cell, s.p_key, s.p_ndcg into p_cell, p_key, p_ndcg
    from sift._tune_scores(col.name, gs.name, tune_golden_set.k, checked) s;
    n := coalesce(pg_catalog.cardinality(p_cell), 0) / pg_catalog.jsonb_array_length(checked);
    if n < tune_golden_set.folds then
        raise exception 'golden set "%" has % scored question(s) (answerable, with a relevant unit): fewer than % folds',
            gs.name, n, tune_golden_set.folds
            using errcode = 'SF003', hint = 'use fewer folds, or add questions';
    end if;

    -- The folds and each fold's pick, the paired interval of the held-out gain, the decision.
    select f.q_key, f.q_fold, f.q_pick, f.q_held, f.q_now into q_key, q_fold, q_pick, q_held, q_now
    from sift._tune_folds(p_cell, p_key, p_ndcg, tune_golden_set.folds, tune_golden_set.seed) f;
    select b.lo, b.hi into lo, hi
    from sift._tune_interval(q_held, q_now, n, tune_golden_set.seed, resamples) b;
    select d.best, d.stored, d.decision into best, did_store, decision
    from sift._tune_decision(col.name, checked, now_knobs, p_cell, p_key, p_ndcg, lo, hi, tune_golden_set.store) d;

    return query
    select r.kind, r.cell, r.fold, r.question_key, r.knobs, r.questions, r.ndcg, r.current_ndcg, r.gain,
           r.ci_low, r.ci_high, r.stored, r.note
    from sift._tune_report(checked, now_knobs, n, p_cell, p_key, p_ndcg, q_key, q_fold, q_pick, q_held, q_now,
                           lo, hi, best, did_store, decision, tune_golden_set.k, tune_golden_set.folds,
                           tune_golden_set.seed, tune_golden_set.per_question, resamples) r;
end;
$$;
comment on function sift.tune_golden_set(text, text, integer, integer, jsonb, integer, boolean, boolean) is
    'Chooses a collection''s knobs from its golden set (null: its only one) by k-fold cross-validation. '
    'grid: a JSON array of knob objects (cells; null: sift._tuning_grid(), fusion rrf/dbsf/convex, '
    'dense_weight, rrf_k, fetch_k), each checked as a search''s knobs are, of scope both and no rerank '
    'knob (SF009); cell 0 is the collection''s knobs as they are. Every cell scores every answerable '
    'question (sift.score_golden_set, nDCG@k); questions are dealt into folds (2-20) in the order of a '
    'hash of their key seeded by seed; each fold''s pick is the best cell on the other folds (ties: the '
    'lower cell) and is scored on the fold. Rows: current, cell (mean nDCG on every question, gain '
    'over current, the folds that picked it), fold, question (per_question), held_out (the '
    'cross-validated mean, its paired gain over current and a 95% percentile bootstrap interval, 2000 '
    'resamples drawn by a hash seeded by seed: deterministic) and decision (the best cell on every '
    'question). store => true stores that cell with sift.alter_collection only when the interval''s '
    'lower bound is above 0; else nothing is stored and note says why. A cell with bm25_k1 or bm25_b '
    'other than the stored ones scores chunks outside the impact lists built for those. SF003 for a '
    'bad k, folds, seed or grid, or fewer scored questions than folds. Writes only with store.';
