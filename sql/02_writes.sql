-- Writes: the lock every writer of a collection takes and the row triggers
-- of chunks, documents and sections. In: the rows an insert, update or
-- delete brings. Out: those rows checked (sizes, nesting, language), each
-- chunk's stored lexical vector (sift._search_vector, kept in step with its
-- document's title and language), writers ordered behind an index build.


create or replace function sift._lock_collection(collection_id bigint, builder boolean default false)
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    txn  text := pg_catalog.pg_current_xact_id()::text;
    held text := pg_catalog.current_setting('pgsift.collection_locks', true);
begin
    -- The collection's row of sift.collection_locks, which row-level security
    -- shows to its own tenant only (and no other table references, so no
    -- foreign key check locks it past the policies): another tenant can
    -- neither see nor lock it. Row locks last until the transaction ends, as
    -- the advisory locks before them did, and are released with a
    -- subtransaction that rolls back.
    if builder then
        -- Alone on the collection: first the mark a writer's probe (below)
        -- waits on, which writers' key share locks do not conflict with, then
        -- the lock itself once the writers holding it have committed. A
        -- writer arriving meanwhile waits behind the build instead of
        -- overtaking it (row share locks would starve a waiting build).
        perform 1 from sift.collection_locks l where l.collection_id = _lock_collection.collection_id
        for no key update;
        perform 1 from sift.collection_locks l where l.collection_id = _lock_collection.collection_id
        for update;
    else
        -- A writer: once per transaction and collection (the mark below),
        -- not once per chunk.
        if held like txn || ':%,' || collection_id::text || ',%' then
            return;
        end if;
        -- Waits while a build holds or awaits the collection (its mark
        -- conflicts with share), then lets go at once: the probe alone would
        -- hold the build off.
        begin
            perform 1 from sift.collection_locks l where l.collection_id = _lock_collection.collection_id
            for share;
            raise sqlstate 'SFLCK';
        exception when sqlstate 'SFLCK' then
            null;
        end;
        perform 1 from sift.collection_locks l where l.collection_id = _lock_collection.collection_id
        for key share;
    end if;
    if not found then
        -- No row: the collection is gone, or going in this very transaction
        -- (a drop's cascade deletes its chunks): nothing left to order.
        if exists (select 1 from sift.collections c where c.collection_id = _lock_collection.collection_id) then
            raise exception 'collection % has no row in sift.collection_locks', collection_id
                using errcode = 'XX000', hint = 'run pgsift migrate (0018 makes the rows)';
        end if;
        return;
    end if;
    -- The mark says which collections this transaction holds (a build holds
    -- more than a writer needs). Marked with the transaction's id: a value a
    -- session-level SET left on a pooled connection names another
    -- transaction and is ignored. Transaction-local, and undone with the
    -- subtransaction that took the lock.
    perform pg_catalog.set_config('pgsift.collection_locks',
        case when held like txn || ':%' then held else txn || ':,' end || collection_id::text || ',', true);
end;
$$;
comment on function sift._lock_collection(bigint, boolean) is
    'Internal: locks the collection''s row of sift.collection_locks until the transaction ends: '
    'for key share for a chunk writer (writers run together; once per transaction, waiting while a '
    'build holds or awaits the collection), for update for a builder (refresh, space switch or '
    'drop, collection drop: alone, after the writers holding it commit, ahead of writers arriving '
    'meanwhile). Row-level security keeps each tenant to its own collections'' rows.';


create or replace function sift._chunks_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col      sift.collections;
    doc_title text;
    doc_language text;
    limit_bytes integer;
    vector_changed boolean;
    builtin  sift.vector_spaces;
begin
    -- Writers share this collection's lock; building impact lists takes it
    -- alone (sift.refresh_lexical_stats), so no chunk lands between a list's
    -- snapshot and the list becoming visible. Writers never wait on each other.
    -- Taken once per transaction and collection: the mark sift._lock_collection
    -- leaves is read here, so a chunk after the first costs no lock query.
    if tg_op = 'DELETE' then
        if coalesce(pg_catalog.current_setting('pgsift.collection_locks', true), '')
           not like pg_catalog.pg_current_xact_id()::text || ':%,' || old.collection_id::text || ',%' then
            perform sift._lock_collection(old.collection_id);
        end if;
        return old;
    end if;
    if tg_op = 'UPDATE' then
        if new.content is distinct from old.content then
            raise exception 'chunk text is never rewritten (chunk %)', old.chunk_id
                using errcode = 'SF005',
                      hint = 'replace the whole document instead (Client.upsert_documents)';
        end if;
        if new.document_id is distinct from old.document_id then
            raise exception 'a chunk cannot move to another document (chunk %)', old.chunk_id
                using errcode = 'SF003';
        end if;
    end if;

    select d.collection_id, d.title, d.language into new.collection_id, doc_title, doc_language
    from sift.documents d
    where d.document_id = new.document_id;
    if new.collection_id is null then
        raise exception 'unknown document %', new.document_id using errcode = 'SF006';
    end if;
    if coalesce(pg_catalog.current_setting('pgsift.collection_locks', true), '')
       not like pg_catalog.pg_current_xact_id()::text || ':%,' || new.collection_id::text || ',%' then
        perform sift._lock_collection(new.collection_id);
    end if;

    select c.* into col from sift.collections c where c.collection_id = new.collection_id;
    if tg_op = 'INSERT' then
        limit_bytes := sift._stored_knob(col, 'max_chunk_bytes')::integer;
        if octet_length(new.content) > limit_bytes then
            raise exception 'chunk % of document % has % bytes of text; collection "%" takes at most %',
                new.ordinal, new.document_id, octet_length(new.content), col.name, limit_bytes
                using errcode = 'SF003',
                      hint = 'cut it into smaller chunks, or raise the collection''s max_chunk_bytes';
        end if;
    end if;
    vector_changed := tg_op = 'INSERT' or (new.embedding is null) <> (old.embedding is null)
                      or not coalesce(new.embedding operator(@extschema:vector@.=) old.embedding, true);
    if vector_changed then
        -- The chunk's own column holds the built-in space's vectors: given when
        -- that space is the active one, else never (the active space's vectors
        -- go to sift.chunk_vectors, as sift.write_chunks does).
        select s.* into builtin from sift.vector_spaces s where s.collection_id = col.collection_id and s.builtin;
        if builtin.active or builtin.space_id is null then
            if new.embedding is null then
                raise exception 'chunk % of document % has no embedding', new.ordinal, new.document_id
                    using errcode = 'SF003';
            end if;
            perform sift._check_vector(col, new.embedding, format('the embedding of chunk %s', new.ordinal));
        elsif new.embedding is not null and tg_op = 'INSERT' then
            raise exception 'collection "%" searches an added vector space: write chunks with '
                            'sift.write_chunks, which stores their vectors there', col.name
                using errcode = 'SF003';
        elsif new.embedding is not null then
            -- Filling the built-in space while another is active (to switch back).
            perform sift._check_dims(builtin.dimensions, builtin.distance,
                                     format('the built-in space of collection "%s"', col.name), new.embedding,
                                     format('the embedding of chunk %s', new.ordinal));
        end if;
    end if;
    -- A chunk's section is one of its own document's (which the caller can see).
    if new.section_id is not null and not exists (
        select 1 from sift.sections s where s.section_id = new.section_id and s.document_id = new.document_id) then
        raise exception 'section % is not a section of chunk %''s document %', new.section_id, new.ordinal,
            new.document_id using errcode = 'SF003';
    end if;

    -- Only the vector changed (a space dropped, a vector replaced): nothing to
    -- re-analyse, and the lexical columns stay as they were, whatever the
    -- writer put there. (Re-analysis sets the context to itself and keeps the vector.)
    if tg_op = 'UPDATE' and vector_changed and new.context is not distinct from old.context
       and new.section_id is not distinct from old.section_id then
        new.search_vector := old.search_vector;
        new.lexical_length := old.lexical_length;
        return new;
    end if;
    -- The document's language picks the configuration; without one, the collection's.
    new.search_vector := sift._search_vector(coalesce(sift.language_config(doc_language), col.search_language),
                                             doc_title, new.context, new.content);
    new.lexical_length := (select coalesce(sum(array_length(u.positions, 1)), 0)
                           from unnest(new.search_vector) u);
    -- A rough count (about four characters a token) when the writer gave none.
    new.token_count := coalesce(new.token_count, ceil(length(new.content) / 4.0)::integer);
    return new;
end;
$$;
comment on function sift._chunks_before_write() is
    'Trigger: fills collection_id, search_vector and lexical_length at write time; refuses a '
    'wrong embedding size, a zero vector in a cosine collection, text past max_chunk_bytes, and '
    'rewriting chunk text.';

-- create or replace: re-applying it never locks out readers (PostgreSQL 14+).
create or replace trigger chunks_before_write
    before insert or update or delete on sift.chunks
    for each row execute function sift._chunks_before_write();


create or replace function sift._documents_after_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- A document in a language the collection has not seen: its configuration
    -- joins the ones the lexical leg parses queries with. Recorded even when it
    -- is the collection's search_language today, which may change.
    insert into sift.collection_configs (collection_id, config)
    select new.collection_id, sift.language_config(new.language)
    where new.language is not null
    on conflict do nothing;
    return null;
end;
$$;
comment on function sift._documents_after_write() is
    'Trigger: records the text search configuration of a document''s language in '
    'sift.collection_configs (the lexical leg parses queries with each).';

create or replace trigger documents_after_write
    after insert or update of language on sift.documents
    for each row execute function sift._documents_after_write();


create or replace function sift._documents_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Metadata nested past the limit is refused: a filter could not reach it, and a
    -- client reading it back (Python's json, most JSON parsers) recurses once a level.
    perform sift._check_nesting(new.metadata, pg_catalog.format('the metadata of document "%s"', new.source_uri));
    return new;
end;
$$;
comment on function sift._documents_before_write() is
    'Trigger: refuses (SF003) a document whose metadata nests more than 64 levels deep '
    '(sift._check_nesting).';

create or replace trigger documents_before_write
    before insert or update of metadata on sift.documents
    for each row execute function sift._documents_before_write();


create or replace function sift._sections_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- The collection is the document's, as the caller sees it: a document of
    -- another tenant (invisible under row-level security) has none.
    select d.collection_id into new.collection_id
    from sift.documents d
    where d.document_id = new.document_id;
    if new.collection_id is null then
        raise exception 'unknown document %', new.document_id using errcode = 'SF006';
    end if;
    return new;
end;
$$;
comment on function sift._sections_before_write() is
    'Trigger: a section''s collection_id is its document''s (one the caller can see), never the '
    'writer''s word: SF006 for a document that is not the tenant''s.';

create or replace trigger sections_before_write
    before insert or update on sift.sections
    for each row execute function sift._sections_before_write();
