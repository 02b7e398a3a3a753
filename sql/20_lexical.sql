-- Lexical leg: query parsing (OR over terms in each configuration present;
-- quoted phrases lift and -words lower, or with quoted_text require are
-- required and excluded; -5 is a number; CJK and Thai as bigrams) and Okapi
-- BM25 over the stored tsvector, with ts_rank_cd kept as a knob
-- (lexical_scorer).

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


create or replace function sift._bm25_part(
    tf double precision, dl double precision, kp1 double precision, kb0 double precision,
    kbl double precision)
returns double precision
language sql immutable parallel safe security invoker
as $$
    select tf * kp1 / (tf + (kb0 + kbl * dl))
$$;
comment on function sift._bm25_part(double precision, double precision, double precision,
    double precision, double precision) is
    'Internal: BM25''s term-frequency part from its constants kp1 = k1 + 1, kb0 = k1 (1 - b) and '
    'kbl = k1 b / avgdl, computed once a query (every entry and vector scored with the same '
    'operations, so a chunk scores the same float on every path). Not pinned so it inlines: its '
    'body is double precision arithmetic only, which pg_catalog resolves first on any path.';


create or replace function sift._bm25_term(
    idf double precision, tf double precision, dl double precision, kp1 double precision,
    kb0 double precision, kbl double precision)
returns double precision
language sql immutable parallel safe security invoker
as $$
    -- Rounded down to a multiple of 2^-36 (multiplying and dividing by a power
    -- of two is exact). A sum of such multiples below 2^17 fits a double's 53
    -- bits, so every addition is exact while a chunk's score stays below
    -- 131,072; a term gives less than 2^8 (idf under 22, k1 at most 10), so a
    -- chunk would have to hold over 500 of the query's terms to pass it. A
    -- chunk then scores the same float in any order of its terms, on every
    -- path, and no sort has to fix the order. Each term loses under 1.5e-11
    -- and never gains, so the lists' impacts stay upper bounds.
    select pg_catalog.floor(idf * sift._bm25_part(tf, dl, kp1, kb0, kbl) * 68719476736::double precision)
           / 68719476736::double precision
$$;
comment on function sift._bm25_term(double precision, double precision, double precision, double precision,
    double precision, double precision) is
    'Internal: one term''s BM25 contribution, idf x sift._bm25_part, rounded down to a multiple of '
    '2^-36, so a chunk''s sum of them is exact and the same in any order. Not pinned so it inlines.';


create or replace function sift._bm25_impact(
    tf double precision, dl double precision, avgdl double precision,
    k1 double precision, b double precision)
returns double precision
language sql immutable parallel safe security invoker
as $$
    select sift._bm25_part(tf, dl, k1 + 1, k1 * (1 - b), k1 * b / avgdl)
$$;
comment on function sift._bm25_impact(double precision, double precision, double precision,
    double precision, double precision) is
    'Internal: BM25''s term-frequency part, tf (k1 + 1) / (tf + (k1 (1 - b) + (k1 b / avgdl) dl)) '
    '(sift._bm25_part, grouped so). Not pinned so it inlines into the per-posting queries.';


create or replace function sift._bm25_scores(
    ids bigint[], terms text[], idfs double precision[], avgdl double precision,
    k1 double precision, b double precision, match tsquery, fpath jsonpath, n integer)
returns table (chunk_id bigint, score double precision)
language sql stable security invoker
as $$
    -- Not pinned, so it inlines into the leg's statements (planned with the
    -- leg's pinned path); every name in it is qualified.
    -- Exact BM25 of the given chunks. The query's lexemes are picked out of the
    -- stored vector in one pass (every weight reset to D, the query's set to A,
    -- then only A kept): tf is the count of positions, the same count the
    -- statistics use. Each term's part is rounded as the lists' sums round it
    -- (sift._bm25_term: sums exact in any order), so a chunk scores the same
    -- whichever path scored it.
    -- The chunks are fetched by id first (offset 0): left to itself, a generic
    -- plan ANDs the id lookup with the text index, which for common terms
    -- decodes every matching chunk's entry (~120 ms at a million chunks).
    select c.chunk_id,
           pg_catalog.sum(sift._bm25_term(idfs[pg_catalog.array_position(terms, u.lexeme)],
                                          pg_catalog.array_length(u.positions, 1), c.lexical_length,
                                          k.kp1, k.kb0, k.kbl)) as score
    from (select k1 + 1 as kp1, k1 * (1 - b) as kb0, k1 * b / nullif(avgdl, 0) as kbl offset 0) k
    cross join (select c.chunk_id, c.document_id, c.search_vector, c.lexical_length
                from sift.chunks c where c.chunk_id = any (ids) offset 0) c
    cross join lateral pg_catalog.unnest(pg_catalog.ts_filter(
        pg_catalog.setweight(pg_catalog.setweight(c.search_vector, 'D'), 'A', terms), '{a}')) u
    where (match is null or c.search_vector @@ match)
      and (fpath is null
           or exists (select 1 from sift.documents d
                      where d.document_id = c.document_id
                        and pg_catalog.jsonb_path_match_tz(d.metadata, fpath, '{}', true)))
    group by c.chunk_id
    order by 2 desc, c.chunk_id
    limit n
