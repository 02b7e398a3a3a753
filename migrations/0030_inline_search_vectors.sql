-- pgsift 0030: search vectors stay in the chunk's row. A chunk of a few
-- hundred words has a stored vector of ~1.5-3 kB; with its text and a
-- 384-dimension embedding the row passed PostgreSQL's 2 kB TOAST target, and
-- the vector went out of line. Every chunk the lexical leg scores from its
-- vector (rare terms, threshold candidates, exhaustive fallbacks) then paid
-- a TOAST lookup: ~5 us of the ~11 us a chunk costs. Storage main keeps it in
-- the row (the text still moves out first); lexical searches ran 6-12% faster
-- (SciFact and the 100,000-chunk scale corpus).
--
-- A row past ~8 kB moves its largest main column out, and an embedding of
-- more than 1,024 dimensions (4 kB) would then be the one to go; so while a
-- collection has such embeddings the vectors stay out of line (here, and
-- sift._ensure_dense_index switches back when one is created).
-- Rows already written keep their place until rewritten (VACUUM FULL).

do $$
begin
    if not exists (select 1 from sift.collections c where c.embedding_dims > 1024) then
        alter table sift.chunks alter column search_vector set storage main;
    end if;
end;
$$;
