-- pgsift 0030: search vectors stay in the chunk's row. A chunk of a few
-- hundred words has a stored vector of ~1.5-3 kB; with its text and a
-- 384-dimension embedding the row passed PostgreSQL's 2 kB TOAST target, and
-- the vector went out of line. Every chunk the lexical leg scores from its
-- vector (rare terms, threshold candidates, exhaustive fallbacks) then paid
-- a TOAST lookup, about half of what scoring it costs. Storage main keeps it
-- in the row (the text still moves out first).
--
-- A row past ~8 kB moves its largest main column out, and an embedding of
-- more than 1,024 dimensions (4 kB) would then be the one to go; so while a
-- built-in space has such embeddings the vectors stay out of line (here, and
-- sift._set_search_vector_storage switches back when one is created).
-- Rows already written keep their place until rewritten (VACUUM FULL).
-- The change locks sift.chunks against searches until the migration commits,
-- so it waits 5 s at most for the table; a busy one keeps the old storage
-- (pgsift doctor says so; the ALTER TABLE it prints does it later).

do $$
declare
    saved text := pg_catalog.current_setting('lock_timeout');
begin
    if not exists (select 1 from sift.vector_spaces s where s.builtin and s.dimensions > 1024) then
        perform pg_catalog.set_config('lock_timeout', '5s', true);
        begin
            alter table sift.chunks alter column search_vector set storage main;
        exception when lock_not_available then
            raise notice 'search vectors stay out of line: sift.chunks was busy (see pgsift doctor)';
        end;
        perform pg_catalog.set_config('lock_timeout', saved, true);
    end if;
end;
$$;
