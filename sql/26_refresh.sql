-- The BM25 statistics folded and the impact lists built:
-- sift.refresh_lexical_stats. In: a collection's pending counts
-- (sift.term_df_pending) and its min_df and list sizes. Out: exact df
-- per term (sift.term_df) and impact lists in blocks (sift.term_lists,
-- sift.term_blocks) for the terms in at least min_df chunks.


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
    built    integer := 0;
    avgdl    double precision;
    n_chunks double precision;
    deleted  bigint;
    -- The terms the fold changed and by how much (0: written and deleted again,
    -- or held by a re-analysed chunk), and the lists due for a rebuild.
    changed  text[];
    changes  bigint[];
    drifted  text[];
    grew     text[];    -- the lists whose deltas the fold's statements added to
    whole    boolean;   -- every term of the collection considered, not only the folded
    everything boolean; -- ... because lists may be due whatever the fold holds (rebuild, min_df)
    built_df integer;   -- the min_df the lists were built under (null: never, or unknown)
    chosen   boolean;   -- ... and whether a caller chose it (else it is the size's)
begin
    if list_size is null or list_fraction is null or max_drift is null
       or min_df < 0 or list_size < 1 or list_size > 1000000 or list_fraction < 0 or list_fraction > 1
       or max_drift < 0 then
        raise exception 'refresh_lexical_stats: min_df at least 0 (0: by the collection''s size), list_size '
                        'at least 1, list_fraction within [0, 1], max_drift at least 0'
            using errcode = 'SF003';
    end if;
    -- Fold pending deltas into one row per key, alone on the collection's list
    -- lock from here to the end: chunk writers share it until they commit, so
    -- the fold sees every writer's rows (under repeatable read, those in the
    -- transaction's snapshot), and no other refresh inserts the same new terms
    -- meanwhile.
    perform sift._lock_collection(col.collection_id, true);
    -- The min_df to build under: the one given, else one a caller chose
    -- before, else the collection's size's (sift._lists_min_df).
    select m.min_df, m.built_df, m.chosen into min_df, built_df, chosen
    from sift._lists_min_df(col.collection_id, refresh_lexical_stats.min_df) m;
    -- Only a folded term can have crossed min_df either way, lost its list to
    -- a re-analysed chunk or grown a delta: a refresh looks at those alone,
    -- by key (`= any (changed)`: index lookups, whatever the planner thinks of
    -- the collection's size; its cost follows the write, not the
    -- vocabulary), unless the lists were built under another min_df (or
    -- never, or an upgrade left it unknown), or all are rebuilt.
    everything := rebuild or built_df is distinct from min_df;
    -- Pending deltas folded into exact df (sift._fold_pending says how); whole
    -- comes back true where the fold was a large share of the terms.
    select f.folded, f.changed, f.changes, f.grew, f.whole into folded, changed, changes, grew, whole
    from sift._fold_pending(col.collection_id, min_df, chosen, everything) f;

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
    -- The lists of terms now in fewer than min_df chunks dropped.
    perform sift._drop_lists(col.collection_id, min_df, everything, whole, changed, changes);

    -- The chunks just written wait in the text index's pending list, which
    -- every probe of the index reads whole: into the index with them (the
    -- work GIN would do at its next flush, at this batch's size), before the
    -- new lists are gathered by one probe a term (at 30,000 chunks, after a
    -- write of 1,000: 75 ms for the gather against 370-400 with the list
    -- still pending), and so before every search after this refresh.
    perform sift._clean_text_index();

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

    -- Deltas grown past a quarter of their list merged (sift._merge_deltas).
    built := built + sift._merge_deltas(col.collection_id, list_size, list_fraction, whole, grew);
    -- The other deltas of many rows, each in one row (sift._compact_deltas).
    perform sift._compact_deltas(col.collection_id, whole, grew);
    return query select folded, built;
end;
$$;
comment on function sift.refresh_lexical_stats(text, integer, integer, double precision,
    double precision, boolean) is
    'Folds pending BM25 statistics (reads are exact either way, faster after); builds impact '
    'lists (a term''s best max(list_size, list_fraction x df) chunks, in blocks) for terms in at '
    'least min_df chunks (not given: the one a caller chose before, so a refresh after each write '
    'keeps a min_df chosen once; none chosen, or 0: by the collection''s size, sift._auto_min_df, '
    '20 under 200,000 chunks, else 100); rebuilds lists whose k1, '
    'b or reference avgdl no longer hold or that deletions have thinned by more than max_drift '
    '(rebuild => true rebuilds every list); merges list deltas of max(100, a quarter of the '
    'list) chunks or more (counted as the writers add them); moves the text index''s '
    'pending entries into it (sift._clean_text_index). Looks only at the terms it folds (every '
    'term when the lists were built under another min_df, or with rebuild), so it is cheap when '
    'little changed; '
    'the Python client runs it after every upsert_documents and delete_document. Writes; '
    'returns lists built or merged.';


create or replace function sift._auto_min_df(chunks bigint)
returns integer
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The fewest chunks a term needs for an impact list, by the collection's
    -- size. A term without one is scored from its chunks' stored vectors on
    -- every search that names it (~4 us a chunk); a list is read at ~0.5 us an
    -- entry, but costs its rows, its build and a delta row a write. 20 held
    -- on every collection measured (lexical leg, paired, against 100: SciFact
    -- 0.80-0.89x; the scale corpus at 5,000 and 30,000 chunks 0.86-1.12x by
    -- query mix and build, at 100,000 0.82-0.98x); 2 or 5 won on SciFact
    -- (0.77-0.82x) and lost on the scale corpus (rare terms 1.24-1.41x: a
    -- query then runs both the rare terms' scoring and the whole lists' sum).
    -- From 200,000 chunks the long tail's lists would outnumber the chunks'
    -- own rows (318,293 more lists and 310 s more refresh at a million for
    -- 20), so 100.
    select case when chunks < 200000 then 20 else 100 end
$$;
comment on function sift._auto_min_df(bigint) is
    'Internal: the min_df a refresh takes by the collection''s size when no caller chose one: 20 under '
    '200,000 chunks, 100 from there.';


create or replace function sift._lists_min_df(
    collection_id bigint, given integer, out min_df integer, out built_df integer, out chosen boolean)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- No min_df given: the one a caller chose for the lists, if one did. A
    -- refresh after writes (the Python client's) so keeps a min_df chosen
    -- once, where another would drop the lists it added and look at every
    -- term again. Otherwise (or given 0) the collection's size picks it
    -- (sift._auto_min_df, in steps: a collection crosses few of them in its
    -- life, and each crossing looks at every term once). The lists keep the
    -- size's min_df they were built under while the size is within a quarter
    -- of a step, so one that hovers about it (deletes, then writes) is not
    -- rebuilt at each crossing.
    select case when _lists_min_df.given >= 1 then _lists_min_df.given
                when _lists_min_df.given is null and b.chosen then b.built_df
                when b.built_df in (sift._auto_min_df(b.chunks * 4 / 5), sift._auto_min_df(b.chunks * 5 / 4))
                    then b.built_df
                else sift._auto_min_df(b.chunks) end,
           b.built_df,
           coalesce(_lists_min_df.given >= 1, b.chosen)
    from (select pg_catalog.max(s.lists_min_df) filter (where s.lists_min_df >= 1) as built_df,
                 coalesce(pg_catalog.bool_or(s.lists_min_df_chosen) filter (where s.lists_min_df >= 1), false)
                     as chosen,
                 coalesce(pg_catalog.sum(s.chunks), 0)::bigint as chunks
          from sift.collection_lexical_stats s
          where s.collection_id = _lists_min_df.collection_id) b
$$;
comment on function sift._lists_min_df(bigint, integer) is
    'Internal: the min_df a refresh builds a collection''s impact lists under (given when at least 1, '
    'else one a caller chose before, else sift._auto_min_df of its size), the one they were built under '
    '(null: never, or unknown) and whether a caller chose the first.';


create or replace function sift._fold_pending(
    collection_id bigint, min_df integer, chosen boolean, everything boolean,
    out folded bigint, out changed text[], out changes bigint[], out grew text[], out whole boolean)
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
-- As sift.refresh_lexical_stats, whose statements these are: batch work over
-- whole term sets (no nested loop), each statement planned for this call.
set enable_nestloop = off
set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
    grew_by    integer[];   -- how many entries each list in grew gained
    grew_rows  integer[];   -- ... and how many rows (one a write statement that added to it)
    gone_terms text[];
    terms_est  real;
    fold_all   boolean;     -- the fold's updates through a scan of every term (else by key)
begin
    -- The caller (sift.refresh_lexical_stats) holds the collection's list
    -- lock alone: chunk writers share it until they commit, so the fold sees
    -- every writer's rows. changed, changes: the terms the fold changed and by
    -- how much (0: written and deleted again, or held by a re-analysed
    -- chunk); grew: the lists whose deltas the fold's statements added to;
    -- whole: every term to be considered (everything, or a fold that is a
    -- large share of the terms).
    whole := everything;
    with gone as (
        delete from sift.term_df_pending p
        where p.collection_id = _fold_pending.collection_id
        returning p.lexemes, p.counts, p.delta_lexemes, p.delta_entries
    )
    select c.lexemes, c.ns, g.lexemes, g.ns, g.rs
    into changed, changes, grew, grew_by, grew_rows
    from (select coalesce(pg_catalog.array_agg(d.lexeme), '{}') as lexemes,
                 coalesce(pg_catalog.array_agg(d.n), '{}') as ns
          from (select u.lexeme, sum(u.n)::bigint as n
                from gone, unnest(gone.lexemes, gone.counts) as u(lexeme, n)
                group by u.lexeme) d) c
    cross join (select coalesce(pg_catalog.array_agg(e.lexeme), '{}') as lexemes,
                       coalesce(pg_catalog.array_agg(e.n), '{}') as ns,
                       coalesce(pg_catalog.array_agg(e.r), '{}') as rs
                from (select u.lexeme, sum(u.n)::integer as n, (count(*) filter (where u.n > 0))::integer as r
                      from gone, unnest(gone.delta_lexemes, gone.delta_entries) as u(lexeme, n)
                      -- (arrays of unequal length, written by hand, pad with nulls)
                      where u.lexeme is not null and u.n is not null
                      group by u.lexeme) e) g;
    -- The entries and rows each list's delta gained, before any list is
    -- rebuilt below (a rebuilt list starts with no delta, and 0).
    update sift.term_lists l set delta_entries = l.delta_entries + g.n, delta_rows = l.delta_rows + g.r
    from unnest(grew, grew_by, grew_rows) as g(lexeme, n, r)
    where l.collection_id = _fold_pending.collection_id and l.lexeme = any (grew) and l.lexeme = g.lexeme;
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
        where t.collection_id = _fold_pending.collection_id and (fold_all or t.lexeme = any (changed)) and t.lexeme = d.lexeme
          and d.n <> 0
        returning t.lexeme, t.df
    ), fresh as (
        insert into sift.term_df (collection_id, lexeme, df)
        select _fold_pending.collection_id, d.lexeme, d.n
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
    delete from sift.term_df t where t.collection_id = _fold_pending.collection_id and t.lexeme = any (gone_terms);
    with gone as (
        delete from sift.collection_lexical_stats s
        where s.collection_id = _fold_pending.collection_id
        returning s.chunks, s.tokens, s.deleted)
    insert into sift.collection_lexical_stats (collection_id, chunks, tokens, deleted, pending, lists_min_df,
                                               lists_min_df_chosen)
    select _fold_pending.collection_id, coalesce(sum(g.chunks), 0), coalesce(sum(g.tokens), 0),
           coalesce(sum(g.deleted), 0), false, min_df, chosen
    from gone g;
end;
$$;
comment on function sift._fold_pending(bigint, integer, boolean, boolean) is
    'Internal, writes (sift.refresh_lexical_stats): folds a collection''s pending BM25 counts into '
    'exact df (sift.term_df) and its chunk and token totals (with the min_df the lists are built under '
    'and whether a caller chose it), and the entries and rows the writers added to '
    'each list''s delta into delta_entries and delta_rows; returns the terms it changed and by how much, the lists '
    'whose deltas grew, and whether the lists'' pass should consider every term.';


create or replace function sift._drop_lists(
    collection_id bigint, min_df integer, everything boolean, whole boolean, changed text[], changes bigint[])
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
-- As sift.refresh_lexical_stats, whose statement this is.
set enable_nestloop = off
set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
    shrunk text[];   -- folded terms now in fewer chunks (only they can lose a list)
begin
    -- Only a term in fewer chunks than before can have fallen below min_df:
    -- a refresh after writes alone looks up no list to drop.
    shrunk := array(select u.lexeme from unnest(changed, changes) as u(lexeme, n) where u.n < 0);
    if everything or cardinality(shrunk) > 0 then
        delete from sift.term_lists l
        where l.collection_id = _drop_lists.collection_id
          and (whole or l.lexeme = any (shrunk))
          and not exists (select 1 from sift.term_df t
                          where t.collection_id = _drop_lists.collection_id and (whole or t.lexeme = any (shrunk))
                            and t.lexeme = l.lexeme and t.df >= min_df);
    end if;
end;
$$;
comment on function sift._drop_lists(bigint, integer, boolean, boolean, text[], bigint[]) is
    'Internal, writes (sift.refresh_lexical_stats): drops the impact lists of terms now in fewer than '
    'min_df chunks, looking only at the folded terms whose df fell (changes < 0) unless everything '
    'or whole.';


create or replace function sift._merge_deltas(
    collection_id bigint, list_size integer, list_fraction double precision, whole boolean, grew text[])
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
-- As sift.refresh_lexical_stats, whose statements these are: batch work over
-- whole term sets (no nested loop), each statement planned for this call.
set enable_nestloop = off
set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
    due    text[];
    merged integer;
begin
    -- Deltas of a block or a quarter of their list, whichever is more, are
    -- merged into their lists' blocks (same reference, so no chunk is read;
    -- the floor only rises). A merge rewrites the list, so waiting for a
    -- quarter of it keeps that to a few entries rewritten per entry added.
    -- (A delta only grows when a chunk holding its term is written, and that
    -- statement's pending row says by how much: sift._fold_pending added it
    -- to delta_entries.)
    due := array(select l.lexeme from sift.term_lists l
                 where l.collection_id = _merge_deltas.collection_id and (whole or l.lexeme = any (grew))
                   and l.delta_entries >= greatest(100, l.entries / 4));
    if cardinality(due) = 0 then
        return 0;
    end if;
    -- One statement: each due list's blocks and delta taken out (returning
    -- their entries), ranked again at the list's reference, and written back
    -- as its new blocks; the list's row keeps its reference and takes its new
    -- floor and count. (The new blocks reuse the old ones' keys: a row this
    -- statement deleted no longer holds its key. Every entry is read out
    -- before the first block is written: the ranking sorts them all first.
    -- Keep the blocks written from the ranking alone: a block written from
    -- anything the deletes' rows do not all feed could meet its old key, a
    -- unique violation, never a wrong list.)
    -- Through the work tables and a new list row, as sift._write_lists
    -- builds a list, the same merges took 4.5x as long (133 ms against 29 a
    -- refresh of ten one-document writes at 30,000 chunks): each entry was
    -- written to and deleted from sift.list_build_entries, that table
    -- analysed, and each old block deleted by the list's cascade.
    with plan as materialized (
        -- (Each due list's df looked up by key: joined, every term's df was
        -- hashed for the few lists due, 0.2 s at 450,000 terms.) k: the
        -- list's number in this merge, which the entries are ranked and
        -- grouped by: ranked by their term's text instead, 177,152 entries of
        -- 80 lists at 30,000 chunks took 385 ms against 257, and whole merges
        -- 1.09-1.13x as long.
        select row_number() over (order by l.lexeme) as k, l.lexeme, l.floor_impact as floor_min,
               l.avgdl_ref, l.k1_ref, l.b_ref,
               greatest(list_size, ceil(coalesce((select t.df from sift.term_df t
                                                  where t.collection_id = l.collection_id and t.lexeme = l.lexeme), 0)
                                        * list_fraction))::integer as size
        from sift.term_lists l
        where l.collection_id = _merge_deltas.collection_id and l.lexeme = any (due)
    ), old_blocks as (
        delete from sift.term_blocks b
        where b.collection_id = _merge_deltas.collection_id and b.lexeme = any (due)
        returning b.lexeme, b.chunk_ids, b.tfs, b.dls
    ), old_deltas as (
        delete from sift.term_deltas d
        where d.collection_id = _merge_deltas.collection_id and d.lexeme = any (due)
        returning d.lexeme, d.chunk_ids, d.tfs, d.dls
    ), ranked as materialized (
        select p.k, e.chunk_id, e.tf, e.dl, i.impact, p.size,
               row_number() over (partition by p.k order by i.impact desc, e.chunk_id) as rn
        from (select o.lexeme, u.chunk_id, u.tf, u.dl
              from old_blocks o cross join lateral unnest(o.chunk_ids, o.tfs, o.dls) as u(chunk_id, tf, dl)
              union all
              select o.lexeme, u.chunk_id, u.tf, u.dl
              from old_deltas o cross join lateral unnest(o.chunk_ids, o.tfs, o.dls) as u(chunk_id, tf, dl)) e
        join plan p on p.lexeme = e.lexeme
        cross join lateral (select sift._bm25_impact(e.tf, e.dl, p.avgdl_ref, p.k1_ref, p.b_ref) as impact) i
        where i.impact > p.floor_min
    ), cuts as (
        select r.k, r.impact from ranked r where r.rn = r.size + 1
    ), floors as materialized (
        -- The list's best `size` entries stay; its floor is the first left out.
        select p.k, p.lexeme, greatest(p.floor_min, coalesce(c.impact, 0)) as floor_impact
        from plan p
        left join cuts c on c.k = p.k
    ), blocks as (
        insert into sift.term_blocks (collection_id, lexeme, block_no, max_impact, chunk_ids, tfs, dls)
        select _merge_deltas.collection_id, f.lexeme, ((r.rn - 1) / 100)::integer, max(r.impact),
               array_agg(r.chunk_id order by r.rn), array_agg(r.tf order by r.rn),
               array_agg(r.dl order by r.rn)
        from ranked r
        join floors f on f.k = r.k
        where r.rn <= r.size and r.impact > f.floor_impact
        group by f.lexeme, r.k, (r.rn - 1) / 100
        returning lexeme, cardinality(chunk_ids) as n
    ), kept as (
        select b.lexeme, sum(b.n)::integer as n from blocks b group by b.lexeme
    )
    update sift.term_lists l
    set floor_impact = f.floor_impact, entries = coalesce(k.n, 0), delta_entries = 0, delta_rows = 0,
        built_at = now()
    from floors f
    left join kept k on k.lexeme = f.lexeme
    where l.collection_id = _merge_deltas.collection_id and l.lexeme = any (due) and l.lexeme = f.lexeme;
    get diagnostics merged = row_count;
    return merged;
end;
$$;
comment on function sift._merge_deltas(bigint, integer, double precision, boolean, text[]) is
    'Internal, writes (sift.refresh_lexical_stats): merges every list delta of max(100, a quarter of '
    'its list) entries or more into its list''s blocks (no chunk read; the floor only rises), looking '
    'only at the lists in grew unless whole; returns how many lists it rewrote.';


create or replace function sift._compact_deltas(collection_id bigint, whole boolean, grew text[])
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
-- Planned for this call's lists (a generic plan read every list of the
-- collection), a few deltas looked up by key (sift.refresh_lexical_stats
-- turns nested loops off for its batch statements: then every delta row of
-- the collection was scanned and hashed, 27 ms at 30,000 chunks).
set plan_cache_mode = force_custom_plan
set enable_nestloop = on
as $$
#variable_conflict use_column
declare
    merged integer;
