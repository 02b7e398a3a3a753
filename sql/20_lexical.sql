-- Lexical leg: query parsing (OR over terms, quoted phrases required,
-- -exclusions) and ranking over the stored tsvector.

create or replace function sift._tsquery_or(lexemes text[])
returns tsquery
language sql immutable parallel safe security invoker
as $$
    -- Lexemes are already normalised by the collection's configuration, so
    -- they are quoted verbatim (backslash and quote escaped) and OR'd.
    select coalesce(
        pg_catalog.string_agg(
            '''' || replace(replace(l, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery,
        ''::tsquery)
    from pg_catalog.unnest(lexemes) as l
$$;
comment on function sift._tsquery_or(text[]) is
    'Internal: an OR tsquery over already-normalised lexemes (empty array: empty tsquery).';


create or replace function sift.lexical_query(
    query_text      text,
    search_language regconfig default 'english',
    max_terms       integer default 64)
returns tsquery
language plpgsql immutable parallel safe security invoker
set search_path from current
as $$
declare
    clipped  text := left(coalesce(query_text, ''), 100000);
    tok      record;
    words    text := '';
    phrase   tsquery;
    positive tsquery := '';
    required tsquery := '';
    excluded integer := 0;
    phrases  integer := 0;
    result   tsquery;
begin
    -- Tokens: optional leading '-', then a "quoted phrase" or a bare word.
    -- A lone or unbalanced quote matches neither and is skipped.
    for tok in
        select m[1] = '-' as negated, m[2] as quoted, m[3] as bare
        from pg_catalog.regexp_matches(clipped, '(-?)(?:"([^"]*)"|([^\s"]+))', 'g') as m
    loop
        if tok.quoted is not null or tok.negated then
            phrase := pg_catalog.phraseto_tsquery(search_language, coalesce(tok.quoted, tok.bare));
            continue when pg_catalog.numnode(phrase) = 0;
            if tok.negated then
                continue when excluded >= max_terms;
                excluded := excluded + 1;
                required := required && !!phrase;
            else
                continue when phrases >= max_terms;
                phrases := phrases + 1;
                positive := positive || phrase;
                required := required && phrase;
            end if;
        else
            words := words || ' ' || tok.bare;
        end if;
    end loop;

    -- Bare words: OR over their distinct lexemes, the first max_terms in query order.
    positive := positive || sift._tsquery_or(array(
        select t.lexeme
        from pg_catalog.unnest(pg_catalog.to_tsvector(search_language, words)) as t
        order by t.positions[1], t.lexeme
        limit max_terms));

    if pg_catalog.numnode(positive) = 0 then
        return ''::tsquery;   -- nothing to search for (empty, stopwords, only exclusions)
    end if;
    result := positive && required;
    return result;
end;
$$;
comment on function sift.lexical_query(text, regconfig, integer) is
    'The tsquery the lexical leg runs for a user''s text: OR over the distinct terms (the first '
    'max_terms, default 64, in query order; AND makes real questions match nothing), '
    '"quoted phrases" required, -word and -"phrase" excluded. Never raises: empty, '
    'punctuation-only, emoji or stopword-only text gives the empty tsquery, and the search '
    'answers from the dense leg alone. Text past 100,000 characters is ignored.';


create or replace function sift._lexical_leg(
    collection_ids bigint[], query tsquery, filter jsonb, n integer)
returns table (chunk_id bigint, rank integer, score double precision)
language sql stable security invoker
as $$
    select s.chunk_id, (row_number() over (order by s.score desc, s.chunk_id))::integer, s.score
    from (
        select c.chunk_id, pg_catalog.ts_rank_cd(c.search_vector, query)::double precision as score
        from sift.chunks c
        where c.collection_id = any (collection_ids)
          and c.search_vector @@ query
          and (filter is null or filter = '{}'::jsonb
               or exists (select 1 from sift.documents d
                          where d.document_id = c.document_id and d.metadata @> filter))
        order by 2 desc, c.chunk_id
        limit n
    ) s
    order by 2
$$;
comment on function sift._lexical_leg(bigint[], tsquery, jsonb, integer) is
    'Internal: the top n chunks of the collections matching the tsquery, ranked by ts_rank_cd, '
    'metadata filter applied inside the leg.';
