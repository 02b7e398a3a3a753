-- pgsift 0018: the write functions take their vectors as pgvector's vector[]
-- rather than text[], so a client sends them in binary (4 bytes a
-- dimension, no float parsing). A text literal still casts:
-- embeddings => '{"[0.1,0.2]"}'. Re-created by the function files.

drop function if exists sift.write_chunks(bigint[], integer[], text[], text[], integer[], text[], integer[]);
drop function if exists sift.write_space_vectors(text, text, bigint[], text[]);
