-- pgsift 0002: Okapi BM25 for the lexical leg.
--
-- Statistics are an append-only ledger: every statement that writes chunks
-- adds one row of deltas per collection (chunk and token counts, and the
-- lexemes with their document counts), in the same transaction as the chunks,
-- so they are exact under MVCC with no row that concurrent writers would
-- queue on. sift.refresh_lexical_stats folds pending rows; readers add
-- whatever is still pending, so the numbers are exact whether or not a
-- refresh has run, only faster after it.
--
-- Common terms additionally get an impact-ordered list of their best chunks
-- (sift.term_postings), so the lexical leg reads top-k from an index instead
-- of scoring every matching row.

create domain sift.lexical_scorer as text
    constraint lexical_scorer_known check (value in ('bm25', 'ts_rank_cd'));
create domain sift.bm25_k1 as double precision
    constraint bm25_k1_range check (value >= 0 and value <= 10);
create domain sift.bm25_b as double precision
    constraint bm25_b_range check (value >= 0 and value <= 1);

-- Defaults chosen on SciFact's train split (bench/README.md has the sweeps):
-- BM25 k1 = 1.2, b = 0.4; with BM25 in place the fusion defaults move from
-- the seeds' w = 0.7, k = 60 to w = 0.45, k = 5 (fetch_k stays 40).
-- Existing collections keep the values they have.
alter table sift.collections
    add column lexical_scorer sift.lexical_scorer not null default 'bm25',
    add column bm25_k1 sift.bm25_k1 not null default 1.2,
    add column bm25_b sift.bm25_b not null default 0.4,
    alter column dense_weight set default 0.45,
    alter column rrf_k set default 5;

-- Document length for BM25: token positions in the stored search_vector.
alter table sift.chunks add column lexical_length integer;
update sift.chunks c
set lexical_length = (select coalesce(sum(pg_catalog.array_length(u.positions, 1)), 0)
                      from pg_catalog.unnest(c.search_vector) u);
alter table sift.chunks alter column lexical_length set not null;

create table sift.collection_lexical_stats (
    collection_id bigint not null references sift.collections on delete cascade,
    chunks        bigint not null,
    tokens        bigint not null,
    pending       boolean not null default true
);
create index collection_lexical_stats_idx on sift.collection_lexical_stats (collection_id);

-- Document frequencies: folded counts, plus one pending row per writing
-- statement (its lexemes and their chunk counts as two sorted arrays), so a
-- writer adds one row however many lexemes its chunks hold.
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

-- Impact-ordered lists for common terms. A term has a list when it has a row
-- in term_lists; every chunk missing from its postings has an impact (at the
-- list's reference avgdl, k1 and b) of at most floor_impact.
create table sift.term_lists (
    collection_id bigint not null references sift.collections on delete cascade,
    lexeme        text not null,
    floor_impact  double precision not null,
    avgdl_ref     double precision not null,
    k1_ref        double precision not null,
    b_ref         double precision not null,
    built_at      timestamptz not null default now(),
    primary key (collection_id, lexeme)
);

create table sift.term_postings (
    collection_id bigint not null,
    lexeme        text not null,
    -- No foreign key to chunks: a key check would lock chunk rows while a list is
    -- built and deadlock with writers; the delete trigger removes postings instead.
    chunk_id      bigint not null,
    impact        double precision not null,   -- at the list's reference avgdl, k1, b
    tf            real not null,               -- so the exact impact needs no chunk read
    dl            integer not null,
    foreign key (collection_id, lexeme) references sift.term_lists on delete cascade
);
create index term_postings_impact_idx
    on sift.term_postings (collection_id, lexeme, impact desc, chunk_id);
create index term_postings_chunk_idx on sift.term_postings (chunk_id);

-- Statistics for chunks that already exist.
insert into sift.collection_lexical_stats (collection_id, chunks, tokens)
select c.collection_id, count(*), sum(c.lexical_length) from sift.chunks c group by 1;
insert into sift.term_df (collection_id, lexeme, df)
select c.collection_id, u.lexeme, count(*)
from sift.chunks c, pg_catalog.unnest(c.search_vector) u group by 1, 2;

-- Signatures this release replaces (sql/ re-creates the new ones right after).
drop function if exists sift.search(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit);
drop function if exists sift.explain(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, bigint[]);
drop function if exists sift.candidates(text, text, vector, sift.match_count, text, jsonb, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit);
drop function if exists sift._legs(sift.collections, text, boolean, boolean);
drop function if exists sift._lexical_leg(bigint[], tsquery, jsonb, integer);
drop function if exists sift.create_collection(text, integer, text, text, sift.distance, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, text);
drop function if exists sift.alter_collection(text, text, text, boolean, sift.dense_weight,
    sift.rrf_k, sift.fetch_k, sift.exact_search_limit, text);
