-- pgsift 0006: languages. A document's language (an ISO 639-1 code) picks
-- the text search configuration its chunks are analysed with; the lexical
-- leg parses a query once per configuration its collection holds (or in the
-- question's language); finalize keeps one translation of a page and weighs
-- hits in other languages. CJK and Thai text is cut into character bigrams
-- in SQL (sift._segment), at write and at query time: PostgreSQL's parser
-- has no word splitter for them. Chunks written before this migration keep
-- their search vectors until their document is written again.

-- ISO 639-1 code -> configuration, for the configurations this server has.
-- The operator may add or change rows; a code without a row is `simple`.
create table sift.language_configs (
    code   text primary key constraint language_code_shape check (code ~ '^[a-z]{2,3}$'),
    config regconfig not null
);
comment on table sift.language_configs is
    'A document language (ISO 639-1) -> the text search configuration its chunks are analysed '
    'with; a language without a row is analysed with simple. The operator may add rows.';
insert into sift.language_configs (code, config)
select v.code, v.cfg::regconfig
from (values ('ar', 'arabic'), ('hy', 'armenian'), ('eu', 'basque'), ('ca', 'catalan'), ('da', 'danish'),
             ('nl', 'dutch'), ('en', 'english'), ('et', 'estonian'), ('fi', 'finnish'), ('fr', 'french'),
             ('de', 'german'), ('el', 'greek'), ('hi', 'hindi'), ('hu', 'hungarian'), ('id', 'indonesian'),
             ('ga', 'irish'), ('it', 'italian'), ('lt', 'lithuanian'), ('ne', 'nepali'), ('no', 'norwegian'),
             ('nb', 'norwegian'), ('nn', 'norwegian'), ('pt', 'portuguese'), ('ro', 'romanian'),
             ('ru', 'russian'), ('sr', 'serbian'), ('es', 'spanish'), ('sv', 'swedish'), ('ta', 'tamil'),
             ('tr', 'turkish'), ('yi', 'yiddish')) as v(code, cfg)
where exists (select 1 from pg_catalog.pg_ts_config c
              where c.cfgname = v.cfg and c.cfgnamespace = 'pg_catalog'::regnamespace);

-- The configurations a collection's documents use besides its own
-- search_language: what the lexical leg parses a query with. Rows are added
-- as documents arrive and never removed (a stale one costs one parse).
create table sift.collection_configs (
    collection_id bigint not null references sift.collections on delete cascade,
    config        regconfig not null,
    primary key (collection_id, config)
);
comment on table sift.collection_configs is
    'The text search configurations of a collection''s documents (beside its search_language): '
    'the lexical leg parses a query once with each.';
alter table sift.collection_configs enable row level security;

create domain sift.query_language as text
    constraint query_language_shape check (value ~ '^[a-z]{2,3}([-_][A-Za-z0-9]{2,8})*$');
create domain sift.other_language_weight as double precision
    constraint other_language_weight_range check (value >= 0 and value <= 1);
create domain sift.quoted_text as text
    constraint quoted_text_known check (value in ('boost', 'require'));

insert into sift.knob_defs (position, name, type, default_value, can_be_off, off_value, scope, stage, meaning)
values
 (106, 'quoted_text', 'sift.quoted_text', '"boost"', false, 'null', 'both', 'lexical',
  'boost: a "quoted phrase" lifts the chunks that hold it and a -word lowers those that hold it, '
  'the other matches stay; require: the phrase is required and the -word excludes.'),
 (205, 'query_language', 'sift.query_language', 'null', true, 'null', 'call', 'finalize',
  'The question''s language (ISO 639-1; the Python client detects it for "auto"): the lexical leg '
  'parses the query in it, hits in other languages are weighed by other_language_weight, and the '
  'translation in it is the one kept of a page (null: unknown).'),
 (206, 'other_language_weight', 'sift.other_language_weight', '0.8', true, '1', 'both', 'finalize',
  'Multiplies the score of a hit whose document is in another language than query_language (null: 1).'),
 (207, 'one_translation', 'boolean', 'true', true, 'false', 'both', 'finalize',
  'Documents whose source_uri differs only by a leading locale segment (/en/..., /de-AT/...), or '
  'that share metadata.page_key, are one page: only one translation of it is kept, the one in '
  'query_language when it was retrieved, else the best.');

alter type sift.knob_set
    add attribute quoted_text sift.quoted_text,
    add attribute query_language sift.query_language,
    add attribute other_language_weight sift.other_language_weight,
    add attribute one_translation boolean;

alter type sift.hit
    add attribute language text,
    add attribute language_factor double precision;
alter type sift.explanation
    add attribute language text,
    add attribute language_factor double precision;

-- Signatures that change (an upgrade; a fresh install has no functions yet).
drop function if exists sift._finalize(sift.collections[], sift.knob_set[], bigint[], double precision[],
    integer, text, boolean);
drop function if exists sift._parse_query(text, regconfig, integer);
drop function if exists sift.lexical_query(text, regconfig, integer);
drop function if exists sift._legs(sift.collections, sift.knob_set, text, boolean);
drop function if exists sift._lexical_leg(sift.collections, sift.knob_set, tsquery, text[], jsonb, integer);
