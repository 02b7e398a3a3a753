-- Pages: stable pagination of a finished ranking. A fused, capped,
-- MMR-diversified ranking is not a prefix of a longer one (a wider pool
-- changes the fusion, the cap and MMR), so pages are never "search again
-- with an offset". Each page is cut from one ranking of the request's first
-- page_window hits (lost-in-the-middle applies within each page), and each
-- page's last hit carries a cursor: the request's fingerprint, the window,
-- how many were served and which chunks, signed with sift.cursor_keys' key
-- for the tenant. The next page is the next page_size hits of that ranking
-- that were not served, so no row comes twice and none is skipped, whatever
-- was written in between (a write re-ranks the window: what it adds can
-- appear on a later page, what it deletes is gone). The ranking is
-- recomputed per page, so paging holds no state and runs on a hot standby.
-- A cursor is opaque, not secret: it carries the chunk ids already served.
-- In: a search's arguments, page_size and a cursor. Out: the page's hits, the
-- last carrying the next page's cursor.


create or replace function sift._cursor_mac(tenant text, payload text)
returns text
language sql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- A keyed SHA-256 of the tenant and the payload with sift.cursor_keys' key.
    -- No shipped role may execute it (nor read the key): only the two security
    -- definer functions below call it, as the key's owner.
    select pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(k.key || pg_catalog.sha256(
               k.key || pg_catalog.convert_to(tenant || E'\n' || payload, 'UTF8'))), 'hex'), 32)
    from sift.cursor_keys k
$$;
comment on function sift._cursor_mac(text, text) is
    'Internal, owner only: the signature of a cursor payload for a tenant (a keyed SHA-256 with '
    'sift.cursor_keys'' key); sift._cursor_encode and sift._cursor_verify call it as the owner.';


