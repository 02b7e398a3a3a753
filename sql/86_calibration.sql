-- Calibrated score thresholds: a threshold stored against the reranker whose
-- scores it was tuned on (`pgsift calibrate ... --store`). See
-- migrations/0006_calibrated_thresholds.sql and docs/evaluation.md.

create or replace function sift.store_calibrated_threshold(
    collection     text,
    tenant         text,
    reranker_alias text,
    value          sift.score_threshold)
returns sift.collections
language plpgsql volatile security invoker
set search_path from current
as $$
#variable_conflict use_variable
declare
    col     sift.collections := sift._collection(tenant, collection);
    owner   text;
    changed sift.collections;
begin
    if value is null then
        raise exception 'value must be a number' using errcode = 'SF003';
    end if;
    if reranker_alias is null or not exists (
            select 1 from sift.rerankers r where r.tenant = col.tenant and r.alias = reranker_alias) then
        select r.tenant into owner from sift.rerankers r
        where r.alias = reranker_alias order by r.tenant limit 1;
        if owner is not null then
            raise exception 'reranker "%" is registered for tenant "%", not for tenant "%" of collection "%"',
                reranker_alias, owner, col.tenant, col.name
                using errcode = 'SF008',
                      hint = 'a threshold is calibrated for one of the collection''s own tenant''s rerankers';
        end if;
        raise exception 'no reranker "%" is registered for tenant "%" (collection "%")',
            reranker_alias, col.tenant, col.name
            using errcode = 'SF008',
                  hint = 'register it first with sift.register_reranker(..., tenant => ' || quote_literal(col.tenant) || ')';
    end if;
    -- Two steps: the trigger below forgets the reranker of a threshold that
    -- changes under an unchanged tag; a new tag is what marks it calibrated.
    update sift.collections c set score_threshold_reranker = null
    where c.collection_id = col.collection_id;
    update sift.collections c set score_threshold = value, score_threshold_reranker = reranker_alias
    where c.collection_id = col.collection_id
    returning c.* into changed;
    return changed;
end;
$$;
comment on function sift.store_calibrated_threshold(text, text, text, sift.score_threshold) is
    'Stores a score threshold calibrated for a reranker (pgsift calibrate --store): sets the '
    'collection''s score_threshold to value and score_threshold_reranker to the alias, which must '
    'be registered for the collection''s tenant (else SF008). The client applies it only to pools '
    'that reranker scored; changing the collection''s reranker clears it. Writes.';


create or replace function sift._calibrated_threshold_before_update()
returns trigger
language plpgsql security invoker
set search_path from current
as $$
begin
    if new.score_threshold_reranker is null then
        return new;
    end if;
    if new.reranker_alias is distinct from old.reranker_alias
       and new.reranker_alias is distinct from new.score_threshold_reranker then
        -- Another reranker (or none) scores this collection now: a threshold
        -- tuned on the old one's scores would mean nothing.
        new.score_threshold := null;
        new.score_threshold_reranker := null;
    elsif new.score_threshold is distinct from old.score_threshold
          and new.score_threshold_reranker is not distinct from old.score_threshold_reranker then
        -- Set by hand (alter_ranking): no longer the calibrated value.
        new.score_threshold_reranker := null;
    end if;
    return new;
end;
$$;
comment on function sift._calibrated_threshold_before_update() is
    'Trigger: changing a collection''s reranker_alias clears a score threshold calibrated for another '
    'reranker (score_threshold and score_threshold_reranker); a threshold changed by hand forgets '
    'the reranker it was calibrated for.';

drop trigger if exists collections_calibrated_threshold on sift.collections;
create trigger collections_calibrated_threshold
    before update on sift.collections
    for each row execute function sift._calibrated_threshold_before_update();
