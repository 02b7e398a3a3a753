-- pgsift 0029: each impact list remembers the min_df it was built or kept
-- under. sift.refresh_lexical_stats looked at every term of the collection on
-- every call (whether it had become common, whether its list should go): three
-- passes over the whole vocabulary, ~0.5 s at 100,000 chunks however little
-- was written, most of what a one-document upsert cost. A term can only cross
-- min_df, or lose its list to a re-analysed chunk, if a write touched it, and
-- those terms are the ones the refresh folds; so it now considers those alone,
-- unless it is called with another min_df than its lists were built under
-- (then every term, as before), with rebuild, or the collection has no list.
-- Lists built before have none recorded: the first refresh after this
-- migration looks at every term once and records it.

alter table sift.term_lists add column min_df_ref integer;
comment on column sift.term_lists.min_df_ref is
    'The min_df of the refresh that built or last kept the list; a refresh called with another min_df '
    'considers every term of the collection again.';
