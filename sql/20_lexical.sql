-- Lexical leg: query parsing (OR over terms, quoted phrases required,
-- -exclusions) and Okapi BM25 over the stored tsvector, with ts_rank_cd kept
-- as a knob (lexical_scorer).

create or replace function sift._tsquery_or(lexemes text[])
returns tsquery
language sql immutable parallel safe security invoker
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
    query_text      text,
    search_language regconfig,
    max_terms       integer default 64,
    out match       tsquery,
    out terms       text[])
language plpgsql immutable parallel safe security invoker
set search_path from current
as $$
declare
    clipped  text := left(coalesce(query_text, ''), 100000);
    tok      record;
    words    text := '';
    phrase   tsquery;
    positive tsquery;
    required tsquery;
    excluded integer := 0;
    phrases  integer := 0;
begin
    terms := '{}';
    -- Tokens: optional leading '-', then a "quoted phrase" or a bare word.
    -- A lone or unbalanced quote matches neither and is skipped.
    for tok in
        select m[1] = '-' as negated, coalesce(m[2], m[3]) as body, m[2] is not null as quoted
        from pg_catalog.regexp_matches(clipped, '(-?)(?:"([^"]*)"|([^\s"]+))', 'g') as m
    loop
        if not (tok.quoted or tok.negated) then
            words := words || ' ' || tok.body;
            continue;
        end if;
        -- Checked first: phraseto_tsquery of stopwords alone raises a NOTICE.
        continue when pg_catalog.length(pg_catalog.to_tsvector(search_language, tok.body)) = 0;
        phrase := pg_catalog.phraseto_tsquery(search_language, tok.body);
        if tok.negated then
            continue when excluded >= max_terms;
            excluded := excluded + 1;
            required := case when required is null then !!phrase else required && !!phrase end;
        else
            continue when phrases >= max_terms;
            phrases := phrases + 1;
            positive := case when positive is null then phrase else positive || phrase end;
            required := case when required is null then phrase else required && phrase end;
            terms := terms || array(
                select t.lexeme from pg_catalog.unnest(pg_catalog.to_tsvector(search_language, tok.body)) t);
        end if;
    end loop;

    -- Bare words: OR over their distinct lexemes, the first max_terms in query order.
    terms := terms || array(
        select t.lexeme
        from pg_catalog.unnest(pg_catalog.to_tsvector(search_language, words)) as t
        order by t.positions[1], t.lexeme
        limit max_terms);
    terms := array(select u.t from pg_catalog.unnest(terms) with ordinality u(t, o)
                   group by u.t order by min(u.o) limit 2 * max_terms);
    if cardinality(terms) = 0 then
        terms := null;   -- nothing to search for: empty, stopwords, only exclusions
        return;
    end if;
    positive := case when positive is null then sift._tsquery_or(terms)
                     else positive || sift._tsquery_or(terms) end;
    match := case when required is null then positive else positive && required end;
end;
$$;
comment on function sift._parse_query(text, regconfig, integer) is
    'Internal: the lexical leg''s view of a query: the tsquery a chunk must match and the '
    'distinct positive terms BM25 scores (null when the text has none).';


create or replace function sift.lexical_query(
    query_text      text,
    search_language regconfig default 'english',
    max_terms       integer default 64)
returns tsquery
language sql immutable parallel safe security invoker
as $$
    select (sift._parse_query(query_text, search_language, max_terms)).match
$$;
comment on function sift.lexical_query(text, regconfig, integer) is
    'The tsquery the lexical leg runs for a user''s text: OR over the distinct terms (the first '
    'max_terms, default 64, in query order; AND makes real questions match nothing), '
    '"quoted phrases" required, -word and -"phrase" excluded. Never raises: empty, '
    'punctuation-only, emoji or stopword-only text gives null, and the search answers from '
    'the dense leg alone. Text past 100,000 characters is ignored.';


create or replace function sift._bm25_impact(
    tf double precision, dl double precision, avgdl double precision,
    k1 double precision, b double precision)
returns double precision
language sql immutable parallel safe security invoker
as $$
    select tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
$$;
comment on function sift._bm25_impact(double precision, double precision, double precision,
    double precision, double precision) is
    'Internal: BM25''s term-frequency part, tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl)).';


create or replace function sift._bm25_scores(
    ids bigint[], terms text[], idfs double precision[], avgdl double precision,
    k1 double precision, b double precision, match tsquery, filter jsonb, n integer)
returns table (chunk_id bigint, score double precision)
language sql stable security invoker
as $$
    -- Exact BM25 of the given chunks. The query's lexemes are picked out of the
    -- stored vector in one pass (every weight reset to D, the query's set to A,
    -- then only A kept): tf is the count of positions, the same count the
    -- statistics use.
    select c.chunk_id,
           sum(idfs[pg_catalog.array_position(terms, u.lexeme)]
               * sift._bm25_impact(pg_catalog.array_length(u.positions, 1), c.lexical_length,
                                   avgdl, k1, b)) as score
    from sift.chunks c
    cross join lateral pg_catalog.unnest(pg_catalog.ts_filter(
        pg_catalog.setweight(pg_catalog.setweight(c.search_vector, 'D'), 'A', terms), '{a}')) u
    where c.chunk_id = any (ids)
      and c.search_vector @@ match
      and (filter is null or filter = '{}'::jsonb
           or exists (select 1 from sift.documents d
                      where d.document_id = c.document_id and d.metadata @> filter))
    group by c.chunk_id
    order by 2 desc, c.chunk_id
    limit n
