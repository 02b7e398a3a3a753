"""Where a chunk's search vector lives (migration 0018, sift._set_search_vector_storage): in the
row (storage main), so the lexical leg reads it without a TOAST lookup, while every embedding
on sift.chunks fits 1,024 dimensions; out of line once a larger collection exists, so a long
chunk's row moves its vector out and keeps its embedding. Only the operator's session switches
(the table is locked against every search until commit), waiting at most a second for it and
saying so when it cannot have it; sift.ensure_dense_indexes() tries again."""

from __future__ import annotations

import numpy as np
import psycopg
from conftest import unit
from pgsift import Chunk, Client, Document

# 250 distinct words: a stored vector of ~3 kB, more than a 384-dimension embedding (1.5 kB),
# less than a 1,536-dimension one (6 kB).
TEXT = " ".join(f"w{i}x{i * 7 % 13}" for i in range(250))


def storage(db: psycopg.Connection) -> str:
    return db.execute("select attstorage::text from pg_attribute "
                      "where attrelid = 'sift.chunks'::regclass and attname = 'search_vector'").fetchone()[0]


def out_of_line(db: psycopg.Connection, collection: str, uri: str = "d") -> tuple[bool, bool]:
    """Whether a document's chunk stores its search vector, and its embedding, out of line."""
    return db.execute(
        "select pg_column_toast_chunk_id(k.search_vector) is not null, "
        "pg_column_toast_chunk_id(k.embedding) is not null "
        "from sift.chunks k join sift.documents d using (document_id) join sift.collections c "
        "on c.collection_id = d.collection_id where c.name = %s and d.source_uri = %s",
        [collection, uri]).fetchone()


def write(client: Client, collection: str, dims: int, uri: str = "d") -> None:
    vec = unit(np.random.default_rng(dims).normal(size=dims)).astype(np.float32)
    client.upsert_documents(collection, [Document(source_uri=uri, chunks=[Chunk(content=TEXT, embedding=vec)])])


def found(db: psycopg.Connection, collection: str, word: str) -> list[str]:
    return [r[0] for r in db.execute("select content from sift.search(collection => %s, query_text => %s)",
                                     [collection, word])]


def test_search_vectors_stay_in_the_row_up_to_1024_dimensions(db):
    client = Client(db)
    assert storage(db) == "m"
    client.create_collection("small", embedding_dims=384)
    client.create_collection("wide", embedding_dims=1024)
    assert storage(db) == "m"
    # The row passes the 2 kB TOAST target: its text moves out, its search vector and
    # embedding stay (~4.5 kB, under the ~8 kB where a row moves those out too).
    write(client, "small", 384)
    assert out_of_line(db, "small") == (False, False)
    write(client, "wide", 1024)
    assert out_of_line(db, "wide") == (False, False)
    assert found(db, "small", "w10x5") == [TEXT]


def test_a_collection_past_1024_dimensions_keeps_embeddings_in_the_row(db):
    client = Client(db)
    client.create_collection("small", embedding_dims=384)
    write(client, "small", 384)
    assert out_of_line(db, "small") == (False, False)
    client.create_collection("openai", embedding_dims=1536)
    assert storage(db) == "x"
    # A 6 kB embedding and a 3 kB vector pass 8 kB: the vector goes out, the embedding stays
    # (in the row as main, the vector would have stayed and the larger embedding gone).
    write(client, "openai", 1536)
    assert out_of_line(db, "openai") == (True, False)
    assert out_of_line(db, "small") == (False, False)     # rows already written keep their place
    assert found(db, "openai", "w12x6") == [TEXT]
    # Switched once: another large collection changes nothing.
    client.create_collection("openai2", embedding_dims=3072)
    assert storage(db) == "x"
    # What the switch avoids: with vectors in the row, that row's embedding goes out instead.
    db.execute("alter table sift.chunks alter column search_vector set storage main")
    write(client, "openai", 1536, "again")
    assert out_of_line(db, "openai", "again") == (False, True)


def test_the_switch_waits_a_second_for_a_busy_table(db, dsn):
    client = Client(db)
    busy = psycopg.connect(dsn)
    busy.execute("select count(*) from sift.chunks").fetchone()     # holds the table (an open transaction)
    notices: list[str] = []
    db.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    db.execute("set lock_timeout = '7s'")
    client.create_collection("openai", embedding_dims=1536)         # not blocked for long: warns instead
    assert storage(db) == "m"
    assert any("search vectors stay in the chunks' rows for now" in n for n in notices)
    assert db.execute("show lock_timeout").fetchone()[0] == "7s"    # the caller's setting survives
    busy.rollback()
    busy.close()
    assert "chunks_hnsw_cosine_1536" in [r[0] for r in db.execute("select * from sift.ensure_dense_indexes()")]
    assert storage(db) == "x"


def test_a_collection_with_its_own_index_switches_too(db):
    Client(db).create_collection("own", embedding_dims=1536, hnsw_m=8)    # sift._ensure_space_index
    assert storage(db) == "x"


def test_a_tenant_admin_never_locks_the_table_for_everyone(db, connect_as):
    """A tenant's admin creating a large collection leaves the index and the storage to the
    operator: either would lock sift.chunks against every tenant until its transaction ends,
    and it could keep that transaction open."""
    db.execute("select sift.map_role('t_admin', 'acme')")
    admin = connect_as("t_admin")
    notices: list[str] = []
    admin.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    with admin.transaction():
        Client(admin).create_collection("openai", embedding_dims=1536)
        held = {r[0] for r in admin.execute("select mode from pg_locks where pid = pg_backend_pid() "
                                            "and relation = 'sift.chunks'::regclass")}
        assert "AccessExclusiveLock" not in held
    assert any("waits for the operator's build" in n for n in notices)
    assert storage(db) == "m"
    db.execute("select * from sift.ensure_dense_indexes()")      # the operator, later
    assert storage(db) == "x"


def test_only_the_index_builders_run_the_switch(db):
    for role in ("sift_reader", "sift_writer", "sift_admin", "sift_gateway"):
        assert not db.execute("select has_function_privilege(%s, 'sift._set_search_vector_storage(integer)', "
                              "'execute')", [role]).fetchone()[0]
