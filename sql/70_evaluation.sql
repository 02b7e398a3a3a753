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


create or replace function sift._overlap(before text, after text)
returns integer
language plpgsql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    head text := pg_catalog.left(after, 8);
    tail text;
    at   integer := 1;
    p    integer;
begin
    -- The longest end of `before` that `after` starts with (chunks cut with an
    -- overlap repeat it), at least 8 characters: a shorter match is more
    -- likely chance ("...the" and "theory") than a splitter's overlap.
    if pg_catalog.length(before) < 8 or pg_catalog.length(after) < 8 then
        return 0;
    end if;
    tail := pg_catalog.right(before, least(pg_catalog.length(before), pg_catalog.length(after)));
    loop
        -- Each place the first 8 characters of `after` appear, leftmost (longest) first.
        p := pg_catalog.strpos(pg_catalog.substr(tail, at), head);
        exit when p = 0;
        at := at + p - 1;
        if pg_catalog.substr(tail, at) = pg_catalog.left(after, pg_catalog.length(tail) - at + 1) then
            return pg_catalog.length(tail) - at + 1;
        end if;
        at := at + 1;
    end loop;
    return 0;
end;
$$;
comment on function sift._overlap(text, text) is
    'Internal: how many characters the second text repeats of the end of the first (the '
    'longest such overlap, at least 8 characters; else 0).';


create or replace function sift._chunk_at(document_id bigint, txt text)
returns bigint
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    hit    bigint;
    u      text := pg_catalog.regexp_replace(txt, '\s+', '', 'g');
    ids    bigint[];
    parts  text[];
    cuts   integer[];
    starts bigint[];
    whole  text;
    at     integer;
    pass   integer;
begin
    -- 1. The first chunk (in reading order) that holds the text verbatim.
    select c.chunk_id into hit
    from sift.chunks c
    where c.document_id = _chunk_at.document_id and pg_catalog.strpos(c.content, txt) > 0
    order by c.ordinal, c.chunk_id
    limit 1;
    if hit is not null or u = '' then
        return hit;
    end if;
    select pg_catalog.array_agg(c.chunk_id order by c.ordinal, c.chunk_id),
           pg_catalog.array_agg(pg_catalog.regexp_replace(c.content, '\s+', '', 'g')
                                order by c.ordinal, c.chunk_id)
    into ids, parts
    from sift.chunks c
    where c.document_id = _chunk_at.document_id;
    if ids is null then
        return null;
    end if;
    -- 2. The document read whole, whitespace aside: its chunks one after the
    --    other, then (3.) with what each repeats of the one before left out.
    --    The text binds to the last chunk that starts at or before it.
    for pass in 1 .. 2 loop
        if pass = 1 then
            cuts := pg_catalog.array_fill(0, array[pg_catalog.cardinality(parts)]);
        else
            select pg_catalog.array_agg(case when i = 1 then 0 else sift._overlap(parts[i - 1], parts[i]) end
                                        order by i)
            into cuts
            from pg_catalog.generate_subscripts(parts, 1) as i;
            exit when (select pg_catalog.max(x) from pg_catalog.unnest(cuts) as x) = 0;
        end if;
        select pg_catalog.string_agg(pg_catalog.substr(parts[i], cuts[i] + 1), '' order by i),
               pg_catalog.array_agg(s.ends - pg_catalog.length(parts[i]) + 1 order by i)
        into whole, starts
        from (select i, pg_catalog.sum(pg_catalog.length(parts[i]) - cuts[i]) over (order by i) as ends
              from pg_catalog.generate_subscripts(parts, 1) as i) s;
        at := pg_catalog.strpos(whole, u);
        if at > 0 then
            select ids[i] into hit
            from pg_catalog.generate_subscripts(parts, 1) as i
            where starts[i] <= at and pg_catalog.length(parts[i]) > 0
            order by i desc
            limit 1;
            return hit;
        end if;
    end loop;
    return null;
end;
$$;
comment on function sift._chunk_at(bigint, text) is
    'Internal: the chunk of the document where the text is: the first that holds it verbatim, '
    'else, the document read whole (its chunks in order, whitespace aside, overlaps between '
    'chunks read once), the chunk it starts in; null when the document does not hold it.';


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
    col     sift.collections := sift._collection(rebind_golden_set.collection);
    gs      sift.golden_sets := sift._golden_set(col, rebind_golden_set.golden_set);
    g       record;
    p       record;
    doc     bigint;
    hit     bigint;
    uri     text;
    st      text;
    found_in record;
    doc_uri text;
    holds   boolean;
    words   text[];
    verbatim   bigint[];
    candidates bigint[];
    r_id    bigint[] := '{}';
    r_key   text[] := '{}';
    r_old   bigint[] := '{}';
    r_chunk bigint[] := '{}';
    r_uri   text[] := '{}';
    r_st    text[] := '{}';
