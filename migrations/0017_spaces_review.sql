-- pgsift 0017: vector spaces as reviewed, before any release. The index
-- builder can build only an added space's index; a backfill walks the
-- collection from where it is (missing_space_vectors takes after_chunk_id).
-- Re-created by the function files.

drop function if exists sift._ensure_dense_index(integer, sift.distance);
drop function if exists sift.missing_space_vectors(text, text, integer);

