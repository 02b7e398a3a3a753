-- Vector spaces: a collection's embeddings under more than one model, so it
-- can move to a new model or dimension without downtime.
-- In: a collection and a space's name, size, distance and vectors. Out: the
-- space's rows and index, its backfill's progress, the switch.
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
    -- Every collection starts with the row its writers and builders lock
    -- (sift._lock_collection), and its built-in space, active.
    insert into sift.collection_locks (collection_id) values (new.collection_id);
    insert into sift.vector_spaces (collection_id, name, dimensions, distance, builtin, active, dense_precision)
    values (new.collection_id, 'default', new.embedding_dims, new.distance, true, true,
            case when new.embedding_dims > 2000 then 'half' else 'full' end);
    return null;
end;
$$;
comment on function sift._collections_after_insert() is
    'Trigger: a new collection''s row of sift.collection_locks, and its built-in vector space '
    '(''default'', sift.chunks.embedding), active.';

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
    collection           text,
    space                text,
    dimensions           integer,
    distance             text default 'cosine',
    model                text default null,
    dense_precision      text default null,
    hnsw_m               integer default null,
    hnsw_ef_construction integer default null)
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
    insert into sift.vector_spaces (collection_id, name, dimensions, distance, model, dense_precision, hnsw_m,
                                    hnsw_ef_construction)
    values (col.collection_id, space, dimensions, distance, model,
            coalesce(add_vector_space.dense_precision, case when dimensions > 2000 then 'half' else 'full' end),
            add_vector_space.hnsw_m, add_vector_space.hnsw_ef_construction)
    returning * into created;
    perform sift._space_index(created);
    return created;
end;
$$;
comment on function sift.add_vector_space(text, text, integer, text, text, text, integer, integer) is
    'Adds a vector space to a collection (name, dimensions, distance, model) beside the active '
    'one, with its HNSW index (its own when dense_precision half, hnsw_m or hnsw_ef_construction '
    'are given, the operator''s); the first space of a size queues its index for the operator''s '
    'build unless the operator adds it (as sift.create_collection does; searched by exact scan '
    'meanwhile); nothing searches it until sift.switch_vector_space (or the '
    'dense_space knob). Fill it with sift.write_space_vectors. Writes (collection admins).';


create or replace function sift.write_space_vectors(
    collection text,
    space      text,
    chunk_ids  bigint[],
    embeddings @extschema:vector@.vector[])
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
    if target.builtin then
        -- The built-in space is the chunks' own column (filled again to switch
        -- back to it): a vector-only update, which re-analyses nothing.
        update sift.chunks k set embedding = u.e
        from unnest(chunk_ids, embeddings) as u(id, e)
        where k.chunk_id = u.id and k.collection_id = col.collection_id;
        get diagnostics written = row_count;
        return written;
    end if;
    -- A chunk deleted meanwhile (a document re-crawled during a backfill) is
    -- skipped, not an error: the row lock keeps the others from going before
    -- their vectors are in.
    insert into sift.chunk_vectors (space_id, chunk_id, collection_id, document_id, embedding)
    select target.space_id, k.chunk_id, 0, 0, u.e
    from unnest(chunk_ids, embeddings) as u(id, e)
    join (select c.chunk_id from sift.chunks c
          where c.chunk_id = any (chunk_ids) and c.collection_id = col.collection_id
          for key share) k on k.chunk_id = u.id
    on conflict (space_id, chunk_id) do update set embedding = excluded.embedding;
    get diagnostics written = row_count;
    if written < coalesce(cardinality(chunk_ids), 0) and exists (
        select 1 from unnest(chunk_ids) as u(id)
        join sift.chunks c on c.chunk_id = u.id and c.collection_id <> col.collection_id) then
        raise exception 'write_space_vectors: a chunk is not a chunk of collection "%"', col.name
            using errcode = 'SF006';
    end if;
    return written;
end;
$$;
comment on function sift.write_space_vectors(text, text, bigint[], @extschema:vector@.vector[]) is
    'Writes (or replaces) chunks'' vectors in a space (the built-in one: the chunks'' own column), '
    'up to 10,000 a call, and returns how many; a chunk deleted meanwhile is '
    'skipped, one of another collection is SF006, a vector of another size SF002. Writes.';


create or replace function sift.write_space_vectors(
    collection text,
    space      text,
    chunk_ids  bigint[],
    embeddings text[])
returns integer
language sql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- 0.1.0's signature (text vectors), kept so its clients write on through a
    -- rolling upgrade; to be dropped in 0.3.
    select sift.write_space_vectors(collection, space, chunk_ids, embeddings::@extschema:vector@.vector[])
$$;
comment on function sift.write_space_vectors(text, text, bigint[], text[]) is
    'Deprecated (0.1.0''s signature, dropped in 0.3): sift.write_space_vectors with the embeddings '
    'as pgvector text, cast to vector[]. Writes.';


create or replace function sift.missing_space_vectors(
    collection     text,
    space          text,
    max_count      integer default 1000,
    after_chunk_id bigint default null)
