-- pgsift core: the session's tenant, collection lookup, the checks every
-- entry point shares and the stored lexical vector (the row triggers that
-- write it: sql/02_writes.sql).
-- In: the session (its role and sift.tenant setting) and a call's collection
-- names and arguments. Out: the tenant, the collection rows it may see, typed
-- errors for bad arguments, a chunk's lexical vector.
--
-- Re-applied on every migrate that changes a file (create or replace). Every
-- function pins search_path to pg_catalog, pg_temp and names everything else
-- with its schema: sift.* for ours, @extschema:vector@.* for pgvector's (the
-- installer writes the vector extension's schema there), so an object
-- another role plants in a schema on the caller's path is never called. The
-- exceptions are the few tiny `language sql` helpers that must inline (a SET
-- clause stops inlining; tests/test_migrate.py lists them as INLINED): they
-- stay unpinned and name every function with its schema.
-- Error codes (SQLSTATE class SF) are listed in docs/errors.md.

create or replace function sift._is_operator(who name)
returns boolean
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- A superuser, or a member of the role that owns schema sift (the installer).
    select coalesce((select r.rolsuper from pg_catalog.pg_roles r where r.rolname = who), false)
        or coalesce((select pg_catalog.pg_has_role(who, n.nspowner, 'MEMBER')
                     from pg_catalog.pg_namespace n where n.nspname = 'sift'), false)
$$;
comment on function sift._is_operator(name) is
    'Internal: whether a role installed pgsift (is a member of the '
    'owner of schema sift) or is a superuser.';


create or replace function sift._check_nesting(value jsonb, what text)
returns void
language plpgsql immutable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    -- How deep a filter or a document's metadata may nest (a value inside at most this
    -- many objects and lists). Far past any real filter or metadata, and far inside what
    -- PostgreSQL's default max_stack_depth (2 MB) lets sift.filter_path compile, one
    -- PL/pgSQL call a level. The Python client refuses the same depth before sending
    -- (MAX_JSON_DEPTH in python/pgsift/calls.py): change both together.
    most constant integer := 64;
begin
    -- strict $.**{65} (most + 1): the values at that depth exactly; the walk stops there, so
    -- even a document nested thousands deep costs no more stack than the limit. Each level
    -- takes two characters at least ([]), so a short document needs no walk.
    if pg_catalog.octet_length(value::text) > 2 * most
       and pg_catalog.jsonb_path_exists(value, 'strict $.**{65}') then
        raise exception '% nests more than % levels deep; filters and metadata nest at most % levels',
            what, most, most
            using errcode = 'SF003',
                  hint = 'flatten it; a filter reaches into nested objects with dotted keys ({"a.b": 1})';
    end if;
end;
$$;
comment on function sift._check_nesting(jsonb, text) is
    'Internal: SF003 naming the limit (64 levels) when a filter or metadata nests deeper, '
    'checked without recursing past the limit.';


create or replace function sift._tenant_for(who name)
returns text
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    bound  text := nullif(pg_catalog.current_setting('pgsift.tenant', true), '');
    -- Bound in this very transaction (its start time) and in this database (as
    -- sift.set_tenant marks it): a value a session-level SET left on a pooled connection in
    -- an earlier transaction never counts, nor a mark made for another database.
    fresh  boolean := bound is not null and pg_catalog.current_setting('pgsift.tenant_txn', true)
                                            = (extract(epoch from pg_catalog.now()))::text || ' '
                                              || pg_catalog.current_database();
    super  boolean := coalesce((select r.rolsuper from pg_catalog.pg_roles r where r.rolname = who), false);
    mapped text[];
