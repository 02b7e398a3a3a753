-- Pages: stable pagination of a finished ranking. A fused, capped,
-- MMR-diversified ranking is not a prefix of a longer one (a wider pool
-- changes the fusion, the cap and MMR), so pages are never "search again
-- with an offset". Each page is cut from one ranking of the request's first
-- page_window hits (lost-in-the-middle applies within each page), and each
-- hit carries a cursor: the request's fingerprint, the window, how many were
-- served and which chunks, signed with sift.cursor_keys' key. The next page
-- is the next page_size hits of that ranking that were not served, so no
-- row comes twice and none is skipped, whatever was written in between
-- (a write re-ranks the window: what it adds can appear on a later page,
-- what it deletes is gone). The ranking is recomputed per page, so paging
-- holds no state and runs on a hot standby.


create or replace function sift._cursor_sign(payload text, acting_role name default current_user)
returns text
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    tenant text;
    mac    text;
begin
    -- Runs as the key's owner (no tenant reads sift.cursor_keys), so it decides
    -- itself for whom it signs: the acting role (the caller's current_user, by
    -- the default), which the session must be able to act as, and that role's
    -- tenant goes into the signature. A tenant can sign only its own cursors.
    if acting_role is null or not pg_catalog.pg_has_role(session_user, acting_role, 'MEMBER') then
        raise exception 'role % may not act as role %', session_user, acting_role using errcode = '42501';
    end if;
    tenant := sift._tenant_for(acting_role);
    select pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(k.key || pg_catalog.sha256(
               k.key || pg_catalog.convert_to(tenant || E'\n' || payload, 'UTF8'))), 'hex'), 32)
    into mac
    from sift.cursor_keys k;
    if mac is null then
        raise exception 'sift.cursor_keys has no key: pagination cursors cannot be signed' using errcode = 'SF012';
    end if;
    return mac;
end;
$$;
comment on function sift._cursor_sign(text, name) is
    'Internal: the signature of a cursor payload for the acting role''s tenant (a keyed SHA-256 '
    'with sift.cursor_keys'' key, which only this function reads).';


create or replace function sift._request_fingerprint(
    kind text, cols sift.collections[], query_text text, query_embedding @extschema:vector@.vector,
    filter jsonb, knobs jsonb)
returns text
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- What a page must continue: the same entry point, collections, question,
    -- vector, filter and knobs (the page size may change from page to page).
    select pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.jsonb_build_array(
               kind,
               (select pg_catalog.array_agg((cols[i]).collection_id order by i)
                from pg_catalog.generate_subscripts(cols, 1) as i),
               coalesce(query_text, ''), query_embedding::text, coalesce(filter, '{}'::jsonb),
               coalesce(knobs, '{}'::jsonb))::text, 'UTF8')), 'hex'), 32)
$$;
comment on function sift._request_fingerprint(text, sift.collections[], text, @extschema:vector@.vector, jsonb, jsonb) is
    'Internal: a hash of what a paged request asked (entry point, collections, question, vector, '
    'filter, knobs), which its cursors carry.';


create or replace function sift._cursor_encode(kind text, fingerprint text, window_size integer, served integer,
                                               seen bigint[])
returns text
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- base64url(payload) "." signature; the served chunk ids go sorted, as
    -- differences (small numbers), to keep the token short.
    select p.b64 || '.' || sift._cursor_sign(p.b64)
    from (select pg_catalog.translate(pg_catalog.encode(pg_catalog.convert_to(pg_catalog.jsonb_build_object(
                     'v', 1, 'k', kind, 't', sift.current_tenant(), 'f', fingerprint, 'w', window_size,
                     'n', served,
                     's', coalesce((select pg_catalog.jsonb_agg(d.id - coalesce(d.prev, 0) order by d.id)
                                    from (select x.id, pg_catalog.lag(x.id) over (order by x.id) as prev
                                          from (select distinct u.id from pg_catalog.unnest(seen) as u(id)) x) d),
                                   '[]'::jsonb))::text, 'UTF8'), 'base64'),
                 E'+/=\n', '-_') as b64) p
$$;
comment on function sift._cursor_encode(text, text, integer, integer, bigint[]) is
    'Internal: a signed cursor: the entry point, tenant, request fingerprint, window, how many '
    'hits were served and which chunks.';


create or replace function sift._cursor_decode(cursor text, kind text, fingerprint text,
                                               out window_size integer, out served integer, out seen bigint[])
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    b64     text := pg_catalog.split_part(cursor, '.', 1);
    mac     text := pg_catalog.split_part(cursor, '.', 2);
    payload jsonb;
