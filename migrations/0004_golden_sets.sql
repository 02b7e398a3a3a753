-- pgsift 0004: golden sets (labelled questions per collection) and the
-- history of evaluation runs.
--
-- A golden set belongs to one collection (so to one tenant): every lookup goes
-- through the collection, and dropping the collection drops its sets and runs.
-- A positive keeps its text as well as its chunk: re-chunking or re-ingesting
-- deletes the chunk (chunk_id becomes null) and sift.rebind_golden_set finds
-- the chunk that now holds the text.

create table sift.golden_sets (
    golden_set_id bigint generated always as identity primary key,
    collection_id bigint not null references sift.collections on delete cascade,
    name          text not null
                  constraint golden_set_name_not_blank check (btrim(name) <> ''),
    -- What a positive stands for when scoring: the chunk itself, or its whole
    -- document (a hit on any chunk of a relevant document counts, once).
    judged_at     text not null default 'chunk'
                  constraint judged_at_known check (judged_at in ('chunk', 'document')),
    source        text,
    description   text,
    created_at    timestamptz not null default now(),
    constraint golden_sets_collection_name_key unique (collection_id, name)
);

create table sift.golden_questions (
    question_id   bigint generated always as identity primary key,
    golden_set_id bigint not null references sift.golden_sets on delete cascade,
    question_key  text not null
                  constraint question_key_not_blank check (btrim(question_key) <> ''),
    question      text not null
                  constraint question_not_blank check (btrim(question) <> ''),
    -- false: the collection holds no answer (the question must have no positive).
    answerable    boolean not null default true,
    -- The query vector when it came with the set (BEIR with precomputed
    -- embeddings); null: the evaluating client's embedder computes it.
    embedding     vector,
    metadata      jsonb not null default '{}'
                  constraint question_metadata_is_object check (jsonb_typeof(metadata) = 'object'),
    constraint golden_questions_set_key_key unique (golden_set_id, question_key)
);

create table sift.golden_positives (
    positive_id bigint generated always as identity primary key,
    question_id bigint not null references sift.golden_questions on delete cascade,
    -- null: no chunk holds the text any more (re-chunked, deleted) or the
    -- binding was ambiguous; sift.rebind_golden_set tries again.
    chunk_id    bigint references sift.chunks on delete set null,
    source_uri  text,
    content     text not null
                constraint positive_content_not_blank check (btrim(content) <> ''),
    grade       integer not null default 1
                constraint grade_range check (grade between 1 and 100)
);
create index golden_positives_question_idx on sift.golden_positives (question_id);
-- Deleting chunks (every re-ingest does) looks positives up by chunk.
create index golden_positives_chunk_idx on sift.golden_positives (chunk_id);

create table sift.eval_runs (
    run_id        bigint generated always as identity primary key,
    collection_id bigint not null references sift.collections on delete cascade,
    -- The set's name is kept too: re-importing a set keeps its history.
    golden_set_id bigint references sift.golden_sets on delete set null,
    golden_set    text not null,
    -- 'pipeline' (what search does), 'dense' / 'lexical' (baselines), or
    -- 'sweep <knob>=<value>'; a run's delta is against the previous run with
    -- the same golden set, k and label.
    label         text not null
                  constraint label_not_blank check (btrim(label) <> ''),
    k             integer not null
                  constraint k_range check (k between 1 and 1000),
    settings      jsonb not null default '{}'
                  constraint settings_is_object check (jsonb_typeof(settings) = 'object'),
    metrics       jsonb not null
                  constraint metrics_is_object check (jsonb_typeof(metrics) = 'object'),
    created_at    timestamptz not null default now()
);
create index eval_runs_collection_idx on sift.eval_runs (collection_id, run_id);
create index eval_runs_golden_set_idx on sift.eval_runs (golden_set_id);
