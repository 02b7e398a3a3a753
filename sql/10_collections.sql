-- Collections and documents: the functions whose names say they write, and
-- sift.collection_info, which says what a collection is set to.

create or replace function sift._regconfig(search_language text)
returns regconfig
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cfg oid;
begin
    -- Looked up by name in pg_ts_config (schema-qualified names too), never
    -- cast from text on the caller's path.
    select c.oid into cfg
    from pg_catalog.pg_ts_config c
    join pg_catalog.pg_namespace n on n.oid = c.cfgnamespace
    where (n.nspname = 'pg_catalog' and c.cfgname = search_language)
       or n.nspname || '.' || c.cfgname = search_language;
    if cfg is null then
        raise exception 'unknown search language "%"', left(search_language, 200)
            using errcode = 'SF004',
                  hint = 'use a text search configuration from pg_ts_config: '
                      || (select string_agg(t.cfgname::text, ', ' order by t.cfgname)
                          from pg_catalog.pg_ts_config t);
    end if;
    return cfg::regconfig;
end;
$$;
comment on function sift._regconfig(text) is
    'Internal: validates a language name against pg_ts_config (SF004 lists the choices).';


create or replace function sift._set_search_vector_storage(dims integer)
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    saved text := pg_catalog.current_setting('lock_timeout');
begin
    -- Search vectors stay in the chunks' rows (storage main, migration 0030)
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


create or replace function sift._drop_orphan_indexes(only_index text default null)
returns setof text
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
set row_security = off
as $$
declare
    saved text := pg_catalog.current_setting('lock_timeout');
    idx   text;
begin
    -- The own indexes of spaces that are gone (their collection or space was
    -- dropped): only_index, the one a drop just made an orphan, or all of
    -- them (sift.ensure_dense_indexes). Dropping an index locks its table
    -- against every search, so each waits at most 100 ms: one still in use
    -- stays for sift.ensure_dense_indexes. It must see every tenant's spaces
    -- to drop only what no space names: row_security off makes a policy that
    -- would hide some an error instead.
    -- Only the operator's session: a dropped index's table stays locked against
    -- every tenant's searches and writes until the transaction ends.
    if not sift._is_operator(session_user) then
        raise exception 'only the operator drops indexes on the shared tables (sift.ensure_dense_indexes sweeps '
                        'orphaned ones)' using errcode = '42501';
    end if;
    perform pg_catalog.set_config('lock_timeout', '100ms', true);
    for idx in
        select i.relname::text
        from pg_catalog.pg_class i
        where i.relnamespace = 'sift'::regnamespace and i.relkind = 'i'
          and i.relname ~ '^(chunks_hnsw_collection|chunk_vectors_hnsw_space)_[0-9]+$'
          and (only_index is null or i.relname = only_index)
          and not exists (select 1 from sift.vector_spaces s
                          where sift._space_dedicated(s) and sift._space_index_name(s) = i.relname::text)
        order by 1
    loop
        begin
            execute pg_catalog.format('drop index sift.%I', idx);
            -- and the walk functions of that index (sift._walk_name: its id last).
            perform sift._drop_walk(p.oid::pg_catalog.regprocedure)
            from pg_catalog.pg_proc p
            where p.pronamespace = 'sift'::pg_catalog.regnamespace
              and p.proname ~ ('^_walk_' || case when idx like 'chunks_%' then 'chunks' else 'vectors' end
                               || '_[a-z_]+_[0-9]+_(half|full)_' || pg_catalog.substring(idx, '[0-9]+$') || '$');
            return next idx;
        exception when lock_not_available then
            null;
        end;
    end loop;
    perform pg_catalog.set_config('lock_timeout', saved, true);
end;
$$;
comment on function sift._drop_orphan_indexes(text) is
    'Internal, writes: drops the own HNSW indexes of vector spaces that no longer exist (only_index: '
    'just that one), each waiting at most 100 ms for its table (one in use is left for '
    'sift.ensure_dense_indexes); returns those dropped. Only in the operator''s session (42501). '
    'Security definer (the owner drops indexes on the shared tables); granted to sift_admin only.';


