-- Metadata filters: a small query language over document metadata,
-- compiled once per search into a SQL/JSON path predicate that every leg
-- applies to the candidates it reads (jsonb_path_match_tz, silent: dates and
-- times with and without a zone compare in the session's time zone, and a
-- value of another type is no match, never an error). The legs look each
-- candidate's document up by key, so a filter needs no index of its own.
--
--   {"team": "billing"}                     equal (an array field: holds it)
--   {"team": ["billing", "sales"]}          any of them (as $in)
--   {"year": {"$gte": 2020, "$lt": 2025}}   every operator of an object holds
--   {"author.name": "Ada"}                  dots reach into nested objects
--   {"a": {"b": 1}}                         the same as {"a.b": 1}
--   {"$or": [{...}, {...}]}, {"$and": [...]}, {"$not": {...}}
--
-- Field operators: $eq $ne $gt $gte $lt $lte $in $nin $exists $not.
-- Comparisons are typed as JSON is: numbers with numbers, strings with
-- strings, and a string in ISO 8601 form (2024-03-01, 2024-03-01T10:00:00Z)
-- given to $gt/$gte/$lt/$lte compares as a date or time. A value of another
-- type never matches ({"year": {"$gt": 2020}} skips "2021" stored as a
-- string). $ne, $nin and a field's $not also match documents without the
-- field. Anything else (an unknown operator, an object where a value is
-- due, an empty $in/$or) is SF003 naming where in the filter it is.


create or replace function sift._filter_literal(value jsonb, at text)
returns text
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- A JSON scalar as a path literal (JSON's string escapes are the path's).
    if pg_catalog.jsonb_typeof(value) not in ('string', 'number', 'boolean', 'null') then
        raise exception '%: expected a string, number, boolean or null, got %', at,
            pg_catalog.jsonb_typeof(value) using errcode = 'SF003';
    end if;
    return value::text;
end;
$$;
comment on function sift._filter_literal(jsonb, text) is
    'Internal: a JSON scalar as a SQL/JSON path literal (SF003 naming where it is for anything else).';


create or replace function sift._filter_field(path text, ops jsonb, at text)
returns text
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    parts text[] := '{}';
    op    text;
    arg   jsonb;
    lit   text;
    dated boolean;
