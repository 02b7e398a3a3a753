-- pgsift 0021: a result says whether its lexical leg's top n is exact. The
-- leg proves its top n from the impact lists, or scores every matching chunk
-- when few enough match; when neither fits the budget (lexical_budget,
-- lexical_exact_limit) it returns the best it scored, each score exact but
-- the set not proven: lexical_exact false on every row, never in silence.

alter type sift.candidate add attribute lexical_exact boolean;
alter type sift.hit add attribute lexical_exact boolean;
alter type sift.explanation add attribute lexical_exact boolean;

comment on column sift.candidate.lexical_exact is
    'Whether the lexical leg''s top n is proven exact (false: the budget ran out first; its scores '
    'are exact, the set may miss a better chunk); null when the leg did not run.';
comment on column sift.hit.lexical_exact is
    'Whether the lexical leg''s top n is proven exact (false: the budget ran out first; its scores '
    'are exact, the set may miss a better chunk); null when the leg did not run.';
comment on column sift.explanation.lexical_exact is
    'Whether the lexical leg''s top n is proven exact (false: the budget ran out first; its scores '
    'are exact, the set may miss a better chunk); null when the leg did not run.';

-- Signatures that change (re-created by the function files).
drop function if exists sift._lexical_leg(sift.collections, sift.knob_set, tsquery, text[], jsonb, integer, tsquery,
                                          tsquery);
drop function if exists sift._pool(sift.collections, sift.knob_set, text, @extschema:vector@.vector, integer, jsonb);
