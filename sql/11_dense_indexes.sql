-- Dense indexes: one partial HNSW index per (dimension, distance) shared by
-- every collection of that size, or a space's own (other options). In: a
-- vector space. Out: the index it walks, built by the operator's session as
-- the tables' owner, with its walk function (sift._ensure_walks); a tenant's
-- call names it and never builds.


create or replace function sift._set_search_vector_storage(dims integer)
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    saved text := pg_catalog.current_setting('lock_timeout');
begin
    -- Search vectors stay in the chunks' rows (storage main, migration 0018)
    -- while every embedding there fits 1,024 dimensions: past that, a long
    -- chunk's row (over ~8 kB) would move its embedding out of line instead,
    -- and every exact scan and distance would read it back. So a built-in
    -- space of more dimensions puts them out of line again, once, for rows
    -- written from then on. Called by the index builders, as the table's
    -- owner, after their builds.
    if dims is null or dims <= 1024
       or not exists (select 1 from pg_catalog.pg_attribute a
                      where a.attrelid = 'sift.chunks'::pg_catalog.regclass and a.attname = 'search_vector'
                        and a.attstorage = 'm') then
        return;
    end if;
    -- The switch locks the table against every tenant's searches until the
    -- transaction ends, which a tenant's admin must not be able to hold
    -- open: only the operator's session switches. Others get a notice (and
    -- pgsift doctor a warning) until the operator runs ensure_dense_indexes.
    if not sift._is_operator(session_user) then
        raise notice 'search vectors stay in the chunks'' rows: only the operator moves them out of line'
            using hint = 'long chunks'' embeddings of ' || dims || ' dimensions are stored out of line until '
                         'the operator runs select sift.ensure_dense_indexes()';
        return;
    end if;
    -- It waits at most a second for the table (or the caller's shorter
    -- lock_timeout): searches queue behind it while it waits.
    perform pg_catalog.set_config('lock_timeout',
                                  case when saved::interval > '0'::interval and saved::interval < '1s'::interval
                                       then saved else '1s' end, true);
    begin
        alter table sift.chunks alter column search_vector set storage extended;
    exception when lock_not_available then
        raise warning 'search vectors stay in the chunks'' rows for now: the table was busy'
            using hint = 'long chunks'' embeddings of ' || dims || ' dimensions are stored out of line until '
                         'then; run select sift.ensure_dense_indexes() when searches are quiet';
    end;
    perform pg_catalog.set_config('lock_timeout', saved, true);
end;
$$;
comment on function sift._set_search_vector_storage(integer) is
    'Internal, writes: for a built-in space of more than 1,024 dimensions, stores sift.chunks'' search '
    'vectors out of line from now on (storage extended), so a long chunk''s row moves them out and '
    'keeps its embedding. Only in the operator''s session (the table is locked against searches until '
    'commit), waiting at most 1 s for it, else a warning (sift.ensure_dense_indexes tries again); '
    'others get a notice. Run by the index builders as the table''s owner; granted to no role.';


create or replace function sift._dense_index_missing(dims integer, distance text, added_only boolean)
returns boolean
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The shared HNSW indexes of a (dimension, distance) that
    -- sift._ensure_dense_index builds, by name: on sift.chunks (unless only
    -- added spaces have the size), sift.chunk_vectors and sift.question_vectors.
    select exists (select 1
                   from pg_catalog.unnest(array['chunks', 'chunk_vectors', 'question_vectors']) with ordinality
                        as t(name, i)
                   where (t.i > 1 or not added_only)
                     and pg_catalog.to_regclass(pg_catalog.format('sift.%I', pg_catalog.format('%s_hnsw_%s_%s',
                                                                  t.name, distance, dims))) is null)
$$;
comment on function sift._dense_index_missing(integer, text, boolean) is
    'Internal: whether a shared HNSW index of this (dimension, distance) that sift._ensure_dense_index '
    'builds is missing (added_only: those an added space needs).';


create or replace function sift._ensure_dense_index(dims integer, distance sift.distance,
                                                    added_only boolean default false)
