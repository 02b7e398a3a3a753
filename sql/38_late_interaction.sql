-- Late interaction: a chunk's token vectors (sift.chunk_tokens) and MaxSim,
-- the ColBERT score: for each of the question's token vectors, the best inner
-- product over the chunk's token vectors, summed. It reranks a search's fused
-- top late_interaction_top_n when the search is given query_tokens
-- (sift.search, sift.explain), or any list of chunks (sift.maxsim). Chunks
-- without token vectors are never dropped: they keep their order behind the
-- scored ones. The cost is one inner product per (query token, chunk token)
-- pair: it grows with N x query tokens x chunk tokens (bench/README.md).
-- In: chunks' token vectors and the question's. Out: MaxSim scores, and the
-- pool reranked by them.


create or replace function sift._chunk_collection(chunk_id bigint)
returns bigint
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    found bigint;
begin
    -- As the caller sees it: another tenant's chunk is invisible, so it is SF006 like a missing one.
    select k.collection_id into found from sift.chunks k where k.chunk_id = _chunk_collection.chunk_id;
    if found is null then
        raise exception 'chunk % is not a chunk the tenant has', chunk_id using errcode = 'SF006';
    end if;
    return found;
end;
$$;
comment on function sift._chunk_collection(bigint) is
    'Internal: a chunk''s collection, for the triggers of the tables that hang off a chunk (token '
    'vectors, enrichments, question vectors); SF006 for a chunk the tenant does not have.';


create or replace function sift._token_dims(collection_id bigint)
returns integer
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    select s.dimensions from sift.chunk_token_sizes s where s.collection_id = _token_dims.collection_id
$$;
comment on function sift._token_dims(bigint) is
    'Internal: the size of a collection''s token vectors (null: it has none).';


create or replace function sift._chunk_tokens_before_write()
returns trigger
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    sizes integer[];
    have  integer;
begin
    -- The collection is the chunk's, as the caller sees it (a chunk of another
    -- tenant is invisible); every token has one size, the collection's.
    new.collection_id := sift._chunk_collection(new.chunk_id);
    if coalesce(array_ndims(new.tokens), 1) <> 1 then
        raise exception 'the token vectors of chunk % must be a one-dimensional array', new.chunk_id
            using errcode = 'SF003';
    end if;
    new.token_count := coalesce(cardinality(new.tokens), 0);
    if new.token_count not between 1 and 2048 then
        raise exception 'chunk % has % token vectors; 1 to 2,048 are stored', new.chunk_id, new.token_count
            using errcode = 'SF003', hint = 'truncate the chunk''s tokens as its model does (sift.delete_token_vectors '
                                            'removes them)';
    end if;
    select pg_catalog.array_agg(distinct @extschema:vector@.vector_dims(t)), pg_catalog.count(*) filter (where t is null)
    into sizes, have
    from unnest(new.tokens) as u(t);
    if have > 0 then
        raise exception 'chunk % has a null token vector', new.chunk_id using errcode = 'SF003';
    end if;
    if cardinality(sizes) > 1 then
        raise exception 'the token vectors of chunk % differ in size (%)', new.chunk_id, array_to_string(sizes, ', ')
            using errcode = 'SF002';
    end if;
    new.dimensions := sizes[1];
    if new.dimensions > 4000 then
        raise exception 'the token vectors of chunk % have % dimensions; at most 4,000 are stored',
            new.chunk_id, new.dimensions using errcode = 'SF003';
    end if;
    -- The collection's size: the first write sets it; every writer then holds
    -- it (for share) until it commits, so a full delete cannot clear it under
    -- a writer, and two sizes never both get in.
    insert into sift.chunk_token_sizes (collection_id, dimensions)
    values (new.collection_id, new.dimensions)
    on conflict (collection_id) do nothing;
    select s.dimensions into have
    from sift.chunk_token_sizes s where s.collection_id = new.collection_id
    for share;
    if have <> new.dimensions then
        raise exception 'the token vectors of chunk % have % dimensions; collection "%" holds token vectors of %',
            new.chunk_id, new.dimensions, (select c.name from sift.collections c where c.collection_id = new.collection_id),
            have
            using errcode = 'SF002',
                  hint = 'one late-interaction model per collection (sift.delete_token_vectors clears them)';
    end if;
    new.written_at := now();
    return new;
