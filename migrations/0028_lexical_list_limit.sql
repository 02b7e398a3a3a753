-- pgsift 0028: the knob lexical_list_limit. Where every common query term's
-- impact list holds all of its chunks, the lexical leg answers exactly by
-- summing the lists' entries (no stored vector read). It took that path only
-- while the matching chunks numbered at most lexical_exact_limit (3,000);
-- past it, the leg read the lists a few blocks at a time, scored the best
-- candidates from their stored vectors and, when that did not prove its top n,
-- returned it unproven. An entry summed costs ~2 us, a stored vector scored
-- ~15-20 us, so the whole lists stay cheaper well past 3,000: on SciFact the
-- queries whose terms hold 3,000-8,000 chunks went from 23.7 to 17.3 ms p50
-- (1.37x) and from unproven to exact (exact top 10: 219 -> 269 of 300).
-- The path now runs up to this knob's chunk counts, 12,000 by default, and
-- no longer follows lexical_exact_limit: a collection or call that lowered
-- that to bound latency lowers this one too if it wants the same bound.
-- Lists built before need no rebuild.

create domain sift.lexical_list_limit as integer
    constraint lexical_list_limit_range check (value between 0 and 2000000000);

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (101, 'lexical_list_limit', 'sift.lexical_list_limit', '12000', false, 'null', 'both', 'lexical',
  'Where every common query term''s impact list holds all its chunks and holding a term is enough to match, '
  'answer exactly by summing the lists if the terms'' chunk counts add up to at most this (0: never). No '
  'stored vector is read.');

alter type sift.knob_set add attribute lexical_list_limit sift.lexical_list_limit;
-- Its attribute and domain say what sift.knob_defs says (as 0016 set for the others).
do $comments$
declare
    meaning text := (select d.meaning from sift.knob_defs d where d.name = 'lexical_list_limit');
begin
    execute pg_catalog.format('comment on column sift.knob_set.lexical_list_limit is %L', meaning);
    execute pg_catalog.format('comment on domain sift.lexical_list_limit is %L',
                              'Values of the knob lexical_list_limit (sift.knob_defs): ' || meaning);
end
$comments$;
