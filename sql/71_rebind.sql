-- Golden positives rebound after a re-chunk: sift.rebind_golden_set. In: a
-- golden set whose positives name chunk text, documents or chunk ids. Out:
-- each positive bound to the chunks that hold its text now (whitespace
-- aside; text the new chunks split binds where it starts), a document
-- positive to every chunk of its document, the rest not_found.


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
