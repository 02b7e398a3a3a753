-- pgsift 0028: a list's delta rows go with the list by a statement trigger
-- (sift._term_lists_gone), not a foreign key. The key's check ran once per
-- delta row a write statement added (~1,000 a document of 20 chunks at
-- 30,000 chunks), each locking the list's row FOR KEY SHARE: a write to its
-- page and a WAL record, ~7-10% of a one-document write (bench/README).
-- Nothing needs the check: writers add delta rows only for lists they join
-- in the same statement, and a list is dropped or rebuilt only by a builder
-- holding the collection alone (sift._lock_collection), so no delta row can
-- outlive its list between the two.
do $$
declare
    fk name;
begin
    for fk in
        select c.conname from pg_catalog.pg_constraint c
        where c.conrelid = 'sift.term_deltas'::pg_catalog.regclass and c.contype = 'f'
          and c.confrelid = 'sift.term_lists'::pg_catalog.regclass
    loop
        execute pg_catalog.format('alter table sift.term_deltas drop constraint %I', fk);
    end loop;
end;
$$;