begin
    -- Evaluated once per statement by every row-level policy, so kept to a few cached
    -- lookups: pg_has_role reads the backend's membership cache.
    -- 1. A role mapped to a tenant acts for that tenant, whatever it sets.
    if not super then
        mapped := array(select distinct t.tenant::text from sift.tenant_roles t
                        where pg_catalog.pg_has_role(who, t.role_name, 'MEMBER') order by 1);
        if cardinality(mapped) > 1 then
            raise exception 'role % is mapped to several tenants (%)', who, array_to_string(mapped, ', ')
                using errcode = 'SF010', hint = 'map each role to one tenant in sift.tenant_roles';
        end if;
        if cardinality(mapped) = 1 then
            if fresh and bound <> mapped[1] then
                raise exception 'role % acts for tenant "%": it cannot bind tenant "%"', who, mapped[1], bound
                    using errcode = 'SF010';
            end if;
            return mapped[1];
        end if;
    end if;
    -- 2. A gateway (or the operator) binds a tenant per transaction.
    if fresh then
        if not (super or pg_catalog.pg_has_role(who, 'sift_gateway', 'MEMBER') or sift._is_operator(who)) then
            raise exception 'role % may not choose a tenant', who
                using errcode = 'SF010',
                      hint = 'grant it sift_gateway, or map it to one tenant in sift.tenant_roles';
        end if;
        return bound;
    end if;
    -- 3. The operator, unbound, works on tenant "default" (single-tenant use,
    --    psql); anyone else must bind in this very transaction.
    if super or sift._is_operator(who) then
        return 'default';
    end if;
    raise exception 'no tenant is bound in this transaction (role %)', who
        using errcode = 'SF010',
              hint = 'call sift.set_tenant(''name'') in the same transaction (the Python client does), '
                     'or map the role to a tenant in sift.tenant_roles';
end;
$$;
comment on function sift._tenant_for(name) is
    'Internal: the tenant a role acts for in this transaction, by the rules of '
    'sift.current_tenant (which is this for current_user).';


create or replace function sift.current_tenant()
returns text
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    select sift._tenant_for(current_user)
$$;
comment on function sift.current_tenant() is
    'The tenant this transaction acts for, which every row-level security policy of pgsift '
    'admits: the tenant of a role mapped in sift.tenant_roles (always); else the tenant bound by '
    'sift.set_tenant in this transaction (gateway roles and the operator only); else "default" '
    'for the operator; else error SF010. A value set with SET in an earlier transaction is '
    'ignored, so a pooled connection never carries one client''s tenant into another''s work.';


create or replace function sift.set_tenant(tenant text)
returns text
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    bound text;
begin
    if tenant is null or pg_catalog.btrim(tenant) = '' or pg_catalog.length(tenant) > 128 then
        raise exception 'tenant must be a name of 1 to 128 characters' using errcode = 'SF003';
    end if;
    perform pg_catalog.set_config('pgsift.tenant', tenant, true);
    -- The mark sift._tenant_for checks: this transaction's start and this database. (Roles
    -- are the cluster's, settings the session's: a binding counts where it was made only.)
    perform pg_catalog.set_config('pgsift.tenant_txn', (extract(epoch from pg_catalog.now()))::text || ' '
                                                       || pg_catalog.current_database(), true);
    -- Refused here rather than at the first query: a role may bind only what
    -- sift.current_tenant will honour.
    bound := sift.current_tenant();
    return bound;
end;
$$;
comment on function sift.set_tenant(text) is
    'Binds a tenant for the rest of this transaction in this database (transaction-local, so safe '
    'behind a transaction pooler): allowed for members of sift_gateway and the operator; a role '
    'mapped to a tenant may only bind its own. Returns the tenant now in force. Call it in the '
    'same transaction as the work: begin; select sift.set_tenant(''acme''); ...; commit. Roles '
    'are the cluster''s: a member of sift_gateway is a gateway in every database of the cluster '
    'it may connect to (docs/trust.md).';


create or replace function sift._collection(collection text)
returns sift.collections
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    hit sift.collections;
    bound text := sift.current_tenant();