create or replace function sift._cursor_signer(acting_role name)
returns text
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
begin
    -- The tenant a cursor is signed for, or checked against: the acting role's
    -- (the caller's current_user, which the definers below take as a default
    -- argument, evaluated in the caller's context), which the session must be
    -- able to act as. A tenant signs and checks its own cursors only.
    if acting_role is null or not pg_catalog.pg_has_role(session_user, acting_role, 'MEMBER') then
        raise exception 'role % may not act as role %', session_user, acting_role using errcode = '42501';
    end if;
    return sift._tenant_for(acting_role);
end;
$$;
comment on function sift._cursor_signer(name) is
    'Internal: the tenant whose cursors the acting role signs and checks (42501 when the session '
    'may not act as that role).';


create or replace function sift._cursor_encode(kind text, fingerprint text, window_size integer, served integer,
                                               seen bigint[], acting_role name default current_user)
returns text
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    -- Security definer: the key (sift.cursor_keys) is readable by its owner
    -- only. It is the one function that signs, and it signs no text a caller
    -- gives: it builds the payload itself from fields it checks, the ones a
    -- page of sift.search_page or sift.finalize_page issues (a kind, a
    -- fingerprint's shape, a window, a served count, served chunk ids), for
    -- the acting role's own tenant. What a direct call can sign is
    -- therefore a cursor a real paging of the same request could carry, but
    -- for which hits it marks served: continuing it serves hits of that
    -- request's window ranking (computed with the caller's own rights), never
    -- one twice, minus those marked. sift._page_start checks the window
    -- against the request's page_window.
    tenant text := sift._cursor_signer(acting_role);
    body   text;
    mac    text;
begin
    if kind is null or kind not in ('search', 'finalize')
       or fingerprint is null or fingerprint !~ '^[0-9a-f]{32}$'
       or window_size is null or window_size not between 1 and 1000
       or served is null or served < 1
       -- each hit served adds a chunk id not served before
       or seen is null or cardinality(seen) < served or cardinality(seen) > 1000000
       or exists (select 1 from pg_catalog.unnest(seen) as s(id) where s.id is null or s.id <= 0) then
        raise exception 'sift._cursor_encode signs only what a page issues (kind, fingerprint, window, served, '
                        'served chunk ids)' using errcode = 'SF012';
    end if;
    body := pg_catalog.translate(pg_catalog.encode(pg_catalog.convert_to(pg_catalog.jsonb_build_object(
                'v', 1, 'k', kind, 'f', fingerprint, 'w', window_size, 'n', served,
                's', sift._seen_runs(seen))::text, 'UTF8'), 'base64'),
            E'+/=\n', '-_');
    mac := sift._cursor_mac(tenant, body);
    if mac is null then
        raise exception 'sift.cursor_keys has no key: pagination cursors cannot be signed' using errcode = 'SF012';
    end if;
    -- base64url(payload) "." signature (which binds the tenant).
    return body || '.' || mac;
end;
$$;
comment on function sift._cursor_encode(text, text, integer, integer, bigint[], name) is
    'Internal: a signed cursor for the acting role''s tenant: the entry point, request fingerprint, '
    'window, how many hits were served and which chunks, each checked (SF012 otherwise); it signs '
    'only the payload it builds from them (sift.cursor_keys'' key, which only it and '
    'sift._cursor_verify read).';


create or replace function sift._cursor_verify(body text, mac text, acting_role name default current_user)
returns boolean
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    -- Security definer: the key is readable by its owner only. It only says
    -- whether mac is body's signature for the acting role's tenant; it never
    -- gives a signature out.
    tenant text := sift._cursor_signer(acting_role);
    want   text := sift._cursor_mac(tenant, body);
begin
    if want is null then
        raise exception 'sift.cursor_keys has no key: pagination cursors cannot be checked' using errcode = 'SF012';
    end if;
    return mac is not null and mac = want;
end;
$$;
comment on function sift._cursor_verify(text, text, name) is
    'Internal: whether mac is the signature of a cursor payload for the acting role''s tenant '
    '(sift.cursor_keys'' key, which only it and sift._cursor_encode read). Signs nothing.';


create or replace function sift._request_fingerprint(
    kind text, cols sift.collections[], knobs sift.knob_set[], query_text text,
    query_embedding @extschema:vector@.vector, filter jsonb)
returns text
language sql stable security invoker
set search_path = pg_catalog, pg_temp
set extra_float_digits = 1
set IntervalStyle = postgres
as $$
    -- What a page must continue: the same entry point, collections (and the
    -- vector space each searches), knobs in force (0.5 and 0.50, or a default
    -- stated, are one request), question, vector and filter. The page size
    -- may change from page to page. The knobs' floats and durations become
    -- text here, so their text forms are pinned (the SET clauses): a session
    -- setting left on a pooled connection never makes a cursor "another
    -- request's".
    select pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.jsonb_build_array(
               kind,
               (select pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array((cols[i]).collection_id,
                                                                         pg_catalog.to_jsonb(knobs[i]),
                                                                         (select s.space_id from sift.vector_spaces s
                                                                          where s.collection_id = (cols[i]).collection_id
                                                                            and s.active))
                                            order by (cols[i]).collection_id)
                from pg_catalog.generate_subscripts(cols, 1) as i),
               coalesce(query_text, ''), query_embedding::text, coalesce(filter, '{}'::jsonb))::text, 'UTF8')),
           'hex'), 32)
$$;
comment on function sift._request_fingerprint(text, sift.collections[], sift.knob_set[], text,
    @extschema:vector@.vector, jsonb) is
    'Internal: a hash of what a paged request asked (entry point, collections and their knobs in '
    'force, question, vector, filter), which its cursors carry.';


