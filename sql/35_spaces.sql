-- Vector spaces: a collection's embeddings under more than one model, so it
-- can move to a new model or dimension without downtime.
--
--   1. sift.add_vector_space: a space beside the active one (its own partial
--      HNSW index per dimension and distance, in sift.chunk_vectors);
--   2. sift.missing_space_vectors / sift.write_space_vectors: backfill in
--      batches, resumable (what is missing is always what is asked for);
--      searches keep using the active space meanwhile, and one that names
--      the filling space (the dense_space knob) says how many chunks it lacks;
--   3. sift.switch_vector_space: one statement, refused while vectors are
--      missing (with the count); writers then give the new space's vectors;
--   4. sift.drop_vector_space: the old one goes (never the active one).


create or replace function sift._space(col sift.collections, space text)
returns sift.vector_spaces
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    found sift.vector_spaces;
begin
    -- A named space of the collection, else its active one.
    select s.* into found
    from sift.vector_spaces s
    where s.collection_id = col.collection_id
      and case when space is null then s.active else s.name = space end;
    if found.space_id is null then
        raise exception 'collection "%" has no vector space "%"', col.name, coalesce(left(space, 128), '(active)')
            using errcode = 'SF013',
                  hint = 'its spaces: ' || coalesce((select string_agg(s.name, ', ' order by s.name)
                                                     from sift.vector_spaces s
                                                     where s.collection_id = col.collection_id), 'none');
    end if;
    return found;
end;
$$;
comment on function sift._space(sift.collections, text) is
    'Internal: a collection''s vector space by name (null: the active one); SF013 when it has none '
    'of that name.';


create or replace function sift._space_missing(space sift.vector_spaces)
returns bigint
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Chunks of the space's collection without a vector in it: two counts, no
    -- join (an added space's vectors are all of that collection's chunks: the
    -- trigger and the cascade see to it), so no plan can turn it quadratic on
    -- a collection the statistics have not seen yet.
    select case when space.builtin
                then (select count(*) from sift.chunks k
                      where k.collection_id = space.collection_id and k.embedding is null)
                else (select count(*) from sift.chunks k where k.collection_id = space.collection_id)
                     - (select count(*) from sift.chunk_vectors v where v.space_id = space.space_id) end
$$;
comment on function sift._space_missing(sift.vector_spaces) is
    'Internal: how many chunks of the collection have no vector in this space.';


create or replace function sift._collections_after_insert()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Every collection starts with its built-in space, active.
    insert into sift.vector_spaces (collection_id, name, dimensions, distance, builtin, active)
    values (new.collection_id, 'default', new.embedding_dims, new.distance, true, true);
    return null;
end;
$$;
comment on function sift._collections_after_insert() is
    'Trigger: a new collection''s built-in vector space (''default'', sift.chunks.embedding), active.';

create or replace trigger collections_after_insert
    after insert on sift.collections
    for each row execute function sift._collections_after_insert();


create or replace function sift._chunk_vectors_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    space sift.vector_spaces;
begin
    -- The collection and document are the chunk's, as the caller sees it (a
    -- chunk of another tenant is invisible), and the space must be one of
    -- that collection's added spaces; the vector must fit it.
    select k.collection_id, k.document_id into new.collection_id, new.document_id
    from sift.chunks k where k.chunk_id = new.chunk_id;
    select s.* into space from sift.vector_spaces s where s.space_id = new.space_id;
    if new.collection_id is null or space.space_id is null or space.collection_id <> new.collection_id then
        raise exception 'chunk % is not a chunk of the collection of vector space %', new.chunk_id, new.space_id
            using errcode = 'SF006';
    end if;
    if space.builtin then
        raise exception 'the built-in space is stored with the chunks (sift.write_chunks)' using errcode = 'SF003';
    end if;
    perform sift._check_dims(space.dimensions, space.distance, format('space "%s"', space.name), new.embedding,
                             format('the vector of chunk %s', new.chunk_id));
    return new;
