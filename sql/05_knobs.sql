-- Knobs: one resolver turns the defaults (sift.knob_defs), a collection's
-- stored values and a call's `knobs` into one typed record (sift.knob_set)
-- per collection. Every stage reads that record; nothing else knows a
-- default.
-- In: sift.knob_defs, a collection's stored knobs and a call's knobs object.
-- Out: one sift.knob_set per collection, checked (SF009 naming the knob).
--
-- In a `knobs` object: absent = the collection's value; JSON null = off,
-- where the knob can be off; {"preset": "name"} applies a preset first; a
-- value may be an object {"collection": value, ...} to set it per collection
-- of a multi-collection search. An unknown key is an error naming the nearest
-- knob.

create or replace function sift._levenshtein(a text, b text)
returns integer
language plpgsql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    prev integer[];
    cur  integer[];
    i    integer;
    j    integer;
begin
    -- Only on the error path (unknown knob names), on short names.
    a := left(coalesce(a, ''), 64);
    b := left(coalesce(b, ''), 64);
    prev := array(select generate_series(0, length(b)));
    for i in 1 .. length(a) loop
        cur := array[i];
        for j in 1 .. length(b) loop
            cur := cur || least(prev[j + 1] + 1, cur[j] + 1,
                                prev[j] + case when substr(a, i, 1) = substr(b, j, 1) then 0 else 1 end);
        end loop;
        prev := cur;
    end loop;
    return prev[length(b) + 1];
end;
$$;
comment on function sift._levenshtein(text, text) is
    'Internal: edit distance between two short names (for "did you mean" hints).';


create or replace function sift._unknown_knob(name text, what text)
returns void
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    nearest text;
begin
    select d.name into nearest
    from (select k.name from sift.knob_defs k union all select 'preset') d
    order by sift._levenshtein(lower(_unknown_knob.name), d.name), d.name
    limit 1;
    raise exception 'unknown knob "%" in %', name, what
        using errcode = 'SF009',
              hint = format('did you mean "%s"? select name from sift.knobs() lists them all', nearest);
end;
$$;
comment on function sift._unknown_knob(text, text) is
    'Internal: raises SF009 for an unknown knob name, suggesting the nearest one.';


create or replace function sift._expand_preset(given jsonb)
returns jsonb
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    preset jsonb;
begin
    if given is null or not given ? 'preset' then
        return given;
    end if;
    if jsonb_typeof(given -> 'preset') <> 'string' then
        raise exception 'preset must be the name of a preset, got %', given -> 'preset'
            using errcode = 'SF009';
    end if;
    select p.knobs into preset from sift.knob_presets p where p.name = given ->> 'preset';
    if preset is null then
        raise exception 'unknown preset "%"', given ->> 'preset'
            using errcode = 'SF009',
                  hint = 'presets: ' || (select string_agg(p.name, ', ' order by p.name) from sift.knob_presets p);
    end if;
    -- The keys given beside the preset win over it.
    return preset || (given - 'preset');
end;
$$;
comment on function sift._expand_preset(jsonb) is
    'Internal: a knobs object with its "preset" replaced by the preset''s values (keys beside it win).';


create or replace function sift._check_knobs(
    knobs     jsonb,
    scopes    text[],
    names     text[],
    what      text)
returns jsonb
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    k   record;
    v   record;
    def record;
    out jsonb;
