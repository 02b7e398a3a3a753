-- pgsift 0004: the knob max_query_terms, the first added after the contract: its
-- domain, its row in sift.knob_defs and its attribute of sift.knob_set. No public
-- signature changes; sift.knobs(), the resolver and every caller pick it up.

create domain sift.max_query_terms as integer
    constraint max_query_terms_range check (value between 1 and 1000);

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values (105, 'max_query_terms', 'sift.max_query_terms', '64', false, 'null', 'both', 'lexical',
        'Distinct query words the lexical leg ORs together, the first ones in query order (a pasted '
        'paragraph costs a bounded scan); excluded words and phrases are capped alike.');

alter type sift.knob_set add attribute max_query_terms sift.max_query_terms;
