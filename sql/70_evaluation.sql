-- Evaluation: golden sets (labelled questions with their positive chunks)
-- and the history of evaluation runs. The Python package imports, exports
-- and scores; what a psql user needs lives here: rebinding positives after a
-- re-chunk, and the run history with each run's delta.

create or replace function sift._golden_set(col sift.collections, golden_set text)
returns sift.golden_sets
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    hit sift.golden_sets;
begin
    select s.* into hit
    from sift.golden_sets s
    where s.collection_id = col.collection_id and s.name = _golden_set.golden_set;
    if hit.golden_set_id is null then
        raise exception 'unknown golden set "%" in collection "%"', golden_set, col.name
            using errcode = 'SFG01',
                  hint = 'import one with `pgsift golden import`; `pgsift golden list` shows them';
    end if;
    return hit;
end;
$$;
comment on function sift._golden_set(sift.collections, text) is
    'Internal: the golden set of that name in the collection; raises SFG01 when there is none.';


create or replace function sift._golden_positives_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    q record;
    c record;
begin
    -- Unbinding never fails, whatever the question's state: a chunk's deletion
    -- sets chunk_id to null (the foreign key's action, as the table's owner),
    -- and refusing it would let a positive block the chunk's own tenant.
    if tg_op = 'UPDATE' and new.chunk_id is null and new.question_id = old.question_id then
        return new;
    end if;
    -- The question as the caller sees it, locked against a concurrent
    -- sift.golden_questions update that marks it as having no answer.
    select s.collection_id, g.answerable, g.question_key into q
    from sift.golden_questions g
    join sift.golden_sets s on s.golden_set_id = g.golden_set_id
    where g.question_id = new.question_id
    for share of g;
    if not found then
        return new;   -- another tenant's question or none: the row-level policy refuses it alike
    end if;
    if not q.answerable and (tg_op = 'INSERT' or new.question_id <> old.question_id) then
        raise exception 'question "%" is marked as having no answer: it cannot have a positive',
            q.question_key
            using errcode = 'SF003', hint = 'mark it answerable first, or leave its positives out';
    end if;
    if new.chunk_id is not null
       and (tg_op = 'INSERT' or new.chunk_id is distinct from old.chunk_id or new.question_id <> old.question_id) then
        -- As the caller sees it: another tenant's chunk is invisible, so it is
        -- refused exactly like one that does not exist (no error tells them apart).
        select k.content, d.source_uri into c
        from sift.chunks k
        join sift.documents d on d.document_id = k.document_id
        where k.chunk_id = new.chunk_id and k.collection_id = q.collection_id;
        if not found then
            raise exception 'chunk % is not a chunk of the golden set''s collection', new.chunk_id
                using errcode = 'SF003',
                      hint = 'name a chunk of that collection, or give the positive by its text (rebind finds it)';
        end if;
        -- A positive given by chunk alone takes the chunk's text and document.
        new.content := coalesce(new.content, c.content);
        new.source_uri := coalesce(new.source_uri, c.source_uri);
    end if;
    return new;
end;
$$;
comment on function sift._golden_positives_before_write() is
    'Trigger: a positive''s chunk must be one of its golden set''s collection as the caller sees it '
    '(SF003 alike for another collection''s, another tenant''s or a missing chunk), an unanswerable '
    'question gets no positive, a positive given by chunk_id alone takes its text and source; '
    'unbinding (chunk_id set to null, as a chunk''s deletion does) is never refused.';

-- create or replace: re-applying it never locks out readers (PostgreSQL 14+).
create or replace trigger golden_positives_before_write
    before insert or update on sift.golden_positives
    for each row execute function sift._golden_positives_before_write();


