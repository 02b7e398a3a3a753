-- The question leg: a chunk's questions (sift.question_vectors, written by
-- pgsift.enrich) as vectors of their own in the collection's active space.
-- In: the space, the resolved knobs, the query vector, the metadata filter
-- and n. Out: the leg's arrays, as every leg's (sift._dense_ids has the
-- contract), and which question placed each chunk. sift._pool merges it into
-- the dense leg: each chunk at its best, its own vector or a question's.


create or replace function sift._question_ids(
    space sift.vector_spaces, knobs sift.knob_set, query @extschema:vector@.vector, fpath jsonpath, n integer,
    out ids bigint[], out dists double precision[], out questions smallint[])
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cid       bigint := space.collection_id;
    dims      integer := space.dimensions;
    metric    text := space.distance;
    iterative boolean := sift._pgvector_has_iterative_scan();
    saved_ef  text := current_setting('hnsw.ef_search', true);
    saved_it  text := case when iterative then current_setting('hnsw.iterative_scan', true) end;
    small     boolean;
    sql       text;
    walk      text := format('order by (q.embedding::@extschema:vector@.%1$s(%2$s)) %3$s ($1::@extschema:vector@.%1$s(%2$s))',
                             case when dims > 2000 then 'halfvec' else 'vector' end, dims,
                             sift._distance_operator(metric));
    arrays    text := 'select array_agg(l.chunk_id order by l.d, l.chunk_id), '
                      'array_agg(l.d order by l.d, l.chunk_id), array_agg(l.ordinal order by l.d, l.chunk_id) '
                      'from (%s) l';
begin
    -- A leg (sift._dense_ids has the contract): the n chunks nearest the
    -- query by their best question, best first (ties: smaller chunk id), with
    -- which question and its distance; metadata filter inside the leg;
    -- security invoker, so row-level security holds. Each chunk once, at its
    -- best question: the nearest 5n questions hold every such chunk's best (a
    -- chunk has at most 5). Few question vectors (the exact_search_limit
    -- knob) are measured exactly; more walk the partial HNSW index of their
    -- size (sift._ensure_dense_index), ordered by its own expression.
    select count(*) <= knobs.exact_search_limit into small
    from (select 1 from sift.question_vectors q
          where q.collection_id = cid
          limit knobs.exact_search_limit + 1) s;
    sql := format(
        'select b.chunk_id, b.ordinal, b.d from (
             select distinct on (t.chunk_id) t.chunk_id, t.ordinal, t.d
             from (select q.chunk_id, q.ordinal, q.embedding %1$s $1 as d
                   from sift.question_vectors q
                   %2$s
                   where q.collection_id = $2
                     and @extschema:vector@.vector_dims(q.embedding) = %4$s %3$s
                   %5$s
                   limit $4 * 5) t
             order by t.chunk_id, t.d, t.ordinal) b
         order by b.d, b.chunk_id
         limit $4',
        sift._distance_operator(metric),
        case when fpath is null then ''
             else 'join sift.chunks k on k.chunk_id = q.chunk_id join sift.documents d on d.document_id = k.document_id' end,
        case when fpath is null then ''
             else 'and pg_catalog.jsonb_path_match_tz(d.metadata, $3, ''{}'', true)' end,
        dims,
        case when small then 'order by 3, 1, 2' else walk end);
    if not small then
        -- Transaction-local and restored right after, as the dense leg does.
        perform set_config('hnsw.ef_search', sift._hnsw_ef_search(knobs.hnsw_ef_search, n * 5)::text, true);
        if iterative then
            perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
        end if;
        execute format(arrays, sql) into ids, dists, questions using query, cid, fpath, n;
        perform set_config('hnsw.ef_search', coalesce(saved_ef, '40'), true);
        if iterative then
            perform set_config('hnsw.iterative_scan', coalesce(saved_it, 'off'), true);
        end if;
        if coalesce(cardinality(ids), 0) >= n then
            return;
        end if;
        -- The index walk came back short: the exact scan answers instead.
        sql := replace(sql, walk, 'order by 3, 1, 2');
    end if;
    execute format(arrays, sql) into ids, dists, questions using query, cid, fpath, n;
end;
$$;
comment on function sift._question_ids(sift.vector_spaces, sift.knob_set, @extschema:vector@.vector, jsonpath,
    integer) is
    'Internal: the question leg, the n chunks nearest the query by their best question vector in the '
    'space (the collection''s active one), best first (ties: smaller id), metadata filter inside the '
    'leg, with their distances and which question (its ordinal): exact for a collection with at most '
    'exact_search_limit question vectors, else the partial HNSW index of their size (ef_search: the '
    'hnsw_ef_search knob, at least 5n), exact again if the walk comes back short.';


create or replace function sift._merge_questions(
    d_ids bigint[], d_dists double precision[], q_ids bigint[], q_dists double precision[], q_questions smallint[],
    n integer, out ids bigint[], out dists double precision[], out questions smallint[])
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Each chunk at its best, its own vector (question null) or its best
    -- question's (an own vector first on a tie), then the n best, best first
    -- (ties: smaller chunk id).
    -- (unnest of several arrays is a FROM-clause form, no function to qualify.)
    with a as (
        select u.id as chunk_id, u.d, null::smallint as qo
        from unnest(d_ids, d_dists) as u(id, d)
        union all
        select u.id, u.d, u.qo
        from unnest(q_ids, q_dists, q_questions) as u(id, d, qo)
    ), b as (
        select distinct on (a.chunk_id) a.chunk_id, a.d, a.qo
        from a order by a.chunk_id, a.d, a.qo nulls first
    ), c as (
        select b.* from b order by b.d, b.chunk_id limit n
    )
    select pg_catalog.array_agg(c.chunk_id order by c.d, c.chunk_id), pg_catalog.array_agg(c.d order by c.d, c.chunk_id),
           pg_catalog.array_agg(c.qo order by c.d, c.chunk_id)
    from c
$$;
comment on function sift._merge_questions(bigint[], double precision[], bigint[], double precision[], smallint[],
    integer) is
    'Internal: the dense leg''s arrays and the question leg''s (sift._question_ids) merged: each chunk '
    'at its nearer distance, with the question that placed it (null: its own vector), the n best '
    'first (ties: smaller id).';
