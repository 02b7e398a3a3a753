-- pgsift 0001: the tables.
--
-- Runs once (recorded in sift.schema_migrations); never edit after release:
-- add a new numbered file instead. The installer runs it with
-- search_path = pg_catalog, pg_temp and replaces @extschema:vector@ with the
-- schema the vector extension lives in (public, extensions, ...), so nothing
-- here resolves through a schema another role can create objects in.
--
-- Knob values, their domains and defaults: 0002_contract.sql. Tenancy (roles,
-- row-level security): 0003_trust.sql.

-- Names a user types: bounded, so an index entry always fits and a typo of
-- 10,000 characters is a clear error rather than "index row requires ...".
create domain sift.name as text
    constraint name_shape check (btrim(value) <> '' and length(value) <= 128);
create domain sift.distance as text
    constraint distance_valid check (value in ('cosine', 'l2', 'inner_product'));
create domain sift.match_count as integer
    constraint match_count_valid check (value between 0 and 1000);

create table sift.collections (
    collection_id   bigint generated always as identity primary key,
    tenant          sift.name not null,
    name            sift.name not null,
    search_language regconfig not null default 'english',
    embedding_dims  integer not null
                    constraint embedding_dims_valid check (embedding_dims between 1 and 2000),
    distance        sift.distance not null default 'cosine',
    description     text constraint description_length check (length(description) <= 10000),
    -- The knob values set for this collection (absent: the default of
    -- sift.knob_defs); a trigger casts each to its domain before it stores.
    knobs           jsonb not null default '{}'
                    constraint knobs_is_object check (jsonb_typeof(knobs) = 'object'),
    reranker_alias  sift.name,
    created_at      timestamptz not null default now(),
    constraint collections_tenant_name_key unique (tenant, name)
);

create table sift.documents (
    document_id   bigint generated always as identity primary key,
    collection_id bigint not null references sift.collections on delete cascade,
    source_uri    text not null
                  constraint source_uri_shape
                  check (btrim(source_uri) <> '' and octet_length(source_uri) <= 2048),
    title         text constraint title_length check (length(title) <= 10000),
    language      text constraint language_length check (length(language) <= 64),
    metadata      jsonb not null default '{}'
                  constraint metadata_is_object check (jsonb_typeof(metadata) = 'object'),
    created_at    timestamptz,
    modified_at   timestamptz,
    uploaded_at   timestamptz not null default now(),
    constraint documents_collection_source_key unique (collection_id, source_uri)
);
create index documents_metadata_idx on sift.documents using gin (metadata jsonb_path_ops);

