-- The lexical leg's query: a user's text parsed into a tsquery and the terms
-- BM25 scores (OR over the terms in each configuration present; quoted
-- phrases lift and -words lower, or with quoted_text require are required and
-- excluded; -5 is a number; CJK and Thai as bigrams). In: the text, the
-- configurations (sift._legs picks them) and max_query_terms. Out: the match,
-- the terms, and the lift and sink queries of quoted text (sift._parse_query;
-- sift.lexical_query, its public face).

create or replace function sift._tsquery_or(lexemes text[])
returns tsquery
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Lexemes are already normalised by the collection's configuration, so
    -- they are quoted verbatim (backslash and quote escaped) and OR'd.
    -- No lexemes: null (an empty tsquery literal would raise a NOTICE).
    select pg_catalog.string_agg(
        '''' || replace(replace(l, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery
    from pg_catalog.unnest(lexemes) as l
$$;
comment on function sift._tsquery_or(text[]) is
    'Internal: an OR tsquery over already-normalised lexemes (no lexemes: null).';


create or replace function sift._parse_query(
    query_text text,
    configs    regconfig[],
    max_terms  integer default 64,
    strict     boolean default false,
    out match  tsquery,
    out terms  text[],
    out lift   tsquery,
    out sink   tsquery)
language plpgsql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    clipped  text := left(coalesce(query_text, ''), 100000);
    cfg      regconfig;
    tok      record;
    body     text;
    words    text := '';
    phrase   tsquery;
    kept_by  integer;
    positive tsquery;
    required tsquery;
    excluded integer := 0;
    phrases  integer := 0;
    bare     boolean;
begin
    terms := '{}';
    -- Tokens: optional leading '-', then a "quoted phrase" or a bare word.
    -- A lone or unbalanced quote matches neither and is skipped. A '-' before
    -- a digit is a number's sign, not an exclusion: -5 and -1e-5 are words,
    -- read as the chunks were (PostgreSQL's parser keeps the sign: '-5').
    -- Text with no quote and no word starting with a '-' that excludes is
    -- bare words only: segmented whole, the same words in the same order,
    -- without a call per word.
    bare := pg_catalog.strpos(clipped, '"') = 0 and clipped !~ '(^|\s)-(?![0-9])';
    if bare then
        words := sift._segment(clipped);
    end if;
    for tok in
        select m[1] = '-' as negated, coalesce(m[2], m[3]) as body, m[2] is not null as quoted
        from pg_catalog.regexp_matches(clipped, '(-(?![0-9])|)(?:"([^"]*)"|([^\s"]+))', 'g') as m
        where not bare
    loop
        -- CJK and Thai runs as bigrams, as the chunks were indexed (per token,
        -- so a -word or a "phrase" in those scripts keeps its sign).
        body := sift._segment(tok.body);
        if not (tok.quoted or tok.negated) then
            words := words || ' ' || body;
            continue;
        end if;
        -- The phrase in every configuration that keeps a word of it (checked
        -- first: phraseto_tsquery of stopwords alone raises a NOTICE).
        phrase := null;
        kept_by := 0;
        foreach cfg in array configs loop
            continue when pg_catalog.length(pg_catalog.to_tsvector(cfg, body)) = 0;
            kept_by := kept_by + 1;
            phrase := case when phrase is null then pg_catalog.phraseto_tsquery(cfg, body)
                           else phrase || pg_catalog.phraseto_tsquery(cfg, body) end;
        end loop;
        -- Strict: a phrase that is stopwords in one configuration is required
        -- nowhere (it would exclude every chunk analysed with that one).
        continue when phrase is null or (strict and kept_by < cardinality(configs));
        if tok.negated then
            continue when excluded >= max_terms;
            excluded := excluded + 1;
            -- strict: excluded; boost: a chunk holding it is lowered, never dropped.
            if strict then
                required := case when required is null then !!phrase else required && !!phrase end;
            else
                sink := case when sink is null then phrase else sink || phrase end;
            end if;
        else
            continue when phrases >= max_terms;
            phrases := phrases + 1;
            positive := case when positive is null then phrase else positive || phrase end;
            -- strict: required; boost: a chunk holding it is lifted, the others stay.
            if strict then
                required := case when required is null then phrase else required && phrase end;
            else
                lift := case when lift is null then phrase else lift || phrase end;
            end if;
            foreach cfg in array configs loop
                terms := terms || array(
                    select t.lexeme from pg_catalog.unnest(pg_catalog.to_tsvector(cfg, body)) t);
            end loop;
        end if;
    end loop;

    -- Bare words: OR over their distinct lexemes in every configuration, the
    -- first max_terms in query order.
    terms := terms || array(
        select t.lexeme
        from pg_catalog.unnest(configs) with ordinality as c(cfg, n)
        cross join lateral pg_catalog.unnest(pg_catalog.to_tsvector(c.cfg, words)) as t
        order by t.positions[1], c.n, t.lexeme
        limit max_terms * cardinality(configs));
    -- At most max_terms words and phrases, each up to one lexeme per configuration.
    terms := array(select u.t from pg_catalog.unnest(terms) with ordinality u(t, o)
                   group by u.t order by min(u.o) limit 2 * max_terms * cardinality(configs));
    if cardinality(terms) = 0 then
        terms := null;   -- nothing to search for: empty, stopwords, only exclusions
        lift := null;
        sink := null;
        return;
    end if;
    positive := case when positive is null then sift._tsquery_or(terms)
                     else positive || sift._tsquery_or(terms) end;
    match := case when required is null then positive else positive && required end;
end;
$$;
comment on function sift._parse_query(text, regconfig[], integer, boolean) is
    'Internal: the lexical leg''s view of a query, parsed with each configuration given: the '
    'tsquery a chunk must match, the distinct positive terms BM25 scores (null when the text has '
    'none), and in boost mode (strict false) the quoted phrases that lift a chunk and the '
    '-exclusions that lower it.';


create or replace function sift.lexical_query(
    query_text      text,
    search_language regconfig default 'english',
    max_terms       integer default 64,
    quoted_text     text default 'boost')
returns tsquery
language plpgsql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    if max_terms is null or max_terms not between 1 and 1000 then
        raise exception 'max_terms must be between 1 and 1000, got %', max_terms using errcode = 'SF003';
    end if;
    if quoted_text is null or quoted_text not in ('boost', 'require') then
        raise exception 'quoted_text must be boost or require, got %', quoted_text using errcode = 'SF003';
    end if;
    return (sift._parse_query(query_text, array[search_language], max_terms, quoted_text = 'require')).match;
end;
$$;
comment on function sift.lexical_query(text, regconfig, integer, text) is
    'The tsquery the lexical leg runs for a user''s text: OR over the distinct terms (the first '
    'max_terms, default 64, in query order; AND makes real questions match nothing); with '
    'quoted_text require, "quoted phrases" are required and -word and -"phrase" excluded (boost, '
    'the default: they lift or lower chunks instead, so the tsquery is the OR alone); a minus '
    'before a digit is a sign (-5 is searched as -5, not excluded). CJK and Thai '
    'text is matched by character bigrams. Never raises on odd text: empty, punctuation-only, '
    'emoji or stopword-only text gives null, and the search answers from the dense leg alone. '
    'Text past 100,000 characters is ignored.';
