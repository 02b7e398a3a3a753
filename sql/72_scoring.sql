-- Scoring: a golden set scored through sift.search. In: a
-- collection, its golden set, k, knobs and a mode. Out: per question the
-- ranked units and their hit rate, MRR, nDCG, precision, recall and
-- coverage (pgsift.metrics' definitions: tests/test_evaluation.py holds the
-- two equal); sift.evaluate_golden_set records a run's means
-- (sql/74_eval_runs.sql keeps the history).

-- Evaluation runs from SQL: every question of a golden set through sift.search,
-- scored as the Python package scores (pgsift.metrics: trec_eval's definitions),
-- and the run recorded in the history.

create or replace function sift._eval_knobs(collection text, knobs jsonb, mode text)
returns jsonb
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- What a run's searches are called with: a baseline runs one leg, never reranked.
    if mode is null or mode not in ('pipeline', 'dense', 'lexical') then
        raise exception 'mode must be pipeline, dense or lexical, got %', coalesce(mode, 'null')
            using errcode = 'SF003';
    end if;
    if knobs is null or pg_catalog.jsonb_typeof(knobs) <> 'object' then
        raise exception 'knobs must be a JSON object' using errcode = 'SF003';
    end if;
    if mode <> 'pipeline' and knobs ? 'hybrid' then
        raise exception 'the % baseline decides ''hybrid'' itself', mode using errcode = 'SF003';
    end if;
    return knobs || case mode when 'dense' then '{"hybrid": false, "rerank": false}'::jsonb
                              when 'lexical' then '{"rerank": false}'::jsonb
                              else '{}'::jsonb end;
end;
$$;
comment on function sift._eval_knobs(text, jsonb, text) is
    'Internal: the knobs an evaluation''s searches run with for a mode (pipeline: as given; '
    'dense: hybrid and rerank off; lexical: rerank off); SF003 for an unknown mode, or hybrid '
    'given to a baseline.';


-- sift.score_golden_set in its steps: the arguments checked before any search
-- runs (sift._score_checks); then per question, after its search, the units
-- relevant to it (sift._score_units), what each hit of the answer counts as
-- (sift._score_hits) and the metrics of that ranking (sift._score_metrics).

create or replace function sift._score_checks(
    col  sift.collections,
    gs   sift.golden_sets,
    k    integer,
    call jsonb,
    mode text)
returns void
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    missing integer;
begin
    if k is null or k < 1 or k > 1000 then
        raise exception 'k must be an integer in [1, 1000], got %', coalesce(k::text, 'null') using errcode = 'SF003';
    end if;
    -- The knobs are checked (names, types, ranges) before any search runs.
    perform 1 from sift.knobs(col.name, call);
    if not exists (select 1 from sift.golden_questions x where x.golden_set_id = gs.golden_set_id) then
        raise exception 'golden set "%" has no question', gs.name using errcode = 'SF003';
    end if;
    if mode = 'dense' then
        select pg_catalog.count(*) into missing
        from sift.golden_questions x where x.golden_set_id = gs.golden_set_id and x.embedding is null;
        if missing > 0 then
            raise exception 'the dense baseline needs a query vector for every question; % have none stored', missing
                using errcode = 'SF003', hint = 'store the questions'' vectors (embedding); SQL never embeds a text';
        end if;
    end if;
end;
$$;
comment on function sift._score_checks(sift.collections, sift.golden_sets, integer, jsonb, text) is
    'Internal: sift.score_golden_set''s checks, in its order, before any search runs: k in '
    '[1, 1000], the knobs (sift.knobs), a golden set with a question, and for the dense baseline '
    'a stored vector for every question (SF003 otherwise).';


create or replace function sift._score_units(
    gs          sift.golden_sets,
    question_id bigint,
    out units   text[],
    out grades  integer[],
    out bound   bigint[])
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
begin
    -- The question's relevant units with their grades: a bound positive is its chunk
    -- (its document, judged at the document level, as it is now); an unbound one can
    -- never be found (one per document at the document level, unless that document is
    -- relevant through a bound chunk).
    select coalesce(pg_catalog.array_agg(u.unit order by u.unit), '{}'),
           coalesce(pg_catalog.array_agg(u.grade order by u.unit), '{}')
    into units, grades
    from (select y.unit, pg_catalog.max(y.grade) as grade
          from (select case when gs.judged_at = 'chunk' then 'chunk:' || p.chunk_id
                            else 'doc:' || coalesce(d.source_uri, p.source_uri) end as unit, p.grade
                from sift.golden_positives p
                left join sift.chunks c on c.chunk_id = p.chunk_id
                left join sift.documents d on d.document_id = c.document_id
                where p.question_id = _score_units.question_id and p.chunk_id is not null
                union all
                select case when gs.judged_at = 'document' and p.source_uri is not null
                            then 'unbound:' || p.source_uri else 'unbound:' || p.positive_id end, p.grade
                from sift.golden_positives p
                where p.question_id = _score_units.question_id and p.chunk_id is null
                  and not (gs.judged_at = 'document' and p.source_uri is not null and exists (
                      select 1 from sift.golden_positives b
                      join sift.chunks c on c.chunk_id = b.chunk_id
                      join sift.documents d on d.document_id = c.document_id
                      where b.question_id = _score_units.question_id and d.source_uri = p.source_uri))) y
          group by y.unit) u;
    -- Its bound positives (the chunks that coverage looks for; in no particular order).
    bound := array(select p.chunk_id from sift.golden_positives p
                   where p.question_id = _score_units.question_id and p.chunk_id is not null);
end;
$$;
comment on function sift._score_units(sift.golden_sets, bigint) is
    'Internal: a golden question''s relevant units (chunk:<id>, doc:<source_uri> at the document '
    'level, unbound:<...> for a positive that can never be found) in unit order with their '
    'grades (the best of each unit''s positives), and its bound positives'' chunk ids.';


create or replace function sift._score_hits(
    hs         sift.hit[],
    gs         sift.golden_sets,
    bound      bigint[],
    out ranked text[],
    out tokens integer,
    out merged integer,
    out sent   bigint[])
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    h        sift.hit;
    credited bigint[];
    covered  bigint[];
    fresh    bigint;
begin
    -- What each hit counts as: at the chunk level, the first positive among the chunks
    -- it stands for (a merged section's, its window's) that no better hit was credited
    -- with, else itself; at the document level, its document.
    ranked := '{}';
    tokens := 0;
    merged := 0;
    credited := '{}';
    sent := '{}';
    foreach h in array hs loop
        covered := array(select x.c from pg_catalog.unnest(
                             case when pg_catalog.cardinality(h.chunk_ids) > 0 then h.chunk_ids
                                  else array[h.chunk_id] end
                             || coalesce(h.window_chunk_ids, '{}')) with ordinality as x(c, o)
                         group by x.c order by pg_catalog.min(x.o));
        fresh := null;
        if gs.judged_at = 'chunk' then
            select x.c into fresh
            from pg_catalog.unnest(covered) with ordinality as x(c, o)
            where x.c = any (bound) and not x.c = any (credited)
            order by x.o limit 1;
        end if;
        if fresh is not null then
            credited := credited || fresh;
            ranked := ranked || ('chunk:' || fresh);
        elsif gs.judged_at = 'chunk' then
            ranked := ranked || ('chunk:' || h.chunk_id);
        else
            ranked := ranked || ('doc:' || h.source_uri);
        end if;
        -- The chunks whose text it sends (none when a better hit's window holds it),
        -- and their tokens.
        if h.window_of is null then
            sent := sent || case when pg_catalog.cardinality(h.window_chunk_ids) > 0 then h.window_chunk_ids
                                 when pg_catalog.cardinality(h.chunk_ids) > 0 then h.chunk_ids
                                 else array[h.chunk_id] end;
            tokens := tokens + coalesce((
                select pg_catalog.sum(coalesce(c.token_count, 0))
                from pg_catalog.unnest(case when pg_catalog.cardinality(h.window_chunk_ids) > 0
                                            then h.window_chunk_ids
                                            when pg_catalog.cardinality(h.chunk_ids) > 0 then h.chunk_ids
                                            else array[h.chunk_id] end) as x(c)
                join sift.chunks c on c.chunk_id = x.c), 0)::integer;
        end if;
        sent := sent || covered;
        merged := merged + case when h.merged then 1 else 0 end;
    end loop;
end;
$$;
comment on function sift._score_hits(sift.hit[], sift.golden_sets, bigint[]) is
    'Internal: what each hit of an answer (in rank order) counts as for a golden set: chunk:<id> '
    '(the first of the bound positives it stands for that no better hit was credited with, else '
    'itself) or doc:<source_uri> at the document level; the token_count of the chunks whose text '
    'it sends, how many hits were merged sections, and the chunks whose text came back.';


create or replace function sift._score_metrics(
    ranked          text[],
    units           text[],
    grades          integer[],
    k               integer,
    out hit_rate    double precision,
    out mrr         double precision,
    out ndcg        double precision,
    out "precision" double precision,
    out recall      double precision)
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    top       text[];
    found_rel integer;
    dcg       double precision;
    idcg      double precision;
    first_hit integer;
    g         integer;
    i         integer;
begin
    -- The ranking with repeats dropped (each unit at its best place), cut at k; then
    -- pgsift.metrics: hit (success@k), reciprocal rank, nDCG@k with linear gain (the
    -- ideal from every relevant unit), precision (over k) and recall.
    top := array(select x.u from pg_catalog.unnest(ranked) with ordinality as x(u, o)
                 group by x.u order by pg_catalog.min(x.o) limit k);
    found_rel := 0;
    dcg := 0;
    first_hit := null;
    for i in 1 .. coalesce(pg_catalog.cardinality(top), 0) loop
        g := grades[pg_catalog.array_position(units, top[i])];
        if g is not null then
            found_rel := found_rel + 1;
            first_hit := coalesce(first_hit, i);
            dcg := dcg + g / (pg_catalog.ln((i + 1)::float8) / pg_catalog.ln(2::float8));
        end if;
    end loop;
    select coalesce(pg_catalog.sum(x.g / (pg_catalog.ln((x.o + 1)::float8) / pg_catalog.ln(2::float8))
                                   order by x.o), 0)
    into idcg
    from (select y.g, pg_catalog.row_number() over (order by y.g desc, y.n) as o
          from pg_catalog.unnest(grades) with ordinality as y(g, n)) x
    where x.o <= k;
    hit_rate := case when found_rel > 0 then 1 else 0 end;
    mrr := case when first_hit is null then 0 else 1.0::float8 / first_hit end;
    ndcg := case when idcg > 0 then dcg / idcg else 0 end;
    "precision" := found_rel::float8 / k;
    recall := found_rel::float8 / pg_catalog.cardinality(units);
end;
$$;
comment on function sift._score_metrics(text[], text[], integer[], integer) is
    'Internal: pgsift.metrics'' figures at k of a ranking (what each hit counts as, in rank order) '
    'against a question''s relevant units and their grades (at least one unit): hit_rate, mrr, '
    'ndcg (linear gain, the ideal from every relevant unit), precision (over k) and recall.';


create or replace function sift.score_golden_set(
    collection text,
    golden_set text default null,
    k          integer default 10,
    knobs      jsonb default '{}',
    mode       text default 'pipeline')
returns table (
    question_key text,
    answerable   boolean,
    chunk_ids    bigint[],
    ranked       text[],
    tokens       integer,
    legs         text[],
    hit_rate     double precision,
    mrr          double precision,
    ndcg         double precision,
    "precision"  double precision,
    recall       double precision,
    coverage     double precision,
    merged       integer)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
    col     sift.collections := sift._collection(score_golden_set.collection);
    gs      sift.golden_sets := sift._golden_set(col, score_golden_set.golden_set);
    call    jsonb := sift._eval_knobs(col.name, score_golden_set.knobs, score_golden_set.mode);
    q       record;
    hs      sift.hit[];
    rel     record;   -- sift._score_units: units, grades, bound
    counted record;   -- sift._score_hits: ranked, tokens, merged, sent
begin
    perform sift._score_checks(col, gs, k, call, mode);

    for q in
        select x.question_id, x.question_key, x.question, x.answerable,
               case when mode = 'lexical' then null else x.embedding end as embedding
        from sift.golden_questions x
        where x.golden_set_id = gs.golden_set_id
        order by x.question_id
    loop
        -- The answer, scored by strength (rank), not by presentation order.
        hs := array(select s from sift.search(collection => col.name::text, query_text => q.question,
                                              query_embedding => q.embedding, match_count => k,
                                              knobs => call) s
                    order by s.rank, s.chunk_id);
        select * into rel from sift._score_units(gs, q.question_id);
        select * into counted from sift._score_hits(hs, gs, rel.bound);

        question_key := q.question_key;
        answerable := q.answerable;
        chunk_ids := array(select x.chunk_id from pg_catalog.unnest(hs) with ordinality as x order by x.ordinality);
        ranked := counted.ranked;
        tokens := counted.tokens;
        legs := case when pg_catalog.cardinality(hs) > 0 then (hs[1]).legs end;
        merged := counted.merged;
        coverage := case when q.answerable and pg_catalog.cardinality(rel.bound) > 0 then
                        (select pg_catalog.count(distinct b)::float8 from pg_catalog.unnest(rel.bound) as b
                         where b = any (counted.sent))
                        / (select pg_catalog.count(distinct b) from pg_catalog.unnest(rel.bound) as b) end;
        hit_rate := null;
        mrr := null;
        ndcg := null;
        "precision" := null;
        recall := null;
        if q.answerable and pg_catalog.cardinality(rel.units) > 0 then
            select m.hit_rate, m.mrr, m.ndcg, m."precision", m.recall
            into hit_rate, mrr, ndcg, "precision", recall
            from sift._score_metrics(counted.ranked, rel.units, rel.grades, k) m;
        end if;
        return next;
    end loop;
end;
$$;
comment on function sift.score_golden_set(text, text, integer, jsonb, text) is
    'Runs every question of a golden set (null: the collection''s only one) through sift.search '
    'at k with the knobs (mode pipeline; dense: the dense leg alone; lexical: the lexical leg '
    'alone, no query vector) and scores each answer as pgsift.metrics does, by rank: chunk_ids '
    'the answer, ranked what each hit counts as (chunk:<id>, or doc:<source_uri> for a set '
    'judged at the document level; a hit standing for a positive among its merged section or '
    'window counts as it, once), tokens the token_count of the chunks whose text came back, '
    'legs those that ran, hit_rate, mrr, ndcg (linear gain), precision (over k) and recall at '
    'k (null for a question without an answer), coverage (the share of its bound positives '
    'whose text came back) and merged (hits that were merged sections). A question''s stored '
    'vector is its query vector (without one, the lexical leg alone): SQL never embeds and '
    'never calls a hosted reranker. Read-only.';


create or replace function sift.evaluate_golden_set(
    collection text,
    golden_set text default null,
    k          integer default 10,
    knobs      jsonb default '{}',
    mode       text default 'pipeline',
    label      text default null,
    store      boolean default true)
returns table (
    run_id          bigint,
    created_at      timestamptz,
    set_name        text,
    metrics         jsonb,
    settings        jsonb,
    previous_run_id bigint,
    delta           jsonb)
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    col       sift.collections := sift._collection(evaluate_golden_set.collection);
    gs        sift.golden_sets := sift._golden_set(col, evaluate_golden_set.golden_set);
    call      jsonb := sift._eval_knobs(col.name, evaluate_golden_set.knobs, evaluate_golden_set.mode);
    effective jsonb;
    figures   jsonb;
    setup     jsonb;
    no_vector integer;
    all_q     integer;
begin
    -- Every knob in force, checked before any search runs.
    select coalesce(pg_catalog.jsonb_object_agg(x.name, x.value), '{}') into effective
    from sift.knobs(col.name, call) x;
    with per_q as (
        select * from sift.score_golden_set(col.name, gs.name, evaluate_golden_set.k, evaluate_golden_set.knobs,
                                            evaluate_golden_set.mode)
    ), scored as (
        select * from per_q s where s.answerable and s.ndcg is not null
    )
    select pg_catalog.jsonb_build_object(
               'hit_rate', (select pg_catalog.avg(s.hit_rate) from scored s),
               'mrr', (select pg_catalog.avg(s.mrr) from scored s),
               'ndcg', (select pg_catalog.avg(s.ndcg) from scored s),
               'precision', (select pg_catalog.avg(s."precision") from scored s),
               'recall', (select pg_catalog.avg(s.recall) from scored s),
               'mean_tokens', (select pg_catalog.avg(s.tokens)::float8 from per_q s),
               'mean_results', (select pg_catalog.avg(coalesce(pg_catalog.cardinality(s.chunk_ids), 0))::float8
                                from per_q s),
               'coverage', (select pg_catalog.avg(s.coverage) from per_q s),
               'merge_rate', (select case when pg_catalog.sum(pg_catalog.cardinality(s.chunk_ids)) > 0
                                           and effective ->> 'parent_return' is distinct from 'child'
                                          then pg_catalog.sum(s.merged)::float8
                                               / pg_catalog.sum(pg_catalog.cardinality(s.chunk_ids)) end
                              from per_q s),
               'unanswerable_declined', (select pg_catalog.avg(
                                                    case when coalesce(pg_catalog.cardinality(s.chunk_ids), 0) = 0
                                                         then 1 else 0 end)::float8
                                         from per_q s where not s.answerable)),
           pg_catalog.jsonb_build_object(
               'legs', coalesce((select pg_catalog.jsonb_object_agg(l.leg, l.n order by l.leg)
                                 from (select x.leg, pg_catalog.count(*) as n
                                       from per_q s cross join pg_catalog.unnest(s.legs) as x(leg)
                                       group by x.leg) l), '{}'),
               'questions', pg_catalog.jsonb_build_object(
                   'answerable', (select pg_catalog.count(*) from per_q s where s.answerable),
                   'unanswerable', (select pg_catalog.count(*) from per_q s where not s.answerable),
                   'scored', (select pg_catalog.count(*) from scored),
                   'unbound_positives', (select pg_catalog.count(*) from sift.golden_positives p
                                         join sift.golden_questions x on x.question_id = p.question_id
                                         where x.golden_set_id = gs.golden_set_id and p.chunk_id is null)))
    into figures, setup;
    select pg_catalog.count(*) filter (where x.embedding is null), pg_catalog.count(*) into no_vector, all_q
    from sift.golden_questions x where x.golden_set_id = gs.golden_set_id;
    setup := setup || pg_catalog.jsonb_build_object(
        'mode', evaluate_golden_set.mode,
        'knobs', evaluate_golden_set.knobs,
        'effective', effective,
        'judged_at', gs.judged_at,
        'embeddings', case when evaluate_golden_set.mode = 'lexical' then 'none (lexical only)'
                           when no_vector = 0 then 'stored with the golden set'
                           when no_vector = all_q then 'none: no stored vectors (lexical leg only)'
                           else pg_catalog.format('stored; %s question(s) without a vector ran lexical only',
                                                  no_vector) end,
        'evaluated_by', 'sift.evaluate_golden_set');
    if not evaluate_golden_set.store then
        return query select null::bigint, null::timestamptz, gs.name::text, figures, setup, null::bigint, null::jsonb;
        return;
    end if;
    return query
    select r.run_id, r.created_at, gs.name::text, figures, setup, r.previous_run_id, r.delta
    from sift.record_eval_run(col.name, gs.name, coalesce(evaluate_golden_set.label, evaluate_golden_set.mode),
                              evaluate_golden_set.k, figures, setup) r;
end;
$$;
comment on function sift.evaluate_golden_set(text, text, integer, jsonb, text, text, boolean) is
    'Evaluates a collection against a golden set (null: its only one) at k from SQL: every '
    'question through sift.search (sift.score_golden_set: mode pipeline, dense or lexical; the '
    'knobs checked before any search), metrics averaged over the answerable questions as the '
    'Python package averages them (hit_rate, mrr, ndcg, precision, recall; mean_tokens and '
    'mean_results over every question; coverage; merge_rate, null with parent_return child; '
    'unanswerable_declined, the share of questions without an answer that got no result), '
    'settings (mode, knobs, effective: every knob in force, judged_at, embeddings, legs, '
    'question counts). Recorded with label (default: the mode) unless store is false '
    '(run_id null); returns the run with its previous run and delta as sift.eval_history gives '
    'them. SQL never calls a hosted '
    'reranker: a collection that reranks is scored on its fused ranking here. Writes.';