$$;
comment on function sift._bm25_scores(bigint[], text[], double precision[], double precision,
    double precision, double precision, tsquery, jsonpath, integer) is
    'Internal: exact BM25 scores of a candidate set, best n first, metadata filter (sift.filter_path) '
    'and match applied (match null: none to test; a chunk holding no term scores nothing anyway).';


create or replace function sift._list_entries(collection_id bigint, lexemes text[], depth integer)
returns table (lexeme text, chunk_id bigint, tf real, dl integer)
language sql stable security invoker
as $$
    -- Not pinned, so it inlines into the leg's statements (planned with the
    -- leg's pinned path); every name in it is qualified.
    select tb.lexeme, pg_catalog.unnest(tb.chunk_ids), pg_catalog.unnest(tb.tfs), pg_catalog.unnest(tb.dls)
    from sift.term_blocks tb
    where tb.collection_id = _list_entries.collection_id and tb.block_no < depth
      and tb.lexeme = any (lexemes)
    union all
    select d.lexeme, pg_catalog.unnest(d.chunk_ids), pg_catalog.unnest(d.tfs), pg_catalog.unnest(d.dls)
    from sift.term_deltas d
    where d.collection_id = _list_entries.collection_id and d.lexeme = any (lexemes)
$$;
comment on function sift._list_entries(bigint, text[], integer) is
    'Internal: the impact-list entries (tf, dl) of these terms in a collection: their first depth '
    'blocks and their whole deltas.';


create or replace function sift._text_matches(collection_id bigint, query tsquery,
                                              acting_role name default current_user)