begin
    if collection is null or length(collection) > 128 then
        raise exception 'collection must be a name of at most 128 characters'
            using errcode = 'SF003';
    end if;
    select c.* into hit
    from sift.collections c
    where c.tenant = bound and c.name = _collection.collection;
    if hit.collection_id is null then
        raise exception 'unknown collection "%" for tenant "%"', collection, bound
            using errcode = 'SF001',
                  hint = 'create it with sift.create_collection(...), or bind the right tenant';
    end if;
    return hit;
end;
$$;
comment on function sift._collection(text) is
    'Internal: the current tenant''s collection of that name; SF001 when there is none.';


create or replace function sift._collections(collection text, collections text[])
returns sift.collections[]
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    names text[];
    one   text;
    cols  sift.collections[] := '{}';
    dims  text;
begin
    -- One name (most searches): its collection, with nothing to compare.
    if collection is not null and collections is null then
        return array[sift._collection(collection)];
    end if;
    -- One name or several, never both: the same rule for every entry point.
    if (collection is null) = (collections is null) then
        raise exception 'name the collection(s) to search: either collection => ''name'' or collections => array[...]'
            using errcode = 'SF003';
    end if;
    names := collections;
    if cardinality(names) = 0 or array_position(names, null) is not null then
        raise exception 'collections must be a non-empty array of names without nulls'
            using errcode = 'SF003';
    end if;
    if cardinality(names) > 100 then
        raise exception 'collections names % collections; at most 100 are searched together', cardinality(names)
            using errcode = 'SF003';
    end if;
    if cardinality(names) <> (select count(distinct u.n) from unnest(names) u(n)) then
        raise exception 'collections names a collection twice: %', names using errcode = 'SF003';
    end if;
    foreach one in array names loop
        cols := cols || sift._collection(one);
    end loop;
    -- One pool means one embedding space: a dense leg and MMR compare vectors
    -- across the collections, and vectors of two sizes cannot be compared.
    if (select count(distinct (cols[i]).embedding_dims) from generate_subscripts(cols, 1) as i) > 1 then
        select string_agg(format('"%s" (%s)', (cols[i]).name, (cols[i]).embedding_dims), ', ' order by i)
        into dims
        from generate_subscripts(cols, 1) as i;
        raise exception 'collections searched together must share one embedding size: %', dims
            using errcode = 'SF007',
                  hint = 'search collections of different embedding sizes separately';
    end if;
    return cols;
end;
$$;
comment on function sift._collections(text, text[]) is
    'Internal: the collections named by collection or collections (in the order given) of the '
    'current tenant; SF003 when both or neither are given, SF001 for an unknown name, SF007 when '
    'their embedding sizes differ.';


create or replace function sift._check_dims(dims integer, distance text, owner text,
                                           embedding @extschema:vector@.vector, what text)
returns void
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    if embedding is null then
        return;
    end if;
    if @extschema:vector@.vector_dims(embedding) <> dims then
        raise exception '% has % dimensions; % expects %',
            what, @extschema:vector@.vector_dims(embedding), owner, dims
            using errcode = 'SF002';
    end if;
    -- A zero vector has no direction: its cosine distance to anything is NaN,
    -- so it would rank nowhere (a chunk) or everywhere (a query).
    if distance = 'cosine' and @extschema:vector@.vector_norm(embedding) = 0 then
        raise exception '% is a zero vector: its cosine distance to anything is undefined', what
            using errcode = 'SF003',
                  hint = 'embed the text again; a zero vector usually means an empty input or a failed call';
    end if;
end;
$$;
comment on function sift._check_dims(integer, text, text, @extschema:vector@.vector, text) is
    'Internal: raises SF002 naming both sizes when an embedding does not fit (owner: what expects '
    'the size), and SF003 for a zero vector under cosine distance.';


create or replace function sift._check_vector(col sift.collections, embedding @extschema:vector@.vector, what text)
returns void
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    select sift._check_dims(col.embedding_dims, col.distance, pg_catalog.format('collection "%s"', col.name),
                            embedding, what)
