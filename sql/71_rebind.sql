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


create or replace function sift._rebind_documents(
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
    g   record;
    p   record;
    doc bigint;
    hit bigint;
    st  text;
begin
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
            positive_id := hit;
            question_key := g.question_key;
            old_chunk_id := p.old_chunk_id;
            chunk_id := case when st = 'not_found' then null else p.chunk_id end;
            source_uri := g.source_uri;
            status := st;
            return next;
        end loop;
    end loop;
end;
$$;
comment on function sift._rebind_documents(sift.collections, sift.golden_sets, bigint) is
    'Internal: sift._rebind''s positives given by their document alone (whole_document), '
    'rebound to every chunk the document has now (rows kept, rebound, added or deleted; '
    'not_found without the document); a row each, deleted rows left out. Writes.';


create or replace function sift._find_elsewhere(
    col sift.collections,
    txt text,
    out documents  bigint,
    out chunk_id   bigint,
    out source_uri text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    words      text[];
    verbatim   bigint[];
    candidates bigint[];
begin
    -- In one pass over the collection's chunks: the documents with a chunk
    -- that holds the text verbatim; when none does, the documents read whole
    -- that may hold it across chunks (a chunk holds one of its two longest
    -- words, and their chunks all its words but one: a cut may fall inside one).
    words := array(select t.w
                   from pg_catalog.regexp_split_to_table(txt, '\s+') as t(w)
                   where t.w <> ''
                   group by t.w
                   order by pg_catalog.length(t.w) desc, t.w);
    select coalesce(pg_catalog.array_agg(distinct c.document_id)
                        filter (where pg_catalog.strpos(c.content, txt) > 0), '{}'),
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
    -- Of those, the ones where sift._chunk_at finds it: how many, and the first.
    select pg_catalog.count(*),
           (pg_catalog.array_agg(x.chunk_id order by x.document_id))[1],
           (pg_catalog.array_agg(d.source_uri order by x.document_id))[1]
    into documents, chunk_id, source_uri
    from (select v.document_id, sift._chunk_at(v.document_id, txt) as chunk_id
          from pg_catalog.unnest(verbatim) as v(document_id)) x
    join sift.documents d on d.document_id = x.document_id
    where x.chunk_id is not null;
end;
$$;
comment on function sift._find_elsewhere(sift.collections, text) is
    'Internal: the documents of the collection that hold the text (verbatim in a chunk; when '
    'none does, read whole across chunks, all its words whole but one): how many, and the '
    'first''s chunk where it is (sift._chunk_at) and source_uri. The text has something besides '
    'whitespace.';


create or replace function sift._bind_text(
    col            sift.collections,
    old_chunk_id   bigint,
    old_source_uri text,
    txt            text,
    out chunk_id   bigint,
    out source_uri text,
    out status     text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    doc      bigint;
    doc_uri  text;
    holds    boolean;
    found_in record;
begin
    chunk_id := null;
    source_uri := old_source_uri;
    status := 'not_found';
    -- kept: its chunk still holds the text, or is where it starts.
    select c.document_id, d.source_uri,
           pg_catalog.strpos(c.content, txt) > 0
               or pg_catalog.strpos(pg_catalog.regexp_replace(c.content, '\s+', '', 'g'),
                                    pg_catalog.regexp_replace(txt, '\s+', '', 'g')) > 0
    into doc, doc_uri, holds
    from sift.chunks c join sift.documents d on d.document_id = c.document_id
    where c.chunk_id = old_chunk_id and c.collection_id = col.collection_id;
    if doc is not null then
        chunk_id := case when holds then old_chunk_id else sift._chunk_at(doc, txt) end;
        if chunk_id = old_chunk_id then
            source_uri := doc_uri;
            status := 'kept';
        elsif chunk_id is not null and doc_uri is not distinct from old_source_uri then
            status := 'rebound';     -- another chunk of its own document
        else
            chunk_id := null;
        end if;
    end if;
    -- rebound: in its own document.
    if chunk_id is null and old_source_uri is not null and doc_uri is distinct from old_source_uri then
        select d.document_id into doc
        from sift.documents d
        where d.collection_id = col.collection_id and d.source_uri = old_source_uri;
        if doc is not null then
            chunk_id := sift._chunk_at(doc, txt);
            status := case when chunk_id is not null then 'rebound' else status end;
        end if;
    end if;
    -- Elsewhere in the collection (sift._find_elsewhere): moved when only a
    -- document other than its own holds it, ambiguous when several do.
    if chunk_id is null and pg_catalog.regexp_replace(txt, '\s+', '', 'g') <> '' then
        found_in := sift._find_elsewhere(col, txt);
        if found_in.documents = 1 then
            chunk_id := found_in.chunk_id;
            status := case when old_source_uri is not null and old_source_uri <> found_in.source_uri then 'moved'
                           else 'rebound' end;
            source_uri := found_in.source_uri;
        elsif found_in.documents > 1 then
            status := 'ambiguous';
        end if;
    end if;
end;
$$;
comment on function sift._bind_text(sift.collections, bigint, text, text) is
    'Internal: where a positive given by text (and the chunk and source_uri it was bound to) '
    'binds now, as sift.rebind_golden_set says: its chunk (kept), else its own document '
    '(rebound), else the only document of the collection that holds it (rebound, or moved from '
    'another source_uri; ambiguous when several do); not_found, unbound, else. Reads only.';


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
    p       record;
    b       record;
    r_id    bigint[] := '{}';
    r_key   text[] := '{}';
    r_old   bigint[] := '{}';
    r_chunk bigint[] := '{}';
    r_uri   text[] := '{}';
    r_st    text[] := '{}';
begin
    -- One rebind of a set at a time (a document's positive adds and removes rows).
    perform 1 from sift.golden_sets s where s.golden_set_id = gs.golden_set_id for no key update;

    -- The positives given by their document alone first (sift._rebind_documents).
    for b in select * from sift._rebind_documents(col, gs, only_question) loop
        r_id := r_id || b.positive_id;
        r_key := r_key || b.question_key;
        r_old := r_old || b.old_chunk_id;
        r_chunk := r_chunk || b.chunk_id;
        r_uri := r_uri || b.source_uri;
        r_st := r_st || b.status;
    end loop;

    -- A positive given by text (or by chunk, which gave it its text) binds to
    -- the chunk that holds the text now, compared whitespace aside, or where it
    -- starts when the chunks split it: first its own chunk, then its own
    -- document, then the collection, where exactly one document must hold it
    -- (sift._bind_text finds it; here it is written).
    for p in
        select gp.positive_id, q.question_key, gp.chunk_id, gp.source_uri, gp.content
        from sift.golden_positives gp
        join sift.golden_questions q on q.question_id = gp.question_id
        where q.golden_set_id = gs.golden_set_id and not gp.whole_document
          and (only_question is null or q.question_id = only_question)
        order by gp.positive_id
    loop
        b := sift._bind_text(col, p.chunk_id, p.source_uri, p.content);
        if b.chunk_id is distinct from p.chunk_id or b.source_uri is distinct from p.source_uri then
            update sift.golden_positives gp set chunk_id = b.chunk_id, source_uri = b.source_uri
            where gp.positive_id = p.positive_id;
        end if;
        r_id := r_id || p.positive_id;
        r_key := r_key || p.question_key;
        r_old := r_old || p.chunk_id;
        r_chunk := r_chunk || b.chunk_id;
        r_uri := r_uri || b.source_uri;
        r_st := r_st || b.status;
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
