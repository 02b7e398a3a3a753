-- BM25 statistics: maintained by statement triggers on sift.chunks (exact,
-- append-only, no shared row to queue on), folded and extended by
-- sift.refresh_lexical_stats (cheap; the Python client runs it after ingest).

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
    -- Terms are sorted bytewise (collate "C"): the order is only for grouping,
    -- and the database's collation (strcoll, no abbreviated keys) made this
    -- sort of every entry ~1.6x slower.
    with ranked as materialized (
        select e.lexeme collate "C" as lexeme, e.chunk_id, e.tf, e.dl, i.impact, p.size,
               row_number() over (partition by e.lexeme collate "C" order by i.impact desc, e.chunk_id) as rn
        from sift.list_build_entries e
        join sift.list_build_plan p on p.collection_id = e.collection_id and p.lexeme = e.lexeme
        cross join lateral (select sift._bm25_impact(e.tf, e.dl, p.avgdl_ref, p.k1_ref, p.b_ref)
                            as impact) i
        where e.collection_id = _write_lists.collection_id and i.impact > p.floor_min
    ), cuts as (
        select r.lexeme, r.impact from ranked r where r.rn = r.size + 1
    ), floors as materialized (
        select p.lexeme, greatest(p.floor_min, coalesce(c.impact, 0)) as floor_impact
        from sift.list_build_plan p
        left join cuts c on c.lexeme = p.lexeme collate "C"
        where p.collection_id = _write_lists.collection_id
    ), lists as (
        insert into sift.term_lists (collection_id, lexeme, floor_impact, avgdl_ref, k1_ref, b_ref,
                                     chunks_ref, deleted_ref)
        select collection_id, p.lexeme, f.floor_impact, p.avgdl_ref, p.k1_ref, p.b_ref,
               p.chunks_ref, p.deleted_ref
        from sift.list_build_plan p join floors f on f.lexeme = p.lexeme
        where p.collection_id = _write_lists.collection_id
        returning 1
    )
    insert into sift.term_blocks (collection_id, lexeme, block_no, max_impact, chunk_ids, tfs, dls)
    select collection_id, r.lexeme, ((r.rn - 1) / 100)::integer, max(r.impact),
           array_agg(r.chunk_id order by r.rn), array_agg(r.tf order by r.rn),
           array_agg(r.dl order by r.rn)
    from ranked r
    join floors f on f.lexeme collate "C" = r.lexeme
    where r.rn <= r.size and r.impact > f.floor_impact
    group by r.lexeme, (r.rn - 1) / 100;
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
        select p.lexeme, p.size, t.df, p.avgdl_ref, p.k1_ref, p.b_ref
        from sift.list_build_plan p
        join sift.term_df t on t.collection_id = p.collection_id and t.lexeme = p.lexeme
        where p.collection_id = _gather_list_entries.collection_id and t.df > 1.5 * p.size
    ), cuts as (
        -- (grouped bytewise, collate "C": see sift._write_lists)
        select s.lexeme collate "C" as lexeme,
               pg_catalog.percentile_disc(1 - 1.5 * s.size / s.df) within group (order by s.impact) as cut
        from (select u.lexeme, b.size, b.df,
                     sift._bm25_impact(u.tf, u.dl, b.avgdl_ref, b.k1_ref, b.b_ref) as impact
              from (select u.lexeme, pg_catalog.array_length(u.positions, 1) as tf, c.lexical_length as dl
                    from sift.chunks c
                    cross join lateral pg_catalog.unnest(c.search_vector) u
                    where c.collection_id = _gather_list_entries.collection_id and pg_catalog.random() < rate
                    offset 0) u
              join big b on b.lexeme = u.lexeme) s
        group by 1, s.size, s.df
    )
    update sift.list_build_plan p
    set floor_min = c.cut
    from cuts c
    where p.collection_id = _gather_list_entries.collection_id and p.lexeme collate "C" = c.lexeme;
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


create or replace function sift.refresh_lexical_stats(
    collection   text,
    min_df       integer default null,
    list_size    integer default 2000,
    list_fraction double precision default 0,
    max_drift    double precision default 0.25,
    rebuild      boolean default false)
