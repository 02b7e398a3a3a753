-- BM25's parts for the lexical leg (sql/20_lexical.sql): the formula (each
-- term's part rounded so sums are exact in any order), the exact scores of a
-- candidate set from the stored vectors, the impact lists' entries, the
-- chunks that match a query (through the text index, as its owner) and each
-- query term's statistics (df with pending counts, idf, its list). In: a
-- collection, its terms and chunk ids. Out: scores, entries, ids and
-- statistics, for sift._lexical_ids to combine.

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
    out drifts double precision[], out df_sum double precision, out entries integer[])
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
    -- these k1 and b (drift: how far avgdl has grown since) and its length
    -- (a list under a block is read as a rare term where rounds answer).
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
           pg_catalog.sum(d.df)::double precision,
           pg_catalog.array_agg(coalesce(l.entries, 0) order by q.lexeme)
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
    'pending counts included), whether each has an impact list valid for k1 and b, its floor, avgdl '
    'drift and entries (its blocks'' length, deltas apart), and the sum of their df.';
