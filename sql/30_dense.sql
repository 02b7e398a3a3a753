-- Dense leg: pgvector, one partial HNSW index per (dimension, distance).
-- In: a vector space (or, on the plain path, what sift._plain_plan decided
-- about it), the resolved knobs, the query vector, the metadata filter and
-- n. Out: the top n chunk ids, best first, and their distances
-- (sift._dense_ids says what every leg gives).
--
-- How a table holding many collections keeps per-collection recall:
--   * a collection (or set of collections) with at most exact_search_limit
--     chunks (default 5,000) is scanned exactly: recall 1 and a few ms; so
--     is one of up to twice that holding under a tenth of a shared index;
--   * a larger one walks the shared HNSW index with the collection filter
--     inside the scan and pgvector >= 0.8 iterative scans (relaxed order,
--     re-sorted here), so a collection that is a small share of the table
--     still fills its top n;
--   * if the index walk still comes back short (pgvector < 0.8, or
--     hnsw.max_scan_tuples reached), the leg answers from an exact scan
--     rather than return fewer rows than exist.

create or replace function sift._distance_operator(distance text)
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Named with pgvector's schema: an operator of that name elsewhere on a
    -- caller's path is never the one used.
    select 'operator(@extschema:vector@.' || case distance when 'cosine' then '<=>' when 'l2' then '<->'
                                                          when 'inner_product' then '<#>' end || ')'
$$;
comment on function sift._distance_operator(text) is
    'Internal: the pgvector operator for a distance name.';