returns table (chunk_id bigint, document text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    target sift.vector_spaces := sift._space(sift._collection(missing_space_vectors.collection),
                                             missing_space_vectors.space);
begin
    -- What a backfill embeds next, in chunk order: the missing ones past
    -- after_chunk_id (a backfill walks the collection once, then goes round
    -- again from the start for chunks written meanwhile), so an interrupted
    -- backfill resumes where it stopped. The text is what the ingest embeds:
    -- context, blank line, content. Each chunk's vector is probed by key (a
    -- lateral with a limit stays a keyed probe whatever the statistics say).
    return query
    select k.chunk_id, sift.contextualize(k.context, k.content)
    from sift.chunks k
    left join lateral (select true as present from sift.chunk_vectors v
                       where not target.builtin and v.space_id = target.space_id and v.chunk_id = k.chunk_id
                       limit 1) v on true
    where k.collection_id = target.collection_id
      and (after_chunk_id is null or k.chunk_id > after_chunk_id)
      and case when target.builtin then k.embedding is null else v.present is null end
    order by k.chunk_id
    limit least(greatest(max_count, 0), 10000);
end;
$$;
comment on function sift.missing_space_vectors(text, text, integer, bigint) is
    'The chunks of a collection without a vector in a space, in chunk order past after_chunk_id '
    '(null: from the start), at most max_count (10,000), with the text to embed '
    '(sift.contextualize of context and content). Read-only.';


create or replace function sift.vector_space_status(collection text)
returns table (name text, dimensions integer, distance text, model text, builtin boolean, active boolean,
               chunks bigint, missing bigint, created_at timestamptz, dense_precision text, hnsw_m integer,
               hnsw_ef_construction integer, index_name text, index_built boolean)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    with c as (select sift._collection(vector_space_status.collection) as col)
    select s.name::text, s.dimensions, s.distance::text, s.model, s.builtin, s.active,
           (select count(*) from sift.chunks k where k.collection_id = s.collection_id),
           sift._space_missing(s), s.created_at, s.dense_precision, coalesce(s.hnsw_m, 16),
           coalesce(s.hnsw_ef_construction, 64), sift._space_index_name(s),
           pg_catalog.to_regclass('sift.' || sift._space_index_name(s)) is not null
    from c, sift.vector_spaces s
    where s.collection_id = (c.col).collection_id
    order by s.active desc, s.name, s.space_id
$$;
comment on function sift.vector_space_status(text) is
    'A collection''s vector spaces: dimensions, distance, model, whether built-in (stored with the '
    'chunks) and active (searched and written), its chunks and how many lack a vector in each, and '
    'its HNSW index: precision, m, ef_construction, the index''s name (its own, or the one '
    'shared by its size and distance) and whether it is built (false: it waits for the operator''s '
    'sift.ensure_dense_indexes, and the space is searched by exact scan). Read-only.';


create or replace function sift.switch_vector_space(collection text, space text)
returns sift.vector_spaces
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col     sift.collections := sift._collection(switch_vector_space.collection);
    target  sift.vector_spaces := sift._space(col, switch_vector_space.space);
    missing bigint;
    was     bigint;
begin
    -- Writers of the collection wait while it switches (each chunk write holds
    -- this lock shared): a chunk written between the count and the switch would
    -- otherwise lack a vector in the space searched.
    if pg_catalog.current_setting('transaction_isolation') <> 'read committed' then
        raise exception 'switch_vector_space runs at read committed: it must count what writers committed '
                        'while it waited' using errcode = 'SF003';
    end if;
    perform sift._lock_collection(col.collection_id, true);
    perform 1 from sift.vector_spaces s where s.collection_id = col.collection_id for update;
    select s.* into target from sift.vector_spaces s where s.space_id = target.space_id;
    if target.space_id is null then
        raise exception 'vector space "%" of collection "%" was dropped meanwhile', switch_vector_space.space,
            col.name using errcode = 'SF013';
    end if;
    missing := sift._space_missing(target);
    if missing > 0 then
        raise exception 'vector space "%" of collection "%" lacks vectors for % chunk(s): fill them first',
            target.name, col.name, missing
            using errcode = 'SF014',
                  hint = 'sift.missing_space_vectors lists them; sift.write_space_vectors writes them';
    end if;
    select s.space_id into was from sift.vector_spaces s where s.collection_id = col.collection_id and s.active;
    -- Two statements: the one-active index is checked row by row.
    update sift.vector_spaces s set active = false
    where s.collection_id = col.collection_id and s.active and s.space_id <> target.space_id;
    perform pg_catalog.set_config('pgsift.switching', target.space_id::text, true);
    update sift.vector_spaces s set active = true where s.space_id = target.space_id;
    perform pg_catalog.set_config('pgsift.switching', '', true);
    -- The collection's size and distance are the active space's: query vectors
    -- and written chunks are checked against them.
    update sift.collections c set embedding_dims = target.dimensions, distance = target.distance
    where c.collection_id = col.collection_id;
    -- Question vectors are the old space's model: they go (enrich again to have them back).
    if was is distinct from target.space_id then
        delete from sift.question_vectors q where q.collection_id = col.collection_id;
    end if;
    select s.* into target from sift.vector_spaces s where s.space_id = target.space_id;
    return target;