begin
    -- One rebind of a set at a time (a document's positive adds and removes rows).
    perform 1 from sift.golden_sets s where s.golden_set_id = gs.golden_set_id for no key update;

    -- A positive given by its document alone is every chunk the document has
    -- now: its rows still on one of them are kept, the others take the chunks
    -- left over, a row is added for each chunk still without one, and the rows
    -- beyond the document's chunk count go. Without the document, not_found.
    for g in
        select gp.question_id, q.question_key, gp.source_uri, pg_catalog.max(gp.grade) as grade,
               pg_catalog.array_agg(gp.positive_id order by gp.positive_id) as ids,
               pg_catalog.array_agg(gp.chunk_id order by gp.positive_id) as chunk_ids
        from sift.golden_positives gp
        join sift.golden_questions q on q.question_id = gp.question_id
        where q.golden_set_id = gs.golden_set_id and gp.whole_document
        group by gp.question_id, q.question_key, gp.source_uri
        order by gp.question_id, gp.source_uri
    loop
        -- (a document without a chunk left binds nothing, as one that is gone)
        select d.document_id into doc
        from sift.documents d
        where d.collection_id = col.collection_id and d.source_uri = g.source_uri
          and exists (select 1 from sift.chunks c where c.document_id = d.document_id);
        for p in
            with mine as (
                select o.positive_id, o.chunk_id, o.n,
                       -- the first row on each chunk of the document stays on it
                       pg_catalog.row_number() over (partition by o.chunk_id order by o.n) = 1
                           and exists (select 1 from sift.chunks c
                                       where c.chunk_id = o.chunk_id and c.document_id = doc) as stays
                from rows from (pg_catalog.unnest(g.ids), pg_catalog.unnest(g.chunk_ids)) with ordinality
                         as o(positive_id, chunk_id, n)
            ), spare as (
                select m.positive_id, m.chunk_id, pg_catalog.row_number() over (order by m.n) as k
                from mine m where not m.stays
            ), free as (
                select c.chunk_id, c.content, pg_catalog.row_number() over (order by c.ordinal, c.chunk_id) as k
                from sift.chunks c
                where c.document_id = doc
                  and not exists (select 1 from mine m where m.stays and m.chunk_id = c.chunk_id)
            )
            select m.positive_id, m.chunk_id as old_chunk_id, m.chunk_id, null::text as content,
                   'kept' as status, 0::bigint as k
            from mine m where m.stays
            union all
            select s.positive_id, s.chunk_id, f.chunk_id, f.content,
                   case when f.chunk_id is not null then 'rebound'
                        when doc is null then 'not_found' else 'dropped' end, s.k
            from spare s left join free f on f.k = s.k
            union all
            select null::bigint, null::bigint, f.chunk_id, f.content, 'added', f.k
            from free f where f.k > (select pg_catalog.count(*) from spare)
            order by 6, 1, 3
        loop
            st := p.status;
            hit := p.positive_id;
            if st = 'dropped' then
                delete from sift.golden_positives gp where gp.positive_id = p.positive_id;
                continue;
            elsif st = 'added' then
                insert into sift.golden_positives as gp
                    (question_id, chunk_id, source_uri, content, grade, whole_document)
                values (g.question_id, p.chunk_id, g.source_uri, p.content, g.grade, true)
                returning gp.positive_id into hit;
                st := 'rebound';
            elsif st = 'rebound' then
                update sift.golden_positives gp set chunk_id = p.chunk_id, content = p.content
                where gp.positive_id = hit;
            elsif st = 'not_found' and p.old_chunk_id is not null then
                update sift.golden_positives gp set chunk_id = null where gp.positive_id = hit;
            end if;
            r_id := r_id || hit;
            r_key := r_key || g.question_key;
            r_old := r_old || p.old_chunk_id;
            r_chunk := r_chunk || case when st = 'not_found' then null else p.chunk_id end;
            r_uri := r_uri || g.source_uri;
            r_st := r_st || st;
        end loop;
    end loop;

    -- A positive given by text (or by chunk, which gave it its text) binds to
    -- the chunk that holds the text now, compared whitespace aside, or where it
    -- starts when the chunks split it: first its own chunk, then its own
    -- document, then the collection, where exactly one document must hold it.
    for p in
        select gp.positive_id, q.question_key, gp.chunk_id, gp.source_uri, gp.content
        from sift.golden_positives gp
        join sift.golden_questions q on q.question_id = gp.question_id
        where q.golden_set_id = gs.golden_set_id and not gp.whole_document
        order by gp.positive_id
    loop
        hit := null;
        uri := p.source_uri;
        st := 'not_found';
        -- kept: its chunk still holds the text, or is where it starts.
        select c.document_id, d.source_uri,
               pg_catalog.strpos(c.content, p.content) > 0
                   or pg_catalog.strpos(pg_catalog.regexp_replace(c.content, '\s+', '', 'g'),
                                        pg_catalog.regexp_replace(p.content, '\s+', '', 'g')) > 0
        into doc, doc_uri, holds
        from sift.chunks c join sift.documents d on d.document_id = c.document_id
        where c.chunk_id = p.chunk_id and c.collection_id = col.collection_id;
        if doc is not null then
            hit := case when holds then p.chunk_id else sift._chunk_at(doc, p.content) end;
            if hit = p.chunk_id then
                uri := doc_uri;
                st := 'kept';
            elsif hit is not null and doc_uri is not distinct from p.source_uri then
                st := 'rebound';     -- another chunk of its own document
            else
                hit := null;
            end if;
        end if;
        -- rebound: in its own document.
        if hit is null and p.source_uri is not null and doc_uri is distinct from p.source_uri then
            select d.document_id into doc
            from sift.documents d
            where d.collection_id = col.collection_id and d.source_uri = p.source_uri;
            if doc is not null then
                hit := sift._chunk_at(doc, p.content);
                st := case when hit is not null then 'rebound' else st end;
            end if;
        end if;
        -- Elsewhere in the collection, in one pass over its chunks: the
        -- documents with a chunk that holds it verbatim; when none does, the
        -- documents read whole that may hold it across chunks (a chunk holds
        -- one of its two longest words, and their chunks all its words but
        -- one: a cut may fall inside one).
        if hit is null and pg_catalog.regexp_replace(p.content, '\s+', '', 'g') <> '' then
            words := array(select t.w
                           from pg_catalog.regexp_split_to_table(p.content, '\s+') as t(w)
                           where t.w <> ''
                           group by t.w
                           order by pg_catalog.length(t.w) desc, t.w);
            select coalesce(pg_catalog.array_agg(distinct c.document_id)
                                filter (where pg_catalog.strpos(c.content, p.content) > 0), '{}'),
                   coalesce(pg_catalog.array_agg(distinct c.document_id), '{}')
            into verbatim, candidates
            from sift.chunks c
            where c.collection_id = col.collection_id
              and (pg_catalog.strpos(c.content, words[1]) > 0
                   or pg_catalog.strpos(c.content, coalesce(words[2], words[1])) > 0);
            if verbatim = '{}' and pg_catalog.cardinality(words) > 1 and candidates <> '{}' then
                verbatim := array(select k.document_id
                                  from sift.chunks k
                                  cross join pg_catalog.unnest(words) as t(w)
                                  where k.document_id = any (candidates) and pg_catalog.strpos(k.content, t.w) > 0
                                  group by k.document_id
                                  having pg_catalog.count(distinct t.w) >= pg_catalog.cardinality(words) - 1
                                  order by k.document_id);
            end if;
            select pg_catalog.count(*) as documents,
                   (pg_catalog.array_agg(x.chunk_id order by x.document_id))[1] as chunk_id,
                   (pg_catalog.array_agg(d.source_uri order by x.document_id))[1] as source_uri
            into found_in
            from (select v.document_id, sift._chunk_at(v.document_id, p.content) as chunk_id
                  from pg_catalog.unnest(verbatim) as v(document_id)) x
            join sift.documents d on d.document_id = x.document_id
            where x.chunk_id is not null;
            if found_in.documents = 1 then
                hit := found_in.chunk_id;
                st := case when p.source_uri is not null and p.source_uri <> found_in.source_uri then 'moved'
                           else 'rebound' end;
                uri := found_in.source_uri;
            elsif found_in.documents > 1 then
                st := 'ambiguous';
            end if;
        end if;
        if hit is distinct from p.chunk_id or uri is distinct from p.source_uri then
            update sift.golden_positives gp set chunk_id = hit, source_uri = uri
            where gp.positive_id = p.positive_id;
        end if;
        r_id := r_id || p.positive_id;
        r_key := r_key || p.question_key;
        r_old := r_old || p.chunk_id;
        r_chunk := r_chunk || hit;
        r_uri := r_uri || uri;
        r_st := r_st || st;
    end loop;

    return query
    select r.positive_id, r.question_key, r.old_chunk_id, r.chunk_id, r.source_uri, r.status
    from rows from (pg_catalog.unnest(r_id), pg_catalog.unnest(r_key), pg_catalog.unnest(r_old),
                    pg_catalog.unnest(r_chunk), pg_catalog.unnest(r_uri), pg_catalog.unnest(r_st))
             as r(positive_id, question_key, old_chunk_id, chunk_id, source_uri, status)
    order by r.positive_id;
end;
$$;
comment on function sift.rebind_golden_set(text, text) is
    'After re-chunking or re-ingesting: binds every positive of the golden set to the chunk that '
    'holds its text now, compared whitespace aside (chunkers trim and re-join it); a text the new '
    'chunks split binds to the chunk it starts in (the document read whole, its chunks in order, '
    'an overlap between two chunks read once). A positive given by its document alone '
    '(whole_document) becomes every chunk that document has now. Status per positive: kept (its '
    'chunk still holds the text), rebound (another chunk of its own document; else the only '
    'document that holds it; a document''s chunks, new rows included), moved (found only in a '
    'different document), ambiguous (several documents hold it verbatim, or, when none does, '
    'across chunks: left unbound rather than guessed), not_found (left unbound). Outside its own '
    'document, a text split across chunks is found when the cuts leave all its words whole but '
    'one. Writes.';


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