end;
$$;
comment on function sift._chunk_tokens_before_write() is
    'Trigger: token vectors take their chunk''s collection (SF006 for a chunk the tenant does not '
    'have), 1 to 2,048 of one size, the collection''s (SF002).';

create or replace trigger chunk_tokens_before_write
    before insert or update on sift.chunk_tokens
    for each row execute function sift._chunk_tokens_before_write();


create or replace function sift.write_token_vectors(
    collection    text,
    chunk_ids     bigint[],
    token_vectors @extschema:vector@.vector[])
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col     sift.collections := sift._collection(write_token_vectors.collection);
    written integer;
begin
    -- Flat parallel arrays (token_vectors[i] is a token of chunk_ids[i], in
    -- order), so a batch of chunks is one statement with its vectors in binary.
    perform sift._same_lengths('write_token_vectors', array[coalesce(cardinality(chunk_ids), 0),
                                                            coalesce(cardinality(token_vectors), 0)]);
    if cardinality(chunk_ids) > 200000 then
        raise exception 'write_token_vectors takes at most 200,000 token vectors a call, got %', cardinality(chunk_ids)
            using errcode = 'SF003';
    end if;
    if exists (select 1 from unnest(chunk_ids, token_vectors) as u(id, v) where u.id is null or u.v is null) then
        raise exception 'write_token_vectors: a chunk id or a token vector is null' using errcode = 'SF003';
    end if;
    -- A chunk deleted meanwhile (a re-crawl during a backfill) is skipped; the
    -- row lock keeps the others in place until their tokens are in.
    begin
        insert into sift.chunk_tokens (chunk_id, collection_id, tokens, dimensions, token_count)
        select g.id, 0, g.toks, 0, 0
        from (select u.id, pg_catalog.array_agg(u.v::@extschema:vector@.halfvec order by u.o) as toks
              from unnest(chunk_ids, token_vectors) with ordinality as u(id, v, o)
              group by u.id) g
        join (select c.chunk_id from sift.chunks c
              where c.chunk_id = any (chunk_ids) and c.collection_id = col.collection_id
              for key share) k on k.chunk_id = g.id
        on conflict (chunk_id) do update set tokens = excluded.tokens;
    exception when numeric_value_out_of_range then
        raise exception 'token_vectors has a value beyond half precision''s range (65,504)'
            using errcode = 'SF003';
    end;
    get diagnostics written = row_count;
    if written < (select count(distinct u.id) from unnest(chunk_ids) as u(id)) and exists (
        select 1 from unnest(chunk_ids) as u(id)
        join sift.chunks c on c.chunk_id = u.id and c.collection_id <> col.collection_id) then
        raise exception 'write_token_vectors: a chunk is not a chunk of collection "%"', col.name
            using errcode = 'SF006';
    end if;
    return written;
end;
$$;
comment on function sift.write_token_vectors(text, bigint[], @extschema:vector@.vector[]) is
    'Writes (or replaces) chunks'' token vectors for late interaction: flat parallel arrays, '
    'token_vectors[i] a token of chunk_ids[i], each chunk''s in order (1 to 2,048 a chunk, stored '
    'in half precision), up to 200,000 a call; returns how many chunks. A collection''s first '
    'write sets its token size (another: SF002); a chunk deleted meanwhile is skipped, one of '
    'another collection is SF006. Writes.';


create or replace function sift.delete_token_vectors(collection text, chunk_ids bigint[] default null)
returns integer
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    col     sift.collections := sift._collection(delete_token_vectors.collection);
    deleted integer;