begin
    if knobs is null then
        return '{}';
    end if;
    if jsonb_typeof(knobs) <> 'object' then
        raise exception '% must be a JSON object of knob values, got %', what, jsonb_typeof(knobs)
            using errcode = 'SF009';
    end if;
    out := sift._expand_preset(knobs);
    for k in select e.key, e.value from jsonb_each(out) e loop
        select d.name, d.scope, d.can_be_off,
               case t.typcategory when 'N' then 'number' when 'B' then 'boolean' else 'string' end as kind
        into def
        from sift.knob_defs d
        join pg_catalog.pg_type t
          on t.oid = coalesce(nullif((select b.typbasetype from pg_catalog.pg_type b where b.oid = d.type), 0), d.type)
        where d.name = k.key;
        if def.name is null then
            perform sift._unknown_knob(k.key, what);
        end if;
        if def.scope <> all (scopes) then
            raise exception '% cannot be set in %', k.key, what
                using errcode = 'SF009',
                      hint = case def.scope
                          when 'collection' then 'it is the collection owner''s setting: sift.alter_collection(settings => ...)'
                          else 'it is given per call: knobs => ''{"' || k.key || '": ...}''' end;
        end if;
        for v in
            select null::text as col, k.value as value where jsonb_typeof(k.value) <> 'object'
            union all
            select e.key, e.value from jsonb_each(case when jsonb_typeof(k.value) = 'object' then k.value end) e
        loop
            if v.col is not null and (names is null or v.col <> all (names)) then
                raise exception '% sets % for "%", which is not %', what, k.key, v.col,
                    case when names is null then 'allowed here (a value per collection is for searches)'
                         else 'among the collections searched' end
                    using errcode = 'SF009';
            end if;
            if jsonb_typeof(v.value) = 'null' then
                if not def.can_be_off then
                    raise exception '% cannot be switched off (null)', k.key
                        using errcode = 'SF009',
                              hint = 'leave it out to use the collection''s value';
                end if;
            elsif jsonb_typeof(v.value) <> def.kind then
                raise exception '% must be a JSON %, got % %', k.key, def.kind, jsonb_typeof(v.value), v.value
                    using errcode = 'SF009';
            end if;
        end loop;
    end loop;
    return out;
end;
$$;
comment on function sift._check_knobs(jsonb, text[], text[], text) is
    'Internal: checks a knobs object (known names, who may set them, JSON types, null only where '
    'a knob can be off, per-collection values only for the collections named) and returns it with '
    'its preset expanded; SF009 names the first problem.';


create or replace function sift._merge_knobs(stored jsonb, collection_name text, call jsonb,
                                             base sift.knob_set default null)
returns sift.knob_set
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    merged jsonb;
    k      record;
    out    sift.knob_set;
