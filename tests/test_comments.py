"""Every table, view, column, domain and composite type in schema sift has a comment, so
psql's \\d+, \\dD+ and \\dT+ say what each holds; a new one without a comment fails here,
by name. Each comment is written by a file of sql/ (sql/95_comments.sql, re-applied on every
migrate), never by a migration alone. The knob_set attributes and the knobs' domains say what
sift.knob_defs.meaning says (sql/04_knob_table.sql). (Functions:
test_migrate.test_every_function_has_a_comment.)"""

from __future__ import annotations

from pgsift.schema import function_files, with_vector_schema

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


def test_the_knobs_domains_say_what_knob_defs_says(db):
    stale = db.execute("""
        select k.name from sift.knob_defs k
        join pg_type t on t.oid = k.type and t.typtype = 'd' and t.typnamespace = 'sift'::regnamespace
        where obj_description(t.oid, 'pg_type')
              is distinct from format('Values of the knob %s (sift.knob_defs): %s', k.name, k.meaning)
        order by k.position""").fetchall()
    assert stale == [], "comment on a knob's domain differs from knob_defs.meaning: " + ", ".join(r[0] for r in stale)


# Every comment on the schema, its tables, views, columns, composite types and domains (not
# functions, nor the policies' hashes that sql/90_trust.sql keeps), as `comment on` names it.
COMMENTED = """
    select 'schema sift', obj_description('sift'::regnamespace, 'pg_namespace')
    union all
    select case c.relkind when 'v' then 'view ' else 'table ' end || c.oid::regclass::text,
           obj_description(c.oid, 'pg_class')
    from pg_class c where c.relnamespace = 'sift'::regnamespace and c.relkind in ('r', 'p', 'v')
    union all
    select case t.typtype when 'd' then 'domain ' else 'type ' end || t.oid::regtype::text,
           obj_description(t.oid, 'pg_type')
    from pg_type t
    left join pg_class r on r.oid = t.typrelid
    where t.typnamespace = 'sift'::regnamespace and (t.typtype = 'd' or (t.typtype = 'c' and r.relkind = 'c'))
    union all
    select 'column ' || c.oid::regclass::text || '.' || quote_ident(a.attname), col_description(c.oid, a.attnum)
    from pg_class c
    join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    where c.relnamespace = 'sift'::regnamespace and c.relkind in ('r', 'p', 'v', 'c')"""


def test_every_comment_is_declared_in_sql(db):
    """With every comment of schema sift taken away, the files of sql/ that write comments
    (sql/04_knob_table.sql for the knobs, sql/95_comments.sql for the rest) put each back as it
    was: a comment written by a migration alone fails here, by name."""
    before = {what: text for what, text in db.execute(COMMENTED).fetchall() if text is not None}
    assert len(before) > 500
    files = [f for f in function_files() if f.version in ("04_knob_table", "95_comments")]
    assert [f.path.name for f in files] == ["04_knob_table.sql", "95_comments.sql"]
    with db.transaction(force_rollback=True):
        for what in before:
            db.execute(f"comment on {what} is null")
        assert not any(text for _, text in db.execute(COMMENTED).fetchall())
        for f in files:
            db.execute(with_vector_schema(f.text, "public"))
        after = {what: text for what, text in db.execute(COMMENTED).fetchall() if text is not None}
    missing = sorted(set(before) - set(after))
    assert missing == [], "a comment no file of sql/ writes (put it in sql/95_comments.sql): " + ", ".join(missing)
    changed = sorted(what for what in before if after[what] != before[what])
    assert changed == [], "sql/ writes another comment than the database has: " + ", ".join(changed)
    assert set(after) == set(before)
