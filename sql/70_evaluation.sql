-- Evaluation: golden sets (labelled questions with their positive chunks)
-- and the history of evaluation runs. Everything but embedding a question
-- and calling a hosted reranker is here, for psql and the Python package
-- alike (which reads files, embeds, reranks and calls these): creating and
-- filling a set, rebinding its positives after a re-chunk, scoring a
-- collection against it (pgsift.metrics' definitions), and the run history
-- with each run's delta.

create or replace function sift._golden_set(col sift.collections, golden_set text)
returns sift.golden_sets
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    hit   sift.golden_sets;
    names text[];
begin
    if golden_set is null then
        -- No name: the collection's only set.
        select pg_catalog.array_agg(s.name::text order by s.name, s.golden_set_id) into names
        from sift.golden_sets s
        where s.collection_id = col.collection_id;
        if names is null then
            raise exception 'collection "%" has no golden set', col.name
                using errcode = 'SFG01',
                      hint = 'import one with `pgsift golden import`, or sift.create_golden_set(...)';
        elsif pg_catalog.cardinality(names) > 1 then
            raise exception 'collection "%" has % golden sets (%): name one', col.name,
                pg_catalog.cardinality(names), pg_catalog.array_to_string(names, ', ')
                using errcode = 'SF003';
        end if;
        select s.* into hit
        from sift.golden_sets s
        where s.collection_id = col.collection_id;
        return hit;
    end if;
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
    'Internal: the golden set of that name in the collection (null: its only one); raises SFG01 '
    'when there is none, SF003 when no name is given and the collection has several.';


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


create or replace function sift._rebind(
    col           sift.collections,
    gs            sift.golden_sets,
    only_question bigint)
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
          and (only_question is null or q.question_id = only_question)
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
          and (only_question is null or q.question_id = only_question)
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
comment on function sift._rebind(sift.collections, sift.golden_sets, bigint) is
    'Internal: sift.rebind_golden_set''s work on a set (only_question: that question''s positives '
    'alone; null: every positive of the set).';


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
declare
    col sift.collections := sift._collection(rebind_golden_set.collection);
begin
    return query select * from sift._rebind(col, sift._golden_set(col, rebind_golden_set.golden_set), null);
end;
$$;
comment on function sift.rebind_golden_set(text, text) is
    'After re-chunking or re-ingesting: binds every positive of the golden set (null: the '
    'collection''s only one) to the chunk that '
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


-- Golden sets from SQL: create, fill, list and drop them without the Python
-- package (which calls these same functions).

create or replace function sift.list_golden_sets(collection text)
returns table (
    golden_set_id     bigint,
    name              text,
    judged_at         text,
    source            text,
    description       text,
    created_at        timestamptz,
    questions         integer,
    unanswerable      integer,
    positives         integer,
    unbound           integer,
    without_embedding integer)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col sift.collections := sift._collection(list_golden_sets.collection);
begin
    return query
    select s.golden_set_id, s.name::text, s.judged_at, s.source, s.description, s.created_at,
           coalesce(qs.questions, 0)::integer, coalesce(qs.unanswerable, 0)::integer,
           coalesce(ps.positives, 0)::integer, coalesce(ps.unbound, 0)::integer,
           coalesce(qs.without_embedding, 0)::integer
    from sift.golden_sets s
    left join lateral (
        select pg_catalog.count(*) as questions,
               pg_catalog.count(*) filter (where not q.answerable) as unanswerable,
               pg_catalog.count(*) filter (where q.embedding is null) as without_embedding
        from sift.golden_questions q
        where q.golden_set_id = s.golden_set_id) qs on true
    left join lateral (
        select pg_catalog.count(*) as positives,
               pg_catalog.count(*) filter (where p.chunk_id is null) as unbound
        from sift.golden_positives p
        join sift.golden_questions q on q.question_id = p.question_id
        where q.golden_set_id = s.golden_set_id) ps on true
    where s.collection_id = col.collection_id
    order by s.name, s.golden_set_id;
end;
$$;
comment on function sift.list_golden_sets(text) is
    'The golden sets of a collection, by name: how they are judged (chunk or document), where '
    'they came from, and their counts: questions, unanswerable (marked as having no answer), '
    'positives, unbound (positives no chunk holds now: sift.rebind_golden_set) and '
    'without_embedding (questions without a stored query vector). Read-only.';


create or replace function sift.create_golden_set(
    collection  text,
    golden_set  text,
    judged_at   text default 'chunk',
    source      text default null,
    description text default null,
    replace     boolean default false)
returns bigint
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col sift.collections := sift._collection(create_golden_set.collection);
    id  bigint;
begin
    if create_golden_set.judged_at is null or create_golden_set.judged_at not in ('chunk', 'document') then
        raise exception 'judged_at must be chunk or document, got %', coalesce(create_golden_set.judged_at, 'null')
            using errcode = 'SF003',
                  hint = 'chunk scores the chunks a search returns; document scores their documents (BEIR)';
    end if;
    if create_golden_set.replace then
        -- Its questions go with it; its runs stay in the history, by name.
        delete from sift.golden_sets s
        where s.collection_id = col.collection_id and s.name = create_golden_set.golden_set;
    elsif exists (select 1 from sift.golden_sets s
                  where s.collection_id = col.collection_id and s.name = create_golden_set.golden_set) then
        raise exception 'golden set "%" already exists in collection "%"', create_golden_set.golden_set, col.name
            using errcode = 'unique_violation', constraint = 'golden_sets_collection_name_key',
                  hint = 'replace => true replaces it (its run history stays)';
    end if;
    insert into sift.golden_sets as s (collection_id, name, judged_at, source, description)
    values (col.collection_id, create_golden_set.golden_set, create_golden_set.judged_at,
            create_golden_set.source, create_golden_set.description)
    returning s.golden_set_id into id;
    return id;
end;
$$;
comment on function sift.create_golden_set(text, text, text, text, text, boolean) is
    'Creates an empty golden set of the collection and returns its id: judged_at chunk (a '
    'search''s chunks are scored) or document (their documents, once each: BEIR judgments), '
    'source and description for the record. A name taken is 23505 unless replace, which deletes '
    'that set and its questions first (its runs stay in the history). Add questions with '
    'sift.add_golden_question. Writes.';


create or replace function sift.drop_golden_set(collection text, golden_set text)
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col sift.collections := sift._collection(drop_golden_set.collection);
begin
    delete from sift.golden_sets s
    where s.collection_id = col.collection_id and s.name = drop_golden_set.golden_set;
    return found;
end;
$$;
comment on function sift.drop_golden_set(text, text) is
    'Deletes a golden set of the collection with its questions and positives; its evaluation '
    'runs stay in the history (sift.eval_history), by name. False when there was none. Writes.';


create or replace function sift.add_golden_question(
    collection   text,
    golden_set   text,
    question_key text,
    question     text,
    positives    jsonb default '[]',
    answerable   boolean default true,
    embedding    @extschema:vector@.vector default null,
    metadata     jsonb default '{}',
    skip_missing boolean default false,
    bind         boolean default true)
returns table (question_id bigint, positives_added integer, skipped text[])
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    col      sift.collections := sift._collection(add_golden_question.collection);
    gs       sift.golden_sets := sift._golden_set(col, add_golden_question.golden_set);
    what     text := pg_catalog.format('question "%s"', pg_catalog.left(add_golden_question.question_key, 200));
    p        jsonb;
    kind     text;
    txt      text;
    chunk    bigint;
    uri      text;
    grade    integer;
    fallback text;
    k        record;
    found_it boolean;
    a_chunk  bigint[];
    a_uri    text[];
    a_text   text[];
    a_whole  boolean[];
    r_chunk  bigint[] := '{}';
    r_uri    text[] := '{}';
    r_text   text[] := '{}';
    r_grade  integer[] := '{}';
    r_whole  boolean[] := '{}';
    missing  text[] := '{}';
    qid      bigint;
    i        integer;
    j        integer;
    n        integer;
begin
    if add_golden_question.question_key is null
       or pg_catalog.btrim(add_golden_question.question_key, E' \t\n\r\f\v') = '' then
        raise exception 'a question has a blank key' using errcode = 'SF003';
    end if;
    if add_golden_question.question is null or pg_catalog.btrim(add_golden_question.question, E' \t\n\r\f\v') = '' then
        raise exception '% has no text', what using errcode = 'SF003';
    end if;
    if add_golden_question.answerable is null then
        raise exception '%: answerable must be true or false', what using errcode = 'SF003';
    end if;
    if add_golden_question.metadata is null or pg_catalog.jsonb_typeof(add_golden_question.metadata) <> 'object' then
        raise exception '%: metadata must be a JSON object', what using errcode = 'SF003';
    end if;
    if add_golden_question.positives is null or pg_catalog.jsonb_typeof(add_golden_question.positives) <> 'array' then
        raise exception '%: positives must be a JSON array', what using errcode = 'SF003',
            hint = 'e.g. ''[{"text": "paid within 14 days"}, {"chunk_id": 17, "grade": 2}, {"source_uri": "a.md"}]''';
    end if;
    if add_golden_question.answerable and pg_catalog.jsonb_array_length(add_golden_question.positives) = 0 then
        raise exception '% has no positive: give one, or mark it as having no answer in the collection', what
            using errcode = 'SF003', hint = 'answerable => false';
    end if;
    if not add_golden_question.answerable and pg_catalog.jsonb_array_length(add_golden_question.positives) > 0 then
        raise exception '% is marked as having no answer but has positives', what using errcode = 'SF003';
    end if;
    perform sift._check_vector(col, add_golden_question.embedding,
                               pg_catalog.format('the embedding of %s', what));
    if exists (select 1 from sift.golden_questions q
               where q.golden_set_id = gs.golden_set_id and q.question_key = add_golden_question.question_key) then
        raise exception '% is already in golden set "%"', what, gs.name
            using errcode = 'SF003', hint = 'give each question its own key (replace the set to start again)';
    end if;

    -- Each positive as the rows it stands for: given by chunk (its text and document
    -- come along; with a text, only when the chunk holds it), by text (bound below, as
    -- sift.rebind_golden_set binds), or by its document alone (every chunk it has, or
    -- unbound with fallback_text when the collection does not have it). The same row
    -- given twice is kept once, with the higher grade.
    for p in select e.value from pg_catalog.jsonb_array_elements(add_golden_question.positives) as e loop
        kind := pg_catalog.jsonb_typeof(p);
        chunk := null;
        uri := null;
        fallback := null;
        grade := 1;
        if kind = 'string' then
            txt := p #>> '{}';
        elsif kind = 'object' then
            if exists (select 1 from pg_catalog.jsonb_object_keys(p) as x(key)
                       where x.key not in ('text', 'content', 'chunk_id', 'source_uri', 'grade', 'fallback_text')) then
                raise exception '%: unknown positive field(s) %', what,
                    (select pg_catalog.string_agg(x.key, ', ' order by x.key)
                     from pg_catalog.jsonb_object_keys(p) as x(key)
                     where x.key not in ('text', 'content', 'chunk_id', 'source_uri', 'grade', 'fallback_text'))
                    using errcode = 'SF003',
                          hint = 'a positive has text, chunk_id, source_uri, grade (and fallback_text)';
            end if;
            txt := coalesce(p ->> 'text', p ->> 'content');
            if p ? 'chunk_id' and pg_catalog.jsonb_typeof(p -> 'chunk_id') <> 'null' then
                if pg_catalog.jsonb_typeof(p -> 'chunk_id') <> 'number' or (p ->> 'chunk_id') !~ '^[0-9]{1,18}$' then
                    raise exception '%: chunk_id must be an integer, got %', what, pg_catalog.left(p ->> 'chunk_id', 40)
                        using errcode = 'SF003';
                end if;
                chunk := (p ->> 'chunk_id')::bigint;
            end if;
            uri := p ->> 'source_uri';
            fallback := p ->> 'fallback_text';
            if p ? 'grade' and pg_catalog.jsonb_typeof(p -> 'grade') <> 'null' then
                if pg_catalog.jsonb_typeof(p -> 'grade') <> 'number' or (p ->> 'grade') !~ '^[0-9]{1,9}$'
                   or (p ->> 'grade')::integer < 1 then
                    raise exception '%: grade must be an integer >= 1, got %', what, pg_catalog.left(p ->> 'grade', 40)
                        using errcode = 'SF003';
                end if;
                grade := (p ->> 'grade')::integer;
            end if;
        else
            raise exception '%: a positive is a text or an object, got %', what, kind using errcode = 'SF003';
        end if;
        if txt is not null and pg_catalog.btrim(txt, E' \t\n\r\f\v') = '' then
            txt := null;
        end if;
        if chunk is null and coalesce(uri, '') = '' and txt is null then
            raise exception '%: a positive needs a text, a chunk_id or a source_uri', what using errcode = 'SF003';
        end if;

        uri := nullif(uri, '');
        -- The rows it stands for (a_*), as Python's import did: by chunk (its text, or the
        -- text given when the chunk holds it, and its document), by text (a chunk id that
        -- does not hold it, from an export of another collection, is ignored), by document
        -- (each of its chunks), or unbound by fallback_text when the collection lacks it.
        a_chunk := '{}';
        a_uri := '{}';
        a_text := '{}';
        a_whole := '{}';
        found_it := false;
        if chunk is not null then
            select c.content, d.source_uri into k
            from sift.chunks c
            join sift.documents d on d.document_id = c.document_id
            where c.chunk_id = chunk and c.collection_id = col.collection_id;
            found_it := found and (txt is null or pg_catalog.strpos(k.content, txt) > 0);
        end if;
        if found_it then
            a_chunk := array[chunk];
            a_uri := array[coalesce(uri, k.source_uri)];
            a_text := array[coalesce(txt, k.content)];
            a_whole := array[false];
        elsif chunk is not null and txt is null then
            raise exception '%: chunk % is not in collection "%"', what, chunk, col.name
                using errcode = 'SF003', hint = 'give the positive''s text to bind it by text';
        elsif txt is not null then
            a_chunk := array[null::bigint];
            a_uri := array[uri];
            a_text := array[txt];
            a_whole := array[false];
        else
            select pg_catalog.array_agg(c.chunk_id order by c.ordinal, c.chunk_id),
                   pg_catalog.array_agg(c.content order by c.ordinal, c.chunk_id)
            into a_chunk, a_text
            from sift.documents d
            join sift.chunks c on c.document_id = d.document_id
            where d.collection_id = col.collection_id and d.source_uri = uri;
            if a_chunk is not null then
                a_uri := pg_catalog.array_fill(uri, array[pg_catalog.cardinality(a_chunk)]);
                a_whole := pg_catalog.array_fill(true, array[pg_catalog.cardinality(a_chunk)]);
            elsif uri is not null and pg_catalog.btrim(coalesce(fallback, ''), E' \t\n\r\f\v') <> '' then
                a_chunk := array[null::bigint];
                a_uri := array[uri];
                a_text := array[fallback];
                a_whole := array[true];
            elsif uri is not null and add_golden_question.skip_missing then
                missing := missing || uri;
                a_chunk := '{}';
                a_text := '{}';
            else
                raise exception '%: document "%" is not in collection "%"', what, uri, col.name
                    using errcode = 'SF003',
                          hint = 'give the positive''s text (or fallback_text) to import it unbound, '
                                 'or skip_missing => true to leave it out';
            end if;
        end if;
        -- Each row once: given again, it keeps its place and takes the higher grade (and a
        -- document's row stays one).
        for n in 1 .. coalesce(pg_catalog.cardinality(a_text), 0) loop
            j := null;
            for i in 1 .. pg_catalog.cardinality(r_text) loop
                if r_text[i] = a_text[n] and r_chunk[i] is not distinct from a_chunk[n]
                   and (a_chunk[n] is not null or r_uri[i] is not distinct from a_uri[n]) then
                    j := i;
                    exit;
                end if;
            end loop;
            if j is null then
                r_chunk := r_chunk || a_chunk[n];
                r_uri := r_uri || a_uri[n];
                r_text := r_text || a_text[n];
                r_grade := r_grade || grade;
                r_whole := r_whole || a_whole[n];
            else
                r_whole[j] := r_whole[j] or a_whole[n];
                if r_grade[j] < grade then
                    r_uri[j] := a_uri[n];
                    r_grade[j] := grade;
                end if;
            end if;
        end loop;
    end loop;

    -- Every positive was a document the collection does not have: the question is left out.
    if add_golden_question.answerable and pg_catalog.cardinality(r_text) = 0 then
        return query select null::bigint, 0, missing;
        return;
    end if;
    insert into sift.golden_questions as q (golden_set_id, question_key, question, answerable, embedding, metadata)
    values (gs.golden_set_id, add_golden_question.question_key, add_golden_question.question,
            add_golden_question.answerable, add_golden_question.embedding, add_golden_question.metadata)
    returning q.question_id into qid;
    insert into sift.golden_positives (question_id, chunk_id, source_uri, content, grade, whole_document)
    select qid, r.chunk_id, r.source_uri, r.content, r.grade, r.whole
    from rows from (pg_catalog.unnest(r_chunk), pg_catalog.unnest(r_uri), pg_catalog.unnest(r_text),
                    pg_catalog.unnest(r_grade), pg_catalog.unnest(r_whole))
             with ordinality as r(chunk_id, source_uri, content, grade, whole, n)
    order by r.n;
    if add_golden_question.bind then
        perform 1 from sift._rebind(col, gs, qid);
    end if;
    return query select qid, pg_catalog.cardinality(r_text), missing;
end;
$$;
comment on function sift.add_golden_question(text, text, text, text, jsonb, boolean, @extschema:vector@.vector,
    jsonb, boolean, boolean) is
    'Adds a question to a golden set with its positives, a JSON array of: a text (bound to the '
    'chunk that holds it, as sift.rebind_golden_set binds), {"chunk_id": 17} (a chunk of the '
    'collection; its text and document come along), {"source_uri": "a.md"} (every chunk of that '
    'document; with fallback_text, unbound when the collection does not have it), each with an '
    'optional "grade" (1 by default; higher is more relevant). answerable => false marks a '
    'question the collection cannot answer (no positive). embedding is its query vector (the '
    'collection''s size), metadata a JSON object. A document the collection lacks is SF003 '
    'unless skip_missing, which leaves it out (skipped) and the question too when nothing is '
    'left (question_id null). bind => false leaves text positives unbound until '
    'sift.rebind_golden_set runs (a bulk import binds once at the end). Writes.';


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
