-- Knobs kept resolved: the triggers that write each collection's resolved
-- knob set on its row (sift._resolve_knobs over its stored values, the
-- definitions and its tenant's ceilings) whenever one of those changes. In:
-- writes to sift.collections, sift.knob_defs, sift.knob_presets and
-- sift.tenant_limits. Out: sift.collections.resolved_knobs, which a search
-- that sets no knob reads as it is.


create or replace function sift._collections_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    calibrated text;
begin
    new.knobs := sift._check_knobs(new.knobs, array['collection', 'both'], null, 'the collection''s settings');
    if tg_op = 'UPDATE' and new.knobs -> 'threshold_reranker' is not null
       and jsonb_typeof(new.knobs -> 'threshold_reranker') <> 'null' then
        calibrated := new.knobs ->> 'threshold_reranker';
        if new.reranker_alias is distinct from old.reranker_alias
           and new.reranker_alias is distinct from calibrated then
            -- Another reranker (or none) scores this collection now: a
            -- threshold tuned on the old one's scale would mean nothing.
            new.knobs := new.knobs - 'score_threshold' - 'threshold_reranker';
        elsif new.knobs -> 'score_threshold' is distinct from old.knobs -> 'score_threshold'
              and new.knobs -> 'threshold_reranker' is not distinct from old.knobs -> 'threshold_reranker' then
            -- Set by hand: no longer the calibrated value.
            new.knobs := new.knobs - 'threshold_reranker';
        end if;
    end if;
    calibrated := new.knobs ->> 'threshold_reranker';
    if calibrated is not null and not exists (
            select 1 from sift.rerankers r where r.tenant = new.tenant and r.alias = calibrated) then
        raise exception 'threshold_reranker "%" is not a reranker of tenant "%"', calibrated, new.tenant
            using errcode = 'SF008';
    end if;
    -- Cast every value to its domain now (a bad value never stores), and keep
    -- the result: a search that sets no knob reads it rather than merging.
    -- Within the tenant's ceilings, kept on the row: a value stored now above
    -- its ceiling is refused (SF015), one stored before the ceiling came is
    -- searched with the ceiling.
    new.ceilings := sift._tenant_ceilings(new.tenant);
    new.resolved_knobs := sift._apply_ceilings(
        sift._merge_knobs(new.knobs, new.name, '{}'), new.ceilings,
        case when tg_op = 'INSERT' then new.knobs
             else (select coalesce(pg_catalog.jsonb_object_agg(e.key, e.value), '{}')
                   from pg_catalog.jsonb_each(new.knobs) e
                   where old.knobs -> e.key is distinct from e.value) end,
        new.tenant);
    new.resolved_from := new.knobs;
    return new;
end;
$$;
comment on function sift._collections_before_write() is
    'Trigger: a collection''s stored knobs are checked and cast before they store (a value set above '
    'its tenant''s ceiling is SF015), and the resolved set, within the ceilings, kept on the row '
    '(resolved_knobs, ceilings); changing its '
    'reranker clears a score threshold calibrated for another, and a threshold set by hand '
    'forgets the reranker it was calibrated for.';

-- create or replace: re-applying it never locks out readers (PostgreSQL 14+).
create or replace trigger collections_before_write
    before insert or update on sift.collections
    for each row execute function sift._collections_before_write();


create or replace function sift._refresh_resolved_knobs()
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    changed integer;
begin
    -- The resolved set kept on each collection's row, made again where the
    -- definitions, presets, domains or its tenant's ceilings changed under it
    -- (a row that already holds what a merge gives is left alone: nothing is
    -- locked or written).
    update sift.collections c
    set knobs = c.knobs   -- the row's trigger merges it again
    from (select x.collection_id, sift._tenant_ceilings(x.tenant) as ceilings
          from sift.collections x) t
    where t.collection_id = c.collection_id
      and (c.resolved_from is distinct from c.knobs
           or c.ceilings is distinct from t.ceilings
           or c.resolved_knobs::text is distinct from
              sift._apply_ceilings(sift._merge_knobs(c.knobs, c.name, '{}'), t.ceilings, '{}', c.tenant)::text);
    get diagnostics changed = row_count;
    return changed;
end;
$$;
comment on function sift._refresh_resolved_knobs() is
    'Internal: merges again the resolved knobs kept on every collection whose set no longer matches '
    'the knob definitions or its tenant''s ceilings (run when those change and on every migrate); '
    'returns how many changed.';


create or replace function sift._knob_definitions_changed()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    saved text := pg_catalog.current_setting('lock_timeout');
begin
    -- Once the collections written meanwhile are committed (and with none
    -- written until this transaction ends): a collection created or altered
    -- concurrently merged the old definitions or ceilings, and would keep
    -- them where the refresh below ran before it committed. Reads go on.
    -- Waiting a second at most (or the caller's shorter lock_timeout): a
    -- tenant's write left open must not queue every tenant's collection
    -- writes behind this change.
    perform pg_catalog.set_config('lock_timeout',
                                  case when saved::interval > '0'::interval and saved::interval < '1s'::interval
                                       then saved else '1s' end, true);
    begin
        lock table sift.collections in share row exclusive mode;
    exception when lock_not_available then
        raise exception 'a collection is being written in a transaction still open: the change waits for it '
                        'at most 1 s' using errcode = '55P03',
                  hint = 'run it again (pg_stat_activity shows the open transaction)';
    end;
    perform pg_catalog.set_config('lock_timeout', saved, true);
    perform sift._refresh_resolved_knobs();
    return null;
end;
$$;
comment on function sift._knob_definitions_changed() is
    'Trigger: a knob''s definition, a preset or a tenant''s ceilings changed, so every collection''s '
    'resolved knobs (and ceilings) are merged again.';

create or replace trigger knob_defs_changed
    after insert or update or delete or truncate on sift.knob_defs
    for each statement execute function sift._knob_definitions_changed();
create or replace trigger knob_presets_changed
    after insert or update or delete or truncate on sift.knob_presets
    for each statement execute function sift._knob_definitions_changed();

create or replace function sift._tenant_limits_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    k   record;
begin
    -- A knob ceiling names a numeric knob and is a value of its domain (the
    -- value a knob above it is held at).
    for k in
        select e.key, e.value, d.name,
               coalesce(nullif(b.typbasetype, 0), b.oid) as base
        from pg_catalog.jsonb_each(new.knob_ceilings) e
        left join sift.knob_defs d on d.name = e.key
        left join pg_catalog.pg_type b on b.oid = d.type
    loop
        if k.name is null then
            perform sift._unknown_knob(k.key, 'knob_ceilings');
        end if;
        if (select t.typcategory from pg_catalog.pg_type t where t.oid = k.base) <> 'N'
           or pg_catalog.jsonb_typeof(k.value) <> 'number' then
            raise exception 'knob_ceilings: % takes no ceiling (a ceiling is a number, for a numeric knob)', k.key
                using errcode = 'SF009';
        end if;
        begin
            perform pg_catalog.jsonb_populate_record(null::sift.knob_set, pg_catalog.jsonb_build_object(k.key, k.value));
        exception when data_exception or integrity_constraint_violation then
            raise exception 'knob_ceilings: % is not a value of knob % (%)', k.value, k.key,
                sift._allowed((select d.type from sift.knob_defs d where d.name = k.key))
                using errcode = 'SF009';
        end;
    end loop;
    return new;
end;
$$;
comment on function sift._tenant_limits_before_write() is
    'Trigger: each knob ceiling of sift.tenant_limits names a numeric knob and is a value of its '
    'domain (SF009 otherwise).';

create or replace trigger tenant_limits_before_write
    before insert or update on sift.tenant_limits
    for each row execute function sift._tenant_limits_before_write();

create or replace trigger tenant_limits_changed
    after insert or update or delete or truncate on sift.tenant_limits
    for each statement execute function sift._knob_definitions_changed();

-- Every migrate: a migration may have changed a definition, a domain or the
-- set's type (a new knob) before these functions were applied.
select sift._refresh_resolved_knobs();
