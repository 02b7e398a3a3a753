-- Evaluation runs: the history of a collection's scores. In: a run's
-- metrics (sift.evaluate_golden_set records them; the Python client's runs
-- too). Out: sift.eval_runs rows, kept within their tenant, and the history
-- with the change since the run before (sift.eval_history).

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
