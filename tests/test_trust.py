"""Trust, enforced by PostgreSQL: row-level security and the shipped roles keep tenants
apart whatever a caller passes; a tenant is bound per transaction or by role; nothing a
less-privileged role plants on the search path is ever called.

The isolation suite attacks as an outside tester would: every shipped role, bound to one
tenant, calls every public function (and internal ones with forged arguments) with
another tenant's names, ids and aliases in every argument, reads every table and tries
direct writes; afterwards no foreign row was seen and the other tenants' data is
byte-for-byte what it was.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import random_documents
from pgsift import Client
from pgsift.schema import migration_files, with_vector_schema
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

DIMS = 8
TENANTS = ("acme", "globex", "initech")
KINDS = ("reader", "writer", "admin")

# Per table: which rows belong to a tenant (as the operator sees them).
OWNED = {
    "collections": "tenant = %(t)s",
    "rerankers": "tenant = %(t)s",
    "rerank_usage": "tenant = %(t)s",
    "secret_mappings": "tenant = %(t)s",
    "allowed_endpoints": "tenant = %(t)s",
    "tenant_roles": "tenant = %(t)s",
    "index_requests": "tenant = %(t)s",
    "tenant_limits": "tenant = %(t)s",
    "tenant_locks": "tenant = %(t)s",
    "golden_questions": "golden_set_id in (select golden_set_id from sift.golden_sets where collection_id in "
                        "(select collection_id from sift.collections where tenant = %(t)s))",
    "golden_positives": "question_id in (select question_id from sift.golden_questions where golden_set_id in "
                        "(select golden_set_id from sift.golden_sets where collection_id in "
                        "(select collection_id from sift.collections where tenant = %(t)s)))",
}
BY_COLLECTION = ("documents", "chunks", "sections", "vector_spaces", "chunk_vectors", "chunk_tokens",
                 "chunk_token_sizes", "chunk_enrichments", "enrichment_runs", "question_vectors",
                 "collection_lexical_stats",
                 "term_df", "term_df_pending",
                 "term_lists", "term_blocks", "term_deltas", "list_build_plan", "list_build_entries", "golden_sets",
                 "eval_runs", "collection_locks")
for _table in BY_COLLECTION:
    OWNED[_table] = "collection_id in (select collection_id from sift.collections where tenant = %(t)s)"


def role_name(tenant: str, kind: str) -> str:
    return f"iso_{tenant}_{kind}"


def map_roles(db, tenant: str) -> None:
    """A login role of each shipped kind, mapped to `tenant` (made once: roles are the cluster's)."""
    for kind in KINDS:
        role = role_name(tenant, kind)
        if db.execute("select 1 from pg_roles where rolname = %s", [role]).fetchone() is None:
            db.execute(f'create role "{role}" login')
        db.execute(f'grant "sift_{kind}" to "{role}"')
        db.execute("select sift.map_role(%s, %s)", [role, tenant])


@pytest.fixture
def tenants(db):
    """Three tenants, each with two collections (one named alike across tenants), documents,
    impact lists, a reranker, a golden set with a run, metering rows, a secret mapping; login
    roles of each kind mapped to each tenant."""
    db.execute("select sift.allow_endpoint('http://127.0.0.1:')")
    for t_i, tenant in enumerate(TENANTS):
        client = Client(db, tenant=tenant)
        for name in ("docs", f"{tenant}-only"):
            client.create_collection(name, embedding_dims=DIMS, dense_weight=0.3 + 0.1 * t_i)
            client.upsert_documents(name, random_documents(np.random.default_rng(t_i), 30, DIMS,
                                                           prefix=f"{tenant}-{name}"))
        # An added vector space, half filled: vectors of every tenant to reach for.
        client.add_vector_space("docs", "alt", dimensions=DIMS)
        todo = client.missing_space_vectors("docs", "alt", limit=30)
        client.write_space_vectors("docs", "alt", [t[0] for t in todo], [np.ones(DIMS)] * len(todo))
        # What a model wrote for some chunks, and a run, of every tenant.
        with client.transaction() as conn:
            conn.execute("insert into sift.chunk_enrichments (chunk_id, collection_id, enrichment_key, context, "
                         "questions) select chunk_id, 0, md5(chunk_id::text) || md5(chunk_id::text), 'ctx', "
                         "array['why?'] from sift.chunks where collection_id in (select collection_id from "
                         "sift.collections where tenant = %s) order by chunk_id limit 5", [tenant])
            conn.execute("insert into sift.enrichment_runs (document_id, collection_id, model, chunks) "
                         "select document_id, 0, 'm', 2 from sift.documents where collection_id in (select "
                         "collection_id from sift.collections where tenant = %s) order by document_id limit 2",
                         [tenant])
        # Token vectors for late interaction on some chunks of every tenant.
        client.write_token_vectors("docs", {t[0]: np.ones((2, 4)) * (t_i + 1) for t in todo[:10]})
        with client.transaction() as conn:
            conn.execute("select sift.refresh_lexical_stats('docs', min_df => 2, list_size => 5)")
            conn.execute("select sift.register_reranker('rr', 'tei', base_url => 'http://127.0.0.1:9/', "
                         "secret_ref => 'tei-key')")
            conn.execute("select sift.alter_collection('docs', '{\"reranker\": \"rr\", \"rerank\": true}')")
            conn.execute("select sift.record_rerank_usage('rr', 'tei', 'tei', 3, 12.5, true)")
            set_id = conn.execute("insert into sift.golden_sets (collection_id, name) select collection_id, 'gs' "
                                  "from sift.collections where name = 'docs' and tenant = %s "
                                  "returning golden_set_id", [tenant]).fetchone()[0]
            q_id = conn.execute("insert into sift.golden_questions (golden_set_id, question_key, question) "
                                "values (%s, 'q1', 'alpha?') returning question_id", [set_id]).fetchone()[0]
            conn.execute("insert into sift.golden_positives (question_id, content) values (%s, 'alpha')", [q_id])
            conn.execute("insert into sift.eval_runs (collection_id, golden_set_id, golden_set, label, k, metrics) "
                         "select collection_id, %s, 'gs', 'pipeline', 10, '{\"ndcg\": 0.5}' "
                         "from sift.collections where name = 'docs' and tenant = %s", [set_id, tenant])
        db.execute("select sift.map_secret(%s, 'tei-key', %s, 'tei', array['http://127.0.0.1:9/'])",
                   [tenant, f"env:PGSIFT_{tenant.upper()}_TEI"])
        map_roles(db, tenant)
    # Impact lists exist for every tenant (the leg reads them).
    assert db.execute("select count(distinct collection_id) from sift.term_lists").fetchone()[0] == 3
    return TENANTS


def fingerprint(db, tenant: str) -> dict[str, str]:
    """Every row a tenant owns, table by table, as the operator sees it."""
    out = {}
    for table, predicate in OWNED.items():
        out[table] = db.execute(f"select count(*)::text || ':' || coalesce(md5(string_agg(x::text, '|' "
                                f"order by x::text)), '') from sift.{table} x where {predicate}",
                                {"t": tenant}).fetchone()[0]
    return out


def foreign_ids(db, tenant: str) -> dict[str, list[Any]]:
    """Ids and names that belong to tenants other than `tenant`: the attacker's ammunition."""
    others = [t for t in TENANTS if t != tenant]

    def ids(query: str) -> list[Any]:
        return [r[0] for r in db.execute(query, {"o": others}).fetchall()]

    return {
        "collections": ids("select collection_id from sift.collections where tenant = any(%(o)s)"),
        "names": ids("select distinct name::text from sift.collections where tenant = any(%(o)s)"),
        "chunks": ids("select chunk_id from sift.chunks where collection_id in "
                      "(select collection_id from sift.collections where tenant = any(%(o)s))"),
        "sections": ids("select section_id from sift.sections where collection_id in "
                        "(select collection_id from sift.collections where tenant = any(%(o)s))"),
        "documents": ids("select document_id from sift.documents where collection_id in "
                         "(select collection_id from sift.collections where tenant = any(%(o)s))"),
        "uris": ids("select source_uri from sift.documents where collection_id in "
                    "(select collection_id from sift.collections where tenant = any(%(o)s))"),
        "tenants": others,
        "golden_sets": ids("select golden_set_id from sift.golden_sets where collection_id in "
                           "(select collection_id from sift.collections where tenant = any(%(o)s))"),
        "questions": ids("select question_id from sift.golden_questions q join sift.golden_sets s "
                         "using (golden_set_id) join sift.collections c using (collection_id) "
                         "where c.tenant = any(%(o)s)"),
        "cursors": [_cursor_of(db, other) for other in others],
    }


def _cursor_of(db, tenant: str) -> str:
    """A pagination cursor sift.search_page issued to `tenant` (for 'docs', 'alpha')."""
    with db.transaction():
        db.execute("select sift.set_tenant(%s)", [tenant])
        return db.execute("select cursor from sift.search_page('docs', 'alpha', page_size => 2) "
                          "where cursor is not null limit 1").fetchone()[0]


def attacks(conn: psycopg.Connection, tenant: str, foe: dict[str, list[Any]],
            rng: random.Random) -> list[tuple[str, Callable[[], Any]]]:
    """(name, call) pairs: every public function, some internal ones with forged arguments,
    every table read, direct writes; foreign names and ids in every argument."""
    name = rng.choice(foe["names"])
    other = rng.choice(foe["tenants"])
    chunk_ids = rng.sample(foe["chunks"], 10)
    doc_id = rng.choice(foe["documents"])
    col_id = rng.choice(foe["collections"])
    uri = rng.choice(foe["uris"])
    vec = "[" + ",".join("0.5" for _ in range(DIMS)) + "]"

    def rows(query: str, params: Any = None) -> Callable[[], Any]:
        return lambda: conn.cursor(row_factory=dict_row).execute(query, params).fetchall()

    def one(query: str, params: Any = None) -> Callable[[], Any]:
        return lambda: conn.cursor(row_factory=dict_row).execute(query, params).fetchone()

    own_collections = "select collection_id from sift.collections"
    return [
        ("search", rows("select * from sift.search(%s, 'alpha', %s::text::public.vector)", [name, vec])),
        ("search_several", rows("select * from sift.search(collections => array[%s, 'docs'], query_text => 'alpha')",
                                [name])),
        ("search_boost_foreign", rows("select * from sift.search('docs', 'alpha', knobs => %s)",
                                      [Jsonb({"boost": {name: 2}})])),
        ("explain", rows("select * from sift.explain('docs', 'alpha', %s::text::public.vector, chunk_ids => %s)",
                         [vec, chunk_ids])),
        ("candidates", rows("select * from sift.candidates(%s, 'alpha')", [name])),
        ("search_page", rows("select * from sift.search_page(%s, 'alpha', %s::text::public.vector)", [name, vec])),
        # a switch takes the one-statement path, which looks the name up in the caller's tenant only
        ("search_switch", rows("select * from sift.search(%s, 'alpha', %s::text::public.vector, "
                               "knobs => '{\"hybrid\": false}')", [name, vec])),
        ("search_switch_foreign", rows("select * from sift.search('docs', 'alpha', %s::text::public.vector, "
                                       "knobs => %s)", [vec, Jsonb({"hybrid": {name: False}})])),
        ("search_page_foreign", rows("select * from sift.search_page('docs', 'alpha', page_size => 2, cursor => %s)",
                                     [rng.choice(foe["cursors"])])),
        ("finalize_page", rows("select * from sift.finalize_page('docs', %s)", [chunk_ids])),
        ("finalize_page_foreign", rows("select * from sift.finalize_page(%s, %s, cursor => %s)",
                                       [name, chunk_ids, rng.choice(foe["cursors"])])),
        ("finalize", rows("select * from sift.finalize('docs', %s)", [chunk_ids])),
        ("finalize_foreign_parent", rows("select * from sift.finalize('docs', %s, knobs => "
                                         "'{\"parent_return\": \"parent\", \"neighbours\": 3}')", [chunk_ids])),
        ("resolve_sections", rows("select * from sift.resolve_sections(%s)", [chunk_ids])),
        ("resolve_sections_own", rows("select * from sift.resolve_sections(%s, skip_missing => true)", [chunk_ids])),
        ("finalize_foreign", rows("select * from sift.finalize(%s, %s)", [name, chunk_ids])),
        ("knobs", rows("select * from sift.knobs(%s)", [name])),
        ("vector_space_status", rows("select * from sift.vector_space_status(%s)", [name])),
        ("missing_space_vectors", rows("select * from sift.missing_space_vectors(%s, 'alt')", [name])),
        ("add_vector_space", one("select * from sift.add_vector_space(%s, 'planted', 8)", [name])),
        ("write_space_vectors", one("select sift.write_space_vectors(%s, 'alt', %s, %s::vector[])",
                                    [name, chunk_ids[:1], [vec]])),
        ("write_space_vectors_text", one("select sift.write_space_vectors(%s, 'alt', %s, %s::text[])",
                                         [name, chunk_ids[:1], [vec]])),
        ("write_space_vectors_own", one("select sift.write_space_vectors('docs', 'alt', %s, %s::vector[])",
                                        [chunk_ids[:2], [vec, vec]])),
        ("write_token_vectors", one("select sift.write_token_vectors(%s, %s, %s::vector[])",
                                    [name, chunk_ids[:1], ["[1,1,1,1]"]])),
        ("write_token_vectors_own", one("select sift.write_token_vectors('docs', %s, %s::vector[])",
                                        [chunk_ids[:2], ["[1,1,1,1]", "[1,1,1,1]"]])),
        ("delete_token_vectors", one("select sift.delete_token_vectors(%s)", [name])),
        ("delete_token_vectors_own", one("select sift.delete_token_vectors('docs', %s)", [chunk_ids])),
        ("maxsim", rows("select * from sift.maxsim(%s, %s, %s::vector[])", [name, chunk_ids[:3], ["[1,1,1,1]"]])),
        ("maxsim_own", rows("select * from sift.maxsim('docs', %s, %s::vector[])", [chunk_ids[:3], ["[1,1,1,1]"]])),
        ("explain_tokens", rows("select * from sift.explain('docs', 'alpha', %s::text::public.vector, "
                                "chunk_ids => %s, query_tokens => %s::vector[])", [vec, chunk_ids, ["[1,1,1,1]"]])),
        ("search_several_tokens", rows("select * from sift.search(collections => array[%s, 'docs'], "
                                       "query_text => 'alpha', query_tokens => %s::vector[])", [name, ["[1,1,1,1]"]])),
        ("insert token size", one("insert into sift.chunk_token_sizes (collection_id, dimensions) values (%s, 9) "
                                  "returning collection_id", [col_id])),
        ("search_spaces", rows("select * from sift.search(%s, 'alpha', spaces => array['alt'], "
                               "space_embeddings => %s::vector[], knobs => '{\"fusion\": \"dbsf\"}')",
                               [name, [vec]])),
        ("candidates_spaces", rows("select * from sift.candidates(collections => array[%s, 'docs'], "
                                   "query_text => 'alpha', spaces => array['alt'], space_embeddings => %s::vector[])",
                                   [name, [vec]])),
        ("enrichment_history", rows("select * from sift.enrichment_history(%s)", [name])),
        ("insert enrichment", one("insert into sift.chunk_enrichments (chunk_id, collection_id, enrichment_key, "
                                  "context) values (%s, 0, repeat('a', 64), 'planted') returning chunk_id",
                                  [chunk_ids[0]])),
        ("insert enrichment run", one("insert into sift.enrichment_runs (document_id, collection_id) values (%s, 0) "
                                      "returning document_id", [doc_id])),
        ("update enrichments", one("update sift.chunk_enrichments set context = 'x' where chunk_id = any(%s) "
                                   "returning chunk_id", [chunk_ids])),
        ("search_tokens", rows("select * from sift.search(%s, 'alpha', %s::text::public.vector, "
                               "query_tokens => %s::vector[])", [name, vec, ["[1,1,1,1]"]])),
        ("insert chunk tokens", one("insert into sift.chunk_tokens (chunk_id, collection_id, tokens, dimensions, "
                                    "token_count) values (%s, 0, array['[1,1,1,1]'::public.halfvec], 0, 0) "
                                    "returning chunk_id", [chunk_ids[0]])),
        ("update chunk tokens", one("update sift.chunk_tokens set tokens = tokens where chunk_id = any(%s) "
                                    "returning chunk_id", [chunk_ids])),
        ("switch_vector_space", one("select * from sift.switch_vector_space(%s, 'alt')", [name])),
        ("drop_vector_space", one("select sift.drop_vector_space(%s, 'alt')", [name])),
        ("ensure_dense_indexes", rows("select * from sift.ensure_dense_indexes() as index_name")),
        ("search_foreign_space", rows("select * from sift.search(%s, 'alpha', %s::text::public.vector, "
                                      "knobs => '{\"dense_space\": \"alt\"}')", [name, vec])),
        ("insert chunk vector", one("insert into sift.chunk_vectors (space_id, chunk_id, collection_id, document_id, "
                                    "embedding) values ((select min(space_id) from sift.vector_spaces), %s, 0, 0, "
                                    "%s::text::public.vector) returning chunk_id", [chunk_ids[0], vec])),
        ("collection_info", rows("select * from sift.collection_info(%s)", [name])),
        ("collection_info_all", rows("select * from sift.collection_info()")),
        ("rerank_texts", rows("select * from sift.rerank_texts(%s)", [chunk_ids])),
        ("rerank_pool", rows("select * from sift.rerank_pool(%s, 'alpha', %s::text::public.vector)", [name, vec])),
        ("rerank_pool_several", rows("select * from sift.rerank_pool(collections => array[%s, 'docs'], "
                                     "query_text => 'alpha')", [name])),
        ("rerank_pool_named", rows("select * from sift.rerank_pool('docs', 'alpha', reranker => %s)", [f"{other}-rr"])),
        ("rerank_pool_own", rows("select * from sift.rerank_pool('docs', 'alpha', pool_size => 1000, knobs => %s)",
                                 [Jsonb({"boost": {name: 2}})])),
        ("reranker_for", rows("select * from sift.reranker_for(%s)", [name])),
        ("reranker_for_named", rows("select * from sift.reranker_for('docs', reranker => %s)", [f"{other}-rr"])),
        ("eval_history", rows("select * from sift.eval_history(%s)", [name])),
        ("rebind", rows("select * from sift.rebind_golden_set(%s, 'gs')", [name])),
        ("rebind_own", rows("select * from sift.rebind_golden_set('docs', null)")),
        ("list_golden_sets", rows("select * from sift.list_golden_sets(%s)", [name])),
        ("list_golden_sets_own", rows("select * from sift.list_golden_sets('docs')")),
        ("create_golden_set", one("select sift.create_golden_set(%s, 'planted') as golden_set_id", [name])),
        ("create_golden_set_own", one("select sift.create_golden_set('docs', 'gs', replace => true) as golden_set_id")),
        ("drop_golden_set", one("select sift.drop_golden_set(%s, 'gs') as dropped", [name])),
        ("add_golden_question", rows("select * from sift.add_golden_question(%s, 'gs', 'planted', 'alpha?', "
                                     "'[\"alpha\"]')", [name])),
        # an own set, positives naming another tenant's chunks and documents
        ("add_golden_question_own", rows("select * from sift.add_golden_question('docs', 'gs', 'planted', "
                                         "'alpha?', %s)", [Jsonb([{"chunk_id": c} for c in chunk_ids[:3]])])),
        # (skipped echoes the source_uri given: left out of what is checked for foreign rows)
        ("add_golden_question_foreign", rows("select question_id, positives_added from sift.add_golden_question("
                                             "'docs', 'gs', 'planted', 'alpha?', %s, skip_missing => true)",
                                             [Jsonb([{"source_uri": uri}])])),
        ("record_eval_run", rows("select * from sift.record_eval_run(%s, 'gs', 'planted', 10, '{}')", [name])),
        ("score_golden_set", rows("select * from sift.score_golden_set(%s, 'gs')", [name])),
        ("score_golden_set_own", rows("select * from sift.score_golden_set('docs', null, knobs => %s)",
                                      [Jsonb({"boost": {name: 2}})])),
        ("evaluate_golden_set", rows("select * from sift.evaluate_golden_set(%s, 'gs')", [name])),
        ("evaluate_golden_set_own", rows("select * from sift.evaluate_golden_set('docs', 'gs', mode => 'lexical')")),
        ("tune_golden_set", rows("select * from sift.tune_golden_set(%s, 'gs', folds => 2, store => true)", [name])),
        # an own collection: a cell boosting another tenant's collection, and a run that would store
        ("tune_golden_set_own", rows("select * from sift.tune_golden_set('docs', 'gs', folds => 2, grid => %s, "
                                     "store => true)", [Jsonb([{"boost": {name: 2}}])])),
        ("tune_golden_set_foreign", rows("select * from sift.tune_golden_set('docs', %s, folds => 2, "
                                         "grid => '[{\"dense_weight\": 0.1}]', store => true, per_question => true)",
                                         [rng.choice(foe["names"])])),
        ("lexical_query", one("select sift.lexical_query('alpha')")),
        ("filter_path", one("select sift.filter_path('{\"year\": {\"$gt\": 2020}}')::text as path")),
        ("search_filtered", rows("select * from sift.search('docs', 'alpha', filter => %s)",
                                 [Jsonb({"$or": [{"n": {"$gte": 0}}, {"parity": "odd"}]})])),
        ("language_config", one("select sift.language_config('de-AT')")),
        ("rrf", rows("select * from sift.rrf(%s, %s, 0.5, 5)", [chunk_ids, chunk_ids])),
        ("recency_factor", one("select sift.recency_factor(now(), now(), '1 day', 0.5)")),
        ("contextualize", one("select sift.contextualize('a', 'b')")),
        ("current_tenant", one("select sift.current_tenant()")),
        ("set_tenant", one("select sift.set_tenant(%s)", [other])),
        ("create_collection", one("select sift.create_collection(%s, 8)", [f"new-{uuid.uuid4().hex[:6]}"])),
        ("alter_collection", one("select sift.alter_collection(%s, '{\"dense_weight\": 0.99}')", [name])),
        ("drop_collection", one("select sift.drop_collection(%s)", [name])),
        ("delete_document", one("select sift.delete_document(%s, %s)", [name, uri])),
        ("delete_document_own", one("select sift.delete_document('docs', %s)", [uri])),
        ("delete_documents", one("select sift.delete_documents(%s, delete_all => true)", [name])),
        ("delete_documents_own", one("select sift.delete_documents('docs', source_prefix => %s)", [uri])),
        ("refresh", rows("select * from sift.refresh_lexical_stats(%s, rebuild => true)", [name])),
        ("lists_min_df_forged", one("select * from sift._lists_min_df(%s, 0)", [col_id])),
        ("register_reranker", one("select sift.register_reranker('rr', 'tei', base_url => 'http://127.0.0.1:9/')")),
        ("drop_reranker", one("select sift.drop_reranker('rr-of-nobody')")),
        ("record_usage", one("select sift.record_rerank_usage('rr', 'tei', 'tei', 1, 1, true)")),
        ("list_rerankers", rows("select * from sift.list_rerankers()")),
        ("rerank_spend", rows("select * from sift.rerank_spend(tenants => %s)", [[other]])),
        ("rerank_spend_all", rows("select * from sift.rerank_spend('-infinity', 'infinity')")),
        ("rerank_cost", one("select * from sift.rerank_cost('tei', 'tei', 1000, 1)")),
        ("reprice_rerank_usage", one("select sift.reprice_rerank_usage('-infinity', tenants => %s)", [[other]])),
        ("forge price", one("insert into sift.rerank_prices (provider, model, effective_from, "
                            "price_per_million_tokens, currency) values ('tei', 'tei', now(), 0, 'USD') returning 1")),
        ("change price", one("update sift.rerank_prices set price_per_million_tokens = 0 returning 1")),
        ("store_threshold", one("select sift.store_calibrated_threshold(%s, 'rr', 0.5)", [name])),
        ("map_secret", one("select sift.map_secret(%s, 'tei-key', 'env:DATABASE_URL', 'any')", [other])),
        ("allow_endpoint", one("select sift.allow_endpoint('http://evil.example/', %s)", [other])),
        ("map_role", one("select sift.map_role(current_user, %s)", [other])),
        # internal functions, forged arguments: a collection row that is not the caller's
        ("forged_dense_leg", rows("select u.* from sift._dense_ids(%s, 8, 'cosine', %s::text::public.vector, "
                                  "null, 10, true, null, false, null, null, false) d, "
                                  "unnest(d.ids, d.dists) as u(chunk_id, distance)", [[col_id], vec])),
        ("forged_dense_leg_walk", rows("select u.* from sift._dense_ids(%s, 8, 'cosine', %s::text::public.vector, "
                                       "null, 10, false, null, false, null, null, true) d, "
                                       "unnest(d.ids, d.dists) as u(chunk_id, distance)", [[col_id], vec])),
        ("forged_dense_leg_own_index", rows("select u.* from sift._dense_ids(%s, 8, 'cosine', "
                                            "%s::text::public.vector, null, 10, false, null, false, %s, null, true) d, "
                                            "unnest(d.ids, d.dists) as u(chunk_id, distance)",
                                            [[col_id], vec, col_id])),
        # an id, not a row the caller can see: the builder itself refuses anyone but the operator
        ("forged_space_index", one("select sift._ensure_space_index(%s)", [rng.randint(1, 40)])),
        ("forged_space_index_as", one("select sift._ensure_space_index(%s, 'postgres')", [rng.randint(1, 40)])),
        ("forged_drop_orphans", rows("select * from sift._drop_orphan_indexes() as name")),
        # an index of a new size on the shared tables: only the operator's session builds one
        ("forged_dense_index", one("select sift._ensure_dense_index(777, 'cosine') as name")),
        ("request index", one("insert into sift.index_requests (tenant, dimensions, distance, builtin) "
                              "values (%s, 777, 'cosine', true) returning 1", [other])),
        # the rows pgsift's locks are taken on: another tenant's cannot be seen, so not locked
        ("lock collection", rows("select * from sift.collection_locks where collection_id = %s for update", [col_id])),
        ("lock collections", rows("select * from sift.collection_locks for key share")),
        ("lock tenant", rows("select * from sift.tenant_locks where tenant = %s for update", [other])),
        ("plant tenant lock", one("insert into sift.tenant_locks (tenant) values (%s) on conflict (tenant) "
                                  "do update set tenant = excluded.tenant returning tenant", [other])),
        ("plant collection lock", one("insert into sift.collection_locks (collection_id) values (%s) returning 1",
                                      [col_id])),
        ("forge limits", one("update sift.tenant_limits set knob_ceilings = '{}', max_index_shapes = 1000 "
                             "returning 1")),
        ("forged_bm25_scores", rows("select * from sift._bm25_scores(%s, array['alpha'], array[1.0], 5, 1.2, 0.4, "
                                    "'alpha'::tsquery, null, 10)", [chunk_ids])),
        ("forged_plain_ready", rows("select (r.col).collection_id, (r.col).tenant, (r.col).name "
                                    "from sift._plain_ready(%s, %s::text::public.vector, 10) r", [name, vec])),
        ("forged_plain_ready_switch", rows("select (r.col).collection_id, (r.col).tenant, (r.col).name "
                                           "from sift._plain_ready(%s, %s::text::public.vector, 10, "
                                           "'{\"hybrid\": false}') r", [name, vec])),
        # a collection row and a space forged with another tenant's collection id and tenant
        ("forged_plain_legs", rows("select u.chunk_id from (values (true), (false)) e(exact), sift._plain_legs("
                                   + FORGED_COL + ", " + FORGED_KNOBS + ", 'alpha bravo', %s::text::public.vector, "
                                   "10, '{}', " + FORGED_SPACE + ", e.exact, false) l, "
                                   "unnest(l.dense_ids || l.lexical_ids) as u(chunk_id)",
                                   [col_id, other, vec, col_id])),
        ("forged_plain_page", rows("select h.* from (values (true), (false)) e(exact), sift._plain_page("
                                   + FORGED_COL + ", " + FORGED_KNOBS + ", 'alpha', %s::text::public.vector, '{}', "
                                   + FORGED_SPACE + ", e.exact, false, 5, repeat('0', 32), 20, 0, '{}', false) h",
                                   [col_id, other, vec, col_id])),
        ("forged_staged_page", rows("select h.* from sift._staged_page(array[" + FORGED_COL + "], array["
                                    + FORGED_KNOBS + "], 'alpha', %s::text::public.vector, '{}', 5, repeat('0', 32), "
                                    "20, 0, '{}', false) h", [col_id, other, vec])),
        ("forged_plain_backfill", rows("select b.id as chunk_id, b.doc as document_id, b.* "
                                       "from sift._plain_backfill(null, 10, %s::bigint[], null, null, null, null) b",
                                       [chunk_ids])),
        ("forged_pool", rows("select * from sift._pool((select c from sift.collections c where collection_id = %s), "
                             "sift._resolve_knobs((select c from sift.collections c where collection_id = %s), '{}'), "
                             "'alpha', null, 10, '{}')", [col_id, col_id])),
        ("forged_gather", one("select sift._gather_list_entries(%s, 100)", [col_id])),
        ("forged_write_lists", one("select sift._write_lists(%s)", [col_id])),
        ("forged_compact_deltas", one("select sift._compact_deltas(%s, true, null)", [col_id])),
        ("forged_merge_deltas", one("select sift._merge_deltas(%s, 5, 0, true, null)", [col_id])),
        ("forged_text_matches", rows("select unnest(sift._text_matches(%s, 'alpha | bravo'::tsquery)) as chunk_id",
                                     [col_id])),
        ("forged_text_matches_role", rows("select unnest(sift._text_matches(%s, 'alpha'::tsquery, %s)) as chunk_id",
                                          [col_id, role_name(other, "reader")])),
        ("forged_text_matches_super", rows("select unnest(sift._text_matches(%s, 'alpha'::tsquery, 'postgres')) "
                                           "as chunk_id", [col_id])),
        ("forged_matching_chunks", rows("select unnest(sift._matching_chunks(%s, 'alpha | bravo'::tsquery, 10)) "
                                        "as chunk_id", [col_id])),
        ("forged_matching_chunks_large", rows("select unnest(sift._matching_chunks(%s, 'alpha'::tsquery, 1e9)) "
                                              "as chunk_id", [col_id])),
        ("forged_cursor_encode", one("select sift._cursor_encode('search', repeat('0', 32), 10, 1, array[1]::bigint[], "
                                     "%s) as cursor", [role_name(other, "reader")])),
        ("forged_cursor_verify", one("select sift._cursor_verify('x', repeat('0', 32), %s) as ok",
                                     [role_name(other, "reader")])),
        ("forged_cursor_mac", one("select sift._cursor_mac(%s, 'x') as mac", [other])),
        ("forged_tenant_for", one("select sift._tenant_for(%s) as tenant", [role_name(other, "reader")])),
        ("forged_tenant_for_gateway", one("select sift._tenant_for('t_gateway') as tenant")),
        # every table, read directly
        *[(f"read {table}", rows(f"select * from sift.{table}")) for table in OWNED],
        # direct writes aimed at another tenant
        ("insert document", one("insert into sift.documents (collection_id, source_uri) values (%s, 'x') "
                                "returning document_id", [col_id])),
        ("write_chunks", one("select sift.write_chunks(%s, array[99], array['planted'], array[null], "
                             "array[null]::integer[], array[%s::vector])", [[doc_id], vec])),
        # the deprecated text[] signatures (0.1.0 clients) take the same way in
        ("write_chunks_text", one("select sift.write_chunks(%s, array[99], array['planted'], array[null], "
                                  "array[null]::integer[], array[%s]::text[])", [[doc_id], vec])),
        ("write_sections", one("select sift.write_sections(%s, array[99], array[null]::integer[], array[1], "
                               "array['planted'])", [[doc_id]])),
        ("insert section", one("insert into sift.sections (document_id, collection_id, ordinal, level) values "
                               "(%s, %s, 99, 1) returning section_id", [doc_id, col_id])),
        ("delete sections", one("delete from sift.sections where document_id = %s returning 1", [doc_id])),
        ("section for a foreign document", one(
            "insert into sift.sections (document_id, collection_id, ordinal, level) values "
            "(%s, (select min(collection_id) from sift.collections), 98, 1) returning section_id", [doc_id])),
        ("chunk in a foreign section", one(
            "insert into sift.chunks (document_id, ordinal, content, embedding, section_id) values "
            "((select min(document_id) from sift.documents), 97, 'planted', %s::text::public.vector, %s) "
            "returning chunk_id", [vec, rng.choice(foe["sections"])])),
        ("insert chunk", one("insert into sift.chunks (document_id, ordinal, content, embedding) values "
                             "(%s, 99, 'planted', %s::text::public.vector) returning chunk_id", [doc_id, vec])),
        ("update chunks", one("update sift.chunks set context = 'x' where chunk_id = any(%s) returning 1",
                              [chunk_ids])),
        ("delete chunks", one("delete from sift.chunks where chunk_id = any(%s) returning 1", [chunk_ids])),
        ("steal collection", one(f"update sift.collections set tenant = %s where collection_id in ({own_collections}) "
                                 "returning 1", [other])),
        ("forge stats", one("insert into sift.term_df_pending (collection_id, lexemes, counts) "
                            "values (%s, array['alpha'], array[1000000]) returning 1", [col_id])),
        ("forge usage", one("insert into sift.rerank_usage (tenant, provider, model, documents, latency_ms, ok, "
                            "billed) values (%s, 'tei', 'tei', 1, 1, true, true) returning 1", [other])),
        ("forge golden", one("insert into sift.golden_questions (golden_set_id, question_key, question) "
                             "values (%s, 'planted', 'x') returning 1", [rng.choice(foe["golden_sets"])])),
        ("delete golden", one("delete from sift.golden_positives where question_id = any(%s) returning 1",
                              [foe["questions"]])),
        # an own row naming another tenant's: refused as a missing id is (issue 37)
        ("plant positive", one("insert into sift.golden_positives (question_id, chunk_id, content) values "
                               "((select min(question_id) from sift.golden_questions), %s, 'alpha') returning 1",
                               [chunk_ids[0]])),
        ("plant run", one("insert into sift.eval_runs (collection_id, golden_set_id, golden_set, label, k, metrics) "
                          "select min(collection_id), %s, 'gs', 'x', 10, '{}' from sift.collections returning 1",
                          [rng.choice(foe["golden_sets"])])),
        ("delete usage", one("delete from sift.rerank_usage where tenant <> sift.current_tenant() returning 1")),
        ("forge mapping", one("insert into sift.tenant_roles values (current_user, %s)", [other])),
    ]


# Functions that touch no table: they only echo what they are given.
PURE = {"rrf", "recency_factor", "contextualize", "lexical_query", "language_config", "filter_path"}
ID_COLUMNS = {"chunk_id": "chunks", "section_id": "sections", "document_id": "documents",
              "collection_id": "collections", "golden_set_id": "golden_sets", "question_id": "questions"}


def _foreign_rows(label: str, result: Any, foe: dict[str, list[Any]]) -> list[Any]:
    """Rows of a result that belong to another tenant: a foreign id in an id column, a foreign
    tenant, or a foreign tenant's name, title or source_uri anywhere."""
    if label in PURE or result is None:
        return []
    marks = tuple(f"{t}-" for t in foe["tenants"])
    found = []
    for row in result if isinstance(result, list) else [result]:
        foreign_id = any(row.get(col) in set(foe[kind]) for col, kind in ID_COLUMNS.items())
        foreign_tenant = row.get("tenant") in foe["tenants"]
        foreign_text = any(m in json.dumps(row, default=str) for m in marks)
        if foreign_id or foreign_tenant or foreign_text:
            found.append(row)
    return found


# Another tenant's collection as a row value (its id and tenant given), with the default knobs and
# its built-in space: what an internal function taking a collection row is given when forged.
FORGED_COL = ("jsonb_populate_record(null::sift.collections, jsonb_build_object('collection_id', %s::bigint, "
              "'tenant', %s::text, 'name', 'forged', 'embedding_dims', 8, 'distance', 'cosine'))")
FORGED_KNOBS = "sift._merge_knobs('{}', 'forged', '{}')"
FORGED_SPACE = ("jsonb_populate_record(null::sift.vector_spaces, jsonb_build_object('collection_id', %s::bigint, "
                "'name', 'default', 'dimensions', 8, 'distance', 'cosine', 'builtin', true, 'active', true, "
                "'dense_precision', 'full'))")


def test_isolation_suite(db, connect_as, tenants, figure):
    rng = random.Random(20261130)
    before = {t: fingerprint(db, t) for t in TENANTS}
    tried = refused = 0
    leaks: list[tuple[str, str, Any]] = []
    covered: set[str] = set()
    for tenant in TENANTS:
        foe = foreign_ids(db, tenant)
        sessions = [(kind, connect_as(role_name(tenant, kind))) for kind in KINDS]
        gateway = connect_as("t_gateway")
        sessions.append(("gateway", gateway))
        for kind, conn in sessions:
            for _round in range(3):
                for label, call in attacks(conn, tenant, foe, rng):
                    covered.add(label)
                    tried += 1
                    try:
                        with conn.transaction():
                            if kind == "gateway":
                                conn.execute("select sift.set_tenant(%s)", [tenant])
                            result = call()
                            if label == "current_tenant":
                                assert result == {"current_tenant": tenant}, (kind, result)
                            leaks += [(kind, label, r) for r in _foreign_rows(label, result, foe)]
                            raise _Rollback
                    except _Rollback:
                        pass
                    except psycopg.Error as exc:
                        # a deliberate refusal: pgsift's own, a grant or policy (never a foreign key's
                        # 23503, which would tell another tenant's ids from missing ones)
                        assert exc.sqlstate.startswith("SF") or exc.sqlstate == "42501", \
                            (kind, label, exc.sqlstate, str(exc))
                        refused += 1
    assert leaks == []
    after = {t: fingerprint(db, t) for t in TENANTS}
    assert after == before   # every write was rolled back or refused: compare what stands
    # Every public function of sift was attacked.
    public = {r[0] for r in db.execute("select proname from pg_proc where pronamespace = 'sift'::regnamespace "
                                       "and proname !~ '^_'").fetchall()}
    attacked = {label.removesuffix("_own").removesuffix("_all").removesuffix("_foreign").removesuffix("_several")
                .removesuffix("_named").removesuffix("_boost") for label in covered}
    aliases = {"rebind": "rebind_golden_set", "refresh": "refresh_lexical_stats", "record_usage": "record_rerank_usage",
               "store_threshold": "store_calibrated_threshold", "search_boost": "search"}
    attacked = {aliases.get(a, a) for a in attacked}
    assert public - attacked == set()
    assert tried > 1000 and refused > 100
    figure("isolation calls tried, 0 foreign rows, 0 foreign writes", tried)
    figure("isolation calls refused", refused)


def test_writes_stay_in_their_own_tenant(db, connect_as, tenants):
    """Writes that succeed (no rollback this time) land in the writer's own tenant only."""
    before = {t: fingerprint(db, t) for t in ("globex", "initech")}
    writer = connect_as(role_name("acme", "admin"))
    client = Client(writer)
    client.create_collection("fresh", embedding_dims=DIMS)
    client.upsert_documents("fresh", random_documents(np.random.default_rng(9), 5, DIMS))
    client.upsert_documents("docs", random_documents(np.random.default_rng(10), 5, DIMS, prefix="more"))
    client.alter_collection("docs", mmr_lambda=0.5)
    client.delete_document("docs", "acme-docs-0")
    assert client.drop_reranker("rr") is True
    with pytest.raises(pgsift.CollectionNotFound):
        client.drop_collection("globex-only")
    with pytest.raises(pgsift.TenantError):
        Client(writer, tenant="globex").search("docs", "alpha")
    assert {c.tenant for c in client.list_collections()} == {"acme"}
    assert {t: fingerprint(db, t) for t in ("globex", "initech")} == before


class _Rollback(Exception):
    """Leaves the attack's transaction without committing what succeeded."""


# -- binding a tenant ------------------------------------------------------------------------

def test_who_may_bind_a_tenant(db, connect_as):
    Client(db, tenant="acme").create_collection("c", embedding_dims=4)
    db.execute("select sift.map_role('t_reader', 'acme')")
    reader = connect_as("t_reader")
    assert reader.execute("select sift.current_tenant()").fetchone()[0] == "acme"
    with pytest.raises(psycopg.Error) as info, reader.transaction():
        reader.execute("select sift.set_tenant('globex')")
    assert info.value.sqlstate == "SF010" and "acts for tenant" in info.value.diag.message_primary
    with reader.transaction():   # binding its own tenant is allowed (and changes nothing)
        assert reader.execute("select sift.set_tenant('acme')").fetchone()[0] == "acme"
    # A gateway must bind, per transaction; a role with no mapping and no gateway may not.
    gateway = connect_as("t_gateway")
    with pytest.raises(psycopg.Error) as info:
        gateway.execute("select sift.current_tenant()")
    assert info.value.sqlstate == "SF010" and "no tenant is bound" in info.value.diag.message_primary
    with gateway.transaction():
        gateway.execute("select sift.set_tenant('acme')")
        assert gateway.execute("select sift.current_tenant()").fetchone()[0] == "acme"
    writer = connect_as("t_writer")
    with pytest.raises(psycopg.Error) as info, writer.transaction():
        writer.execute("select sift.set_tenant('acme')")
    assert info.value.sqlstate == "SF010" and "may not choose a tenant" in info.value.diag.message_primary
    with pytest.raises(pgsift.TenantError):
        Client(writer).search("c", "x")


def test_a_binding_left_on_a_pooled_connection_is_never_inherited(db, connect_as):
    """A session-level SET (or a set_tenant by hand outside a transaction) stays on a pooled
    server connection after its client is gone; the next client on it must not inherit it."""
    for tenant in ("acme", "globex"):
        Client(db, tenant=tenant).create_collection(f"{tenant}-c", embedding_dims=4)
    gateway = connect_as("t_gateway")
    gateway.execute("set pgsift.tenant = 'acme'")                       # session level, by hand
    gateway.execute("select set_config('pgsift.tenant_txn', 'guess', false)")
    with pytest.raises(psycopg.Error) as info:
        gateway.execute("select * from sift.collection_info()")        # a later transaction
    assert info.value.sqlstate == "SF010"
    gateway.execute("select sift.set_tenant('acme')")                  # autocommit: its own transaction
    with pytest.raises(psycopg.Error):
        gateway.execute("select * from sift.collection_info()")        # gone with it
    assert [c.name for c in Client(gateway, tenant="globex").list_collections()] == ["globex-c"]


def test_a_delta_merge_reaches_only_its_own_tenants_lists(db, connect_as, tenants):
    """sift._compact_deltas runs as its caller: given another tenant's collection, a writer's
    call merges nothing there (row-level security hides its lists and deltas) and a reader's is
    refused; the owner's writer merges the same delta."""
    col_id, lexeme = db.execute(
        "select l.collection_id, l.lexeme from sift.term_lists l join sift.collections c using (collection_id) "
        "where c.tenant = 'globex' and c.name = 'docs' order by l.lexeme limit 1").fetchone()
    chunk_id = db.execute("select min(chunk_id) from sift.chunks where collection_id = %s", [col_id]).fetchone()[0]
    for _ in range(40):
        db.execute("insert into sift.term_deltas (collection_id, lexeme, chunk_ids, tfs, dls) "
                   "values (%s, %s, array[%s]::bigint[], '{1}', '{10}')", [col_id, lexeme, chunk_id])
    db.execute("update sift.term_lists set delta_rows = (select count(*) from sift.term_deltas d "
               "where d.collection_id = %s and d.lexeme = %s) where collection_id = %s and lexeme = %s",
               [col_id, lexeme, col_id, lexeme])
    rows = "select count(*) from sift.term_deltas where collection_id = %s and lexeme = %s"
    held = db.execute(rows, [col_id, lexeme]).fetchone()[0]
    assert held >= 40
    call = "select sift._compact_deltas(%s, true, null)"
    assert connect_as(role_name("acme", "writer")).execute(call, [col_id]).fetchone()[0] == 0
    with pytest.raises(psycopg.Error) as refused:
        connect_as(role_name("acme", "reader")).execute(call, [col_id])
    assert refused.value.sqlstate == "42501"
    assert db.execute(rows, [col_id, lexeme]).fetchone()[0] == held
    assert connect_as(role_name("globex", "writer")).execute(call, [col_id]).fetchone()[0] >= 1
    assert db.execute(rows, [col_id, lexeme]).fetchone()[0] == 1


def test_a_list_merge_reaches_only_its_own_tenants_lists(db, connect_as, tenants):
    """sift._merge_deltas runs as its caller, and takes a list's blocks and delta out and writes
    them back itself: given another tenant's collection, a writer's or a reader's call merges
    nothing there (row-level security hides its lists, blocks and deltas); the owner's reader,
    who sees the list due, is refused the write; the owner's writer merges the delta."""
    col_id, lexeme = db.execute(
        "select l.collection_id, l.lexeme from sift.term_lists l join sift.collections c using (collection_id) "
        "where c.tenant = 'globex' and c.name = 'docs' order by l.lexeme limit 1").fetchone()
    chunk_ids = [r[0] for r in db.execute("select chunk_id from sift.chunks where collection_id = %s "
                                          "order by chunk_id", [col_id])]
    db.execute("insert into sift.term_deltas (collection_id, lexeme, chunk_ids, tfs, dls) "
               "values (%s, %s, %s, %s, %s)", [col_id, lexeme, chunk_ids, [float(i + 1) for i in range(len(chunk_ids))],
                                               [50] * len(chunk_ids)])   # (impacts all apart)
    # (due by its count, 100 entries or more: the collection holds fewer chunks)
    db.execute("update sift.term_lists set delta_entries = 100, delta_rows = 1 "
               "where collection_id = %s and lexeme = %s", [col_id, lexeme])
    state = ("select (select array_agg(b.chunk_ids order by b.block_no) from sift.term_blocks b "
             "         where b.collection_id = l.collection_id and b.lexeme = l.lexeme), "
             "       (select count(*) from sift.term_deltas d where d.collection_id = l.collection_id "
             "         and d.lexeme = l.lexeme), l.entries, l.delta_entries "
             "from sift.term_lists l where l.collection_id = %s and l.lexeme = %s")
    before = db.execute(state, [col_id, lexeme]).fetchone()
    assert before[1] == 1 and before[3] == 100 and len(chunk_ids) >= 5
    call = "select sift._merge_deltas(%s, 5, 0, true, null)"
    for kind in ("writer", "reader"):
        assert connect_as(role_name("acme", kind)).execute(call, [col_id]).fetchone()[0] == 0
    with pytest.raises(psycopg.Error) as refused:
        connect_as(role_name("globex", "reader")).execute(call, [col_id])
    assert refused.value.sqlstate == "42501"
    assert db.execute(state, [col_id, lexeme]).fetchone() == before
    assert connect_as(role_name("globex", "writer")).execute(call, [col_id]).fetchone()[0] >= 1
    blocks, deltas, entries, delta_entries = db.execute(state, [col_id, lexeme]).fetchone()
    assert deltas == 0 and delta_entries == 0 and entries == sum(len(b) for b in blocks) == 5   # list_size 5


@pytest.mark.parametrize("prepare", [False, True])
def test_a_one_round_trip_binding_holds_for_its_own_search_alone(db, connect_as, prepare):
    """The client's search binds its tenant in the round trip that searches (BEGIN, binding,
    search, COMMIT; prepared or not): another tenant's collection is never found, the binding
    is gone after it, and a reader mapped to acme binds no other tenant that way either."""
    rng = np.random.default_rng(3)
    for tenant in ("acme", "globex"):
        Client(db, tenant=tenant).create_collection(f"{tenant}-c", embedding_dims=DIMS)
        Client(db, tenant=tenant).upsert_documents(f"{tenant}-c", random_documents(rng, 5, DIMS, prefix=tenant))
    gateway = connect_as("t_gateway")
    for tenant, other in (("acme", "globex"), ("globex", "acme"), ("acme", "globex")):
        client = Client(gateway, tenant=tenant, prepare=prepare)
        hits = client.search(f"{tenant}-c", "alpha", embedding=np.ones(DIMS), top_k=5)
        assert len(hits) == 5 and all(h.source_uri.startswith(tenant) for h in hits)
        with pytest.raises(pgsift.CollectionNotFound):
            client.search(f"{other}-c", "alpha", embedding=np.ones(DIMS))
        with pytest.raises(psycopg.Error) as info:                   # nothing bound after it
            gateway.execute("select sift.current_tenant()")
        assert info.value.sqlstate == "SF010"
    db.execute("select sift.map_role('t_reader', 'acme')")
    reader = connect_as("t_reader")
    with pytest.raises(pgsift.TenantError):
        Client(reader, tenant="globex", prepare=prepare).search("globex-c", "alpha")
    with pytest.raises(pgsift.CollectionNotFound):
        Client(reader, prepare=prepare).search("globex-c", "alpha")
    assert len(Client(reader, prepare=prepare).search("acme-c", "alpha", embedding=np.ones(DIMS))) > 0


def test_a_binding_counts_only_in_its_database(db, connect_as, postgresql_noproc):
    """Roles are the cluster's, so sift_gateway's members are gateways in every database that installs
    pgsift (docs/trust.md says to give each its own login roles and CONNECT); the binding itself is
    marked with its transaction and database, and a mark made for another database never counts."""
    Client(db, tenant="acme").create_collection("here", embedding_dims=4)
    gateway = connect_as("t_gateway")
    with gateway.transaction():
        assert gateway.execute("select sift.set_tenant('acme')").fetchone() == ("acme",)
        mark = gateway.execute("select current_setting('pgsift.tenant_txn')").fetchone()[0]
        assert mark.endswith(" " + db.info.dbname)
        assert [c.name for c in Client(gateway).list_collections()] == ["here"]
    epoch = "extract(epoch from now())::text"
    for forged, counts in ((f"{epoch} || ' other_database'", False), (epoch, False),
                           (f"{epoch} || ' ' || current_database()", True)):
        with gateway.transaction():
            gateway.execute("select set_config('pgsift.tenant', 'acme', true)")
            gateway.execute(f"select set_config('pgsift.tenant_txn', {forged}, true)")
            if counts:   # what sift.set_tenant writes, and only a gateway (or the operator) may
                assert gateway.execute("select sift.current_tenant()").fetchone() == ("acme",)
                continue
            with pytest.raises(psycopg.Error) as info:
                gateway.execute("select sift.current_tenant()")
            assert info.value.sqlstate == "SF010", forged
    writer = connect_as("t_writer")   # the same mark from a role that may not bind is refused
    with pytest.raises(psycopg.Error) as info, writer.transaction():
        writer.execute("select set_config('pgsift.tenant', 'acme', true)")
        writer.execute(f"select set_config('pgsift.tenant_txn', {epoch} || ' ' || current_database(), true)")
        writer.execute("select sift.current_tenant()")
    assert info.value.sqlstate == "SF010" and "may not choose a tenant" in info.value.diag.message_primary

    # A second database of the same cluster, pgsift installed (from the tests' template).
    other = f"{db.info.dbname}_other"
    db.execute(f'create database "{other}" template "{postgresql_noproc.template_dbname}"')
    try:
        with psycopg.connect(host=db.info.host, port=db.info.port, dbname=other, user="postgres",
                             autocommit=True) as there:
            Client(there, tenant="acme").create_collection("there", embedding_dims=4)
        # The same gateway role is a gateway there too, until CONNECT is taken from PUBLIC.
        elsewhere = connect_as("t_gateway", dbname=other)
        assert [c.name for c in Client(elsewhere, tenant="acme").list_collections()] == ["there"]
        elsewhere.close()
        db.execute(f'revoke connect on database "{other}" from public')
        with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
            connect_as("t_gateway", dbname=other)
    finally:
        db.execute(f'drop database "{other}" with (force)')


def test_what_a_tenant_can_and_cannot_see(db, connect_as):
    """docs/trust.md#what-a-tenant-can-see, as a mapped reader of a tenant with no documents."""
    client = Client(db, tenant="acme")
    client.create_collection("docs", embedding_dims=DIMS)
    client.upsert_documents("docs", random_documents(np.random.default_rng(3), 20, DIMS))
    db.execute("analyze sift.documents")
    db.execute("select sift.map_role('t_reader', 'globex')")
    reader = connect_as("t_reader")
    assert reader.execute("select count(*) from sift.documents").fetchone() == (0,)
    # Visible: the shared tables' volumes (all tenants together) and the rows a policy filtered out.
    assert reader.execute("select reltuples from pg_class where oid = 'sift.documents'::regclass").fetchone() == (20,)
    assert reader.execute("select count(*) from pg_stat_user_tables where relid = 'sift.chunks'::regclass"
                          ).fetchone() == (1,)
    plan = "\n".join(r[0] for r in reader.execute(
        "explain (analyze, costs off, timing off, summary off, buffers off) select * from sift.documents"))
    assert "Rows Removed by Filter: 20" in plan
    # Hidden: the column statistics (PostgreSQL hides them from a role a policy applies to) ...
    assert db.execute("select count(*) > 0 from pg_stats where schemaname = 'sift' and tablename = 'documents'"
                      ).fetchone() == (True,)
    assert reader.execute("select count(*) from pg_stats where schemaname = 'sift' and tablename = 'documents'"
                          ).fetchone() == (0,)
    # ... and the shared sequences (no grant; writing takes an id all the same).
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.execute("select last_value from sift.documents_document_id_seq")


def test_a_role_without_grants_gets_nothing(db, connect_as):
    Client(db).create_collection("c", embedding_dims=4)
    nobody = connect_as("t_nobody")
    col_id = db.execute("select collection_id from sift.collections where name = 'c'").fetchone()[0]
    for query in ("select * from sift.search('c', 'x')", "select * from sift.collections",
                  "select sift.current_tenant()", "select * from sift.knobs()",
                  f"select sift._text_matches({col_id}, 'x'::tsquery)",
                  f"select sift._text_matches({col_id}, 'x'::tsquery, 'postgres')",
                  "select sift._clean_text_index()",
                  "select sift._tenant_for('postgres')"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            nobody.execute(query)


def test_only_writers_clean_the_text_index_and_their_refresh_does(db, connect_as):
    """The text index's pending list (read whole by every probe) is emptied by a writer's
    refresh, through a security definer with no argument; a reader may not call it."""
    db.execute("create extension if not exists pgstattuple")
    Client(db, tenant="acme").create_collection("c", embedding_dims=4)
    db.execute("select sift.map_role('t_writer', 'acme')")
    db.execute("select sift.map_role('t_reader', 'acme')")

    def pending() -> int:
        return db.execute("select pending_pages from pgstatginindex('sift.chunks_search_vector_idx')").fetchone()[0]

    wconn = connect_as("t_writer")
    writer = Client(wconn, refresh_backlog=1)   # a refresh after every write
    col_id = db.execute("select collection_id from sift.collections where name = 'c'").fetchone()[0]
    for i in range(40):   # straight through SQL, as the writer: no refresh runs
        with wconn.transaction():
            doc = wconn.execute("insert into sift.documents (collection_id, source_uri) values (%s, %s) "
                                      "returning document_id", [col_id, f"raw-{i}"]).fetchone()[0]
            wconn.execute("insert into sift.chunks (document_id, ordinal, content, embedding) "
                                "values (%s, 0, %s, '[1,0,0,0]')", [doc, f"words {i} alpha bravo charlie"])
    assert pending() > 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        connect_as("t_reader").execute("select sift._clean_text_index()")
    assert pending() > 0
    writer.upsert_documents("c", random_documents(np.random.default_rng(3), 5, 4))   # then refreshes
    assert pending() == 0
    assert [h.chunk_id for h in writer.search("c", "alpha", top_k=50)]   # the moved entries still match
    # An upkeep step never fails the write it follows: with the index out of its reach, it warns.
    notices: list[str] = []
    wconn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    db.execute("alter index sift.chunks_search_vector_idx rename to chunks_text_elsewhere")
    try:
        writer.upsert_documents("c", random_documents(np.random.default_rng(4), 2, 4, prefix="late"))
    finally:
        db.execute("alter index sift.chunks_text_elsewhere rename to chunks_search_vector_idx")
    assert any("pending list was not cleaned" in n for n in notices)
    assert len(writer.search("c", "late", top_k=50)) > 0


def test_the_lists_min_df_reads_and_writes_only_the_own_tenant(two_tenants, db, connect_as):
    """sift._lists_min_df with another tenant's collection id sees none of its statistics (row-level
    security: by the size of nothing, 20, nothing built, nothing chosen), and a refresh by name
    acts on the caller's own collection alone; a reader refreshes nothing."""
    stats = ("select s.lists_min_df, s.lists_min_df_chosen from sift.collection_lexical_stats s "
             "join sift.collections c using (collection_id) where c.tenant = %s and c.name = 'docs' "
             "and s.lists_min_df is not null")
    db.execute("select sift.refresh_lexical_stats('docs', min_df => 7) from sift.set_tenant('globex')")
    globex = db.execute(stats, ["globex"]).fetchall()
    assert globex == [(7, True)]
    foreign = _one_id(db, IDS["collection"], "globex")
    writer = connect_as(role_name("acme", "writer"))
    assert writer.execute("select m.min_df, m.built_df, m.chosen from sift._lists_min_df(%s, null) m",
                          [foreign]).fetchone() == (20, None, False)
    writer.execute("select * from sift.refresh_lexical_stats('docs', min_df => 0)")
    assert db.execute(stats, ["acme"]).fetchall() == [(20, False)]
    assert db.execute(stats, ["globex"]).fetchall() == globex
    with pytest.raises(psycopg.Error):
        connect_as(role_name("acme", "reader")).execute("select * from sift.refresh_lexical_stats('docs', min_df => 0)")
    assert db.execute(stats, ["globex"]).fetchall() == globex


# -- references: checked within the tenant, and no error tells a foreign id from a missing one --

@pytest.fixture
def two_tenants(db):
    """acme and globex, each with collections 'docs' and 'other' (documents with sections), an
    added vector space 'alt' on 'docs', a golden set 'gs' with a question 'q1' in each
    collection and a reranker; login roles of each kind mapped to each tenant."""
    db.execute("select sift.allow_endpoint('http://127.0.0.1:')")
    for t_i, tenant in enumerate(("acme", "globex")):
        client = Client(db, tenant=tenant)
        for name in ("docs", "other"):
            client.create_collection(name, embedding_dims=DIMS)
            client.upsert_documents(name, random_documents(np.random.default_rng(t_i), 3, DIMS,
                                                           prefix=f"{tenant}-{name}"))
        client.add_vector_space("docs", "alt", dimensions=DIMS)
        with client.transaction() as conn:
            conn.execute("select sift.register_reranker(%s, 'tei', base_url => 'http://127.0.0.1:9/')",
                         [f"{tenant}-rr"])
            for name in ("docs", "other"):
                set_id = conn.execute("insert into sift.golden_sets (collection_id, name) select collection_id, 'gs' "
                                      "from sift._collection(%s) returning golden_set_id", [name]).fetchone()[0]
                conn.execute("insert into sift.golden_questions (golden_set_id, question_key, question) "
                             "values (%s, 'q1', 'alpha?')", [set_id])
        map_roles(db, tenant)
    return ("acme", "globex")


def _one_id(db, query: str, tenant: str, collection: str = "docs") -> Any:
    """The first id a query finds among a tenant's rows of a collection (as the operator)."""
    return db.execute(query + " order by 1 limit 1", {"t": tenant, "c": collection}).fetchone()[0]


OF = ("(select collection_id from sift.collections where tenant = %(t)s and name = %(c)s)")
IDS = {
    "collection": f"select collection_id from sift.collections where collection_id = {OF}",
    "document": f"select document_id from sift.documents where collection_id = {OF}",
    "chunk": f"select chunk_id from sift.chunks where collection_id = {OF}",
    "section": f"select section_id from sift.sections where collection_id = {OF}",
    "space": f"select space_id from sift.vector_spaces where collection_id = {OF} and name = 'alt'",
    "golden_set": f"select golden_set_id from sift.golden_sets where collection_id = {OF}",
    "question": f"select question_id from sift.golden_questions where golden_set_id in "
                f"(select golden_set_id from sift.golden_sets where collection_id = {OF})",
}


def _refusal(conn: psycopg.Connection, statement: str, params: Any) -> psycopg.Error:
    """The error a statement fails with (its transaction rolled back); fails the test when it
    succeeds."""
    try:
        with conn.transaction():
            conn.execute(statement, params)
    except psycopg.Error as exc:
        return exc
    raise AssertionError(f"accepted: {statement} {params}")


def _shape(exc: psycopg.Error, named: Any) -> tuple[str | None, str, str]:
    """An error as its caller reads it, the id it names written <id>: two errors of one shape
    tell nothing apart."""
    def hide(text: str | None) -> str:
        return re.sub(rf"(?<![\w.]){re.escape(str(named))}(?![\w.])", "<id>", text or "")
    return exc.sqlstate, hide(exc.diag.message_primary), hide(exc.diag.message_detail)


def test_a_positive_names_only_a_chunk_of_its_golden_sets_collection(db, connect_as, two_tenants):
    """Issue 37: tenant A's positive bound to tenant B's chunk was accepted (the trigger could
    not see it, the foreign key checks as the owner), and a chunk id that does not exist got
    23503: which ids B has. Both are now the same SF003, and so is a chunk of A's own other
    collection."""
    theirs = _one_id(db, IDS["chunk"], "globex")
    missing = db.execute("select max(chunk_id) + 1000000 from sift.chunks").fetchone()[0]
    other = _one_id(db, IDS["chunk"], "acme", "other")
    mine = _one_id(db, IDS["chunk"], "acme")
    question = _one_id(db, IDS["question"], "acme")
    insert = "insert into sift.golden_positives (question_id, chunk_id, content) values (%s, %s, 'alpha')"
    for kind in ("writer", "admin"):
        conn = connect_as(role_name("acme", kind))
        shapes = {_shape(_refusal(conn, insert, [question, chunk]), chunk) for chunk in (theirs, missing, other)}
        assert len(shapes) == 1, shapes
        assert shapes.pop()[:2] == ("SF003", "chunk <id> is not a chunk of the golden set's collection")
        # Rebinding an own positive to another chunk is checked alike.
        with conn.transaction():
            positive = conn.execute("insert into sift.golden_positives (question_id, chunk_id) values (%s, %s) "
                                    "returning positive_id", [question, mine]).fetchone()[0]
        update = "update sift.golden_positives set chunk_id = %s where positive_id = %s"
        assert {_shape(_refusal(conn, update, [chunk, positive]), chunk) for chunk in (theirs, missing)} == {
            ("SF003", "chunk <id> is not a chunk of the golden set's collection", "")}
        conn.execute("delete from sift.golden_positives where positive_id = %s", [positive])
    # The operator sees every chunk and is held to the same rule.
    with db.transaction():
        db.execute("select sift.set_tenant('acme')")
        assert _refusal(db, insert, [question, theirs]).sqlstate == "SF003"


def test_a_chunks_deletion_never_fails_on_a_positive(db, connect_as, two_tenants):
    """The issue's attack: A marks its question, whose positive names B's chunk, as having no
    answer; B's delete_document, upsert_documents and drop_collection, and the operator's
    DELETE, then failed with SF003. The positive is refused now; and unbinding never fails,
    whatever the question's state, even for rows that got in before (written here with the
    triggers and keys off, as an older version let them in)."""
    writer = connect_as(role_name("acme", "writer"))
    question = _one_id(db, IDS["question"], "acme")

    def first_chunk(uri: str) -> int:
        return db.execute("select min(chunk_id) from sift.chunks join sift.documents using (document_id) "
                          "where source_uri = %s", [uri]).fetchone()[0]

    theirs = [first_chunk(uri) for uri in ("globex-docs-0", "globex-docs-1", "globex-docs-2", "globex-other-0")]
    # Through the front door: refused, so the question may be marked (it has no positive).
    assert _refusal(writer, "insert into sift.golden_positives (question_id, chunk_id) values (%s, %s)",
                    [question, theirs[0]]).sqlstate == "SF003"
    writer.execute("update sift.golden_questions set answerable = false where question_id = %s", [question])
    with db.transaction():
        db.execute("set local session_replication_role = replica")
        for chunk in [*theirs, first_chunk("acme-docs-0")]:
            db.execute("insert into sift.golden_positives (question_id, chunk_id, content) values (%s, %s, 'x')",
                       [question, chunk])
    globex = Client(connect_as(role_name("globex", "admin")))
    assert globex.delete_document("docs", "globex-docs-0") is True
    globex.upsert_documents("docs", [d for d in random_documents(np.random.default_rng(1), 2, DIMS,
                                                                 prefix="globex-docs") if d.source_uri.endswith("-1")])
    db.execute("delete from sift.chunks where chunk_id = %s", [theirs[2]])   # the operator
    globex.drop_collection("other")
    Client(writer).delete_document("docs", "acme-docs-0")   # A's own chunk, on the same question
    assert db.execute("select count(*), count(chunk_id) from sift.golden_positives where question_id = %s",
                      [question]).fetchone() == (5, 0)
    assert db.execute("select count(*) from sift.chunks where chunk_id = any(%s)", [theirs]).fetchone() == (0,)


def test_a_question_with_positives_cannot_be_marked_as_having_no_answer(db, connect_as, two_tenants):
    writer = connect_as(role_name("acme", "writer"))
    question = _one_id(db, IDS["question"], "acme")
    writer.execute("insert into sift.golden_positives (question_id, chunk_id) values (%s, %s)",
                   [question, _one_id(db, IDS["chunk"], "acme")])
    mark = "update sift.golden_questions set answerable = false where question_id = %s"
    refused = _refusal(writer, mark, [question])
    assert refused.sqlstate == "SF003"
    assert refused.diag.message_primary == 'question "q1" has 1 positive(s): it cannot be marked as having no answer'
    writer.execute("delete from sift.golden_positives where question_id = %s", [question])
    writer.execute(mark, [question])
    assert db.execute("select answerable from sift.golden_questions where question_id = %s",
                      [question]).fetchone() == (False,)
    # ... and then it takes none (as before).
    assert _refusal(writer, "insert into sift.golden_positives (question_id, content) values (%s, 'x')",
                    [question]).sqlstate == "SF003"


def test_an_eval_run_names_only_a_golden_set_of_its_collection(db, connect_as, two_tenants):
    theirs = _one_id(db, IDS["golden_set"], "globex")
    missing = db.execute("select max(golden_set_id) + 1000000 from sift.golden_sets").fetchone()[0]
    other = _one_id(db, IDS["golden_set"], "acme", "other")
    mine = _one_id(db, IDS["golden_set"], "acme")
    insert = ("insert into sift.eval_runs (collection_id, golden_set_id, golden_set, label, k, metrics) "
              "select collection_id, %s, 'gs', 'pipeline', 10, '{}' from sift._collection('docs')")
    for kind in ("writer", "admin"):
        conn = connect_as(role_name("acme", kind))
        shapes = {_shape(_refusal(conn, insert, [set_id]), set_id) for set_id in (theirs, missing, other)}
        assert shapes == {("SFG01", "golden set <id> is not a golden set of the run's collection", "")}
    writer = connect_as(role_name("acme", "writer"))
    writer.execute(insert, [mine])
    # Deleting the set unlinks its runs (the name stays), never refused.
    writer.execute("delete from sift.golden_sets where golden_set_id = %s", [mine])
    assert db.execute("select golden_set_id, golden_set from sift.eval_runs").fetchall() == [(None, "gs")]


def test_an_upgrade_unbinds_what_an_older_version_let_across(db, two_tenants):
    """Migration 0021 on rows an older version let in: a positive bound to another tenant's
    chunk is unbound (its text stays; an own chunk's binding stays), and a run naming another
    tenant's golden set keeps only the name, even on a question marked as having no answer."""
    question = _one_id(db, IDS["question"], "acme")
    mine, theirs = _one_id(db, IDS["chunk"], "acme"), _one_id(db, IDS["chunk"], "globex")
    with db.transaction():
        db.execute("set local session_replication_role = replica")   # triggers and keys off: as it was
        db.execute("update sift.golden_questions set answerable = false where question_id = %s", [question])
        for chunk in (mine, theirs):
            db.execute("insert into sift.golden_positives (question_id, chunk_id, content) values (%s, %s, 'x')",
                       [question, chunk])
        for set_id in (_one_id(db, IDS["golden_set"], "acme"), _one_id(db, IDS["golden_set"], "globex")):
            db.execute("insert into sift.eval_runs (collection_id, golden_set_id, golden_set, label, k, metrics) "
                       "values (%s, %s, 'gs', 'pipeline', 10, '{}')", [_one_id(db, IDS["collection"], "acme"), set_id])
    (migration,) = [m for m in migration_files() if m.version == "0021_cross_tenant_refs"]
    with db.transaction():
        db.execute(with_vector_schema(migration.text, "public"))
    pgsift.migrate(db, force=True)   # the function files, as every migrate applies them after
    assert db.execute("select chunk_id, content from sift.golden_positives order by positive_id").fetchall() == [
        (mine, "x"), (None, "x")]
    assert db.execute("select golden_set_id from sift.eval_runs order by run_id").fetchall() == [
        (_one_id(db, IDS["golden_set"], "acme"),), (None,)]


VEC = "[" + ",".join("0.5" for _ in range(DIMS)) + "]"
# (what is referenced, the kind of role, a write naming it as %(id)s; every other value the
# attacker's own). A foreign id and a missing one must be refused with one error.
REFERENCES = [
    ("collection", "writer", "insert into sift.documents (collection_id, source_uri) values (%(id)s, 'planted')"),
    ("document", "writer", "insert into sift.chunks (document_id, ordinal, content, embedding) "
                           f"values (%(id)s, 99, 'planted', '{VEC}')"),
    ("section", "writer", "insert into sift.chunks (document_id, ordinal, content, embedding, section_id) "
                          f"values (%(doc)s, 98, 'planted', '{VEC}', %(id)s)"),
    ("document", "writer", "insert into sift.sections (document_id, collection_id, ordinal, level) "
                           "values (%(id)s, %(col)s, 99, 1)"),
    ("chunk", "writer", "insert into sift.chunk_vectors (space_id, chunk_id, collection_id, document_id, embedding) "
                        f"values (%(space)s, %(id)s, 0, 0, '{VEC}')"),
    ("space", "writer", "insert into sift.chunk_vectors (space_id, chunk_id, collection_id, document_id, embedding) "
                        f"values (%(id)s, %(chunk)s, 0, 0, '{VEC}')"),
    ("chunk", "writer", "insert into sift.chunk_tokens (chunk_id, collection_id, tokens, dimensions, token_count) "
                        "values (%(id)s, 0, array['[1,1,1,1]'::public.halfvec], 0, 0)"),
    ("chunk", "writer", "insert into sift.chunk_enrichments (chunk_id, collection_id, enrichment_key, context) "
                        "values (%(id)s, 0, repeat('a', 64), 'planted')"),
    ("chunk", "writer", f"insert into sift.question_vectors (chunk_id, ordinal, collection_id, embedding) "
                        f"values (%(id)s, 0, 0, '{VEC}')"),
    ("document", "writer", "insert into sift.enrichment_runs (document_id, collection_id) values (%(id)s, 0)"),
    ("collection", "writer", "insert into sift.golden_sets (collection_id, name) values (%(id)s, 'planted')"),
    ("golden_set", "writer", "insert into sift.golden_questions (golden_set_id, question_key, question) "
                             "values (%(id)s, 'planted', 'x')"),
    ("question", "writer", "insert into sift.golden_positives (question_id, content) values (%(id)s, 'x')"),
    ("chunk", "writer", "insert into sift.golden_positives (question_id, chunk_id) values (%(question)s, %(id)s)"),
    ("collection", "writer", "insert into sift.eval_runs (collection_id, golden_set, label, k, metrics) "
                             "values (%(id)s, 'gs', 'x', 10, '{}')"),
    ("golden_set", "writer", "insert into sift.eval_runs (collection_id, golden_set_id, golden_set, label, k, "
                             "metrics) values (%(col)s, %(id)s, 'gs', 'x', 10, '{}')"),
    ("collection", "writer", "insert into sift.collection_configs (collection_id, config) values (%(id)s, 'simple')"),
    ("collection", "writer", "insert into sift.chunk_token_sizes (collection_id, dimensions) values (%(id)s, 4)"),
    ("collection", "writer", "insert into sift.collection_lexical_stats (collection_id, chunks, tokens) "
                             "values (%(id)s, 1, 1)"),
    ("collection", "writer", "insert into sift.term_df (collection_id, lexeme, df) values (%(id)s, 'planted', 1)"),
    ("collection", "writer", "insert into sift.term_df_pending (collection_id, lexemes, counts) "
                             "values (%(id)s, array['planted'], array[1])"),
    ("collection", "writer", "insert into sift.term_lists (collection_id, lexeme, floor_impact, avgdl_ref, k1_ref, "
                             "b_ref) values (%(id)s, 'planted', 0, 1, 1.2, 0.75)"),
    ("collection", "writer", "insert into sift.term_blocks (collection_id, lexeme, block_no, max_impact, chunk_ids, "
                             "tfs, dls) values (%(id)s, 'planted', 0, 1, '{}', '{}', '{}')"),
    ("collection", "writer", "insert into sift.term_deltas (collection_id, lexeme, chunk_ids, tfs, dls) "
                             "values (%(id)s, 'planted', '{}', '{}', '{}')"),
    ("collection", "admin", "insert into sift.vector_spaces (collection_id, name, dimensions) "
                            "values (%(id)s, 'planted', 4)"),
    ("reranker", "admin", "update sift.collections set reranker_alias = %(id)s where collection_id = %(col)s"),
    ("tenant", "writer", "insert into sift.rerank_usage (tenant, provider, model, documents, latency_ms, ok, billed) "
                         "values (%(id)s, 'tei', 'tei', 1, 1, true, true)"),
]


# Public functions that take ids: the same answer (a result or an error) either way.
ID_CALLS = [
    ("chunk", f"select sift.write_space_vectors('docs', 'alt', array[%(id)s]::bigint[], array['{VEC}']::vector[])"),
    ("chunk", "select sift.write_token_vectors('docs', array[%(id)s]::bigint[], array['[1,1,1,1]']::vector[])"),
    ("chunk", "select sift.delete_token_vectors('docs', array[%(id)s]::bigint[])"),
    ("chunk", "select * from sift.maxsim('docs', array[%(id)s]::bigint[], array['[1,1,1,1]']::vector[])"),
    ("chunk", "select * from sift.finalize('docs', array[%(id)s]::bigint[])"),
    ("chunk", "select * from sift.resolve_sections(array[%(id)s]::bigint[])"),
    ("chunk", "select * from sift.rerank_texts(array[%(id)s]::bigint[])"),
    ("chunk", "select * from sift.explain('docs', 'alpha', chunk_ids => array[%(id)s]::bigint[])"),
    ("document", "select sift.write_chunks(array[%(id)s]::bigint[], array[99], array['p'], array[null], "
                 f"array[null]::integer[], array['{VEC}'::vector])"),
    ("document", "select sift.write_sections(array[%(id)s]::bigint[], array[99], array[null]::integer[], array[1], "
                 "array['p'])"),
]


def _outcome(conn: psycopg.Connection, statement: str, named: Any) -> Any:
    """What a call answers, rolled back: its rows or its error, the id it names written <id>."""
    try:
        with conn.transaction():
            rows = conn.execute(statement, {"id": named}).fetchall()
            raise _Rollback
    except _Rollback:
        return re.sub(rf"(?<![\w.]){re.escape(str(named))}(?![\w.])", "<id>", repr(rows))
    except psycopg.Error as exc:
        return _shape(exc, named)


def test_no_reference_tells_another_tenants_id_from_a_missing_one(db, connect_as, two_tenants):
    """Every write that names another row, with tenant B's id and with an id that does not
    exist: refused, with one error (SQLSTATE, message and detail alike but for the id); so a
    tenant learns nothing of the ids another has. A reference to another tenant is never
    accepted."""
    own = {"doc": _one_id(db, IDS["document"], "acme"), "col": _one_id(db, IDS["collection"], "acme"),
           "space": _one_id(db, IDS["space"], "acme"), "chunk": _one_id(db, IDS["chunk"], "acme"),
           "question": _one_id(db, IDS["question"], "acme")}
    tables = {"collection": ("collections", "collection_id"), "document": ("documents", "document_id"),
              "chunk": ("chunks", "chunk_id"), "section": ("sections", "section_id"),
              "space": ("vector_spaces", "space_id"), "golden_set": ("golden_sets", "golden_set_id"),
              "question": ("golden_questions", "question_id")}
    foreign: dict[str, Any] = {kind: _one_id(db, IDS[kind], "globex") for kind in tables}
    foreign |= {"reranker": "globex-rr", "tenant": "globex"}
    missing: dict[str, Any] = {
        kind: db.execute(f"select max({column}) + 1000000 from sift.{table}").fetchone()[0]
        for kind, (table, column) in tables.items()}
    missing |= {"reranker": "nobodys-rr", "tenant": "nobody"}
    sessions = {kind: connect_as(role_name("acme", kind)) for kind in ("writer", "admin")}
    mine: dict[str, Any] = {kind: _one_id(db, IDS[kind], "acme") for kind in tables}
    mine |= {"reranker": "acme-rr", "tenant": "acme"}
    before = fingerprint(db, "globex")
    different, unrelated = [], []
    for referenced, kind, statement in REFERENCES:
        shapes = {_shape(_refusal(sessions[kind], statement, {**own, "id": value}), value)
                  for value in (foreign[referenced], missing[referenced])}
        if len(shapes) != 1:
            different.append((statement, shapes))
        # The refusal is the reference's: with an id of the attacker's own, it is not this one.
        try:
            with sessions[kind].transaction():
                sessions[kind].execute(statement, {**own, "id": mine[referenced]})
                raise _Rollback
        except _Rollback:
            pass
        except psycopg.Error as exc:
            if _shape(exc, mine[referenced]) in shapes:
                unrelated.append((statement, shapes))
    for referenced, statement in ID_CALLS:
        answers = [_outcome(sessions["admin"], statement, value)
                   for value in (foreign[referenced], missing[referenced])]
        if answers[0] != answers[1]:
            different.append((statement, answers))
    assert different == []
    assert unrelated == []
    assert fingerprint(db, "globex") == before


# -- search_path: nothing planted is ever called ----------------------------------------------

PLANTS = [
    # More specific signatures than pg_catalog's polymorphic ones win on a path: these would be
    # chosen over pg_catalog.cardinality(anyarray), array_position(anycompatiblearray, ...), ...
    "create function public.cardinality(bigint[]) returns integer language plpgsql as "
    "$$ begin insert into public.planted_calls values ('cardinality'); return 1; end $$",
    "create function public.array_position(text[], text) returns integer language plpgsql as "
    "$$ begin insert into public.planted_calls values ('array_position'); return 1; end $$",
    "create function public.unnest(bigint[]) returns setof bigint language plpgsql as "
    "$$ begin insert into public.planted_calls values ('unnest'); return; end $$",
    "create function public.coalesce_planted(text) returns text language sql as $$ select $1 $$",
    "create function public.array_length(integer[], integer) returns integer language plpgsql as "
    "$$ begin insert into public.planted_calls values ('array_length'); return 1; end $$",
    "create function public.jsonb_typeof(jsonb) returns text language plpgsql as "
    "$$ begin insert into public.planted_calls values ('jsonb_typeof'); return 'object'; end $$",
    "create function public.lower(text) returns text language plpgsql as "
    "$$ begin insert into public.planted_calls values ('lower'); return $1; end $$",
    # Operators beside pgvector's own: an exact vector <=> vector would shadow pgvector's.
    "create function public.planted_distance(public.vector, public.vector) returns float8 language plpgsql as "
    "$$ begin insert into public.planted_calls values ('<=>'); return 0; end $$",
    "create operator public.<<=>> (leftarg = public.vector, rightarg = public.vector, "
    "function = public.planted_distance)",
    "create function public.planted_eq(bigint, bigint[]) returns boolean language plpgsql as "
    "$$ begin insert into public.planted_calls values ('='); return true; end $$",
    "create function public.planted_concat(bigint[], bigint[]) returns bigint[] language plpgsql as "
    "$$ begin insert into public.planted_calls values ('||'); return $1; end $$",
    "create operator public.|| (leftarg = bigint[], rightarg = bigint[], function = public.planted_concat)",
]


def test_nothing_planted_in_the_vector_schema_is_called(db, connect_as):
    """A role allowed to create in pgvector's schema (public here; the default on PostgreSQL
    14 and older) plants functions and operators that would win on a naive search_path.
    The operator (a superuser) then runs every kind of call: none of them is ever invoked."""
    db.execute("create table public.planted_calls (what text)")
    db.execute("grant insert on public.planted_calls to public")
    db.execute("grant create on schema public to t_nobody")
    attacker = connect_as("t_nobody")
    for statement in PLANTS:
        attacker.execute(statement)
    client = Client(db)   # the operator, with a default search_path ("$user", public)
    assert db.execute("show search_path").fetchone()[0] == '"$user", public'
    client.create_collection("c", embedding_dims=DIMS, mmr_lambda=0.5, recency_field="published")
    client.upsert_documents("c", random_documents(np.random.default_rng(5), 30, DIMS))
    client.refresh_lexical_stats("c")
    db.execute("select * from sift.refresh_lexical_stats('c', min_df => 2, list_size => 3, rebuild => true)")
    query = np.ones(DIMS)
    for knobs in ({}, {"exact_search_limit": 0}, {"lexical_budget": 100, "lexical_exact_limit": 0},
                  {"per_document_cap": 1, "lost_in_the_middle": True}, {"preset": "pgvector"}):
        assert len(client.search("c", "alpha bravo", embedding=query, top_k=5, **knobs)) == 5
        client.explain("c", "alpha", embedding=query, top_k=5, chunk_ids=[1, 2, 3], **knobs)
    client.finalize("c", [1, 2, 3], [0.3, 0.2, 0.1])
    client.knobs("c", dense_weight=0.3)
    client.alter_collection("c", search_language="simple")
    client.delete_document("c", "doc-0")
    db.execute("select sift.lexical_query('alpha -bravo \"charlie delta\"')")
    db.execute("select * from sift.rrf(array[1,2], array[2,3], 0.5, 5)")
    pgsift.migrate(db, force=True)
    assert db.execute("select count(*) from public.planted_calls").fetchone()[0] == 0


# -- row-level security keeps the dense leg on its index --------------------------------------

def test_the_dense_leg_walks_hnsw_under_row_level_security(db, connect_as):
    client = Client(db, tenant="acme")
    client.create_collection("big", embedding_dims=DIMS, exact_search_limit=10)
    client.upsert_documents("big", random_documents(np.random.default_rng(3), 200, DIMS))
    db.execute("analyze sift.chunks")
    db.execute("select sift.map_role('t_reader', 'acme')")
    reader = connect_as("t_reader")
    statement = db.execute("select sift._dense_leg_sql(%s, 'cosine', false, false)", [DIMS]).fetchone()[0]
    col = db.execute("select collection_id from sift.collections where name = 'big'").fetchone()[0]
    reader.execute(psycopg.sql.SQL("prepare leg(public.vector, bigint[], jsonb, integer) as {}").format(
        psycopg.sql.SQL(statement)))
    vector = "[" + ",".join("0.3" for _ in range(DIMS)) + "]"
    plan = reader.execute(psycopg.sql.SQL("explain (format json) execute leg({}, {}, '{{}}', 10)").format(
        psycopg.sql.Literal(vector), psycopg.sql.Literal([col]))).fetchone()[0]
    nodes, stack = [], [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack += node.get("Plans", [])
    scans = [n for n in nodes if n.get("Index Name", "").startswith("chunks_hnsw_cosine_")]
    assert scans and scans[0]["Node Type"] == "Index Scan"
    # the tenant's policy is a filter on that scan, computed once (an InitPlan)
    assert any("InitPlan" in (n.get("Subplan Name") or "") or n.get("Parent Relationship") == "InitPlan"
               for n in nodes)
    hits = Client(reader).search("big", embedding=np.ones(DIMS), top_k=10)
    assert len(hits) == 10
