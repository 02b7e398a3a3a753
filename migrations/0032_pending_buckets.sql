-- pgsift 0032: a search reads only the pending counts of its own terms. Each
-- statement that writes chunks left one row of pending counts holding every
-- lexeme it changed (~2,000 for a document of 20 chunks, out of line), and
-- every lexical search until the next refresh unnested all of them: 10 ms of
-- a 22 ms search with 20 such rows at 100,000 chunks. The counts now go in
-- one row per bucket of lexemes (sift._pending_bucket, 64 of them; ~30
-- lexemes a row, stored inline), and a search looks each of its terms up in
-- the rows of that term's bucket alone. A refresh folds every row, as before.
-- Rows already pending are split here (by sift._pending_bucket's expression:
-- the function files are applied after the migrations).

alter table sift.term_df_pending add column bucket smallint;

insert into sift.term_df_pending (collection_id, bucket, lexemes, counts, delta_lexemes, delta_entries)
select coalesce(x.collection_id, d.collection_id), coalesce(x.bucket, d.bucket),
       coalesce(x.lexemes, '{}'), coalesce(x.counts, '{}'),
       -- (a row that added to no delta keeps nulls there, as the trigger writes it)
       case when coalesce(x.had_deltas, true) then coalesce(d.lexemes, '{}') end,
       case when coalesce(x.had_deltas, true) then coalesce(d.entries, '{}') end
from (select u.row_id, u.collection_id, (pg_catalog.get_byte(pg_catalog.sha256(pg_catalog.convert_to(u.lexeme, 'UTF8')), 0) & 63)::smallint as bucket,
             pg_catalog.array_agg(u.lexeme order by u.o) as lexemes,
             pg_catalog.array_agg(u.n order by u.o) as counts, u.had_deltas
      -- (each lexeme once a row, as the trigger writes them: one written twice
      -- by hand is summed)
      from (select p.ctid as row_id, p.collection_id, e.lexeme, pg_catalog.sum(e.n)::bigint as n,
                   pg_catalog.min(e.o) as o, p.delta_lexemes is not null as had_deltas
            from sift.term_df_pending p
            cross join lateral unnest(p.lexemes, p.counts) with ordinality as e(lexeme, n, o)
            where p.bucket is null and e.lexeme is not null and e.n is not null
            group by p.ctid, p.collection_id, e.lexeme, p.delta_lexemes is not null) u
      group by u.row_id, u.collection_id, 3, u.had_deltas) x
-- (full: a delta whose bucket holds none of the row's counted lexemes, which
-- only a row written by hand can have, is kept too)
full join (select u.row_id, u.collection_id, (pg_catalog.get_byte(pg_catalog.sha256(pg_catalog.convert_to(u.lexeme, 'UTF8')), 0) & 63)::smallint as bucket,
                  pg_catalog.array_agg(u.lexeme order by u.o) as lexemes,
                  pg_catalog.array_agg(u.n order by u.o) as entries
           from (select p.ctid as row_id, p.collection_id, e.lexeme, pg_catalog.sum(e.n)::integer as n,
                        pg_catalog.min(e.o) as o
                 from sift.term_df_pending p
                 cross join lateral unnest(p.delta_lexemes, p.delta_entries) with ordinality as e(lexeme, n, o)
                 where p.bucket is null and e.lexeme is not null and e.n is not null
                 group by p.ctid, p.collection_id, e.lexeme) u
           group by u.row_id, u.collection_id, 3) d
       on d.row_id = x.row_id and d.bucket = x.bucket;

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
