-- pgsift 0033: the knob hnsw_ef_search. The dense leg walked HNSW with
-- pgvector's hnsw.ef_search at max(100, the rows it asks for), set by itself
-- for the walk, so neither a collection nor a call could trade recall for
-- speed, and a caller's own SET hnsw.ef_search was overridden unseen. The
-- knob is that candidate list: 100 by default (the same walk as before), at
-- least the leg's rows (max(fetch_k, match_count)), at most 1,000 (pgvector's
-- limit); the question-vector leg takes at least its 5n questions. Measured
-- with raw pgvector's query at each value against the exact order (150
-- SciFact queries; bench/README.md): recall@10 0.985 at 40, 0.994 at 64,
-- 0.999 at 100 (1.0, 1.2 and 1.4 ms a walk); at 1,000,000 chunks the walk
-- takes 2.5 ms at 40 and 4.0 at 100.

create domain sift.hnsw_ef_search as integer
    constraint hnsw_ef_search_range check (value between 1 and 1000);

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (51, 'hnsw_ef_search', 'sift.hnsw_ef_search', '100', false, 'null', 'both', 'dense',
  'HNSW''s candidate list (pgvector''s hnsw.ef_search) for the dense leg''s index walk, at least the rows '
  'the leg asks for (a question-vector walk: five times that): higher finds more of the nearest chunks, '
  'lower answers sooner (pgvector''s own default is 40). Unused by exact scans.');

alter type sift.knob_set add attribute hnsw_ef_search sift.hnsw_ef_search;
-- Its attribute and domain say what sift.knob_defs says (as 0016 set for the others).
do $comments$
declare
    meaning text := (select d.meaning from sift.knob_defs d where d.name = 'hnsw_ef_search');
begin
    execute pg_catalog.format('comment on column sift.knob_set.hnsw_ef_search is %L', meaning);
    execute pg_catalog.format('comment on domain sift.hnsw_ef_search is %L',
                              'Values of the knob hnsw_ef_search (sift.knob_defs): ' || meaning);
end
$comments$;

-- Re-created by the function files with the candidate list as an argument.
drop function if exists sift._dense_leg(bigint[], integer, text, @extschema:vector@.vector, jsonb, integer, integer,
                                        bigint, boolean, bigint);
drop function if exists sift._question_leg(bigint, integer, text, @extschema:vector@.vector, jsonb, integer, integer);
