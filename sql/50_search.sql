-- Public search entry points: sift.search (the answer) and sift.explain (the
-- candidate view). Both are sift._finalize over sift._candidates with the
-- same resolved knobs, so they can never disagree.
-- In: the collections, the query (text, vector, token vectors, added spaces'
-- vectors), match_count, the filter and knobs. Out: sift.hit rows (search) or
-- the candidate view with each leg's and stage's part (explain).

create or replace function sift._late_pool(
    cols sift.collections[], knobs sift.knob_set[], query_text text, query_embedding @extschema:vector@.vector,
    match_count integer, filter jsonb, query_tokens @extschema:vector@.vector[], spaces text[],
    space_embeddings @extschema:vector@.vector[], space_weights double precision[],
    out pool sift.candidate[], out ids bigint[], out scores double precision[], out scored_by text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    toks  @extschema:vector@.halfvec[] := sift._query_tokens(cols, query_tokens);
    top_n integer;
    raws  double precision[];
begin
    -- The fused pool, in fused order; with query tokens it is at least the
    -- late_interaction_top_n that MaxSim rescores, and ids and scores are the
    -- order and scores it ranks with (the fused ones when no chunk of it has
    -- token vectors; null without query tokens). scored_by is maxsim only
    -- when every chunk of the pool was scored: a threshold calibrated for it
    -- never judges the stand-in scores of the others.
    if toks is not null then
        top_n := (select pg_catalog.max((knobs[i]).late_interaction_top_n) from generate_subscripts(knobs, 1) as i);
    end if;
    pool := array(select c from sift._candidates(cols, knobs, query_text, query_embedding,
                                                 greatest(match_count, coalesce(top_n, 0)), filter, spaces,
                                                 space_embeddings, space_weights) c
                  order by c.fused_rank);
    if toks is null then
        return;
    end if;
    select pg_catalog.array_agg(o.chunk_id order by o.place), pg_catalog.array_agg(o.score order by o.place),
           pg_catalog.array_agg(o.raw order by o.place)
    into ids, scores, raws
    from sift._late_order(array(select c.chunk_id from unnest(pool) c order by c.fused_rank), toks, top_n) o;
    if ids is null then
        ids := array(select c.chunk_id from unnest(pool) c order by c.fused_rank);
        scores := array(select c.score from unnest(pool) c order by c.fused_rank);
        return;
    end if;
    if pg_catalog.array_position(raws, null) is null then
        scored_by := 'maxsim';
    end if;
    for i in 1 .. cardinality(pool) loop
        pool[i].late_interaction_score := raws[pg_catalog.array_position(ids, pool[i].chunk_id)];
    end loop;
end;
$$;
comment on function sift._late_pool(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector, integer,
    jsonb, @extschema:vector@.vector[], text[], @extschema:vector@.vector[], double precision[]) is
    'Internal: the fused pool of a search or explain; with query_tokens, widened to '
    'late_interaction_top_n, each candidate''s MaxSim, and the order and scores it ranks with.';


create or replace function sift._staged_search(
    cols sift.collections[], knobs sift.knob_set[], query_text text, query_embedding @extschema:vector@.vector,
    match_count integer, filter jsonb, query_tokens @extschema:vector@.vector[], spaces text[],
    space_embeddings @extschema:vector@.vector[], space_weights double precision[])
returns setof sift.hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    pool   sift.candidate[];
    choice record;
    late   record;
begin
    -- Every stage as a function of its own over the pool (the arguments
    -- checked by the caller): several collections, added spaces, query
    -- tokens, MMR, sections, windows, snippets.
    late := sift._late_pool(cols, knobs, query_text, query_embedding, match_count, filter, query_tokens, spaces,
                            space_embeddings, space_weights);
    if late.ids is not null then
        -- With query tokens, MaxSim in SQL is this search's rerank (no hosted call).
        return query
        select * from sift._hits(cols, knobs, late.pool, late.ids, late.scores, match_count, late.scored_by, null,
                                 null, query_text);
        return;
    end if;
    pool := late.pool;
    choice := sift._reranker_choice(cols, knobs);
    return query
    select * from sift._hits(cols, knobs, pool,
                             array(select c.chunk_id from unnest(pool) c order by c.fused_rank),
                             array(select c.score from unnest(pool) c order by c.fused_rank),
                             match_count, null, choice.alias, choice.refused, query_text);
end;
$$;
comment on function sift._staged_search(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector,
    integer, jsonb, @extschema:vector@.vector[], text[], @extschema:vector@.vector[], double precision[]) is
    'Internal: a search through every stage''s own function (sift._late_pool, sift._hits): what '
    'sift.search runs when the search is not plain (sift._plain_plan).';


create or replace function sift.search(
    collection      text default null,
    query_text      text default '',
    query_embedding @extschema:vector@.vector default null,
    match_count     integer default 10,
    filter          jsonb default '{}',
    knobs           jsonb default '{}',
    collections     text[] default null,
    query_tokens    @extschema:vector@.vector[] default null,
    spaces          text[] default null,
    space_embeddings @extschema:vector@.vector[] default null,
    space_weights   double precision[] default null)
returns setof sift.hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cols   sift.collections[];
    ks     sift.knob_set[];
    plan   record;
    plain  boolean := false;
    col    sift.collections;
    k      sift.knob_set;
    l      record;
begin
    -- One collection by name and no knob in the call, or only switches such
    -- as {"hybrid": false} (most searches): found, checked and planned in one
    -- statement (sift._plain_ready), the filter compiled (checked) after the
    -- rest, as sift._check_query orders them. A text past what is searched
    -- takes the full path, which refuses it.
    if search.collection is not null and search.collections is null and search.query_tokens is null
       and search.spaces is null and search.space_embeddings is null and search.space_weights is null
       and coalesce(octet_length(search.query_text), 0) <= 1000000 then
        select * into plan from sift._plain_ready(search.collection, search.query_embedding, search.match_count,
                                                  search.knobs);
        if found then
            if search.filter is not null and search.filter <> '{}'::jsonb then
                perform sift.filter_path(search.filter);
            end if;
            plain := true;
            col := plan.col;
            k := plan.knobs;
        end if;
    end if;
    if not plain then
        cols := sift._collections(search.collection, search.collections);
        ks := sift._resolve_all(cols, search.knobs);
        perform sift._check_query(cols, ks, query_text, query_embedding, match_count, filter, spaces,
                                  space_embeddings, space_weights);
        -- One collection with only the common stages: plain. Anything else:
        -- every stage's own function.
        if cardinality(cols) = 1 and query_tokens is null and spaces is null and space_embeddings is null
           and space_weights is null then
            select * into plan from sift._plain_plan(cols[1], ks[1], search.query_embedding is not null);
            plain := found;
            col := cols[1];
            k := ks[1];
        end if;
        if not plain then
            return query select * from sift._staged_search(cols, ks, search.query_text, search.query_embedding,
                                                           search.match_count, search.filter, search.query_tokens,
                                                           search.spaces, search.space_embeddings,
                                                           search.space_weights);
            return;
        end if;
    end if;
    -- Plain: each leg once (sift._plain_legs), then one statement for the
    -- fusion, the finalize stages and the hits' text (sift._plain_hits;
    -- sift._plain_hits_adjusted when a stage that rescales a chunk's score
    -- against another's is on).
    l := sift._plain_legs(col, k, search.query_text, search.query_embedding, search.match_count, search.filter,
                          plan.space, plan.exact, plan.iterative);
    if (k.recency_field is null or k.recency_weight = 0) and k.score_threshold is null
       and k.query_language is null then
        return query
        select * from sift._plain_hits(col, k, search.match_count, l.dense_ids, l.dense_raw, l.lexical_ids,
                                       l.lexical_raw, l.w, l.legs, l.lexical_query::text, l.configs, l.lexical_exact,
                                       (plan.space).name::text, case when k.rerank then col.reranker_alias::text end);
    else
        return query
        select * from sift._plain_hits_adjusted(col, k, search.match_count, l.dense_ids, l.dense_raw, l.lexical_ids,
                                                l.lexical_raw, l.w, l.legs, l.lexical_query::text, l.configs,
                                                l.lexical_exact, (plan.space).name::text,
                                                case when k.rerank then col.reranker_alias::text end);
    end if;
end;
$$;
comment on function sift.search(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[],
    @extschema:vector@.vector[], text[], @extschema:vector@.vector[], double precision[]) is
    'Hybrid search in one statement: dense (pgvector HNSW, or exact for small collections) and '
    'lexical (BM25 over the stored tsvector, each document in its language; OR over terms, '
    '"phrases" lift and -words lower the chunks that hold them, or with quoted_text require are '
    'required and excluded) legs, '
    'each taking its top max(fetch_k, match_count) inside the metadata filter (sift.filter_path), '
    'fused by weighted RRF: base_score = w/(k + dense_rank) + (1 - w)/(k + lexical_rank); then the '
    'ranking knobs of sift.finalize: score = base_score x recency factor x boost, score threshold, '
    'per-document cap with backfill, MMR, lost-in-the-middle order (position; rank is the '
    'strength); parent_return merges passages into their sections before those (merged, '
    'chunk_ids, matched_chunk_ids) and neighbours gives each hit a window of the chunks around '
    'it (window_text, window_chunk_ids; window_of when a better hit''s window holds it). Every row says how it was produced: found_by, each leg''s rank and raw score, legs '
    '(which legs ran), lexical_query (null when the text had no terms), threshold_applied, '
    'below_threshold, threshold_skipped, reranker (the one the Python client reranks with; SQL '
    'alone never calls out) and rerank_refused (why none can, when one was asked for). knobs => ''{"dense_weight": 0.3, "mmr_lambda": null}'' overrides '
    'the collections'' settings for this call (null = off; sift.knobs() lists them; '
    '''{"preset": "pgvector"}'' gives exactly pgvector''s order). collections => array[...] searches '
    'several collections of the tenant as one pool. query_tokens => the question''s token vectors '
    '(a late-interaction model''s): MaxSim reranks the fused top late_interaction_top_n against '
    'the chunks'' token vectors (sift.maxsim; late_interaction_score), the rest and chunks '
    'without token vectors behind in fused order, and no hosted reranker is called. spaces => '
    'array[...] with space_embeddings (and space_weights, default dense_weight) adds a dense leg '
    'per named vector space; the fusion knob (rrf, dbsf, convex) combines every leg, and '
    'leg_details says what each gave. Read-only (runs on a hot standby).';


create or replace function sift._explain_given(
    cols sift.collections[], knobs sift.knob_set[], chunk_ids bigint[], rerank_ids bigint[],
    rerank_scores double precision[], query_tokens @extschema:vector@.vector[], match_count integer,
    scored_by text, out ids bigint[], out base double precision[])
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    if cardinality(chunk_ids) > 1000 then
        raise exception 'chunk_ids has % ids; explain looks at most 1,000 up', cardinality(chunk_ids)
            using errcode = 'SF003';
    end if;
    -- A hosted rerank's scores, given by the caller to sift.explain (SQL never
    -- calls out): the pool is then the one the rerank scored (sift.candidates
    -- with match_count => the number of ids), ranked on them as sift.finalize
    -- ranks a search's. Null without them.
    if rerank_ids is not null or rerank_scores is not null then
        if rerank_ids is null or rerank_scores is null then
            raise exception 'rerank_ids and rerank_scores go together (the pool the reranker scored and its scores)'
                using errcode = 'SF003';
        end if;
        if query_tokens is not null then
            raise exception 'query_tokens rerank the pool by MaxSim in SQL; rerank_ids cannot be given with them'
                using errcode = 'SF003';
        end if;
        if cardinality(rerank_ids) > 1000 then
            raise exception 'rerank_ids has % ids; a reranked pool is at most 1,000', cardinality(rerank_ids)
                using errcode = 'SF003';
        end if;
        select i.ids, i.base into ids, base
        from sift._finalize_input(knobs, rerank_ids, rerank_scores, match_count, scored_by) i;
        -- The pool is widened to it, as the search's rerank pool is: the same ceiling.
        perform sift._within_ceilings(cols, cardinality(ids));
    elsif scored_by is not null then
        raise exception 'scored_by names the reranker of rerank_scores; give them too' using errcode = 'SF003';
    end if;
end;
$$;
comment on function sift._explain_given(sift.collections[], sift.knob_set[], bigint[], bigint[], double precision[],
    @extschema:vector@.vector[], integer, text) is
    'Internal: sift.explain''s own arguments checked (chunk_ids, rerank_ids and rerank_scores: SF003, '
    'SF015), and the rerank scores made the ids and base scores finalize ranks (sift._finalize_input); '
    'null when none are given.';


create or replace function sift._rerank_status(
    given integer, scored_by text, refused text, alias text, rerank_top_n integer, match_count integer)
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- given: how many rerank scores the caller passed (null: none); refused,
    -- alias and rerank_top_n: sift._reranker_choice's.
    select case
        when given is not null then
            pg_catalog.format('reranked: the top %s of the fused pool ranked on the rerank scores given%s',
                              given,
                              case when scored_by is not null
                                   then pg_catalog.format(' (scored by "%s")', scored_by) end)
        when refused is not null then 'refused: ' || refused
        when alias is not null then
            pg_catalog.format('not reranked: this is the fused ranking; a search reranks its top %s with "%s", '
                              'which SQL never calls (the Python client''s explain and pgsift explain show the '
                              'reranked view, or pass rerank_ids and rerank_scores)',
                              greatest(rerank_top_n, match_count), alias) end
$$;
comment on function sift._rerank_status(integer, text, text, text, integer, integer) is
    'Internal: sift.explain''s rerank_status: reranked on the scores given, refused (why), or not '
    'reranked because SQL never calls the reranker a search would use.';


create or replace function sift._not_retrieved(
    cols sift.collections[], ks sift.knob_set[], query_text text, query_embedding @extschema:vector@.vector,
    match_count integer, filter jsonb, chunk_ids bigint[], pool sift.candidate[])
returns table (chunk_id bigint, document_id bigint, collection_name text, dense_distance double precision,
               reason text, legs text[], lexical_query text, lexical_configs text[], language text,
               lexical_exact boolean)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    -- sift.explain's rows for the chunks the caller asked about (chunk_ids)
    -- that no leg retrieved (none in the pool): the distance in the space the
    -- dense leg searched, and why (outside the legs' top n, the filter, the
    -- lexical query).
    return query
    select c.chunk_id, c.document_id, (cols[i]).name::text,
           case sp.distance
               when 'cosine' then e.embedding operator(@extschema:vector@.<=>) _not_retrieved.query_embedding
               when 'l2' then e.embedding operator(@extschema:vector@.<->) _not_retrieved.query_embedding
               else e.embedding operator(@extschema:vector@.<#>) _not_retrieved.query_embedding end,
           'not retrieved: outside both legs'' top '
               || greatest((ks[i]).fetch_k, _not_retrieved.match_count)
               || case when _not_retrieved.filter is not null and _not_retrieved.filter <> '{}'::jsonb
                            and not coalesce(pg_catalog.jsonb_path_match_tz(
                                    d.metadata, sift.filter_path(_not_retrieved.filter), '{}', true), false)
                       then '; excluded by the metadata filter' else '' end
               || case when plan.lexical_query is null
                       then '; lexical leg did not run'
                       when c.search_vector @@ plan.lexical_query
                       then '; matches the lexical query'
                       else '; does not match the lexical query' end,
           plan.legs, plan.lexical_query::text, plan.configs, sift._language(d.language),
           case when 'lexical' = any (plan.legs)
                then coalesce((select pg_catalog.bool_and(q.lexical_exact) from unnest(_not_retrieved.pool) q
                               where q.collection_name = (cols[i]).name::text), true) end
    from generate_subscripts(cols, 1) as i
    cross join lateral sift._legs(cols[i], ks[i], _not_retrieved.query_text,
                                  _not_retrieved.query_embedding is not null) plan
    cross join lateral (select (sift._space(cols[i], (ks[i]).dense_space)).*) sp
    join sift.chunks c on c.collection_id = (cols[i]).collection_id
    join sift.documents d on d.document_id = c.document_id
    -- The chunk's vector in the space the dense leg searched.
    cross join lateral (select case when sp.builtin then c.embedding
                                    else (select v.embedding from sift.chunk_vectors v
                                          where v.space_id = sp.space_id and v.chunk_id = c.chunk_id) end
                               as embedding) e
    where c.chunk_id = any (_not_retrieved.chunk_ids)
      and not exists (select 1 from unnest(_not_retrieved.pool) q where q.chunk_id = c.chunk_id);
end;
$$;
comment on function sift._not_retrieved(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector,
    integer, jsonb, bigint[], sift.candidate[]) is
    'Internal: sift.explain''s chunks asked about (chunk_ids) that no leg retrieved: each with its '
    'distance in the space the dense leg searched, the legs that ran and why it was not retrieved '
    '(outside the legs'' top n, excluded by the filter, matching the lexical query or not).';


create or replace function sift.explain(
    collection      text default null,
    query_text      text default '',
    query_embedding @extschema:vector@.vector default null,
    match_count     integer default 10,
    filter          jsonb default '{}',
    knobs           jsonb default '{}',
    collections     text[] default null,
    chunk_ids       bigint[] default null,
    query_tokens    @extschema:vector@.vector[] default null,
    spaces          text[] default null,
    space_embeddings @extschema:vector@.vector[] default null,
    space_weights   double precision[] default null,
    rerank_ids      bigint[] default null,
    rerank_scores   double precision[] default null,
    scored_by       text default null)
returns setof sift.explanation
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cols   sift.collections[] := sift._collections(explain.collection, explain.collections);
    ks     sift.knob_set[] := sift._resolve_all(cols, explain.knobs);
    choice record := sift._reranker_choice(cols, ks);
    given_ids  bigint[];
    given_base double precision[];
    pool   sift.candidate[];
    late   record;
    status text;
begin
    perform sift._check_query(cols, ks, query_text, query_embedding, match_count, filter, spaces, space_embeddings,
                              space_weights);
    -- explain's own arguments; a hosted rerank's scores, given by the caller.
    select g.ids, g.base into given_ids, given_base
    from sift._explain_given(cols, ks, explain.chunk_ids, explain.rerank_ids, explain.rerank_scores,
                             explain.query_tokens, explain.match_count, explain.scored_by) g;
    late := sift._late_pool(cols, ks, query_text, query_embedding,
                            greatest(match_count, coalesce(cardinality(given_ids), 0)), filter, query_tokens, spaces,
                            space_embeddings, space_weights);
    pool := late.pool;
    if given_ids is not null and exists (select 1 from unnest(given_ids) as g(id)
                                         where g.id not in (select c.chunk_id from unnest(pool) c)) then
        raise exception 'rerank_ids must be chunks of the pool the reranker scored (sift.candidates with the '
                        'same arguments and match_count => %)', cardinality(given_ids)
            using errcode = 'SF003',
                  hint = 'the Python client''s explain reranks and passes them itself';
    end if;
    status := sift._rerank_status(cardinality(given_ids), explain.scored_by, choice.refused, choice.alias,
                                  choice.rerank_top_n, match_count);
    return query
    with p as (
        select * from unnest(pool)
    ), f as materialized (
        select *
        from sift._finalize(cols, ks,
                            coalesce(given_ids, late.ids, array(select p.chunk_id from p order by p.fused_rank)),
                            coalesce(given_base, late.scores, array(select p.score from p order by p.fused_rank)),
                            match_count, coalesce(explain.scored_by, late.scored_by), true) x
    ), g as (
        select u.id, u.s, row_number() over (order by u.s desc, u.id)::integer as r
        from unnest(given_ids, given_base) as u(id, s)
    ), summary as (
        select bool_or(f.threshold_applied) as threshold_applied, max(f.below_threshold) as below_threshold,
               max(f.threshold_skipped) as threshold_skipped
        from f
    ), rows as (
        -- Reranked, the candidates past the pool the reranker scored are cut
        -- before finalize (a search never sees them).
        select p.fused_rank, p.chunk_id, p.document_id, p.collection_name, p.found_by, p.dense_rank,
               p.dense_distance, p.lexical_rank, p.lexical_score, f.base_score, f.score, coalesce(f.kept, false) as kept,
               case when f.chunk_id is null then 'rerank_pool' else f.cut_by end as cut_by,
               case when f.chunk_id is null
                    then pg_catalog.format('not reranked: outside the top %s of the fused pool the reranker '
                                           'scored', cardinality(given_ids))
                    else f.reason end as reason,
               p.legs, p.lexical_query, p.lexical_configs, f.recency_date,
               f.recency_factor, f.boost,
               f.cap_status, f.mmr_similarity, f.mmr_penalty, f.final_rank, f.position,
               coalesce(f.threshold_applied, summary.threshold_applied, false) as threshold_applied,
               coalesce(f.below_threshold, summary.below_threshold, 0) as below_threshold,
               coalesce(f.threshold_skipped, summary.threshold_skipped) as threshold_skipped, f.merged,
               f.matched_chunk_ids, f.merged_into, f.language, f.language_factor, p.lexical_exact,
               p.late_interaction_score, p.leg_details, g.s as rerank_score, g.r as rerank_rank
        from p
        cross join summary
        left join f on f.chunk_id = p.chunk_id
        left join g on g.id = p.chunk_id
        union all
        -- Chunks the caller asked about that no leg retrieved: say why.
        select null::integer, n.chunk_id, n.document_id, n.collection_name, null::text, null::integer,
               n.dense_distance, null::integer, null::double precision, null::double precision,
               null::double precision, false, 'not_retrieved', n.reason, n.legs, n.lexical_query,
               n.lexical_configs, null::timestamptz, null::double precision, null::double precision, null::text,
               null::double precision, null::double precision, null::integer, null::integer,
               coalesce(summary.threshold_applied, false), coalesce(summary.below_threshold, 0),
               summary.threshold_skipped, false, null::bigint[], null::bigint, n.language, null::double precision,
               n.lexical_exact, null::double precision, null::jsonb, null::double precision, null::integer
        from sift._not_retrieved(cols, ks, explain.query_text, explain.query_embedding, explain.match_count,
                                 explain.filter, explain.chunk_ids, pool) n
        cross join summary
    )
    select r.fused_rank, r.chunk_id, r.document_id, r.collection_name, d.source_uri, d.title, k.ordinal,
           r.found_by, r.dense_rank, r.dense_distance, r.lexical_rank, r.lexical_score, r.base_score,
           r.score, r.kept, r.cut_by, r.reason, r.legs, r.lexical_query, r.recency_date,
           r.recency_factor, r.boost, r.cap_status, r.mmr_similarity, r.mmr_penalty, r.final_rank,
           r.position, r.threshold_applied, r.below_threshold, r.threshold_skipped,
           k.section_id, r.merged, r.matched_chunk_ids, r.merged_into, r.language, r.language_factor,
           r.lexical_configs, r.lexical_exact, r.late_interaction_score, r.leg_details, choice.alias,
           r.rerank_score, r.rerank_rank, status
    from rows r
    cross join lateral (select k.ordinal, k.section_id from sift.chunks k where k.chunk_id = r.chunk_id) k
    cross join lateral (select d.source_uri, d.title from sift.documents d
                        where d.document_id = r.document_id) d
    order by r.fused_rank nulls last, r.chunk_id;
end;
$$;
comment on function sift.explain(text, text, @extschema:vector@.vector, integer, jsonb, jsonb, text[], bigint[],
    @extschema:vector@.vector[], text[], @extschema:vector@.vector[], double precision[], bigint[],
    double precision[], text) is
    'The candidate view: the whole fused pool behind sift.search with the same arguments, each '
    'chunk''s rank and raw score in every leg, fused score (base_score) and rank, and what each '
    'ranking knob did to it: recency_date and recency_factor, boost, score (after both), '
    'cap_status (kept, capped, backfilled), mmr_similarity and mmr_penalty, final_rank and '
    'position, whether it made the cut (kept) and if not, cut_by (score_threshold, '
    'per_document_cap, mmr, match_count, merged) and reason; with parent_return, section_id, '
    'merged (the row stands for its whole section), matched_chunk_ids (the passages it took) and '
    'merged_into (the hit a passage was folded into). Pass chunk_ids to also see chunks no leg '
    'retrieved and why (distance, filter, lexical match; cut_by = not_retrieved): "never '
    'retrieved" versus "ranked too low". With query_tokens, the pool sift.search reranks by '
    'MaxSim, each row''s late_interaction_score, base_score the score it ranked with. With '
    'spaces, every leg''s rank, raw score, weight and contribution in leg_details. A collection '
    'that reranks: SQL never calls the reranker, so the view is the fused ranking and '
    'rerank_status says so; pass rerank_ids (the pool the reranker scored, sift.candidates with '
    'match_count => its size, in fused order) with rerank_scores (on finalize''s scale) and '
    'scored_by (the reranker, when it scored them all) to see the search''s ranking: each row''s '
    'rerank_score and rerank_rank, candidates past that pool cut_by rerank_pool (the Python '
    'client''s explain does this for you). Read-only.';