end;
$$;
comment on function sift.switch_vector_space(text, text) is
    'Makes a vector space the one searched and written, in one statement (searches running '
    'meanwhile finish on the old one): SF014 with the count while chunks lack a vector in it. '
    'The collection''s embedding_dims and distance become the space''s; its question vectors '
    '(sift.question_vectors, the old space''s model) are deleted. Writes (collection admins).';


create or replace function sift.drop_vector_space(collection text, space text)
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col    sift.collections := sift._collection(drop_vector_space.collection);
    target sift.vector_spaces := sift._space(col, drop_vector_space.space);
    gone   integer;
begin
    -- Ordered with switches (the same lock), and the space read again under
    -- it: a switch that made it active meanwhile wins.
    perform sift._lock_collection(col.collection_id, true);
    select s.* into target from sift.vector_spaces s where s.space_id = target.space_id for update;
    if target.space_id is null then
        return false;
    end if;
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
    delete from sift.vector_spaces s where s.space_id = target.space_id and not s.active;
    get diagnostics gone = row_count;
    -- Its own index, in the operator's session (one in use, or a tenant's
    -- drop: the operator's sift.ensure_dense_indexes drops it later).
    if sift._space_dedicated(target) and sift._is_operator(session_user) then
        perform sift._drop_orphan_indexes(sift._space_index_name(target));
    end if;
    return gone = 1;
end;
$$;
comment on function sift.drop_vector_space(text, text) is
    'Drops a vector space that is not the active one, with its vectors (the built-in one''s are '
    'cleared from the chunks). Writes (collection admins).';


create or replace function sift._vector_spaces_guard()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- The functions of this file keep a collection's spaces coherent; a
    -- direct write may change a space's model, nothing that would leave its
    -- vectors or the collection's size wrong.
    if tg_op = 'INSERT' then
        if (new.builtin or new.active) and pg_catalog.pg_trigger_depth() < 2 then
            raise exception 'a built-in or active vector space comes with its collection; add others with '
                            'sift.add_vector_space' using errcode = 'SF003';
        end if;
        if sift._space_dedicated(new) then
            perform sift._own_index_by_operator(current_user);
        end if;
        -- A size without its shared index: the operator's to build (a request,
        -- within the tenant's limits), whichever way the space was made.
        perform sift._request_dense_index(new);
        return new;
    end if;
    if tg_op = 'DELETE' then
        if old.active and exists (select 1 from sift.collections c where c.collection_id = old.collection_id) then
            raise exception 'vector space "%" is the one its collection searches: switch to another first',
                old.name using errcode = 'SF003';
        end if;
        return old;
    end if;
    if (new.collection_id, new.name, new.dimensions, new.distance, new.builtin)
       is distinct from (old.collection_id, old.name, old.dimensions, old.distance, old.builtin) then
        raise exception 'a vector space keeps its collection, name, dimensions, distance and kind: add another'
            using errcode = 'SF003';
    end if;
    -- Index options change only while the space is empty and has no index of
    -- its own (as it is made), and only by the operator: an index of its own
    -- is built on a table every tenant writes to.
    if (new.dense_precision, new.hnsw_m, new.hnsw_ef_construction)
       is distinct from (old.dense_precision, old.hnsw_m, old.hnsw_ef_construction) then
        perform sift._own_index_by_operator(current_user);
        if (sift._space_dedicated(old)
            and pg_catalog.to_regclass(pg_catalog.format('sift.%I', sift._space_index_name(old))) is not null)
           or (old.builtin and exists (select 1 from sift.chunks k
                                       where k.collection_id = old.collection_id and k.embedding is not null))
           or (not old.builtin and exists (select 1 from sift.chunk_vectors v where v.space_id = old.space_id)) then
            raise exception 'a vector space keeps the index options it was made with: add another space with new ones'
                using errcode = 'SF003';
        end if;
    end if;
    if new.active and not old.active
       and pg_catalog.current_setting('pgsift.switching', true) is distinct from new.space_id::text then
        raise exception 'a vector space becomes the active one through sift.switch_vector_space'
            using errcode = 'SF003';
    end if;
    return new;
end;
$$;
comment on function sift._vector_spaces_guard() is
    'Trigger: a space keeps its collection, name, size, distance and kind, and its index options '
    'once it holds vectors or its own index (only the operator gives it options of its own); the '
    'built-in and active ones come with their collection, the active one is never deleted, and activation goes through '
    'sift.switch_vector_space. A new space of a size whose shared HNSW index is missing, made by anyone '
    'but the operator, is a request for it (sift._request_dense_index).';

create or replace trigger vector_spaces_guard
    before insert or update or delete on sift.vector_spaces
    for each row execute function sift._vector_spaces_guard();
