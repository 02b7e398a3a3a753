-- pgsift 0009: snippets. A hit can carry a short passage of its text with
-- the query's matched words marked, whichever leg found it (knobs snippets
-- and snippet_words; sift.hit gains snippet).

create domain sift.snippets as text
    constraint snippets_known check (value in ('text', 'html'));
create domain sift.snippet_words as integer
    constraint snippet_words_range check (value between 5 and 200);

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (218, 'snippets', 'sift.snippets', 'null', true, 'null', 'both', 'finalize',
  'A snippet per hit: text (matched words between **) or html (escaped, matched words in <mark>); '
  'null: none.'),
 (219, 'snippet_words', 'sift.snippet_words', '30', false, 'null', 'both', 'finalize',
  'The most words a snippet holds.');

alter type sift.knob_set
    add attribute snippets sift.snippets,
    add attribute snippet_words sift.snippet_words;

alter type sift.hit add attribute snippet text;

-- sift.finalize takes the query text (a reranked pool's snippets mark its
-- words); the internal _hits with it. Re-created by the function files.
drop function if exists sift.finalize(text, bigint[], double precision[], integer, jsonb, text[], text);
drop function if exists sift._hits(sift.collections[], sift.knob_set[], sift.candidate[], bigint[],
    double precision[], integer, text, text, text);