create or replace function sift._dense_rows_sql(dims integer, distance text, exact boolean, filtered boolean,
                                                added boolean default false, half boolean default null,
                                                own_index bigint default null)
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- $1 query vector, $2 collection ids, $3 metadata filter (sift.filter_path), $4 n, $5 the
    -- space (added: its vectors in sift.chunk_vectors; else the chunks' own).
    -- The HNSW form orders by the indexed expression itself (ordering by a
    -- computed column turns the index into a sequential scan); with an
    -- iterative scan its order is relaxed, so the caller sorts the n rows
    -- again. The exact form keeps the best n in a top-n sort over a fenced
    -- scan (offset 0: no index order): sorting every distance to number them
    -- cost twice the scan itself. half: the index holds halfvec (null: past
    -- 2,000 dimensions). own_index: the space has an index of its own, partial
    -- on its collection (built-in) or space (added): the rows are that index's
    -- predicate alone, by value, so the planner both proves it and counts it
    -- once (every vector of a space has its size).
    select format(
        $f$%7$s
            select c.chunk_id, (c.embedding::@extschema:vector@.vector(%1$s) %2$s $1) as distance
            from %5$s c
            where %6$s
              %3$s
            %4$s$f$,
        dims,
        sift._distance_operator(distance),
        -- filtered null: a filter when $3 is one (a walk function's statement,
        -- planned once for both). A scalar lookup of the chunk's document: as
        -- exists, the generic plan hashed every document of the tenant to test
        -- a chunk against them.
        case when filtered is null then
            'and ($3 is null or coalesce((select pg_catalog.jsonb_path_match_tz(d.metadata, $3, ''{}'', true) '
            'from sift.documents d where d.document_id = c.document_id), false))'
             when filtered then
            'and exists (select 1 from sift.documents d '
            'where d.document_id = c.document_id '
            'and pg_catalog.jsonb_path_match_tz(d.metadata, $3, ''{}'', true))' else '' end,
        -- Past 2,000 dimensions the index holds halfvec: walked in half
        -- precision, the distances above re-scored at full.
        case when exact then 'offset 0) x order by x.distance, x.chunk_id limit $4'
             when coalesce(half, dims > 2000) then
                 format('order by c.embedding::@extschema:vector@.halfvec(%s) %s $1::@extschema:vector@.halfvec(%s) '
                        'limit $4', dims, sift._distance_operator(distance), dims)
             else format('order by c.embedding::@extschema:vector@.vector(%s) %s $1 limit $4', dims,
                         sift._distance_operator(distance)) end,
        case when added then 'sift.chunk_vectors' else 'sift.chunks' end,
        case when own_index is not null
             then pg_catalog.format('c.%s = %s', case when added then 'space_id' else 'collection_id' end, own_index)
             else pg_catalog.format('c.collection_id = any ($2) and @extschema:vector@.vector_dims(c.embedding) = %s %s',
                                    dims, case when added then 'and c.space_id = $5' else '' end) end,
        case when exact then 'select x.chunk_id, x.distance from (' else '' end)
$$;
comment on function sift._dense_rows_sql(integer, text, boolean, boolean, boolean, boolean, bigint) is
    'Internal: the dense leg''s scan, exact or through the HNSW index (shared, in full or half '
    'precision, or the space''s own), over the chunks'' own vectors or an added space''s '
    '(sift.chunk_vectors): its best n rows (chunk_id, distance), in index order when walked.';


create or replace function sift._dense_leg_sql(dims integer, distance text, exact boolean, filtered boolean,
                                               added boolean default false, half boolean default null,
                                               own_index bigint default null)
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Sorted again by distance + 0 (sift._dense_ids_sql says why).
    select pg_catalog.format(
        'select m.chunk_id, (pg_catalog.row_number() over (order by m.distance + 0, m.chunk_id))::integer as rank, '
        'm.distance from (%s) m order by m.distance + 0, m.chunk_id limit $4',
        sift._dense_rows_sql(dims, distance, exact, filtered, added, half, own_index))
$$;
comment on function sift._dense_leg_sql(integer, text, boolean, boolean, boolean, boolean, bigint) is
    'Internal: the dense leg''s statement (sift._dense_rows_sql ranked: chunk_id, rank, distance), '
    'for EXPLAIN.';


create or replace function sift._dense_exact(collection_ids bigint[], exact_search_limit integer,
                                             shared_index text)
returns boolean
language sql stable security invoker
set search_path = pg_catalog, pg_temp
-- (PostgreSQL 18 caches SQL functions' plans: one generic plan a session.)
set plan_cache_mode = force_generic_plan
as $$
    -- How many chunks the collections hold: the lexical statistics' count (kept
    -- by the chunks' trigger), a few rows read rather than the chunks counted.
    -- Exact up to the limit; and up to twice it for collections holding
    -- under a tenth of the shared index the walk would use (shared_index, in
    -- sift; null: the space has an index of its own, which holds only its
    -- vectors), since the walk would pass over the other collections' vectors
    -- to find theirs and cost more than the scan. The index's row count is
    -- the planner's (index build, ANALYZE, VACUUM); unknown counts as no share.
    -- A shared index not there (a size waiting for the operator's build,
    -- sift.index_requests): exact, whatever the size, as promised meanwhile.
    with n as (
        select coalesce(pg_catalog.sum(s.chunks), 0)::double precision as chunks
        from sift.collection_lexical_stats s
        where s.collection_id = any (collection_ids)
    ), i as (
        select pg_catalog.to_regclass('sift.' || shared_index) as oid
    )
    select n.chunks <= exact_search_limit
           or (shared_index is not null and i.oid is null)
           or coalesce(n.chunks <= 2.0 * exact_search_limit
                       and 10 * n.chunks < (select c.reltuples from pg_catalog.pg_class c where c.oid = i.oid),
                       false)
    from n, i
$$;
comment on function sift._dense_exact(bigint[], integer, text) is
    'Internal: whether the dense leg scans these collections exactly (at most exact_search_limit '
    'chunks, or up to twice that holding under a tenth of the shared index the walk would use, or '
    'that index not built yet) or walks HNSW.';


create or replace function sift._hnsw_ef_search(requested integer, wanted integer)
returns integer
language sql stable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The hnsw_ef_search knob (null: its default, read where every knob's is,
    -- so no other copy of it can disagree), at least the rows the walk must
    -- return (without an iterative scan pgvector stops at ef_search rows), at
    -- most pgvector's 1,000.
    select least(greatest(coalesce(requested, (select (d.default_value #>> '{}')::integer
                                               from sift.knob_defs d where d.name = 'hnsw_ef_search')),
                          wanted), 1000)
$$;
comment on function sift._hnsw_ef_search(integer, integer) is
    'Internal: the hnsw.ef_search an index walk runs with: the hnsw_ef_search knob, at least the rows '
    'it must return, at most 1,000.';


create or replace function sift._dense_ids_sql()
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The rows as two arrays in
    -- (distance, chunk_id) order, fenced by a materialized CTE: sorted in the
    -- aggregate over a plain subquery, the planner asks the scan itself for
    -- that order, which no index gives, and scans every vector instead of
    -- walking the index. Sorted by distance + 0, which no path provides: by
    -- distance itself, the planner takes the walk's order as given (an
    -- incremental sort on it), which an iterative scan in relaxed order does
    -- not give (pgvector issue 862), and a nearer chunk found late kept its
    -- late place.
    select 'with m as materialized (%s) '
           'select pg_catalog.array_agg(m.chunk_id order by m.distance + 0, m.chunk_id), '
           'pg_catalog.array_agg(m.distance order by m.distance + 0, m.chunk_id) from m'::text
$$;
comment on function sift._dense_ids_sql() is
    'Internal: the statement sift._dense_ids runs around the leg''s rows (sift._dense_rows_sql).';


create or replace function sift._walk_name(dims integer, distance text, added boolean, half boolean,
                                           own_index bigint)
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- One name per statement the walk can be: the table, distance, size,
    -- precision and the index of its own (if the space has one).
    select pg_catalog.format('_walk_%s_%s_%s_%s%s', case when added then 'vectors' else 'chunks' end, distance, dims,
                             case when coalesce(half, dims > 2000) then 'half' else 'full' end,
                             '_' || own_index)
$$;
comment on function sift._walk_name(integer, text, boolean, boolean, bigint) is
    'Internal: the name of the walk function (sift._ensure_walks) of a dense leg''s HNSW walk.';


create or replace function sift._drop_walk(walk regprocedure)
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- A member of the extension (sift._ensure_walks) leaves it first.
    if exists (select 1 from pg_catalog.pg_depend d
               where d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass and d.objid = walk and d.deptype = 'e') then
        execute pg_catalog.format('alter extension pgsift drop function %s', walk);
    end if;
    execute pg_catalog.format('drop function if exists %s', walk);
    perform sift._make_call_walk();
end;
$$;
comment on function sift._drop_walk(regprocedure) is
    'Internal, writes: drops a walk function (sift._ensure_walks) whose index is gone.';


create or replace function sift._call_walk(
    walk text, query @extschema:vector@.vector, collection_ids bigint[], fpath jsonpath, n integer,
    space_id bigint, out ids bigint[], out dists double precision[], out walked boolean)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Made again, with a branch per walk function, by sift._make_call_walk.
    walked := false;
end;
$$;
comment on function sift._call_walk(text, @extschema:vector@.vector, bigint[], jsonpath, integer, bigint) is
    'Internal, remade by sift._make_call_walk: calls the walk function named walk (sift._walk_name) '
    'by a static call, planned once a session (walked false when it knows no such walk).';


create or replace function sift._make_call_walk()
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    body text;
begin
    -- sift._dense_ids called a walk function through EXECUTE, which parsed
    -- and planned the call on every search (~0.06 ms of a 1 ms walk). A
    -- PL/pgSQL branch per walk function there is (a static call: its plan
    -- is kept for the session) makes the call free; remade whenever a walk
    -- function is made or dropped (sift._ensure_walks, sift._drop_walk), and
    -- a walk missing meanwhile is never called (sift._dense_ids checks).
    select E'\nbegin\n    walked := true;\n'
           || coalesce(pg_catalog.string_agg(pg_catalog.format(
                  E'    %s walk = %L then\n'
                  || E'        select w.ids, w.dists into ids, dists\n'
                  || E'        from sift.%I(query, collection_ids, fpath, n, space_id) w;\n',
                  case when x.o = 1 then 'if' else 'elsif' end, x.name, x.name), '' order by x.o)
              || E'    else\n        walked := false;\n    end if;\n',
              E'    walked := false;\n')
           || E'end;\n'
    into body
    from (select p.proname::text as name, pg_catalog.row_number() over (order by p.proname) as o
          from pg_catalog.pg_proc p
          where p.pronamespace = 'sift'::pg_catalog.regnamespace
            and p.proname ~ '^_walk_(chunks|vectors)_'
            and p.pronargs = 5 and p.proargtypes[0] = '@extschema:vector@.vector'::pg_catalog.regtype
            and p.proargtypes[1] = 'bigint[]'::pg_catalog.regtype and p.proargtypes[2] = 'jsonpath'::pg_catalog.regtype
            and p.proargtypes[3] = 'integer'::pg_catalog.regtype and p.proargtypes[4] = 'bigint'::pg_catalog.regtype) x;
    if exists (select 1 from pg_catalog.pg_proc p
               where p.oid = 'sift._call_walk(text, @extschema:vector@.vector, bigint[], jsonpath, integer, bigint)'
                             ::pg_catalog.regprocedure
                 and p.prosrc = body) then
        return false;
    end if;
    -- create or replace keeps the function's grants, comment and extension membership.
    execute pg_catalog.format(
        'create or replace function sift._call_walk(walk text, query @extschema:vector@.vector, '
        'collection_ids bigint[], fpath jsonpath, n integer, space_id bigint, out ids bigint[], '
        'out dists double precision[], out walked boolean) '
        'language plpgsql stable security invoker set search_path = pg_catalog, pg_temp as %L', body);
    return true;
end;
$$;
comment on function sift._make_call_walk() is
    'Internal, writes: remakes sift._call_walk with a branch per walk function there is (run by '
    'sift._ensure_walks and sift._drop_walk, as the tables'' owner); true when it changed.';


create or replace function sift._ensure_walks()
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    w       record;
    body    text;
    fn      pg_catalog.regprocedure;
    made    integer := 0;
begin
    -- A walk function per HNSW walk a vector space makes: the walk's statement
    -- (sift._dense_rows_sql, its filter optional) as a SQL function, whose plan
    -- PostgreSQL 18 keeps for the session (16 and 17 plan it each call, as
    -- before). EXECUTE of the statement itself parsed and planned the walk on
    -- every search (~0.1 ms); a call by name plans only the call. The index's expression is in its text (pgvector
    -- needs the dimension as a type modifier), so a function per (table,
    -- distance, size, precision, own index) whose index exists: made by the
    -- index builders in the operator's session and on every migrate, as the
    -- tables' owner, and made again where the statement changed. sift._dense_ids calls one where it exists and runs
    -- the statement itself otherwise.
    for w in
        select distinct sift._walk_name(s.dimensions, s.distance, not s.builtin, s.dense_precision = 'half',
                                        x.own_index) as name,
               s.dimensions, s.distance::text as distance, not s.builtin as added,
               s.dense_precision = 'half' as half, x.own_index
        from sift.vector_spaces s
        cross join lateral (select sift._space_own_index(s) as own_index) x
        -- Only a walk whose index is there: a space waiting for its index
        -- (sift.index_requests) is scanned exactly meanwhile, and gets its
        -- function when the operator builds the index.
        where pg_catalog.to_regclass(pg_catalog.format('sift.%I', sift._space_index_name(s))) is not null
        order by 1
    loop
        body := pg_catalog.format(sift._dense_ids_sql(),
                                  sift._dense_rows_sql(w.dimensions, w.distance, false, null, w.added, w.half,
                                                       w.own_index));
        continue when exists (select 1 from pg_catalog.pg_proc p
                              where p.pronamespace = 'sift'::pg_catalog.regnamespace and p.proname = w.name
                                and p.prosrc = body);
        execute pg_catalog.format(
            'create or replace function sift.%I(query @extschema:vector@.vector, collection_ids bigint[], '
            'fpath jsonpath, n integer, space_id bigint, out ids bigint[], out dists double precision[]) '
            'language sql stable security invoker set search_path = pg_catalog, pg_temp '
            'set plan_cache_mode = force_generic_plan as %L', w.name, body);
        execute pg_catalog.format(
            'comment on function sift.%I(@extschema:vector@.vector, bigint[], jsonpath, integer, bigint) is %L',
            w.name, 'Internal, made by sift._ensure_walks: the dense leg''s HNSW walk over '
                    || case when w.added then 'an added space''s vectors' else 'the chunks'' own vectors' end
                    || pg_catalog.format(' (%s, %s dimensions, %s precision%s), planned once a session (PostgreSQL 18).',
                                         w.distance, w.dimensions,
                                         case when coalesce(w.half, w.dimensions > 2000) then 'half' else 'full' end,
                                         case when w.own_index is null then ''
                                              else ', its own index' end));
        fn := pg_catalog.format('sift.%I(@extschema:vector@.vector, bigint[], jsonpath, integer, bigint)',
                                w.name)::pg_catalog.regprocedure;
        -- The grants every function of sift has (sql/90_trust.sql).
        execute pg_catalog.format('revoke all on function %s from public', fn);
        execute pg_catalog.format('grant execute on function %s to sift_reader, sift_gateway', fn);
        -- Installed as an extension: a member of it, so DROP EXTENSION takes it too
        -- (one made by the extension's own script already is).
        if exists (select 1 from pg_catalog.pg_extension e where e.extname = 'pgsift')
           and not exists (select 1 from pg_catalog.pg_depend d
                           where d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass and d.objid = fn
                             and d.deptype = 'e') then
            execute pg_catalog.format('alter extension pgsift add function %s', fn);
        end if;
        made := made + 1;
    end loop;
    perform sift._make_call_walk();
    return made;
end;
$$;
comment on function sift._ensure_walks() is
    'Internal, writes: makes the walk function (sift._walk_name) of every vector space''s dense leg that '
    'is missing or not its statement any more; run by the index builders and on every migrate, as the '
    'tables'' owner. Returns how many it made.';


create or replace function sift._dense_ids(
    collection_ids bigint[], dims integer, metric text, query @extschema:vector@.vector,
    fpath jsonpath, n integer, exact boolean, space_id bigint, half boolean, own_index bigint,
    ef_search integer, iterative boolean,
    out ids bigint[], out dists double precision[])
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    saved_ef text;
    saved_it text;
    walk     text;
    walked   boolean;
begin
    -- A leg. What every leg (this one, sift._space_dense_ids,
    -- sift._question_ids, sift._lexical_ids) gives sift._pool and the plain
    -- path: its top n chunks for the query as arrays, the ids best first
    -- and their raw scores (here distances: smaller is better); ties go to
    -- the smaller chunk id; the metadata filter applies inside the leg, so
    -- the top n are n that pass it; security invoker, so row-level security
    -- holds (no chunk of another tenant is ever a candidate). A leg with
    -- nothing to give returns null or empty arrays.
    -- exact: scan rather than walk (sift._dense_exact); ef_search: the
    -- hnsw_ef_search knob; iterative: pgvector has iterative scans
    -- (sift._pgvector_has_iterative_scan). Both statements are the rows'
    -- (sift._dense_rows_sql) as two arrays in (distance, chunk_id) order.
    if not exact then
        -- Transaction-local and restored right after: a pooled connection never
        -- keeps them, and the caller's own settings survive the call (a
        -- function's SET clause would restore only the settings it names).
        saved_ef := pg_catalog.current_setting('hnsw.ef_search', true);
        saved_it := case when iterative then pg_catalog.current_setting('hnsw.iterative_scan', true) end;
        perform pg_catalog.set_config('hnsw.ef_search', sift._hnsw_ef_search(ef_search, n)::text, true),
                case when iterative then pg_catalog.set_config('hnsw.iterative_scan', 'relaxed_order', true) end;
        -- The walk's function (sift._ensure_walks) where it exists: planned once
        -- a session; else the statement itself.
        walk := sift._walk_name(dims, metric, space_id is not null, half, own_index);
        walked := false;
        if pg_catalog.to_regproc('sift.' || walk) is not null then
            -- By a static call (sift._call_walk), else by name.
            select c.ids, c.dists, c.walked into ids, dists, walked
            from sift._call_walk(walk, query, collection_ids, fpath, n, space_id) c;
            if not walked then
                execute pg_catalog.format('select w.ids, w.dists from sift.%I($1, $2, $3, $4, $5) w', walk)
                    into ids, dists
                    using query, collection_ids, fpath, n, space_id;
            end if;
        else
            execute pg_catalog.format(sift._dense_ids_sql(),
                                      sift._dense_rows_sql(dims, metric, false, fpath is not null,
                                                           space_id is not null, half, own_index))
                into ids, dists
                using query, collection_ids, fpath, n, space_id;
        end if;
        perform pg_catalog.set_config('hnsw.ef_search', coalesce(saved_ef, '40'), true),
                case when iterative then pg_catalog.set_config('hnsw.iterative_scan', coalesce(saved_it, 'off'), true) end;
        if coalesce(cardinality(ids), 0) >= n then
            return;
        end if;
        -- The index walk came back short: answer from an exact scan instead.
    end if;
    execute pg_catalog.format(sift._dense_ids_sql(),
                              sift._dense_rows_sql(dims, metric, true, fpath is not null, space_id is not null))
        into ids, dists
        using query, collection_ids, fpath, n, space_id;
end;
$$;
comment on function sift._dense_ids(bigint[], integer, text, @extschema:vector@.vector, jsonpath, integer, boolean,
    bigint, boolean, bigint, integer, boolean) is
    'Internal: the dense leg''s top n chunk ids and their distances, best first (ties: smaller id; space_id: an added '
    'space''s vectors; null: the chunks'' own; half and own_index: the index the space walks, '
    'sift._dense_rows_sql), metadata filter (sift.filter_path) inside the leg; exact when asked '
    '(sift._dense_exact), else HNSW (ef_search: the hnsw_ef_search knob, null its default; an '
    'iterative scan where pgvector has one), exact again if the index walk comes back short.';


create or replace function sift._space_dense_ids(
    space sift.vector_spaces, knobs sift.knob_set, query @extschema:vector@.vector, fpath jsonpath, n integer,
    out ids bigint[], out dists double precision[])
language sql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- A leg (sift._pool; its contract: sift._dense_ids). The space's vectors
    -- (an added space's in sift.chunk_vectors), the index it walks (its own,
    -- or the shared one of its size), exact for small collections or while
    -- that index waits for its build (sift._dense_exact).
    select d.ids, d.dists
    from sift._dense_ids(array[space.collection_id], space.dimensions, space.distance, query, fpath, n,
                         sift._dense_exact(array[space.collection_id], knobs.exact_search_limit,
                                           case when not sift._space_dedicated(space)
                                                then sift._space_index_name(space) end),
                         case when space.builtin then null else space.space_id end,
                         space.dense_precision = 'half', sift._space_own_index(space), knobs.hnsw_ef_search,
                         sift._pgvector_has_iterative_scan()) d
$$;
comment on function sift._space_dense_ids(sift.vector_spaces, sift.knob_set, @extschema:vector@.vector, jsonpath,
    integer) is
    'Internal: the dense leg of a vector space of a collection (sift._dense_ids): the top n chunk ids '
    'and distances, best first (ties: smaller id), metadata filter (sift.filter_path) inside the leg; '
    'exact for small collections (the exact_search_limit knob), HNSW otherwise (the hnsw_ef_search '
    'knob), exact again if the walk comes back short.';


-- Every migrate: the walk functions of the spaces there are, in step with
-- this file's statements.
select sift._ensure_walks();
