"""CONTRIBUTING.md stays true: every path, `path::name`, `sift.object`, `make` target and
Python symbol it names exists, and each of its four lists (a knob, a leg, a finalize stage,
a reranker provider) names the files the code actually spreads such a change over, checked
against every knob, leg and provider there is. No database: the migrations are read with
PostgreSQL's own parser (pglast), the function files as text."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from pglast import ast as pg
from pglast.parser import parse_sql
from pgsift import errors, models
from pgsift.bench.profile import LEGS
from pgsift.rerankers import registry
from pgsift.schema import with_vector_schema

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
SQL_DIR = ROOT / "sql"
STAGES = ("Rules for every change", "Add a knob", "Add a leg", "Add a finalize stage", "Add a reranker provider")


def read(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8")


def section(title: str) -> str:
    start = GUIDE.index(f"\n## {title}\n")
    end = GUIDE.find("\n## ", start + 1)
    return GUIDE[start:end if end >= 0 else None]


def named(text: str) -> list[str]:
    """What the text puts in backticks."""
    return re.findall(r"`([^`\n]+)`", text)


def numbered(text: str) -> list[str]:
    return re.findall(r"^\d+\. (.+)$", text, re.M)


@functools.cache
def all_sql() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(SQL_DIR.glob("*.sql")))


@functools.cache
def declared_sql() -> str:
    return all_sql() + "\n".join(p.read_text(encoding="utf-8")
                                 for p in sorted((ROOT / "migrations").glob("*.sql")))


def body(rel: str, function: str) -> str:
    """A function's definition in a function file: from its `create` to the end of its body."""
    text = read(rel)
    start = text.index(f"create or replace function sift.{function}(")
    return text[start:text.index("\n$$;", start)]


@functools.cache
def migration_statements() -> list[Any]:
    return [raw.stmt for p in sorted((ROOT / "migrations").glob("*.sql"))
            for raw in parse_sql(with_vector_schema(p.read_text(encoding="utf-8"), "public"))]


def const(node: Any) -> Any:
    val = getattr(node, "val", None)
    for attr in ("sval", "ival", "fval", "boolval"):
        if val is not None and hasattr(val, attr):
            return getattr(val, attr)
    return None


