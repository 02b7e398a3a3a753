-- pgsift 0020: HNSW options as reviewed, before any release. An index of
-- its own is built on a table every tenant writes to, so only the operator
-- gives a space one: the builder checks who acts, and the dropper takes the
-- one index its drop made an orphan. Re-created by the function files.

drop function if exists sift._ensure_space_index(bigint);
drop function if exists sift._drop_orphan_indexes();
