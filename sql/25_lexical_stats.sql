-- BM25 statistics: maintained by statement triggers on sift.chunks (exact,
-- append-only, no shared row to queue on), folded and extended by
-- sift.refresh_lexical_stats (cheap; the Python client runs it after ingest).
-- In: the chunks a statement wrote or deleted; a collection's terms. Out:
-- pending term counts and chunk statistics, exact at every read, and the
-- impact lists written from a build plan (sift._write_lists).

create or replace function sift._chunks_stats()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- An update that re-analysed no text (a vector cleared or replaced) leaves
    -- the statistics and lists as they are.
    if tg_op = 'UPDATE' then
        -- (A set difference, hashed or sorted: a join of the two transition
        -- tables, which have no statistics, is planned as a nested loop.)
        if not exists (select o.chunk_id, o.collection_id, o.lexical_length, pg_catalog.md5(o.search_vector::text)
                       from old_chunks o
                       except
                       select n.chunk_id, n.collection_id, n.lexical_length, pg_catalog.md5(n.search_vector::text)
                       from new_chunks n) then
            return null;
        end if;
    end if;
    if tg_op in ('DELETE', 'UPDATE') then
        -- (Chunks deleted with their collection leave no statistics to keep.)
        insert into sift.collection_lexical_stats (collection_id, chunks, tokens, deleted)
        select o.collection_id, -count(*), -sum(o.lexical_length), count(*) from old_chunks o
        where exists (select 1 from sift.collections c where c.collection_id = o.collection_id)
        group by 1;
        -- (lexemes alone, unsorted, a row per bucket: as for inserts below)
        insert into sift.term_df_pending (collection_id, bucket, lexemes, counts)
        select x.collection_id, sift._pending_bucket(x.lexeme), array_agg(x.lexeme), array_agg(-x.n)
        from (select o.collection_id, u.lexeme, count(*) as n
              from old_chunks o, pg_catalog.unnest(pg_catalog.tsvector_to_array(o.search_vector)) u(lexeme)
              where exists (select 1 from sift.collections c where c.collection_id = o.collection_id)
              group by 1, 2) x
        group by 1, 2;
        -- Deleted chunks stay in their lists (blocks and deltas) until the list
        -- is rebuilt: the leg scores candidates against sift.chunks, so they
        -- never come back, and writers keep no index by chunk. A re-analysed
        -- chunk keeps its id, so a list entry would carry a stale tf: its
        -- terms' lists go, and refresh rebuilds them (chunk updates are rare:
        -- upserts replace chunks).
        if tg_op = 'UPDATE' then
            delete from sift.term_lists l
            using (select distinct o.collection_id, u.lexeme
                   from old_chunks o, pg_catalog.unnest(pg_catalog.tsvector_to_array(o.search_vector)) u(lexeme)) x
            where l.collection_id = x.collection_id and l.lexeme = x.lexeme;
        end if;
    end if;
    if tg_op in ('INSERT', 'UPDATE') then
        insert into sift.collection_lexical_stats (collection_id, chunks, tokens)
        select n.collection_id, count(*), sum(n.lexical_length) from new_chunks n group by 1;
        -- A new chunk joins a common term's list when it beats the list's floor.
        -- How many joined each list goes on the statement's pending rows with
        -- its term counts, so a refresh knows which deltas are due for a merge
        -- without reading them.
        -- The counts go in one row per bucket of lexemes (sift._pending_bucket):
        -- a search then reads only its own terms' rows, ~30 lexemes each, where
        -- one row of every lexeme (~2,000 a document) was read whole.
        -- (The counts from the lexemes alone: unnest of the vector builds each
        -- one's positions, 25 % slower. Unsorted: both arrays take the rows in
        -- the same order, and readers look terms up.)
        with added as (
            insert into sift.term_deltas (collection_id, lexeme, chunk_ids, tfs, dls)
            select x.collection_id, x.lexeme, array_agg(x.chunk_id order by x.chunk_id),
                   array_agg(x.tf order by x.chunk_id), array_agg(x.dl order by x.chunk_id)
            from (select l.collection_id, l.lexeme, n.chunk_id, l.floor_impact,
                         pg_catalog.array_length(u.positions, 1) as tf, n.lexical_length as dl,
                         sift._bm25_impact(pg_catalog.array_length(u.positions, 1), n.lexical_length,
                                           l.avgdl_ref, l.k1_ref, l.b_ref) as impact
                  from new_chunks n
                  cross join pg_catalog.unnest(n.search_vector) u
                  join sift.term_lists l on l.collection_id = n.collection_id and l.lexeme = u.lexeme) x
            where x.impact > x.floor_impact
            group by x.collection_id, x.lexeme
            returning collection_id, lexeme, pg_catalog.cardinality(chunk_ids) as entries
        ), grown as (
            select a.collection_id, sift._pending_bucket(a.lexeme) as bucket, array_agg(a.lexeme) as lexemes,
                   array_agg(a.entries) as entries
            from added a
            group by 1, 2
        )
        -- (A list's term is among the new chunks' lexemes, so its bucket's row
        -- exists.)
        insert into sift.term_df_pending (collection_id, bucket, lexemes, counts, delta_lexemes, delta_entries)
        select x.collection_id, x.bucket, x.lexemes, x.counts, g.lexemes, g.entries
        from (select y.collection_id, sift._pending_bucket(y.lexeme) as bucket, array_agg(y.lexeme) as lexemes,
                     array_agg(y.n) as counts
              from (select n.collection_id, u.lexeme, count(*) as n
                    from new_chunks n, pg_catalog.unnest(pg_catalog.tsvector_to_array(n.search_vector)) u(lexeme)
                    group by 1, 2) y
              group by 1, 2) x
        left join grown g on g.collection_id = x.collection_id and g.bucket = x.bucket;
    end if;
    return null;
