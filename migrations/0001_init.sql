-- pgsift 0001: collections, documents, chunks.
-- Runs once (recorded in sift.schema_migrations); never edit after release:
-- add a new numbered file instead. The installer has already created schema
-- sift and put the vector extension's schema on the search_path.

create extension if not exists vector;

-- Knobs are domains, so one CHECK guards both the stored collection setting
-- and every per-call override passed to sift.search (a bad value is refused
-- by the database, with the knob's name in the constraint).
create domain sift.dense_weight as double precision
    constraint dense_weight_range check (value >= 0 and value <= 1);
create domain sift.rrf_k as double precision
    constraint rrf_k_positive check (value > 0 and value <= 100000);
create domain sift.fetch_k as integer
    constraint fetch_k_range check (value between 1 and 1000);
create domain sift.match_count as integer
    constraint match_count_range check (value between 0 and 1000);
create domain sift.exact_search_limit as integer
    constraint exact_search_limit_range check (value between 0 and 1000000);
create domain sift.distance as text
    constraint distance_known check (value in ('cosine', 'l2', 'inner_product'));

create table sift.collections (
    collection_id      bigint generated always as identity primary key,
    tenant             text not null default 'default'
                       constraint tenant_not_blank check (btrim(tenant) <> ''),
    name               text not null
                       constraint name_not_blank check (btrim(name) <> ''),
    search_language    regconfig not null default 'english',
    embedding_dims     integer not null
                       constraint embedding_dims_range check (embedding_dims between 1 and 2000),
    distance           sift.distance not null default 'cosine',
    hybrid             boolean not null default true,
    dense_weight       sift.dense_weight not null default 0.7,
    rrf_k              sift.rrf_k not null default 60,
    fetch_k            sift.fetch_k not null default 40,
    exact_search_limit sift.exact_search_limit not null default 10000,
    description        text,
    created_at         timestamptz not null default now(),
    constraint collections_tenant_name_key unique (tenant, name)
);

create table sift.documents (
    document_id  bigint generated always as identity primary key,
    collection_id bigint not null references sift.collections on delete cascade,
    source_uri   text not null
                 constraint source_uri_not_blank check (btrim(source_uri) <> ''),
    title        text,
    language     text,
    metadata     jsonb not null default '{}'
                 constraint metadata_is_object check (jsonb_typeof(metadata) = 'object'),
    created_at   timestamptz,
    modified_at  timestamptz,
    uploaded_at  timestamptz not null default now(),
    constraint documents_collection_source_key unique (collection_id, source_uri)
);
create index documents_metadata_idx on sift.documents using gin (metadata jsonb_path_ops);

create table sift.chunks (
    chunk_id      bigint generated always as identity primary key,
    document_id   bigint not null references sift.documents on delete cascade,
    -- Denormalised from the document (set by trigger) so both legs filter
    -- by collection without a join.
    collection_id bigint not null references sift.collections on delete cascade,
    ordinal       integer not null constraint ordinal_non_negative check (ordinal >= 0),
    content       text not null,
    context       text,
    token_count   integer constraint token_count_non_negative check (token_count >= 0),
    embedding     vector not null,
    search_vector tsvector not null,
    constraint chunks_document_ordinal_key unique (document_id, ordinal)
);
-- Keep vectors inline (pgvector's own advice): out-of-line TOAST costs about
-- three buffer reads per row in an exact scan.
alter table sift.chunks alter column embedding set storage main;
create index chunks_collection_idx on sift.chunks (collection_id);
create index chunks_search_vector_idx on sift.chunks using gin (search_vector);
-- HNSW indexes are per (dimension, distance): pgvector indexes need a fixed
-- dimension, so sift.create_collection adds one partial expression index
-- per pair the first time a collection needs it.
