-- pgsift core helpers: collection lookup, typed errors, write-time triggers.
-- Re-applied on every migrate (create or replace). The installer runs this
-- file with search_path = sift, <vector's schema>, pg_catalog, pg_temp, and
-- entry points capture that path with `set search_path from current`, so
-- `vector` and its operators resolve wherever the extension lives
-- (public here, `extensions` on Supabase).
--
-- Error codes (SQLSTATE class SF, mapped to typed errors by the Python client):
--   SF001 unknown collection         SF002 embedding dimension mismatch
--   SF003 invalid argument           SF004 unknown text-search language
--   SF005 chunk text is immutable    SF006 unknown document
--   SF007 collections searched together have different embedding sizes

create or replace function sift._collection(tenant text, collection text)
returns sift.collections
language plpgsql stable security invoker
set search_path from current
as $$
declare
    hit sift.collections;
begin
    select c.* into hit
    from sift.collections c
    where c.tenant = _collection.tenant and c.name = _collection.collection;
    if hit.collection_id is null then
        raise exception 'unknown collection "%" for tenant "%"', collection, tenant
            using errcode = 'SF001',
                  hint = 'create it with sift.create_collection(...) or check the tenant argument';
    end if;
    return hit;
end;
$$;
comment on function sift._collection(text, text) is
    'Internal: the collection row for (tenant, name); raises SF001 when it does not exist.';


create or replace function sift._check_dims(col sift.collections, embedding vector, what text)
returns void
language plpgsql immutable security invoker
set search_path from current
as $$
begin
    if embedding is not null and vector_dims(embedding) <> col.embedding_dims then
        raise exception '% has % dimensions; collection "%" expects %',
            what, vector_dims(embedding), col.name, col.embedding_dims
            using errcode = 'SF002';
    end if;
end;
$$;
comment on function sift._check_dims(sift.collections, vector, text) is
    'Internal: raises SF002 naming both dimensions when an embedding does not fit the collection.';


create or replace function sift._search_vector(
    language regconfig, title text, context text, content text)
returns tsvector
language sql immutable parallel safe security invoker
as $$
    -- A placeholder between fields, deleted again, leaves a one-position gap
    -- so a "quoted phrase" never matches across title, context and text.
    select pg_catalog.ts_delete(
        setweight(to_tsvector(language, coalesce(title, '')), 'A')
        || 'sift_gap:1'::tsvector
        || setweight(to_tsvector(language, coalesce(context, '')), 'B')
        || 'sift_gap:1'::tsvector
        || to_tsvector(language, coalesce(content, '')),
        'sift_gap'::text)
$$;
comment on function sift._search_vector(regconfig, text, text, text) is
    'Internal: the stored lexical representation of a chunk: document title (weight A), '
    'context header (B) and text (D), analysed with the collection''s language.';


create or replace function sift._lists_lock_key(collection_id bigint)
returns bigint
language sql immutable parallel safe security invoker
as $$
    select pg_catalog.hashtextextended('pgsift.term_lists', collection_id)
$$;
comment on function sift._lists_lock_key(bigint) is
    'Internal: the advisory lock key that orders chunk writers against impact-list builds.';


create or replace function sift._chunks_before_write()
returns trigger
language plpgsql security invoker
set search_path from current
as $$
declare
    col sift.collections;
    doc_title text;
begin
    -- Writers share this collection's lock; building impact lists takes it
    -- alone (sift.refresh_lexical_stats), so no chunk lands between a list's
    -- snapshot and the list becoming visible. Writers never wait on each other.
    perform pg_catalog.pg_advisory_xact_lock_shared(
        sift._lists_lock_key(case when tg_op = 'DELETE' then old.collection_id
                                  else (select d.collection_id from sift.documents d
                                        where d.document_id = new.document_id) end));
    if tg_op = 'DELETE' then
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

    select d.collection_id, d.title into new.collection_id, doc_title
    from sift.documents d
    where d.document_id = new.document_id;
    if new.collection_id is null then
        raise exception 'unknown document %', new.document_id using errcode = 'SF006';
    end if;

    select c.* into col from sift.collections c where c.collection_id = new.collection_id;
    perform sift._check_dims(col, new.embedding, 'chunk embedding');

    new.search_vector := sift._search_vector(col.search_language, doc_title, new.context, new.content);
    -- BM25's document length: the token positions in the stored vector.
    new.lexical_length := (select coalesce(sum(pg_catalog.array_length(u.positions, 1)), 0)
                           from pg_catalog.unnest(new.search_vector) u);
    -- A rough count (about four characters a token) when the writer gave none.
    new.token_count := coalesce(new.token_count, ceil(length(new.content) / 4.0)::integer);
    return new;
end;
$$;
comment on function sift._chunks_before_write() is
    'Trigger: fills collection_id and search_vector at write time, checks the embedding '
    'dimension, and refuses to rewrite chunk text.';

drop trigger if exists chunks_before_write on sift.chunks;
create trigger chunks_before_write
    before insert or update or delete on sift.chunks
    for each row execute function sift._chunks_before_write();


create or replace function sift._pgvector_has_iterative_scan()
returns boolean
language sql stable security invoker
as $$
    select coalesce(
        (select string_to_array(split_part(e.extversion, '-', 1), '.')::int[] >= array[0, 8]
         from pg_catalog.pg_extension e where e.extname = 'vector'),
        false)
$$;
comment on function sift._pgvector_has_iterative_scan() is
    'Internal: true when pgvector >= 0.8 (hnsw.iterative_scan exists; setting it on older '
    'versions is an error, so the dense leg asks first).';
