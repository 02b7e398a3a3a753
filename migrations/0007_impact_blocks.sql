-- pgsift 0007: impact lists stored in blocks, bounded in length.
--
-- 0002 kept one row (plus two index entries) per posting and made a very
-- common term's list a tenth of its chunks long, so the threshold algorithm
-- could prove the top k exactly. At a million chunks that is tens of
-- thousands of index tuples per query term and ~20 KB of lists per chunk.
-- Now a list is at most list_size chunks (2,000 by default) stored as
-- blocks of 100 postings in impact order: one row holds a block's chunk ids,
-- term frequencies and lengths as arrays, and the best impact in it, so
-- reading a list to a depth is a few row fetches. sift.term_deltas replaces
-- sift.term_postings as the list's delta: chunks written since the list was
-- built that beat its floor, one row per writing statement and term (arrays
-- again, so a batch of chunks adds a row per term, not per chunk and term).
-- sift.refresh_lexical_stats merges a delta into blocks once it holds a
-- block's worth. Deleted chunks stay in lists until they are rebuilt (the
-- leg scores candidates against sift.chunks, so they never come back);
-- deletions are counted so refresh can rebuild lists that have gone stale.

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

alter table sift.term_lists
    add column entries     integer not null default 0,  -- chunks in its blocks
    add column chunks_ref  bigint not null default 0,   -- live chunks when the list was built
    add column deleted_ref bigint not null default 0;   -- deletions counted by then
alter table sift.collection_lexical_stats
    add column deleted bigint not null default 0;

create table sift.term_deltas (
    collection_id bigint not null,
    lexeme        text not null,
    chunk_ids     bigint[] not null,
    tfs           real[] not null,
    dls           integer[] not null,
    foreign key (collection_id, lexeme) references sift.term_lists on delete cascade
);
create index term_deltas_term_idx on sift.term_deltas (collection_id, lexeme);

-- Existing lists move into blocks (their postings were exactly the lists).
insert into sift.term_blocks (collection_id, lexeme, block_no, max_impact, chunk_ids, tfs, dls)
select p.collection_id, p.lexeme, (p.rn - 1) / 100, max(p.impact),
       array_agg(p.chunk_id order by p.rn), array_agg(p.tf order by p.rn), array_agg(p.dl order by p.rn)
from (select t.*, row_number() over (partition by t.collection_id, t.lexeme
                                     order by t.impact desc, t.chunk_id) as rn
      from sift.term_postings t) p
group by p.collection_id, p.lexeme, (p.rn - 1) / 100;
drop table sift.term_postings;
update sift.term_lists l
set chunks_ref = coalesce((select sum(s.chunks) from sift.collection_lexical_stats s
                           where s.collection_id = l.collection_id), 0),
    entries = coalesce((select sum(cardinality(b.chunk_ids)) from sift.term_blocks b
                        where b.collection_id = l.collection_id and b.lexeme = l.lexeme), 0);

-- Lists are now built by sift._gather_list_entries and sift._write_lists.
drop function if exists sift._build_term_list(bigint, text, integer, double precision,
    double precision, double precision);

-- Work tables for sift.refresh_lexical_stats (lists to build, and the chunks
-- gathered for them), per collection, emptied when a refresh ends. Unlogged:
-- nothing in them outlives the refresh that wrote it. Not temporary tables:
-- pgsift creates none (see DESIGN: hot standbys, poolers).
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