create or replace function sift._seen_runs(seen bigint[])
returns text
language sql immutable parallel safe security invoker
set search_path = pg_catalog, pg_temp
as $$
    -- Served chunk ids, short: sorted, as runs of consecutive ids ("gap+length"
    -- in hex, the gap from the previous run's end), so a merged section of 40
    -- passages is one run.
    select coalesce(pg_catalog.string_agg(
               pg_catalog.to_hex(r.lo - coalesce(r.prev, 0))
               || case when r.hi > r.lo then '+' || pg_catalog.to_hex(r.hi - r.lo) else '' end, '.' order by r.lo), '')
    from (select g.lo, g.hi, pg_catalog.lag(g.hi) over (order by g.lo) as prev
          from (select min(x.id) as lo, max(x.id) as hi
                from (select u.id, u.id - pg_catalog.row_number() over (order by u.id) as grp
                      from (select distinct v.id from pg_catalog.unnest(seen) as v(id) where v.id > 0) u) x
                group by x.grp) g) r
$$;
comment on function sift._seen_runs(bigint[]) is
    'Internal: chunk ids as runs of consecutive ids (hex gap, "+" hex length, "." between runs).';


create or replace function sift._cursor_decode(cursor text, kind text, fingerprint text,
                                               out window_size integer, out served integer, out seen bigint[])
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    b64     text := pg_catalog.split_part(cursor, '.', 1);
    mac     text := pg_catalog.split_part(cursor, '.', 2);
    payload jsonb;
    runs    text;
    los     bigint[];
    lens    bigint[];
begin
    if pg_catalog.length(cursor) > 262144 or cursor !~ '^[A-Za-z0-9_-]+\.[0-9a-f]{32}$' then
        raise exception 'the cursor is not one sift.search_page issued' using errcode = 'SF012';
    end if;
    if not sift._cursor_verify(b64, mac) then
        raise exception 'the cursor was altered, or was not issued to tenant "%"', sift.current_tenant()
            using errcode = 'SF012';
    end if;
    begin
        payload := pg_catalog.convert_from(pg_catalog.decode(
                       pg_catalog.rpad(pg_catalog.translate(b64, '-_', '+/'),
                                       (pg_catalog.length(b64) + 3) / 4 * 4, '='), 'base64'), 'UTF8')::jsonb;
        runs := payload ->> 's';
        window_size := (payload ->> 'w')::integer;
        served := (payload ->> 'n')::integer;
    exception when others then
        payload := null;
    end;
    -- Signed by this database, yet checked as if it were not.
    if payload is null or jsonb_typeof(payload) <> 'object' or jsonb_typeof(payload -> 's') <> 'string'
       or window_size is null or window_size not between 1 and 1000 or served is null or served < 0
       or runs !~ '^([0-9a-f]{1,15}(\+[0-9a-f]{1,15})?(\.[0-9a-f]{1,15}(\+[0-9a-f]{1,15})?)*)?$' then
        raise exception 'the cursor is not one sift.search_page issued' using errcode = 'SF012';
    end if;
    if payload ->> 'k' is distinct from kind then
        raise exception 'the cursor continues sift.%_page, not sift.%_page', payload ->> 'k', kind
            using errcode = 'SF012';
    end if;
    if payload ->> 'f' is distinct from fingerprint then
        raise exception 'the cursor belongs to another request: the collections, knobs, question, vector and '
                        'filter must be those of its first page' using errcode = 'SF012';
    end if;
    select pg_catalog.array_agg(r.lo order by r.o), pg_catalog.array_agg(r.len order by r.o)
    into los, lens
    from (select x.o, sum(x.gap) over w + coalesce(sum(x.len) over w - x.len, 0) as lo, x.len
          from (select ('x' || pg_catalog.lpad(pg_catalog.split_part(p.part, '+', 1), 16, '0'))::bit(64)::bigint
                           as gap,
                       ('x' || pg_catalog.lpad(coalesce(nullif(pg_catalog.split_part(p.part, '+', 2), ''), '0'),
                                               16, '0'))::bit(64)::bigint as len,
                       p.o
                from pg_catalog.regexp_split_to_table(runs, '\.') with ordinality as p(part, o)
                where p.part <> '') x
          window w as (order by x.o)) r;
    if (select coalesce(sum(u.len + 1), 0) from pg_catalog.unnest(lens) as u(len)) > 1000000 then
        raise exception 'the cursor is not one sift.search_page issued' using errcode = 'SF012';
    end if;
    seen := array(select pg_catalog.generate_series(u.lo, u.lo + u.len)
                  from unnest(los, lens) as u(lo, len));
end;
$$;
comment on function sift._cursor_decode(text, text, text) is
    'Internal: a cursor''s window, served count and served chunk ids, after checking that it is '
    'well formed, signed for this tenant, unaltered, and of this entry point and request (SF012).';


create or replace function sift._page(hits sift.hit[], page_size integer, kind text, fingerprint text,
                                      window_size integer, served integer, seen bigint[], litm boolean,
                                      more boolean)
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
        -- The page's last hit says how to go on, or why nothing follows.
        if j = m and j < cardinality(fresh) then
            h.cursor := sift._cursor_encode(kind, fingerprint, window_size, served + j, taken);
        elsif j = m then
            h.cursor_end := case when more then 'window' else 'exhausted' end;
        end if;
        out := out || h;
    end loop;
    return query select x.* from pg_catalog.unnest(out) as x order by x.position, x.chunk_id;
end;
$$;
comment on function sift._page(sift.hit[], integer, text, text, integer, integer, bigint[], boolean, boolean) is
    'Internal: one page of a window''s ranking: the next page_size hits not yet served; the last by '
    'rank carries the cursor that continues after it, or, when none follows, cursor_end: window '
    '(more could be ranked past page_window) or exhausted.';


create or replace function sift._page_start(
    cols sift.collections[], knobs jsonb, kind text, query_text text, query_embedding @extschema:vector@.vector,
    filter jsonb, page_size integer, cursor text,
    out ks sift.knob_set[], out fingerprint text, out window_size integer, out served integer,
    out seen bigint[], out litm boolean)
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    asked sift.knob_set[] := sift._resolve_all(cols, knobs);
begin
    -- What both paged entry points start from: the knobs (the window is ranked
    -- in rank order; lost-in-the-middle orders each page), the request's
    -- fingerprint, and the window, served count and served chunks (the
    -- cursor's, else a first page's).
    if page_size is null or page_size not between 1 and 1000 then
        raise exception 'page_size must be between 1 and 1000, got %', page_size using errcode = 'SF003';
    end if;
    ks := sift._resolve_all(cols, coalesce(knobs, '{}'::jsonb) || '{"lost_in_the_middle": null}'::jsonb);
    fingerprint := sift._request_fingerprint(kind, cols, asked, query_text, query_embedding, filter);
    litm := coalesce((select bool_or((asked[i]).lost_in_the_middle) from generate_subscripts(asked, 1) as i), false);
    window_size := (select max((asked[i]).page_window) from generate_subscripts(asked, 1) as i);
    if cursor is null then
        served := 0;
        seen := '{}';
    else
        select d.served, d.seen into served, seen
        from sift._cursor_decode(cursor, kind, fingerprint) d
        -- The request decides the window (its knobs are in the fingerprint), not
        -- the cursor: one that says otherwise was not issued for this request.
        where d.window_size is not distinct from _page_start.window_size;
        if not found then
            raise exception 'the cursor belongs to another request: the collections, knobs, question, vector and '
                            'filter must be those of its first page' using errcode = 'SF012';
        end if;
    end if;
end;
$$;
comment on function sift._page_start(sift.collections[], jsonb, text, text, @extschema:vector@.vector, jsonb, integer,
    text) is
    'Internal: a paged request''s knobs, fingerprint, window, served count and chunks, and whether '
    'lost-in-the-middle orders its pages (SF003 for a page_size out of range, SF012 for a bad cursor).';


create or replace function sift._staged_page(
    cols sift.collections[], knobs sift.knob_set[], query_text text, query_embedding @extschema:vector@.vector,
    filter jsonb, page_size integer, fingerprint text, window_size integer, served integer, seen bigint[],
    litm boolean)
returns setof sift.hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    w      integer := window_size;
    pool   sift.candidate[];
    choice record;
    more   boolean;
begin
    -- The window ranked through every stage's own function (the arguments
    -- checked by the caller), as sift._staged_search ranks a search.
    pool := array(select c from sift._candidates(cols, knobs, query_text, query_embedding, w, filter) c
                  order by c.fused_rank);
    choice := sift._reranker_choice(cols, knobs);
    -- More could be ranked past the window when the pool is larger than it, or
    -- a leg came back full (it stopped at its limit, not at its last match).
    more := coalesce(cardinality(pool), 0) > w or exists (
        select 1 from unnest(pool) c
        join generate_subscripts(cols, 1) as i on (cols[i]).name = c.collection_name
        where c.dense_rank >= greatest((knobs[i]).fetch_k, w) or c.lexical_rank >= greatest((knobs[i]).fetch_k, w));
    return query
    select * from sift._page(
        array(select h from sift._hits(cols, knobs, pool,
                                       array(select c.chunk_id from unnest(pool) c order by c.fused_rank),
                                       array(select c.score from unnest(pool) c order by c.fused_rank),
                                       w, null, choice.alias, choice.refused, query_text) h),
        page_size, 'search', fingerprint, w, served, seen, litm, more);