begin
    -- The collection's values, then the call's (already checked by
    -- sift._check_knobs; an object holds a value per collection), then in
    -- one pass over the definitions: a default for every knob left unset,
    -- and for JSON null ("off") the value off stands for. With base (the
    -- collection's own set, already merged from its stored values): the
    -- call's values alone, cast onto it.
    if base is not distinct from null then
        merged := coalesce(sift._expand_preset(stored), '{}');
    else
        merged := '{}';
    end if;
    for k in select e.key, e.value from jsonb_each(coalesce(call, '{}')) e loop
        if jsonb_typeof(k.value) <> 'object' then
            merged := jsonb_set(merged, array[k.key], k.value);
        elsif k.value ? collection_name then
            merged := jsonb_set(merged, array[k.key], k.value -> collection_name);
        end if;
    end loop;
    if base is not distinct from null then
        select jsonb_object_agg(d.name, case when d.can_be_off and v.v = 'null'::jsonb then d.off_value else v.v end)
        into merged
        from sift.knob_defs d
        cross join lateral (select coalesce(merged -> d.name, d.default_value) as v) v;
    else
        select coalesce(jsonb_object_agg(e.key, case when d.can_be_off and e.value = 'null'::jsonb then d.off_value
                                                     else e.value end), '{}')
        into merged
        from jsonb_each(merged) e
        join sift.knob_defs d on d.name = e.key;
    end if;
    begin
        out := jsonb_populate_record(base, merged);
    exception when data_exception then
        -- Name the knob whose value would not cast (a domain CHECK names itself).
        for k in select e.key, e.value from jsonb_each(merged) e loop
            begin
                perform jsonb_populate_record(null::sift.knob_set, jsonb_build_object(k.key, k.value));
            exception when data_exception then
                raise exception 'invalid value for knob %: %', k.key, k.value using errcode = 'SF009';
            end;
        end loop;
        raise;
    end;
    -- A rule no single domain can check: the owner's ceiling bounds the weight.
    if out.recency_weight > out.recency_ceiling then
        raise exception 'recency_weight % exceeds the recency_ceiling % of collection "%"',
            out.recency_weight, out.recency_ceiling, collection_name
            using errcode = 'check_violation', constraint = 'recency_weight_within_ceiling',
                  hint = 'raise recency with recency_bias (up to the ceiling), or raise the collection''s recency_ceiling';
    end if;
    return out;
end;
$$;
comment on function sift._merge_knobs(jsonb, text, jsonb, sift.knob_set) is
    'Internal: the knobs in force for one collection (its stored values and name) in one call: '
    'defaults, overlaid by the stored values, overlaid by the call''s (base: the set already merged '
    'from the stored values, which the call''s alone overlay); null resolved to each knob''s off; '
    'every value cast to its domain, so a bad value is refused naming the knob.';


create or replace function sift._tenant_ceilings(tenant text)
returns jsonb
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The tenant's row over the default one (tenant null), value by value, as
    -- one object: the knobs' ceilings by name, match_count, call_time_limit in
    -- seconds (a number: no session setting changes its text). Null: none.
    select nullif(pg_catalog.jsonb_strip_nulls(
               coalesce(d.knob_ceilings, '{}') || coalesce(t.knob_ceilings, '{}')
               || pg_catalog.jsonb_build_object(
                      'match_count', coalesce(t.max_match_count, d.max_match_count),
                      'call_time_limit', extract(epoch from coalesce(t.call_time_limit, d.call_time_limit)))),
           '{}'::jsonb)
    from (values (1)) as one(x)
    left join sift.tenant_limits d on d.tenant is null
    left join sift.tenant_limits t on t.tenant = _tenant_ceilings.tenant
$$;
comment on function sift._tenant_ceilings(text) is
    'Internal: a tenant''s ceilings in force (sift.tenant_limits: its row over the default row): knob '
    'names, match_count and call_time_limit (seconds), as kept on its collections'' rows; null: none.';


create or replace function sift._limit_exceeded(what text, value text, ceiling text, tenant text,
                                                limit_name text default null)
returns void
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- The limit's name (a knob's, or the column of sift.tenant_limits) is the
    -- error's constraint, the ceiling its detail: the client reads both.
    raise exception '% % is above the ceiling of % for tenant "%"', what, value, ceiling, tenant
        using errcode = 'SF015', constraint = coalesce(limit_name, what), detail = ceiling,
              hint = 'ask for less; the operator sets the ceilings (sift.tenant_limits)';
end;
$$;
comment on function sift._limit_exceeded(text, text, text, text, text) is
    'Internal: raises SF015 for a value above a tenant''s ceiling (sift.tenant_limits), naming the '
    'limit (also as the error''s constraint: limit_name, else what) and the ceiling (its detail).';


create or replace function sift._apply_ceilings(knobs sift.knob_set, ceilings jsonb, given jsonb, tenant text)
returns sift.knob_set
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    k    record;
    vals jsonb;
