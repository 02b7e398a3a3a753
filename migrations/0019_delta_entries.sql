-- pgsift 0019 (before the squash of release 0.2.0: 0031): a refresh knows which
-- lists' deltas are due for a merge without reading the deltas. Each statement
-- that writes chunks already leaves one row of pending counts; it now also says
-- how many entries it added to which lists' deltas (delta_lexemes,
-- delta_entries), and a refresh adds those to each list's delta_entries as it
-- folds the row. Before, it summed the entries of every delta row of the folded
-- terms: a row per write statement and list, 170,000-500,000 rows at 100,000
-- chunks after some hours of live writes, read on every refresh (0.1 s for one
-- document of 20 chunks, 0.35 s for 20). Existing deltas are counted here.
-- Pending rows written before name every term they counted as grown by 0, so
-- the first refresh still looks at those terms' lists for a merge due.

alter table sift.term_lists add column delta_entries integer not null default 0;
comment on column sift.term_lists.delta_entries is
    'Entries waiting in the list''s delta (sift.term_deltas), as folded by sift.refresh_lexical_stats; '
    'the list is merged with them once they reach max(100, a quarter of entries).';

update sift.term_lists l
set delta_entries = d.n
from (select d.collection_id, d.lexeme, sum(cardinality(d.chunk_ids))::integer as n
      from sift.term_deltas d
      group by 1, 2) d
where l.collection_id = d.collection_id and l.lexeme = d.lexeme;

alter table sift.term_df_pending add column delta_lexemes text[], add column delta_entries integer[];
comment on column sift.term_df_pending.delta_lexemes is
    'The lists (by lexeme) whose deltas this statement added entries to (delta_entries follows it); '
    'null when it added to none (deletions among them).';

comment on column sift.term_df_pending.delta_entries is
    'How many entries the statement added to each delta of delta_lexemes.';

update sift.term_df_pending p
set delta_lexemes = p.lexemes,
    delta_entries = pg_catalog.array_fill(0, array[pg_catalog.cardinality(p.lexemes)]);