begin
    if pg_catalog.length(cursor) > 65536 or b64 = '' or mac = ''
       or cursor !~ '^[A-Za-z0-9_-]+\.[0-9a-f]{32}$' then
        raise exception 'the cursor is not one sift.search_page issued' using errcode = 'SF012';
    end if;
    begin
        payload := pg_catalog.convert_from(pg_catalog.decode(
                       pg_catalog.rpad(pg_catalog.translate(b64, '-_', '+/'),
                                       (pg_catalog.length(b64) + 3) / 4 * 4, '='), 'base64'), 'UTF8')::jsonb;
    exception when others then
        raise exception 'the cursor is not one sift.search_page issued' using errcode = 'SF012';
    end;
    if jsonb_typeof(payload) <> 'object' or payload ->> 't' is distinct from sift.current_tenant() then
        raise exception 'the cursor was not issued to tenant "%"', sift.current_tenant() using errcode = 'SF012';
    end if;
    if mac <> sift._cursor_sign(b64) then
        raise exception 'the cursor was altered: its signature does not match' using errcode = 'SF012';
    end if;
    if payload ->> 'k' is distinct from kind then
        raise exception 'the cursor continues sift.%_page, not sift.%_page', payload ->> 'k', kind
            using errcode = 'SF012';
    end if;
    if payload ->> 'f' is distinct from fingerprint then
        raise exception 'the cursor belongs to another request: the collections, question, vector, filter '
                        'and knobs must be those of its first page' using errcode = 'SF012';
    end if;
    window_size := (payload ->> 'w')::integer;
    served := (payload ->> 'n')::integer;
    seen := array(select sum(d.v::bigint) over (order by d.o)
                  from pg_catalog.jsonb_array_elements_text(payload -> 's') with ordinality as d(v, o)
                  order by d.o);
end;
$$;
comment on function sift._cursor_decode(text, text, text) is
    'Internal: a cursor''s window, served count and served chunk ids, after checking that it is '
    'well formed, this tenant''s, unaltered, and of this entry point and request (SF012).';


create or replace function sift._page(hits sift.hit[], page_size integer, kind text, fingerprint text,
                                      window_size integer, served integer, seen bigint[], litm boolean)
returns setof sift.hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    fresh integer[];
    m     integer;
    h     sift.hit;
    out   sift.hit[] := '{}';
    taken bigint[] := coalesce(seen, '{}');
    ends  text := case when coalesce(cardinality(hits), 0) >= window_size then 'window' else 'exhausted' end;
begin
    -- The window's hits in rank order that were not served (a merged section
    -- counts as served when any of its passages was).
    fresh := array(select i from pg_catalog.generate_subscripts(hits, 1) as i
                   where not ((hits[i]).chunk_ids && taken) order by (hits[i]).rank, (hits[i]).chunk_id);
    m := least(page_size, coalesce(cardinality(fresh), 0));
    for j in 1 .. m loop
        h := hits[fresh[j]];
        taken := taken || h.chunk_ids;
        h.position := case when not litm then j
                           when j % 2 = 1 then (j + 1) / 2
                           else m - j / 2 + 1 end;
        if j < cardinality(fresh) then
            h.cursor := sift._cursor_encode(kind, fingerprint, window_size, served + j, taken);
        else
            h.cursor_end := ends;
        end if;
        out := out || h;
    end loop;
    return query select x.* from pg_catalog.unnest(out) as x order by x.position, x.chunk_id;
end;
$$;
comment on function sift._page(sift.hit[], integer, text, text, integer, integer, bigint[], boolean) is
    'Internal: one page of a window''s ranking: the next page_size hits not yet served, each with '
    'the cursor that continues after it (null on the last one, whose cursor_end says why: '
    'exhausted, or window when page_window hits were served).';


create or replace function sift.search_page(
    collection      text default null,
    query_text      text default '',
    query_embedding @extschema:vector@.vector default null,
    page_size       integer default 10,
    cursor          text default null,
    filter          jsonb default '{}',
    knobs           jsonb default '{}',
    collections     text[] default null)
returns setof sift.hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    cols   sift.collections[] := sift._collections(search_page.collection, search_page.collections);
    asked  sift.knob_set[] := sift._resolve_all(cols, search_page.knobs);
    -- The window is ranked in rank order; lost-in-the-middle orders each page.
    ks     sift.knob_set[] := sift._resolve_all(cols, coalesce(search_page.knobs, '{}'::jsonb)
                                                      || '{"lost_in_the_middle": null}'::jsonb);
    fp     text := sift._request_fingerprint('search', cols, search_page.query_text, search_page.query_embedding,
                                             search_page.filter, search_page.knobs);
    w      integer := (select max((asked[i]).page_window) from generate_subscripts(asked, 1) as i);
    served integer := 0;
    seen   bigint[] := '{}';
    pool   sift.candidate[];
    choice record;