end;
$$;
comment on function sift._staged_page(sift.collections[], sift.knob_set[], text, @extschema:vector@.vector, jsonb,
    integer, text, integer, integer, bigint[], boolean) is
    'Internal: a page of sift.search_page whose window is ranked through every stage''s own function '
    '(sift._candidates, sift._hits), then cut (sift._page): what it runs when the search is not plain.';


create or replace function sift._plain_page(
    col sift.collections, knobs sift.knob_set, query_text text, query_embedding @extschema:vector@.vector,
    filter jsonb, space sift.vector_spaces, exact boolean, iterative boolean, page_size integer,
    fingerprint text, window_size integer, served integer, seen bigint[], litm boolean)
returns setof sift.hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
declare
    n    integer := greatest(knobs.fetch_k, window_size);
    l    record := sift._plain_legs(col, knobs, query_text, query_embedding, window_size, filter, space, exact,
                                    iterative);
    more boolean;
    hits sift.hit[];
begin
    -- A plain search of the window (sift.search's plain statements, with
    -- match_count the window), then cut. More could be ranked past it when the
    -- legs' pool is larger than it, or a leg came back full.
    more := coalesce(cardinality(l.dense_ids), 0) >= n or coalesce(cardinality(l.lexical_ids), 0) >= n
            or (select count(*) from (select unnest(l.dense_ids) union select unnest(l.lexical_ids)) p) > window_size;
    if (knobs.recency_field is null or knobs.recency_weight = 0) and knobs.score_threshold is null
       and knobs.query_language is null then
        hits := array(select h from sift._plain_hits(col, knobs, window_size, l.dense_ids, l.dense_raw,
                                                     l.lexical_ids, l.lexical_raw, l.w, l.legs,
                                                     l.lexical_query::text, l.configs, l.lexical_exact,
                                                     space.name::text,
                                                     case when knobs.rerank then col.reranker_alias::text end) h);
    else
        hits := array(select h from sift._plain_hits_adjusted(col, knobs, window_size, l.dense_ids, l.dense_raw,
                                                              l.lexical_ids, l.lexical_raw, l.w, l.legs,
                                                              l.lexical_query::text, l.configs, l.lexical_exact,
                                                              space.name::text,
                                                              case when knobs.rerank then col.reranker_alias::text
                                                              end) h);
    end if;
    return query
    select * from sift._page(hits, page_size, 'search', fingerprint, window_size, served, seen, litm, more);