create table sift.chunks (
    chunk_id       bigint generated always as identity primary key,
    document_id    bigint not null references sift.documents on delete cascade,
    -- Denormalised from the document (set by trigger) so both legs filter
    -- by collection without a join.
    collection_id  bigint not null references sift.collections on delete cascade,
    ordinal        integer not null constraint ordinal_non_negative check (ordinal >= 0),
    content        text not null,
    context        text,
    token_count    integer constraint token_count_non_negative check (token_count >= 0),
    embedding      @extschema:vector@.vector not null,
    search_vector  tsvector not null,
    -- BM25's document length: token positions in search_vector.
    lexical_length integer not null,
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

-- BM25 statistics: an append-only ledger. Every statement that writes chunks
-- adds one row of deltas per collection in the same transaction (exact under
-- MVCC, no row that concurrent writers queue on); sift.refresh_lexical_stats
-- folds them, and readers add whatever is still pending.
create table sift.collection_lexical_stats (
    collection_id bigint not null references sift.collections on delete cascade,
    chunks        bigint not null,
    tokens        bigint not null,
    deleted       bigint not null default 0,
    pending       boolean not null default true
);
create index collection_lexical_stats_idx on sift.collection_lexical_stats (collection_id);

-- Document frequencies: folded counts, plus one pending row per writing
-- statement (its lexemes and their chunk counts as two sorted arrays).
create table sift.term_df (
    collection_id bigint not null references sift.collections on delete cascade,
    lexeme        text not null,
    df            bigint not null,
    primary key (collection_id, lexeme)
);
create table sift.term_df_pending (
    collection_id bigint not null references sift.collections on delete cascade,
    lexemes       text[] not null,
    counts        bigint[] not null
);
create index term_df_pending_idx on sift.term_df_pending (collection_id);

-- Impact lists for common terms: a term's best chunks (at most list_size) in
-- blocks of 100 in impact order; every chunk outside the list has an impact
-- (at the list's reference avgdl, k1 and b) of at most floor_impact.
create table sift.term_lists (
    collection_id bigint not null references sift.collections on delete cascade,
    lexeme        text not null,
    floor_impact  double precision not null,
    avgdl_ref     double precision not null,
    k1_ref        double precision not null,
    b_ref         double precision not null,
    entries       integer not null default 0,   -- chunks in its blocks
    chunks_ref    bigint not null default 0,    -- live chunks when the list was built
    deleted_ref   bigint not null default 0,    -- deletions counted by then
    built_at      timestamptz not null default now(),
    primary key (collection_id, lexeme)
);
create table sift.term_blocks (
    collection_id bigint not null,
    lexeme        text not null,
    block_no      integer not null,
    max_impact    double precision not null,   -- the block's best impact, at the list's reference
    chunk_ids     bigint[] not null,
    tfs           real[] not null,
    dls           integer[] not null,
    primary key (collection_id, lexeme, block_no),
    foreign key (collection_id, lexeme) references sift.term_lists on delete cascade
);
-- Chunks written since a list was built that beat its floor, one row per
-- writing statement and term; refresh merges them into blocks.
create table sift.term_deltas (
    collection_id bigint not null,
    lexeme        text not null,
    chunk_ids     bigint[] not null,
    tfs           real[] not null,
    dls           integer[] not null,
    foreign key (collection_id, lexeme) references sift.term_lists on delete cascade
);
create index term_deltas_term_idx on sift.term_deltas (collection_id, lexeme);

-- Work tables of sift.refresh_lexical_stats, emptied when a refresh ends.
-- Unlogged: nothing in them outlives the refresh that wrote it. Not
-- temporary tables: pgsift creates none (hot standbys, poolers).
create unlogged table sift.list_build_plan (
    collection_id bigint not null,
    lexeme        text not null,
    size          integer not null,
    floor_min     double precision not null,
    avgdl_ref     double precision not null,
    k1_ref        double precision not null,
    b_ref         double precision not null,
    chunks_ref    bigint not null,
    deleted_ref   bigint not null,
    primary key (collection_id, lexeme)
);
create unlogged table sift.list_build_entries (
    collection_id bigint not null,
    lexeme        text not null,
    chunk_id      bigint not null,
    tf            real not null,
    dl            integer not null
);

-- Golden sets: labelled questions per collection, and the history of
-- evaluation runs. A positive keeps its text as well as its chunk, so
-- sift.rebind_golden_set finds the chunk that holds it after a re-chunk.
create table sift.golden_sets (
    golden_set_id bigint generated always as identity primary key,
    collection_id bigint not null references sift.collections on delete cascade,
    name          sift.name not null,
    judged_at     text not null default 'chunk'
                  constraint judged_at_valid check (judged_at in ('chunk', 'document')),
    source        text,
    description   text,
    created_at    timestamptz not null default now(),
    constraint golden_sets_collection_name_key unique (collection_id, name)
);
create table sift.golden_questions (
    question_id   bigint generated always as identity primary key,
    golden_set_id bigint not null references sift.golden_sets on delete cascade,
    question_key  text not null
                  constraint question_key_shape check (btrim(question_key) <> '' and length(question_key) <= 512),
    question      text not null
                  constraint question_not_blank check (btrim(question) <> ''),
    -- false: the collection holds no answer (the question must have no positive).
    answerable    boolean not null default true,
    -- The query vector when it came with the set; null: the client embeds it.
    embedding     @extschema:vector@.vector,
    metadata      jsonb not null default '{}'
                  constraint question_metadata_is_object check (jsonb_typeof(metadata) = 'object'),
    constraint golden_questions_set_key_key unique (golden_set_id, question_key)
);
create table sift.golden_positives (
    positive_id bigint generated always as identity primary key,
    question_id bigint not null references sift.golden_questions on delete cascade,
    -- null: no chunk holds the text any more, or the binding was ambiguous.
    chunk_id    bigint references sift.chunks on delete set null,
    source_uri  text,
    content     text not null
                constraint positive_content_not_blank check (btrim(content) <> ''),
    grade       integer not null default 1
                constraint grade_valid check (grade between 1 and 100)
);
create index golden_positives_question_idx on sift.golden_positives (question_id);
create index golden_positives_chunk_idx on sift.golden_positives (chunk_id);

create table sift.eval_runs (
    run_id        bigint generated always as identity primary key,
    collection_id bigint not null references sift.collections on delete cascade,
    -- The set's name is kept too: re-importing a set keeps its history.
    golden_set_id bigint references sift.golden_sets on delete set null,
    golden_set    text not null,
    -- 'pipeline', 'dense' / 'lexical' (baselines) or 'sweep <knob>=<value>'.
    label         text not null
                  constraint label_shape check (btrim(label) <> '' and length(label) <= 512),
    k             integer not null constraint k_valid check (k between 1 and 1000),
    settings      jsonb not null default '{}'
                  constraint settings_is_object check (jsonb_typeof(settings) = 'object'),
    metrics       jsonb not null
                  constraint metrics_is_object check (jsonb_typeof(metrics) = 'object'),
    created_at    timestamptz not null default now()
);
create index eval_runs_collection_idx on sift.eval_runs (collection_id, run_id);
create index eval_runs_golden_set_idx on sift.eval_runs (golden_set_id);

-- Rerankers. The rerank call is the one step that leaves the database, so it
-- runs in the client; these tables say which reranker a search uses and
-- record what each call cost. No table holds a secret.
create domain sift.rerank_timeout_ms as integer
    constraint rerank_timeout_ms_valid check (value between 50 and 60000);
create domain sift.rerank_deadline_ms as integer
    constraint rerank_deadline_ms_valid check (value between 50 and 60000);
create domain sift.rerank_attempts as integer
    constraint rerank_attempts_valid check (value between 1 and 5);
create domain sift.rerank_context_chars as integer
    constraint rerank_context_chars_valid check (value between 0 and 100000);

-- The providers pgsift can call: the one list, read by the CHECKs here and by
-- the Python client (pgsift.rerankers has one implementation per row).
create table sift.reranker_providers (
    provider       text primary key,
    default_model  text not null,
    -- Hosted providers bill an account: they need a key.
    needs_secret   boolean not null,
    -- No public endpoint (a self-hosted server): base_url is required.
    needs_base_url boolean not null,
    description    text not null
);
insert into sift.reranker_providers values
    ('voyage', 'rerank-2', true, false, 'Voyage AI rerank (official voyageai client)'),
    ('cohere', 'rerank-v3.5', true, false, 'Cohere v2 rerank (official cohere client)'),
    ('tei', 'tei', false, true, 'Text Embeddings Inference /rerank (self-hosted, over httpx)');

create table sift.rerankers (
    reranker_id   bigint generated always as identity primary key,
    tenant        sift.name not null,
    alias         sift.name not null,
    provider      text not null references sift.reranker_providers,
    model         text not null
                  constraint reranker_model_shape check (btrim(model) <> '' and length(model) <= 200),
    -- null: the provider's public endpoint. Another host only where the
    -- operator allows it (sift.allowed_endpoints).
    -- No user name or password before the host: http://ok.example:1@evil.example/ goes to evil.
    base_url      text
                  constraint reranker_base_url_http
                  check (base_url ~ '^https?://[^\s/?#@\\]+([/?#][^\s]*)?$' and length(base_url) <= 2048),
    -- A name the operator maps to this tenant's key (sift.secret_mappings):
    -- never the key, never a variable of the client process.
    secret_ref    text
                  constraint reranker_secret_ref_is_a_name check (secret_ref ~ '^[a-z][a-z0-9_.-]{0,63}$'),
    -- Their defaults are sift.register_reranker's.
    timeout_ms    sift.rerank_timeout_ms not null,
    deadline_ms   sift.rerank_deadline_ms not null,
    max_attempts  sift.rerank_attempts not null,
    context_chars sift.rerank_context_chars not null,
    is_default    boolean not null default false,
    created_at    timestamptz not null default now(),
    constraint rerankers_tenant_alias_key unique (tenant, alias),
    constraint reranker_timeout_within_deadline check (timeout_ms <= deadline_ms)
);
-- At most one default reranker per tenant: it scores searches over
-- collections that name different rerankers.
create unique index rerankers_one_default_per_tenant on sift.rerankers (tenant) where is_default;

-- A collection can only name a reranker of its own tenant: the key includes
-- the tenant.
alter table sift.collections
    add constraint collections_reranker_fkey foreign key (tenant, reranker_alias)
        references sift.rerankers (tenant, alias);
create index collections_reranker_idx on sift.collections (tenant, reranker_alias)
    where reranker_alias is not null;

-- One row per rerank call that left the process. A failed call is recorded
-- as failed and never as billed.
create table sift.rerank_usage (
    usage_id       bigint generated always as identity primary key,
    tenant         sift.name not null,
    reranker_alias text,
    provider       text not null,
    model          text not null,
    documents      integer not null constraint usage_documents_non_negative check (documents >= 0),
    -- What the provider reported (null: nothing): Voyage's total_tokens,
    -- Cohere's input tokens, TEI's x-compute-tokens header.
    tokens         bigint constraint usage_tokens_non_negative check (tokens >= 0),
    -- Cohere bills search units, not tokens.
    search_units   double precision constraint usage_search_units_non_negative check (search_units >= 0),
    latency_ms     double precision not null constraint usage_latency_non_negative check (latency_ms >= 0),
    attempts       integer not null default 1 constraint usage_attempts_positive check (attempts >= 1),
    ok             boolean not null,
    billed         boolean not null,
    error          text,
    created_at     timestamptz not null default now(),
    constraint usage_failed_never_billed check (ok or not billed),
    constraint usage_failed_says_why check (ok or error is not null)
);
create index rerank_usage_tenant_idx on sift.rerank_usage (tenant, created_at);
