-- BM25 statistics: maintained by statement triggers on sift.chunks (exact,
-- append-only, no shared row to queue on), folded and extended by
-- sift.refresh_lexical_stats (cheap; the Python client runs it after ingest).

create or replace function sift._chunks_stats()
returns trigger
language plpgsql security invoker
set search_path from current
as $$
begin
    if tg_op in ('DELETE', 'UPDATE') then
        -- (Chunks deleted with their collection leave no statistics to keep.)
        insert into sift.collection_lexical_stats (collection_id, chunks, tokens)
        select o.collection_id, -count(*), -sum(o.lexical_length) from old_chunks o
        where exists (select 1 from sift.collections c where c.collection_id = o.collection_id)
        group by 1;
        insert into sift.term_df_pending (collection_id, lexemes, counts)
        select x.collection_id, array_agg(x.lexeme order by x.lexeme), array_agg(-x.n order by x.lexeme)
        from (select o.collection_id, u.lexeme, count(*) as n
              from old_chunks o, pg_catalog.unnest(o.search_vector) u
              where exists (select 1 from sift.collections c where c.collection_id = o.collection_id)
              group by 1, 2) x
        group by 1;
        -- Deleted (or re-analysed) chunks leave the impact lists.
        delete from sift.term_postings p using old_chunks o where p.chunk_id = o.chunk_id;
    end if;
    if tg_op in ('INSERT', 'UPDATE') then
        insert into sift.collection_lexical_stats (collection_id, chunks, tokens)
        select n.collection_id, count(*), sum(n.lexical_length) from new_chunks n group by 1;
        insert into sift.term_df_pending (collection_id, lexemes, counts)
        select x.collection_id, array_agg(x.lexeme order by x.lexeme), array_agg(x.n order by x.lexeme)
        from (select n.collection_id, u.lexeme, count(*) as n
              from new_chunks n, pg_catalog.unnest(n.search_vector) u group by 1, 2) x
        group by 1;
        -- A new chunk joins a common term's list when it beats the list's floor.
        insert into sift.term_postings (collection_id, lexeme, chunk_id, impact, tf, dl)
        select x.collection_id, x.lexeme, x.chunk_id, x.impact, x.tf, x.dl
        from (select l.collection_id, l.lexeme, n.chunk_id, l.floor_impact,
                     pg_catalog.array_length(u.positions, 1) as tf, n.lexical_length as dl,
                     sift._bm25_impact(pg_catalog.array_length(u.positions, 1), n.lexical_length,
                                       l.avgdl_ref, l.k1_ref, l.b_ref) as impact
              from new_chunks n
              cross join pg_catalog.unnest(n.search_vector) u
              join sift.term_lists l on l.collection_id = n.collection_id and l.lexeme = u.lexeme) x
        where x.impact > x.floor_impact;
    end if;
    return null;
end;
$$;
comment on function sift._chunks_stats() is
    'Trigger: appends BM25 statistics deltas (chunks, tokens, df per lexeme) for each '
    'statement that writes chunks, and keeps common terms'' impact lists current.';

drop trigger if exists chunks_stats_insert on sift.chunks;
create trigger chunks_stats_insert after insert on sift.chunks
    referencing new table as new_chunks
    for each statement execute function sift._chunks_stats();
drop trigger if exists chunks_stats_delete on sift.chunks;
create trigger chunks_stats_delete after delete on sift.chunks
    referencing old table as old_chunks
    for each statement execute function sift._chunks_stats();
drop trigger if exists chunks_stats_update on sift.chunks;
create trigger chunks_stats_update after update on sift.chunks
    referencing old table as old_chunks new table as new_chunks
    for each statement execute function sift._chunks_stats();


create or replace function sift._build_term_list(
    collection_id bigint, lexeme text, list_size integer,
    avgdl double precision, k1 double precision, b double precision)
returns void
language plpgsql volatile security invoker
set search_path from current
as $$
#variable_conflict use_variable
declare
    q tsquery := sift._tsquery_or(array[lexeme]);
begin
    delete from sift.term_lists l where l.collection_id = _build_term_list.collection_id
                                    and l.lexeme = _build_term_list.lexeme;
    -- One statement: score the term's chunks once, keep the best list_size; the
    -- (list_size + 1)-th best impact is the floor bounding every chunk left out.
    with x as materialized (
        select y.chunk_id, y.tf, y.dl, sift._bm25_impact(y.tf, y.dl, avgdl, k1, b) as impact
        from (select c.chunk_id, c.lexical_length as dl,
                     pg_catalog.ts_rank_cd('{1,1,1,1}', c.search_vector, q) as tf
              from sift.chunks c
              where c.collection_id = _build_term_list.collection_id and c.search_vector @@ q) y
    ), f as (
        select coalesce((select x.impact from x order by x.impact desc, x.chunk_id
                         offset list_size limit 1), 0) as floor_impact
    ), list as (
        insert into sift.term_lists (collection_id, lexeme, floor_impact, avgdl_ref, k1_ref, b_ref)
        select collection_id, lexeme, f.floor_impact, avgdl, k1, b from f
        returning 1
    )
    insert into sift.term_postings (collection_id, lexeme, chunk_id, impact, tf, dl)
    select collection_id, lexeme, x.chunk_id, x.impact, x.tf, x.dl
    from x, f
    where x.impact > f.floor_impact
    order by x.impact desc, x.chunk_id
    limit list_size;
