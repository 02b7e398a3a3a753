-- pgsift 0020 (before the squash of release 0.2.0: 0032): a search reads only
-- the pending counts of its own terms. Each statement that writes chunks left
-- one row of pending counts holding every lexeme it changed (~2,000 for a
-- document of 20 chunks, out of line), and every lexical search until the next
-- refresh unnested all of them: 10 ms of a 22 ms search with 20 such rows at
-- 100,000 chunks. The counts now go in one row per bucket of lexemes
-- (sift._pending_bucket, 64 of them; ~30 lexemes a row, stored inline), and a
-- search looks each of its terms up in the rows of that term's bucket alone. A
-- refresh folds every row, as before. Rows already pending are split here (by
-- sift._pending_bucket's expression: the function files are applied after the
-- migrations).

alter table sift.term_df_pending add column bucket smallint;

-- Each old row's counts and delta counts, one list of entries (a lexeme
-- written twice in a row by hand is summed: the trigger writes each once),
-- then one new row per old row and bucket.
with e as (
    select p.ctid as row_id, p.collection_id, p.delta_lexemes is not null as had_deltas, u.delta, u.lexeme,
           pg_catalog.sum(u.n) as n, pg_catalog.min(u.o) as o
    from sift.term_df_pending p
    cross join lateral (select false, c.lexeme, c.n, c.o
                        from unnest(p.lexemes, p.counts) with ordinality as c(lexeme, n, o)
                        union all
                        select true, d.lexeme, d.n, d.o
                        from unnest(p.delta_lexemes, p.delta_entries) with ordinality as d(lexeme, n, o)
                       ) as u(delta, lexeme, n, o)
    where p.bucket is null and u.lexeme is not null and u.n is not null
    group by p.ctid, p.collection_id, p.delta_lexemes is not null, u.delta, u.lexeme
)
insert into sift.term_df_pending (collection_id, bucket, lexemes, counts, delta_lexemes, delta_entries)
select e.collection_id,
       (pg_catalog.get_byte(pg_catalog.sha256(pg_catalog.convert_to(e.lexeme, 'UTF8')), 0) & 63)::smallint,
       coalesce(pg_catalog.array_agg(e.lexeme order by e.o) filter (where not e.delta), '{}'),
       coalesce(pg_catalog.array_agg(e.n::bigint order by e.o) filter (where not e.delta), '{}'),
       -- (a row that added to no delta keeps nulls there, as the trigger writes it)
       case when e.had_deltas
            then coalesce(pg_catalog.array_agg(e.lexeme order by e.o) filter (where e.delta), '{}') end,
       case when e.had_deltas
            then coalesce(pg_catalog.array_agg(e.n::integer order by e.o) filter (where e.delta), '{}') end
from e
group by e.row_id, e.collection_id, e.had_deltas, 2;

delete from sift.term_df_pending where bucket is null;

alter table sift.term_df_pending
    alter column bucket set not null,
    add constraint term_df_pending_bucket check (bucket >= 0 and bucket < 64);
comment on column sift.term_df_pending.bucket is
    'Which lexemes the row holds: those whose sift._pending_bucket is this (a statement writes one row '
    'per bucket it changed), so a search reads only its terms'' rows.';

-- The fold deletes by collection, searches look up by collection and bucket:
-- one index serves both.
create index term_df_pending_bucket_idx on sift.term_df_pending (collection_id, bucket);
drop index sift.term_df_pending_idx;

comment on table sift.term_df_pending is
    'Document-frequency deltas not folded yet: per statement that writes chunks, one row per bucket of the '
    'lexemes it changed (sift._pending_bucket), added to sift.term_df by sift.refresh_lexical_stats; readers '
    'add them in, each term from its bucket''s rows.';
