-- Collections: created, altered, described and dropped. In: the current
-- tenant and a collection's settings (its knobs checked by sift._check_knobs).
-- Out: its row in sift.collections with its vector space, and
-- sift.collection_info, which says what it is set to. Its indexes:
-- sql/11_dense_indexes.sql; its documents: sql/14_writes.sql.

create or replace function sift._regconfig(search_language text)
returns regconfig
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cfg oid;
begin
    -- Looked up by name in pg_ts_config (schema-qualified names too), never
    -- cast from text on the caller's path.
    select c.oid into cfg
    from pg_catalog.pg_ts_config c
    join pg_catalog.pg_namespace n on n.oid = c.cfgnamespace
    where (n.nspname = 'pg_catalog' and c.cfgname = search_language)
       or n.nspname || '.' || c.cfgname = search_language;
    if cfg is null then
        raise exception 'unknown search language "%"', left(search_language, 200)
            using errcode = 'SF004',
                  hint = 'use a text search configuration from pg_ts_config: '
                      || (select string_agg(t.cfgname::text, ', ' order by t.cfgname)
                          from pg_catalog.pg_ts_config t);
    end if;
    return cfg::regconfig;
end;
$$;
comment on function sift._regconfig(text) is
    'Internal: validates a language name against pg_ts_config (SF004 lists the choices).';


create or replace function sift.create_collection(
    collection           text,
    embedding_dims       integer,
    search_language      text default 'english',
    distance             text default 'cosine',
    description          text default null,
    knobs                jsonb default '{}',
    dense_precision      text default null,
    hnsw_m               integer default null,
    hnsw_ef_construction integer default null)
returns sift.collections
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    created sift.collections;
    space   sift.vector_spaces;
