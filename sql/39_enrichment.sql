-- Enrichment at ingest (pgsift.enrich): what a language model wrote for each
-- chunk, kept apart from the chunk's text (sift.chunk_enrichments), and what
-- each ingestion of a document spent (sift.enrichment_runs). The calls are the
-- client's (index time only, never at query time); these triggers tie each row
-- to its chunk or document as the caller sees it.


create or replace function sift._chunk_enrichments_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- The chunk's collection, as the caller sees it (another tenant's chunk is invisible).
    new.collection_id := sift._chunk_collection(new.chunk_id);
    if exists (select 1 from unnest(new.questions) as q(t) where q.t is null or pg_catalog.btrim(q.t) = '') then
        raise exception 'the questions of chunk % include a blank one', new.chunk_id using errcode = 'SF003';
    end if;
    new.created_at := now();
    return new;
end;
$$;
comment on function sift._chunk_enrichments_before_write() is
    'Trigger: an enrichment takes its chunk''s collection (SF006 for a chunk the tenant does not '
    'have); no blank question (SF003).';

create or replace trigger chunk_enrichments_before_write
    before insert or update on sift.chunk_enrichments
    for each row execute function sift._chunk_enrichments_before_write();


create or replace function sift._enrichment_runs_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    select d.collection_id into new.collection_id from sift.documents d where d.document_id = new.document_id;
    if new.collection_id is null then
        raise exception 'document % is not a document the tenant has', new.document_id using errcode = 'SF006';
    end if;
    return new;
end;
$$;
comment on function sift._enrichment_runs_before_write() is
    'Trigger: a run takes its document''s collection (SF006 for a document the tenant does not have).';

create or replace trigger enrichment_runs_before_write
    before insert or update on sift.enrichment_runs
    for each row execute function sift._enrichment_runs_before_write();


create or replace function sift.enrichment_history(collection text, source_uri text default null)
returns table (source_uri text, run_id bigint, model text, chunks integer, enriched integer, reused integer,
               failed integer, skipped integer, input_tokens bigint, output_tokens bigint,
               cost_usd double precision, warnings text[], created_at timestamptz)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    select d.source_uri, r.run_id, r.model, r.chunks, r.enriched, r.reused, r.failed, r.skipped,
           r.input_tokens, r.output_tokens, r.cost_usd, r.warnings, r.created_at
    from sift.enrichment_runs r
    join sift.documents d on d.document_id = r.document_id
    where r.collection_id = (select c.collection_id from sift._collection(enrichment_history.collection) c)
      and (enrichment_history.source_uri is null or d.source_uri = enrichment_history.source_uri)
    order by d.source_uri, r.run_id
$$;
comment on function sift.enrichment_history(text, text) is
    'What each ingestion with enrichment spent and what went wrong, per document of the collection '
    '(one, with source_uri): chunks enriched, reused (no call), failed and skipped (past the '
    'budget), tokens, cost (null: the model''s rates are unknown) and warnings. Read-only.';


create or replace function sift._question_vectors_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col   sift.collections;
    space sift.vector_spaces;
begin
    -- The chunk's collection, as the caller sees it; the vector must fit the
    -- collection's active space (the one the dense leg searches).
    new.collection_id := sift._chunk_collection(new.chunk_id);
    select c.* into col from sift.collections c where c.collection_id = new.collection_id;
    space := sift._space(col, null);
    perform sift._check_dims(space.dimensions, space.distance,
                             format('the active space of collection "%s"', col.name), new.embedding,
                             format('the vector of question %s of chunk %s', new.ordinal, new.chunk_id));
    return new;
end;
$$;
comment on function sift._question_vectors_before_write() is
    'Trigger: a question vector takes its chunk''s collection (SF006 for a chunk the tenant does not '
    'have) and must fit the collection''s active space (SF002).';

create or replace trigger question_vectors_before_write
    before insert or update on sift.question_vectors
    for each row execute function sift._question_vectors_before_write();


create or replace function sift._question_leg(
    collection_id bigint, dims integer, metric text, query @extschema:vector@.vector, filter jsonb, n integer,
    exact_search_limit integer, ef_search integer default null)