end;
$$;
comment on function sift._chunk_vectors_before_write() is
    'Trigger: a chunk vector''s collection and document are its chunk''s (SF006 for a chunk that is '
    'not of the space''s collection, or not the tenant''s); its size must be the space''s (SF002).';

create or replace trigger chunk_vectors_before_write
    before insert or update on sift.chunk_vectors
    for each row execute function sift._chunk_vectors_before_write();


create or replace function sift.add_vector_space(
    collection text,
    space      text,
    dimensions integer,
    distance   text default 'cosine',
    model      text default null)
returns sift.vector_spaces
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col     sift.collections := sift._collection(add_vector_space.collection);
    created sift.vector_spaces;
begin
    if dimensions is null or dimensions not between 1 and 4000 then
        raise exception 'dimensions must be between 1 and 4000 (pgvector''s HNSW limit on halfvec), got %',
            coalesce(dimensions::text, 'null') using errcode = 'SF003';
    end if;
    if exists (select 1 from sift.vector_spaces s where s.collection_id = col.collection_id and s.name = space) then
        raise exception 'collection "%" already has a vector space "%"', col.name, space using errcode = 'SF003';
    end if;
    insert into sift.vector_spaces (collection_id, name, dimensions, distance, model)
    values (col.collection_id, space, dimensions, distance, model)
    returning * into created;
    perform sift._ensure_dense_index(created.dimensions, created.distance);
    return created;
end;
$$;
comment on function sift.add_vector_space(text, text, integer, text, text) is
    'Adds a vector space to a collection (name, dimensions, distance, model) beside the active '
    'one, with its HNSW index; nothing searches it until sift.switch_vector_space (or the '
    'dense_space knob). Fill it with sift.write_space_vectors. Writes (collection admins).';


create or replace function sift.write_space_vectors(
    collection text,
    space      text,
    chunk_ids  bigint[],
    embeddings text[])
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col     sift.collections := sift._collection(write_space_vectors.collection);
    target  sift.vector_spaces := sift._space(col, write_space_vectors.space);
    written integer;
begin
    perform sift._same_lengths('write_space_vectors', array[coalesce(cardinality(chunk_ids), 0),
                                                            coalesce(cardinality(embeddings), 0)]);
    if cardinality(chunk_ids) > 10000 then
        raise exception 'write_space_vectors takes at most 10,000 vectors a call, got %', cardinality(chunk_ids)
            using errcode = 'SF003';
    end if;
    insert into sift.chunk_vectors (space_id, chunk_id, collection_id, document_id, embedding)
    select target.space_id, u.id, 0, 0, u.e::@extschema:vector@.vector
    from unnest(chunk_ids, embeddings) as u(id, e)
    on conflict (space_id, chunk_id) do update set embedding = excluded.embedding;
    get diagnostics written = row_count;
    return written;
end;
$$;
comment on function sift.write_space_vectors(text, text, bigint[], text[]) is
    'Writes (or replaces) chunks'' vectors in an added space, up to 10,000 a call (pgvector text '
    'form); a chunk of another collection or tenant is SF006, a vector of another size SF002. Writes.';


create or replace function sift.missing_space_vectors(
    collection text,
    space      text,
    max_count  integer default 1000)
returns table (chunk_id bigint, document text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    target sift.vector_spaces := sift._space(sift._collection(missing_space_vectors.collection),
                                             missing_space_vectors.space);
begin
    -- What a backfill embeds next: always the missing ones, so an interrupted
    -- backfill resumes where it stopped and chunks written meanwhile are
    -- picked up. The text is what the ingest embeds: context, blank line, content.
    return query
    -- Each chunk's vector probed by key (a lateral with a limit stays a keyed
    -- probe whatever the statistics say of a freshly loaded collection).
    select k.chunk_id, sift.contextualize(k.context, k.content)
    from sift.chunks k
    left join lateral (select true as present from sift.chunk_vectors v
                       where not target.builtin and v.space_id = target.space_id and v.chunk_id = k.chunk_id
                       limit 1) v on true
    where k.collection_id = target.collection_id
      and case when target.builtin then k.embedding is null else v.present is null end
    order by k.chunk_id
    limit least(greatest(max_count, 0), 10000);
