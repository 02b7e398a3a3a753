-- Lexical leg: the top n chunks for the parsed query (sql/17_lexical_query.sql)
-- by Okapi BM25 over the stored tsvector (sql/18_bm25.sql has its parts), or
-- by ts_rank_cd (the lexical_scorer knob), and quoted text's lift and sink in
-- boost mode. In: the collection, its resolved knobs, the match, terms, lift
-- and sink, the metadata filter and n. Out: the ids best first, their scores
-- and whether the top n is proven exact (sift._dense_ids says what every leg
-- gives).

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
-- A leg (sift._dense_ids has the contract): ids best first with their raw
-- scores (larger is better), ties to the smaller chunk id, the metadata filter
-- applied inside, security invoker; exact says whether the top n is proven.
-- Not split: the threshold rounds carry their state from one round to the
-- next in PL/pgSQL variables (the lists' depth, the chunks scored, the best n
-- and their scores, the candidates and their bounds), and the statistics,
-- rare-term and whole-lists steps before them set that state up; a function
-- per step would take and give back a dozen arrays, one call more each on
-- every lexical search, the plain path's included.
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
    t_floor    double precision[];
    t_drift    double precision[];
    t_entries  integer[];
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
    by_lists   boolean;           -- true: answered from whole lists (the loop does not run)
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
    select s.lexemes, s.idfs, s.listed, s.floors, s.drifts, s.df_sum, s.entries
    into t_lexeme, t_idf, t_listed, t_floor, t_drift, df_sum, t_entries
    from sift._term_stats(col.collection_id, terms, n_chunks, avgdl, k1, b) s;
    if t_lexeme is null then
        return;   -- no query term occurs in this collection
    end if;
    kbl := k1 * b / avgdl;   -- a term occurs, so avgdl > 0

    -- Whole lists (below) answer when every listed term's list holds all its
    -- chunks. Otherwise the rounds do, and there a term whose whole list is
    -- under a block counts as rare, as it did when lists began at 100 chunks:
    -- its few chunks are scored exactly up front and set the n-th best the
    -- rounds must beat (read from its list instead, they would compete with
    -- the long lists' candidates for max_scored's exact scores and could
    -- leave a top n unproven).
    by_lists := true = any (t_listed) and df_sum <= list_limit and plain
                and not exists (select 1 from unnest(t_listed, t_floor) u(listed, fl) where u.listed and u.fl > 0);
    if not by_lists and true = any (t_listed) then
        t_listed := array(select u.listed and not (u.fl = 0 and u.e < 100)
                          from unnest(t_listed, t_floor, t_entries) u(listed, fl, e));
    end if;

    -- Rare terms (no list, or a short one ahead of rounds): every chunk
    -- holding one is scored exactly.
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
    if by_lists then
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

    -- Blocks per list the budget allows (reads restart from the top, so the
    -- rounds before the last add at most a third of it), shared evenly: sharing
    -- it by length (a short list read whole, the long ones deeper) made SciFact's
    -- top 100 exact for 4 more queries in 300 but question-like searches 1.15x
    -- slower at 30,000 chunks (bench/README).
    if not by_lists and true = any (t_listed) then
        max_depth := greatest(1, budget / (100 * cardinality(array(select 1 from unnest(t_listed) u(listed)
                                                                   where u.listed))));
        depth := least(depth, max_depth);
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
        ), fresh as materialized (
            -- Each list read to depth beside its term's idf and bound, less
            -- the chunks scored already.
            select e.chunk_id,
                   sum(sift._bm25_term(tb.idf, e.tf, e.dl, kp1, kb0, kbl)) as known,
                   sum(sift._bm25_term(tb.idf, e.tf, e.dl, kp1, kb0, kbl)) - sum(tb.b_t) as gain
            from term_bound tb
            cross join lateral sift._list_entries(col.collection_id, array[tb.l], depth) e
            left join unnest(scored) as done(chunk_id) on done.chunk_id = e.chunk_id
            where done.chunk_id is null
            group by e.chunk_id
        ), total as (
            select sum(tb.b_t) as bound, bool_or(tb.more) as more from term_bound tb
        )
        -- The n-th best known sum steers a round that can still read deeper
        -- (below); at the budget's depth it is not computed (the subquery, an
        -- initplan, runs only when the case reaches it: ~0.5 ms over 3,000
        -- entries at 30,000 chunks).
        select total.bound, total.more, c.ids, c.ubs,
               case when depth < max_depth
                    then (select k.v from (select f.known as v from fresh f
                                           union all select unnest(scores)) k
                          order by k.v desc offset n - 1 limit 1) end
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
    if lift is null and sink is null then
        -- Nothing quoted: the order stands (no call, no statement).
        ids := best;
        raws := scores;
    else
        select l.ids, l.scores into ids, raws from sift._lift_and_sink_arrays(best, scores, lift, sink) l;
    end if;
end;
$$;
comment on function sift._lexical_ids(sift.collections, sift.knob_set, tsquery, text[], jsonb, integer,
    tsquery, tsquery) is
    'Internal: the lexical leg, the top n chunks of a collection for the query (ids, best first, ties to '
    'the smaller id, and raw scores; metadata filter inside), by Okapi BM25 (idf = '
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
