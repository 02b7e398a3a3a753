-- Sections: from a hit back to the part of its document it came from. A
-- chunk of the hierarchical strategy points at its section; a section at
-- its enclosing one (parent_ordinal), up to the top-level heading.
-- In: a hit's chunk. Out: its section's text and path, up to the top-level
-- heading.

create or replace function sift.resolve_sections(
    chunk_ids    bigint[],
    skip_missing boolean default false)
returns table (
    section_id        bigint,
    document_id       bigint,
    collection_name   text,
    source_uri        text,
    title             text,
    ordinal           integer,
    level             integer,
    heading           text,
    path              text[],
    parent_section_id bigint,
    depth             integer,
    for_chunk_ids     bigint[],
    section_chunk_ids bigint[],
    content           text,
    token_count       integer)
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    missing bigint;
    why     text;
begin
    if cardinality(resolve_sections.chunk_ids) > 10000 then
        raise exception 'chunk_ids has % ids; resolve at most 10,000 at once',
            cardinality(resolve_sections.chunk_ids) using errcode = 'SF003';
    end if;
    -- Every id must be a chunk the caller can see that has a section, unless
    -- the caller asked to skip the ones that are not.
    select u.id,
           case when k.chunk_id is null then 'is not a chunk of this tenant (deleted, or never written)'
                else 'has no section (written without structure: the flat strategy or no section_ordinals)' end
    into missing, why
    from unnest(resolve_sections.chunk_ids) as u(id)
    left join sift.chunks k on k.chunk_id = u.id
    where u.id is null or k.section_id is null
    limit 1;
    if found and not skip_missing then
        raise exception 'chunk % %', coalesce(missing::text, 'null'), why
            using errcode = 'SF011', hint = 'skip_missing => true returns the sections that resolve';
    end if;

    return query
    with recursive own as (
        select k.section_id, pg_catalog.array_agg(distinct k.chunk_id order by k.chunk_id) as asked
        from sift.chunks k
        where k.chunk_id = any (resolve_sections.chunk_ids) and k.section_id is not null
        group by k.section_id
    ), up as (
        -- Each asked-for section and its ancestors, with the distance from the nearest asker.
        select s.section_id, s.document_id, s.parent_ordinal, 0 as depth, own.asked
        from own join sift.sections s on s.section_id = own.section_id
        union all
        select p.section_id, p.document_id, p.parent_ordinal, up.depth + 1, up.asked
        from up join sift.sections p on p.document_id = up.document_id and p.ordinal = up.parent_ordinal
    ), found_ as (
        select up.section_id, min(up.depth) as depth,
               (select pg_catalog.array_agg(distinct a order by a) from up u2, unnest(u2.asked) as a
                where u2.section_id = up.section_id) as asked
        from up group by up.section_id
    )
    select s.section_id, s.document_id, c.name::text, d.source_uri, d.title, s.ordinal, s.level, s.heading,
           (select pg_catalog.array_agg(a.heading order by a.ordinal)
            from sift.sections a
            where a.document_id = s.document_id and a.level > 0
              and (a.ordinal = s.ordinal or a.ordinal = any (anc.ords))) as path,
           ps.section_id, fd.depth, fd.asked, body.ids, body.txt, body.tokens
    from found_ fd
    join sift.sections s on s.section_id = fd.section_id
    join sift.documents d on d.document_id = s.document_id
    join sift.collections c on c.collection_id = s.collection_id
    left join sift.sections ps on ps.document_id = s.document_id and ps.ordinal = s.parent_ordinal
    cross join lateral (
        -- Ordinals of this section's ancestors.
        with recursive a(ordinal, parent_ordinal) as (
            select s.ordinal, s.parent_ordinal
            union all
            select x.ordinal, x.parent_ordinal
            from a join sift.sections x on x.document_id = s.document_id and x.ordinal = a.parent_ordinal
        )
        select pg_catalog.array_agg(a.ordinal) as ords from a) anc
    -- A section's text: its own chunks (a subsection's are its own).
    cross join lateral sift._section_body(s.section_id) body
    order by s.document_id, s.ordinal, s.section_id;
end;
$$;
comment on function sift.resolve_sections(bigint[], boolean) is
    'From hits back to their sections: for chunk ids (a hit''s chunk_id, chunk_ids or '
    'window_chunk_ids) every section they belong to (depth 0) and its ancestors up to the '
    'top-level heading (depth 1, 2, ...), once each, in document order, with document-scoped '
    'provenance (document, source_uri, the section''s place, level, heading and heading path), '
    'for_chunk_ids (which of the given chunks it resolves), and the section''s own text and chunk '
    'ids (section_chunk_ids). A chunk that does not exist for this tenant or has no section raises SF011, unless '
    'skip_missing. Read-only.';
