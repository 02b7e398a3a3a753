-- pgsift 0012: pagination and rerank limits as reviewed, before any release.
-- A query limit leaves room in a request for documents. The fingerprint
-- takes the knobs in force (0.5 and 0.50, or a default stated, are one
-- request), a page knows whether more could follow the window, and
-- sift.finalize_page binds the vector and filter its pool was retrieved with.
-- Re-created by the function files.

drop function if exists sift._request_fingerprint(text, sift.collections[], text, @extschema:vector@.vector, jsonb,
    jsonb);
drop function if exists sift._page(sift.hit[], integer, text, text, integer, integer, bigint[], boolean);
drop function if exists sift.finalize_page(text, bigint[], double precision[], integer, text, jsonb, text[], text,
    text);

alter table sift.reranker_limits
    add constraint reranker_limits_query_within_request check (max_query_tokens < max_request_tokens);