end;
$$;
comment on function sift._chunks_stats() is
    'Trigger: appends BM25 statistics deltas (chunks, tokens, df per lexeme) for each '
    'statement that writes chunks, and adds new chunks that beat a common term''s list floor to '
    'the list''s delta (how many, per list, on the statement''s row of pending counts).';

-- create or replace: re-applying it never locks out readers (PostgreSQL 14+).
create or replace trigger chunks_stats_insert after insert on sift.chunks
    referencing new table as new_chunks
    for each statement execute function sift._chunks_stats();
-- create or replace: re-applying it never locks out readers (PostgreSQL 14+).
create or replace trigger chunks_stats_delete after delete on sift.chunks
    referencing old table as old_chunks
    for each statement execute function sift._chunks_stats();
-- create or replace: re-applying it never locks out readers (PostgreSQL 14+).
create or replace trigger chunks_stats_update after update on sift.chunks
    referencing old table as old_chunks new table as new_chunks
    for each statement execute function sift._chunks_stats();


create or replace function sift._term_lists_gone()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- A list's delta goes with it, once per statement (a refresh drops or
    -- rebuilds thousands of lists in one). Not a foreign key: its check ran
    -- for every delta row a writer added, locking the list's row each time
    -- (migration 0028). Fired for a collection's cascade too, as its owner.
    delete from sift.term_deltas d
    using (select distinct g.collection_id, g.lexeme from gone_lists g) g
    where d.collection_id = g.collection_id and d.lexeme = g.lexeme;
    return null;
end;
$$;
comment on function sift._term_lists_gone() is
    'Trigger: deletes the deltas (sift.term_deltas) of the impact lists a statement deleted.';

-- create or replace: re-applying it never locks out readers (PostgreSQL 14+).
create or replace trigger term_lists_gone after delete on sift.term_lists
    referencing old table as gone_lists
    for each statement execute function sift._term_lists_gone();


