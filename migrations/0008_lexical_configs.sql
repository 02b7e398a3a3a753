-- pgsift 0008: every row says which text search configurations its query
-- was parsed with (the question's language, or each one the collection's
-- documents use; `simple` where a language has none), so a fallback is
-- visible in search, candidates and explain, not only in the documents.

alter type sift.candidate add attribute lexical_configs text[];
alter type sift.hit add attribute lexical_configs text[];
alter type sift.explanation add attribute lexical_configs text[];

-- Signatures that change (an upgrade; a fresh install has no functions yet).
drop function if exists sift._legs(sift.collections, sift.knob_set, text, boolean);
drop function if exists sift._pool(sift.collections, sift.knob_set, text, @extschema:vector@.vector, integer, jsonb);
