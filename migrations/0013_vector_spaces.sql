-- pgsift 0013: named vector spaces, so a collection can move to another
-- embedding model (or dimension) without downtime: add a space beside the
-- one searched, backfill it (resumable), switch searches to it in one
-- statement, drop the old one.
--
-- Every collection has its built-in space, stored in sift.chunks.embedding
-- (named 'default'); other spaces keep their vectors in sift.chunk_vectors,
-- each (dimension, distance) with its own partial HNSW index. One space per
-- collection is active: searches use it, writers give its vectors, and
-- sift.collections.embedding_dims and distance are its own. The dense_space
-- knob searches another one (say, one still filling) and the hits say how
-- many chunks it lacks.

create table sift.vector_spaces (
    space_id      bigint generated always as identity primary key,
    collection_id bigint not null references sift.collections on delete cascade,
    name          sift.name not null
                  constraint vector_space_name_shape check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$'),
    dimensions    integer not null
                  constraint vector_space_dimensions check (dimensions between 1 and 2000),
    distance      sift.distance not null default 'cosine',
    model         text constraint vector_space_model_length check (length(model) <= 200),
    -- Stored in sift.chunks.embedding rather than sift.chunk_vectors.
    builtin       boolean not null default false,
    active        boolean not null default false,
    created_at    timestamptz not null default now(),
    constraint vector_spaces_collection_name_key unique (collection_id, name)
);
create unique index vector_spaces_one_active on sift.vector_spaces (collection_id) where active;
create unique index vector_spaces_one_builtin on sift.vector_spaces (collection_id) where builtin;
comment on table sift.vector_spaces is
    'The embedding spaces of a collection: the built-in one (sift.chunks.embedding) and any added '
    'with sift.add_vector_space (sift.chunk_vectors). The active one is searched and written.';

create table sift.chunk_vectors (
    space_id      bigint not null references sift.vector_spaces on delete cascade,
    chunk_id      bigint not null references sift.chunks on delete cascade,
    -- Denormalised from the chunk (set by trigger) so the leg filters like the
    -- built-in one: by collection inside the index scan, by document metadata.
    collection_id bigint not null,
    document_id   bigint not null,
    embedding     @extschema:vector@.vector not null,
    constraint chunk_vectors_pkey primary key (space_id, chunk_id)
);
alter table sift.chunk_vectors alter column embedding set storage main;
create index chunk_vectors_chunk_idx on sift.chunk_vectors (chunk_id);
comment on table sift.chunk_vectors is
    'A chunk''s vector in an added space (sift.vector_spaces), written by '
    'sift.write_space_vectors or, for the active space, sift.write_chunks.';

alter table sift.vector_spaces enable row level security;
alter table sift.chunk_vectors enable row level security;

-- A chunk of a collection searching an added space has no built-in vector.
alter table sift.chunks alter column embedding drop not null;

-- Every collection's built-in space; a trigger gives new collections theirs.
insert into sift.vector_spaces (collection_id, name, dimensions, distance, builtin, active)
select c.collection_id, 'default', c.embedding_dims, c.distance, true, true
from sift.collections c;

create domain sift.dense_space as text
    constraint dense_space_shape check (value ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$');

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (52, 'dense_space', 'sift.dense_space', 'null', true, 'null', 'call', 'dense',
  'The vector space the dense leg searches (sift.vector_spaces); null: the collection''s active one. '
  'Hits say how many chunks it lacks (dense_space_missing).');

alter type sift.knob_set add attribute dense_space sift.dense_space;

alter type sift.hit
    add attribute dense_space text,
    add attribute dense_space_missing integer;

-- Signatures that change (re-created by the function files): the dense leg
-- reads a space, the query checks know the knobs.
drop function if exists sift._dense_leg(bigint[], integer, text, @extschema:vector@.vector, jsonb, integer, integer);
drop function if exists sift._dense_leg_sql(integer, text, boolean, boolean);
drop function if exists sift._check_query(sift.collections[], text, @extschema:vector@.vector, integer, jsonb);
