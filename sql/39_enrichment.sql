-- Enrichment at ingest (pgsift.enrich): what a language model wrote for each
-- chunk, kept apart from the chunk's text (sift.chunk_enrichments), and what
-- each ingestion of a document spent (sift.enrichment_runs). The calls are the
-- client's (index time only, never at query time); these triggers tie each row
-- to its chunk or document as the caller sees it.
-- In: what the client's enrichment wrote for a chunk or document. Out: the
-- rows, tied to a chunk or document the caller's tenant has (SF006
-- otherwise; a blank question SF003).


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