begin
    -- One field's operators, ANDed.
    for op, arg in select e.key, e.value from pg_catalog.jsonb_each(ops) e order by e.key loop
        case op
        when '$eq' then
            parts := parts || format('%s == %s', path, sift._filter_literal(arg, at || '.' || op));
        when '$ne' then
            parts := parts || format('!exists(%s ? (@ == %s))', path, sift._filter_literal(arg, at || '.' || op));
        when '$gt', '$gte', '$lt', '$lte' then
            lit := sift._filter_literal(arg, at || '.' || op);
            -- An ISO 8601 date or time compares as one.
            dated := pg_catalog.jsonb_typeof(arg) = 'string' and (arg #>> '{}') ~
                '^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}(:?\d{2})?)?)?$';
            parts := parts || format('%s%s %s %s%s', path, case when dated then '.datetime()' else '' end,
                                     case op when '$gt' then '>' when '$gte' then '>=' when '$lt' then '<'
                                             else '<=' end,
                                     lit, case when dated then '.datetime()' else '' end);
        when '$in', '$nin' then
            if pg_catalog.jsonb_typeof(arg) <> 'array' or pg_catalog.jsonb_array_length(arg) = 0 then
                raise exception '%.%: expected a non-empty list', at, op using errcode = 'SF003';
            end if;
            parts := parts || format(case op when '$in' then 'exists(%s ? (%s))' else '!exists(%s ? (%s))' end, path,
                (select pg_catalog.string_agg('@ == ' || sift._filter_literal(v.value, at || '.' || op), ' || '
                                              order by v.o)
                 from pg_catalog.jsonb_array_elements(arg) with ordinality as v(value, o)));
        when '$exists' then
            if pg_catalog.jsonb_typeof(arg) <> 'boolean' then
                raise exception '%.$exists: expected true or false', at using errcode = 'SF003';
            end if;
            parts := parts || format(case when arg = 'true'::jsonb then 'exists(%s)' else '!exists(%s)' end, path);
        when '$not' then
            if pg_catalog.jsonb_typeof(arg) <> 'object' or arg = '{}'::jsonb
               or exists (select 1 from pg_catalog.jsonb_object_keys(arg) k where k !~ '^\$') then
                raise exception '%.$not: expected an object of operators', at using errcode = 'SF003';
            end if;
            parts := parts || format('!(%s)', sift._filter_field(path, arg, at || '.$not'));
        else
            raise exception '%: unknown operator %', at, op
                using errcode = 'SF003',
                      hint = 'operators: $eq $ne $gt $gte $lt $lte $in $nin $exists $not; logic: $and $or $not';
        end case;
    end loop;
    return '(' || pg_catalog.array_to_string(parts, ' && ') || ')';
end;
$$;
comment on function sift._filter_field(text, jsonb, text) is
    'Internal: one field''s filter operators as a SQL/JSON path predicate (SF003 naming where).';


create or replace function sift._filter_predicate(filter jsonb, prefix text[], at text)
returns text
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    parts text[] := '{}';
    k     text;
    v     jsonb;
    path  text;
    keys  text[];
begin
    if pg_catalog.jsonb_typeof(filter) <> 'object' then
        raise exception '%: expected an object, got %', at, pg_catalog.jsonb_typeof(filter)
            using errcode = 'SF003';
    end if;
    for k, v in select e.key, e.value from pg_catalog.jsonb_each(filter) e order by e.key loop
        if k in ('$and', '$or') then
            if pg_catalog.jsonb_typeof(v) <> 'array' or pg_catalog.jsonb_array_length(v) = 0 then
                raise exception '%.%: expected a non-empty list of filters', at, k using errcode = 'SF003';
            end if;
            parts := parts || ('(' || (select pg_catalog.string_agg(
                        sift._filter_predicate(x.value, prefix, format('%s.%s[%s]', at, k, x.o - 1)),
                        case k when '$and' then ' && ' else ' || ' end order by x.o)
                     from pg_catalog.jsonb_array_elements(v) with ordinality as x(value, o)) || ')');
        elsif k = '$not' then
            parts := parts || ('!' || sift._filter_predicate(v, prefix, at || '.$not'));
        elsif k ~ '^\$' then
            raise exception '%: unknown operator %', at, k
                using errcode = 'SF003',
                      hint = 'at the top: $and $or $not, or field names; under a field: $eq $ne $gt $gte $lt $lte '
                             '$in $nin $exists $not';
        elsif k = '' or k ~ '(^\.|\.$|\.\.)' then
            raise exception '%: a field name must not be empty or have an empty part: "%"', at, k
                using errcode = 'SF003';
        else
            keys := prefix || pg_catalog.string_to_array(k, '.');
            path := '$' || (select pg_catalog.string_agg('.' || pg_catalog.to_jsonb(s.part)::text, '' order by s.o)
                            from pg_catalog.unnest(keys) with ordinality as s(part, o));
            if pg_catalog.jsonb_typeof(v) = 'object' and v <> '{}'::jsonb
               and not exists (select 1 from pg_catalog.jsonb_object_keys(v) x where x !~ '^\$') then
                parts := parts || sift._filter_field(path, v, at || '.' || k);
            elsif pg_catalog.jsonb_typeof(v) = 'object' then
                if exists (select 1 from pg_catalog.jsonb_object_keys(v) x where x ~ '^\$') then
                    raise exception '%.%: operators and field names cannot be mixed', at, k
                        using errcode = 'SF003';
                end if;
                -- A nested object: its fields under this one.
                parts := parts || sift._filter_predicate(v, keys, at || '.' || k);
            elsif pg_catalog.jsonb_typeof(v) = 'array' then
                parts := parts || sift._filter_field(path, pg_catalog.jsonb_build_object('$in', v), at || '.' || k);
            else
                parts := parts || format('%s == %s', path, sift._filter_literal(v, at || '.' || k));
            end if;
        end if;
    end loop;
    if cardinality(parts) = 0 then
        return '(1 == 1)';
    end if;
    return '(' || pg_catalog.array_to_string(parts, ' && ') || ')';
end;
$$;
comment on function sift._filter_predicate(jsonb, text[], text) is
    'Internal: a filter object as a SQL/JSON path predicate, fields under prefix (SF003 naming where).';


create or replace function sift.filter_path(filter jsonb)
returns jsonpath
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Null or {}: no filter.
    if filter is null or filter = '{}'::jsonb then
        return null;
    end if;
    if octet_length(filter::text) > 100000 then
        raise exception 'filter has % bytes; at most 100,000', octet_length(filter::text) using errcode = 'SF003';
    end if;
    return sift._filter_predicate(filter, '{}', 'filter')::jsonpath;
end;
$$;
comment on function sift.filter_path(jsonb) is
    'A metadata filter ({"year": {"$gte": 2020}}, {"$or": [...]}, ...; see sql/15_filters.sql) as '
    'the SQL/JSON path predicate every leg applies (jsonb_path_match_tz(metadata, path, ''{}'', '
    'true)); null for no filter. '
    'SF003 naming where in the filter for an unknown operator or a malformed one.';