returns text
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    -- Past 2,000 dimensions (HNSW's limit on vector) the index holds halfvec
    -- (up to 4,000); the leg walks it and re-scores at full precision.
    half    boolean := dims > 2000;
    kind    text := case when dims > 2000 then 'halfvec' else 'vector' end;
    opclass text := kind || case distance
        when 'cosine' then '_cosine_ops'
        when 'l2' then '_l2_ops'
        when 'inner_product' then '_ip_ops' end;
    index_name text := format('chunks_hnsw_%s_%s', distance, dims);
    tables  text[] := array['chunks', 'chunk_vectors', 'question_vectors'];
    names   text[] := array[index_name, format('chunk_vectors_hnsw_%s_%s', distance, dims),
                            format('question_vectors_hnsw_%s_%s', distance, dims)];
    saved   text := pg_catalog.current_setting('lock_timeout');
begin
    -- SECURITY DEFINER (one of six; tests/test_migrate.py lists them): an
    -- index on the shared chunks table can only be created by its owner. Its
    -- arguments are an integer, a checked domain and a boolean, and
    -- everything in the statement is qualified.
    if dims is null or dims not between 1 and 4000 or opclass is null then
        raise exception 'no HNSW index for % dimensions and distance %', dims, distance using errcode = 'SF003';
    end if;
    if half and pg_catalog.to_regtype('@extschema:vector@.halfvec') is null then
        raise exception 'embeddings of % dimensions need pgvector 0.7 or later (halfvec)', dims
            using errcode = 'SF003';
    end if;
    -- Building one locks the shared table against every tenant's writes until
    -- the transaction ends, which a tenant's admin could keep open: only the
    -- operator's session builds (a tenant's collection of a new size is a
    -- request, sift.index_requests). Anyone may call it for a size whose
    -- indexes are all there: it names the index and makes nothing (no DDL;
    -- the walk functions are the operator's session's too, below).
    if sift._dense_index_missing(dims, distance, added_only) and not sift._is_operator(session_user) then
        raise exception 'an HNSW index on the shared tables is the operator''s to build (% dimensions, %)',
            dims, distance
            using errcode = '42501',
                  hint = 'a collection or vector space of this size queues it (sift.index_requests); the operator''s '
                         'select sift.ensure_dense_indexes() builds it';
    end if;
    -- Behind a long write, wait at most a second (or the caller's shorter
    -- lock_timeout) rather than queue every tenant's writes behind the build:
    -- lock_not_available, and the caller queues it for later.
    perform pg_catalog.set_config('lock_timeout',
                                  case when saved::interval > '0'::interval and saved::interval < '1s'::interval
                                       then saved else '1s' end, true);
    -- One partial index per (dimension, distance) on the chunks (the built-in
    -- spaces) and one on sift.chunk_vectors (the added spaces): pgvector needs a
    -- fixed dimension to index, and the predicate keeps other dimensions out.
    -- Looked up first, so a second collection of a size prints no notice.
    -- An added space needs only sift.chunk_vectors' (a built-in space's size
    -- never changes, and an index on the chunks locks every tenant's writes).
    -- Questions as vectors of their own are in the active space, built-in or added.
    for i in case when added_only then 2 else 1 end .. 3 loop
        if pg_catalog.to_regclass(pg_catalog.format('sift.%I', names[i])) is null then
            execute format(
                'create index if not exists %I on sift.%I using hnsw '
                '((embedding::@extschema:vector@.%s(%s)) @extschema:vector@.%s) '
                'where @extschema:vector@.vector_dims(embedding) = %s',
                names[i], tables[i], kind, dims, opclass, dims);
        end if;
    end loop;
    perform pg_catalog.set_config('lock_timeout', saved, true);
    if not added_only then
        perform sift._set_search_vector_storage(dims);
    end if;
    -- Its walk functions, as the owner (none for a size no space has yet):
    -- in the operator's session only, as the index itself. A tenant's call
    -- (its new collection of a size there is) needs none made: the build or
    -- the migrate that made the index made them, and DDL in the extension's
    -- schema stays out of a tenant's transaction.
    if sift._is_operator(session_user) then
        perform sift._ensure_walks();
    end if;
    return index_name;
end;
$$;
comment on function sift._ensure_dense_index(integer, sift.distance, boolean) is
    'Internal, writes: creates the partial HNSW indexes for one (dimension, distance) if missing, '
    'on sift.chunks, sift.chunk_vectors and sift.question_vectors (halfvec past 2,000 dimensions, up to 4,000; '
    'added_only: only the latter, for an added space); past 1,024 dimensions on sift.chunks, keeps '
    'search vectors out of line (sift._set_search_vector_storage); then the walk functions. Builds '
    'only in the operator''s session (42501 for anyone else when an index is missing), waiting at '
    'most 1 s for each table (lock_not_available). Security definer (the owner of sift.chunks builds '
    'indexes on it); granted to sift_admin only.';


create or replace function sift._space_dedicated(space sift.vector_spaces)
returns boolean
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Options other than the shared index's: m or ef_construction set, or half
    -- precision where the shared index of that size is full.
    select space.hnsw_m is not null or space.hnsw_ef_construction is not null
           or (space.dense_precision = 'half' and space.dimensions <= 2000)
$$;
comment on function sift._space_dedicated(sift.vector_spaces) is
    'Internal: whether a vector space has an HNSW index of its own (options other than the '
    'shared index''s), rather than the one per (dimension, distance).';


