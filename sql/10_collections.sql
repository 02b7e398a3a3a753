-- Collections and documents: the functions whose names say they write.

create or replace function sift._regconfig(search_language text)
returns regconfig
language plpgsql stable security invoker
set search_path from current
as $$
declare
    cfg regconfig;
begin
    begin
        cfg := search_language::regconfig;
    exception when undefined_object or invalid_name or syntax_error or invalid_text_representation then
        cfg := null;
    end;
    if cfg is null then
        raise exception 'unknown search language "%"', search_language
            using errcode = 'SF004',
                  hint = 'use a text search configuration from pg_ts_config: '
                      || (select string_agg(t.cfgname::text, ', ' order by t.cfgname)
                          from pg_catalog.pg_ts_config t);
    end if;
    return cfg;
end;
$$;
comment on function sift._regconfig(text) is
    'Internal: validates a language name against pg_ts_config (SF004 lists the choices).';


create or replace function sift._ensure_dense_index(dims integer, distance text)
returns text
language plpgsql volatile security invoker
set search_path from current
as $$
declare
    opclass text := case distance
        when 'cosine' then 'vector_cosine_ops'
        when 'l2' then 'vector_l2_ops'
        when 'inner_product' then 'vector_ip_ops' end;
    index_name text := format('chunks_hnsw_%s_%s', distance, dims);
begin
    -- One partial HNSW index per (dimension, distance): pgvector needs a fixed
    -- dimension to index, and the predicate keeps other dimensions out.
    execute format(
        'create index if not exists %I on sift.chunks using hnsw '
        '((embedding::vector(%s)) %s) where vector_dims(embedding) = %s',
        index_name, dims, opclass, dims);
    return index_name;
end;
$$;
comment on function sift._ensure_dense_index(integer, text) is
    'Internal, writes: creates the partial HNSW index for one (dimension, distance) if missing.';


create or replace function sift.create_collection(
    collection         text,
    embedding_dims     integer,
    tenant             text default 'default',
    search_language    text default 'english',
    distance           sift.distance default 'cosine',
    hybrid             boolean default true,
    dense_weight       sift.dense_weight default 0.45,
    rrf_k              sift.rrf_k default 5,
    fetch_k            sift.fetch_k default 40,
    exact_search_limit sift.exact_search_limit default 10000,
    description        text default null,
    lexical_scorer     sift.lexical_scorer default 'bm25',
    bm25_k1            sift.bm25_k1 default 1.2,
    bm25_b             sift.bm25_b default 0.4)
returns sift.collections
language plpgsql volatile security invoker
set search_path from current
as $$
declare
    created sift.collections;
begin
    insert into sift.collections as c
        (tenant, name, search_language, embedding_dims, distance, hybrid,
         dense_weight, rrf_k, fetch_k, exact_search_limit, description,
         lexical_scorer, bm25_k1, bm25_b)
    values
        (create_collection.tenant, create_collection.collection,
         sift._regconfig(create_collection.search_language),
         create_collection.embedding_dims, create_collection.distance,
         create_collection.hybrid, create_collection.dense_weight,
         create_collection.rrf_k, create_collection.fetch_k,
         create_collection.exact_search_limit, create_collection.description,
         create_collection.lexical_scorer, create_collection.bm25_k1, create_collection.bm25_b)
    returning c.* into created;
    perform sift._ensure_dense_index(created.embedding_dims, created.distance);
    return created;
end;
$$;
comment on function sift.create_collection(text, integer, text, text, sift.distance, boolean,
    sift.dense_weight, sift.rrf_k, sift.fetch_k, sift.exact_search_limit, text,
    sift.lexical_scorer, sift.bm25_k1, sift.bm25_b) is
    'Creates a collection (unique per tenant) with its language, embedding size, distance and '
    'ranking knobs; every knob is range-checked by its domain. Adds the HNSW index for the '
    'embedding size if this is the first collection of that size. Writes.';


create or replace function sift.alter_collection(
    collection         text,
    tenant             text default 'default',
    search_language    text default null,
    hybrid             boolean default null,
    dense_weight       sift.dense_weight default null,
    rrf_k              sift.rrf_k default null,
    fetch_k            sift.fetch_k default null,
    exact_search_limit sift.exact_search_limit default null,
    description        text default null,
    lexical_scorer     sift.lexical_scorer default null,
    bm25_k1            sift.bm25_k1 default null,
    bm25_b             sift.bm25_b default null)
returns sift.collections
language plpgsql volatile security invoker
set search_path from current
as $$
#variable_conflict use_variable
declare
    col sift.collections := sift._collection(tenant, collection);
    cfg regconfig := case when search_language is not null then sift._regconfig(search_language) end;
    changed sift.collections;
begin
    update sift.collections c set
        search_language    = coalesce(cfg, c.search_language),
        hybrid             = coalesce(hybrid, c.hybrid),
        dense_weight       = coalesce(dense_weight, c.dense_weight),
        rrf_k              = coalesce(rrf_k, c.rrf_k),
        fetch_k            = coalesce(fetch_k, c.fetch_k),
        exact_search_limit = coalesce(exact_search_limit, c.exact_search_limit),
        description        = coalesce(description, c.description),
        lexical_scorer     = coalesce(lexical_scorer, c.lexical_scorer),
        bm25_k1            = coalesce(bm25_k1, c.bm25_k1),
        bm25_b             = coalesce(bm25_b, c.bm25_b)
    where c.collection_id = col.collection_id
    returning c.* into changed;
    if changed.search_language is distinct from col.search_language then
        -- Re-analyse every chunk with the new language (the trigger rebuilds search_vector).
        update sift.chunks k set context = k.context where k.collection_id = col.collection_id;
        delete from sift.term_lists l where l.collection_id = col.collection_id;
    end if;
    if changed.search_language is distinct from col.search_language
       or changed.bm25_k1 <> col.bm25_k1 or changed.bm25_b <> col.bm25_b then
        -- Impact lists are built for one language, k1 and b: rebuild them now.
        perform sift.refresh_lexical_stats(collection => col.name, tenant => col.tenant);
    end if;
    return changed;
end;
$$;
comment on function sift.alter_collection(text, text, text, boolean, sift.dense_weight,
    sift.rrf_k, sift.fetch_k, sift.exact_search_limit, text, sift.lexical_scorer, sift.bm25_k1,
    sift.bm25_b) is
    'Changes a collection''s knobs (null leaves a knob as it is). A new search_language '
    're-analyses every chunk of the collection. Writes.';


create or replace function sift.drop_collection(collection text, tenant text default 'default')
returns boolean
language plpgsql volatile security invoker
set search_path from current
as $$
declare
    col sift.collections := sift._collection(tenant, collection);
begin
    delete from sift.collections c where c.collection_id = col.collection_id;
    return true;
end;
$$;
comment on function sift.drop_collection(text, text) is
    'Deletes a collection with its documents and chunks. Raises SF001 if it does not exist. Writes.';


create or replace function sift.delete_document(
    collection text, source_uri text, tenant text default 'default')
returns boolean
language plpgsql volatile security invoker
set search_path from current
as $$
declare
    col sift.collections := sift._collection(tenant, collection);
begin
    delete from sift.documents d
    where d.collection_id = col.collection_id and d.source_uri = delete_document.source_uri;
    return found;
end;
$$;
comment on function sift.delete_document(text, text, text) is
    'Deletes one document (and its chunks) by source_uri; returns false if there was none. Writes.';