begin
    -- A knob given (a call's, or a stored value just set) above its ceiling is
    -- refused, naming it; one that is not (a default, or a value stored
    -- before the ceiling came) is held at the ceiling.
    if ceilings is null then
        return knobs;
    end if;
    vals := pg_catalog.to_jsonb(knobs);
    for k in
        select e.key, e.value as top, vals -> e.key as v
        from pg_catalog.jsonb_each(ceilings) e
        where pg_catalog.jsonb_typeof(vals -> e.key) = 'number' and (vals -> e.key)::numeric > e.value::numeric
    loop
        if given ? k.key then
            perform sift._limit_exceeded(k.key, k.v::text, k.top::text, tenant);
        end if;
        knobs := pg_catalog.jsonb_populate_record(knobs, pg_catalog.jsonb_build_object(k.key, k.top));
    end loop;
    return knobs;
end;
$$;
comment on function sift._apply_ceilings(sift.knob_set, jsonb, jsonb, text) is
    'Internal: a resolved knob set within a tenant''s knob ceilings (sift._tenant_ceilings): a knob in '
    'given above its ceiling is SF015; any other is held at the ceiling.';


create or replace function sift._resolve_knobs(col sift.collections, call jsonb)
returns sift.knob_set
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- A call that sets no knob takes the collection's resolved set, kept on
    -- its row by its trigger (sift._refresh_resolved_knobs keeps it in step
    -- with the definitions and the tenant's ceilings) with the stored values
    -- it was merged from: a row written past the trigger
    -- (session_replication_role = replica) is merged here, as is anything
    -- else, and held to the ceilings kept on the row (a call's knob above one
    -- is SF015).
    select case when coalesce(call, '{}') = '{}' and col.resolved_from is not distinct from col.knobs
                    then col.resolved_knobs
                else sift._apply_ceilings(
                         case when col.resolved_from is distinct from col.knobs
                              then sift._merge_knobs(col.knobs, col.name, call)
                              else sift._merge_knobs(col.knobs, col.name, call, col.resolved_knobs) end,
                         col.ceilings, coalesce(call, '{}'), col.tenant) end
$$;
comment on function sift._resolve_knobs(sift.collections, jsonb) is
    'Internal: the knobs in force for one collection in one call, within its tenant''s ceilings '
    '(sift._merge_knobs; with no knob in the call, the set kept on the collection''s row; with '
    'some, theirs cast onto it; a call''s knob above its ceiling is SF015).';


create or replace function sift._within_ceilings(cols sift.collections[], match_count integer)
returns void
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    c sift.collections;
begin
    -- The hits a call asks for against its tenant's max_match_count (kept on
    -- each collection's row: no lookup).
    foreach c in array coalesce(cols, '{}') loop
        if match_count > (c.ceilings ->> 'match_count')::integer then
            perform sift._limit_exceeded('match_count', match_count::text, c.ceilings ->> 'match_count', c.tenant,
                                         'max_match_count');
        end if;
    end loop;
end;
$$;
comment on function sift._within_ceilings(sift.collections[], integer) is
    'Internal: SF015 when match_count is above the max_match_count of the collections'' tenant '
    '(sift.tenant_limits).';


create or replace function sift._check_deadline(stage text)
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    armed text := pg_catalog.current_setting('pgsift.deadline', true);
begin
    -- A search's time limit (call_time_limit), armed by sift._resolve_all as
    -- "deadline|limit" in epoch seconds: checked by the stages between their
    -- steps (a function cannot arm statement_timeout for its own statement).
    if armed is null or armed = '' then
        return;
    end if;
    if extract(epoch from pg_catalog.clock_timestamp()) > pg_catalog.split_part(armed, '|', 1)::numeric then
        raise exception 'the search ran past its time limit of % s (call_time_limit) in %',
            pg_catalog.split_part(armed, '|', 2), stage
            using errcode = 'SF015', constraint = 'call_time_limit', detail = pg_catalog.split_part(armed, '|', 2),
                  hint = 'ask for less work (fewer hits, a smaller fetch_k, lexical_budget or pool); the operator '
                         'sets the limit (sift.tenant_limits)';
    end if;
end;
$$;
comment on function sift._check_deadline(text) is
    'Internal: SF015 (call_time_limit) when the search running has passed the time limit '
    'sift._resolve_all armed for it; nothing when none is armed. The stages call it between steps.';


create or replace function sift._resolve_all(cols sift.collections[], knobs jsonb)
returns sift.knob_set[]
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    call  jsonb := sift._check_knobs(knobs, array['call', 'both'],
                                     array(select (c).name::text from unnest(cols) c), 'knobs');
    ks    sift.knob_set[];
    secs  double precision;
begin
    -- A threshold given in the call is the caller's own: never "calibrated for
    -- another reranker" (sift._finalize skips those).
    if call ? 'score_threshold' then
        call := call || '{"threshold_reranker": null}';
    end if;
    -- Within the tenant's ceilings, kept on each collection's row (no lookup:
    -- sift._resolve_knobs). The search's time limit is armed,
    -- transaction-local, for the stages to check.
    ks := array(select sift._resolve_knobs(cols[i], call) from generate_subscripts(cols, 1) as i order by i);
    secs := (select pg_catalog.min((c.ceilings ->> 'call_time_limit')::double precision) from unnest(cols) c);
    if secs is not null then
        perform pg_catalog.set_config('pgsift.deadline',
                                      (extract(epoch from pg_catalog.clock_timestamp()) + secs::numeric)::text
                                      || '|' || secs::text, true);
    elsif pg_catalog.current_setting('pgsift.deadline', true) <> '' then
        perform pg_catalog.set_config('pgsift.deadline', '', true);
    end if;
    return ks;
end;
$$;
comment on function sift._resolve_all(sift.collections[], jsonb) is
    'Internal: checks a call''s knobs once and resolves them for each collection searched, in order; '
    'a knob above its tenant''s ceiling is SF015, and the tenant''s call_time_limit is armed for '
    'sift._check_deadline.';


create or replace function sift._stored_knob(col sift.collections, name text)
returns text
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- One stored-or-default value, for hot paths that need a single knob
    -- (stored values were cast to their domains when they were stored).
    select coalesce(col.knobs -> name, (select d.default_value from sift.knob_defs d where d.name = _stored_knob.name))
           #>> '{}'
$$;
comment on function sift._stored_knob(sift.collections, text) is
    'Internal: a collection''s value of one knob (stored, else the default), as text.';


create or replace function sift._allowed(t regtype)
returns text
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- The domain's CHECK, as a reader would write it.
    select coalesce(
        (select string_agg(
                    regexp_replace(regexp_replace(regexp_replace(regexp_replace(
                        pg_get_constraintdef(c.oid),
                        '::[a-z][a-z ]*[a-z]', '', 'g'),             -- casts
                        '\((-?[0-9.]+|''[^'']*'')\)', '\1', 'g'),     -- (0) -> 0
                        '^CHECK \(\((.*)\)\)$', '\1'),               -- the CHECK wrapper
                        'VALUE', 'value', 'g'),
                    ' and ' order by c.conname)
         from pg_catalog.pg_constraint c where c.contypid = t),
        case when t = 'boolean'::regtype then 'true or false' else 'any ' || t::text end)
$$;
comment on function sift._allowed(regtype) is
    'Internal: the allowed range of a knob, from its domain''s CHECK constraints.';


create or replace function sift.knobs(collection text default null, knobs jsonb default '{}')
returns table (
    name          text,
    type          text,
    default_value jsonb,
    allowed       text,
    can_be_off    boolean,
    off_value     jsonb,
    scope         text,
    stage         text,
    meaning       text,
    value         jsonb,
    source        text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    col      sift.collections;
    resolved jsonb;
    call     jsonb := '{}';
begin
    if knobs.collection is not null then
        col := sift._collection(knobs.collection);
        call := sift._check_knobs(knobs.knobs, array['call', 'both'], array[col.name::text], 'knobs');
        resolved := to_jsonb(sift._resolve_knobs(col, call));
    end if;
    return query
    select d.name, coalesce(nullif(format_type(t.typbasetype, t.typtypmod), '-'), d.type::text),
           d.default_value,
           sift._allowed(d.type) || coalesce(' (at most ' || (col.ceilings -> d.name)::text || ' for this tenant)', ''),
           d.can_be_off, d.off_value, d.scope, d.stage, d.meaning,
           resolved -> d.name,
           case when col.collection_id is null then null
                when call ? d.name then 'call'
                when sift._expand_preset(col.knobs) ? d.name then 'collection'
                else 'default' end
    from sift.knob_defs d
    join pg_catalog.pg_type t on t.oid = d.type
    order by d.position, d.name;
end;
$$;
comment on function sift.knobs(text, jsonb) is
    'Every knob: its name, type, default, allowed values (its domain''s CHECK), whether null can '
    'switch it off and what off means, scope (collection: stored only; call: per call only; both), '
    'the stage that reads it, and what it does. With a collection (and optional per-call knobs): '
    'also the value in force and where it comes from (default, collection, call), and in allowed '
    'the tenant''s ceiling where the operator set one. Read-only.';