create or replace function sift._space_index_name(space sift.vector_spaces)
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    select case when sift._space_dedicated(space) then
                    case when space.builtin then 'chunks_hnsw_collection_' || space.collection_id
                         else 'chunk_vectors_hnsw_space_' || space.space_id end
                when space.builtin then pg_catalog.format('chunks_hnsw_%s_%s', space.distance, space.dimensions)
                else pg_catalog.format('chunk_vectors_hnsw_%s_%s', space.distance, space.dimensions) end
$$;
comment on function sift._space_index_name(sift.vector_spaces) is
    'Internal: the HNSW index a vector space''s dense leg walks: its own, or the shared one of its '
    'size and distance.';


create or replace function sift._space_own_index(space sift.vector_spaces)
returns bigint
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- What the dense leg's statement names its own index by (sift._dense_rows_sql):
    -- the collection (a built-in space's, on sift.chunks) or the space (an
    -- added one's, on sift.chunk_vectors); null for a space on the shared index.
    select case when not sift._space_dedicated(space) then null
                when space.builtin then space.collection_id else space.space_id end
$$;
comment on function sift._space_own_index(sift.vector_spaces) is
    'Internal: the key of a vector space''s own HNSW index (its collection''s or its own id), null '
    'where it walks the shared index of its size (sift._dense_ids'' own_index).';


create or replace function sift._own_index_by_operator(who name)
returns void
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    if not sift._is_operator(who) then
        raise exception 'an HNSW index of its own is the operator''s to give (it is built on a table every '
                        'tenant writes to)' using errcode = '42501';
    end if;
end;
$$;
comment on function sift._own_index_by_operator(name) is
    'Internal: 42501 unless the role is the operator, who alone gives a vector space an HNSW index '
    'of its own (the guard trigger and the builder ask).';


create or replace function sift._ensure_space_index(space_id bigint, acting_role name default current_user)
returns text
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    s       sift.vector_spaces;
    kind    text;
    opclass text;
    name    text;
    saved   text := pg_catalog.current_setting('lock_timeout');
begin
    -- A space with its own options gets its own partial index: on its
    -- collection's chunks (the built-in space) or on its rows of
    -- sift.chunk_vectors. Building it reads the whole shared table while every
    -- tenant's writes wait, so it is the operator's call: the role acting
    -- (the caller's current_user, vouched for by its session) must be one.
    -- Security definer for the reason _ensure_dense_index is; it builds only
    -- what the space's own options say.
    if acting_role is null or not pg_catalog.pg_has_role(session_user, acting_role, 'MEMBER') then
        raise exception 'role % may not act as role %', session_user, acting_role using errcode = '42501';
    end if;
    perform sift._own_index_by_operator(acting_role);
    select v.* into s from sift.vector_spaces v where v.space_id = _ensure_space_index.space_id;
    if s.space_id is null or not sift._space_dedicated(s) then
        return null;
    end if;
    kind := case when s.dense_precision = 'half' then 'halfvec' else 'vector' end;
    opclass := kind || case s.distance when 'cosine' then '_cosine_ops' when 'l2' then '_l2_ops'
                                       when 'inner_product' then '_ip_ops' end;
    if kind = 'halfvec' and pg_catalog.to_regtype('@extschema:vector@.halfvec') is null then
        raise exception 'a half-precision index needs pgvector 0.7 or later (halfvec)' using errcode = 'SF003';
    end if;
    name := sift._space_index_name(s);
    if pg_catalog.to_regclass(pg_catalog.format('sift.%I', name)) is null then
        -- Behind a long write, wait 5 s at most rather than queue every
        -- tenant's writes behind this one (try again).
        perform pg_catalog.set_config('lock_timeout', '5s', true);
        execute pg_catalog.format(
            'create index if not exists %I on sift.%I using hnsw '
            '((embedding::@extschema:vector@.%s(%s)) @extschema:vector@.%s) '
            'with (m = %s, ef_construction = %s) where %I = %s',
            name, case when s.builtin then 'chunks' else 'chunk_vectors' end, kind, s.dimensions, opclass,
            coalesce(s.hnsw_m, 16), coalesce(s.hnsw_ef_construction, 64),
            case when s.builtin then 'collection_id' else 'space_id' end,
            case when s.builtin then s.collection_id else s.space_id end);
        perform pg_catalog.set_config('lock_timeout', saved, true);
    end if;
    if s.builtin then
        perform sift._set_search_vector_storage(s.dimensions);
    end if;
    -- Its walk function (the operator's session: checked above).
    perform sift._ensure_walks();
    return name;
end;
$$;
comment on function sift._ensure_space_index(bigint, name) is
    'Internal, writes: creates the HNSW index of its own a vector space with options needs (m, '
    'ef_construction, half precision), partial on its collection (built-in space) or its space '
    '(sift.chunk_vectors); null for a space that shares the index of its size. Only for the '
    'operator (acting_role, checked against the session); waits at most 5 s for the table. '
    'Security definer (the owner builds indexes on the shared tables); granted to sift_admin.';
