-- Evaluation runs: a golden set scored through sift.search. In: a
-- collection, its golden set, k, knobs and a mode. Out: per question the
-- ranked units and their hit rate, MRR, nDCG, precision, recall and
-- coverage (pgsift.metrics' definitions: tests/test_evaluation.py holds the
-- two equal), and a run's metrics stored in sift.eval_runs with the change
-- since the one before (sift.eval_history).


create or replace function sift._eval_runs_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Figures and settings nested past the limit are refused, as metadata is.
    if tg_op = 'INSERT' or new.metrics is distinct from old.metrics or new.settings is distinct from old.settings then
        perform sift._check_nesting(new.metrics, 'a run''s metrics');
        perform sift._check_nesting(new.settings, 'a run''s settings');
    end if;
    -- The golden set scored is one of the run's collection, as the caller sees
    -- it: another tenant's set is refused exactly like one that does not exist
    -- (the foreign key, checked as the table's owner, would tell them apart).
    -- Unlinking (a set's deletion sets it to null) is never refused.
    if new.golden_set_id is not null
       and (tg_op = 'INSERT' or new.golden_set_id is distinct from old.golden_set_id
            or new.collection_id is distinct from old.collection_id)
       and not exists (select 1 from sift.golden_sets s
                       where s.golden_set_id = new.golden_set_id and s.collection_id = new.collection_id) then
        raise exception 'golden set % is not a golden set of the run''s collection', new.golden_set_id
            using errcode = 'SFG01', hint = '`pgsift golden list` shows the collection''s sets';
    end if;
    return new;
end;
$$;
comment on function sift._eval_runs_before_write() is
    'Trigger: a run''s golden set must be one of its collection as the caller sees it (SFG01 alike '
    'for another collection''s, another tenant''s or a missing set); its metrics and settings nest '
    'at most 64 levels (SF003).';

create or replace trigger eval_runs_before_write
    before insert or update on sift.eval_runs
    for each row execute function sift._eval_runs_before_write();


create or replace function sift.eval_history(
    collection text,
    golden_set text default null,
    max_runs   integer default 50)
returns table (
    run_id          bigint,
    created_at      timestamptz,
    set_name        text,
    label           text,
    k               integer,
    metrics         jsonb,
    settings        jsonb,
    previous_run_id bigint,
    delta           jsonb)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    col sift.collections := sift._collection(eval_history.collection);
begin
    if eval_history.max_runs is not null and eval_history.max_runs < 1 then
        raise exception 'max_runs must be at least 1 (null: every run), got %', eval_history.max_runs
            using errcode = 'SF003';
    end if;
    return query
    with runs as (
        select r.run_id, r.created_at, r.golden_set, r.label, r.k, r.metrics, r.settings,
               pg_catalog.lag(r.run_id) over w as previous_run_id,
               pg_catalog.lag(r.metrics) over w as previous_metrics
        from sift.eval_runs r
        where r.collection_id = col.collection_id
          and (eval_history.golden_set is null or r.golden_set = eval_history.golden_set)
        window w as (partition by r.golden_set, r.k, r.label order by r.run_id)
    ), latest as (
        select * from runs order by runs.run_id desc limit eval_history.max_runs
    )
    select l.run_id, l.created_at, l.golden_set, l.label, l.k, l.metrics, l.settings,
           l.previous_run_id,
           case when l.previous_run_id is not null then (
               select coalesce(pg_catalog.jsonb_object_agg(
                          m.key, m.value::float8 - (l.previous_metrics -> m.key)::float8
                          order by m.key), '{}'::jsonb)
               from pg_catalog.jsonb_each(l.metrics) m
               where pg_catalog.jsonb_typeof(m.value) = 'number'
                 and pg_catalog.jsonb_typeof(l.previous_metrics -> m.key) = 'number') end
    from latest l
    order by l.run_id;
end;
$$;
comment on function sift.eval_history(text, text, integer) is
    'Stored evaluation runs of a collection, oldest first (the latest max_runs; null: all), '
    'optionally of one golden set: settings used, metrics, when, and delta = each numeric metric '
    'minus the same metric of the previous run with the same golden set, k and label '
    '(pipeline, dense, lexical, sweep <knob>=<value>). Read-only.';


-- Evaluation runs from SQL: every question of a golden set through sift.search,
-- scored as the Python package scores (pgsift.metrics: trec_eval's definitions),
-- and the run recorded in the history.

create or replace function sift._eval_knobs(collection text, knobs jsonb, mode text)
returns jsonb
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- What a run's searches are called with: a baseline runs one leg, never reranked.
    if mode is null or mode not in ('pipeline', 'dense', 'lexical') then
        raise exception 'mode must be pipeline, dense or lexical, got %', coalesce(mode, 'null')
            using errcode = 'SF003';
    end if;
    if knobs is null or pg_catalog.jsonb_typeof(knobs) <> 'object' then
        raise exception 'knobs must be a JSON object' using errcode = 'SF003';
    end if;
    if mode <> 'pipeline' and knobs ? 'hybrid' then
        raise exception 'the % baseline decides ''hybrid'' itself', mode using errcode = 'SF003';
    end if;
    return knobs || case mode when 'dense' then '{"hybrid": false, "rerank": false}'::jsonb
                              when 'lexical' then '{"rerank": false}'::jsonb
                              else '{}'::jsonb end;
end;
$$;
comment on function sift._eval_knobs(text, jsonb, text) is
    'Internal: the knobs an evaluation''s searches run with for a mode (pipeline: as given; '
    'dense: hybrid and rerank off; lexical: rerank off); SF003 for an unknown mode, or hybrid '
    'given to a baseline.';


create or replace function sift.score_golden_set(
    collection text,
    golden_set text default null,
    k          integer default 10,
    knobs      jsonb default '{}',
    mode       text default 'pipeline')
returns table (
    question_key text,
    answerable   boolean,
    chunk_ids    bigint[],
    ranked       text[],
    tokens       integer,
    legs         text[],
    hit_rate     double precision,
    mrr          double precision,
    ndcg         double precision,
    "precision"  double precision,
    recall       double precision,
    coverage     double precision,
    merged       integer)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    col       sift.collections := sift._collection(score_golden_set.collection);
    gs        sift.golden_sets := sift._golden_set(col, score_golden_set.golden_set);
    call      jsonb := sift._eval_knobs(col.name, score_golden_set.knobs, score_golden_set.mode);
    q         record;
    h         sift.hit;
    hs        sift.hit[];
    bound     bigint[];
    units     text[];
    grades    integer[];
    credited  bigint[];
    covered   bigint[];
    sent      bigint[];
    fresh     bigint;
    top       text[];
    n_rel     integer;
    found_rel integer;
    dcg       double precision;
    idcg      double precision;
    first_hit integer;
    r_ranked  text[];
    r_tokens  integer;
    r_merged  integer;
    g         integer;
    i         integer;
    missing   integer;
begin
    if k is null or k < 1 or k > 1000 then
        raise exception 'k must be an integer in [1, 1000], got %', coalesce(k::text, 'null') using errcode = 'SF003';
    end if;
    -- The knobs are checked (names, types, ranges) before any search runs.
    perform 1 from sift.knobs(col.name, call);
    if not exists (select 1 from sift.golden_questions x where x.golden_set_id = gs.golden_set_id) then
        raise exception 'golden set "%" has no question', gs.name using errcode = 'SF003';
    end if;
    if mode = 'dense' then
        select pg_catalog.count(*) into missing
        from sift.golden_questions x where x.golden_set_id = gs.golden_set_id and x.embedding is null;
        if missing > 0 then
            raise exception 'the dense baseline needs a query vector for every question; % have none stored', missing
                using errcode = 'SF003', hint = 'store the questions'' vectors (embedding); SQL never embeds a text';
        end if;
    end if;

    for q in
        select x.question_id, x.question_key, x.question, x.answerable,
               case when mode = 'lexical' then null else x.embedding end as embedding
        from sift.golden_questions x
        where x.golden_set_id = gs.golden_set_id
        order by x.question_id
    loop
        -- The answer, scored by strength (rank), not by presentation order.
        hs := array(select s from sift.search(collection => col.name::text, query_text => q.question,
                                              query_embedding => q.embedding, match_count => k,
                                              knobs => call) s
                    order by s.rank, s.chunk_id);
        -- The question's relevant units with their grades: a bound positive is its chunk
        -- (its document, judged at the document level, as it is now); an unbound one can
        -- never be found (one per document at the document level, unless that document is
        -- relevant through a bound chunk).
        select coalesce(pg_catalog.array_agg(u.unit order by u.unit), '{}'),
               coalesce(pg_catalog.array_agg(u.grade order by u.unit), '{}')
        into units, grades
        from (select y.unit, pg_catalog.max(y.grade) as grade
              from (select case when gs.judged_at = 'chunk' then 'chunk:' || p.chunk_id
                                else 'doc:' || coalesce(d.source_uri, p.source_uri) end as unit, p.grade
                    from sift.golden_positives p
                    left join sift.chunks c on c.chunk_id = p.chunk_id
                    left join sift.documents d on d.document_id = c.document_id
                    where p.question_id = q.question_id and p.chunk_id is not null
                    union all
                    select case when gs.judged_at = 'document' and p.source_uri is not null
                                then 'unbound:' || p.source_uri else 'unbound:' || p.positive_id end, p.grade
                    from sift.golden_positives p
                    where p.question_id = q.question_id and p.chunk_id is null
                      and not (gs.judged_at = 'document' and p.source_uri is not null and exists (
                          select 1 from sift.golden_positives b
                          join sift.chunks c on c.chunk_id = b.chunk_id
                          join sift.documents d on d.document_id = c.document_id
                          where b.question_id = q.question_id and d.source_uri = p.source_uri))) y
              group by y.unit) u;
        bound := array(select p.chunk_id from sift.golden_positives p
                       where p.question_id = q.question_id and p.chunk_id is not null);
        -- What each hit counts as: at the chunk level, the first positive among the chunks
        -- it stands for (a merged section's, its window's) that no better hit was credited
        -- with, else itself; at the document level, its document.
        r_ranked := '{}';
        r_tokens := 0;
        r_merged := 0;
        credited := '{}';
        sent := '{}';
        foreach h in array hs loop
            covered := array(select x.c from pg_catalog.unnest(
                                 case when pg_catalog.cardinality(h.chunk_ids) > 0 then h.chunk_ids
                                      else array[h.chunk_id] end
                                 || coalesce(h.window_chunk_ids, '{}')) with ordinality as x(c, o)
                             group by x.c order by pg_catalog.min(x.o));
            fresh := null;
            if gs.judged_at = 'chunk' then
                select x.c into fresh
                from pg_catalog.unnest(covered) with ordinality as x(c, o)
                where x.c = any (bound) and not x.c = any (credited)
                order by x.o limit 1;
            end if;
            if fresh is not null then
                credited := credited || fresh;
                r_ranked := r_ranked || ('chunk:' || fresh);
            elsif gs.judged_at = 'chunk' then
                r_ranked := r_ranked || ('chunk:' || h.chunk_id);
            else
                r_ranked := r_ranked || ('doc:' || h.source_uri);
            end if;
            -- The chunks whose text it sends (none when a better hit's window holds it),
            -- and their tokens.
            if h.window_of is null then
                sent := sent || case when pg_catalog.cardinality(h.window_chunk_ids) > 0 then h.window_chunk_ids
                                     when pg_catalog.cardinality(h.chunk_ids) > 0 then h.chunk_ids
                                     else array[h.chunk_id] end;
                r_tokens := r_tokens + coalesce((
                    select pg_catalog.sum(coalesce(c.token_count, 0))
                    from pg_catalog.unnest(case when pg_catalog.cardinality(h.window_chunk_ids) > 0
                                                then h.window_chunk_ids
                                                when pg_catalog.cardinality(h.chunk_ids) > 0 then h.chunk_ids
                                                else array[h.chunk_id] end) as x(c)
                    join sift.chunks c on c.chunk_id = x.c), 0)::integer;
            end if;
            sent := sent || covered;
            r_merged := r_merged + case when h.merged then 1 else 0 end;
        end loop;

        question_key := q.question_key;
        answerable := q.answerable;
        chunk_ids := array(select x.chunk_id from pg_catalog.unnest(hs) with ordinality as x order by x.ordinality);
        ranked := r_ranked;
        tokens := r_tokens;
        legs := case when pg_catalog.cardinality(hs) > 0 then (hs[1]).legs end;
        merged := r_merged;
        coverage := case when q.answerable and pg_catalog.cardinality(bound) > 0 then
                        (select pg_catalog.count(distinct b)::float8 from pg_catalog.unnest(bound) as b
                         where b = any (sent))
                        / (select pg_catalog.count(distinct b) from pg_catalog.unnest(bound) as b) end;
        hit_rate := null;
        mrr := null;
        ndcg := null;
        "precision" := null;
        recall := null;
        n_rel := pg_catalog.cardinality(units);
        if q.answerable and n_rel > 0 then
            -- The ranking with repeats dropped (each unit at its best place), cut at k; then
            -- pgsift.metrics: hit (success@k), reciprocal rank, nDCG@k with linear gain (the
            -- ideal from every relevant unit), precision (over k) and recall.
            top := array(select x.u from pg_catalog.unnest(r_ranked) with ordinality as x(u, o)
                         group by x.u order by pg_catalog.min(x.o) limit k);
            found_rel := 0;
            dcg := 0;
            first_hit := null;
            for i in 1 .. coalesce(pg_catalog.cardinality(top), 0) loop
                g := grades[pg_catalog.array_position(units, top[i])];
                if g is not null then
                    found_rel := found_rel + 1;
                    first_hit := coalesce(first_hit, i);
                    dcg := dcg + g / (pg_catalog.ln((i + 1)::float8) / pg_catalog.ln(2::float8));
                end if;
            end loop;
            select coalesce(pg_catalog.sum(x.g / (pg_catalog.ln((x.o + 1)::float8) / pg_catalog.ln(2::float8))
                                           order by x.o), 0)
            into idcg
            from (select y.g, pg_catalog.row_number() over (order by y.g desc, y.n) as o
                  from pg_catalog.unnest(grades) with ordinality as y(g, n)) x
            where x.o <= k;
            hit_rate := case when found_rel > 0 then 1 else 0 end;
            mrr := case when first_hit is null then 0 else 1.0::float8 / first_hit end;
            ndcg := case when idcg > 0 then dcg / idcg else 0 end;
            "precision" := found_rel::float8 / k;
            recall := found_rel::float8 / n_rel;
        end if;
        return next;
    end loop;
end;
$$;
comment on function sift.score_golden_set(text, text, integer, jsonb, text) is
    'Runs every question of a golden set (null: the collection''s only one) through sift.search '
    'at k with the knobs (mode pipeline; dense: the dense leg alone; lexical: the lexical leg '
    'alone, no query vector) and scores each answer as pgsift.metrics does, by rank: chunk_ids '
    'the answer, ranked what each hit counts as (chunk:<id>, or doc:<source_uri> for a set '
    'judged at the document level; a hit standing for a positive among its merged section or '
    'window counts as it, once), tokens the token_count of the chunks whose text came back, '
    'legs those that ran, hit_rate, mrr, ndcg (linear gain), precision (over k) and recall at '
    'k (null for a question without an answer), coverage (the share of its bound positives '
    'whose text came back) and merged (hits that were merged sections). A question''s stored '
    'vector is its query vector (without one, the lexical leg alone): SQL never embeds and '
    'never calls a hosted reranker. Read-only.';


create or replace function sift.record_eval_run(
    collection text,
    golden_set text,
    label      text,
    k          integer,
    metrics    jsonb,
    settings   jsonb default '{}')
returns table (
    run_id          bigint,
    created_at      timestamptz,
    previous_run_id bigint,
    delta           jsonb)
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    col sift.collections := sift._collection(record_eval_run.collection);
    gs  sift.golden_sets := sift._golden_set(col, record_eval_run.golden_set);
    id  bigint;
begin
    insert into sift.eval_runs as r (collection_id, golden_set_id, golden_set, label, k, settings, metrics)
    values (col.collection_id, gs.golden_set_id, gs.name, record_eval_run.label, record_eval_run.k,
            coalesce(record_eval_run.settings, '{}'), record_eval_run.metrics)
    returning r.run_id into id;
    return query
    select h.run_id, h.created_at, h.previous_run_id, h.delta
    from sift.eval_history(col.name, gs.name, null) h
    where h.run_id = id;
end;
$$;
comment on function sift.record_eval_run(text, text, text, integer, jsonb, jsonb) is
    'Records an evaluation run of a golden set (null: the collection''s only one) in the history: '
    'its label (pipeline, dense, lexical, sweep <knob>=<value>), k, metrics and settings (JSON '
    'objects); returns its run_id and created_at, and as sift.eval_history says, the previous run '
    'of the same golden set, k and label and the delta of each numeric metric against it. '
    'sift.evaluate_golden_set records its runs with it; the '
    'Python package records the runs it scores. Writes.';


create or replace function sift.evaluate_golden_set(
    collection text,
    golden_set text default null,
    k          integer default 10,
    knobs      jsonb default '{}',
    mode       text default 'pipeline',
    label      text default null,
    store      boolean default true)
returns table (
    run_id          bigint,
    created_at      timestamptz,
    set_name        text,
    metrics         jsonb,
    settings        jsonb,
    previous_run_id bigint,
    delta           jsonb)
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    col       sift.collections := sift._collection(evaluate_golden_set.collection);
    gs        sift.golden_sets := sift._golden_set(col, evaluate_golden_set.golden_set);
    call      jsonb := sift._eval_knobs(col.name, evaluate_golden_set.knobs, evaluate_golden_set.mode);
    effective jsonb;
    figures   jsonb;
    setup     jsonb;
    no_vector integer;
    all_q     integer;
begin
    -- Every knob in force, checked before any search runs.
    select coalesce(pg_catalog.jsonb_object_agg(x.name, x.value), '{}') into effective
    from sift.knobs(col.name, call) x;
    with per_q as (
        select * from sift.score_golden_set(col.name, gs.name, evaluate_golden_set.k, evaluate_golden_set.knobs,
                                            evaluate_golden_set.mode)
    ), scored as (
        select * from per_q s where s.answerable and s.ndcg is not null
    )
    select pg_catalog.jsonb_build_object(
               'hit_rate', (select pg_catalog.avg(s.hit_rate) from scored s),
               'mrr', (select pg_catalog.avg(s.mrr) from scored s),
               'ndcg', (select pg_catalog.avg(s.ndcg) from scored s),
               'precision', (select pg_catalog.avg(s."precision") from scored s),
               'recall', (select pg_catalog.avg(s.recall) from scored s),
               'mean_tokens', (select pg_catalog.avg(s.tokens)::float8 from per_q s),
               'mean_results', (select pg_catalog.avg(coalesce(pg_catalog.cardinality(s.chunk_ids), 0))::float8
                                from per_q s),
               'coverage', (select pg_catalog.avg(s.coverage) from per_q s),
               'merge_rate', (select case when pg_catalog.sum(pg_catalog.cardinality(s.chunk_ids)) > 0
                                           and effective ->> 'parent_return' is distinct from 'child'
                                          then pg_catalog.sum(s.merged)::float8
                                               / pg_catalog.sum(pg_catalog.cardinality(s.chunk_ids)) end
                              from per_q s),
               'unanswerable_declined', (select pg_catalog.avg(
                                                    case when coalesce(pg_catalog.cardinality(s.chunk_ids), 0) = 0
                                                         then 1 else 0 end)::float8
                                         from per_q s where not s.answerable)),
           pg_catalog.jsonb_build_object(
               'legs', coalesce((select pg_catalog.jsonb_object_agg(l.leg, l.n order by l.leg)
                                 from (select x.leg, pg_catalog.count(*) as n
                                       from per_q s cross join pg_catalog.unnest(s.legs) as x(leg)
                                       group by x.leg) l), '{}'),
               'questions', pg_catalog.jsonb_build_object(
                   'answerable', (select pg_catalog.count(*) from per_q s where s.answerable),
                   'unanswerable', (select pg_catalog.count(*) from per_q s where not s.answerable),
                   'scored', (select pg_catalog.count(*) from scored),
                   'unbound_positives', (select pg_catalog.count(*) from sift.golden_positives p
                                         join sift.golden_questions x on x.question_id = p.question_id
                                         where x.golden_set_id = gs.golden_set_id and p.chunk_id is null)))
    into figures, setup;
    select pg_catalog.count(*) filter (where x.embedding is null), pg_catalog.count(*) into no_vector, all_q
    from sift.golden_questions x where x.golden_set_id = gs.golden_set_id;
    setup := setup || pg_catalog.jsonb_build_object(
        'mode', evaluate_golden_set.mode,
        'knobs', evaluate_golden_set.knobs,
        'effective', effective,
        'judged_at', gs.judged_at,
        'embeddings', case when evaluate_golden_set.mode = 'lexical' then 'none (lexical only)'
                           when no_vector = 0 then 'stored with the golden set'
                           when no_vector = all_q then 'none: no stored vectors (lexical leg only)'
                           else pg_catalog.format('stored; %s question(s) without a vector ran lexical only',
                                                  no_vector) end,
        'evaluated_by', 'sift.evaluate_golden_set');
    if not evaluate_golden_set.store then
        return query select null::bigint, null::timestamptz, gs.name::text, figures, setup, null::bigint, null::jsonb;
        return;
    end if;
    return query
    select r.run_id, r.created_at, gs.name::text, figures, setup, r.previous_run_id, r.delta
    from sift.record_eval_run(col.name, gs.name, coalesce(evaluate_golden_set.label, evaluate_golden_set.mode),
                              evaluate_golden_set.k, figures, setup) r;
end;
$$;
comment on function sift.evaluate_golden_set(text, text, integer, jsonb, text, text, boolean) is
    'Evaluates a collection against a golden set (null: its only one) at k from SQL: every '
    'question through sift.search (sift.score_golden_set: mode pipeline, dense or lexical; the '
    'knobs checked before any search), metrics averaged over the answerable questions as the '
    'Python package averages them (hit_rate, mrr, ndcg, precision, recall; mean_tokens and '
    'mean_results over every question; coverage; merge_rate, null with parent_return child; '
    'unanswerable_declined, the share of questions without an answer that got no result), '
    'settings (mode, knobs, effective: every knob in force, judged_at, embeddings, legs, '
    'question counts). Recorded with label (default: the mode) unless store is false '
    '(run_id null); returns the run with its previous run and delta as sift.eval_history gives '
    'them. SQL never calls a hosted '
    'reranker: a collection that reranks is scored on its fused ranking here. Writes.';