create or replace function sift._request_dense_index(space sift.vector_spaces)
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- A new vector space (the guard trigger asks, for every insert) of a size
    -- whose shared index is missing, made by anyone but the operator: a
    -- request for the operator's build rather than a build that would lock
    -- every tenant's writes (sift.index_requests' trigger holds the tenant to
    -- its limits). A size with its index needs nothing.
    if sift._space_dedicated(space) or sift._is_operator(current_user)
       or not sift._dense_index_missing(space.dimensions, space.distance, not space.builtin) then
        return false;
    end if;
    if space.dimensions > 2000 and pg_catalog.to_regtype('@extschema:vector@.halfvec') is null then
        raise exception 'embeddings of % dimensions need pgvector 0.7 or later (halfvec)', space.dimensions
            using errcode = 'SF003';
    end if;
    insert into sift.index_requests (tenant, dimensions, distance, builtin)
    select c.tenant, space.dimensions, space.distance, space.builtin
    from sift.collections c where c.collection_id = space.collection_id
    on conflict (tenant, dimensions, distance, builtin) do nothing;
    return true;
end;
$$;
comment on function sift._request_dense_index(sift.vector_spaces) is
    'Internal, writes: records that a new vector space needs a shared HNSW index the operator has '
    'not built (sift.index_requests; SF015 past the tenant''s limits); false when nothing is needed '
    '(the index is there, the space has its own, or the operator builds it now).';


create or replace function sift._index_requests_before_insert()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    most_shapes   integer;
    most_waiting  integer;
    shapes        integer;
    waiting       integer;
begin
    -- Who asked and when are the database's to say; the operator's own
    -- requests (a build the table was too busy for) know no limit.
    new.requested_by := current_user;
    new.requested_at := pg_catalog.now();
    if sift._is_operator(current_user) then
        return new;
    end if;
    new.built_at := null;
    -- The request must be the caller's tenant's (the policy would refuse it
    -- after this trigger, the same way): checked before anything is locked,
    -- so an admin's refused request, its transaction left open, holds
    -- nothing of another tenant's.
    if new.tenant is distinct from sift.current_tenant() then
        raise exception 'new row violates row-level security policy for table "index_requests"'
            using errcode = '42501';
    end if;
    -- One request of a tenant at a time, so two cannot both pass the count:
    -- in turn on the tenant's row of sift.tenant_locks, made by its first
    -- request (row-level security shows a tenant its own row only). Written,
    -- not only locked: at repeatable read a row another request locked and
    -- committed meanwhile passes unnoticed, one it wrote is a serialization
    -- failure (the count below would read the old snapshot).
    update sift.tenant_locks l set tenant = l.tenant where l.tenant = new.tenant;
    if not found then
        insert into sift.tenant_locks (tenant) values (new.tenant) on conflict do nothing;
        update sift.tenant_locks l set tenant = l.tenant where l.tenant = new.tenant;
    end if;
    -- (4 shapes, 2 waiting where no row says.)
    select coalesce(t.max_index_shapes, d.max_index_shapes, 4), coalesce(t.max_index_requests, d.max_index_requests, 2)
    into most_shapes, most_waiting
    from (values (1)) as one(x)
    left join sift.tenant_limits d on d.tenant is null
    left join sift.tenant_limits t on t.tenant = new.tenant;
    select count(*) into shapes
    from (select r.dimensions, r.distance::text from sift.index_requests r where r.tenant = new.tenant
          union select new.dimensions, new.distance::text) x;
    select count(*) into waiting
    from (select r.dimensions, r.distance::text from sift.index_requests r
          where r.tenant = new.tenant and r.built_at is null
          union select new.dimensions, new.distance::text) x;
    if shapes > most_shapes then
        raise exception 'tenant "%" may cause at most % HNSW index shapes (max_index_shapes); % dimensions (%) '
                        'would be its %th', new.tenant, most_shapes, new.dimensions, new.distance, shapes
            using errcode = 'SF015', constraint = 'max_index_shapes', detail = most_shapes::text,
                  hint = 'use an embedding size that has its index already (sift.ensure_dense_indexes() lists '
                         'them), or ask the operator to raise max_index_shapes (sift.tenant_limits)';
    end if;
    if waiting > most_waiting then
        raise exception 'tenant "%" has % HNSW index shapes waiting for the operator''s build, at most % '
                        '(max_index_requests)', new.tenant, waiting - 1, most_waiting
            using errcode = 'SF015', constraint = 'max_index_requests', detail = most_waiting::text,
                  hint = 'wait for the operator''s select sift.ensure_dense_indexes(), or use a size that has its '
                         'index already';
    end if;
    return new;
