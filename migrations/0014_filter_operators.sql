-- pgsift 0014: metadata filter operators ($eq $ne $gt $gte $lt $lte $in $nin
-- $exists $and $or $not, dotted paths, ISO dates), compiled by
-- sift.filter_path into the SQL/JSON path every leg applies. The exact BM25
-- scorer takes the compiled path; its old signature goes (re-created by the
-- function files).

drop function if exists sift._bm25_scores(bigint[], text[], double precision[], double precision,
    double precision, double precision, tsquery, jsonb, integer);
