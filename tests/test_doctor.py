"""`pgsift doctor` (pgsift.doctor): each check reads the session's settings and pgsift's HNSW
indexes, and says what to set when a leg would be slow."""

from __future__ import annotations

import json

from pgsift import Client, doctor
from pgsift.cli import main


def by_name(found) -> dict[str, doctor.Check]:
    return {c.name: c for c in found}


def test_doctor_reads_the_settings_and_the_indexes(db):
    Client(db).create_collection("kb", embedding_dims=128)
    doc = db.execute("insert into sift.documents (collection_id, source_uri) select collection_id, 'd' "
                     "from sift.collections returning document_id").fetchone()[0]
    # About 3,000 vectors of 128 dimensions: an HNSW index of a few MB.
    db.execute("insert into sift.chunks (document_id, ordinal, content, embedding) "
               "select %s, s.i, 'chunk ' || s.i, (select array_agg(random() + d.j * 0 + s.i * 0 + 0.01) "
               "from generate_series(1, 128) d(j))::real[]::vector from generate_series(0, 2999) s(i)", [doc])
    db.execute("set jit = on")
    db.execute("set maintenance_work_mem = '1MB'")
    db.execute("set random_page_cost = 4")
    found = by_name(doctor.checks(db))
    assert list(found) == ["hnsw indexes in shared_buffers", "hnsw builds in maintenance_work_mem",
                           "parallel index builds", "pgvector", "jit", "random_page_cost",
                           "search vectors in the row", "hnsw indexes queued", "lexical statistics"]
    assert found["hnsw indexes in shared_buffers"].status == "ok"          # a few MB in 128 MB
    assert found["hnsw builds in maintenance_work_mem"].status == "warn"
    assert "maintenance_work_mem to" in found["hnsw builds in maintenance_work_mem"].advice
    assert found["jit"].status == "warn" and "jit = off" in found["jit"].advice
    assert found["random_page_cost"].status == "info"
    assert found["pgvector"].status == "ok" and "0.8" in found["pgvector"].value
    db.execute("set jit = off")
    db.execute("set maintenance_work_mem = '1GB'")
    db.execute("set random_page_cost = 1.1")
    found = by_name(doctor.checks(db))
    assert all(found[n].status == "ok" for n in ("hnsw builds in maintenance_work_mem", "jit", "random_page_cost"))


def test_doctor_says_where_search_vectors_are_stored(db):
    def vectors():
        return by_name(doctor.checks(db))["search vectors in the row"]

    client = Client(db)
    client.create_collection("kb", embedding_dims=128)
    assert vectors().status == "ok" and "storage main" in vectors().value and "128" in vectors().value
    client.create_collection("openai", embedding_dims=1536)    # out of line from here on
    assert vectors().status == "ok" and "storage extended" in vectors().value and "1536" in vectors().value
    db.execute("alter table sift.chunks alter column search_vector set storage main")
    assert vectors().status == "warn" and "sift.ensure_dense_indexes()" in vectors().advice
    client.drop_collection("openai")
    db.execute("drop index sift.chunks_hnsw_cosine_1536")
    db.execute("alter table sift.chunks alter column search_vector set storage extended")
    assert vectors().status == "info" and "SET STORAGE main" in vectors().advice


def test_doctor_from_the_command_line(dsn, capsys):
    assert main(["doctor", "--dsn", dsn, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 9 and {r["status"] for r in rows} <= {"ok", "warn", "info"}
    assert main(["doctor", "--dsn", dsn]) == 0
    assert "hnsw indexes in shared_buffers" in capsys.readouterr().out


def test_doctor_warns_when_a_collection_leaves_many_writes_unfolded(db, monkeypatch):
    client = Client(db)
    client.create_collection("kb", embedding_dims=4)
    client.create_collection("quiet", embedding_dims=4)

    def statistics():
        return by_name(doctor.checks(db))["lexical statistics"]

    assert statistics().status == "ok" and statistics().value.startswith("0 write statements")
    col_id = client.get_collection("kb").collection_id
    for i in range(4):   # straight through SQL: nothing refreshes
        doc = db.execute("insert into sift.documents (collection_id, source_uri) values (%s, %s) "
                         "returning document_id", [col_id, f"d{i}"]).fetchone()[0]
        db.execute("insert into sift.chunks (document_id, ordinal, content, embedding) "
                   "values (%s, 0, 'words', '[1,0,0,0]')", [doc])
    assert statistics().status == "ok" and statistics().value == "4 write statements not yet folded in collection 'kb'"
    monkeypatch.setattr(doctor, "PENDING_WARN", 4)
    assert statistics().status == "warn" and "sift.refresh_lexical_stats('kb')" in statistics().advice
    client.refresh_lexical_stats("kb")
    assert statistics().status == "ok" and statistics().value.startswith("0 write statements")


def test_doctor_warns_while_an_index_waits_for_the_operator(db, connect_as):
    def queued():
        return by_name(doctor.checks(db))["hnsw indexes queued"]

    assert queued().status == "ok"
    db.execute("select sift.map_role('t_admin', 'acme')")
    Client(connect_as("t_admin")).create_collection("kb", embedding_dims=24)   # a tenant's: queued
    assert queued().status == "warn" and "24 cosine" in queued().value
    assert "sift.ensure_dense_indexes()" in queued().advice
    db.execute("select sift.ensure_dense_indexes()")
    assert queued().status == "ok"
    # A space's own index is the one it walks: missing (as after a restore), doctor names it, as
    # collection_info says queued; ensure_dense_indexes builds it again.
    client = Client(db)
    own = client.create_collection("own", embedding_dims=8, hnsw_m=24)
    name = db.execute("select sift._space_index_name(s) from sift.vector_spaces s where s.collection_id = %s",
                      (own.collection_id,)).fetchone()[0]
    assert name == f"chunks_hnsw_collection_{own.collection_id}" and queued().status == "ok"
    db.execute(f"drop index sift.{name}")
    assert client.get_collection("own").dense_index == "queued"
    assert queued().status == "warn" and queued().value.endswith(f": 8 cosine ({name})")
    db.execute("select sift.ensure_dense_indexes()")
    assert queued().status == "ok" and client.get_collection("own").dense_index == "built"