begin
    if distance is null or distance not in ('cosine', 'l2', 'inner_product') then
        raise exception 'distance must be cosine, l2 or inner_product, got "%"', left(distance, 100)
            using errcode = '23514', constraint = 'distance_valid';
    end if;
    if embedding_dims is null or embedding_dims not between 1 and 4000 then
        raise exception 'embedding_dims must be between 1 and 4000 (pgvector''s HNSW limit on halfvec), got %',
            coalesce(embedding_dims::text, 'null')
            using errcode = '23514', constraint = 'embedding_dims_valid';
    end if;
    insert into sift.collections as c
        (tenant, name, search_language, embedding_dims, distance, description, knobs)
    values
        (sift.current_tenant(), collection, sift._regconfig(search_language), embedding_dims,
         distance, description, coalesce(knobs, '{}'))
    returning c.* into created;
    -- The built-in space came with it (trigger); its index options are set
    -- now, while it is empty (sift.vector_spaces' checks guard them).
    space := sift._space(created, null);
    if dense_precision is not null or hnsw_m is not null or hnsw_ef_construction is not null then
        space := sift._set_space_options(space, dense_precision, hnsw_m, hnsw_ef_construction);
    end if;
    perform sift._space_index(space);
    return created;
end;
$$;
comment on function sift.create_collection(text, integer, text, text, text, jsonb, text, integer, integer) is
    'Creates a collection of the current tenant (names are unique per tenant) with its language, '
    'embedding size (1 to 4000; past 2000 indexed as halfvec) and distance (cosine, l2, inner_product), and any knob values in '
    'knobs (see sift.knobs(); a preset is allowed). The first collection of a size needs its HNSW '
    'index: the operator''s call builds it, anyone else''s queues it for the operator '
    '(sift.ensure_dense_indexes; within the tenant''s limits, SF015) and the collection is searched '
    'by exact scan meanwhile (collection_info''s dense_index). dense_precision (full, half), hnsw_m and '
    'hnsw_ef_construction give the collection an HNSW index of its own with those options (the '
    'operator''s). Writes.';


create or replace function sift._set_space_options(space sift.vector_spaces, dense_precision text,
                                                   hnsw_m integer, hnsw_ef_construction integer)
returns sift.vector_spaces
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    changed sift.vector_spaces;
begin
    -- Right after the space is made: empty, without an index of its own (the
    -- guard trigger refuses the change otherwise, and to anyone but the
    -- operator).
    update sift.vector_spaces s
    set dense_precision = coalesce(_set_space_options.dense_precision, s.dense_precision),
        hnsw_m = _set_space_options.hnsw_m,
        hnsw_ef_construction = _set_space_options.hnsw_ef_construction
    where s.space_id = space.space_id
    returning s.* into changed;
    return changed;
end;
$$;
comment on function sift._set_space_options(sift.vector_spaces, text, integer, integer) is
    'Internal: sets a new, empty vector space''s index options (precision, m, ef_construction); '
    'the table''s checks refuse values out of range.';


create or replace function sift.alter_collection(
    collection text,
    settings   jsonb default '{}',
    reset      text[] default null)
returns sift.collections
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col     sift.collections := sift._collection(collection);
    props   text[] := array['search_language', 'description', 'reranker'];
    given   jsonb := coalesce(settings, '{}');
    stored  jsonb;
    item    text;
    changed sift.collections;
begin
    if jsonb_typeof(given) <> 'object' then
        raise exception 'settings must be a JSON object, got %', jsonb_typeof(given) using errcode = 'SF003';
    end if;
    foreach item in array coalesce(reset, '{}') loop
        if item is null or (item <> all (props) and not exists (select 1 from sift.knob_defs d where d.name = item)) then
            perform sift._unknown_knob(coalesce(item, 'null'), 'reset');
        end if;
    end loop;
    -- The collection's own properties, then its knobs (checked by the table's trigger).
    -- A preset given now overrides what is stored; the keys beside it override the preset.
    stored := (col.knobs - coalesce(reset, '{}')) || sift._expand_preset(given - props);
    if given ? 'reranker' and jsonb_typeof(given -> 'reranker') not in ('string', 'null') then
        raise exception 'reranker must be an alias or null' using errcode = 'SF003';
    end if;
    if given ->> 'reranker' is not null and not exists (
            select 1 from sift.rerankers r where r.tenant = col.tenant and r.alias = given ->> 'reranker') then
        raise exception 'no reranker "%" is registered for tenant "%" (collection "%")',
            given ->> 'reranker', col.tenant, col.name
            using errcode = 'SF008',
                  hint = 'register it first with sift.register_reranker(...), as this tenant';
    end if;
    update sift.collections c set
        search_language = case when 'search_language' = any (reset) then 'english'::regconfig
                               when given ? 'search_language' then sift._regconfig(given ->> 'search_language')
                               else c.search_language end,
        description     = case when 'description' = any (reset) then null
                               when given ? 'description' then given ->> 'description'
                               else c.description end,
        reranker_alias  = case when 'reranker' = any (reset) then null
                               when given ? 'reranker' then given ->> 'reranker'
                               else c.reranker_alias end,
        knobs           = stored
    where c.collection_id = col.collection_id
    returning c.* into changed;
    if changed.search_language is distinct from col.search_language
       or sift._stored_knob(changed, 'bm25_k1') <> sift._stored_knob(col, 'bm25_k1')
       or sift._stored_knob(changed, 'bm25_b') <> sift._stored_knob(col, 'bm25_b') then
        -- The rebuild below needs the collection alone: taken now, before the
        -- chunks are re-analysed as its writer (a writer's lock that then
        -- waits for a build's could deadlock with another build waiting).
        perform sift._lock_collection(col.collection_id, true);
    end if;
    if changed.search_language is distinct from col.search_language then
        -- Re-analyse every chunk with the new language (the trigger rebuilds search_vector).
        update sift.chunks k set context = k.context where k.collection_id = col.collection_id;
        delete from sift.term_lists l where l.collection_id = col.collection_id;
    end if;
    if changed.search_language is distinct from col.search_language
       or sift._stored_knob(changed, 'bm25_k1') <> sift._stored_knob(col, 'bm25_k1')
       or sift._stored_knob(changed, 'bm25_b') <> sift._stored_knob(col, 'bm25_b') then
        -- Impact lists are built for one language, k1 and b: rebuild them now
        -- (every one: a chunk whose document names its own language analyses
        -- as before, so its terms are not among those a refresh folds).
        perform sift.refresh_lexical_stats(collection => col.name, rebuild => true);
    end if;
    return changed;
end;
$$;
comment on function sift.alter_collection(text, jsonb, text[]) is
    'The one setter of a collection: settings => ''{"dense_weight": 0.3, "mmr_lambda": null, '
    '"search_language": "spanish", "description": "...", "reranker": "voyage"}'' sets knobs (see '
    'sift.knobs(); null switches one off; a preset is allowed) and the properties search_language, '
    'description and reranker (an alias of this tenant''s rerankers, else SF008); reset => '
    'array[...] puts the named ones back to their defaults. A new search_language re-analyses '
    'every chunk. Every value is checked by its domain before anything is stored. Writes.';


create or replace function sift.collection_info(collection text default null)
returns table (
    collection_id   bigint,
    tenant          text,
    name            text,
    search_language text,
    embedding_dims  integer,
    distance        text,
    description     text,
    reranker        text,
    created_at      timestamptz,
    knobs           jsonb,
    settings        jsonb,
    dense_index     text)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select c.collection_id, c.tenant::text, c.name::text, c.search_language::text, c.embedding_dims,
           c.distance::text, c.description, c.reranker_alias::text, c.created_at, c.knobs,
           to_jsonb(sift._resolve_knobs(c, '{}')),
           (select case when pg_catalog.to_regclass('sift.' || sift._space_index_name(s)) is null then 'queued'
                        else 'built' end
            from sift.vector_spaces s where s.collection_id = c.collection_id and s.active)
    from sift.collections c
    where c.tenant = sift.current_tenant()
      and (collection_info.collection is null or c.name = collection_info.collection)
    order by c.name, c.collection_id;
    if collection_info.collection is not null and not found then
        perform sift._collection(collection_info.collection);   -- SF001
    end if;
end;
$$;
comment on function sift.collection_info(text) is
    'The current tenant''s collections (or the one named): properties, the knob values stored '
    '(knobs), every knob in force (settings, defaults included, within the tenant''s ceilings) and '
    'dense_index: built, or queued when the HNSW index its active vector space walks waits for the '
    'operator''s build (searched by exact scan until then). Read-only.';


create or replace function sift.drop_collection(collection text)
returns boolean
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col sift.collections := sift._collection(collection);
    own text[];
begin
    -- Alone on the collection first, as a build is: the delete's cascade then
    -- waits on no writer that could in turn wait on the collection's row.
    perform sift._lock_collection(col.collection_id, true);
    -- Its spaces' own HNSW indexes go with it (one in use, or a tenant's drop:
    -- by the operator's sift.ensure_dense_indexes later).
    select pg_catalog.array_agg(sift._space_index_name(s)) into own
    from sift.vector_spaces s where s.collection_id = col.collection_id and sift._space_dedicated(s);
    delete from sift.collections c where c.collection_id = col.collection_id;
    -- Dropping an index locks its table until the transaction ends: in the
    -- operator's session only (else the operator's sift.ensure_dense_indexes).
    if sift._is_operator(session_user) then
        perform sift._drop_orphan_indexes(u.name) from unnest(own) as u(name);
    end if;
    return true;
end;
$$;
comment on function sift.drop_collection(text) is
    'Deletes a collection of the current tenant with its documents, chunks, statistics and golden '
    'sets. Raises SF001 if it does not exist. Writes.';