create or replace function sift._write_lists(collection_id bigint)
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    written integer;
begin
    -- Replaces the lists planned in sift.list_build_plan with the entries
    -- gathered in sift.list_build_entries: per term, the best `size`
    -- entries above floor_min, in blocks of 100 in impact order; the floor is
    -- the larger of floor_min and the first impact left out, so every chunk
    -- outside a list scores at most its floor (at the list's reference).
    delete from sift.term_lists l
    using sift.list_build_plan p
    where l.collection_id = _write_lists.collection_id
      and p.collection_id = _write_lists.collection_id and l.lexeme = p.lexeme;
    -- Row counts for the planner: with none it nests loops over these
    -- (thousands of terms by millions of entries on a first refresh).
    perform sift._analyze('sift.list_build_plan');
    perform sift._analyze('sift.list_build_entries');
    -- The entries are ranked and grouped by their list's number in this
    -- build (k), not their term's text (as sift._gather_list_entries groups
    -- its sample, and sift._merge_deltas a merge): in the database's collation
    -- (strcoll, no abbreviated keys) the sort of every entry was ~1.6x
    -- slower than bytewise (collate "C"), and bytewise ~1.5x slower than by
    -- the number.
    with plan as materialized (
        select row_number() over (order by p.lexeme) as k, p.*
        from sift.list_build_plan p
        where p.collection_id = _write_lists.collection_id
    ), ranked as materialized (
        select p.k, e.chunk_id, e.tf, e.dl, i.impact, p.size,
               row_number() over (partition by p.k order by i.impact desc, e.chunk_id) as rn
        from sift.list_build_entries e
        join plan p on p.lexeme = e.lexeme
        cross join lateral (select sift._bm25_impact(e.tf, e.dl, p.avgdl_ref, p.k1_ref, p.b_ref)
                            as impact) i
        where e.collection_id = _write_lists.collection_id and i.impact > p.floor_min
    ), cuts as (
        select r.k, r.impact from ranked r where r.rn = r.size + 1
    ), floors as materialized (
        select p.k, p.lexeme, greatest(p.floor_min, coalesce(c.impact, 0)) as floor_impact
        from plan p
        left join cuts c on c.k = p.k
    ), lists as (
        insert into sift.term_lists (collection_id, lexeme, floor_impact, avgdl_ref, k1_ref, b_ref,
                                     chunks_ref, deleted_ref)
        select collection_id, p.lexeme, f.floor_impact, p.avgdl_ref, p.k1_ref, p.b_ref,
               p.chunks_ref, p.deleted_ref
        from plan p join floors f on f.k = p.k
        returning 1
    )
    insert into sift.term_blocks (collection_id, lexeme, block_no, max_impact, chunk_ids, tfs, dls)
    select collection_id, f.lexeme, ((r.rn - 1) / 100)::integer, max(r.impact),
           array_agg(r.chunk_id order by r.rn), array_agg(r.tf order by r.rn),
           array_agg(r.dl order by r.rn)
    from ranked r
    join floors f on f.k = r.k
    where r.rn <= r.size and r.impact > f.floor_impact
    group by f.lexeme, r.k, (r.rn - 1) / 100;
    -- (Each planned list's blocks looked up by key: a join hashed every block
    -- of the collection's lists to count a few.)
    update sift.term_lists l
    set entries = coalesce((select sum(cardinality(b.chunk_ids)) from sift.term_blocks b
                            where b.collection_id = l.collection_id and b.lexeme = l.lexeme), 0)
    from sift.list_build_plan p
    where l.collection_id = _write_lists.collection_id
      and p.collection_id = _write_lists.collection_id and p.lexeme = l.lexeme;
    delete from sift.list_build_entries e where e.collection_id = _write_lists.collection_id;
    delete from sift.list_build_plan p where p.collection_id = _write_lists.collection_id;
    get diagnostics written = row_count;
    return written;
end;
$$;
comment on function sift._write_lists(bigint) is
    'Internal, writes: replaces the planned impact lists with the gathered entries, in blocks.';


create or replace function sift._gather_list_entries(
    collection_id bigint, n_chunks double precision)
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
-- Every match of the text index: a session's gin_fuzzy_search_limit (any role
-- may set it, and a pooled connection keeps it) returns a random subset, and
-- a list built from one would miss chunks until the next rebuild.
set gin_fuzzy_search_limit = 0
as $$
#variable_conflict use_variable
declare
    total_df double precision;
    -- A sample of 30,000 chunks (a fiftieth past 1,500,000): at the default
    -- list size, 2,000, a term cut to 1.5 x its list expects 60 sampled entries
    -- above its cutoff or more (90 at a million chunks), where 40 would keep
    -- the list full (a short list about once in 500 terms; smaller list sizes
    -- sample fewer, so more often). A cutoff drawn too high only shortens a
    -- list: its floor is the cutoff, still a bound on every chunk left out.
    rate     double precision := least(1, greatest(30000, n_chunks / 50) / greatest(n_chunks, 1));