$$;
comment on function sift._bm25_scores(bigint[], text[], double precision[], double precision,
    double precision, double precision, tsquery, jsonb, integer) is
    'Internal: exact BM25 scores of a candidate set, best n first, filter and match applied.';


create or replace function sift._lexical_leg(
    col     sift.collections,
    match   tsquery,
    terms   text[],
    filter  jsonb,
    n       integer,
    scorer  text,
    k1      double precision,
    b       double precision)
returns table (chunk_id bigint, rank integer, score double precision)
language plpgsql stable security invoker
set search_path from current
as $$
#variable_conflict use_column
declare
    filtered   boolean := filter is not null and filter <> '{}'::jsonb;
    n_chunks   double precision;
    avgdl      double precision;
    t_lexeme   text[];
    t_idf      double precision[];
    t_listed   boolean[];
    t_floor    double precision[];
    t_drift    double precision[];
    rare       tsquery;
    rare_ids   bigint[] := '{}';
    scored     bigint[];
    depth      integer := greatest(4 * n, 64);
    batch      integer := greatest(2 * n, 50);
    deeper     boolean;
    bound      double precision;   -- what a chunk read from no list could score at most
    cand_ids   bigint[];
    cand_ub    double precision[];
    floor_known double precision;
    simple     boolean := not (filter is not null and filter <> '{}'::jsonb)
                          and match::text = sift._tsquery_or(terms)::text;
    pos        integer;
    best       bigint[];
    scores     double precision[];
