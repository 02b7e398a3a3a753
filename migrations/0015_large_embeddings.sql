-- pgsift 0015: embeddings of up to 4,000 dimensions. HNSW on vector stops
-- at 2,000; past that the partial indexes hold halfvec (pgvector 0.7+), and
-- the dense leg re-scores the index's candidates at full precision.

alter table sift.collections drop constraint embedding_dims_valid,
    add constraint embedding_dims_valid check (embedding_dims between 1 and 4000);
alter table sift.vector_spaces drop constraint vector_space_dimensions,
    add constraint vector_space_dimensions check (dimensions between 1 and 4000);