end;
$$;
comment on function sift._build_term_list(bigint, text, integer, double precision,
    double precision, double precision) is
    'Internal, writes (on the primary; never on the search path): (re)builds one common '
    'term''s impact list: its best list_size chunks and the floor every other chunk stays under.';


create or replace function sift.refresh_lexical_stats(
    collection   text,
    tenant       text default 'default',
    min_df       integer default 100,
    list_size    integer default 1000,
    list_fraction double precision default 0.1,
    max_drift    double precision default 0.25,
    rebuild      boolean default false)
returns table (pending_folded bigint, lists_built integer)
language plpgsql volatile security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    col    sift.collections := sift._collection(refresh_lexical_stats.tenant,
                                                refresh_lexical_stats.collection);
    folded bigint := 0;
    built  integer := 0;
    avgdl  double precision;
    term   record;
begin
    -- Fold pending deltas into one row per key (rows a concurrent writer has
    -- not committed yet are invisible here and stay pending).
    with gone as (
        delete from sift.term_df_pending p
        where p.collection_id = col.collection_id
        returning p.lexemes, p.counts
    ), delta as (
        select u.lexeme, sum(u.n) as n
        from gone, unnest(gone.lexemes, gone.counts) as u(lexeme, n)
        group by u.lexeme
    )
    insert into sift.term_df as t (collection_id, lexeme, df)
    select col.collection_id, d.lexeme, d.n from delta d
    on conflict (collection_id, lexeme) do update set df = t.df + excluded.df;
    get diagnostics folded = row_count;
    delete from sift.term_df t where t.collection_id = col.collection_id and t.df = 0;
    with gone as (
        delete from sift.collection_lexical_stats s
        where s.collection_id = col.collection_id
        returning s.chunks, s.tokens)
    insert into sift.collection_lexical_stats (collection_id, chunks, tokens, pending)
    select col.collection_id, coalesce(sum(g.chunks), 0), coalesce(sum(g.tokens), 0), false from gone g;

    -- Lists for terms that became common, and for those whose list no longer
    -- matches the collection's k1, b or has drifted from the current avgdl.
    -- Alone on the collection's list lock: chunk writers (who share it) wait
    -- until these lists are committed, so none slips between snapshot and list.
    perform pg_catalog.pg_advisory_xact_lock(sift._lists_lock_key(col.collection_id));
    -- Every row counts: writers that committed since the fold left rows of their own.
    select sum(s.tokens)::double precision / nullif(sum(s.chunks), 0) into avgdl
    from sift.collection_lexical_stats s where s.collection_id = col.collection_id;
    if avgdl is null then
        delete from sift.term_lists l where l.collection_id = col.collection_id;
        return query select folded, 0;
        return;
    end if;
    delete from sift.term_lists l
    where l.collection_id = col.collection_id
      and not exists (select 1 from sift.term_df t
                      where t.collection_id = col.collection_id and t.lexeme = l.lexeme
                        and t.df >= min_df);
    for term in
        select t.lexeme, t.df
        from sift.term_df t
        left join sift.term_lists l on l.collection_id = t.collection_id and l.lexeme = t.lexeme
        where t.collection_id = col.collection_id
          and t.df >= min_df
          and (rebuild or l.lexeme is null or l.k1_ref <> col.bm25_k1 or l.b_ref <> col.bm25_b
               or abs(avgdl / l.avgdl_ref - 1) > max_drift)
    loop
        -- Long enough that the threshold is proven inside the list even when a very
        -- common term's impacts are flat: a tenth of its chunks (or list_size).
        perform sift._build_term_list(col.collection_id, term.lexeme,
                                      greatest(list_size, ceil(term.df * list_fraction)::integer),
                                      avgdl, col.bm25_k1, col.bm25_b);
        built := built + 1;
    end loop;
    return query select folded, built;
end;
$$;
comment on function sift.refresh_lexical_stats(text, text, integer, integer, double precision,
    double precision, boolean) is
    'Folds pending BM25 statistics (reads are exact either way, faster '
    'after), builds impact lists (the best max(list_size, list_fraction x df) chunks) for terms '
    'in at least min_df chunks, and rebuilds lists whose k1, b or reference avgdl no longer '
    'hold (rebuild => true rebuilds every list). Cheap when little changed; the Python client '
    'runs it after every upsert_documents and delete_document. Writes.';
