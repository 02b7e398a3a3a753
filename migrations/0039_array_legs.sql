-- pgsift 0039: the staged pipeline (sift._pool) reads its legs as arrays
-- (sift._space_dense_ids, sift._lexical_ids), as the plain path does: the row
-- forms, which unnested the arrays for _pool to aggregate them back, go.

drop function if exists sift._dense_leg(bigint[], integer, text, @extschema:vector@.vector, jsonb, integer, integer,
                                        bigint, boolean, bigint, integer);
drop function if exists sift._lexical_leg(sift.collections, sift.knob_set, tsquery, text[], jsonb, integer,
                                          tsquery, tsquery);
