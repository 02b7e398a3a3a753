-- pgsift 0022: late interaction (ColBERT-style MaxSim) in SQL. A chunk may
-- carry token vectors (a multivector: one vector per token of its text, from
-- a late-interaction model); a search given the question's token vectors
-- reranks its fused top late_interaction_top_n by MaxSim: for each query
-- token, the best inner product over the chunk's tokens, summed. Chunks
-- without token vectors keep their fused order behind the scored ones.

create table sift.chunk_tokens (
    chunk_id      bigint primary key references sift.chunks on delete cascade,
    -- The chunk's (set by trigger), so the policy and a collection's lookups
    -- need no join.
    collection_id bigint not null,
    -- halfvec: 2 bytes a dimension (200 tokens of 128 dimensions: 53 kB).
    tokens        @extschema:vector@.halfvec[] not null,
    dimensions    integer not null,
    token_count   integer not null,
    written_at    timestamptz not null default now(),
    constraint chunk_tokens_count check (token_count between 1 and 2048),
    constraint chunk_tokens_dimensions check (dimensions between 1 and 4000)
);
-- Half-precision floats do not compress: stored out of line as they are,
-- read without a decompression attempt.
alter table sift.chunk_tokens alter column tokens set storage external;
create index chunk_tokens_collection_idx on sift.chunk_tokens (collection_id);
alter table sift.chunk_tokens enable row level security;

comment on table sift.chunk_tokens is
    'A chunk''s token vectors for late interaction (MaxSim), written by sift.write_token_vectors '
    'or with its chunk; one size per collection, set by its first write. Gone with the chunk.';
comment on column sift.chunk_tokens.chunk_id is 'The chunk (sift.chunks).';
comment on column sift.chunk_tokens.collection_id is 'The chunk''s collection (set by the write trigger).';
comment on column sift.chunk_tokens.tokens is
    'One vector per token, in the chunk''s token order, in half precision.';
comment on column sift.chunk_tokens.dimensions is
    'Dimensions of every vector in tokens (the collection''s token size).';
comment on column sift.chunk_tokens.token_count is 'How many token vectors (1 to 2,048).';
comment on column sift.chunk_tokens.written_at is 'When they were written.';

-- A collection's token size: one row, so concurrent writers agree on it (the
-- first write inserts it; writers lock it for share, a full delete for update).
create table sift.chunk_token_sizes (
    collection_id bigint primary key references sift.collections on delete cascade,
    dimensions    integer not null,
    constraint chunk_token_sizes_dimensions check (dimensions between 1 and 4000)
);
alter table sift.chunk_token_sizes enable row level security;
comment on table sift.chunk_token_sizes is
    'The size of a collection''s token vectors (sift.chunk_tokens): set by its first write, gone '
    'when sift.delete_token_vectors removes the last of them.';
comment on column sift.chunk_token_sizes.collection_id is 'The collection.';
comment on column sift.chunk_token_sizes.dimensions is 'Dimensions of every token vector of the collection.';

create domain sift.late_interaction_top_n as integer
    constraint late_interaction_top_n_range check (value between 1 and 200);

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (235, 'late_interaction_top_n', 'sift.late_interaction_top_n', '50', false, 'null', 'both', 'rerank',
  'With query_tokens, MaxSim rescores the fused top this many (the most any searched collection '
  'asks for) against their token vectors; the rest, and chunks without token vectors, keep '
  'their fused order behind.');

alter type sift.knob_set add attribute late_interaction_top_n sift.late_interaction_top_n;
-- Its attribute and domain say what sift.knob_defs says (as 0016 set for the others).
do $comments$
declare
    meaning text := (select d.meaning from sift.knob_defs d where d.name = 'late_interaction_top_n');
begin
    execute pg_catalog.format('comment on column sift.knob_set.late_interaction_top_n is %L', meaning);
    execute pg_catalog.format('comment on domain sift.late_interaction_top_n is %L',
                              'Values of the knob late_interaction_top_n (sift.knob_defs): ' || meaning);
end
$comments$;

alter type sift.candidate add attribute late_interaction_score double precision;
alter type sift.hit add attribute late_interaction_score double precision;
alter type sift.explanation add attribute late_interaction_score double precision;
comment on column sift.candidate.late_interaction_score is
    'MaxSim of the query''s token vectors against the chunk''s (sum over query tokens of the best '
    'inner product); null when no query tokens were given or the chunk has no token vectors or '
    'was past late_interaction_top_n.';
comment on column sift.hit.late_interaction_score is
    'MaxSim of the query''s token vectors against the chunk''s (sum over query tokens of the best '
    'inner product); null when no query tokens were given or the chunk has no token vectors or '
    'was past late_interaction_top_n.';
comment on column sift.explanation.late_interaction_score is
    'MaxSim of the query''s token vectors against the chunk''s (sum over query tokens of the best '
    'inner product); null when no query tokens were given or the chunk has no token vectors or '
    'was past late_interaction_top_n.';

-- Signatures that change: search and explain take query_tokens (re-created by
-- the function files; a call by name or position without it is unchanged).
drop function if exists sift.search(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[]);
drop function if exists sift.explain(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[], bigint[]);