returns bigint[]
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
-- Every match, whatever the session set (a random subset of them otherwise).
set gin_fuzzy_search_limit = 0
as $$
begin
    -- Row-level security keeps the text index out of reach: the match operator is not
    -- leakproof, so under a policy PostgreSQL tests it row by row after the policy
    -- (every visible chunk read, a full scan at a million chunks). This function runs
    -- as the tables' owner, to whom no policy applies, and so must decide itself whom
    -- it answers: the acting role (the caller's current_user, given by the default),
    -- which the session must be able to act as, and only for a collection of that
    -- role's tenant. It returns chunk ids of that collection only.
    if acting_role is null or not pg_catalog.pg_has_role(session_user, acting_role, 'MEMBER') then
        raise exception 'role % may not act as role %', session_user, acting_role using errcode = '42501';
    end if;
    if not exists (select 1 from sift.collections c
                   where c.collection_id = _text_matches.collection_id
                     and c.tenant = sift._tenant_for(acting_role)) then
        raise exception 'unknown collection % for role %', _text_matches.collection_id, acting_role
            using errcode = 'SF001';
    end if;
    -- The index first, the collection filter after it (offset 0 keeps it out of the
    -- scan: with it inside, the planner walks a large collection's chunks, 5x slower).
    return array(select m.chunk_id
                 from (select c.chunk_id, c.collection_id from sift.chunks c
                       where c.search_vector @@ query offset 0) m
                 where m.collection_id = _text_matches.collection_id);
end;
$$;
comment on function sift._text_matches(bigint, tsquery, name) is
    'Internal: the ids of a collection''s chunks that match a text query, through the text index. '
    'Security definer (the text index is unusable under row-level security): answers only for a '
    'collection of the tenant of acting_role, a role the session may act as.';


create or replace function sift._matching_chunks(collection_id bigint, query tsquery, collection_chunks double precision)
returns bigint[]
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    table_rows double precision := (select c.reltuples from pg_catalog.pg_class c
                                    where c.oid = 'sift.chunks'::pg_catalog.regclass);
begin
    -- The text index holds every collection's chunks: its matches cost what the terms
    -- weigh in the whole table, other tenants' vocabulary included. A small collection
    -- in a large shared table walks its own chunks instead (each stored vector read and
    -- tested: bounded by its size, whatever the others hold); any other goes through
    -- the index.
    if collection_chunks <= 2000 and 10 * collection_chunks < table_rows then
        return array(select m.chunk_id
                     from (select c.chunk_id, c.search_vector from sift.chunks c
                           where c.collection_id = _matching_chunks.collection_id offset 0) m
                     where m.search_vector @@ query);
    end if;
    return sift._text_matches(_matching_chunks.collection_id, query);
end;
$$;
comment on function sift._matching_chunks(bigint, tsquery, double precision) is
    'Internal: the ids of a collection''s chunks that match a text query: through the text index '
    '(sift._text_matches), or, for a collection of at most 2,000 chunks under a tenth of sift.chunks, '
    'by walking its own chunks (so its cost never grows with other tenants'' data).';


create or replace function sift._lift_and_sink(
    ids bigint[], scores double precision[], lift tsquery, sink tsquery)
returns table (chunk_id bigint, rank integer, score double precision)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
-- Planned once a session (PostgreSQL 18 caches SQL functions' plans; a custom plan
-- per call re-planned the whole body). Leaf functions only: the setting holds for
-- whatever a function calls.
set plan_cache_mode = force_generic_plan
as $$
    -- Quoted text in boost mode: a chunk of the leg's top n that holds a quoted
    -- phrase counts double, one that holds a -word half; then ranked again.
    select u.id, u.o::integer, u.s
    from unnest(ids, scores) with ordinality as u(id, s, o)
    where lift is null and sink is null
    union all
    select x.id, (pg_catalog.row_number() over (order by x.s desc, x.id))::integer, x.s
    from (select u.id,
                 u.s * case when lift is not null and c.search_vector @@ lift then 2 else 1 end
                     * case when sink is not null and c.search_vector @@ sink then 0.5 else 1 end as s
          from unnest(ids, scores) as u(id, s)
          join sift.chunks c on c.chunk_id = u.id
          where lift is not null or sink is not null) x
    order by 2
$$;
comment on function sift._lift_and_sink(bigint[], double precision[], tsquery, tsquery) is
    'Internal: the lexical leg''s top n with quoted phrases lifting (x2) and -words sinking (x0.5) '
    'the chunks that hold them, ranked again.';


create or replace function sift._pending_bucket(lexeme text)
returns smallint
language sql stable parallel safe security invoker
as $$
    -- Not pinned, so it inlines into the statements that bucket every lexeme
    -- a write changed (every name in it is qualified). From the lexeme's UTF-8
    -- bytes by SHA-256, so a row lands in the same bucket on any server,
    -- version, byte order or encoding it is restored to (hashtext differs
    -- between byte orders); ~0.25 us a lexeme, 0.5 ms a document of 20 chunks.
    -- (Stable, as convert_to is.)
    select (pg_catalog.get_byte(pg_catalog.sha256(pg_catalog.convert_to(lexeme, 'UTF8')), 0) & 63)::smallint
$$;
comment on function sift._pending_bucket(text) is
    'Internal: which of the 64 rows a write statement leaves per collection holds this lexeme''s '
    'pending count (sift.term_df_pending.bucket).';


create or replace function sift._term_stats(
    collection_id bigint, terms text[], n_chunks double precision, avgdl double precision,
    k1 double precision, b double precision,
    out lexemes text[], out idfs double precision[], out listed boolean[], out floors double precision[],
    out drifts double precision[], out df_sum double precision)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
-- One generic plan a session (PostgreSQL 18 caches SQL functions' plans; before
-- it, the body is planned every call, as the statement was): in the lexical
-- leg's body, PL/pgSQL kept choosing a custom plan for it and planned it again
-- on every search (~0.5 ms).
set plan_cache_mode = force_generic_plan
as $$
    -- Per term that occurs in the collection, in lexeme order: exact df from
    -- the ledger, Lucene's idf, and whether it has an impact list valid for
    -- these k1 and b (drift: how far avgdl has grown since).
    -- The counts still pending: each term looked up in its bucket's rows alone
    -- (~30 lexemes each, inline; a write statement leaves one per bucket),
    -- never in every lexeme written since the last refresh. The buckets are
    -- a list for the scan (an index condition, under row-level security too:
    -- a join condition through sha256, not leakproof, would be a filter).
    with q as materialized (
        select t.lexeme, sift._pending_bucket(t.lexeme) as bucket
        from (select distinct u.lexeme from pg_catalog.unnest(_term_stats.terms) as u(lexeme)) t
    ), pending as materialized (
        select q.lexeme, pg_catalog.sum(p.counts[pg_catalog.array_position(p.lexemes, q.lexeme)]) as n
        from sift.term_df_pending p
        join q on q.bucket = p.bucket
        where p.collection_id = _term_stats.collection_id
          and p.bucket = any (array(select q.bucket from q))
        group by q.lexeme
    )
    select pg_catalog.array_agg(q.lexeme order by q.lexeme),
           pg_catalog.array_agg(pg_catalog.ln(1 + (_term_stats.n_chunks - d.df + 0.5) / (d.df + 0.5))
                                order by q.lexeme),
           pg_catalog.array_agg(l.lexeme is not null and l.k1_ref = _term_stats.k1 and l.b_ref = _term_stats.b
                                order by q.lexeme),
           pg_catalog.array_agg(coalesce(l.floor_impact, 0) order by q.lexeme),
           pg_catalog.array_agg(greatest(1, _term_stats.avgdl / coalesce(l.avgdl_ref, _term_stats.avgdl))
                                order by q.lexeme),
           pg_catalog.sum(d.df)::double precision
    from pg_catalog.unnest(_term_stats.terms) as q(lexeme)
    -- (offset 0: one lookup a term; pulled up, the df was looked up again for
    -- every aggregate that reads it.)
    cross join lateral (
        select coalesce((select t.df from sift.term_df t
                         where t.collection_id = _term_stats.collection_id and t.lexeme = q.lexeme), 0)
             + coalesce((select pe.n from pending pe where pe.lexeme = q.lexeme), 0) as df
        offset 0) d
    left join sift.term_lists l on l.collection_id = _term_stats.collection_id and l.lexeme = q.lexeme
    where d.df > 0
$$;
comment on function sift._term_stats(bigint, text[], double precision, double precision, double precision,
    double precision) is
    'Internal: the query terms that occur in a collection, in lexeme order, with their BM25 idf (exact df, '
    'pending counts included), whether each has an impact list valid for k1 and b, its floor and avgdl '
    'drift, and the sum of their df.';


create or replace function sift._lexical_ids(
    col     sift.collections,
    knobs   sift.knob_set,
    match   tsquery,
    terms   text[],
    filter  jsonb,
    n       integer,
    lift    tsquery,
    sink    tsquery,
    out ids   bigint[],
    out raws  double precision[],
    out exact boolean)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    fpath      jsonpath := sift.filter_path(filter);
    filtered   boolean := fpath is not null;
    scorer     text := knobs.lexical_scorer;
    k1         double precision := knobs.bm25_k1;
    b          double precision := knobs.bm25_b;
    -- Postings read from lists per query at most, and the most matching
    -- chunks (sum of the terms' df) scored exhaustively when the lists cannot
    -- prove the top n within that budget.
    budget      bigint := knobs.lexical_budget;
    exact_limit bigint := knobs.lexical_exact_limit;
    -- Whole lists are summed while the terms' chunk counts add up to at most
    -- this (an entry summed ~2 us, a stored vector scored ~10 us in the row): the
    -- path is exact and, past lexical_exact_limit too, cheaper than reading
    -- the lists by rounds.
    list_limit  bigint := knobs.lexical_list_limit;
    max_scored  integer := greatest(4 * n, 100);
    n_chunks   double precision;
    avgdl      double precision;
    t_lexeme   text[];
    t_idf      double precision[];
    t_listed   boolean[];
    t_common   text[];    -- the terms read from lists (t_listed)
    t_floor    double precision[];
    t_drift    double precision[];
    df_sum     double precision;
    rare       tsquery;
    rare_ids   bigint[] := '{}';
    scored     bigint[];
    n_scored   integer := 0;
    depth      integer := ceil(greatest(4 * n, 64) / 100.0)::integer;  -- blocks read per list
    max_depth  integer;
    batch      integer := greatest(2 * n, 50);
    deeper     boolean;
    bound      double precision;   -- what a chunk read from no list could score at most
    cand_ids   bigint[];
    cand_ub    double precision[];
    floor_known double precision;
    pos        integer;
    best       bigint[];
    scores     double precision[];
    proven     boolean := true;   -- false: the budget ran out before the top n was proven
    by_lists   boolean := false;  -- true: answered from whole lists (the loop does not run)
    cap        integer;           -- whole lists: the best sums sorted (null: all)
    passed     bigint;
    sorted     bigint;
    l_best     bigint[];
    l_scores   double precision[];
    -- BM25's constants, once (sift._bm25_part; so they are not derived again
    -- for every entry).
    kp1        double precision := k1 + 1;
    kb0        double precision := k1 * (1 - b);
    kbl        double precision;
    -- Whether a chunk need only hold a term to match (no required phrase or
    -- exclusion). Then match is not tested again in each stored vector (read
    -- again for each test, from its TOAST table where it is out of line, ~5 us
    -- a chunk): a chunk holding none of the terms scores nothing anyway.
    plain      boolean := match = sift._tsquery_or(terms);
    -- A time limit is armed for this search (sift._check_deadline).
    armed      boolean := pg_catalog.current_setting('pgsift.deadline', true) <> '';
    rematch    tsquery := case when plain then null else match end;
begin
    exact := true;
    select sum(s.chunks), sum(s.tokens)::double precision / nullif(sum(s.chunks), 0)
    into n_chunks, avgdl
    from sift.collection_lexical_stats s
    where s.collection_id = col.collection_id;
    if coalesce(n_chunks, 0) = 0 then
        return;
    end if;

    if scorer = 'ts_rank_cd' then
        select array_agg(s.chunk_id order by s.score desc, s.chunk_id),
               array_agg(s.score order by s.score desc, s.chunk_id)
        into best, scores
        from (select c.chunk_id, pg_catalog.ts_rank_cd(c.search_vector, match)::double precision as score
              from sift.chunks c
              where c.chunk_id = any (sift._matching_chunks(col.collection_id, match, n_chunks))
                and (not filtered or exists (select 1 from sift.documents d
                                             where d.document_id = c.document_id
                                               and pg_catalog.jsonb_path_match_tz(d.metadata, fpath, '{}', true)))
              order by 2 desc, c.chunk_id
              limit n) s;
        select l.ids, l.scores into ids, raws from sift._lift_and_sink_arrays(best, scores, lift, sink) l;
        return;
    end if;

    -- Per term: exact df, idf, and whether it has a valid impact list.
    select s.lexemes, s.idfs, s.listed, s.floors, s.drifts, s.df_sum
    into t_lexeme, t_idf, t_listed, t_floor, t_drift, df_sum
    from sift._term_stats(col.collection_id, terms, n_chunks, avgdl, k1, b) s;
    if t_lexeme is null then
        return;   -- no query term occurs in this collection
    end if;
    kbl := k1 * b / avgdl;   -- a term occurs, so avgdl > 0

    -- Rare terms (no list): every chunk holding one is scored exactly.
    rare := sift._tsquery_or(array(select u.l from unnest(t_lexeme, t_listed) u(l, listed)
                                   where not u.listed));
    if rare is not null then
        -- (Not run without rare terms: planned for an empty set, the
        -- statement was planned again on every search.)
        rare_ids := sift._matching_chunks(col.collection_id, rare, n_chunks);
        select array_agg(x.chunk_id order by x.score desc, x.chunk_id),
               array_agg(x.score order by x.score desc, x.chunk_id)
        into best, scores
        from sift._bm25_scores(rare_ids, t_lexeme, t_idf, avgdl, k1, b, rematch, fpath, n) x;
    end if;
    scored := rare_ids;
    -- Blocks per list the budget allows (reads restart from the top, so the
    -- rounds before the last add at most a third of it).
    t_common := array(select u.l from unnest(t_lexeme, t_listed) u(l, listed) where u.listed);
    max_depth := greatest(1, budget / (100 * greatest(1, cardinality(t_common))));
    depth := least(depth, max_depth);

    -- Whole lists: where every common term's list holds all its chunks (floor
    -- 0: the term is in at most list_size chunks), the matching chunks number
    -- at most lexical_list_limit and a chunk need only hold a term to match
    -- (no required phrase or exclusion), the lists are the postings: a chunk
    -- holding no rare term scores the sum of its entries, exactly what its
    -- stored vector gives (tf and dl as written; each term's part rounded by
    -- sift._bm25_term, so the float sums are the same too). No stored
    -- vector is read; only whether the best chunks still exist (a deleted
    -- chunk stays in its lists until they are rebuilt; a re-analysed one takes
    -- its terms' lists with it) and pass the filter, best first, until n do.
    if true = any (t_listed) and df_sum <= list_limit
       and not exists (select 1 from unnest(t_listed, t_floor) u(listed, fl) where u.listed and u.fl > 0)
       and plain then
        by_lists := true;
        -- The best sums are sorted only as far as they are checked: the best
        -- 4n (a bounded sort, not of every matching chunk) while no filter can
        -- turn many of them away; all of them when fewer than n of those pass
        -- (chunks deleted since the lists were built) or a filter is given.
        cap := case when fpath is null then 4 * n end;
        loop
            with terms as (
                select u.l, u.idf
                from unnest(t_lexeme, t_listed, t_idf) u(l, listed, idf)
                where u.listed
            ), s as (
                -- Each term's entries read beside its idf (no join of every
                -- entry back to its term), summed in any order (exact:
                -- sift._bm25_term); those holding a rare term are scored already.
                select x.chunk_id, x.score
                from (select e.chunk_id, sum(sift._bm25_term(t.idf, e.tf, e.dl, kp1, kb0, kbl)) as score
                      from terms t
                      cross join lateral sift._list_entries(col.collection_id, array[t.l], 2147483647) e
                      group by e.chunk_id) x
                left join unnest(scored) as done(chunk_id) on done.chunk_id = x.chunk_id
                where done.chunk_id is null
            ), o as materialized (
                select s.chunk_id, s.score from s order by s.score desc, s.chunk_id limit cap
            ), l as materialized (
                -- The best sums first, each checked only until n pass: the check
                -- is a subquery per row (so it is never hashed against every
                -- chunk), and the materialized, ordered rows reach the limit in
                -- that order.
                select o.chunk_id, o.score
                from o
                where (select true from sift.chunks c
                       where c.chunk_id = o.chunk_id
                         and (fpath is null
                              or exists (select 1 from sift.documents d
                                         where d.document_id = c.document_id
                                           and pg_catalog.jsonb_path_match_tz(d.metadata, fpath, '{}', true))))
                limit n
            )
            select array_agg(x.chunk_id order by x.score desc, x.chunk_id),
                   array_agg(x.score order by x.score desc, x.chunk_id),
                   (select count(*) from l), case when cap is not null then (select count(*) from o) end
            into l_best, l_scores, passed, sorted
            from (select * from unnest(best, scores) as y(chunk_id, score)
                  union all
                  select * from l
                  order by 2 desc, 1
                  limit n) x;
            -- Short only because chunks were deleted (or filtered) within the cap:
            -- then all of them, sorted.
            exit when passed >= n or cap is null or sorted < cap;
            cap := null;
        end loop;
        best := l_best;
        scores := l_scores;
    end if;

    -- Common terms: threshold algorithm over their impact lists. Read each list
    -- best-first to a depth (whole blocks, plus its delta); a chunk holding no
    -- rare term can score at most its known impacts plus, for each list it
    -- was not read from, the best impact in that list's first unread block
    -- (its floor once the list is read to the end). Score exactly only the
    -- chunks whose bound can still beat the n-th best; read deeper until
    -- nothing unread can, or the budget is spent.
    -- A first round of a few blocks a list settles the top n only where the
    -- lists are steep; otherwise the round after it reads the budget's depth
    -- from the top again. So start at the budget's depth when that is at
    -- most three times the first round's (on SciFact the first round settled
    -- under a third of such queries, and so cost more than it saved), or
    -- when the lists are flat: what a chunk in none of their first blocks
    -- could still score is at least 0.8 of the best any chunk could (terms
    -- in 20-50% of 100,000 chunks: 0.86-0.91, and the first round never
    -- settled it; where it did on SciFact, under 0.8).
    if not by_lists and depth < max_depth and true = any (t_listed) then
        if max_depth <= 3 * depth
           or (select sum(u.idf * u.drift * coalesce(nb.max_impact, u.floor))
                      >= 0.8 * sum(u.idf * u.drift * coalesce(b0.max_impact, u.floor))
               from unnest(t_lexeme, t_listed, t_idf, t_floor, t_drift) u(l, listed, idf, floor, drift)
               left join sift.term_blocks b0
                      on b0.collection_id = col.collection_id and b0.lexeme = u.l and b0.block_no = 0
               left join sift.term_blocks nb
                      on nb.collection_id = col.collection_id and nb.lexeme = u.l and nb.block_no = depth
               where u.listed) then
            depth := max_depth;
        end if;
    end if;

    while not by_lists and true = any (t_listed) loop
        -- The tenant's call_time_limit, when one is armed (sift._check_deadline).
        if armed then
            perform sift._check_deadline('lexical');
        end if;
        with terms as (
            select u.l, u.idf, u.floor, u.drift
            from unnest(t_lexeme, t_listed, t_idf, t_floor, t_drift) u(l, listed, idf, floor, drift)
            where u.listed
        ), term_bound as (
            -- Unread chunks of a list score at most its next block's best
            -- impact (the floor past the end), times the avgdl drift since
            -- the list was built.
            select terms.l, terms.idf, terms.idf * terms.drift * coalesce(nb.max_impact, terms.floor) as b_t,
                   nb.max_impact is not null as more
            from terms
            left join sift.term_blocks nb
                   on nb.collection_id = col.collection_id and nb.lexeme = terms.l and nb.block_no = depth
        ), seen as materialized (
            -- Each list read to depth beside its term's idf and bound.
            select e.chunk_id,
                   sum(sift._bm25_term(tb.idf, e.tf, e.dl, kp1, kb0, kbl)) as known,
                   sum(tb.b_t) as read_bound
            from term_bound tb
            cross join lateral sift._list_entries(col.collection_id, array[tb.l], depth) e
            group by e.chunk_id
        ), fresh as materialized (
            select s.chunk_id, s.known, s.known - s.read_bound as gain
            from seen s
            left join unnest(scored) as done(chunk_id) on done.chunk_id = s.chunk_id
            where done.chunk_id is null
        ), total as (
            select sum(tb.b_t) as bound, bool_or(tb.more) as more from term_bound tb
        )
        select total.bound, total.more, c.ids, c.ubs,
               (select k.v from (select f.known as v from fresh f
                                 union all select unnest(scores)) k
                order by k.v desc offset n - 1 limit 1)
        from total
        cross join lateral (
            -- one sort feeds both arrays (same order), of the candidates the
            -- scoring below can reach (batches up to max_scored) and one more,
            -- whose bound is what every candidate left out could score.
            select array_agg(f.chunk_id order by f.gain desc, f.chunk_id) as ids,
                   array_agg(total.bound + f.gain order by f.gain desc, f.chunk_id) as ubs
            from (select f.chunk_id, f.gain from fresh f
                  order by f.gain desc, f.chunk_id
                  limit ceil(greatest(max_scored - n_scored, 0)::numeric / batch)::integer * batch + 1) f) c
        into bound, deeper, cand_ids, cand_ub, floor_known;
        deeper := deeper and depth < max_depth;

        -- While the unread bound is above the n-th best known sum, reading
        -- deeper is cheaper than scoring candidates that cannot all stay: in
        -- one step to the budget's depth (a list whose first blocks did not
        -- settle it is flat, and every round re-reads from the top). Known
        -- sums only steer here: a chunk deleted since its list was built still
        -- has one; answers rest on exact scores (or, on the whole-lists path
        -- above, on sums of whole lists for chunks checked to exist).
        if deeper and bound > coalesce(floor_known, 0) then
            depth := max_depth;
            continue;
        end if;

        -- Exact scores for the most promising candidates, a batch at a time,
        -- while a candidate's bound can still beat the current n-th best.
        pos := 1;
        while pos <= coalesce(cardinality(cand_ids), 0) and n_scored < max_scored
              and (coalesce(cardinality(best), 0) < n or cand_ub[pos] > scores[n]) loop
            if armed then
                perform sift._check_deadline('lexical');
            end if;
            select array_agg(x.chunk_id order by x.score desc, x.chunk_id),
                   array_agg(x.score order by x.score desc, x.chunk_id)
            into best, scores
            from (select z.chunk_id, z.score
                  from (select * from unnest(best, scores) as y(chunk_id, score)
                        union all
                        select * from sift._bm25_scores(cand_ids[pos:pos + batch - 1], t_lexeme,
                                                        t_idf, avgdl, k1, b, rematch, fpath, n)) z
                  where z.chunk_id is not null
                  order by z.score desc, z.chunk_id
                  limit n) x;
            scored := scored || cand_ids[pos:pos + batch - 1];
            n_scored := n_scored + batch;
            pos := pos + batch;
        end loop;

        -- Proven: n found, nothing unread and no unscored candidate can beat the n-th.
        exit when coalesce(cardinality(best), 0) >= n and scores[n] > bound
                  and (pos > coalesce(cardinality(cand_ids), 0) or cand_ub[pos] <= scores[n]);
        if deeper then
            depth := max_depth;
            continue;
        end if;
        if df_sum <= exact_limit then
            -- Not provable from the lists, and few enough matching chunks:
            -- score them all (exact).
            select array_agg(x.chunk_id order by x.score desc, x.chunk_id),
                   array_agg(x.score order by x.score desc, x.chunk_id)
            into best, scores
            from sift._bm25_scores(sift._matching_chunks(col.collection_id, match, n_chunks),
                                   t_lexeme, t_idf, avgdl, k1, b, rematch, fpath, n) x;
        else
            -- Otherwise the best of what was read and scored: bounded cost,
            -- exact scores for every chunk returned, and said to be unproven.
            proven := false;
        end if;
        exit;
    end loop;

    -- Unproven: nothing it scored passed (a filter, a required phrase) when
    -- best is null, yet more may match.
    exact := proven;
    select l.ids, l.scores into ids, raws from sift._lift_and_sink_arrays(best, scores, lift, sink) l;