begin
    if page_size is null or page_size not between 1 and 1000 then
        raise exception 'page_size must be between 1 and 1000, got %', page_size using errcode = 'SF003';
    end if;
    if search_page.cursor is not null then
        select d.window_size, d.served, d.seen into w, served, seen
        from sift._cursor_decode(search_page.cursor, 'search', fp) d;
    end if;
    perform sift._check_query(cols, query_text, query_embedding, w, filter);
    pool := array(select c from sift._candidates(cols, ks, query_text, query_embedding, w, filter) c
                  order by c.fused_rank);
    choice := sift._reranker_choice(cols, ks);
    return query
    select * from sift._page(
        array(select h from sift._hits(cols, ks, pool,
                                       array(select c.chunk_id from unnest(pool) c order by c.fused_rank),
                                       array(select c.score from unnest(pool) c order by c.fused_rank),
                                       w, null, choice.alias, choice.refused, search_page.query_text) h),
        page_size, 'search', fp, w, served, seen,
        coalesce((select bool_or((asked[i]).lost_in_the_middle) from generate_subscripts(asked, 1) as i), false));
end;
$$;
comment on function sift.search_page(text, text, @extschema:vector@.vector, integer, text, jsonb, jsonb, text[]) is
    'sift.search a page at a time. The pages are cut from one ranking of the first page_window '
    'hits (a knob, default 100) with the same arguments, so page 2 continues page 1: no row twice, '
    'none skipped, and only the last page is short. Every hit carries cursor: pass it (with the '
    'same collections, question, vector, filter and knobs; page_size may change) to get the hits '
    'after it. The last hit''s cursor is null and cursor_end says why: exhausted (the legs found '
    'no more) or window (page_window hits were served; raise it for more). A cursor of another '
    'request, entry point or tenant, or an altered one, is SF012. Between pages the window is '
    'ranked afresh: a chunk written meanwhile can appear on a later page, a deleted one does not, '
    'and a served one never comes back. lost_in_the_middle orders each page. Read-only.';


create or replace function sift.finalize_page(
    collection  text default null,
    chunk_ids   bigint[] default null,
    scores      double precision[] default null,
    page_size   integer default 10,
    cursor      text default null,
    knobs       jsonb default '{}',
    collections text[] default null,
    scored_by   text default null,
    query_text  text default null)
returns setof sift.hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    cols   sift.collections[] := sift._collections(finalize_page.collection, finalize_page.collections);
    asked  sift.knob_set[] := sift._resolve_all(cols, finalize_page.knobs);
    ks     sift.knob_set[] := sift._resolve_all(cols, coalesce(finalize_page.knobs, '{}'::jsonb)
                                                      || '{"lost_in_the_middle": null}'::jsonb);
    fp     text := sift._request_fingerprint('finalize', cols, finalize_page.query_text, null, null,
                                             finalize_page.knobs);
    w      integer := (select max((asked[i]).page_window) from generate_subscripts(asked, 1) as i);
    served integer := 0;
    seen   bigint[] := '{}';
    pool   record;
begin
    if page_size is null or page_size not between 1 and 1000 then
        raise exception 'page_size must be between 1 and 1000, got %', page_size using errcode = 'SF003';
    end if;
    if finalize_page.cursor is not null then
        select d.window_size, d.served, d.seen into w, served, seen
        from sift._cursor_decode(finalize_page.cursor, 'finalize', fp) d;
    end if;
    pool := sift._finalize_input(ks, finalize_page.chunk_ids, finalize_page.scores, w, finalize_page.scored_by);
    return query
    select * from sift._page(
        array(select h from sift._hits(cols, ks, null, pool.ids, pool.base, w, scored_by, null, null,
                                       finalize_page.query_text) h),
        page_size, 'finalize', fp, w, served, seen,
        coalesce((select bool_or((asked[i]).lost_in_the_middle) from generate_subscripts(asked, 1) as i), false));
end;
$$;
comment on function sift.finalize_page(text, bigint[], double precision[], integer, text, jsonb, text[], text, text) is
    'sift.finalize a page at a time, as sift.search_page pages sift.search: a reranked pool''s '
    'pages (the Python client reranks the window for each page and passes the same question). '
    'The cursor binds the collections, knobs and question; the pool is the caller''s. SF012 for '
    'a cursor of another request, entry point or tenant, or an altered one. Read-only.';
