-- pgsift 0024: impact lists by the collection's size (issue 33).
-- A refresh given no min_df takes one by the collection's size
-- (sift._auto_min_df: 20 under 200,000 chunks, 100 from there), not 100
-- always; one given by a caller is kept, as before, and the
-- statistics row says which it is. Of the rows from before, one built under
-- a min_df other than 100 (the former default) had it chosen by a caller and
-- keeps it; one built under 100 counts as not chosen, so its next refresh
-- takes min_df by its size (looking at every term once) unless given one.
alter table sift.collection_lexical_stats add column lists_min_df_chosen boolean not null default false;
update sift.collection_lexical_stats set lists_min_df_chosen = true
where lists_min_df is not null and lists_min_df <> 100;

-- The lexical leg scores a term whose list is under a block like a rare
-- term where rounds answer, so sift._term_stats also returns each list's
-- entries; a function's OUT columns cannot change in place, so its former
-- signature goes and the function file creates it again.
drop function if exists sift._term_stats(bigint, text[], double precision, double precision, double precision,
                                         double precision);
