-- pgsift 0026: sift._fold_pending writes whether a caller chose the lists'
-- min_df (lists_min_df_chosen, migration 0024) on the row it consolidates,
-- instead of sift.refresh_lexical_stats updating that row again after it.
-- Its former signature goes; the function file creates the new one.
drop function if exists sift._fold_pending(bigint, integer, boolean);
