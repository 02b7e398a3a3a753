-- pgsift 0019: HNSW options per vector space (so per collection: its
-- built-in space). A space may keep its index in half precision (halfvec:
-- half the index, re-scored at full precision; always so past 2,000
-- dimensions) and set HNSW's m and ef_construction. A space with options
-- other than the defaults gets an index of its own (partial on its
-- collection, or on its space in sift.chunk_vectors); the others share one
-- per (dimension, distance) as before. Options are set when the space is
-- created: a space's index is built while it is empty.

alter table sift.vector_spaces
    add column dense_precision text not null default 'full'
        constraint vector_space_precision check (dense_precision in ('full', 'half')),
    add column hnsw_m integer
        constraint vector_space_hnsw_m check (hnsw_m between 2 and 100),
    add column hnsw_ef_construction integer
        constraint vector_space_hnsw_ef_construction check (hnsw_ef_construction between 4 and 1000);

update sift.vector_spaces set dense_precision = 'half' where dimensions > 2000;

alter table sift.vector_spaces
    add constraint vector_space_half_past_2000 check (dimensions <= 2000 or dense_precision = 'half'),
    add constraint vector_space_ef_construction_vs_m
        check (hnsw_ef_construction is null or hnsw_ef_construction >= 2 * coalesce(hnsw_m, 16));

comment on column sift.vector_spaces.dense_precision is
    'The HNSW index''s precision: full (vector) or half (halfvec: half the index, candidates '
    're-scored at full precision; always half past 2,000 dimensions). Vectors are stored in full.';
comment on column sift.vector_spaces.hnsw_m is
    'HNSW m (links per node, 2 to 100) of the space''s own index; null: pgvector''s default, 16.';
comment on column sift.vector_spaces.hnsw_ef_construction is
    'HNSW ef_construction (4 to 1000, at least 2 m) of the space''s own index; null: pgvector''s '
    'default, 64.';

-- Re-created by the function files with the options.
drop function if exists sift.create_collection(text, integer, text, text, text, jsonb);
drop function if exists sift.add_vector_space(text, text, integer, text, text);
drop function if exists sift.vector_space_status(text);
drop function if exists sift._dense_leg_sql(integer, text, boolean, boolean, boolean);
drop function if exists sift._dense_leg(bigint[], integer, text, @extschema:vector@.vector, jsonb, integer, integer,
                                        bigint);
