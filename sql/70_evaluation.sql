-- Evaluation: golden sets (labelled questions with their positive chunks).
-- Everything but embedding a question and calling a hosted reranker is in SQL,
-- for psql and the Python package alike (which reads files, embeds, reranks
-- and calls these). In: a collection and its questions with positives by text,
-- chunk id or document. Out: the set, checked to stay within its tenant.
-- Adding questions: sql/70_golden_questions.sql; rebinding after a re-chunk:
-- sql/71_rebind.sql; scoring and the run history: sql/72_scoring.sql; tuning:
-- sql/73_tuning.sql.

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
