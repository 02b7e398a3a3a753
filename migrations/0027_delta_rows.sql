-- pgsift 0027: each list counts the rows its delta holds (sift.term_lists.
-- delta_rows). A write statement leaves one delta row per list it adds to,
-- and a search reads every row of its terms' deltas, each an index entry and
-- an unnest of its own: after 300 one-document writes at 30,000 chunks a
-- common term had 244 rows (bench/README). A refresh folds the rows the
-- writers added into this count and merges a delta of many rows into one
-- (sift._compact_deltas), finding those without reading any delta. Existing
-- deltas are counted here, less the rows of write statements still pending
-- (their fold adds them).

alter table sift.term_lists add column delta_rows integer not null default 0;
comment on column sift.term_lists.delta_rows is
    'Rows the list''s delta holds (sift.term_deltas: one a write statement that added to it), as folded '
    'by sift.refresh_lexical_stats, which merges them into one row once there are 32.';

update sift.term_lists l
set delta_rows = d.n - coalesce(p.n, 0)
from (select d.collection_id, d.lexeme, count(*)::integer as n
      from sift.term_deltas d
      group by 1, 2) d
left join (select p.collection_id, u.lexeme, count(*)::integer as n
           from sift.term_df_pending p, unnest(p.delta_lexemes, p.delta_entries) u(lexeme, n)
           where u.n > 0
           group by 1, 2) p on p.collection_id = d.collection_id and p.lexeme = d.lexeme
where l.collection_id = d.collection_id and l.lexeme = d.lexeme;
