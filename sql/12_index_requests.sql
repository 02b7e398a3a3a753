-- Index requests: a size no index serves yet is queued for the operator
-- (sift.index_requests, within the tenant's limits) and searched exactly
-- meanwhile; sift.ensure_dense_indexes builds what is queued and drops the
-- indexes of dropped spaces. In: vector spaces. Out: their indexes.


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