end;
$$;
comment on function sift.missing_space_vectors(text, text, integer) is
    'The chunks of a collection without a vector in a space, in chunk order, at most max_count '
    '(10,000), with the text to embed (sift.contextualize of context and content). Read-only.';


create or replace function sift.vector_space_status(collection text)
returns table (name text, dimensions integer, distance text, model text, builtin boolean, active boolean,
               chunks bigint, missing bigint, created_at timestamptz)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    with c as (select sift._collection(vector_space_status.collection) as col)
    select s.name::text, s.dimensions, s.distance::text, s.model, s.builtin, s.active,
           (select count(*) from sift.chunks k where k.collection_id = s.collection_id),
           sift._space_missing(s), s.created_at
    from c, sift.vector_spaces s
    where s.collection_id = (c.col).collection_id
    order by s.active desc, s.name, s.space_id
$$;
comment on function sift.vector_space_status(text) is
    'A collection''s vector spaces: dimensions, distance, model, whether built-in (stored with the '
    'chunks) and active (searched and written), its chunks and how many lack a vector in each. '
    'Read-only.';


create or replace function sift.switch_vector_space(collection text, space text)
returns sift.vector_spaces
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col     sift.collections := sift._collection(switch_vector_space.collection);
    target  sift.vector_spaces := sift._space(col, switch_vector_space.space);
    missing bigint;
begin
    -- Writers of the collection wait while it switches (each chunk write holds
    -- this lock shared): a chunk written between the count and the switch would
    -- otherwise lack a vector in the space searched.
    perform pg_catalog.pg_advisory_xact_lock(sift._lists_lock_key(col.collection_id));
    missing := sift._space_missing(target);
    if missing > 0 then
        raise exception 'vector space "%" of collection "%" lacks vectors for % chunk(s): fill them first',
            target.name, col.name, missing
            using errcode = 'SF014',
                  hint = 'sift.missing_space_vectors lists them; sift.write_space_vectors writes them';
    end if;
    update sift.vector_spaces s set active = (s.space_id = target.space_id)
    where s.collection_id = col.collection_id and (s.active or s.space_id = target.space_id);
    -- The collection's size and distance are the active space's: query vectors
    -- and written chunks are checked against them.
    update sift.collections c set embedding_dims = target.dimensions, distance = target.distance
    where c.collection_id = col.collection_id;
    select s.* into target from sift.vector_spaces s where s.space_id = target.space_id;
    return target;
end;
$$;
comment on function sift.switch_vector_space(text, text) is
    'Makes a vector space the one searched and written, in one statement (searches running '
    'meanwhile finish on the old one): SF014 with the count while chunks lack a vector in it. '
    'The collection''s embedding_dims and distance become the space''s. Writes (collection admins).';


create or replace function sift.drop_vector_space(collection text, space text)
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col    sift.collections := sift._collection(drop_vector_space.collection);
    target sift.vector_spaces := sift._space(col, drop_vector_space.space);
begin
    if target.active then
        raise exception 'vector space "%" is the one collection "%" searches: switch to another first',
            target.name, col.name using errcode = 'SF003';
    end if;
    if target.builtin then
        -- The built-in vectors are the chunks' own column: cleared (an update
        -- that changes no text leaves the BM25 statistics alone).
        update sift.chunks k set embedding = null
        where k.collection_id = col.collection_id and k.embedding is not null;
    end if;
    delete from sift.vector_spaces s where s.space_id = target.space_id;
    return true;
end;
$$;
comment on function sift.drop_vector_space(text, text) is
    'Drops a vector space that is not the active one, with its vectors (the built-in one''s are '
    'cleared from the chunks). Writes (collection admins).';
