-- pgsift 0025: questions as vectors of their own (enrichment's questions_as
-- "vectors" or "both"). Each question a model wrote for a chunk may carry its
-- own vector, in the collection's active space; the dense leg then also
-- searches them, takes each chunk at its best (its own vector or its best
-- question's) and says which question matched.

create table sift.question_vectors (
    chunk_id      bigint not null references sift.chunks on delete cascade,
    ordinal       smallint not null,
    -- The chunk's (set by trigger), for the policy and the leg's filter.
    collection_id bigint not null,
    embedding     @extschema:vector@.vector not null,
    constraint question_vectors_pkey primary key (chunk_id, ordinal),
    constraint question_vectors_ordinal check (ordinal between 0 and 4)
);
alter table sift.question_vectors alter column embedding set storage main;
create index question_vectors_collection_idx on sift.question_vectors (collection_id);
alter table sift.question_vectors enable row level security;
comment on table sift.question_vectors is
    'The vector of a question a model wrote for a chunk (sift.chunk_enrichments.questions[ordinal + 1]), '
    'in the collection''s active space: the dense leg searches them with the chunks'' own vectors. '
    'Gone with the chunk.';
comment on column sift.question_vectors.chunk_id is 'The chunk the question is about.';
comment on column sift.question_vectors.ordinal is 'Which of its questions (0-based).';
comment on column sift.question_vectors.collection_id is 'The chunk''s collection (set by the write trigger).';
comment on column sift.question_vectors.embedding is 'The question''s vector, in the collection''s active space.';

-- The partial HNSW index of each size and distance a collection already uses (the table is
-- new, so each is built empty at once; sift._ensure_dense_index builds them for new sizes).
do $indexes$
declare
    s record;
begin
    for s in select distinct v.dimensions, v.distance from sift.vector_spaces v order by 1, 2 loop
        execute format(
            'create index if not exists %I on sift.question_vectors using hnsw '
            '((embedding::@extschema:vector@.%s(%s)) @extschema:vector@.%s) '
            'where @extschema:vector@.vector_dims(embedding) = %s',
            format('question_vectors_hnsw_%s_%s', s.distance, s.dimensions),
            case when s.dimensions > 2000 then 'halfvec' else 'vector' end, s.dimensions,
            case when s.dimensions > 2000 then 'halfvec' else 'vector' end
                || case s.distance when 'cosine' then '_cosine_ops' when 'l2' then '_l2_ops' else '_ip_ops' end,
            s.dimensions);
    end loop;
end
$indexes$;

-- The leg's signature grows (its size and exact_search_limit): re-created by the function files.
drop function if exists sift._question_leg(bigint, text, @extschema:vector@.vector, jsonb, integer);