end;
$$;
comment on function sift._plain_page(sift.collections, sift.knob_set, text, @extschema:vector@.vector, jsonb,
    sift.vector_spaces, boolean, boolean, integer, text, integer, integer, bigint[], boolean) is
    'Internal: a page of sift.search_page when the search is plain (sift._plain_plan): the window '
    'ranked by the plain path''s statements (sift._plain_legs, sift._plain_hits), the same rows as '
    'sift._staged_page''s, then cut (sift._page).';


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
    st     record := sift._page_start(cols, search_page.knobs, 'search', search_page.query_text,
                                      search_page.query_embedding, search_page.filter, search_page.page_size,
                                      search_page.cursor);
    ks     sift.knob_set[] := st.ks;
    plan   record;
begin
    perform sift._check_query(cols, ks, query_text, query_embedding, st.window_size, filter);
    -- One collection with only the common stages: its window ranked by the
    -- plain path's statements (a page then costs what a search of the window
    -- costs); anything else through every stage's own function.
    if cardinality(cols) = 1 then
        select * into plan from sift._plain_plan(cols[1], ks[1], search_page.query_embedding is not null);
        if found then
            return query select * from sift._plain_page(cols[1], ks[1], search_page.query_text,
                                                        search_page.query_embedding, search_page.filter, plan.space,
                                                        plan.exact, plan.iterative, search_page.page_size,
                                                        st.fingerprint, st.window_size, st.served, st.seen, st.litm);
            return;
        end if;
    end if;
    return query select * from sift._staged_page(cols, ks, search_page.query_text, search_page.query_embedding,
                                                 search_page.filter, search_page.page_size, st.fingerprint,
                                                 st.window_size, st.served, st.seen, st.litm);
