-- pgsift 0005: document structure. A document's sections (its heading tree)
-- are rows; a chunk points at the section it was cut from. Three knobs read
-- them (parent_return, merge_threshold, neighbours) and sift.hit /
-- sift.explanation gain the columns that say what merged and what text a
-- hit's window holds. Chunks without a section (the flat strategy, older
-- data) behave exactly as before.

create table sift.sections (
    section_id     bigint generated always as identity primary key,
    document_id    bigint not null references sift.documents on delete cascade,
    -- Denormalised from the document (set by sift.write_sections) for the
    -- row-level policy, as on sift.chunks.
    collection_id  bigint not null references sift.collections on delete cascade,
    -- Place in the document, 0-based; parent_ordinal is the enclosing
    -- heading's section (null at top level).
    ordinal        integer not null constraint section_ordinal_non_negative check (ordinal >= 0),
    parent_ordinal integer constraint section_parent_before check (parent_ordinal >= 0 and parent_ordinal < ordinal),
    -- 1-6 for a heading, 0 for the text before the first heading.
    level          integer not null constraint section_level_range check (level between 0 and 6),
    heading        text constraint section_heading_length check (length(heading) <= 10000),
    constraint sections_document_ordinal_key unique (document_id, ordinal)
);
comment on table sift.sections is
    'A document''s sections (its heading tree), written with its chunks; each chunk of the '
    'hierarchical strategy points at the section it was cut from (sift.chunks.section_id).';

alter table sift.chunks add column section_id bigint references sift.sections on delete set null;
create index chunks_section_idx on sift.chunks (section_id) where section_id is not null;
alter table sift.sections enable row level security;

create domain sift.parent_return as text
    constraint parent_return_known check (value in ('child', 'parent', 'auto'));
create domain sift.merge_threshold as double precision
    constraint merge_threshold_range check (value > 0 and value <= 1);
create domain sift.neighbours as integer
    constraint neighbours_range check (value between 0 and 20);

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (212, 'parent_return', 'sift.parent_return', '"child"', true, '"child"', 'both', 'finalize',
  'child: matched passages as they are; parent: each is replaced by its section (de-duplicated); '
  'auto: a section replaces its passages when at least merge_threshold of them matched. Before '
  'the cap, MMR and lost-in-the-middle, which see the merged hits. Chunks without a section stay.'),
 (214, 'merge_threshold', 'sift.merge_threshold', '0.5', false, 'null', 'both', 'finalize',
  'For parent_return auto: the share of a section''s passages in the pool that merges them into it, in (0, 1].'),
 (216, 'neighbours', 'sift.neighbours', '0', true, '0', 'both', 'finalize',
  'Each hit''s window holds the n chunks before and after it in its document (fetched by id); '
  'overlapping windows merge into the better hit''s (0 or null: off).');

alter type sift.knob_set
    add attribute parent_return sift.parent_return,
    add attribute merge_threshold sift.merge_threshold,
    add attribute neighbours sift.neighbours;

-- What a hit covers: its section, whether it is a merged section, the chunks
-- its content spans and the ones that matched, its token count, and its
-- window (neighbours): the text to show, or the better hit whose window
-- already holds it.
alter type sift.hit
    add attribute section_id bigint,
    add attribute merged boolean,
    add attribute chunk_ids bigint[],
    add attribute matched_chunk_ids bigint[],
    add attribute token_count integer,
    add attribute window_chunk_ids bigint[],
    add attribute window_text text,
    add attribute window_of bigint;

alter type sift.explanation
    add attribute section_id bigint,
    add attribute merged boolean,
    add attribute matched_chunk_ids bigint[],
    add attribute merged_into bigint;

-- Signatures that change (an upgrade; a fresh install has no functions yet):
-- re-created by the function files.
drop function if exists sift.write_chunks(bigint[], integer[], text[], text[], integer[], text[]);
drop function if exists sift._finalize(sift.collections[], sift.knob_set[], bigint[], double precision[],
    integer, text, boolean);
