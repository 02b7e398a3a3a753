"""Deleting and replacing documents by metadata or source prefix: the documents each call
removes against a Python reference, BM25 statistics exact afterwards (equal to a collection
holding only what remains), refusals for a delete that names nothing or would empty the
collection, and a re-crawl that replaces a set of documents in one transaction."""

from __future__ import annotations

import random

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Document

DIMS = 8
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


def site(rng: random.Random, vecs: np.random.Generator, n: int) -> list[Document]:
    docs = []
    for i in range(n):
        prefix = rng.choice(["site/a/", "site/b/", "other/"])
        docs.append(Document(
            source_uri=f"{prefix}{i}", metadata={"team": rng.choice(["x", "y"]), "year": rng.choice([2023, 2024])},
            chunks=[Chunk(content=" ".join(rng.choices(WORDS, k=8)), embedding=unit(vecs.normal(size=DIMS)))
                    for _ in range(rng.randint(1, 3))]))
    return docs


def lexical(client, collection: str, query: str) -> dict[str, float]:
    return {f"{h.source_uri}#{h.ordinal}": round(h.lexical_score, 9)
            for h in client.search(collection, query, top_k=200)}


def test_delete_by_filter_and_prefix_matches_the_reference_and_keeps_statistics_exact(client, db):
    rng, vecs = random.Random(3), np.random.default_rng(3)
    docs = site(rng, vecs, 60)
    client.create_collection("d", embedding_dims=DIMS)
    client.upsert_documents("d", docs)
    remaining = {d.source_uri: d for d in docs}
    for filter, prefix in [({"team": "x"}, "site/a/"), (None, "site/b/"), ({"year": 2023}, None)]:
        gone = {u for u, d in remaining.items()
                if (filter is None or all(d.metadata.get(k) == v for k, v in filter.items()))
                and (prefix is None or u.startswith(prefix))}
        assert client.delete_documents("d", filter=filter, source_prefix=prefix) == len(gone)
        remaining = {u: d for u, d in remaining.items() if u not in gone}
        stored = {r[0] for r in db.execute("select source_uri from sift.documents").fetchall()}
        assert stored == set(remaining)
    # BM25 over what remains equals a collection built from it alone.
    client.create_collection("fresh", embedding_dims=DIMS)
    client.upsert_documents("fresh", list(remaining.values()))
    for query in ("alpha", "bravo charlie", "foxtrot echo delta"):
        assert lexical(client, "d", query) == lexical(client, "fresh", query)
    assert db.execute("select count(*) from sift.chunks c left join sift.documents d using (document_id) "
                      "where d.document_id is null").fetchone() == (0,)


def test_a_delete_that_names_nothing_is_refused(client, db):
    client.create_collection("r", embedding_dims=DIMS)
    client.upsert_documents("r", site(random.Random(1), np.random.default_rng(1), 5))
    for kwargs in ({}, {"filter": {}}):
        with pytest.raises(pgsift.InvalidArgument, match="delete_all"):
            client.delete_documents("r", **kwargs)
    with pytest.raises(pgsift.InvalidArgument):
        client.delete_documents("r", source_prefix="  ")
    with pytest.raises(pgsift.InvalidArgument):
        client.delete_documents("r", filter=["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(psycopg.Error) as err:
        db.execute("select sift.delete_documents('r')")
    assert err.value.sqlstate == "SF003"
    with pytest.raises(pgsift.CollectionNotFound):
        client.delete_documents("nope", delete_all=True)
    assert db.execute("select count(*) from sift.documents").fetchone() == (5,)
    # A filter or prefix that happens to match every document is refused too, and deletes nothing.
    vecs = np.random.default_rng(9)
    client.create_collection("en", embedding_dims=DIMS)
    client.upsert_documents("en", [Document(source_uri=f"docs/{i}", metadata={"lang": "en"},
                                            chunks=[Chunk(content="alpha", embedding=unit(vecs.normal(size=DIMS)))])
                                   for i in range(3)])
    for kwargs in ({"filter": {"lang": "en"}}, {"source_prefix": "docs/"}):
        with pytest.raises(pgsift.InvalidArgument, match="all 3 documents"):
            client.delete_documents("en", **kwargs)
    with pytest.raises(psycopg.Error, match="all 3 documents"), db.transaction():
        db.execute("select sift.delete_documents('en', source_prefix => 'docs/', keep => '{}')")
    assert db.execute("select sift.delete_documents('en', source_prefix => 'docs/', keep => array['docs/1'])"
                      ).fetchone() == (2,)
    assert client.delete_documents("en", filter={"lang": "en"}, delete_all=True) == 1
    assert db.execute("select count(*) from sift.documents").fetchone() == (5,)
    assert client.delete_documents("r", delete_all=True) == 5
    assert db.execute("select sift.delete_documents('r', delete_all => true)").fetchone() == (0,)


def test_replace_documents_is_one_transaction(client, db):
    vecs = np.random.default_rng(2)

    def doc(uri: str, text: str) -> Document:
        return Document(source_uri=uri, chunks=[Chunk(content=text, embedding=unit(vecs.normal(size=DIMS)))])

    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", [doc("site/a", "old a"), doc("site/b", "old b"), doc("site/c", "old c"),
                                  doc("other/x", "untouched")])
    written, deleted = client.replace_documents("c", [doc("site/b", "new b"), doc("site/d", "new d")],
                                                source_prefix="site/")
    assert (written, deleted) == (2, 2)
    rows = dict(db.execute("select d.source_uri, c.content from sift.documents d join sift.chunks c "
                           "using (document_id)").fetchall())
    assert rows == {"site/b": "new b", "site/d": "new d", "other/x": "untouched"}
    # A document that fails its checks leaves the old set whole.
    bad = Document(source_uri="site/e", chunks=[Chunk(content="x", embedding=[1.0, 0.0])])
    with pytest.raises(pgsift.DimensionMismatch):
        client.replace_documents("c", [doc("site/b", "newer b"), bad], source_prefix="site/")
    assert dict(db.execute("select d.source_uri, c.content from sift.documents d join sift.chunks c "
                           "using (document_id)").fetchall()) == rows
    with pytest.raises(pgsift.InvalidArgument, match="twice"):
        client.replace_documents("c", [doc("site/b", "1"), doc("site/b", "2")], source_prefix="site/")
    with pytest.raises(pgsift.InvalidArgument, match="delete_all"):
        client.replace_documents("c", [doc("site/b", "1")])
    assert client.search("c", "new", top_k=5).lexical_query == "'new'"


@pytest.fixture
async def aclient(dsn):
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        yield pgsift.AsyncClient(conn)
    finally:
        await conn.close()


async def test_async_delete_and_replace(aclient, db):
    vecs = np.random.default_rng(4)
    await aclient.create_collection("a", embedding_dims=DIMS)
    docs = [Document(source_uri=f"site/{i}",
                     chunks=[Chunk(content=f"doc {i}", embedding=unit(vecs.normal(size=DIMS)))]) for i in range(4)]
    await aclient.upsert_documents("a", docs)
    assert await aclient.replace_documents("a", docs[:2], source_prefix="site/") == (2, 2)
    assert await aclient.delete_documents("a", source_prefix="site/1") == 1
    assert db.execute("select array_agg(source_uri) from sift.documents").fetchone() == (["site/0"],)
