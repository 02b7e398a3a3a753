-- pgsift core: the session's tenant, collection lookup, write-time triggers.
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


create or replace function sift._lock_collection(collection_id bigint, builder boolean default false)
returns void
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    txn  text := pg_catalog.pg_current_xact_id()::text;
    held text := pg_catalog.current_setting('pgsift.collection_locks', true);
begin
    -- The collection's row of sift.collection_locks, which row-level security
    -- shows to its own tenant only (and no other table references, so no
    -- foreign key check locks it past the policies): another tenant can
    -- neither see nor lock it. Row locks last until the transaction ends, as
    -- the advisory locks before them did, and are released with a
    -- subtransaction that rolls back.
    if builder then
        -- Alone on the collection: first the mark a writer's probe (below)
        -- waits on, which writers' key share locks do not conflict with, then
        -- the lock itself once the writers holding it have committed. A
        -- writer arriving meanwhile waits behind the build instead of
        -- overtaking it (row share locks would starve a waiting build).
        perform 1 from sift.collection_locks l where l.collection_id = _lock_collection.collection_id
        for no key update;
        perform 1 from sift.collection_locks l where l.collection_id = _lock_collection.collection_id
        for update;
    else
        -- A writer: once per transaction and collection (the mark below),
        -- not once per chunk.
        if held like txn || ':%,' || collection_id::text || ',%' then
            return;
        end if;
        -- Waits while a build holds or awaits the collection (its mark
        -- conflicts with share), then lets go at once: the probe alone would
        -- hold the build off.
        begin
            perform 1 from sift.collection_locks l where l.collection_id = _lock_collection.collection_id
            for share;
            raise sqlstate 'SFLCK';
        exception when sqlstate 'SFLCK' then
            null;
        end;
        perform 1 from sift.collection_locks l where l.collection_id = _lock_collection.collection_id
        for key share;
    end if;
    if not found then
        -- No row: the collection is gone, or going in this very transaction
        -- (a drop's cascade deletes its chunks): nothing left to order.
        if exists (select 1 from sift.collections c where c.collection_id = _lock_collection.collection_id) then
            raise exception 'collection % has no row in sift.collection_locks', collection_id
                using errcode = 'XX000', hint = 'run pgsift migrate (0038 makes the rows)';
        end if;
        return;
    end if;
    -- The mark says which collections this transaction holds (a build holds
    -- more than a writer needs). Marked with the transaction's id: a value a
    -- session-level SET left on a pooled connection names another
    -- transaction and is ignored. Transaction-local, and undone with the
    -- subtransaction that took the lock.
    perform pg_catalog.set_config('pgsift.collection_locks',
        case when held like txn || ':%' then held else txn || ':,' end || collection_id::text || ',', true);
end;
$$;
comment on function sift._lock_collection(bigint, boolean) is
    'Internal: locks the collection''s row of sift.collection_locks until the transaction ends: '
    'for key share for a chunk writer (writers run together; once per transaction, waiting while a '
    'build holds or awaits the collection), for update for a builder (refresh, space switch or '
    'drop, collection drop: alone, after the writers holding it commit, ahead of writers arriving '
    'meanwhile). Row-level security keeps each tenant to its own collections'' rows.';


create or replace function sift._chunks_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col      sift.collections;
    doc_title text;
    doc_language text;
    limit_bytes integer;
    vector_changed boolean;
    builtin  sift.vector_spaces;
begin
    -- Writers share this collection's lock; building impact lists takes it
    -- alone (sift.refresh_lexical_stats), so no chunk lands between a list's
    -- snapshot and the list becoming visible. Writers never wait on each other.
    -- Taken once per transaction and collection: the mark sift._lock_collection
    -- leaves is read here, so a chunk after the first costs no lock query.
    if tg_op = 'DELETE' then
        if coalesce(pg_catalog.current_setting('pgsift.collection_locks', true), '')
           not like pg_catalog.pg_current_xact_id()::text || ':%,' || old.collection_id::text || ',%' then
            perform sift._lock_collection(old.collection_id);
        end if;
        return old;
    end if;
    if tg_op = 'UPDATE' then
        if new.content is distinct from old.content then
            raise exception 'chunk text is never rewritten (chunk %)', old.chunk_id
                using errcode = 'SF005',
                      hint = 'replace the whole document instead (Client.upsert_documents)';
        end if;
        if new.document_id is distinct from old.document_id then
            raise exception 'a chunk cannot move to another document (chunk %)', old.chunk_id
                using errcode = 'SF003';
        end if;
    end if;

    select d.collection_id, d.title, d.language into new.collection_id, doc_title, doc_language
    from sift.documents d
    where d.document_id = new.document_id;
    if new.collection_id is null then
        raise exception 'unknown document %', new.document_id using errcode = 'SF006';
    end if;
    if coalesce(pg_catalog.current_setting('pgsift.collection_locks', true), '')
       not like pg_catalog.pg_current_xact_id()::text || ':%,' || new.collection_id::text || ',%' then
        perform sift._lock_collection(new.collection_id);
    end if;

    select c.* into col from sift.collections c where c.collection_id = new.collection_id;
    if tg_op = 'INSERT' then
        limit_bytes := sift._stored_knob(col, 'max_chunk_bytes')::integer;
        if octet_length(new.content) > limit_bytes then
            raise exception 'chunk % of document % has % bytes of text; collection "%" takes at most %',
                new.ordinal, new.document_id, octet_length(new.content), col.name, limit_bytes
                using errcode = 'SF003',
                      hint = 'cut it into smaller chunks, or raise the collection''s max_chunk_bytes';
        end if;
    end if;
    vector_changed := tg_op = 'INSERT' or (new.embedding is null) <> (old.embedding is null)
                      or not coalesce(new.embedding operator(@extschema:vector@.=) old.embedding, true);
    if vector_changed then
        -- The chunk's own column holds the built-in space's vectors: given when
        -- that space is the active one, else never (the active space's vectors
        -- go to sift.chunk_vectors, as sift.write_chunks does).
        select s.* into builtin from sift.vector_spaces s where s.collection_id = col.collection_id and s.builtin;
        if builtin.active or builtin.space_id is null then
            if new.embedding is null then
                raise exception 'chunk % of document % has no embedding', new.ordinal, new.document_id
                    using errcode = 'SF003';
            end if;
            perform sift._check_vector(col, new.embedding, format('the embedding of chunk %s', new.ordinal));
        elsif new.embedding is not null and tg_op = 'INSERT' then
            raise exception 'collection "%" searches an added vector space: write chunks with '
                            'sift.write_chunks, which stores their vectors there', col.name
                using errcode = 'SF003';
        elsif new.embedding is not null then
            -- Filling the built-in space while another is active (to switch back).
            perform sift._check_dims(builtin.dimensions, builtin.distance,
                                     format('the built-in space of collection "%s"', col.name), new.embedding,
                                     format('the embedding of chunk %s', new.ordinal));
        end if;
    end if;
    -- A chunk's section is one of its own document's (which the caller can see).
    if new.section_id is not null and not exists (
        select 1 from sift.sections s where s.section_id = new.section_id and s.document_id = new.document_id) then
        raise exception 'section % is not a section of chunk %''s document %', new.section_id, new.ordinal,
            new.document_id using errcode = 'SF003';
    end if;

    -- Only the vector changed (a space dropped, a vector replaced): nothing to
    -- re-analyse, and the lexical columns stay as they were, whatever the
    -- writer put there. (Re-analysis sets the context to itself and keeps the vector.)
    if tg_op = 'UPDATE' and vector_changed and new.context is not distinct from old.context
       and new.section_id is not distinct from old.section_id then
        new.search_vector := old.search_vector;
        new.lexical_length := old.lexical_length;
        return new;
    end if;
    -- The document's language picks the configuration; without one, the collection's.
    new.search_vector := sift._search_vector(coalesce(sift.language_config(doc_language), col.search_language),
                                             doc_title, new.context, new.content);
    new.lexical_length := (select coalesce(sum(array_length(u.positions, 1)), 0)
                           from unnest(new.search_vector) u);
    -- A rough count (about four characters a token) when the writer gave none.
    new.token_count := coalesce(new.token_count, ceil(length(new.content) / 4.0)::integer);
    return new;
end;
$$;
comment on function sift._chunks_before_write() is
    'Trigger: fills collection_id, search_vector and lexical_length at write time; refuses a '
    'wrong embedding size, a zero vector in a cosine collection, text past max_chunk_bytes, and '
    'rewriting chunk text.';

-- create or replace: re-applying it never locks out readers (PostgreSQL 14+).
create or replace trigger chunks_before_write
    before insert or update or delete on sift.chunks
    for each row execute function sift._chunks_before_write();


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


create or replace function sift._documents_after_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- A document in a language the collection has not seen: its configuration
    -- joins the ones the lexical leg parses queries with. Recorded even when it
    -- is the collection's search_language today, which may change.
    insert into sift.collection_configs (collection_id, config)
    select new.collection_id, sift.language_config(new.language)
    where new.language is not null
    on conflict do nothing;
    return null;
end;
$$;
comment on function sift._documents_after_write() is
    'Trigger: records the text search configuration of a document''s language in '
    'sift.collection_configs (the lexical leg parses queries with each).';

create or replace trigger documents_after_write
    after insert or update of language on sift.documents
    for each row execute function sift._documents_after_write();


create or replace function sift._documents_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- Metadata nested past the limit is refused: a filter could not reach it, and a
    -- client reading it back (Python's json, most JSON parsers) recurses once a level.
    perform sift._check_nesting(new.metadata, pg_catalog.format('the metadata of document "%s"', new.source_uri));
    return new;
end;
$$;
comment on function sift._documents_before_write() is
    'Trigger: refuses (SF003) a document whose metadata nests more than 64 levels deep '
    '(sift._check_nesting).';

create or replace trigger documents_before_write
    before insert or update of metadata on sift.documents
    for each row execute function sift._documents_before_write();


create or replace function sift._sections_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- The collection is the document's, as the caller sees it: a document of
    -- another tenant (invisible under row-level security) has none.
    select d.collection_id into new.collection_id
    from sift.documents d
    where d.document_id = new.document_id;
    if new.collection_id is null then
        raise exception 'unknown document %', new.document_id using errcode = 'SF006';
    end if;
    return new;
end;
$$;
comment on function sift._sections_before_write() is
    'Trigger: a section''s collection_id is its document''s (one the caller can see), never the '
    'writer''s word: SF006 for a document that is not the tenant''s.';

create or replace trigger sections_before_write
    before insert or update on sift.sections
    for each row execute function sift._sections_before_write();
