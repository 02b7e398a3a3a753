-- Hits: the kept candidates as sift.hit rows. In: the pool, the order and
-- scores it ranks with (fused, reranked or MaxSim) and the resolved knobs.
-- Out: sift._finalize's decisions with each hit's text, section body
-- (parent_return), window of neighbours and snippet. sift.finalize runs it
-- on any pool given as chunk ids.


create or replace function sift._join_text(parts text[])
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Consecutive chunks as one text: as they are when one ends or the next
    -- starts with whitespace (the hierarchical strategy's chunks are slices
    -- of the source, so this gives the source back), else a blank line.
    select pg_catalog.string_agg(
               case when u.i > 1 and parts[u.i - 1] !~ '\s$' and u.t !~ '^\s' then E'\n\n' else '' end || u.t,
               '' order by u.i)
    from pg_catalog.unnest(parts) with ordinality as u(t, i)
$$;
comment on function sift._join_text(text[]) is
    'Internal: consecutive chunk texts as one text (a blank line between two only where neither '
    'side has whitespace).';


create or replace function sift._snippet(
    config regconfig, txt text, query tsquery, mode text, words integer)
returns text
language sql stable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The best passage of a hit's text for the query, its matched words
    -- marked (ts_headline with the chunk's own configuration); a text the
    -- query does not match (a dense-only hit, no lexical query) gives its
    -- first words. html: the text escaped, the marks <mark> elements.
    with h as (
        select pg_catalog.ts_headline(
                   config, pg_catalog.translate(txt, '⟦⟧', '[]'), query,
                   pg_catalog.format('StartSel=⟦, StopSel=⟧, MaxWords=%s, MinWords=%s, ShortWord=2',
                                     words, greatest(words / 2, 3))) as marked
        where query is not null
    ), s as (
        select coalesce((select h.marked from h where pg_catalog.strpos(h.marked, '⟦') > 0),
                        (pg_catalog.regexp_match(
                             pg_catalog.translate(txt, '⟦⟧', '[]'),
                             '^\s*((?:\S+\s+){0,' || (words - 1) || '}\S*)'))[1]) as t
    )
    select case mode
        when 'html' then pg_catalog.replace(pg_catalog.replace(
                 pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                     pg_catalog.replace(s.t, '&', '&amp;'), '<', '&lt;'), '>', '&gt;'), '"', '&quot;'),
                     '''', '&#39;'),
                 '⟦', '<mark>'), '⟧', '</mark>')
        when 'text' then pg_catalog.replace(pg_catalog.replace(s.t, '⟦', '**'), '⟧', '**')
    end
    from s
$$;
comment on function sift._snippet(regconfig, text, tsquery, text, integer) is
    'Internal: a hit''s snippet: ts_headline of its text for the query in its configuration, or its '
    'first words when the query does not match it; text marks matches with **, html escapes the '
    'text and marks them with <mark>.';


create or replace function sift._section_body(section_id bigint)
returns table (ids bigint[], lo integer, hi integer, txt text, tokens integer)
language sql stable parallel safe security invoker
as $$
    -- Not pinned, so it inlines per hit: every function in it is qualified
    -- and every operator has an exact match in pg_catalog.
    -- A section's own chunks in order, their place, text and token count.
    select pg_catalog.array_agg(k.chunk_id order by k.ordinal), pg_catalog.min(k.ordinal),
           pg_catalog.max(k.ordinal), sift._join_text(pg_catalog.array_agg(k.content order by k.ordinal)),
           case when pg_catalog.count(k.token_count) = pg_catalog.count(*)
                then pg_catalog.sum(k.token_count)::integer end
    from sift.chunks k
    where k.section_id = _section_body.section_id
$$;
comment on function sift._section_body(bigint) is
    'Internal: a section''s own chunks (ids in order, first and last ordinal), their text joined '
    'and their token count (null when one is unknown).';


create or replace function sift._windows(
    hit_ids bigint[], hit_docs bigint[], hit_los integer[], hit_his integer[], hit_ns integer[])
returns table (chunk_id bigint, window_ids bigint[], window_text text, window_of bigint)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    -- The hits in final order (the first is the best), each with its document,
    -- the ordinals its text spans (lo..hi) and the neighbours it asks for (n).
    -- Each hit's window is read by (document, ordinal) around it, and windows
    -- that overlap become one, held by the best-ranked hit among them
    -- (window_of points the others at it).
    if coalesce(cardinality(hit_ids), 0) = 0 then
        return;   -- no hit asks for neighbours
    end if;
    return query
    with h as (
        select u.id as chunk_id, u.doc as document_id, u.lo, u.hi, u.n, u.o as final_rank
        from unnest(hit_ids, hit_docs, hit_los, hit_his, hit_ns) with ordinality as u(id, doc, lo, hi, n, o)
        where u.n > 0
    ), w as (
        -- The window of each hit: n chunks before its first and after its last,
        -- by ordinal (gaps left by deleted chunks are skipped, not counted).
        select h.chunk_id, h.document_id, h.final_rank,
               coalesce((select pg_catalog.min(x.ordinal)
                         from (select c.ordinal from sift.chunks c
                               where c.document_id = h.document_id and c.ordinal < h.lo
                               order by c.ordinal desc limit h.n) x), h.lo) as w_lo,
               coalesce((select pg_catalog.max(x.ordinal)
                         from (select c.ordinal from sift.chunks c
                               where c.document_id = h.document_id and c.ordinal > h.hi
                               order by c.ordinal limit h.n) x), h.hi) as w_hi
        from h
    ), w2 as (
        select w.*, max(w.w_hi) over (partition by w.document_id order by w.w_lo, w.chunk_id
                                      rows between unbounded preceding and 1 preceding) as prev_hi
        from w
    ), w3 as (
        -- Overlapping windows of one document form a group.
        select w2.*, sum(case when w2.prev_hi is null or w2.w_lo > w2.prev_hi then 1 else 0 end)
                         over (partition by w2.document_id order by w2.w_lo, w2.chunk_id) as g
        from w2
    ), grp as (
        select w3.document_id, w3.g, min(w3.w_lo) as lo, max(w3.w_hi) as hi,
               (pg_catalog.array_agg(w3.chunk_id order by w3.final_rank))[1] as leader
        from w3 group by w3.document_id, w3.g
    ), span as materialized (
        -- Materialized: the hits are underestimated, and in a nested loop the
        -- span was read again for each (9.4 s at match_count 1,000 with
        -- neighbours on SciFact; 0.15 s so).
        select grp.leader, s.w_ids, s.w_txt
        from grp
        cross join lateral (
            select pg_catalog.array_agg(c.chunk_id order by c.ordinal) as w_ids,
                   sift._join_text(pg_catalog.array_agg(c.content order by c.ordinal)) as w_txt
            from sift.chunks c
            where c.document_id = grp.document_id and c.ordinal between grp.lo and grp.hi) s
    )
    select w3.chunk_id, span.w_ids, span.w_txt, case when grp.leader <> w3.chunk_id then grp.leader end
    from w3
    join grp on grp.document_id = w3.document_id and grp.g = w3.g
    left join span on span.leader = w3.chunk_id;
end;
$$;
comment on function sift._windows(bigint[], bigint[], integer[], integer[], integer[]) is
    'Internal: the neighbours windows of a search''s hits (given in final order with their document, '
    'the ordinals their text spans and the neighbours each asks for): the chunks around each, '
    'overlapping windows joined and held by the best-ranked hit of them.';


create or replace function sift._hits(
    cols sift.collections[], knobs sift.knob_set[], pool sift.candidate[], ids bigint[],
    scores double precision[], match_count integer, scored_by text, reranker text,
    rerank_refused text, query_text text default null)
returns setof sift.hit
language sql stable security invoker
set search_path = pg_catalog, pg_temp
-- Planned once a session (PostgreSQL 18 caches SQL functions' plans; a custom plan
-- per call re-planned the whole body). Leaf functions only: the setting holds for
-- whatever a function calls.
set plan_cache_mode = force_generic_plan
as $$
    -- The kept hits with their text and document: finalize's rows joined by id
    -- (each a lookup by key; never a scan of the documents table). A merged
    -- hit's text is its section's; with neighbours, each hit's window
    -- (sift._windows).
    with c as materialized (
        -- Per collection, once: its window and snippet knobs, and for the
        -- snippets of a pool given as ids, the question parsed here.
        select (cols[i]).name::text as cname, (knobs[i]).neighbours as n, (knobs[i]).snippets::text as snip,
               (knobs[i]).snippet_words::integer as snip_words, (cols[i]).search_language,
               case when (knobs[i]).snippets is not null and pool is null and query_text is not null
                    then (select x.lexical_query from sift._legs(cols[i], knobs[i], query_text, false) x) end as q,
               -- The space a dense_space knob named, and how many chunks it lacks
               -- (counted only then: the active space lacks none).
               (sp.s).name::text as space_name,
               case when (knobs[i]).dense_space is not null then sift._space_missing(sp.s) end as space_missing
        from pg_catalog.generate_subscripts(cols, 1) as i
        cross join lateral (select sift._space(cols[i], (knobs[i]).dense_space) as s) sp
    ), f as materialized (
        select f.*, k.ordinal, k.content, k.context, k.token_count, k.section_id, c.n, c.snip, c.snip_words,
               c.search_language, c.q, c.space_name, c.space_missing
        from sift._finalize(cols, knobs, ids, scores, match_count, scored_by, false) f
        cross join lateral (select k.ordinal, k.content, k.context, k.token_count, k.section_id
                            from sift.chunks k where k.chunk_id = f.chunk_id) k
        join c on c.cname = f.collection_name
    ), pl as materialized (
        -- The pool unnested once and joined by id (a lateral unnest per hit
        -- read the whole pool again for each).
        select * from pg_catalog.unnest(pool)
    ), b as (
        -- What each hit's text spans: its chunk, or its whole section when
        -- merged (read only for those).
        select f.chunk_id, array[f.chunk_id] as ids, f.ordinal as lo, f.ordinal as hi, f.content as txt,
               f.token_count as tokens
        from f
        where not f.merged
        union all
        select f.chunk_id, s.ids, s.lo, s.hi, s.txt, s.tokens
        from f
        cross join lateral sift._section_body(f.section_id) s
        where f.merged
    ), win as materialized (
        -- The windows, computed apart (sift._windows) and only when a hit
        -- asks for one: their plan costs every search its start-up otherwise.
        select x.*
        from (select pg_catalog.array_agg(f.chunk_id order by f.final_rank) as ids,
                     pg_catalog.array_agg(f.document_id order by f.final_rank) as docs,
                     pg_catalog.array_agg(b.lo order by f.final_rank) as los,
                     pg_catalog.array_agg(b.hi order by f.final_rank) as his,
                     pg_catalog.array_agg(f.n order by f.final_rank) as ns
              from f join b on b.chunk_id = f.chunk_id
              where f.n > 0
              having pg_catalog.count(*) > 0) a
        cross join lateral sift._windows(a.ids, a.docs, a.los, a.his, a.ns) x
    )
    select f.final_rank, f.position, f.chunk_id, f.document_id, f.collection_name, d.source_uri,
           d.title, b.lo, b.txt, f.context, d.metadata, f.score, f.base_score, f.pool_rank,
           p.found_by, p.dense_rank, p.dense_distance, p.lexical_rank, p.lexical_score,
           coalesce(p.legs, '{}'), p.lexical_query, f.recency_factor, f.boost, f.threshold_applied, f.below_threshold,
           f.threshold_skipped, reranker, rerank_refused,
           f.section_id, f.merged, b.ids, f.matched_chunk_ids, b.tokens, win.window_ids, win.window_text,
           win.window_of,
           f.language, f.language_factor, p.lexical_configs,
           case when f.snip is not null
                then sift._snippet(coalesce(sift.language_config(f.language), f.search_language), b.txt,
                                   coalesce(p.lexical_query::tsquery, f.q), f.snip, f.snip_words) end,
           null::text, null::text,   -- cursor, cursor_end: sift.search_page's
           case when 'dense' = any (p.legs) then f.space_name end,
           case when 'dense' = any (p.legs) then coalesce(f.space_missing, 0)::integer end,
           p.lexical_exact, p.late_interaction_score, p.leg_details
    from f
    join b on b.chunk_id = f.chunk_id
    left join win on win.chunk_id = f.chunk_id
    cross join lateral (select d.source_uri, d.title, d.metadata from sift.documents d
                        where d.document_id = f.document_id) d
    left join pl p on p.chunk_id = f.chunk_id
    order by f.position, f.chunk_id
$$;
comment on function sift._hits(sift.collections[], sift.knob_set[], sift.candidate[], bigint[],
    double precision[], integer, text, text, text, text) is
    'Internal: finalize''s kept rows as sift.hit rows (the pool''s leg columns when it is given), '
    'a merged section''s text in place of its representative''s, and the neighbours windows.';


create or replace function sift._finalize_input(
    knobs sift.knob_set[], chunk_ids bigint[], scores double precision[], match_count integer, scored_by text,
    out ids bigint[], out base double precision[])
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- A caller's pool, checked: sizes, scores in range, an id given twice
    -- counted once at its first place; no scores: the pool order scored like
    -- a single RRF leg.
    if match_count is null or match_count not between 0 and 1000 then
        raise exception 'match_count must be between 0 and 1000, got %', match_count
            using errcode = '23514', constraint = 'match_count_valid';
    end if;
    if cardinality(chunk_ids) > 10000 then
        raise exception 'chunk_ids has % ids; a pool is at most 10,000', cardinality(chunk_ids)
            using errcode = 'SF003';
    end if;
    if scored_by is not null and length(scored_by) > 128 then
        raise exception 'scored_by must be a reranker alias' using errcode = 'SF003';
    end if;
    base := scores;
    if base is not null then
        if coalesce(cardinality(base), 0) <> coalesce(cardinality(chunk_ids), 0) then
            raise exception 'scores has % values for % chunk_ids',
                coalesce(cardinality(base), 0), coalesce(cardinality(chunk_ids), 0)
                using errcode = 'SF003';
        end if;
        if exists (select 1 from unnest(base) as s where s is null or not (s >= 0 and s <= 1e100)) then
            raise exception 'scores must be numbers between 0 and 1e100 (no null, NaN or infinity)'
                using errcode = 'SF003',
                      hint = 'recency and boost multiply the scores; map logits through a sigmoid first';
        end if;
    else
        base := array(select 1 / ((knobs[1]).rrf_k + u.o)
                      from unnest(chunk_ids) with ordinality as u(id, o)
                      order by u.o);
    end if;
    select array_agg(d.id order by d.o), array_agg(d.s order by d.o)
    into ids, base
    from (select distinct on (u.id) u.id, u.s, u.o
          from unnest(chunk_ids, base) with ordinality as u(id, s, o)
          where u.id is not null
          order by u.id, u.o) d;
end;
$$;
comment on function sift._finalize_input(sift.knob_set[], bigint[], double precision[], integer, text) is
    'Internal: a pool given to sift.finalize or sift.finalize_page, checked (23514, SF003) and '
    'de-duplicated, with its scores (without them, 1/(rrf_k + place)).';


create or replace function sift.finalize(
    collection  text default null,
    chunk_ids   bigint[] default null,
    scores      double precision[] default null,
    match_count integer default 10,
    knobs       jsonb default '{}',
    collections text[] default null,
    scored_by   text default null,
    query_text  text default null)
returns setof sift.hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    cols sift.collections[] := sift._collections(finalize.collection, finalize.collections);
    ks   sift.knob_set[] := sift._resolve_all(cols, finalize.knobs);
    pool record;
begin
    pool := sift._finalize_input(ks, finalize.chunk_ids, finalize.scores, finalize.match_count, finalize.scored_by);
    perform sift._within_ceilings(cols, finalize.match_count);
    return query select * from sift._hits(cols, ks, null, pool.ids, pool.base, match_count, scored_by, null, null,
                                          finalize.query_text);
end;
$$;
comment on function sift.finalize(text, bigint[], double precision[], integer, jsonb, text[], text, text) is
    'The ranking knobs on a pool you already have (chunk_ids in pool order, e.g. from '
    'sift.candidates, with optional scores such as a reranker''s, each in [0, 1e100]; without '
    'scores the i-th id scores 1/(rrf_k + i)); scored_by names the reranker whose scores these '
    'are (a score threshold calibrated for a reranker applies only to its scores). score = '
    'base_score x recency factor x boost; chunks whose base_score is below score_threshold are '
    'dropped (threshold_applied, below_threshold = how many, threshold_skipped = a calibrated '
    'threshold not applied, and why); then the top match_count are picked greedily, with at most '
    'per_document_cap chunks per document until nothing else is left (backfill), by MMR when '
    'mmr_lambda is set (lambda x relevance - (1 - lambda) x largest cosine similarity to the '
    'chunks already picked); lost_in_the_middle puts the strongest at both ends (rank 1, 3, 5, '
    '..., 6, 4, 2; position is the order shown, rank the strength); parent_return merges passages '
    'into their sections before the cap and MMR, and neighbours reads each kept hit''s window, as '
    'in sift.search. knobs override the '
    'collections'' settings (several collections: smallest non-zero cap, smallest lambda, highest '
    'threshold). Ids that are not chunks of these collections are ignored; rows carry no leg '
    'columns. query_text: the question, for snippets (the snippets knob). Read-only.';