begin
    -- Every planned term's chunks, as (tf, dl). Few terms: one GIN lookup per
    -- term (tf read as ts_rank_cd with unit weights: the position count). Many
    -- (a first refresh, a rebuild): one pass over the collection's vectors,
    -- cheaper once their chunks outnumber the collection ~20 times over; a
    -- sample first gives each term with more chunks than 1.5 x its list size
    -- an impact cutoff expected to keep that many, so
    -- the pass keeps only those (the cutoff becomes the list's floor_min).
    -- (Looked up per planned term by key, whatever the join settings: a join
    -- would hash the collection's whole vocabulary for a few new lists.)
    select sum((select t.df from sift.term_df t where t.collection_id = p.collection_id and t.lexeme = p.lexeme))
    into total_df
    from sift.list_build_plan p
    where p.collection_id = _gather_list_entries.collection_id;
    if coalesce(total_df, 0) <= 20 * n_chunks then
        insert into sift.list_build_entries (collection_id, lexeme, chunk_id, tf, dl)
        select p.collection_id, p.lexeme, c.chunk_id, pg_catalog.ts_rank_cd('{1,1,1,1}', c.search_vector, q.q),
               c.lexical_length
        from sift.list_build_plan p
        cross join lateral (select sift._tsquery_or(array[p.lexeme]) as q offset 0) q   -- (once a term, not a chunk)
        cross join lateral (select c.chunk_id, c.collection_id, c.search_vector, c.lexical_length
                            from sift.chunks c
                            where c.search_vector @@ q.q offset 0) c
        where p.collection_id = _gather_list_entries.collection_id
          and c.collection_id = p.collection_id;
        return;
    end if;
    perform sift._analyze('sift.list_build_plan');   -- so the joins below hash rather than loop
    -- The cutoff per term: the impact its sample exceeds in a share 1.5 x size / df
    -- (a percentile, sorted within each term; a window over the whole sample and a
    -- join back cost 3x as much).
    with big as materialized (
        -- (k: the term's number here, which its sample is grouped by: see
        -- sift._write_lists)
        select row_number() over (order by p.lexeme) as k, p.lexeme, p.size, t.df, p.avgdl_ref, p.k1_ref, p.b_ref
        from sift.list_build_plan p
        join sift.term_df t on t.collection_id = p.collection_id and t.lexeme = p.lexeme
        where p.collection_id = _gather_list_entries.collection_id and t.df > 1.5 * p.size
    ), cuts as (
        select s.k,
               pg_catalog.percentile_disc(1 - 1.5 * s.size / s.df) within group (order by s.impact) as cut
        from (select b.k, b.size, b.df,
                     sift._bm25_impact(u.tf, u.dl, b.avgdl_ref, b.k1_ref, b.b_ref) as impact
              from (select u.lexeme, pg_catalog.array_length(u.positions, 1) as tf, c.lexical_length as dl
                    from sift.chunks c
                    cross join lateral pg_catalog.unnest(c.search_vector) u
                    where c.collection_id = _gather_list_entries.collection_id and pg_catalog.random() < rate
                    offset 0) u
              join big b on b.lexeme = u.lexeme) s
        group by s.k, s.size, s.df
    )
    update sift.list_build_plan p
    set floor_min = c.cut
    from cuts c
    join big b on b.k = c.k
    where p.collection_id = _gather_list_entries.collection_id and p.lexeme = b.lexeme;
    -- (The postings are fenced, offset 0, so the plan is hashed once: left to
    -- itself, with the collection newer than the table's statistics, the
    -- planner joins the plan inside the per-chunk unnest, once per chunk.)
    insert into sift.list_build_entries (collection_id, lexeme, chunk_id, tf, dl)
    select _gather_list_entries.collection_id, u.lexeme, u.chunk_id, u.tf, u.dl
    from (select c.chunk_id, u.lexeme, pg_catalog.array_length(u.positions, 1) as tf, c.lexical_length as dl
          from sift.chunks c
          cross join lateral pg_catalog.unnest(c.search_vector) u
          where c.collection_id = _gather_list_entries.collection_id
          offset 0) u
    join sift.list_build_plan p on p.lexeme = u.lexeme
    where p.collection_id = _gather_list_entries.collection_id
      and sift._bm25_impact(u.tf, u.dl, p.avgdl_ref, p.k1_ref, p.b_ref) > p.floor_min;
end;
$$;
comment on function sift._gather_list_entries(bigint, double precision) is
    'Internal: gathers the chunks of the planned terms for sift._write_lists, per term or in '
    'one sampled pass, whichever reads less.';


create or replace function sift._clean_text_index()
returns void
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    -- GIN keeps newly written entries in a pending list (up to
    -- gin_pending_list_limit, 4 MB by default) that every probe of the index
    -- reads whole: ~1.4 ms a lexical search per 100 pages, 147 pages after
    -- loading SciFact. Moving them into the index takes its owner. No
    -- argument: it cleans the one text index, whoever calls it; nothing
    -- comes back (how much was pending would say how much all tenants wrote).
    -- One cleaner at a time, and none waits for another: the index is shared,
    -- so a refresh queued behind another tenant's cleanup would hold its own
    -- collection's writers meanwhile; the running one moves what is there.
    -- Taken on a row of the owner's table, which no other role may read or
    -- lock (an advisory key would be anyone's to hold, and skip every clean),
    -- and let go when the clean is done: in a subtransaction rolled back
    -- after it (what the clean moved stays moved: an index page is not
    -- undone), so a caller's transaction left open holds no one's clean up.
    begin
        perform 1 from sift.operator_locks o where o.name = 'clean_text_index' for update skip locked;
        if found then
            -- An upkeep step never fails the write it follows (the index renamed,
            -- replaced or no longer this function's owner's): it says so and skips.
            begin
                perform pg_catalog.gin_clean_pending_list('sift.chunks_search_vector_idx'::pg_catalog.regclass);
            exception when others then
                raise warning 'pgsift: the text index''s pending list was not cleaned: %', sqlerrm;
            end;
        end if;
        raise sqlstate 'SFLCK';
    exception when sqlstate 'SFLCK' then
        null;
    end;
end;
$$;
comment on function sift._clean_text_index() is
    'Internal: moves the text index''s pending entries into the index (gin_clean_pending_list), so '
    'searches stop reading them one by one; skips when another session is cleaning, and warns '
    'instead of failing. Security definer (only the index''s owner may); run by '
    'sift.refresh_lexical_stats; writers only.';
