-- The finalize stage's settings of a collection (recency, boost, threshold,
-- per-document cap, MMR, lost-in-the-middle): the function whose name says it writes.

create or replace function sift.alter_ranking(
    collection         text,
    tenant             text default 'default',
    recency_field      sift.recency_field default null,
    recency_half_life  sift.recency_half_life default null,
    recency_weight     sift.recency_weight default null,
    recency_ceiling    sift.recency_ceiling default null,
    per_document_cap   sift.per_document_cap default null,
    mmr_lambda         sift.mmr_lambda default null,
    boost              sift.boost default null,
    score_threshold    sift.score_threshold default null,
    lost_in_the_middle boolean default null,
    reset              text[] default null)
returns sift.collections
language plpgsql volatile security invoker
set search_path from current
as $$
#variable_conflict use_variable
declare
    col     sift.collections := sift._collection(tenant, collection);
    known   text[] := array['recency_field', 'recency_half_life', 'recency_weight',
                            'recency_ceiling', 'per_document_cap', 'mmr_lambda', 'boost',
                            'score_threshold', 'lost_in_the_middle'];
    unknown text[] := array(select r from pg_catalog.unnest(reset) as r where r is null or r <> all (known));
    changed sift.collections;
begin
    if cardinality(unknown) > 0 then
        raise exception 'reset names unknown setting(s): %', unknown
            using errcode = 'SF003', hint = 'settings that can be reset: ' || array_to_string(known, ', ');
    end if;
    -- null leaves a setting as it is; reset puts it back to its default (off
    -- for recency_field, mmr_lambda and score_threshold).
    update sift.collections c set
        recency_field      = case when 'recency_field' = any (reset) then null
                                  else coalesce(recency_field, c.recency_field) end,
        recency_half_life  = case when 'recency_half_life' = any (reset) then '30 days'
                                  else coalesce(recency_half_life, c.recency_half_life) end,
        recency_weight     = case when 'recency_weight' = any (reset) then 0.2
                                  else coalesce(recency_weight, c.recency_weight) end,
        recency_ceiling    = case when 'recency_ceiling' = any (reset) then 0.5
                                  else coalesce(recency_ceiling, c.recency_ceiling) end,
        per_document_cap   = case when 'per_document_cap' = any (reset) then 5
                                  else coalesce(per_document_cap, c.per_document_cap) end,
        mmr_lambda         = case when 'mmr_lambda' = any (reset) then null
                                  else coalesce(mmr_lambda, c.mmr_lambda) end,
        boost              = case when 'boost' = any (reset) then 1
                                  else coalesce(boost, c.boost) end,
        score_threshold    = case when 'score_threshold' = any (reset) then null
                                  else coalesce(score_threshold, c.score_threshold) end,
        lost_in_the_middle = case when 'lost_in_the_middle' = any (reset) then false
                                  else coalesce(lost_in_the_middle, c.lost_in_the_middle) end
    where c.collection_id = col.collection_id
    returning c.* into changed;
    return changed;
end;
$$;
comment on function sift.alter_ranking(text, text, sift.recency_field, sift.recency_half_life,
    sift.recency_weight, sift.recency_ceiling, sift.per_document_cap, sift.mmr_lambda, sift.boost,
    sift.score_threshold, boolean, text[]) is
    'Changes a collection''s ranking settings (the finalize stage): recency_field (created, '
    'modified, uploaded or a metadata key; null = off), recency_half_life, recency_weight (at '
    'most recency_ceiling, the limit recency_bias can raise it to), per_document_cap (0 = off), '
    'mmr_lambda (null = off), boost, score_threshold (null = off), lost_in_the_middle. null '
    'leaves a setting as it is; reset => array[...] puts the named ones back to their defaults. '
    'Every value is range-checked by its domain. Writes.';
