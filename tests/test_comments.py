"""Every table, view, column, domain and composite type in schema sift has a comment, so
psql's \\d+, \\dD+ and \\dT+ say what each holds; a new one without a comment fails here,
by name. The knob_set attributes say what sift.knob_defs.meaning says. (Functions:
test_migrate.test_every_function_has_a_comment.)"""

from __future__ import annotations

UNCOMMENTED = """
    select case c.relkind when 'v' then 'view ' else 'table ' end || c.oid::regclass::text
    from pg_class c
    where c.relnamespace = 'sift'::regnamespace and c.relkind in ('r', 'p', 'v')
      and coalesce(btrim(obj_description(c.oid, 'pg_class')), '') = ''
    union all
    select case t.typtype when 'd' then 'domain ' else 'type ' end || t.oid::regtype::text
    from pg_type t
    left join pg_class r on r.oid = t.typrelid
    where t.typnamespace = 'sift'::regnamespace
      and (t.typtype = 'd' or (t.typtype = 'c' and r.relkind = 'c'))   -- not the row types of tables
      and coalesce(btrim(obj_description(t.oid, 'pg_type')), '') = ''
    union all
    select 'column ' || c.oid::regclass::text || '.' || quote_ident(a.attname)
    from pg_class c
    join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    where c.relnamespace = 'sift'::regnamespace and c.relkind in ('r', 'p', 'v', 'c')
      and coalesce(btrim(col_description(c.oid, a.attnum)), '') = ''
    union all
    select 'schema sift' where coalesce(btrim(obj_description('sift'::regnamespace, 'pg_namespace')), '') = ''
    order by 1"""


def test_every_table_column_and_type_has_a_comment(db):
    described = db.execute("""
        select count(*) from pg_description d join pg_class c on c.oid = d.objoid
        where d.classoid = 'pg_class'::regclass and c.relnamespace = 'sift'::regnamespace""").fetchone()[0]
    assert described > 300   # the query below sees the catalog at all
    missing = [r[0] for r in db.execute(UNCOMMENTED).fetchall()]
    assert missing == [], "no comment on: " + ", ".join(missing)


def test_knob_set_attributes_say_what_knob_defs_says(db):
    stale = db.execute("""
        select k.name from sift.knob_defs k
        where col_description('sift.knob_set'::regclass,
                              (select a.attnum from pg_attribute a
                               where a.attrelid = 'sift.knob_set'::regclass and a.attname = k.name))
              is distinct from k.meaning
        order by k.position""").fetchall()
    assert stale == [], "comment on sift.knob_set differs from knob_defs.meaning: " + ", ".join(r[0] for r in stale)
