"""Metadata filter operators (sql/15_filters.sql): random filters over random metadata against a
Python reference of the same semantics (SQL/JSON path in lax mode, three-valued: a value of
another type is unknown, never a match), then through every leg and a delete, and typed errors
naming where a filter is wrong."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from typing import Any

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Client, Document, InvalidArgument
from psycopg.types.json import Jsonb

DIMS = 8
TEAMS = ["billing", "sales", "support"]
TAGS = ["red", "green", "blue"]
MISSING = object()


def random_metadata(rng: random.Random) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    pick = rng.random
    if pick() < 0.85:
        meta["year"] = rng.choice([2015, 2018, 2020, 2021, 2022, 2024, 2025, 2020.5, "2021"])
    if pick() < 0.85:
        meta["team"] = rng.choice([*TEAMS, None])
    if pick() < 0.8:
        meta["tags"] = rng.sample(TAGS, rng.randrange(0, 3))
    if pick() < 0.8:
        meta["published"] = rng.choice(["2023-12-31", "2024-01-01", "2024-03-15", "2025-06-30", "n/a"])
    if pick() < 0.7:
        meta["author"] = {"name": rng.choice(["Ada", "Grace", "Linus"]), "age": rng.choice([30, 45, 60])}
    if pick() < 0.6:
        meta["draft"] = rng.choice([True, False])
    return meta


# -- the reference ------------------------------------------------------------------------------

def _items(meta: Any, keys: list[str]) -> list[Any]:
    items = [meta]
    for key in keys:
        nxt = []
        for x in items:
            if isinstance(x, dict) and key in x:
                nxt.append(x[key])
            elif isinstance(x, list):                       # lax: arrays unwrap for a member
                nxt += [y[key] for y in x if isinstance(y, dict) and key in y]
        items = nxt
    return items


def _unwrapped(items: list[Any]) -> list[Any]:
    out = []
    for x in items:
        out += x if isinstance(x, list) else [x]
    return out


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "container"


def _cmp(a: Any, op: str, b: Any) -> bool | None:
    ka, kb = _kind(a), _kind(b)
    if "null" in (ka, kb):   # null equals null (so >= and <= hold too) and orders with nothing else
        return ka == kb and op in ("==", ">=", "<=")
    if ka != kb or ka == "container":
        return None
    return {"==": a == b, ">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[op]


def _date(v: Any) -> datetime | None:
    if not isinstance(v, str):
        return None
    try:
        d = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def _exists_cmp(items: list[Any], op: str, lit: Any, dated: bool = False) -> bool | None:
    results = []
    for x in _unwrapped(items):
        if dated:
            dx = _date(x)
            results.append(None if dx is None else _cmp(dx.timestamp(), op, _date(lit).timestamp()))  # type: ignore[union-attr]
        else:
            results.append(_cmp(x, op, lit))
    if True in results:
        return True
    return None if None in results else False


def _and(values: list[bool | None]) -> bool | None:
    return False if False in values else None if None in values else True


def _or(values: list[bool | None]) -> bool | None:
    return True if True in values else None if None in values else False


def _not(v: bool | None) -> bool | None:
    return None if v is None else not v


ISO = ("2023-12-31", "2024-01-01", "2024-03-15", "2025-06-30", "2024-01-01T00:00:00Z")


def ref_field(meta: Any, keys: list[str], ops: dict[str, Any]) -> bool | None:
    items = _items(meta, keys)
    parts = []
    for op, arg in sorted(ops.items()):
        if op == "$eq":
            parts.append(_exists_cmp(items, "==", arg))
        elif op == "$ne":
            parts.append(not any(_cmp(x, "==", arg) is True for x in _unwrapped(items)))
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            sym = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
            parts.append(_exists_cmp(items, sym, arg, dated=isinstance(arg, str) and arg in ISO))
        elif op in ("$in", "$nin"):
            hit = any(_cmp(x, "==", a) is True for x in _unwrapped(items) for a in arg)
            parts.append(hit if op == "$in" else not hit)
        elif op == "$exists":
            parts.append(bool(items) == arg)
        elif op == "$not":
            parts.append(_not(ref_field(meta, keys, arg)))
    return _and(parts)


def ref(meta: Any, flt: dict[str, Any], prefix: list[str] | None = None) -> bool | None:
    prefix = prefix or []
    parts = []
    for k, v in sorted(flt.items()):
        if k == "$and":
            parts.append(_and([ref(meta, f, prefix) for f in v]))
        elif k == "$or":
            parts.append(_or([ref(meta, f, prefix) for f in v]))
        elif k == "$not":
            parts.append(_not(ref(meta, v, prefix)))
        else:
            keys = prefix + k.split(".")
            if isinstance(v, dict) and v and all(x.startswith("$") for x in v):
                parts.append(ref_field(meta, keys, v))
            elif isinstance(v, dict):
                parts.append(ref(meta, v, keys))
            elif isinstance(v, list):
                parts.append(ref_field(meta, keys, {"$in": v}))
            else:
                parts.append(_exists_cmp(_items(meta, keys), "==", v))
    return _and(parts)


# -- random filters ------------------------------------------------------------------------------

FIELDS: dict[str, list[Any]] = {
    "year": [2015, 2020, 2021, 2024, 2020.5, "2021"],
    "team": [*TEAMS, None],
    "tags": TAGS,
    "published": [*list(ISO), "n/a"],
    "author.name": ["Ada", "Grace"],
    "author.age": [30, 45, 60],
    "draft": [True, False],
}


def random_ops(rng: random.Random, field: str, depth: int = 0) -> dict[str, Any]:
    values = FIELDS[field]
    ops: dict[str, Any] = {}
    for _ in range(rng.randrange(1, 3)):
        op = rng.choice(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$not"])
        if op in ("$in", "$nin"):
            ops[op] = rng.sample(values, rng.randrange(1, 3))
        elif op == "$exists":
            ops[op] = rng.choice([True, False])
        elif op == "$not":
            if depth < 1:
                ops[op] = random_ops(rng, field, depth + 1)
        else:
            ops[op] = rng.choice(values)
    return ops or {"$exists": True}


def random_filter(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    flt: dict[str, Any] = {}
    for _ in range(rng.randrange(1, 3)):
        roll = rng.random()
        if depth < 2 and roll < 0.15:
            flt[rng.choice(["$and", "$or"])] = [random_filter(rng, depth + 1) for _ in range(rng.randrange(1, 3))]
        elif depth < 2 and roll < 0.22:
            flt["$not"] = random_filter(rng, depth + 1)
        else:
            field = rng.choice(list(FIELDS))
            shape = rng.random()
            if shape < 0.3:
                value: Any = rng.choice(FIELDS[field])
            elif shape < 0.4:
                value = rng.sample(FIELDS[field], rng.randrange(1, 3))
            else:
                value = random_ops(rng, field)
            if field.startswith("author.") and rng.random() < 0.5:
                flt["author"] = {field.split(".")[1]: value}
            else:
                flt[field] = value
    return flt


@pytest.fixture
def kb(db):
    client = Client(db)
    client.create_collection("f", embedding_dims=DIMS)
    rng, vecs = random.Random(8), np.random.default_rng(8)
    docs = [Document(source_uri=f"d{i}", metadata=random_metadata(rng),
                     chunks=[Chunk(content="alpha bravo " + rng.choice(["charlie", "delta"]),
                                   embedding=unit(vecs.normal(size=DIMS)))]) for i in range(120)]
    client.upsert_documents("f", docs)
    return client, {d.source_uri: d.metadata for d in docs}


def sql_matches(db, flt: dict[str, Any]) -> set[str]:
    # Compiled once, as a search compiles it (a stable call in the WHERE clause ran once a row).
    return {r[0] for r in db.execute(
        "with p as materialized (select sift.filter_path(%s) as path) "
        "select d.source_uri from sift.documents d join sift.collections c using (collection_id) cross join p "
        "where c.name = 'f' and (p.path is null or coalesce(jsonb_path_match_tz(d.metadata, p.path, '{}', true), "
        "false))", [Jsonb(flt)]).fetchall()}


def test_random_filters_match_the_reference(kb, db, figure):
    _client, metas = kb
    rng = random.Random(21)
    nonempty = 0
    for _ in range(400):
        flt = random_filter(rng)
        want = {u for u, m in metas.items() if ref(m, flt) is True}
        assert sql_matches(db, flt) == want, (flt, db.execute("select sift.filter_path(%s)", [Jsonb(flt)]).fetchone())
        nonempty += 0 < len(want) < len(metas)
    assert nonempty > 150          # the filters split the documents, not all or nothing
    figure("random metadata filters checked against the reference", 400)


def test_long_lists_match_the_reference(kb, db, figure):
    """Past eight terms an $in, $nin, $and, $or or field list compiles as a balanced tree (a chain of
    15,000 overflowed the stack): the same answers as the reference, up to the 10,000 items allowed."""
    _client, metas = kb
    rng = random.Random(34)
    checked = 0
    for n in (9, 10, 17, 64, 333, 10_000):
        values = [rng.choice([*FIELDS["year"], *range(3000, 3000 + n)]) for _ in range(n)]
        flts: list[dict[str, Any]] = [{"year": {"$in": values}}, {"year": {"$nin": values}}, {"year": values}]
        if n <= 333:
            flts += [{"$or": [random_filter(rng, 1) for _ in range(n)]},
                     {"$and": [random_filter(rng, 1) for _ in range(n)]},
                     {"$or": [{"$and": [random_filter(rng, 2) for _ in range(9)]} for _ in range(n // 9 + 1)]},
                     {f"f{i}": {"$exists": False} for i in range(n)} | {"year": {"$in": values}}]
        for flt in flts:
            want = {u for u, m in metas.items() if ref(m, flt) is True}
            assert sql_matches(db, flt) == want, (n, list(flt)[:2])
            checked += 1
    figure("filters with lists past eight items checked against the reference", checked)


def test_every_leg_and_delete_apply_the_filter(kb, db):
    client, metas = kb
    rng = random.Random(5)
    for flt in ({"year": {"$gte": 2020, "$lt": 2024}}, {"$or": [{"team": "sales"}, {"tags": "red"}]},
                {"published": {"$gt": "2024-01-01"}}, {"author": {"age": {"$in": [30, 60]}}, "draft": False},
                {"team": {"$ne": "billing"}, "tags": {"$nin": ["blue"]}}):
        want = {u for u, m in metas.items() if ref(m, flt) is True}
        assert want
        for mode in ({}, {"hybrid": False}, {"exact_search_limit": 0, "hybrid": False}):
            q = unit(np.random.default_rng(rng.randrange(100)).normal(size=DIMS))
            got = {h.source_uri for h in client.search("f", "alpha", embedding=q, top_k=200, filter=flt, **mode)}
            assert got == want, (flt, mode)
        lexical = {h.source_uri for h in client.search("f", "alpha", top_k=200, filter=flt)}
        assert lexical == want
        assert {h.source_uri for h in client.search("f", "alpha", top_k=200, filter=flt,
                                                    lexical_scorer="ts_rank_cd")} == want
    gone = {u for u, m in metas.items() if ref(m, {"year": {"$lt": 2020}}) is True}
    assert client.delete_documents("f", filter={"year": {"$lt": 2020}}) == len(gone)
    left = {r[0] for r in db.execute("select source_uri from sift.documents").fetchall()}
    assert left == set(metas) - gone


@pytest.mark.parametrize(("flt", "where"), [
    ({"year": {"$foo": 1}}, "filter.year: unknown operator $foo"),
    ({"$nor": []}, "filter: unknown operator $nor"),
    ({"year": {"$in": []}}, "filter.year.$in: expected a non-empty list"),
    ({"year": {"$in": 2020}}, "filter.year.$in: expected a non-empty list"),
    ({"$or": {"a": 1}}, "filter.$or: expected a non-empty list of filters"),
    ({"$and": [{"a": 1}, {"b": {"$gt": {"c": 1}}}]}, "filter.$and[1].b.$gt: expected a string, number"),
    ({"a": {"$exists": "yes"}}, "filter.a.$exists: expected true or false"),
    ({"a": {"$gt": 1, "b": 2}}, "filter.a: operators and field names cannot be mixed"),
    ({"a..b": 1}, "must not be empty"),
    ({"a": {"$not": 3}}, "filter.a.$not: expected an object of operators"),
])
def test_a_wrong_filter_is_a_typed_error_naming_where(kb, db, flt, where):
    client, _ = kb
    with pytest.raises(InvalidArgument, match=where.replace("$", r"\$").replace("[", r"\[").replace("]", r"\]")):
        client.search("f", "alpha", top_k=3, filter=flt)
    with pytest.raises(psycopg.Error) as err, db.transaction():
        db.execute("select * from sift.search('f', 'alpha', filter => %s)", [Jsonb(flt)])
    assert err.value.sqlstate == "SF003"
    with pytest.raises(InvalidArgument):
        client.delete_documents("f", filter=flt)


def test_plain_filters_keep_their_meaning(kb, db):
    _client, metas = kb
    assert sql_matches(db, {}) == set(metas)
    assert sql_matches(db, {"team": "sales"}) == {u for u, m in metas.items() if m.get("team") == "sales"}
    assert sql_matches(db, {"author": {"name": "Ada"}}) == {
        u for u, m in metas.items() if m.get("author", {}).get("name") == "Ada"}
    assert sql_matches(db, {"tags": "red"}) == {u for u, m in metas.items() if "red" in m.get("tags", [])}
    assert sql_matches(db, {"year": [2015, 2025]}) == {u for u, m in metas.items() if m.get("year") in (2015, 2025)}
    assert db.execute("select sift.filter_path('{}'), sift.filter_path(null)").fetchone() == (None, None)
