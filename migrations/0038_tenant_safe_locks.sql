-- pgsift 0038: no tenant can stall another through pgsift's own locks
-- (issue 37 item 2).
--
-- Every lock pgsift took was an advisory lock on a key anyone could compute:
-- pg_advisory_lock and hashtextextended are PUBLIC's, collection ids are
-- sequential, and pg_locks shows every session's keys anyway. A reader of one
-- tenant holding hashtextextended('pgsift.term_lists', <id>) stalled another
-- tenant's writes, refreshes, space switches and drops; 'pgsift.migrate' hung
-- every migrate; 'pgsift.clean_text_index' made every refresh skip its
-- cleanup; 'pgsift.index_requests:<tenant>' blocked another tenant's new
-- collection sizes (an admin could take that one by an insert refused by
-- row-level security, left open: the trigger locked before the policy ran).
--
-- pgsift's locks are now row and table locks that only their owners can take:
--
-- - sift.collection_locks, a row per collection (the collections' insert
--   trigger makes it; rows for the collections there are now made below),
--   under the same row-level security as the collection's other rows: its
--   writers lock it for key share, a list build, space switch or drop for
--   update (sift._lock_collection). A tenant cannot see, so cannot lock,
--   another tenant's row, and no table references it (a foreign key check
--   locks as the owner, past the policies).
-- - sift.tenant_locks, a row per tenant that asked for an HNSW index: its
--   index requests take it in turn, after the trigger has checked that the
--   request is the tenant's own.
-- - sift.operator_locks, rows no role but the owner may read or lock: the
--   text index's cleaner tries its row (security definer, as the owner).
-- - migrate serializes on a lock of sift.schema_migrations, on which no role
--   but the owner has any privilege (so no other role can LOCK it).
--
-- The advisory key function goes; the function files make the rest.

create table sift.collection_locks (
    collection_id bigint primary key references sift.collections (collection_id) on delete cascade
);
comment on table sift.collection_locks is
    'One row per collection, locked and never written: the collection''s chunk writers hold it for '
    'key share, a list build (sift.refresh_lexical_stats), a vector space switch or drop and a '
    'collection''s drop for update (sift._lock_collection), so none of these runs while the '
    'collection''s chunks change. Row-level security keeps every tenant to its own rows.';
comment on column sift.collection_locks.collection_id is 'The collection this row orders the work of.';
alter table sift.collection_locks enable row level security;

insert into sift.collection_locks (collection_id)
select c.collection_id from sift.collections c order by c.collection_id;

create table sift.tenant_locks (
    tenant sift.name primary key
);
comment on table sift.tenant_locks is
    'One row per tenant that asked for an HNSW index, locked and never written: a tenant''s index '
    'requests take it in turn (sift.index_requests'' trigger), so two cannot both pass its limits. '
    'Row-level security keeps every tenant to its own row.';
comment on column sift.tenant_locks.tenant is 'The tenant whose index requests this row orders.';
alter table sift.tenant_locks enable row level security;

create table sift.operator_locks (
    name text primary key
);
comment on table sift.operator_locks is
    'Rows locked by the operator''s own upkeep, never written: no role but the owner may read or '
    'lock them (no grant). clean_text_index: one cleaner of the text index at a time '
    '(sift._clean_text_index, which skips while another holds it).';
comment on column sift.operator_locks.name is 'The upkeep step the row orders.';
insert into sift.operator_locks (name) values ('clean_text_index');

drop function if exists sift._lists_lock_key(bigint);