begin
    -- A write statement leaves one delta row for each list it adds to, and a
    -- search reads every row of its terms' deltas, each an index entry and an
    -- unnest of its own: after 300 one-document writes at 30,000 chunks a
    -- common term had 244 rows, and common-term searches took 1.15-1.25x the
    -- time they took with each term's entries in one row (bench/README). A
    -- delta of 32 rows or more becomes one row, with the same entries, so a
    -- search sums the same. The lists are found by their count of rows
    -- (delta_rows, folded from the writers' pending rows), no delta read; of
    -- those in grew unless whole. The caller holds the collection's list
    -- lock, so no writer adds a row meanwhile.
    with due as (
        select l.lexeme
        from sift.term_lists l
        where l.collection_id = _compact_deltas.collection_id and (whole or l.lexeme = any (grew))
          and l.delta_rows >= 32
    ), gone as (
        delete from sift.term_deltas d
        using due
        where d.collection_id = _compact_deltas.collection_id and d.lexeme = due.lexeme
        returning d.lexeme, d.chunk_ids, d.tfs, d.dls
    ), rows as (
        -- (One order for the three arrays, so an entry's tf and dl stay with it.)
        insert into sift.term_deltas (collection_id, lexeme, chunk_ids, tfs, dls)
        select _compact_deltas.collection_id, g.lexeme,
               pg_catalog.array_agg(u.chunk_id order by u.chunk_id, u.tf, u.dl),
               pg_catalog.array_agg(u.tf order by u.chunk_id, u.tf, u.dl),
               pg_catalog.array_agg(u.dl order by u.chunk_id, u.tf, u.dl)
        from gone g
        cross join lateral unnest(g.chunk_ids, g.tfs, g.dls) as u(chunk_id, tf, dl)
        group by g.lexeme
        returning lexeme
    ), counted as (
        update sift.term_lists l set delta_rows = 1
        from rows m
        where l.collection_id = _compact_deltas.collection_id and l.lexeme = m.lexeme
        returning 1
    )
    select pg_catalog.count(*)::integer into merged from counted;
    return merged;
end;
$$;
comment on function sift._compact_deltas(bigint, boolean, text[]) is
    'Internal, writes (sift.refresh_lexical_stats): merges the rows of every list delta of 32 rows or '
    'more (delta_rows) into one, so a search reads one row where a write statement each left one; '
    'looks only at the lists in grew unless whole; returns how many deltas it merged.';


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
