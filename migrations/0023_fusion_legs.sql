-- pgsift 0023: fusion of N legs. A search may bring query vectors for more of
-- its collection's vector spaces (spaces, space_embeddings, space_weights):
-- each is a dense leg of its own beside the active space's and the lexical
-- one. The fusion knob says how the legs combine: rrf (weighted Reciprocal
-- Rank Fusion, as before), dbsf (each leg's scores normalised by its mean
-- +- 3 standard deviations, weighted sum) or convex (min-max normalised,
-- weighted sum). Every row says what each leg gave it (leg_details).

create domain sift.fusion as text
    constraint fusion_known check (value in ('rrf', 'dbsf', 'convex'));

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (35, 'fusion', 'sift.fusion', '"rrf"', false, 'null', 'both', 'fusion',
  'How the legs combine: rrf (weight / (rrf_k + rank), summed), dbsf (each leg''s scores '
  'normalised by its mean +- 3 standard deviations, clipped to [0, 1], weighted sum) or convex '
  '(each leg''s scores min-max normalised, weighted sum); a leg that lacks a chunk gives it 0.');

alter type sift.knob_set add attribute fusion sift.fusion;

do $comments$
declare
    meaning text := (select d.meaning from sift.knob_defs d where d.name = 'fusion');
begin
    execute pg_catalog.format('comment on column sift.knob_set.fusion is %L', meaning);
    execute pg_catalog.format('comment on domain sift.fusion is %L',
                              'Values of the knob fusion (sift.knob_defs): ' || meaning);
end
$comments$;

alter type sift.candidate add attribute leg_details jsonb;
alter type sift.hit add attribute leg_details jsonb;
alter type sift.explanation add attribute leg_details jsonb;
comment on column sift.candidate.leg_details is
    'What each leg that found the chunk gave it, by leg (dense, lexical, or an added space''s '
    'name): {"rank", "raw" (distance or BM25 score), "weight", "contribution" (its share of score)}.';
comment on column sift.hit.leg_details is
    'What each leg that found the chunk gave it, by leg (dense, lexical, or an added space''s '
    'name): {"rank", "raw" (distance or BM25 score), "weight", "contribution" (its share of score)}.';
comment on column sift.explanation.leg_details is
    'What each leg that found the chunk gave it, by leg (dense, lexical, or an added space''s '
    'name): {"rank", "raw" (distance or BM25 score), "weight", "contribution" (its share of score)}.';

-- Signatures that change: the search entry points take the added spaces' query
-- vectors (re-created by the function files; calls without them are unchanged).
drop function if exists sift.search(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[],
                                    @extschema:vector@.vector[]);
drop function if exists sift.explain(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[], bigint[],
                                     @extschema:vector@.vector[]);
drop function if exists sift.candidates(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[]);
drop function if exists sift._candidates(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector,
                                         integer, jsonb);
drop function if exists sift._pool(sift.collections, sift.knob_set, text, @extschema:vector@.vector, integer, jsonb);
drop function if exists sift._check_query(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector,
                                          integer, jsonb);
drop function if exists sift._late_pool(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector,
                                        integer, jsonb, @extschema:vector@.vector[]);