begin
    if scorer = 'ts_rank_cd' then
        return query
        select s.chunk_id, (row_number() over (order by s.score desc, s.chunk_id))::integer, s.score
        from (select c.chunk_id, pg_catalog.ts_rank_cd(c.search_vector, match)::double precision as score
              from sift.chunks c
              where c.collection_id = col.collection_id and c.search_vector @@ match
                and (not filtered or exists (select 1 from sift.documents d
                                             where d.document_id = c.document_id
                                               and d.metadata @> filter))
              order by 2 desc, c.chunk_id
              limit n) s
        order by 2;
        return;
    end if;

    select sum(s.chunks), sum(s.tokens)::double precision / nullif(sum(s.chunks), 0)
    into n_chunks, avgdl
    from sift.collection_lexical_stats s
    where s.collection_id = col.collection_id;
    if coalesce(n_chunks, 0) = 0 then
        return;
    end if;

    -- Per term: exact df from the ledger, Lucene's idf, and whether it has an
    -- impact list valid for these k1 and b (drift: how far avgdl has grown since).
    select array_agg(q.lexeme order by q.lexeme),
           array_agg(ln(1 + (n_chunks - d.df + 0.5) / (d.df + 0.5)) order by q.lexeme),
           array_agg(l.lexeme is not null and l.k1_ref = k1 and l.b_ref = b order by q.lexeme),
           array_agg(coalesce(l.floor_impact, 0) order by q.lexeme),
           array_agg(greatest(1, avgdl / coalesce(l.avgdl_ref, avgdl)) order by q.lexeme)
    into t_lexeme, t_idf, t_listed, t_floor, t_drift
    from unnest(terms) as q(lexeme)
    cross join lateral (
        select coalesce((select t.df from sift.term_df t
                         where t.collection_id = col.collection_id and t.lexeme = q.lexeme), 0)
             + coalesce((select sum(p.counts[pg_catalog.array_position(p.lexemes, q.lexeme)])
                         from sift.term_df_pending p
                         where p.collection_id = col.collection_id), 0) as df) d
    left join sift.term_lists l on l.collection_id = col.collection_id and l.lexeme = q.lexeme
    where d.df > 0;
    if t_lexeme is null then
        return;   -- no query term occurs in this collection
    end if;

    -- Rare terms (no list): every chunk holding one is scored exactly.
    rare := sift._tsquery_or(array(select u.l from unnest(t_lexeme, t_listed) u(l, listed)
                                   where not u.listed));
    if rare is not null then
        rare_ids := array(select c.chunk_id from sift.chunks c
                          where c.collection_id = col.collection_id and c.search_vector @@ rare);
    end if;
    select array_agg(x.chunk_id order by x.score desc, x.chunk_id),
           array_agg(x.score order by x.score desc, x.chunk_id)
    into best, scores
    from sift._bm25_scores(rare_ids, t_lexeme, t_idf, avgdl, k1, b, match, filter, n) x;
    scored := rare_ids;

    -- Common terms: threshold algorithm over their impact lists. Read each list
    -- best-first to a depth; a chunk holding no rare term can score at most
    -- its known impacts plus, for each list it was not read from, the impact
    -- where that list's reading stopped. Score exactly only the chunks whose
    -- bound can still beat the n-th best; read deeper until nothing unread can.
    while true = any (t_listed) loop
        with r as (
            select u.l, tp.chunk_id, tp.tf, tp.dl, tp.impact, u.idf,
                   row_number() over (partition by u.l order by tp.impact desc, tp.chunk_id) as rn
            from unnest(t_lexeme, t_listed, t_idf) u(l, listed, idf)
            cross join lateral (
                select p.chunk_id, p.tf, p.dl, p.impact from sift.term_postings p
                where p.collection_id = col.collection_id and p.lexeme = u.l
                order by p.impact desc, p.chunk_id
                limit depth + 1) tp
            where u.listed
        ), term_bound as (
            -- Past the depth read, a list's chunks score at most the first
            -- impact not read (its floor once the list is read to the end),
            -- times the avgdl drift since the list was built.
            select u.l, u.idf * u.drift * coalesce(
                       (select r.impact from r where r.l = u.l and r.rn = depth + 1), u.floor) as b_t,
                   exists (select 1 from r where r.l = u.l and r.rn = depth + 1) as more
            from unnest(t_lexeme, t_listed, t_idf, t_floor, t_drift) u(l, listed, idf, floor, drift)
            where u.listed
        ), seen as (
            select r.chunk_id,
                   sum(r.idf * sift._bm25_impact(r.tf, r.dl, avgdl, k1, b)) as known,
                   sum(r.idf * sift._bm25_impact(r.tf, r.dl, avgdl, k1, b)) - sum(tb.b_t) as gain
            from r join term_bound tb on tb.l = r.l
            left join unnest(scored) as done(chunk_id) on done.chunk_id = r.chunk_id
            where r.rn <= depth and done.chunk_id is null
            group by r.chunk_id
        ), total as (
            select sum(tb.b_t) as bound, bool_or(tb.more) as more from term_bound tb
        )
        select total.bound, total.more,
               array(select s.chunk_id from seen s order by s.gain desc, s.chunk_id),
               array(select total.bound + s.gain from seen s order by s.gain desc, s.chunk_id),
               (select k.v from (select s.known as v from seen s
                                 union all select unnest(scores)) k
                order by k.v desc offset n - 1 limit 1)
        from total
        into bound, deeper, cand_ids, cand_ub, floor_known;

        -- With no filter and no required phrase, every chunk read from a list
        -- matches, so its known impacts are a lower bound: while the unread
        -- bound is above the n-th best of those, reading deeper (an index
        -- range) is cheaper than scoring candidates that cannot all stay.
        if simple and deeper and bound > coalesce(floor_known, 0) then
            depth := depth * 4;
            continue;
        end if;

        -- Exact scores for the most promising candidates, a batch at a time,
        -- while a candidate's bound can still beat the current n-th best.
        pos := 1;
        while pos <= coalesce(cardinality(cand_ids), 0)
              and (coalesce(cardinality(best), 0) < n or cand_ub[pos] > scores[n]) loop
            select array_agg(x.chunk_id order by x.score desc, x.chunk_id),
                   array_agg(x.score order by x.score desc, x.chunk_id)
            into best, scores
            from (select z.chunk_id, z.score
                  from (select * from unnest(best, scores) as y(chunk_id, score)
                        union all
                        select * from sift._bm25_scores(cand_ids[pos:pos + batch - 1], t_lexeme,
                                                        t_idf, avgdl, k1, b, match, filter, n)) z
                  where z.chunk_id is not null
                  order by z.score desc, z.chunk_id
                  limit n) x;
            scored := scored || cand_ids[pos:pos + batch - 1];
            pos := pos + batch;
        end loop;

        exit when coalesce(cardinality(best), 0) >= n and scores[n] > bound;
        if not deeper then
            -- Lists read to the end and the floors still leave room: score
            -- every matching chunk (exact, slow; rare with sane list sizes).
            select array_agg(x.chunk_id order by x.score desc, x.chunk_id),
                   array_agg(x.score order by x.score desc, x.chunk_id)
            into best, scores
            from sift._bm25_scores(array(select c.chunk_id from sift.chunks c
                                         where c.collection_id = col.collection_id
                                           and c.search_vector @@ match),
                                   t_lexeme, t_idf, avgdl, k1, b, match, filter, n) x;
            exit;
        end if;
        depth := depth * 4;
    end loop;

    return query
    select u.id, u.ord::integer, u.score
    from unnest(best, scores) with ordinality as u(id, score, ord)
    order by u.ord;
end;
$$;
comment on function sift._lexical_leg(sift.collections, tsquery, text[], jsonb, integer, text,
    double precision, double precision) is
    'Internal: the top n chunks of a collection for the query, by Okapi BM25 (idf = '
    'ln(1 + (N - df + 0.5) / (df + 0.5)), exact statistics) or by ts_rank_cd. Rare terms are '
    'scored exhaustively; common terms are read best-first from their impact lists until the '
    'top n is provably exact (threshold algorithm), so a common term never costs a scan of '
    'every matching chunk.';
