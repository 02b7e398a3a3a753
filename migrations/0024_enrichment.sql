-- pgsift 0024: enrichment at ingest. A language model may write, per chunk,
-- a short context placing it in its document and questions it answers
-- (pgsift.enrich). The chunk's text never changes: what the model wrote is
-- kept apart here, keyed on the chunk's text and the settings, so indexing
-- unchanged text again reuses it and spends nothing; each ingestion of a
-- document records what it spent and its warnings.

create table sift.chunk_enrichments (
    chunk_id       bigint primary key references sift.chunks on delete cascade,
    -- The chunk's (set by trigger), for the policy and the cache lookup.
    collection_id  bigint not null,
    enrichment_key text not null,
    context        text,
    questions      text[] not null default '{}',
    model          text,
    created_at     timestamptz not null default now(),
    constraint chunk_enrichments_questions check (cardinality(questions) <= 5),
    constraint chunk_enrichments_key_shape check (enrichment_key ~ '^[0-9a-f]{64}$')
);
create index chunk_enrichments_key_idx on sift.chunk_enrichments (collection_id, enrichment_key);
alter table sift.chunk_enrichments enable row level security;
comment on table sift.chunk_enrichments is
    'What a language model wrote for a chunk at ingest (pgsift.enrich): a context placing it in its '
    'document and up to 5 questions it answers, kept apart from the chunk''s text; keyed on that '
    'text and the settings, so unchanged text is never sent again. Gone with the chunk.';
comment on column sift.chunk_enrichments.chunk_id is 'The chunk (sift.chunks).';
comment on column sift.chunk_enrichments.collection_id is 'The chunk''s collection (set by the write trigger).';
comment on column sift.chunk_enrichments.enrichment_key is
    'sha256 of the chunk''s text, its document''s text and the enrichment settings (model, prompt, '
    'what was asked for): the cache key.';
comment on column sift.chunk_enrichments.context is 'The model''s context for the chunk (null: none written).';
comment on column sift.chunk_enrichments.questions is 'Questions the chunk answers, as the model wrote them (0 to 5).';
comment on column sift.chunk_enrichments.model is 'The model that wrote them.';
comment on column sift.chunk_enrichments.created_at is 'When they were written.';

create table sift.enrichment_runs (
    run_id        bigint generated always as identity primary key,
    document_id   bigint not null references sift.documents on delete cascade,
    -- The document's (set by trigger).
    collection_id bigint not null,
    model         text,
    chunks        integer not null default 0,
    enriched      integer not null default 0,
    reused        integer not null default 0,
    failed        integer not null default 0,
    skipped       integer not null default 0,
    input_tokens  bigint not null default 0,
    output_tokens bigint not null default 0,
    cost_usd      double precision,
    warnings      text[] not null default '{}',
    created_at    timestamptz not null default now(),
    constraint enrichment_runs_counts check (chunks >= 0 and enriched >= 0 and reused >= 0 and failed >= 0
                                             and skipped >= 0 and input_tokens >= 0 and output_tokens >= 0)
);
create index enrichment_runs_document_idx on sift.enrichment_runs (document_id, run_id);
create index enrichment_runs_collection_idx on sift.enrichment_runs (collection_id, run_id);
alter table sift.enrichment_runs enable row level security;
comment on table sift.enrichment_runs is
    'One row per ingestion of a document with enrichment: what it spent (tokens, cost when the '
    'model''s rates are known) and what went wrong (warnings), readable per document.';
comment on column sift.enrichment_runs.run_id is 'The run.';
comment on column sift.enrichment_runs.document_id is 'The document (sift.documents).';
comment on column sift.enrichment_runs.collection_id is 'The document''s collection (set by the write trigger).';
comment on column sift.enrichment_runs.model is 'The model called.';
comment on column sift.enrichment_runs.chunks is 'Chunks of the document.';
comment on column sift.enrichment_runs.enriched is 'Chunks the model wrote for in this run.';
comment on column sift.enrichment_runs.reused is 'Chunks whose enrichment was reused (unchanged text and settings): no call.';
comment on column sift.enrichment_runs.failed is 'Chunks whose call failed (they keep only the deterministic header).';
comment on column sift.enrichment_runs.skipped is 'Chunks past the document''s token budget (not sent).';
comment on column sift.enrichment_runs.input_tokens is 'Input tokens the provider reported.';
comment on column sift.enrichment_runs.output_tokens is 'Output tokens the provider reported.';
comment on column sift.enrichment_runs.cost_usd is 'What those tokens cost at the model''s rates (null: cannot price).';
comment on column sift.enrichment_runs.warnings is 'What went wrong, one line each (failed calls, malformed output, budget).';
comment on column sift.enrichment_runs.created_at is 'When the run wrote.';
