-- pgsift 0029: each collection's statistics remember the min_df its impact
-- lists were built under. sift.refresh_lexical_stats looked at every term of
-- the collection on every call (whether it had become common, whether its
-- list should go, whether its delta was due for merging): hash joins over the
-- whole vocabulary, ~0.7 s of a one-document upsert's ~0.85 s at 100,000
-- chunks. A term can only cross min_df, lose its list to a re-analysed chunk
-- or grow a delta if a write touched it, and those are the terms the refresh
-- folds; so it now looks at those alone, unless it is called with another
-- min_df than the lists were built under, or with rebuild. Collections from
-- before have none recorded: their first refresh looks at every term once.

alter table sift.collection_lexical_stats add column lists_min_df integer;
comment on column sift.collection_lexical_stats.lists_min_df is
    'On the row a refresh consolidates: the min_df its impact lists were built under (null on writers'' '
    'rows). A refresh called with another considers every term of the collection again.';
