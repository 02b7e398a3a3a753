-- Metadata filters: a small query language over document metadata,
-- compiled once per search into a SQL/JSON path predicate that every leg
-- applies to the candidates it reads (jsonb_path_match_tz, silent: dates and
-- times with and without a zone compare in the session's time zone, and a
-- value of another type is no match, never an error). The legs look each
-- candidate's document up by key, so a filter needs no index of its own.
-- In: a filter object. Out: its jsonpath predicate (sift.filter_path), which
-- each leg applies.
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
--
-- Limits, each SF003 naming it: 100,000 bytes of JSON; a list ($in, $nin,
-- $and, $or, a field's list of values) of at most 10,000 items; nesting at
-- most 64 levels (sift._check_nesting, which metadata obeys too). Terms are
-- joined as a balanced tree (sift._filter_join), so the path PostgreSQL
-- parses, runs and prints recursively is about log2(n) deep, not n: a long
-- $in or $or never reaches max_stack_depth.


create or replace function sift._filter_join(parts text[], op text)
returns text
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    terms text[] := parts;
    pairs text[];
    n     integer;
begin
    -- Terms joined by op (' && ' or ' || ') as a balanced tree: PostgreSQL parses, runs
    -- and prints a path recursively, and a chain of n terms is n levels deep (15,000
    -- values of an $in overflowed the stack), a balanced tree about log2(n).
    if cardinality(terms) = 0 then
        return '(1 == 1)';
    elsif cardinality(terms) <= 8 then
        return '(' || pg_catalog.array_to_string(terms, op) || ')';   -- a short chain is harmless
    end if;
    while cardinality(terms) > 1 loop
        pairs := '{}';
        n := cardinality(terms);
        for i in 1 .. n by 2 loop
            pairs := pairs || case when i < n then '(' || terms[i] || op || terms[i + 1] || ')' else terms[i] end;
        end loop;
        terms := pairs;
    end loop;
    return '(' || terms[1] || ')';
end;
$$;
comment on function sift._filter_join(text[], text) is
    'Internal: path predicates joined by && or || as a balanced tree (log2(n) deep, so a long list '
    'never reaches max_stack_depth); (1 == 1) for none.';


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
            parts := parts || format(case op when '$in' then 'exists(%s ? %s)' else '!exists(%s ? %s)' end, path,
                sift._filter_join(array(select '@ == ' || sift._filter_literal(v.value, at || '.' || op)
                                        from pg_catalog.jsonb_array_elements(arg) with ordinality as v(value, o)
                                        order by v.o), ' || '));
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
    return sift._filter_join(parts, ' && ');
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
            parts := parts || sift._filter_join(array(
                        select sift._filter_predicate(x.value, prefix, format('%s.%s[%s]', at, k, x.o - 1))
                        from pg_catalog.jsonb_array_elements(v) with ordinality as x(value, o)
                        order by x.o), case k when '$and' then ' && ' else ' || ' end);
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
    return sift._filter_join(parts, ' && ');
end;
$$;
comment on function sift._filter_predicate(jsonb, text[], text) is
    'Internal: a filter object as a SQL/JSON path predicate, fields under prefix (SF003 naming where).';


create or replace function sift.filter_path(filter jsonb)
returns jsonpath
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    -- The most items one list of a filter holds: far past a real $in or $or, and each value
    -- is tested against every candidate row of every leg. (Nesting: sift._check_nesting.)
    most_items constant integer := 10000;
    bytes      integer;
    too_long   jsonb;
begin
    -- Null or {}: no filter.
    if filter is null or filter = '{}'::jsonb then
        return null;
    end if;
    bytes := pg_catalog.octet_length(filter::text);
    if bytes > 100000 then
        raise exception 'filter has % bytes; at most 100,000', bytes using errcode = 'SF003';
    end if;
    -- Checked before compiling, which recurses once a level: nesting first, since the walk
    -- for long lists descends as deep as the filter goes. A list's items take three
    -- characters at least (1, ), so a shorter filter has no list to look for.
    perform sift._check_nesting(filter, 'filter');
    if bytes > 3 * most_items then
        too_long := pg_catalog.jsonb_path_query_first(
            filter, 'strict $.** ? (@.type() == "array" && @.size() > $most)',
            pg_catalog.jsonb_build_object('most', most_items));
    end if;
    if too_long is not null then
        raise exception 'filter has a list of % items; a filter''s list ($in, $nin, $and, $or, a field''s values) '
                        'holds at most %', pg_catalog.to_char(pg_catalog.jsonb_array_length(too_long), 'FM999,999,999'),
                        pg_catalog.to_char(most_items, 'FM999,999,999')
            using errcode = 'SF003',
                  hint = 'split the search, or give the documents a metadata key to filter on instead';
    end if;
    return sift._filter_predicate(filter, '{}', 'filter')::jsonpath;
end;
$$;
comment on function sift.filter_path(jsonb) is
    'A metadata filter ({"year": {"$gte": 2020}}, {"$or": [...]}, ...; see sql/15_filters.sql) as '
    'the SQL/JSON path predicate every leg applies (jsonb_path_match_tz(metadata, path, ''{}'', '
    'true)); null for no filter. '
    'SF003 naming where in the filter for an unknown operator or a malformed one, and naming the '
    'limit for a filter past 100,000 bytes, a list of more than 10,000 items or nesting deeper '
    'than 64 levels.';