$$;
comment on function sift._check_vector(sift.collections, @extschema:vector@.vector, text) is
    'Internal: raises SF002 naming both sizes when an embedding does not fit the collection, and '
    'SF003 for a zero vector in a cosine collection.';


create or replace function sift._bigrams(run text)
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Overlapping character bigrams of one run of CJK or Thai characters, as
    -- words: 北京大学 -> 北京 京大 大学 (a single character stays itself).
    select ' ' || case when pg_catalog.length(run) < 2 then run
                       else (select pg_catalog.string_agg(pg_catalog.substr(run, i, 2), ' ' order by i)
                             from pg_catalog.generate_series(1, pg_catalog.length(run) - 1) as i) end || ' '
$$;
comment on function sift._bigrams(text) is
    'Internal: a run of CJK or Thai characters as overlapping character bigrams separated by spaces.';


create or replace function sift._segment(input text)
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- PostgreSQL's parser has no word splitter for Chinese, Japanese, Korean
    -- or Thai: a whole run of them is one "word" that no query matches. Each
    -- such run becomes its character bigrams (Lucene's CJK approach; for
    -- Thai, which has no spaces either, the same), at write and query time
    -- alike. Text without such characters comes back unchanged.
    select case
        when input is null or input !~ '[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]'
            then input
        else (select pg_catalog.string_agg(coalesce(sift._bigrams(m[1]), m[2]), '' order by o)
              from pg_catalog.regexp_matches(
                       input,
                       '([\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+)'
                       '|([^\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+)',
                       'g') with ordinality as r(m, o))
    end
$$;
comment on function sift._segment(text) is
    'Internal: text with every run of Thai, kana, CJK ideographs or Hangul replaced by its '
    'character bigrams, so the lexical leg can match words in languages written without spaces.';


create or replace function sift.language_config(language text)
returns regconfig
language sql stable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- en, EN, en-US and en_GB all read as en; a code without a row is simple.
    select case when language is null then null
                else coalesce((select l.config from sift.language_configs l
                               where l.code = pg_catalog.lower(pg_catalog.split_part(
                                                 pg_catalog.replace(language, '_', '-'), '-', 1))),
                              'simple'::regconfig) end
$$;
comment on function sift.language_config(text) is
    'The text search configuration for a language code (ISO 639-1; a region suffix is ignored): '
    'the row of sift.language_configs, else simple; null for null.';


create or replace function sift._search_vector(
    language regconfig, title text, context text, content text)
returns tsvector
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- A placeholder between fields, deleted again, leaves a one-position gap
    -- so a "quoted phrase" never matches across title, context and text.
    select pg_catalog.ts_delete(
        pg_catalog.setweight(pg_catalog.to_tsvector(language, coalesce(sift._segment(title), '')), 'A')
        || 'sift_gap:1'::tsvector
        || pg_catalog.setweight(pg_catalog.to_tsvector(language, coalesce(sift._segment(context), '')), 'B')
        || 'sift_gap:1'::tsvector
        || pg_catalog.to_tsvector(language, coalesce(sift._segment(content), '')),
        'sift_gap'::text)
$$;
comment on function sift._search_vector(regconfig, text, text, text) is
    'Internal: the stored lexical representation of a chunk: document title (weight A), '
    'context header (B) and text (D), analysed with the document''s language (else the '
    'collection''s), CJK and Thai runs as bigrams (sift._segment).';


create or replace function sift._pgvector_has_iterative_scan()
returns boolean
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    select coalesce(
        (select string_to_array(split_part(e.extversion, '-', 1), '.')::int[] >= array[0, 8]
         from pg_catalog.pg_extension e where e.extname = 'vector'),
        false)
$$;
comment on function sift._pgvector_has_iterative_scan() is
    'Internal: true when pgvector >= 0.8 (hnsw.iterative_scan exists; setting it on older '
    'versions is an error, so the dense leg asks first).';