create or replace function sift._golden_questions_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    n bigint;
begin
    -- Metadata nested past the limit is refused, as a document's is (a client
    -- reading it back recurses once a level).
    if tg_op = 'INSERT' or new.metadata is distinct from old.metadata then
        perform sift._check_nesting(new.metadata,
                                    pg_catalog.format('the metadata of question "%s"', new.question_key));
    end if;
    if tg_op = 'INSERT' then
        return new;
    end if;
    -- A question stays in its set: its positives were checked against that
    -- set's collection, and moved they would name chunks of another.
    if new.golden_set_id is distinct from old.golden_set_id then
        raise exception 'question "%" cannot move to another golden set', old.question_key
            using errcode = 'SF003', hint = 'insert it into the other set (its positives with it)';
    end if;
    -- Marking a question as having no answer keeps its positives out (the
    -- positives' trigger refuses new ones): it is refused while it has some,
    -- rather than deleting what a user labelled. The caller sees every positive
    -- of a question it may update (they reach their tenant through it).
    if old.answerable and not new.answerable then
        select pg_catalog.count(*) into n from sift.golden_positives p where p.question_id = new.question_id;
        if n > 0 then
            raise exception 'question "%" has % positive(s): it cannot be marked as having no answer',
                new.question_key, n
                using errcode = 'SF003',
                      hint = 'delete its positives first (sift.golden_positives), or re-import the set';
        end if;
    end if;
    return new;
end;
$$;
comment on function sift._golden_questions_before_write() is
    'Trigger: a question''s metadata nests at most 64 levels (sift._check_nesting), a question stays '
    'in its golden set, and one with positives cannot be marked as having no answer (SF003 each; '
    'delete its positives first).';

create or replace trigger golden_questions_before_write
    before insert or update on sift.golden_questions
    for each row execute function sift._golden_questions_before_write();


create or replace function sift._golden_sets_before_update()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- A set stays in its collection: its positives name that collection's
    -- chunks (checked when written), and its runs score it there.
    if new.collection_id is distinct from old.collection_id then
        raise exception 'golden set "%" cannot move to another collection', old.name
            using errcode = 'SF003', hint = 'export it and import it into the other collection';
    end if;
    return new;
end;
$$;
comment on function sift._golden_sets_before_update() is
    'Trigger: a golden set stays in its collection (SF003).';

create or replace trigger golden_sets_before_update
    before update of collection_id on sift.golden_sets
    for each row execute function sift._golden_sets_before_update();


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


create or replace function sift.rebind_golden_set(
    collection text,
    golden_set text)
returns table (
    positive_id  bigint,
    question_key text,
    old_chunk_id bigint,
    chunk_id     bigint,
    source_uri   text,
    status       text)
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    col sift.collections := sift._collection(rebind_golden_set.collection);
    gs  sift.golden_sets := sift._golden_set(col, rebind_golden_set.golden_set);
begin
    return query
    with pos as (
        select p.positive_id, q.question_key, p.chunk_id as old_chunk_id, p.source_uri, p.content
        from sift.golden_positives p
        join sift.golden_questions q on q.question_id = p.question_id
        where q.golden_set_id = gs.golden_set_id
    ), kept as (
        -- Still bound to a chunk that holds the text.
        select pos.positive_id, c.chunk_id, d.source_uri
        from pos
        join sift.chunks c on c.chunk_id = pos.old_chunk_id
        join sift.documents d on d.document_id = c.document_id
        where c.collection_id = col.collection_id
          and pg_catalog.strpos(c.content, pos.content) > 0
    ), same_document as (
        -- The first chunk of the positive's own document that holds the text.
        select distinct on (pos.positive_id) pos.positive_id, c.chunk_id, d.source_uri
        from pos
        join sift.documents d on d.collection_id = col.collection_id
                             and d.source_uri = pos.source_uri
        join sift.chunks c on c.document_id = d.document_id
        where not exists (select 1 from kept where kept.positive_id = pos.positive_id)
          and pg_catalog.strpos(c.content, pos.content) > 0
        order by pos.positive_id, c.ordinal, c.chunk_id
    ), split as (
        -- Text a re-chunk split across chunks: its own document's chunks read as one
        -- text (as sift._join_text joins them), bound to the chunk it starts in.
        select distinct on (pos.positive_id) pos.positive_id, t.chunk_id, d.source_uri
        from pos
        join sift.documents d on d.collection_id = col.collection_id
                             and d.source_uri = pos.source_uri
        cross join lateral (
            select sift._join_text(pg_catalog.array_agg(c.content order by c.ordinal)) as txt
            from sift.chunks c where c.document_id = d.document_id) whole
        cross join lateral (
            select o.chunk_id
            from (select x.chunk_id, x.ordinal,
                         sum(x.sep + x.len) over (order by x.ordinal) - x.len + 1 as starts
                  from (select c.chunk_id, c.ordinal, pg_catalog.length(c.content) as len,
                               case when pg_catalog.lag(c.content) over (order by c.ordinal) !~ '\s$'
                                         and c.content !~ '^\s' then 2 else 0 end as sep
                        from sift.chunks c where c.document_id = d.document_id) x) o
            where o.starts <= pg_catalog.strpos(whole.txt, pos.content)
            order by o.ordinal desc
            limit 1) t
        where not exists (select 1 from kept where kept.positive_id = pos.positive_id)
          and not exists (select 1 from same_document s where s.positive_id = pos.positive_id)
          and pg_catalog.strpos(whole.txt, pos.content) > 0
        order by pos.positive_id
    ), elsewhere as (
        -- Anywhere in the collection: bound only when exactly one document holds it.
        select pos.positive_id,
               count(distinct c.document_id) as documents,
               (pg_catalog.array_agg(c.chunk_id order by c.document_id, c.ordinal, c.chunk_id))[1]
                   as chunk_id,
               (pg_catalog.array_agg(d.source_uri order by c.document_id, c.ordinal, c.chunk_id))[1]
                   as source_uri
        from pos
        join sift.chunks c on c.collection_id = col.collection_id
        join sift.documents d on d.document_id = c.document_id
        where not exists (select 1 from kept where kept.positive_id = pos.positive_id)
          and not exists (select 1 from same_document s where s.positive_id = pos.positive_id)
          and not exists (select 1 from split s where s.positive_id = pos.positive_id)
          and pg_catalog.strpos(c.content, pos.content) > 0
        group by pos.positive_id
    ), decided as (
        select pos.positive_id, pos.question_key, pos.old_chunk_id,
               coalesce(k.chunk_id, s.chunk_id, sp.chunk_id,
                        case when e.documents = 1 then e.chunk_id end) as chunk_id,
               coalesce(k.source_uri, s.source_uri, sp.source_uri,
                        case when e.documents = 1 then e.source_uri end, pos.source_uri) as source_uri,
               case when k.chunk_id is not null then 'kept'
                    when s.chunk_id is not null or sp.chunk_id is not null then 'rebound'
                    when e.documents = 1 and pos.source_uri is not null
                         and pos.source_uri <> e.source_uri then 'moved'
                    when e.documents = 1 then 'rebound'
                    when e.documents > 1 then 'ambiguous'
                    else 'not_found' end as status
        from pos
        left join kept k on k.positive_id = pos.positive_id
        left join same_document s on s.positive_id = pos.positive_id
        left join split sp on sp.positive_id = pos.positive_id
        left join elsewhere e on e.positive_id = pos.positive_id
    ), written as (
        update sift.golden_positives g
        set chunk_id = x.chunk_id, source_uri = x.source_uri
        from decided x
        where g.positive_id = x.positive_id
          and (g.chunk_id is distinct from x.chunk_id or g.source_uri is distinct from x.source_uri)
        returning g.positive_id
    )
    select x.positive_id, x.question_key, x.old_chunk_id, x.chunk_id, x.source_uri, x.status
    from decided x
    order by x.positive_id;
end;
$$;
comment on function sift.rebind_golden_set(text, text) is
    'After re-chunking or re-ingesting: binds every positive of the golden set to the chunk that '
    'now holds its text verbatim (strpos, case and whitespace exact). Status per positive: kept '
    '(its chunk still holds the text), rebound (another chunk of the same document; the chunk it '
    'starts in when a re-chunk split it across chunks; else the only document that holds it), moved (found only in a different document), ambiguous (several '
    'documents hold it: left unbound rather than guessed), not_found (left unbound). Writes.';


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
