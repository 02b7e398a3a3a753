-- pgsift 0027: the statistics trigger writes a statement's term counts from
-- the lexemes alone, unsorted (sorting ~200,000 lexemes a 10,000-chunk batch
-- bought nothing: readers look a term up, and the fold groups them). The
-- column says so; existing rows are sorted, which is one of the orders.

comment on column sift.term_df_pending.lexemes is
    'The lexemes whose counts changed, in no particular order (counts follows it).';
