-- pgsift 0021 (before the squash of release 0.2.0: 0035): references stay
-- within their tenant. A foreign key is checked as the table's owner, past
-- row-level security: a golden positive took any chunk id, another tenant's
-- included (its trigger, which sees what the caller sees, skipped a chunk it
-- could not see), and an evaluation run any golden set id; a missing id got
-- 23503 instead, which told a tenant which ids another tenant has. Marking the
-- question as having no answer then made the other tenant's deletion of that
-- chunk fail (the key's ON DELETE SET NULL ran into the positives' trigger).
-- The triggers (sql/70_evaluation.sql) now check each reference as the caller
-- sees it and refuse an invisible one exactly like a missing one; unbinding is
-- never refused.
--
-- Rows written before: a positive bound to a chunk outside its golden set's
-- collection is unbound (its text stays: sift.rebind_golden_set binds it
-- within the collection), and a run that names a golden set of another
-- collection keeps only the set's name, as when the set is deleted. The
-- positives' trigger goes first (the function files re-create it after the
-- migrations): the one an upgrade finds would refuse this very update for a
-- question marked as having no answer.

drop trigger if exists golden_positives_before_write on sift.golden_positives;

update sift.golden_positives p
set chunk_id = null
where p.chunk_id is not null
  and not exists (
      select 1
      from sift.golden_questions q
      join sift.golden_sets s on s.golden_set_id = q.golden_set_id
      join sift.chunks k on k.collection_id = s.collection_id
      where q.question_id = p.question_id and k.chunk_id = p.chunk_id);

update sift.eval_runs r
set golden_set_id = null
where r.golden_set_id is not null
  and not exists (
      select 1 from sift.golden_sets s
      where s.golden_set_id = r.golden_set_id and s.collection_id = r.collection_id);

comment on column sift.golden_positives.chunk_id is
    'The chunk that holds the text, one of the golden set''s collection; null when none does any '
    'more or the binding was ambiguous (it then counts as relevant and never found).';
comment on column sift.eval_runs.golden_set_id is
    'The golden set scored, one of the run''s collection; null once it is deleted (the name stays '
    'in golden_set).';