returns table (pending_folded bigint, lists_built integer)
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
-- Batch work over whole term sets: a nested loop is never the right join
-- there, and a collection younger than its table's statistics looks empty to
-- the planner, which then nests loops over thousands of terms. (A small
-- refresh looks its terms up by key instead: `= any (changed)`.)
set enable_nestloop = off
-- Every statement planned for this call's arrays and flags (a cached generic
-- plan keeps the scans chosen for another call's; a custom plan folds
-- `whole or ...` away and hashes a long `= any`).
set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
    col      sift.collections := sift._collection(refresh_lexical_stats.collection);
    ref_k1   double precision := sift._stored_knob(col, 'bm25_k1')::double precision;
    ref_b    double precision := sift._stored_knob(col, 'bm25_b')::double precision;
    folded   bigint := 0;
    gone_terms text[];
    built    integer := 0;
    avgdl    double precision;
    n_chunks double precision;
    deleted  bigint;
    -- The terms the fold changed and by how much (0: written and deleted again,
    -- or held by a re-analysed chunk), and the lists due for a rebuild.
    changed  text[];
    changes  bigint[];
    drifted  text[];
    grew     text[];    -- the lists whose deltas the fold's statements added to ...
    grew_by  integer[]; -- ... and how many entries each
    shrunk   text[];    -- folded terms now in fewer chunks (only they can lose a list)
    whole    boolean;   -- every term of the collection considered, not only the folded
    everything boolean; -- ... because lists may be due whatever the fold holds (rebuild, min_df)
    fold_all boolean;   -- the fold's updates through a scan of every term (else by key)
    terms_est real;
    built_df integer;   -- the min_df the lists were built under (null: never, or unknown)
