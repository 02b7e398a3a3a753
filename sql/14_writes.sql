-- Documents and chunks written and deleted: sift.write_chunks (with
-- sift.write_sections), sift.delete_document(s). In: a collection of the
-- current tenant and the rows, checked for one length. Out: rows in
-- sift.documents, sift.sections and sift.chunks, whose triggers
-- (sql/02_writes.sql, sql/25_lexical_stats.sql) keep the lexical vectors
-- and statistics.


create or replace function sift.delete_document(collection text, source_uri text)
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col sift.collections := sift._collection(collection);
begin
    delete from sift.documents d
    where d.collection_id = col.collection_id and d.source_uri = delete_document.source_uri;
    return found;
end;
$$;
comment on function sift.delete_document(text, text) is
    'Deletes one document (and its chunks) by source_uri; returns false if there was none. '
    'Statistics stay exact; run sift.refresh_lexical_stats after many deletions. Writes.';


create or replace function sift.delete_documents(
    collection    text,
    filter        jsonb default null,
    source_prefix text default null,
    delete_all    boolean default false,
    keep          text[] default null)
returns bigint
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col   sift.collections := sift._collection(collection);
    fpath jsonpath := sift.filter_path(filter);   -- SF003 for a malformed filter
    n     bigint;
begin
    -- A delete that names nothing would empty the collection: only on purpose.
    if source_prefix is not null and (pg_catalog.btrim(source_prefix) = '' or length(source_prefix) > 2048) then
        raise exception 'source_prefix must be a non-blank prefix of at most 2,048 characters'
            using errcode = 'SF003';
    end if;
    if fpath is null and source_prefix is null and not coalesce(delete_all, false) then
        raise exception 'delete_documents needs a filter or a source_prefix; it would delete every document '
                        'of collection "%"', col.name
            using errcode = 'SF003', hint = 'pass delete_all => true to empty the collection';
    end if;
    if cardinality(keep) > 1000000 then
        raise exception 'keep has % source_uris; at most 1,000,000', cardinality(keep) using errcode = 'SF003';
    end if;
    -- One statement: the chunks and sections go with their documents (cascade),
    -- and the chunks' delete trigger keeps the BM25 statistics exact.
    delete from sift.documents d
    where d.collection_id = col.collection_id
      and (fpath is null or pg_catalog.jsonb_path_match_tz(d.metadata, fpath, '{}', true))
      and (source_prefix is null or pg_catalog.starts_with(d.source_uri, source_prefix))
      and (keep is null or not (d.source_uri = any (keep)));
    get diagnostics n = row_count;
    -- A filter or prefix that happens to match every document empties the
    -- collection as surely as none: also only on purpose (the exception undoes it).
    if n > 0 and not coalesce(delete_all, false)
       and not exists (select 1 from sift.documents d where d.collection_id = col.collection_id) then
        raise exception 'delete_documents would delete all % documents of collection "%"', n, col.name
            using errcode = 'SF003', hint = 'pass delete_all => true to empty the collection';
    end if;
    return n;
end;
$$;
comment on function sift.delete_documents(text, jsonb, text, boolean, text[]) is
    'Deletes the documents (with their chunks and sections) whose metadata matches filter '
    '(sift.filter_path: equality, $gt, $in, $or, ...) and whose source_uri starts with '
    'source_prefix, in one statement, but those whose source_uri is in keep (a re-crawl: delete what is no longer there); returns '
    'how many. Neither filter nor source_prefix, or a call that would leave the collection empty: '
    'SF003 (nothing deleted) unless delete_all => true. Statistics '
    'stay exact; run sift.refresh_lexical_stats after many deletions. Writes.';


create or replace function sift._same_lengths(what text, lengths integer[])
returns void
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Parallel arrays: one row per index, so every array has the first one's length.
    if exists (select 1 from unnest(lengths) as l where coalesce(l, 0) <> coalesce(lengths[1], 0)) then
        raise exception '% needs arrays of one length (% document ids)', what, coalesce(lengths[1], 0)
            using errcode = 'SF003';
    end if;
end;
$$;
comment on function sift._same_lengths(text, integer[]) is
    'Internal: raises SF003 unless the parallel arrays of a write (their lengths given) are of one length.';


