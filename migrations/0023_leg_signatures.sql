-- pgsift 0023: the staged pipeline's legs take one shape (issue 35, item 2).
-- sift._space_dense_ids reads exact_search_limit and hnsw_ef_search from the
-- resolved knob set (sift.knob_set) and its collection from the space, and the
-- question leg is sift._question_ids (sql/31_question_leg.sql), which returns
-- arrays as every leg does; sift._fuse, now the fusion of two legs too, says
-- which legs have each chunk (legs) beside its rank in each. Their former
-- signatures and return types, which no release shipped but a database
-- migrated during 0.2.0's development holds, go.
drop function if exists sift._space_dense_ids(sift.vector_spaces, bigint[], @extschema:vector@.vector, jsonpath,
                                              integer, integer, integer);
drop function if exists sift._question_leg(bigint, integer, text, @extschema:vector@.vector, jsonb, integer, integer,
                                           integer);
drop function if exists sift._fuse(text[], double precision[], integer[], bigint[], double precision[], boolean[], text,
                                   double precision);