end;
$$;
comment on function sift._index_requests_before_insert() is
    'Trigger: an index request records who made it and when, and a tenant''s (not the operator''s) '
    'stays within its max_index_shapes and max_index_requests (sift.tenant_limits; SF015 naming '
    'the limit).';

create or replace trigger index_requests_before_insert
    before insert on sift.index_requests
    for each row execute function sift._index_requests_before_insert();


create or replace function sift._space_index(space sift.vector_spaces)
returns text
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- The HNSW index a new space walks: its own (the operator's), or the
    -- shared one of its size, built now by the operator (named for anyone
    -- when it is there), else queued (the guard trigger recorded the
    -- request) and the space searched by exact scan until it is built.
    if sift._space_dedicated(space) then
        return sift._ensure_space_index(space.space_id);
    end if;
    if sift._is_operator(current_user)
       or not sift._dense_index_missing(space.dimensions, space.distance, not space.builtin) then
        begin
            return sift._ensure_dense_index(space.dimensions, space.distance, not space.builtin);
        exception when lock_not_available then
            insert into sift.index_requests (tenant, dimensions, distance, builtin)
            select c.tenant, space.dimensions, space.distance, space.builtin
            from sift.collections c where c.collection_id = space.collection_id
            on conflict (tenant, dimensions, distance, builtin) do nothing;
            raise warning 'the HNSW index for % dimensions (%) is not built yet: a table was busy',
                space.dimensions, space.distance
                using hint = 'searches scan it exactly until then; run select sift.ensure_dense_indexes() when '
                             'writes are quiet';
            return null;
        end;
    end if;
    raise notice 'the HNSW index for % dimensions (%) waits for the operator''s build', space.dimensions,
        space.distance
        using hint = 'searches scan it exactly until then (collection_info''s dense_index says queued); the '
                     'operator''s select sift.ensure_dense_indexes() builds it';
    return null;
end;
$$;
comment on function sift._space_index(sift.vector_spaces) is
    'Internal, writes: gives a new vector space its HNSW index: its own (the operator''s), or the '
    'shared one of its size, built by the operator (a busy table: queued, with a warning) and '
    'otherwise queued for the operator (a notice); the index''s name, or null when it is queued.';


create or replace function sift.ensure_dense_indexes()
returns setof text
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    op      boolean := sift._is_operator(current_user);
    g       record;
    waiting integer := 0;
begin
    -- The HNSW indexes are made on demand, for a collection or space of a new
    -- (dimension, distance), or with options of its own: by the operator, in
    -- this call or the one that made it; a tenant's admin queues them
    -- (sift.index_requests). Not by the install script either, so pg_dump of
    -- an extension install (which re-creates its tables by CREATE EXTENSION)
    -- leaves them out: after a restore, this builds them again. It also drops
    -- the own indexes of spaces dropped while the index was in use. Each
    -- build waits at most a second for its table; a busy one stays for the
    -- next run (a warning). For anyone else: nothing is built.
    if op then
        perform sift._drop_orphan_indexes();
    end if;
    for g in
        select s.dimensions, s.distance, pg_catalog.bool_and(not s.builtin) as added_only
        from sift.vector_spaces s
        where not sift._space_dedicated(s)
        group by s.dimensions, s.distance
        order by 1, 2
    loop
        if op then
            begin
                perform sift._ensure_dense_index(g.dimensions, g.distance, g.added_only);
            exception when lock_not_available then
                raise warning 'the HNSW index for % dimensions (%) is not built: a table was busy', g.dimensions,
                    g.distance using hint = 'run select sift.ensure_dense_indexes() again';
            end;
        elsif sift._dense_index_missing(g.dimensions, g.distance, g.added_only) then
            waiting := waiting + 1;
        end if;
    end loop;
    if op then
        for g in select s.space_id from sift.vector_spaces s where sift._space_dedicated(s) order by 1 loop
            begin
                perform sift._ensure_space_index(g.space_id);
            exception when lock_not_available then
                raise warning 'the HNSW index of vector space % is not built: its table was busy', g.space_id
                    using hint = 'run select sift.ensure_dense_indexes() again';
            end;
        end loop;
        -- The requests: built when their indexes are there; withdrawn when no
        -- space of the tenant has the size any more.
        update sift.index_requests r set built_at = pg_catalog.now()
        where r.built_at is null and not sift._dense_index_missing(r.dimensions, r.distance, not r.builtin);
        delete from sift.index_requests r
        where r.built_at is null
          and not exists (select 1 from sift.vector_spaces s
                          join sift.collections c on c.collection_id = s.collection_id
                          where c.tenant = r.tenant and s.dimensions = r.dimensions and s.distance = r.distance
                            and (s.builtin or not r.builtin));
    elsif waiting > 0 then
        raise notice '% HNSW index shape(s) of this tenant wait for the operator''s build', waiting
            using hint = 'their collections are searched by exact scan until the operator runs '
                         'select sift.ensure_dense_indexes()';
    end if;
    -- The index each space walks (a size only added spaces have: only its
    -- sift.chunk_vectors one).
    return query
    select distinct sift._space_index_name(s)
    from sift.vector_spaces s
    where not sift._space_dedicated(s) or op
    order by 1;
end;
$$;
comment on function sift.ensure_dense_indexes() is
    'The operator''s: builds the HNSW indexes the vector spaces need and lack (the requests of '
    'tenants'' collections of new sizes, sift.index_requests, and after a restore of an extension '
    'install, which leaves these on-demand indexes out), spaces'' own included, each waiting at '
    'most 1 s for its table (a busy one: a warning, built on the next run), and drops those of '
    'dropped spaces. Run by anyone else it builds nothing and says how many wait. Returns the name '
    'of the index each space walks. Writes.';

create or replace function sift.create_collection(
    collection           text,
    embedding_dims       integer,
    search_language      text default 'english',
    distance             text default 'cosine',
    description          text default null,
    knobs                jsonb default '{}',
    dense_precision      text default null,
    hnsw_m               integer default null,
    hnsw_ef_construction integer default null)
returns sift.collections
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    created sift.collections;
    space   sift.vector_spaces;
begin
    if distance is null or distance not in ('cosine', 'l2', 'inner_product') then
        raise exception 'distance must be cosine, l2 or inner_product, got "%"', left(distance, 100)
            using errcode = '23514', constraint = 'distance_valid';
    end if;
    if embedding_dims is null or embedding_dims not between 1 and 4000 then
        raise exception 'embedding_dims must be between 1 and 4000 (pgvector''s HNSW limit on halfvec), got %',
            coalesce(embedding_dims::text, 'null')
            using errcode = '23514', constraint = 'embedding_dims_valid';
    end if;
    insert into sift.collections as c
        (tenant, name, search_language, embedding_dims, distance, description, knobs)
    values
        (sift.current_tenant(), collection, sift._regconfig(search_language), embedding_dims,
         distance, description, coalesce(knobs, '{}'))
    returning c.* into created;
    -- The built-in space came with it (trigger); its index options are set
    -- now, while it is empty (sift.vector_spaces' checks guard them).
    space := sift._space(created, null);
    if dense_precision is not null or hnsw_m is not null or hnsw_ef_construction is not null then
        space := sift._set_space_options(space, dense_precision, hnsw_m, hnsw_ef_construction);
    end if;
    perform sift._space_index(space);
    return created;
end;
$$;
comment on function sift.create_collection(text, integer, text, text, text, jsonb, text, integer, integer) is
    'Creates a collection of the current tenant (names are unique per tenant) with its language, '
    'embedding size (1 to 4000; past 2000 indexed as halfvec) and distance (cosine, l2, inner_product), and any knob values in '
    'knobs (see sift.knobs(); a preset is allowed). The first collection of a size needs its HNSW '
    'index: the operator''s call builds it, anyone else''s queues it for the operator '
    '(sift.ensure_dense_indexes; within the tenant''s limits, SF015) and the collection is searched '
    'by exact scan meanwhile (collection_info''s dense_index). dense_precision (full, half), hnsw_m and '
    'hnsw_ef_construction give the collection an HNSW index of its own with those options (the '
    'operator''s). Writes.';


create or replace function sift._set_space_options(space sift.vector_spaces, dense_precision text,
                                                   hnsw_m integer, hnsw_ef_construction integer)
returns sift.vector_spaces
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    changed sift.vector_spaces;
begin
    -- Right after the space is made: empty, without an index of its own (the
    -- guard trigger refuses the change otherwise, and to anyone but the
    -- operator).
    update sift.vector_spaces s
    set dense_precision = coalesce(_set_space_options.dense_precision, s.dense_precision),
        hnsw_m = _set_space_options.hnsw_m,
        hnsw_ef_construction = _set_space_options.hnsw_ef_construction
    where s.space_id = space.space_id
    returning s.* into changed;
    return changed;
end;
$$;
comment on function sift._set_space_options(sift.vector_spaces, text, integer, integer) is
    'Internal: sets a new, empty vector space''s index options (precision, m, ef_construction); '
    'the table''s checks refuse values out of range.';


create or replace function sift.alter_collection(
    collection text,
    settings   jsonb default '{}',
    reset      text[] default null)
returns sift.collections
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col     sift.collections := sift._collection(collection);
    props   text[] := array['search_language', 'description', 'reranker'];
    given   jsonb := coalesce(settings, '{}');
    stored  jsonb;
    item    text;
    changed sift.collections;
begin
    if jsonb_typeof(given) <> 'object' then
        raise exception 'settings must be a JSON object, got %', jsonb_typeof(given) using errcode = 'SF003';
    end if;
    foreach item in array coalesce(reset, '{}') loop
        if item is null or (item <> all (props) and not exists (select 1 from sift.knob_defs d where d.name = item)) then
            perform sift._unknown_knob(coalesce(item, 'null'), 'reset');
        end if;
    end loop;
    -- The collection's own properties, then its knobs (checked by the table's trigger).
    -- A preset given now overrides what is stored; the keys beside it override the preset.
    stored := (col.knobs - coalesce(reset, '{}')) || sift._expand_preset(given - props);
    if given ? 'reranker' and jsonb_typeof(given -> 'reranker') not in ('string', 'null') then
        raise exception 'reranker must be an alias or null' using errcode = 'SF003';
    end if;
    if given ->> 'reranker' is not null and not exists (
            select 1 from sift.rerankers r where r.tenant = col.tenant and r.alias = given ->> 'reranker') then
        raise exception 'no reranker "%" is registered for tenant "%" (collection "%")',
            given ->> 'reranker', col.tenant, col.name
            using errcode = 'SF008',
                  hint = 'register it first with sift.register_reranker(...), as this tenant';
    end if;
    update sift.collections c set
        search_language = case when 'search_language' = any (reset) then 'english'::regconfig
                               when given ? 'search_language' then sift._regconfig(given ->> 'search_language')
                               else c.search_language end,
        description     = case when 'description' = any (reset) then null
                               when given ? 'description' then given ->> 'description'
                               else c.description end,
        reranker_alias  = case when 'reranker' = any (reset) then null
                               when given ? 'reranker' then given ->> 'reranker'
                               else c.reranker_alias end,
        knobs           = stored
    where c.collection_id = col.collection_id
    returning c.* into changed;
    if changed.search_language is distinct from col.search_language
       or sift._stored_knob(changed, 'bm25_k1') <> sift._stored_knob(col, 'bm25_k1')
       or sift._stored_knob(changed, 'bm25_b') <> sift._stored_knob(col, 'bm25_b') then
        -- The rebuild below needs the collection alone: taken now, before the
        -- chunks are re-analysed as its writer (a writer's lock that then
        -- waits for a build's could deadlock with another build waiting).
        perform sift._lock_collection(col.collection_id, true);
    end if;
    if changed.search_language is distinct from col.search_language then
        -- Re-analyse every chunk with the new language (the trigger rebuilds search_vector).
        update sift.chunks k set context = k.context where k.collection_id = col.collection_id;
        delete from sift.term_lists l where l.collection_id = col.collection_id;
    end if;
    if changed.search_language is distinct from col.search_language
       or sift._stored_knob(changed, 'bm25_k1') <> sift._stored_knob(col, 'bm25_k1')
       or sift._stored_knob(changed, 'bm25_b') <> sift._stored_knob(col, 'bm25_b') then
        -- Impact lists are built for one language, k1 and b: rebuild them now
        -- (every one: a chunk whose document names its own language analyses
        -- as before, so its terms are not among those a refresh folds).
        perform sift.refresh_lexical_stats(collection => col.name, rebuild => true);
    end if;
    return changed;
end;
$$;
comment on function sift.alter_collection(text, jsonb, text[]) is
    'The one setter of a collection: settings => ''{"dense_weight": 0.3, "mmr_lambda": null, '
    '"search_language": "spanish", "description": "...", "reranker": "voyage"}'' sets knobs (see '
    'sift.knobs(); null switches one off; a preset is allowed) and the properties search_language, '
    'description and reranker (an alias of this tenant''s rerankers, else SF008); reset => '
    'array[...] puts the named ones back to their defaults. A new search_language re-analyses '
    'every chunk. Every value is checked by its domain before anything is stored. Writes.';


create or replace function sift.collection_info(collection text default null)
returns table (
    collection_id   bigint,
    tenant          text,
    name            text,
    search_language text,
    embedding_dims  integer,
    distance        text,
    description     text,
    reranker        text,
    created_at      timestamptz,
    knobs           jsonb,
    settings        jsonb,
    dense_index     text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select c.collection_id, c.tenant::text, c.name::text, c.search_language::text, c.embedding_dims,
           c.distance::text, c.description, c.reranker_alias::text, c.created_at, c.knobs,
           to_jsonb(sift._resolve_knobs(c, '{}')),
           (select case when pg_catalog.to_regclass('sift.' || sift._space_index_name(s)) is null then 'queued'
                        else 'built' end
            from sift.vector_spaces s where s.collection_id = c.collection_id and s.active)
    from sift.collections c
    where c.tenant = sift.current_tenant()
      and (collection_info.collection is null or c.name = collection_info.collection)
    order by c.name, c.collection_id;
    if collection_info.collection is not null and not found then
        perform sift._collection(collection_info.collection);   -- SF001
    end if;
end;
$$;
comment on function sift.collection_info(text) is
    'The current tenant''s collections (or the one named): properties, the knob values stored '
    '(knobs), every knob in force (settings, defaults included, within the tenant''s ceilings) and '
    'dense_index: built, or queued when the HNSW index its active vector space walks waits for the '
    'operator''s build (searched by exact scan until then). Read-only.';


create or replace function sift.drop_collection(collection text)
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col sift.collections := sift._collection(collection);
    own text[];
begin
    -- Alone on the collection first, as a build is: the delete's cascade then
    -- waits on no writer that could in turn wait on the collection's row.
    perform sift._lock_collection(col.collection_id, true);
    -- Its spaces' own HNSW indexes go with it (one in use, or a tenant's drop:
    -- by the operator's sift.ensure_dense_indexes later).
    select pg_catalog.array_agg(sift._space_index_name(s)) into own
    from sift.vector_spaces s where s.collection_id = col.collection_id and sift._space_dedicated(s);
    delete from sift.collections c where c.collection_id = col.collection_id;
    -- Dropping an index locks its table until the transaction ends: in the
    -- operator's session only (else the operator's sift.ensure_dense_indexes).
    if sift._is_operator(session_user) then
        perform sift._drop_orphan_indexes(u.name) from unnest(own) as u(name);
    end if;
    return true;
end;
$$;
comment on function sift.drop_collection(text) is
    'Deletes a collection of the current tenant with its documents, chunks, statistics and golden '
    'sets. Raises SF001 if it does not exist. Writes.';


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
