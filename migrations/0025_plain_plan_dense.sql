-- pgsift 0025: sift._plain_plan takes whether the search has an embedding
-- (issue 33: a stage that is off costs nothing): a lexical search no longer
-- looks up whether a dense leg it does not run would scan exactly or walk
-- iteratively (~0.07 ms a search on SciFact). Its former signature goes; the
-- function file creates the new one.
drop function if exists sift._plain_plan(sift.collections, sift.knob_set);
