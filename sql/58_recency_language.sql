-- What finalize reads of a chunk's document: the date recency decays from
-- (created, modified, uploaded or a metadata field) and the recency formula
-- (public: sift.recency_factor), the document's language (its primary
-- subtag) and the page its translations share (one_translation). In: a
-- document's fields. Out: a date, a factor, a language code, a page key.
-- sift._finalize, the plain path (sql/62_plain.sql) and sift._hits use them.

create or replace function sift.recency_factor(
    recency_date timestamptz,
    as_of        timestamptz,
    half_life    interval,
    weight       double precision)
returns double precision
language sql immutable parallel safe security invoker
as $$
    -- Not pinned, so it inlines per candidate: every function in it is
    -- qualified and every operator has an exact match in pg_catalog.
    -- Half-life decay bounded by the weight: a document loses weight/2 at one
    -- half-life and never more than weight. No usable date is the oldest
    -- possible date (the full weight), never a neutral one. A date after
    -- as_of counts as age 0. The exponent stops at 1000 half-lives, where
    -- 0.5^x is already 1e-301 (past it, power() underflows to an error).
    select case
        when weight is null then 1::double precision
        when recency_date is null or not pg_catalog.isfinite(recency_date)
            then 1 - weight
        else 1 - weight * (1 - pg_catalog.power(0.5::double precision, least(
                 greatest(pg_catalog.date_part('epoch', as_of - recency_date), 0)
                 / pg_catalog.date_part('epoch', half_life), 1000)))
    end
$$;
comment on function sift.recency_factor(timestamptz, timestamptz, interval, double precision) is
    'The recency factor a score is multiplied by: 1 - weight * (1 - 0.5^(age / half_life)), '
    'age = as_of - recency_date (0 when the date is in the future). At one half-life a document '
    'has lost half the weight; the weight is the most it can ever lose, which is also what a '
    'document with no date (null) loses. Months count as 30 days. null weight: 1 (recency off).';


create or replace function sift._timestamptz(raw text)
returns timestamptz
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    t timestamptz;
begin
    begin
        t := raw::timestamptz;
    exception when data_exception then
        return null;   -- 2024-13-45 and the like: no usable date
    end;
    return case when pg_catalog.isfinite(t) then t end;
end;
$$;
comment on function sift._timestamptz(text) is
    'Internal: text as a finite timestamptz, or null when it is not one (never raises).';


create or replace function sift._recency_date(
    field     text,
    created   timestamptz,
    modified  timestamptz,
    uploaded  timestamptz,
    metadata  jsonb)
returns timestamptz
language sql stable security invoker
as $$
    -- Not pinned, so it inlines per candidate: every function in it is
    -- qualified and every operator has an exact match in pg_catalog.
    -- A plain expression, so it inlines: only metadata strings that start
    -- like an ISO 8601 date reach the parser ('now', 'today' or 'infinity',
    -- which timestamptz would accept, are not dates).
    select case field
        when 'created' then case when pg_catalog.isfinite(created) then created end
        when 'modified' then case when pg_catalog.isfinite(modified) then modified end
        when 'uploaded' then case when pg_catalog.isfinite(uploaded) then uploaded end
        else case when pg_catalog.jsonb_typeof(metadata -> field) = 'string'
                       and (metadata ->> field) ~ '^\s*\d{4}-\d{1,2}-\d{1,2}'
                  then sift._timestamptz(metadata ->> field) end
    end
$$;
comment on function sift._recency_date(text, timestamptz, timestamptz, timestamptz, jsonb) is
    'Internal: the date recency ranks a document on: created, modified or uploaded, else the '
    'metadata key of that name parsed as an ISO 8601 date; null when there is no usable date.';


create or replace function sift._language(code text)
returns text
language sql immutable parallel safe security invoker
as $$
    -- Not pinned, so it inlines per candidate: every function in it is
    -- qualified and every operator has an exact match in pg_catalog.
    -- A language code's primary subtag, lower case: en-US, EN and en_GB read as en.
    select nullif(pg_catalog.lower(pg_catalog.split_part(pg_catalog.replace(code, '_', '-'), '-', 1)), '')
$$;
comment on function sift._language(text) is
    'Internal: a language code''s primary subtag in lower case (en-US, EN, en_GB: en; null for null).';


create or replace function sift._locale_path()
returns text
language sql immutable parallel safe security invoker
as $$
    -- Not pinned, so it inlines (a constant).
    select '^((?:[A-Za-z][A-Za-z0-9+.-]*://[^/]+)?/?)([A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*)/(.*)$'::text
$$;
comment on function sift._locale_path() is
    'Internal: a source_uri with a leading locale segment (scheme and host, the locale, the rest), '
    'for sift._page_key.';


create or replace function sift._page_key(source_uri text, metadata jsonb, language text)
returns text
language sql immutable parallel safe security invoker
as $$
    -- Not pinned, so it inlines per candidate: every function in it is
    -- qualified and every operator has an exact match in pg_catalog.
    -- Translations of one page: metadata.page_key when given, else the
    -- source_uri without a leading locale segment that names the document's
    -- own language (/de/x, de-AT/x, https://site/de/x: x). A document without
    -- a language is a page of its own (null: never grouped).
    -- No subquery: inlined into finalize's per-chunk statement, a sub-plan
    -- there cost every search ~4 us a chunk even with one_translation off.
    select coalesce(metadata ->> 'page_key',
                    case when language is not null
                              and sift._language((pg_catalog.regexp_match(source_uri, sift._locale_path()))[2]) = language
                         then (pg_catalog.regexp_match(source_uri, sift._locale_path()))[1]
                              || (pg_catalog.regexp_match(source_uri, sift._locale_path()))[3] end)
$$;
comment on function sift._page_key(text, jsonb, text) is
    'Internal: the page a document is a translation of: metadata page_key, else its source_uri '
    'without a leading locale segment naming its own language; null when it has neither.';