end;
$$;
comment on function sift.search_page(text, text, @extschema:vector@.vector, integer, text, jsonb, jsonb, text[]) is
    'sift.search a page at a time. The pages are cut from one ranking of the first page_window '
    'hits (a knob, default 100) with the same arguments, so page 2 continues page 1: no row twice, '
    'none skipped, and only the last page is short. The page''s last hit (by rank) carries cursor: '
    'pass it (with the same collections, knobs, question, vector and filter; page_size may change) '
    'for the hits after it. When none follows, cursor is null and cursor_end says why: exhausted '
    '(nothing more matches) or window (page_window hits were ranked; raise it for more); no row '
    'means nothing was left. A cursor of another request, entry point or tenant, or an altered '
    'one, is SF012. Between pages the window is ranked afresh: a chunk written meanwhile can '
    'appear on a later page, a deleted one does not, and a served one never comes back. '
    'lost_in_the_middle orders each page. A page costs a search of page_window hits. Read-only.';


create or replace function sift.finalize_page(
    collection      text default null,
    chunk_ids       bigint[] default null,
    scores          double precision[] default null,
    page_size       integer default 10,
    cursor          text default null,
    knobs           jsonb default '{}',
    collections     text[] default null,
    scored_by       text default null,
    query_text      text default null,
    query_embedding @extschema:vector@.vector default null,
    filter          jsonb default null,
    more            boolean default null)
returns setof sift.hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    cols   sift.collections[] := sift._collections(finalize_page.collection, finalize_page.collections);
    st     record := sift._page_start(cols, finalize_page.knobs, 'finalize', finalize_page.query_text,
                                      finalize_page.query_embedding, finalize_page.filter, finalize_page.page_size,
                                      finalize_page.cursor);
    pool   record := sift._finalize_input(st.ks, finalize_page.chunk_ids, finalize_page.scores, st.window_size,
                                          finalize_page.scored_by);
begin
    return query
    select * from sift._page(
        array(select h from sift._hits(cols, st.ks, null, pool.ids, pool.base, st.window_size, scored_by, null,
                                       null, finalize_page.query_text) h),
        page_size, 'finalize', st.fingerprint, st.window_size, st.served, st.seen, st.litm,
        coalesce(finalize_page.more, false) or coalesce(cardinality(pool.ids), 0) > st.window_size);
end;
$$;
comment on function sift.finalize_page(text, bigint[], double precision[], integer, text, jsonb, text[], text, text,
    @extschema:vector@.vector, jsonb, boolean) is
    'sift.finalize a page at a time, as sift.search_page pages sift.search: a pool you scored '
    '(the Python client reranks the window for each page). The cursor binds the collections, '
    'knobs, question, and the query_embedding and filter the pool was retrieved with (pass them, '
    'or leave both null on every page); the pool is the caller''s, and cursor_end is window when '
    'it holds more than page_window chunks or more says its retrieval went on past it. SF012 for a cursor of another request, entry point or '
    'tenant, or an altered one. Read-only.';