returns table (chunk_id bigint, ordinal smallint, distance double precision)
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
rows 100
as $$
#variable_conflict use_column
declare
    fpath     jsonpath := sift.filter_path(filter);
    iterative boolean := sift._pgvector_has_iterative_scan();
    saved_ef  text := current_setting('hnsw.ef_search', true);
    saved_it  text := case when iterative then current_setting('hnsw.iterative_scan', true) end;
    small     boolean;
    sql       text;
    walk      text := format('order by (q.embedding::@extschema:vector@.%1$s(%2$s)) %3$s ($1::@extschema:vector@.%1$s(%2$s))',
                             case when dims > 2000 then 'halfvec' else 'vector' end, dims,
                             sift._distance_operator(metric));
    ids       bigint[];
    ords      smallint[];
    dists     double precision[];
begin
    -- The n chunks nearest the query by their best question, inside the
    -- metadata filter; each chunk once, at its best question. The nearest 5n
    -- questions hold every such chunk's best (a chunk has at most 5). Few
    -- question vectors are measured exactly; more walk the partial HNSW index
    -- of their size (sift._ensure_dense_index), ordered by its own expression.
    select count(*) <= _question_leg.exact_search_limit into small
    from (select 1 from sift.question_vectors q
          where q.collection_id = _question_leg.collection_id
          limit _question_leg.exact_search_limit + 1) s;
    sql := format(
        'select b.chunk_id, b.ordinal, b.d from (
             select distinct on (t.chunk_id) t.chunk_id, t.ordinal, t.d
             from (select q.chunk_id, q.ordinal, q.embedding %1$s $1 as d
                   from sift.question_vectors q
                   %2$s
                   where q.collection_id = $2
                     and @extschema:vector@.vector_dims(q.embedding) = %4$s %3$s
                   %5$s
                   limit $4 * 5) t
             order by t.chunk_id, t.d, t.ordinal) b
         order by b.d, b.chunk_id
         limit $4',
        sift._distance_operator(metric),
        case when fpath is null then ''
             else 'join sift.chunks k on k.chunk_id = q.chunk_id join sift.documents d on d.document_id = k.document_id' end,
        case when fpath is null then ''
             else 'and pg_catalog.jsonb_path_match_tz(d.metadata, $3, ''{}'', true)' end,
        dims,
        case when small then 'order by 3, 1, 2' else walk end);
    if not small then
        -- Transaction-local and restored right after, as the dense leg does.
        perform set_config('hnsw.ef_search', sift._hnsw_ef_search(ef_search, n * 5)::text, true);
        if iterative then
            perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
        end if;
        execute format('select array_agg(l.chunk_id order by l.d, l.chunk_id), '
                       'array_agg(l.ordinal order by l.d, l.chunk_id), array_agg(l.d order by l.d, l.chunk_id) '
                       'from (%s) l', sql)
            into ids, ords, dists
            using query, collection_id, fpath, n;
        perform set_config('hnsw.ef_search', coalesce(saved_ef, '40'), true);
        if iterative then
            perform set_config('hnsw.iterative_scan', coalesce(saved_it, 'off'), true);
        end if;
        if coalesce(cardinality(ids), 0) >= n then
            return query select u.id, u.o, u.d from unnest(ids, ords, dists) as u(id, o, d) order by u.d, u.id;
            return;
        end if;
        -- The index walk came back short: the exact scan answers instead.
        sql := replace(sql, walk, 'order by 3, 1, 2');
    end if;
    return query execute sql using query, collection_id, fpath, n;
end;
$$;
comment on function sift._question_leg(bigint, integer, text, @extschema:vector@.vector, jsonb, integer, integer,
    integer) is
    'Internal: the n chunks nearest the query by their best question vector, inside the metadata '
    'filter, with which question and its distance: exact for a collection with at most '
    'exact_search_limit question vectors, else the partial HNSW index of their size (ef_search: '
    'the hnsw_ef_search knob, at least 5n).';

