-- Evaluation: a golden set's questions added from SQL (sift.add_golden_question,
-- which the Python import calls too). In: a collection, its golden set and a
-- question with its positives (texts, chunk ids, documents; graded). Out: the
-- question and its positives, bound to the chunks that hold them
-- (sql/71_rebind.sql binds), or a typed error (SF003) before anything is
-- written.

create or replace function sift._check_golden_question(
    what text, question_key text, question text, positives jsonb, answerable boolean, metadata jsonb)
returns void
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    if question_key is null or pg_catalog.btrim(question_key, E' \t\n\r\f\v') = '' then
        raise exception 'a question has a blank key' using errcode = 'SF003';
    end if;
    if question is null or pg_catalog.btrim(question, E' \t\n\r\f\v') = '' then
        raise exception '% has no text', what using errcode = 'SF003';
    end if;
    if answerable is null then
        raise exception '%: answerable must be true or false', what using errcode = 'SF003';
    end if;
    if metadata is null or pg_catalog.jsonb_typeof(metadata) <> 'object' then
        raise exception '%: metadata must be a JSON object', what using errcode = 'SF003';
    end if;
    if positives is null or pg_catalog.jsonb_typeof(positives) <> 'array' then
        raise exception '%: positives must be a JSON array', what using errcode = 'SF003',
            hint = 'e.g. ''[{"text": "paid within 14 days"}, {"chunk_id": 17, "grade": 2}, {"source_uri": "a.md"}]''';
    end if;
    if answerable and pg_catalog.jsonb_array_length(positives) = 0 then
        raise exception '% has no positive: give one, or mark it as having no answer in the collection', what
            using errcode = 'SF003', hint = 'answerable => false';
    end if;
    if not answerable and pg_catalog.jsonb_array_length(positives) > 0 then
        raise exception '% is marked as having no answer but has positives', what using errcode = 'SF003';
    end if;
end;
$$;
comment on function sift._check_golden_question(text, text, text, jsonb, boolean, jsonb) is
    'Internal: sift.add_golden_question''s arguments checked before anything is read (SF003): a key, '
    'a text, answerable true or false, metadata an object, positives an array, none for a question '
    'with no answer and at least one for the others; what names the question in the messages.';


create or replace function sift._golden_positive(
    col sift.collections, what text, p jsonb, skip_missing boolean,
    out chunk_ids bigint[], out uris text[], out texts text[], out whole boolean[], out grade integer,
    out missing text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    kind     text := pg_catalog.jsonb_typeof(p);
    txt      text;
    chunk    bigint;
    uri      text;
    fallback text;
    k        record;
    found_it boolean := false;
begin
    -- One positive as the rows it stands for: by chunk (its text, or the text
    -- given when the chunk holds it, and its document), by text (a chunk id
    -- that does not hold it, from an export of another collection, is
    -- ignored), by document (each of its chunks), or unbound by fallback_text
    -- when the collection lacks the document (missing: a document left out
    -- by skip_missing).
    grade := 1;
    chunk_ids := '{}';
    uris := '{}';
    texts := '{}';
    whole := '{}';
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
    if chunk is not null then
        select c.content, d.source_uri into k
        from sift.chunks c
        join sift.documents d on d.document_id = c.document_id
        where c.chunk_id = chunk and c.collection_id = col.collection_id;
        found_it := found and (txt is null or pg_catalog.strpos(k.content, txt) > 0);
    end if;
    if found_it then
        chunk_ids := array[chunk];
        uris := array[coalesce(uri, k.source_uri)];
        texts := array[coalesce(txt, k.content)];
        whole := array[false];
    elsif chunk is not null and txt is null then
        raise exception '%: chunk % is not in collection "%"', what, chunk, col.name
            using errcode = 'SF003', hint = 'give the positive''s text to bind it by text';
    elsif txt is not null then
        chunk_ids := array[null::bigint];
        uris := array[uri];
        texts := array[txt];
        whole := array[false];
    else
        select pg_catalog.array_agg(c.chunk_id order by c.ordinal, c.chunk_id),
               pg_catalog.array_agg(c.content order by c.ordinal, c.chunk_id)
        into chunk_ids, texts
        from sift.documents d
        join sift.chunks c on c.document_id = d.document_id
        where d.collection_id = col.collection_id and d.source_uri = uri;
        if chunk_ids is not null then
            uris := pg_catalog.array_fill(uri, array[pg_catalog.cardinality(chunk_ids)]);
            whole := pg_catalog.array_fill(true, array[pg_catalog.cardinality(chunk_ids)]);
        elsif uri is not null and pg_catalog.btrim(coalesce(fallback, ''), E' \t\n\r\f\v') <> '' then
            chunk_ids := array[null::bigint];
            uris := array[uri];
            texts := array[fallback];
            whole := array[true];
        elsif uri is not null and skip_missing then
            missing := uri;
            chunk_ids := '{}';
            texts := '{}';
        else
            raise exception '%: document "%" is not in collection "%"', what, uri, col.name
                using errcode = 'SF003',
                      hint = 'give the positive''s text (or fallback_text) to import it unbound, '
                             'or skip_missing => true to leave it out';
        end if;
    end if;
end;
$$;
comment on function sift._golden_positive(sift.collections, text, jsonb, boolean) is
    'Internal: one positive of sift.add_golden_question (a text, or an object with text, chunk_id, '
    'source_uri, grade, fallback_text) checked (SF003) and made the rows it stands for in the '
    'collection: a chunk, a text to bind, every chunk of a document, or an unbound fallback; '
    'missing: the document skip_missing leaves out.';


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
    a        record;
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
    perform sift._check_golden_question(what, add_golden_question.question_key, add_golden_question.question,
                                        add_golden_question.positives, add_golden_question.answerable,
                                        add_golden_question.metadata);
    perform sift._check_vector(col, add_golden_question.embedding,
                               pg_catalog.format('the embedding of %s', what));
    if exists (select 1 from sift.golden_questions q
               where q.golden_set_id = gs.golden_set_id and q.question_key = add_golden_question.question_key) then
        raise exception '% is already in golden set "%"', what, gs.name
            using errcode = 'SF003', hint = 'give each question its own key (replace the set to start again)';
    end if;

    -- Each positive as the rows it stands for (sift._golden_positive); the same
    -- row given twice is kept once, in its first place, with the higher grade
    -- (and a document's row stays one).
    for a in select g.* from pg_catalog.jsonb_array_elements(add_golden_question.positives) with ordinality as e(p, o)
             cross join lateral sift._golden_positive(col, what, e.p, add_golden_question.skip_missing) g
             order by e.o loop
        if a.missing is not null then
            missing := missing || a.missing;
        end if;
        for n in 1 .. coalesce(pg_catalog.cardinality(a.texts), 0) loop
            j := null;
            for i in 1 .. pg_catalog.cardinality(r_text) loop
                if r_text[i] = a.texts[n] and r_chunk[i] is not distinct from a.chunk_ids[n]
                   and (a.chunk_ids[n] is not null or r_uri[i] is not distinct from a.uris[n]) then
                    j := i;
                    exit;
                end if;
            end loop;
            if j is null then
                r_chunk := r_chunk || a.chunk_ids[n];
                r_uri := r_uri || a.uris[n];
                r_text := r_text || a.texts[n];
                r_grade := r_grade || a.grade;
                r_whole := r_whole || a.whole[n];
            else
                r_whole[j] := r_whole[j] or a.whole[n];
                if r_grade[j] < a.grade then
                    r_uri[j] := a.uris[n];
                    r_grade[j] := a.grade;
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