create or replace function sift.write_sections(
    document_ids    bigint[],
    ordinals        integer[],
    parent_ordinals integer[],
    levels          integer[],
    headings        text[])
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    written integer;
begin
    -- A document's heading tree, written before its chunks (which name their
    -- section by ordinal). The collection comes from the document, whose own
    -- policy decides whether the caller may see it.
    perform sift._same_lengths('write_sections', array[cardinality(document_ids), cardinality(ordinals),
                               cardinality(parent_ordinals), cardinality(levels), cardinality(headings)]);
    -- collection_id: set by the trigger from the document (SF006 for one that is not the tenant's).
    insert into sift.sections (document_id, ordinal, parent_ordinal, level, heading)
    select u.d, u.o, u.p, u.l, u.h
    from unnest(document_ids, ordinals, parent_ordinals, levels, headings) as u(d, o, p, l, h)
    order by u.d, u.o;   -- ids in document order
    get diagnostics written = row_count;
    return written;
end;
$$;
comment on function sift.write_sections(bigint[], integer[], integer[], integer[], text[]) is
    'Inserts the sections (heading tree) of existing documents, parallel arrays: each section''s '
    'place in its document, its enclosing section''s place (null at top level), its heading level '
    '(0: text before the first heading) and heading. Chunks then name their section by place '
    '(sift.write_chunks section_ordinals). Writes.';


create or replace function sift.write_chunks(
    document_ids     bigint[],
    ordinals         integer[],
    contents         text[],
    contexts         text[],
    token_counts     integer[],
    embeddings       @extschema:vector@.vector[],
    section_ordinals integer[] default null)
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    n integer := coalesce(cardinality(document_ids), 0);
    written integer;
    space sift.vector_spaces;
    col_id bigint;
    ids   bigint[];
    vecs  @extschema:vector@.vector[];
begin
    -- COPY is refused on a table with row-level security for every role the policies
    -- apply to; this is its equivalent for them: one statement for a batch of chunks
    -- (the client sends the vectors in binary).
    perform sift._same_lengths('write_chunks', array[n, cardinality(ordinals), cardinality(contents),
                               cardinality(contexts), cardinality(token_counts), cardinality(embeddings),
                               coalesce(cardinality(section_ordinals), n)]);
    if section_ordinals is not null and exists (
        select 1
        from unnest(document_ids, section_ordinals) as u(d, so)
        where u.so is not null
          and not exists (select 1 from sift.sections s where s.document_id = u.d and s.ordinal = u.so)) then
        raise exception 'write_chunks: a chunk names a section its document does not have'
            using errcode = 'SF003', hint = 'write the sections first (sift.write_sections)';
    end if;
    -- The vectors are the active space's: with the chunks when it is the
    -- built-in one, else in sift.chunk_vectors. Taken after this collection's
    -- writer lock, so a space switch never falls between the two.
    select d.collection_id into col_id from sift.documents d where d.document_id = document_ids[1];
    if col_id is not null then
        -- (Once for the statement: the trigger finds it held.)
        perform sift._lock_collection(col_id);
        -- Locked: under repeatable read a switch committed meanwhile is a
        -- serialization failure (retry), never chunks written to the old space.
        select s.* into space from sift.vector_spaces s where s.collection_id = col_id and s.active for share;
    end if;
    if space.space_id is null or space.builtin then
        insert into sift.chunks (document_id, ordinal, content, context, token_count, embedding, section_id)
        select u.d, u.o, u.c, u.x, u.t, u.e,
               (select s.section_id from sift.sections s where s.document_id = u.d and s.ordinal = u.so)
        from unnest(document_ids, ordinals, contents, contexts, token_counts, embeddings,
                    coalesce(section_ordinals, pg_catalog.array_fill(null::integer, array[n])))
             as u(d, o, c, x, t, e, so);
        get diagnostics written = row_count;
        return written;
    end if;
    if exists (select 1 from unnest(embeddings) as u(e) where u.e is null) then
        raise exception 'write_chunks: every chunk needs an embedding' using errcode = 'SF003';
    end if;
    if exists (select 1 from sift.documents d where d.document_id = any (document_ids)
               and d.collection_id <> space.collection_id) then
        raise exception 'write_chunks: one call writes chunks of one collection when it searches an added '
                        'vector space' using errcode = 'SF003';
    end if;
    with written_chunks as (
        insert into sift.chunks (document_id, ordinal, content, context, token_count, embedding, section_id)
        select u.d, u.o, u.c, u.x, u.t, null,
               (select s.section_id from sift.sections s where s.document_id = u.d and s.ordinal = u.so)
        from unnest(document_ids, ordinals, contents, contexts, token_counts,
                    coalesce(section_ordinals, pg_catalog.array_fill(null::integer, array[n])))
             as u(d, o, c, x, t, so)
        returning chunk_id, document_id, ordinal
    )
    select pg_catalog.array_agg(w.chunk_id order by w.chunk_id), pg_catalog.array_agg(u.e order by w.chunk_id)
    into ids, vecs
    from written_chunks w
    join unnest(document_ids, ordinals, embeddings) as u(d, o, e) on u.d = w.document_id and u.o = w.ordinal;
    -- A statement of its own: its trigger reads the chunks just written.
    insert into sift.chunk_vectors (space_id, chunk_id, collection_id, document_id, embedding)
    select space.space_id, u.id, 0, 0, u.e
    from unnest(ids, vecs) as u(id, e);
    return coalesce(cardinality(ids), 0);
end;
$$;
comment on function sift.write_chunks(bigint[], integer[], text[], text[], integer[], @extschema:vector@.vector[],
                                      integer[]) is
    'Inserts a batch of chunks of existing documents (parallel arrays; embeddings a vector[], '
    'in binary from a client, or typed: ''{"[0.1,0.2]"}''::vector[], since an untyped literal '
    'also fits the deprecated text[] signature; section_ordinals: each chunk''s section, by its '
    'place in the document, or '
    'null): the statement a role under row-level security uses where COPY is refused. The '
    'trigger checks each (dimension, zero vector, size) and fills its lexical columns. The '
    'embeddings are the active vector space''s: stored with the chunks for the built-in one, '
    'in sift.chunk_vectors for an added one. Writes.';


create or replace function sift.write_chunks(
    document_ids     bigint[],
    ordinals         integer[],
    contents         text[],
    contexts         text[],
    token_counts     integer[],
    embeddings       text[],
    section_ordinals integer[] default null)
returns integer
language sql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- 0.1.0's signature (text vectors), kept so its clients write on through a
    -- rolling upgrade; to be dropped in 0.3.
    select sift.write_chunks(document_ids, ordinals, contents, contexts, token_counts,
                             embeddings::@extschema:vector@.vector[], section_ordinals)
$$;
comment on function sift.write_chunks(bigint[], integer[], text[], text[], integer[], text[], integer[]) is
    'Deprecated (0.1.0''s signature, dropped in 0.3): sift.write_chunks with the embeddings as '
    'pgvector text, cast to vector[]. Writes.';