end;
$$;
comment on function sift._lexical_ids(sift.collections, sift.knob_set, tsquery, text[], jsonb, integer,
    tsquery, tsquery) is
    'Internal: the top n chunks of a collection for the query (ids, best first, and raw scores), by Okapi BM25 (idf = '
    'ln(1 + (N - df + 0.5) / (df + 0.5)), exact statistics) or by ts_rank_cd. Rare terms are '
    'scored exhaustively; common terms are read best-first from their impact lists until the '
    'top n is provably exact (threshold algorithm). Cost is bounded: about the lexical_budget '
    'knob''s postings (3,000) are read and at most max(4n, 100) chunks scored. Where every '
    'common term''s list holds all its chunks, holding a term is enough to match and the terms'' '
    'chunk counts sum to at most the lexical_list_limit knob (12,000), the lists are summed '
    'instead (exact, no stored vector read). Otherwise, if the lists cannot '
    'prove the top n, every matching chunk is scored when the terms'' chunk counts sum to at most '
    'the lexical_exact_limit knob (3,000), else the best chunks found are returned, each with '
    'its exact score and exact false (also when none passed). In '
    'quoted_text boost mode a chunk of that top n holding a quoted phrase '
    'scores x2 (lift) and one holding a -word x0.5 (sink), and the n are ranked again.';


create or replace function sift._lift_and_sink_arrays(
    best bigint[], best_scores double precision[], lift tsquery, sink tsquery,
    out ids bigint[], out scores double precision[])
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Without quoted text the leg's order stands (no statement on the chunks).
    -- One row whatever the case (an aggregate over no rows is a row of nulls,
    -- so the two cases are one case expression, not a union of two).
    select case when lift is null and sink is null then best else r.ids end,
           case when lift is null and sink is null then best_scores else r.scores end
    from (select pg_catalog.array_agg(l.chunk_id order by l.rank) as ids,
                 pg_catalog.array_agg(l.score order by l.rank) as scores
          from sift._lift_and_sink(best, best_scores, lift, sink) l
          where lift is not null or sink is not null) r
$$;
comment on function sift._lift_and_sink_arrays(bigint[], double precision[], tsquery, tsquery) is
    'Internal: sift._lift_and_sink as two arrays, best first (the same arrays when nothing is quoted).';