def inserted(table: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows the migrations insert into sift.<table> (columns: the table's order, for an
    insert that names none)."""
    rows = []
    for st in migration_statements():
        if isinstance(st, pg.InsertStmt) and (st.relation.schemaname, st.relation.relname) == ("sift", table):
            cols = [c.name for c in st.cols] if st.cols else list(columns)
            for values in st.selectStmt.valuesLists or ():
                rows.append(dict(zip(cols, (const(v) for v in values))))
    return rows


def knob_table() -> list[dict[str, Any]]:
    """The rows of sift.knob_defs that sql/04_knob_table.sql declares (one per knob)."""
    head = re.compile(r"^ +\((\d+), '(\w+)', '([\w.]+)', '([^']*)', (true|false), '([^']*)', '(\w+)', '(\w+)',$", re.M)
    names = ("position", "name", "type", "default_value", "can_be_off", "off_value", "scope", "stage")
    return [dict(zip(names, m.groups())) for m in head.finditer(read("sql/04_knob_table.sql"))]


def sql_comments(rel: str, *target: str) -> list[str]:
    """The comments a file of sql/ writes on sift.<target> (a column: table, column)."""
    return [st.comment for raw in parse_sql(read(rel))
            if isinstance(st := raw.stmt, pg.CommentStmt) and isinstance(st.object, tuple)
            and [getattr(n, "sval", None) for n in st.object] == ["sift", *target]]


def python_names(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
    return found


def literal(rel: str, name: str) -> Any:
    """A module-level literal of a Python file, read without importing it."""
    for node in ast.parse(read(rel)).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{rel} has no {name}")


def docs_knobs() -> list[tuple[str, str]]:
    """(name, stage) of docs/sql.md's knob table (which test_docs holds equal to sift.knobs())."""
    rows = re.findall(r"^\| `(\w+)` \| `(.+?)` \| (\w+) \| (\w+) \|$", read("docs/sql.md"), re.M)
    assert len(rows) > 30
    return [(name, stage) for name, _default, _scope, stage in rows]


# -- everything the guide names exists --------------------------------------------------------

def test_the_guide_has_its_sections_and_readme_links_it():
    for title in STAGES:
        assert numbered(section(title)), f"CONTRIBUTING.md: section {title!r} has no numbered list"
    assert "(CONTRIBUTING.md)" in read("README.md")


def test_every_path_it_names_exists():
    paths = set()
    for token in named(GUIDE):
        path = token.split("::")[0]
        if " " in path or not re.fullmatch(r"[\w./*<>-]+", path):
            continue
        if "/" in path or re.search(r"\.(md|py|sql|toml)$", path):
            paths.add(path)
    assert len(paths) > 40
    for path in sorted(paths):
        if re.search(r"NNNN|<\w+>", path):   # a file to create: its folder exists
            assert (ROOT / path).parent.is_dir(), path
        elif "*" in path:
            assert list(ROOT.glob(path)), path
        else:
            assert (ROOT / path).exists(), f"CONTRIBUTING.md names {path}, which does not exist"


def test_every_name_in_a_file_is_defined_there():
    pairs = [t.split("::") for t in named(GUIDE) if "::" in t]
    assert len(pairs) > 25
    for path, name in pairs:
        assert name in python_names(ast.parse(read(path))), f"CONTRIBUTING.md: {path} defines no {name}"


def test_every_sift_object_it_names_is_declared():
    objects = {m for t in named(GUIDE) for m in re.findall(r"\bsift\.(\w+(?:\.\w+)?)", t)}
    objects -= {"verb_noun", "_helper"}   # the naming rule's patterns
    assert len(objects) > 25
    for obj in sorted(objects):
        if "." in obj:   # a column: it carries a comment (tests/test_comments.py)
            assert f"comment on column sift.{obj} is" in declared_sql(), f"no column sift.{obj}"
            continue
        kinds = r"(?:function|table|type|domain|view)"
        declared = re.search(rf"\b{kinds}\s+(?:if not exists\s+)?sift\.{obj}\b", declared_sql()) is not None
        assert declared, f"CONTRIBUTING.md names sift.{obj}, which no SQL file declares"


def test_every_make_target_and_python_symbol_exists():
    targets = set(re.findall(r"^([\w-]+):", read("Makefile"), re.M))
    made = re.findall(r"`make (\w+)`", GUIDE)
    assert {"sync", "lint", "test"} <= set(made)
    assert set(made) <= targets
    for token in named(GUIDE):
        if re.fullmatch(r"(pgsift|psycopg)(\.\w+)+", token):
            module, _, attr = token.rpartition(".")
            assert hasattr(importlib.import_module(module), attr), token


# -- the rules ----------------------------------------------------------------------------------

def test_migrations_are_numbered_in_order():
    numbers = [p.name[:4] for p in sorted((ROOT / "migrations").glob("*.sql"))]
    assert all(re.fullmatch(r"\d{4}_\w+\.sql", p.name) for p in (ROOT / "migrations").glob("*.sql"))
    assert numbers == [f"{i:04d}" for i in range(1, len(numbers) + 1)]


def test_sql_raises_only_the_codes_the_guide_allows():
    raised = set(re.findall(r"errcode\s*=\s*'(\w{5})'", all_sql()))
    # The rule's two named exceptions, raised where no user acts on a typed error.
    allowed = set(errors.SQLSTATES) | {"55P03", "XX000"}
    assert "55P03" in section("Rules for every change") and "XX000" in section("Rules for every change")
    assert raised - allowed == set(), "raise a code of docs/errors.md (pgsift.errors.SQLSTATES)"


# -- add a knob ---------------------------------------------------------------------------------

def test_the_knob_list_names_what_every_knob_is_made_of():
    text = section("Add a knob")
    for must in ("sift.knob_defs", "sift.knob_set", "sql/04_knob_table.sql", "sql/62_plain.sql", "docs/sql.md",
                 "tests/test_knobs.py", "tests/test_plain.py", "CHANGELOG.md",
                 "tests/test_docs.py::test_the_knob_table_is_sift_knobs"):
        assert must in named(text), must
    knobs = dict(docs_knobs())
    defs = {r["name"]: r for r in knob_table()}
    assert len(defs) == len(knob_table()), "sql/04_knob_table.sql declares each knob once"
    assert set(defs) == set(knobs), "every knob is a sift.knob_defs row of sql/04_knob_table.sql"
    assert {name: r["stage"] for name, r in defs.items()} == knobs
    attrs = set()
    domains = set()
    for st in migration_statements():
        if isinstance(st, pg.CompositeTypeStmt) and st.typevar.relname == "knob_set":
            attrs.update(c.colname for c in st.coldeflist)
        elif isinstance(st, pg.AlterTableStmt) and st.relation.relname == "knob_set":
            attrs.update(c.def_.colname for c in st.cmds)
        elif isinstance(st, pg.CreateDomainStmt):
            domains.add(".".join(n.sval for n in st.domainname))
    assert attrs == set(knobs), "every knob is an attribute of sift.knob_set"
    assert {r["type"] for r in defs.values() if r["type"] != "boolean"} <= domains, "every knob has a domain"
    for name in knobs:   # a stage reads it
        assert re.search(rf"\.{name}\b|'{name}'", all_sql()), f"no function file reads knob {name}"
    # Dense and fusion knobs are applied on the plain path too (finalize: below).
    plain = read("sql/62_plain.sql")
    for name, stage in knobs.items():
        if stage in ("dense", "fusion"):
            assert f"knobs.{name}" in plain, f"sql/62_plain.sql does not read {stage} knob {name}"
    assert {"PLAIN_KNOBS", "STAGED_KNOBS"} <= python_names(ast.parse(read("tests/test_plain.py")))
    assert "BAD" in python_names(ast.parse(read("tests/test_knobs.py")))


# -- add a leg ----------------------------------------------------------------------------------

def leg_table() -> list[tuple[str, list[str], str]]:
    rows = re.findall(r"^\| (.+?) \| (.+?) \| `(sql/\w+\.sql)` \|$", section("Add a leg"), re.M)
    return [(leg, re.findall(r"`sift\.(\w+)`", fns), path) for leg, fns, path in rows]


def test_the_leg_table_is_every_leg_there_is():
    table = leg_table()
    assert len(table) >= 4
    pool = body("sql/40_fusion.sql", "_pool")
    for leg, functions, path in table:
        for fn in functions:
            assert f"create or replace function sift.{fn}(" in read(path), f"{leg}: {fn} is not in {path}"
        assert f"sift.{functions[0]}(" in pool, f"{leg}: sift._pool does not call {functions[0]}"
    in_table = {fn for _, functions, _ in table for fn in functions}
    profiled = {fn for group in LEGS for fn in group} - {"_legs"}
    assert profiled == in_table, "bench.profile.LEGS and the guide's table of legs differ"
    # The plain path runs the dense and lexical legs alone; the others go staged.
    plain = read("sql/62_plain.sql")
    assert {fn for fn in in_table if f"sift.{fn}(" in plain} == {"_dense_ids", "_lexical_ids"}
    assert "sift.question_vectors" in body("sql/62_plain.sql", "_plain_plan")
    assert "spaces is null" in body("sql/50_search.sql", "search")


def test_the_leg_list_names_where_a_leg_plugs_in():
    text = named(section("Add a leg"))
    for must in ("sift._check_query", "sift._legs", "sift._pool", "sift._fuse", "sift._plain_plan",
                 "sift._staged_search", "python/pgsift/bench/profile.py::LEGS", "tests/test_fusion_legs.py",
                 "tests/test_trust.py::attacks", "python/pgsift/queries.py", "python/pgsift/client_async.py"):
        assert must in text, must
    for fn in ("_check_query", "_legs", "_pool", "_fuse"):
        assert f"create or replace function sift.{fn}(" in read("sql/40_fusion.sql"), fn
    fuse = body("sql/40_fusion.sql", "_fuse")
    assert "details" in fuse and "leg_details" in body("sql/40_fusion.sql", "_pool")


# -- add a finalize stage -----------------------------------------------------------------------

# Finalize knobs the plain path never reads, and why that is safe: each only refines a knob
# that sift._plain_plan already sends to the staged pipeline, or no search reads it.
PLAIN_EXEMPT = {"merge_threshold": "parent_return", "snippet_words": "snippets", "page_window": None}


def test_every_finalize_knob_is_on_the_plain_path_or_sends_the_search_staged():
    plain = read("sql/62_plain.sql")
    plan = body("sql/62_plain.sql", "_plain_plan")
    for name, stage in docs_knobs():
        if stage != "finalize":
            continue
        if name in PLAIN_EXEMPT:
            parent = PLAIN_EXEMPT[name]
            if parent is None:
                assert f".{name}" in read("sql/68_pages.sql") and f".{name}" not in plain, name
            else:
                assert f"knobs.{parent}" in plan, f"{name} rides on {parent}, which _plain_plan must check"
            continue
        assert f"knobs.{name}" in plain, (f"finalize knob {name}: sql/62_plain.sql neither applies it nor "
                                          "sends a search using it to the staged pipeline (sift._plain_plan)")
    for knob in ("mmr_lambda", "snippets"):   # the guide's examples
        assert f"knobs.{knob}" in plan
    hits = body("sql/64_hits.sql", "_hits")
    assert ".neighbours" in hits and ".snippets" in hits


def test_the_cut_by_values_are_documented():
    listed = re.search(r"`cut_by`\s*\(([^)]*)\)", read("docs/sql.md"))
    assert listed, "docs/sql.md lists the cut_by values in parentheses after `cut_by`"
    documented = {v.strip() for v in listed.group(1).split(",")}
    finalize = body("sql/60_finalize.sql", "_finalize")
    decision = finalize[finalize.index("), w as ("):finalize.index("as cut")]
    produced = set(re.findall(r"(?:then|else) '(\w+)'", decision)) | {"merged"}
    assert len(produced) >= 6
    assert produced <= documented, "a cut_by value of sift._finalize is missing from docs/sql.md"
    explain = body("sql/50_search.sql", "explain")
    for value in documented:
        assert f"'{value}'" in finalize or f"'{value}'" in explain, f"docs/sql.md lists cut_by {value}"
    assert "f.cut_by" in explain and "f.reason" in explain   # explain reports finalize's decisions


def test_the_finalize_list_names_its_places():
    text = named(section("Add a finalize stage"))
    for must in ("sift._finalize", "sift._hits", "sift._plain_hits", "sift._plain_hits_adjusted",
                 "sift._plain_plan", "sift.explain", "sift.explanation", "sift.hit", "python/pgsift/models.py",
                 "tests/test_finalize.py", "tests/test_finalize_oracle.py", "tests/test_plain.py"):
        assert must in text, must
    for cls in ("Hit", "Explanation"):
        assert cls in text and hasattr(models, cls)


# -- add a reranker provider --------------------------------------------------------------------

PROVIDER_COLUMNS = ("provider", "default_model", "needs_secret", "needs_base_url", "description")


def test_every_provider_is_everywhere_the_list_says():
    text = named(section("Add a reranker provider"))
    for must in ("python/pgsift/rerankers/registry.py::IMPLEMENTATIONS", "sift.reranker_providers",
                 "sift.reranker_limits", "sql/80_rerankers.sql", "python/pgsift/cli/rerankers.py",
                 "tests/rerank_servers.py", "tests/test_rerank.py", "docs/rerank.md", "pyproject.toml"):
        assert must in text, must
    providers = set(registry.IMPLEMENTATIONS)
    assert len(providers) >= 3
    rows = {r["provider"]: r for r in inserted("reranker_providers", PROVIDER_COLUMNS)}
    assert set(rows) == providers, "a migration seeds sift.reranker_providers with every implementation"
    limits = {(r["provider"], r["model"]) for r in inserted("reranker_limits", ())}
    for name, cls in registry.IMPLEMENTATIONS.items():
        assert cls.provider == name
        params = inspect.signature(cls).parameters
        assert params["model"].default == rows[name]["default_model"], name
        assert {"base_url", "api_key", "timeout_s"} <= set(params), name
        assert (name, "*") in limits, f"{name} has no '*' row in sift.reranker_limits"
        assert cls.__name__ in importlib.import_module("pgsift.rerankers").__all__, cls.__name__

    def names_all(where: str, words: str) -> None:
        missing = {p for p in providers if not re.search(rf"\b{p}\b", words)}
        assert not missing, f"{where} does not name provider(s) {sorted(missing)}"

    comments = sql_comments("sql/95_comments.sql", "reranker_providers", "provider")
    assert len(comments) == 1, "sql/95_comments.sql writes the comment on sift.reranker_providers.provider"
    names_all("the comment on sift.reranker_providers.provider", comments[0])
    rerankers_sql = read("sql/80_rerankers.sql")
    for fn in ("register_reranker", "map_secret"):
        start = rerankers_sql.index(f"comment on function sift.{fn}(")
        names_all(f"the comment on sift.{fn}", rerankers_sql[start:rerankers_sql.index("';\n", start)])
    names_all("pgsift reranker add's provider help",
              re.search(r'"provider", help="([^"]*)"', read("python/pgsift/cli/rerankers.py")).group(1))
    rerank_md = read("docs/rerank.md")
    start = rerank_md.index("- Providers are the rows of `sift.reranker_providers`")
    names_all("docs/rerank.md's providers bullet", rerank_md[start:rerank_md.index("\n- ", start + 1)])
    names_all("tests/rerank_servers.py", " ".join(re.findall(r'"(\w+)"', read("tests/rerank_servers.py"))))
    assert set(literal("tests/test_rerank.py", "PROVIDERS")) == providers
    assert set(literal("tests/test_rerank.py", "MODELS")) == providers
    assert set(literal("tests/test_rerank_limits.py", "MODELS")) == providers
    assert re.search(r"^rerank = \[", read("pyproject.toml"), re.M)


@pytest.mark.parametrize("title", STAGES[1:])
def test_each_list_ends_with_the_changelog(title):
    assert "CHANGELOG.md" in numbered(section(title))[-1]
