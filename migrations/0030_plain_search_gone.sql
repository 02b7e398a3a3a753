-- pgsift 0030: sift._plain_search goes. sift.search runs a plain search's
-- legs (sift._plain_legs) and its one statement (sift._plain_hits) itself,
-- and sift.search_page ranks a plain window with the same two
-- (sift._plain_page): one PL/pgSQL layer and one copy of the hits fewer on
-- every plain search.
drop function if exists sift._plain_search(sift.collections, sift.knob_set, text, @extschema:vector@.vector,
    integer, jsonb, sift.vector_spaces, boolean, boolean);