begin
    -- Locked first: writers hold it for share until they commit, so the
    -- count below sees every token row written before it is cleared.
    perform 1 from sift.chunk_token_sizes s where s.collection_id = col.collection_id for update;
    delete from sift.chunk_tokens t
    where t.collection_id = col.collection_id
      and (delete_token_vectors.chunk_ids is null or t.chunk_id = any (delete_token_vectors.chunk_ids));
    get diagnostics deleted = row_count;
    delete from sift.chunk_token_sizes s
    where s.collection_id = col.collection_id
      and not exists (select 1 from sift.chunk_tokens t where t.collection_id = col.collection_id);
    return deleted;
end;
$$;
comment on function sift.delete_token_vectors(text, bigint[]) is
    'Deletes the token vectors of these chunks of the collection (null: all of them, so another '
    'late-interaction model''s size can be written); returns how many chunks lost theirs. Writes.';


create or replace function sift._query_tokens(cols sift.collections[], query_tokens @extschema:vector@.vector[])
returns @extschema:vector@.halfvec[]
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    sizes integer[];
    have  integer;
begin
    -- The question's token vectors, checked before anything runs, in the
    -- precision the chunks' are stored in. Null: no late interaction.
    if query_tokens is null then
        return null;
    end if;
    if coalesce(array_ndims(query_tokens), 1) <> 1 or cardinality(query_tokens) not between 1 and 256 then
        raise exception 'query_tokens has % vectors; 1 to 256, in a one-dimensional array', cardinality(query_tokens)
            using errcode = 'SF003';
    end if;
    if exists (select 1 from unnest(query_tokens) as u(t) where u.t is null) then
        raise exception 'query_tokens has a null vector' using errcode = 'SF003';
    end if;
    select pg_catalog.array_agg(distinct @extschema:vector@.vector_dims(u.t)) into sizes from unnest(query_tokens) as u(t);
    if cardinality(sizes) > 1 then
        raise exception 'the vectors of query_tokens differ in size (%)', array_to_string(sizes, ', ')
            using errcode = 'SF002';
    end if;
    for i in 1 .. coalesce(cardinality(cols), 0) loop
        have := sift._token_dims((cols[i]).collection_id);
        if have is not null and have <> sizes[1] then
            raise exception 'query_tokens has vectors of % dimensions; collection "%" holds token vectors of %',
                sizes[1], (cols[i]).name, have using errcode = 'SF002';
        end if;
    end loop;
    return query_tokens::@extschema:vector@.halfvec[];
exception when numeric_value_out_of_range then
    raise exception 'query_tokens has a value beyond half precision''s range (65,504)' using errcode = 'SF003';
end;
$$;
comment on function sift._query_tokens(sift.collections[], @extschema:vector@.vector[]) is
    'Internal: a search''s query_tokens checked (1 to 256 of one size, the collections'' token '
    'size: SF003, SF002) and cast to half precision; null when none are given.';