begin
    if list_size is null or list_fraction is null or max_drift is null
       or min_df < 1 or list_size < 1 or list_size > 1000000 or list_fraction < 0 or list_fraction > 1
       or max_drift < 0 then
        raise exception 'refresh_lexical_stats: min_df and list_size must be at least 1, '
                        'list_fraction within [0, 1], max_drift at least 0'
            using errcode = 'SF003';
    end if;
    -- Fold pending deltas into one row per key, alone on the collection's list
    -- lock from here to the end: chunk writers share it until they commit, so
    -- the fold sees every writer's rows (under repeatable read, those in the
    -- transaction's snapshot), and no other refresh inserts the same new terms
    -- meanwhile.
    perform sift._lock_collection(col.collection_id, true);
    -- No min_df given: the one the lists were built under (100 for a first
    -- build). A refresh after writes (the Python client's) so keeps a
    -- min_df chosen once, where the default would drop the lists it added and
    -- look at every term again.
    built_df := (select max(s.lists_min_df) from sift.collection_lexical_stats s
                 where s.collection_id = col.collection_id and s.lists_min_df >= 1);
    min_df := coalesce(refresh_lexical_stats.min_df, built_df, 100);
    -- Only a folded term can have crossed min_df either way, lost its list to
    -- a re-analysed chunk or grown a delta: a refresh looks at those alone,
    -- by key (`= any (changed)`: index lookups, whatever the planner thinks of
    -- the collection's size; its cost follows the write, not the
    -- vocabulary), unless the lists were built under another min_df (or
    -- never, or an upgrade left it unknown), or all are rebuilt.
    everything := rebuild or built_df is distinct from min_df;
    whole := everything;
    with gone as (
        delete from sift.term_df_pending p
        where p.collection_id = col.collection_id
        returning p.lexemes, p.counts, p.delta_lexemes, p.delta_entries
    )
    select c.lexemes, c.ns, g.lexemes, g.ns
    into changed, changes, grew, grew_by
    from (select coalesce(pg_catalog.array_agg(d.lexeme), '{}') as lexemes,
                 coalesce(pg_catalog.array_agg(d.n), '{}') as ns
          from (select u.lexeme, sum(u.n)::bigint as n
                from gone, unnest(gone.lexemes, gone.counts) as u(lexeme, n)
                group by u.lexeme) d) c
    cross join (select coalesce(pg_catalog.array_agg(e.lexeme), '{}') as lexemes,
                       coalesce(pg_catalog.array_agg(e.n), '{}') as ns
                from (select u.lexeme, sum(u.n)::integer as n
                      from gone, unnest(gone.delta_lexemes, gone.delta_entries) as u(lexeme, n)
                      -- (arrays of unequal length, written by hand, pad with nulls)
                      where u.lexeme is not null and u.n is not null
                      group by u.lexeme) e) g;
    -- The entries each list's delta gained, before any list is rebuilt below
    -- (a rebuilt list starts with no delta, and 0).
    update sift.term_lists l set delta_entries = l.delta_entries + g.n
    from unnest(grew, grew_by) as g(lexeme, n)
    where l.collection_id = col.collection_id and l.lexeme = any (grew) and l.lexeme = g.lexeme;
    -- Looked up by key while the fold is a small share of the terms; past
    -- that, a scan of every term is cheaper, and as right (it is what a whole
    -- pass does). The fold's own update goes by key up to an eighth of the
    -- terms (~6 us a term by key against ~0.9 us a row of the table scanned
    -- and hashed: at 100,000 chunks, 22,500 of 450,000 terms took 0.32 s
    -- against 0.57); the statements after it, whose lookups mostly miss (few
    -- folded terms have a list), up to a thirty-second.
    select c.reltuples into terms_est from pg_catalog.pg_class c where c.oid = 'sift.term_df'::pg_catalog.regclass;
    fold_all := whole or not (8 * cardinality(changed) < terms_est);
    whole := whole or not (32 * cardinality(changed) < terms_est);
    -- Known terms updated (those whose counts cancel out left alone), new ones
    -- inserted in key order: one insert ... on conflict took a speculative
    -- insertion per term, 2.5x slower on a first refresh, which inserts every
    -- term. New: what the update did not return (a hashed anti-join, not a
    -- second lookup per term).
    with d as (
        select u.lexeme, u.n from unnest(changed, changes) as u(lexeme, n)
    ), known as (
        update sift.term_df t set df = t.df + d.n
        from d
        where t.collection_id = col.collection_id and (fold_all or t.lexeme = any (changed)) and t.lexeme = d.lexeme
          and d.n <> 0
        returning t.lexeme, t.df
    ), fresh as (
        insert into sift.term_df (collection_id, lexeme, df)
        select col.collection_id, d.lexeme, d.n
        from d
        where d.n > 0   -- (a term written and deleted again between refreshes: none)
          and not exists (select 1 from known k where k.lexeme = d.lexeme)
        order by d.lexeme
        returning 1
    )
    select (select count(*) from known) + (select count(*) from fresh),
           array(select k.lexeme from known k where k.df = 0)
    into folded, gone_terms;
    -- Terms no chunk holds any more (only a folded term can have reached 0).
    delete from sift.term_df t where t.collection_id = col.collection_id and t.lexeme = any (gone_terms);
    with gone as (
        delete from sift.collection_lexical_stats s
        where s.collection_id = col.collection_id
        returning s.chunks, s.tokens, s.deleted)
    insert into sift.collection_lexical_stats (collection_id, chunks, tokens, deleted, pending, lists_min_df)
    select col.collection_id, coalesce(sum(g.chunks), 0), coalesce(sum(g.tokens), 0),
           coalesce(sum(g.deleted), 0), false, min_df
    from gone g;

    -- Still alone on the list lock: chunk writers wait until these lists are
    -- committed, so none slips between snapshot and list.
    select sum(s.tokens)::double precision / nullif(sum(s.chunks), 0), sum(s.chunks), sum(s.deleted)
    into avgdl, n_chunks, deleted
    from sift.collection_lexical_stats s where s.collection_id = col.collection_id;
    if avgdl is null then
        delete from sift.term_lists l where l.collection_id = col.collection_id;
        return query select folded, 0;
        return;
    end if;
    -- Only a term in fewer chunks than before can have fallen below min_df:
    -- a refresh after writes alone looks up no list to drop.
    shrunk := array(select u.lexeme from unnest(changed, changes) as u(lexeme, n) where u.n < 0);
    if everything or cardinality(shrunk) > 0 then
        delete from sift.term_lists l
        where l.collection_id = col.collection_id
          and (whole or l.lexeme = any (shrunk))
          and not exists (select 1 from sift.term_df t
                          where t.collection_id = col.collection_id and (whole or t.lexeme = any (shrunk))
                            and t.lexeme = l.lexeme and t.df >= min_df);
    end if;

    -- Lists for terms that became common, and rebuilt where the collection's
    -- k1 or b changed, avgdl drifted or deletions left more than max_drift of
    -- the list's chunks dead since it was built.
    drifted := array(select l.lexeme from sift.term_lists l
                     where l.collection_id = col.collection_id
                       and (rebuild or l.k1_ref <> ref_k1 or l.b_ref <> ref_b
                            or abs(avgdl / l.avgdl_ref - 1) > max_drift
                            or deleted - l.deleted_ref > max_drift * greatest(l.chunks_ref, 1)));
    insert into sift.list_build_plan
    select col.collection_id, t.lexeme, greatest(list_size, ceil(t.df * list_fraction))::integer, 0, avgdl,
           ref_k1, ref_b, n_chunks, deleted
    from sift.term_df t
    where t.collection_id = col.collection_id
      and (whole or t.lexeme = any (changed) or t.lexeme = any (drifted))
      and t.df >= min_df
      and (t.lexeme = any (drifted)
           or not exists (select 1 from sift.term_lists l
                          where l.collection_id = col.collection_id and l.lexeme = t.lexeme));
    perform sift._gather_list_entries(col.collection_id, n_chunks);
    built := sift._write_lists(col.collection_id);

    -- Deltas of a block or a quarter of their list, whichever is more, are
    -- merged into their lists' blocks (same reference, so no chunk is read;
    -- the floor only rises). A merge rewrites the list, so waiting for a
    -- quarter of it keeps that to a few entries rewritten per entry added.
    -- (A delta only grows when a chunk holding its term is written, and that
    -- statement's pending row says by how much: folded into delta_entries above.)
    insert into sift.list_build_plan
    -- (Each due list's df looked up by key: joined, every term's df was
    -- hashed for the few lists due, 0.2 s at 450,000 terms.)
    select col.collection_id, l.lexeme,
           greatest(list_size, ceil(coalesce((select t.df from sift.term_df t
                                              where t.collection_id = l.collection_id and t.lexeme = l.lexeme), 0)
                                    * list_fraction))::integer,
           l.floor_impact, l.avgdl_ref, l.k1_ref, l.b_ref, l.chunks_ref, l.deleted_ref
    from sift.term_lists l
    where l.collection_id = col.collection_id and (whole or l.lexeme = any (grew))
      and l.delta_entries >= greatest(100, l.entries / 4);
    insert into sift.list_build_entries (collection_id, lexeme, chunk_id, tf, dl)
    select col.collection_id, b.lexeme, u.chunk_id, u.tf, u.dl
    from sift.list_build_plan p
    join sift.term_blocks b on b.collection_id = p.collection_id and b.lexeme = p.lexeme
    cross join lateral unnest(b.chunk_ids, b.tfs, b.dls) as u(chunk_id, tf, dl)
    where p.collection_id = col.collection_id
    union all
    select col.collection_id, d.lexeme, u.chunk_id, u.tf, u.dl
    from sift.list_build_plan p
    join sift.term_deltas d on d.collection_id = p.collection_id and d.lexeme = p.lexeme
    cross join lateral unnest(d.chunk_ids, d.tfs, d.dls) as u(chunk_id, tf, dl)
    where p.collection_id = col.collection_id;
    built := built + sift._write_lists(col.collection_id);
    -- The chunks just written wait in the text index's pending list, which
    -- every search would read whole: into the index with them (the work GIN
    -- would do at its next flush, at this batch's size).
    perform sift._clean_text_index();
    return query select folded, built;
end;
$$;
comment on function sift.refresh_lexical_stats(text, integer, integer, double precision,
    double precision, boolean) is
    'Folds pending BM25 statistics (reads are exact either way, faster after); builds impact '
    'lists (a term''s best max(list_size, list_fraction x df) chunks, in blocks) for terms in at '
    'least min_df chunks (not given: the min_df the lists were built under, 100 for a first '
    'build, so a refresh after each write keeps a min_df chosen once); rebuilds lists whose k1, '
    'b or reference avgdl no longer hold or that deletions have thinned by more than max_drift '
    '(rebuild => true rebuilds every list); merges list deltas of max(100, a quarter of the '
    'list) chunks or more (counted as the writers add them); moves the text index''s '
    'pending entries into it (sift._clean_text_index). Looks only at the terms it folds (every '
    'term when the lists were built under another min_df, or with rebuild), so it is cheap when '
    'little changed; '
    'the Python client runs it after every upsert_documents and delete_document. Writes; '
    'returns lists built or merged.';


create or replace function sift._analyze(work_table regclass)
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Fresh row counts for the planner, where this role may take them: the
    -- owner, or (PostgreSQL 17+) a role granted MAINTAIN, as sift_writer is.
    if pg_catalog.pg_has_role(current_user, (select c.relowner from pg_catalog.pg_class c where c.oid = work_table), 'MEMBER')
       or (current_setting('server_version_num')::integer >= 170000
           and pg_catalog.has_table_privilege(work_table, 'MAINTAIN')) then
        execute format('analyze %s', work_table);
    end if;
end;
$$;
comment on function sift._analyze(regclass) is
    'Internal: ANALYZE a work table when the current role may (else the planner keeps its estimate).';