create or replace function sift._maxsim_scores(chunk_ids bigint[], query_tokens @extschema:vector@.halfvec[])
returns table (chunk_id bigint, score double precision, token_count integer)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
-- At most late_interaction_top_n (or sift.maxsim's 1,000) rows.
rows 50
as $$
    -- One pass over a chunk's tokens per query token (the best is -min of
    -- pgvector's negative inner product), summed over the query tokens.
    select t.chunk_id,
           (select pg_catalog.sum((select -pg_catalog.min(q.v operator(@extschema:vector@.<#>) d.v)
                                   from pg_catalog.unnest(t.tokens) as d(v)))
            from pg_catalog.unnest(query_tokens) as q(v)),
           t.token_count
    from sift.chunk_tokens t
    where t.chunk_id = any (chunk_ids)
$$;
comment on function sift._maxsim_scores(bigint[], @extschema:vector@.halfvec[]) is
    'Internal: MaxSim of the query''s token vectors against each listed chunk that has token '
    'vectors: sum over query tokens of the best inner product over the chunk''s tokens.';


create or replace function sift._late_order(
    chunk_ids bigint[], query_tokens @extschema:vector@.halfvec[], top_n integer)
returns table (chunk_id bigint, place integer, score double precision, raw double precision)
language sql stable security invoker
set search_path = pg_catalog, pg_temp
rows 100
as $$
    -- A pool (ids in its order) reordered by MaxSim over its first top_n:
    -- scored chunks first (best first, ties by id), then every other one in
    -- pool order. score is what the ranking knobs multiply: (1 + mean best
    -- similarity) / 2, which is in [0, 1] for normalised vectors (floored at
    -- 1e-9), and for the unscored, below the lowest scored, decreasing in
    -- pool order (as a hosted reranker's partial ranking is scored).
    with p as (
        select u.id, u.o::integer as o from unnest(chunk_ids) with ordinality as u(id, o)
    ), s as (
        select m.chunk_id, m.score as raw,
               greatest(1e-9, (1 + m.score / cardinality(query_tokens)) / 2) as score
        from sift._maxsim_scores(array(select p.id from p where p.o <= top_n), query_tokens) m
    ), ranked as (
        select p.id, p.o, s.raw, s.score,
               pg_catalog.row_number() over (order by s.raw desc nulls last,
                                                      case when s.raw is not null then p.id end, p.o) as place
        from p left join s on s.chunk_id = p.id
    ), fl as (
        select pg_catalog.min(s.score) as lowest, (select pg_catalog.count(*) from p) - pg_catalog.count(*) as m,
               pg_catalog.count(*) as scored
        from s
    )
    select r.id, r.place::integer,
           case when r.score is not null then r.score
                else fl.lowest * (fl.m - (r.place - fl.scored - 1)) / (fl.m + 1) end,
           r.raw
    from ranked r cross join fl
    where fl.scored > 0
    order by r.place, r.id
$$;
comment on function sift._late_order(bigint[], @extschema:vector@.halfvec[], integer) is
    'Internal: a pool reordered by MaxSim over its first top_n (the unscored keep their order '
    'behind), with the scores the ranking knobs take; no rows when no chunk has token vectors.';


create or replace function sift.maxsim(
    collection   text,
    chunk_ids    bigint[],
    query_tokens @extschema:vector@.vector[])
returns table (chunk_id bigint, rank integer, score double precision, token_count integer)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    col  sift.collections := sift._collection(maxsim.collection);
    toks @extschema:vector@.halfvec[] := sift._query_tokens(array[col], maxsim.query_tokens);
begin
    if toks is null then
        raise exception 'query_tokens is null' using errcode = 'SF003';
    end if;
    if cardinality(maxsim.chunk_ids) > 1000 then
        raise exception 'chunk_ids has % ids; maxsim scores at most 1,000', cardinality(maxsim.chunk_ids)
            using errcode = 'SF003';
    end if;
    if exists (select 1 from unnest(maxsim.chunk_ids) as u(id)
               where u.id is null
                  or not exists (select 1 from sift.chunks c
                                 where c.chunk_id = u.id and c.collection_id = col.collection_id)) then
        raise exception 'chunk_ids has an id that is not a chunk of collection "%"', col.name
            using errcode = 'SF006';
    end if;
    return query
    with p as (
        select d.id, d.o
        from (select distinct on (u.id) u.id, u.o::integer as o
              from unnest(maxsim.chunk_ids) with ordinality as u(id, o)
              order by u.id, u.o) d
    ), s as (
        select m.chunk_id, m.score, m.token_count
        from sift._maxsim_scores(array(select p.id from p), toks) m
    )
    select p.id, (pg_catalog.row_number() over (order by s.score desc nulls last,
                                                         case when s.score is not null then p.id end, p.o))::integer,
           s.score, coalesce(s.token_count, 0)
    from p left join s on s.chunk_id = p.id
    order by 2, 1;
end;
$$;
comment on function sift.maxsim(text, bigint[], @extschema:vector@.vector[]) is
    'Late-interaction (ColBERT) scores of chunks of a collection: for each of the question''s '
    'token vectors (1 to 256, the size of the collection''s), the best inner product over the '
    'chunk''s token vectors, summed. Every chunk comes back once (up to 1,000): the scored by '
    'score (ties: smaller id), then those without token vectors (score null, token_count 0) in '
    'the order given. SF006 for an id that is not a chunk of the collection. Read-only.';
