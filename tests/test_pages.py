"""Stable pagination (sift.search_page, sift.finalize_page, Client.search_page).

The oracle: for every knob combination, query shape and sequence of page sizes, the pages
concatenated (each in rank order) are exactly one sift.search of page_window hits with the
same arguments, only the last page is short, and it says why nothing follows. Under writes
between pages no hit comes twice and every hit of the new window is served. Cursors from
another request, entry point or tenant, or altered, are refused (SF012) and give no rows.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
import random

import numpy as np
import psycopg
import pytest
from conftest import random_documents, unit
from pgsift import AsyncClient, Chunk, Client, Document, InvalidCursor, rerankers
from psycopg.types.json import Jsonb
from rerank_servers import RerankServer, import_providers, loopback_only

DIMS = 8
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]

KNOB_SETS = [
    {},
    {"hybrid": False},
    {"per_document_cap": 1},
    {"per_document_cap": None},
    {"mmr_lambda": 0.5},
    {"mmr_lambda": 0.3, "per_document_cap": 2},
    {"lost_in_the_middle": True},
    {"lost_in_the_middle": True, "mmr_lambda": 0.7},
    {"parent_return": "parent"},
    {"parent_return": "auto", "merge_threshold": 0.3},
    {"neighbours": 1},
    {"boost": {"pages-b": 2.0}},
    {"score_threshold": 0.05},
    {"recency_field": "published", "recency_weight": 0.5},
    {"dense_weight": 0.9, "rrf_k": 60, "fetch_k": 80},
    {"one_translation": True, "query_language": "en"},
    {"snippets": "text"},
    {"page_window": 17},
    {"page_window": 17, "per_document_cap": 1, "lost_in_the_middle": True},
]


@pytest.fixture
def kb(db):
    """Two collections of the operator's tenant ("default", so plain SQL sees them too), 40 and
    25 documents of 3 chunks (with sections), dated."""
    client = Client(db)
    for name, n in (("pages", 40), ("pages-b", 25)):
        client.create_collection(name, embedding_dims=DIMS)
        docs = random_documents(np.random.default_rng(len(name)), n, DIMS, chunks_per_doc=3, words=WORDS,
                                prefix=name)
        for i, d in enumerate(docs):
            d.metadata["published"] = f"2026-{1 + i % 12:02d}-01"
        client.upsert_documents(name, docs)
    return client


def rows(db, function: str, **args):
    """Rows of a sift function as dicts, called with named arguments."""
    names = ", ".join(f"{k} => %({k})s" for k in args)
    cur = db.cursor(row_factory=psycopg.rows.dict_row)
    return cur.execute(f"select * from sift.{function}({names})", {
        k: Jsonb(v) if isinstance(v, dict) else v for k, v in args.items()}).fetchall()


def query_args(shape: str, rng: np.random.Generator) -> dict:
    vec = "[" + ",".join(f"{x:.6f}" for x in unit(rng.normal(size=DIMS))) + "]"
    text = "alpha bravo delta"
    return {"text": {"query_text": text}, "vector": {"query_embedding": vec},
            "both": {"query_text": text, "query_embedding": vec}}[shape]


def pages_of(db, where: dict, knobs: dict, sizes: list[int]) -> list[list[dict]]:
    """Page through sift.search_page with these page sizes (the last repeats) until the end."""
    pages = []
    cursor = None
    for i in itertools.count():
        size = sizes[min(i, len(sizes) - 1)]
        page = rows(db, "search_page", **where, page_size=size, cursor=cursor, knobs=knobs)
        pages.append(page)
        last = max(page, key=lambda h: (h["rank"], h["chunk_id"]), default=None)
        if last is None or last["cursor"] is None:
            return pages
        cursor = last["cursor"]
        assert i < 500


def litm(m: int) -> list[int]:
    return [(j + 1) // 2 if j % 2 == 1 else m - j // 2 + 1 for j in range(1, m + 1)]


@pytest.mark.parametrize(("shape", "several"), [("both", False), ("text", False), ("vector", False),
                                               ("both", True)])
def test_pages_concatenate_to_one_ranking_of_the_window(kb, db, shape, several, figure):
    rng = np.random.default_rng(7)
    prng = random.Random(shape + str(several))
    where = ({"collections": ["pages", "pages-b"]} if several else {"collection": "pages"}) | query_args(shape, rng)
    cases = pages_checked = 0
    ends: dict[str, int] = {}
    for knobs in KNOB_SETS:
        if "boost" in knobs and not several:
            continue
        window = knobs.get("page_window", 100)
        whole = rows(db, "search", **where, match_count=window, knobs=knobs | {"lost_in_the_middle": None})
        small = [[1], [2, 5]] if window < 100 else []
        for sizes in (*small, [7], [100], [prng.randrange(1, 25) for _ in range(5)]):
            pages = pages_of(db, where, knobs, sizes)
            served = [h for page in pages for h in sorted(page, key=lambda h: h["rank"])]
            assert [h["chunk_id"] for h in served] == [h["chunk_id"] for h in whole], (knobs, sizes)
            # recency counts from now(), which moves between statements
            assert [h["score"] for h in served] == pytest.approx([h["score"] for h in whole], rel=1e-6)
            assert [h["rank"] for h in served] == list(range(1, len(whole) + 1))
            for i, page in enumerate(pages):
                if page is not pages[-1]:                                # only the last page is short
                    assert len(page) == sizes[min(i, len(sizes) - 1)], (knobs, sizes, i)
                tail = max(page, key=lambda h: h["rank"], default=None)  # the last by rank says how to go on
                assert all(h["cursor"] is None and h["cursor_end"] is None for h in page if h is not tail)
                if tail is not None and page is not pages[-1]:
                    assert tail["cursor"] and tail["cursor_end"] is None
            tail = max(pages[-1], key=lambda h: h["rank"], default=None)
            if tail is not None:
                assert tail["cursor"] is None and tail["cursor_end"] in ("window", "exhausted")
                if len(whole) >= window:
                    assert tail["cursor_end"] == "window"
            ends[tail["cursor_end"] if tail else "empty"] = ends.get(tail["cursor_end"] if tail else "empty", 0) + 1
            if knobs.get("lost_in_the_middle"):
                for page in pages:
                    by_rank = sorted(page, key=lambda h: h["rank"])
                    assert [h["position"] for h in by_rank] == litm(len(page))
            else:
                assert all([h["position"] for h in page] == list(range(1, len(page) + 1)) for page in pages)
            cases += 1
            pages_checked += len(pages)
    figure("pagination oracle cases (knob set x page sizes), each pages == one window", cases)
    figure("pages checked against the window", pages_checked)


BOTH_PAGES = """
select (select array_agg(to_jsonb(h) order by h.rank)
        from sift._plain_page(c, st.ks[1], %(q)s, %(e)s::vector, %(f)s, p.space, p.exact, p.iterative, %(n)s,
                              st.fingerprint, st.window_size, st.served, st.seen, st.litm) h),
       (select array_agg(to_jsonb(h) order by h.rank)
        from sift._staged_page(array[c], st.ks, %(q)s, %(e)s::vector, %(f)s, %(n)s, st.fingerprint,
                               st.window_size, st.served, st.seen, st.litm) h)
from sift.collections c
cross join lateral sift._page_start(array[c], %(k)s, 'search', %(q)s, %(e)s::vector, %(f)s, %(n)s, %(cursor)s) st
cross join lateral sift._plain_plan(c, st.ks[1], %(e)s::vector is not null) p
where c.name = 'pages'
"""


def test_a_plain_window_pages_as_every_stage_does(kb, db, figure):
    """One collection with only the common stages: search_page ranks its window with the plain
    path's statements (sift._plain_page). Page after page, its rows, cursors and ends equal
    those of every stage's own function (sift._staged_page) for the same request, and what
    search_page serves; the ends include both a full window and a pool the legs exhausted."""
    rng = np.random.default_rng(11)
    compared = 0
    ends: set[str] = set()
    for knobs in KNOB_SETS:
        plain = db.execute("select count(*) from sift._plain_plan((select c from sift.collections c "
                           "where c.name = 'pages'), sift._resolve_knobs((select c from sift.collections c "
                           "where c.name = 'pages'), %s), true)", [Jsonb(knobs)]).fetchone()[0]
        if "boost" in knobs or not plain:
            continue
        for shape, flt, sizes in itertools.product(("both", "text", "vector"), ({}, {"n": 3}), ([7], [100])):
            args = query_args(shape, rng)
            params = {"q": args.get("query_text", ""), "e": args.get("query_embedding"), "f": Jsonb(flt),
                      "k": Jsonb(knobs), "cursor": None}
            where = {"collection": "pages", "query_text": params["q"], "query_embedding": params["e"],
                     "filter": Jsonb(flt)}
            for i in itertools.count():
                params["n"] = sizes[0]
                got, want = db.execute(BOTH_PAGES, params).fetchone()
                assert got == want, (knobs, shape, flt, sizes, i)
                served = rows(db, "search_page", **where, page_size=sizes[0], cursor=params["cursor"], knobs=knobs)
                assert [h["chunk_id"] for h in served] == [h["chunk_id"] for h in sorted(
                    got or [], key=lambda h: h["position"])], (knobs, shape, flt, sizes, i)
                compared += 1
                tail = max(got or [], key=lambda h: h["rank"], default=None)
                if tail is None or tail["cursor"] is None:
                    ends.add(tail["cursor_end"] if tail else "empty")
                    break
                params["cursor"] = tail["cursor"]
                assert i < 100
    figure("pages of a plain window compared with every stage's functions", compared)
    assert compared > 100 and {"window", "exhausted"} <= ends


def test_the_same_request_said_another_way_continues(kb, db):
    vec = "[" + ",".join(["0.5"] * DIMS) + "]"
    base = {"collections": ["pages", "pages-b"], "query_text": "alpha", "query_embedding": vec}
    page = rows(db, "search_page", **base, page_size=4, knobs={"mmr_lambda": 0.5})
    cursor = max(page, key=lambda h: h["rank"])["cursor"]
    whole = rows(db, "search", **base, match_count=100, knobs={"mmr_lambda": 0.5})
    for same in ({"knobs": {"mmr_lambda": 0.50}}, {"knobs": {"mmr_lambda": 0.5, "rrf_k": 3}},
                 {"collections": ["pages-b", "pages"], "knobs": {"mmr_lambda": 0.5}}):
        nxt = rows(db, "search_page", **(base | same), page_size=4, cursor=cursor)
        assert [h["chunk_id"] for h in sorted(nxt, key=lambda h: h["rank"])] == [h["chunk_id"] for h in whole[4:8]]


FP = "0123456789abcdef" * 2   # a fingerprint's shape


def test_served_chunk_ids_travel_short_and_whole(db):
    rng = random.Random(5)
    for _ in range(40):
        ids = sorted(set(rng.sample(range(1, 10**12), rng.randrange(0, 30)) +
                         [x for lo in rng.sample(range(1, 10**6), 3) for x in range(lo, lo + rng.randrange(1, 50))]))
        runs = db.execute("select sift._seen_runs(%s::bigint[])", [ids]).fetchone()[0]
        cursor = db.execute("select sift._cursor_encode('search', %s, 100, 3, %s::bigint[])", [FP, ids]).fetchone()[0]
        back = db.execute("select seen from sift._cursor_decode(%s, 'search', %s)", [cursor, FP]).fetchone()[0]
        assert back == ids and len(runs) < 20 * (1 + len(ids))
    long = db.execute("select sift._cursor_encode('search', %s, 1000, 20000, "
                      "array(select generate_series(1000000, 1019999))::bigint[])", [FP]).fetchone()[0]
    assert len(long) < 200          # 20,000 consecutive ids: one run


def signature(db, body: str, tenant: str = "default") -> str:
    """What sift._cursor_mac computes, here from the key the test's superuser may read: no role
    of pgsift's can sign a payload it wrote itself."""
    key = bytes(db.execute("select key from sift.cursor_keys").fetchone()[0])
    inner = hashlib.sha256(key + f"{tenant}\n{body}".encode()).digest()
    return hashlib.sha256(key + inner).hexdigest()[:32]


def test_a_signed_cursor_is_still_checked(db):
    """What carries a valid signature is checked all the same when it is read."""
    def signed(payload: dict) -> str:
        body = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
        return body + "." + signature(db, body)

    good = {"v": 1, "k": "search", "f": "f", "w": 100, "n": 3, "s": "a+2"}
    assert db.execute("select seen from sift._cursor_decode(%s, 'search', 'f')",
                      [signed(good)]).fetchone()[0] == [10, 11, 12]
    for bad in ({"s": [1.5]}, {"s": "xyz"}, {"w": "x"}, {"w": None}, {"w": 5000}, {"n": -1},
                {"s": "f" * 16}, {"s": "1+fffff"}):
        with refused("SF012"), db.transaction():
            db.execute("select * from sift._cursor_decode(%s, 'search', 'f')", [signed(good | bad)])


def test_the_signer_signs_only_what_a_page_issues(db):
    for args in (("scroll", FP, 100, 3, [1, 2, 3]), ("search", "f", 100, 3, [1, 2, 3]),
                 ("search", FP.upper(), 100, 3, [1, 2, 3]), ("search", FP, 0, 3, [1, 2, 3]),
                 ("search", FP, 1001, 3, [1, 2, 3]), ("search", FP, 100, 0, [1, 2, 3]),
                 ("search", FP, 100, 4, [1, 2, 3]), ("search", FP, 100, 1, [0]), ("search", FP, 100, 1, [None]),
                 ("search", FP, 100, 1, None), (None, FP, 100, 1, [1])):
        with refused("SF012"), db.transaction():
            db.execute("select sift._cursor_encode(%s, %s, %s, %s, %s::bigint[])", list(args))
    # a text of the caller's is signed nowhere: the old signer is gone, the MAC is the owner's
    assert db.execute("select count(*) from pg_proc where proname = '_cursor_sign'").fetchone()[0] == 0


def test_a_reader_cannot_re_sign_an_edited_cursor_to_any_gain(kb, db, connect_as):
    """Issue 37: sift._cursor_sign was a security definer any reader could call with any
    payload, so an edited cursor, re-signed, was accepted. The signer now builds what it signs
    from fields it checks, and a page checks the rest against the request itself: a reader
    calling it directly gets a cursor for its own tenant that serves hits of the request's own
    window, never one twice, which real paging serves too."""
    db.execute("select sift.map_role('t_reader', 'default')")
    reader = connect_as("t_reader")
    vec = "[" + ",".join(["0.5"] * DIMS) + "]"
    base = {"collection": "pages", "query_text": "alpha", "query_embedding": vec, "knobs": Jsonb({"page_window": 20})}
    window = [h["chunk_id"] for h in rows(reader, "search", collection="pages", query_text="alpha",
                                          query_embedding=vec, match_count=20, knobs={"page_window": 20})]
    first = rows(reader, "search_page", **base, page_size=5)
    cursor = max(first, key=lambda h: h["rank"])["cursor"]
    body, mac = cursor.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    seen = reader.execute("select seen from sift._cursor_decode(%s, 'search', %s)",
                          [cursor, payload["f"]]).fetchone()[0]

    def resign(**changes) -> str:
        p = payload | changes
        return reader.execute("select sift._cursor_encode(%s, %s, %s, %s, %s::bigint[])",
                              [p["k"], p["f"], p["w"], p["n"], p.get("seen", seen)]).fetchone()[0]

    # the issue's way: sign the edited text itself
    edited = base64.urlsafe_b64encode(json.dumps(payload | {"w": 1000}).encode()).decode().rstrip("=")
    for call in (f"select sift._cursor_sign('{edited}')", f"select sift._cursor_mac('default', '{edited}')"):
        with refused("42883" if "_sign" in call else "42501"), reader.transaction():
            reader.execute(call)
    assert reader.execute("select sift._cursor_verify(%s, %s)", [body, mac]).fetchone()[0] is True
    assert reader.execute("select sift._cursor_verify(%s, %s)", [edited, mac]).fetchone()[0] is False
    # re-signed through the signer, the same as what the page issued; a window of its own choosing is
    # signed, and refused by the page (the request decides its window)
    assert resign() == cursor
    with refused("SF012"), reader.transaction():
        rows(reader, "search_page", **base, page_size=5, cursor=resign(w=1000))
    for changes in ({"f": "x"}, {"k": "scroll"}, {"n": 0}, {"seen": [-1]}):
        with refused("SF012"), reader.transaction():
            resign(**changes)
    with refused("42501"), reader.transaction():   # for another role's tenant
        reader.execute("select sift._cursor_encode('search', %s, 20, 1, array[1]::bigint[], 't_admin')", [FP])
    # what is left to edit: which hits count as served. Whatever the reader says, a page is the
    # next hits of the request's own window that it does not name, as a client dropping rows
    # would have them: nothing a real paging does not serve.
    for marked in ([], window[::2], [c for c in seen if c % 2], [10**12]):
        page = rows(reader, "search_page", **base, page_size=5, cursor=resign(n=1, seen=marked or [10**12]))
        got = [h["chunk_id"] for h in sorted(page, key=lambda h: h["rank"])]
        assert got == [c for c in window if c not in set(marked)][:5]
    # and what it signed is its tenant's only
    globex = Client(db, tenant="globex")
    globex.create_collection("pages", embedding_dims=DIMS)
    with pytest.raises(InvalidCursor, match="not issued to tenant"):
        globex.search_page("pages", "alpha", embedding=[0.5] * DIMS, page_size=5, cursor=resign(), page_window=20)


def test_window_and_exhausted_say_why_nothing_follows(kb, db):
    small = pages_of(db, {"collection": "pages", "query_text": "alpha"}, {"page_window": 5}, [2])
    assert [len(p) for p in small] == [2, 2, 1] and small[-1][0]["cursor_end"] == "window"
    # as many hits as the legs found: nothing more to rank, whatever the window
    found = len(rows(db, "search", collection="pages", query_text="golf", match_count=1000, knobs={"fetch_k": 1000}))
    exact = pages_of(db, {"collection": "pages", "query_text": "golf"}, {"page_window": found, "fetch_k": 1000}, [50])
    assert sum(map(len, exact)) == found and max(exact[-1], key=lambda h: h["rank"])["cursor_end"] == "exhausted"
    few = pages_of(db, {"collection": "pages", "query_text": "alpha", "filter": {"n": 3}}, {}, [4])
    assert few[-1][-1]["cursor_end"] == "exhausted" and sum(map(len, few)) == len(
        rows(db, "search", collection="pages", query_text="alpha", filter=Jsonb({"n": 3}), match_count=100))
    assert rows(db, "search_page", collection="pages", query_text="zulu", page_size=3) == []   # no match
    assert rows(db, "search_page", collection="pages", query_text="?!", page_size=3) == []


def test_writes_between_pages_never_repeat_or_skip_a_hit(kb, db, figure):
    rng = np.random.default_rng(11)
    query = {"collection": "pages", "query_text": "alpha bravo"}
    first = rows(db, "search_page", **query, page_size=10)
    served = {h["chunk_id"] for h in first}
    cursor = max(first, key=lambda h: h["rank"])["cursor"]
    # Meanwhile: new documents that match well, one served document and one not yet served deleted.
    kb.upsert_documents("pages", [Document(source_uri=f"late-{i}", chunks=[
        Chunk(content="alpha bravo alpha bravo", embedding=unit(rng.normal(size=DIMS)))]) for i in range(5)])
    whole_before = rows(db, "search", **query, match_count=100)
    unserved = next(h for h in whole_before if h["chunk_id"] not in served)
    kb.delete_document("pages", unserved["source_uri"])
    kb.delete_document("pages", first[0]["source_uri"])
    gone = {unserved["chunk_id"]}
    seen = list(served)
    while cursor:
        page = rows(db, "search_page", **query, page_size=7, cursor=cursor)
        seen += [h["chunk_id"] for h in page]
        cursor = max(page, key=lambda h: h["rank"], default={"cursor": None})["cursor"]
    assert len(seen) == len(set(seen))                                       # nothing twice
    now = {h["chunk_id"] for h in rows(db, "search", **query, match_count=100)}
    assert now - set(seen) == set()                                          # nothing of the window skipped
    assert not gone & set(seen[len(served):])                                # a deleted chunk is gone
    late = {r[0] for r in db.execute("select chunk_id from sift.chunks c join sift.documents d using "
                                     "(document_id) where d.source_uri like 'late-%'").fetchall()}
    assert late & set(seen[len(served):])                                    # what was written can appear
    figure("hits paged across concurrent writes, none twice, none of the window skipped", len(seen))


@contextlib.contextmanager
def refused(sqlstate: str):
    """The statement in the block fails with this SQLSTATE (pgsift's own codes have no class)."""
    with pytest.raises(psycopg.Error) as caught:
        yield
    assert caught.value.sqlstate == sqlstate, caught.value


def _flip(text: str, at: int) -> str:
    return text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1:]


def test_foreign_and_altered_cursors_are_refused(kb, db):
    vec = "[" + ",".join(["0.5"] * DIMS) + "]"
    base = {"collection": "pages", "query_text": "alpha", "query_embedding": vec}
    cursor = max(rows(db, "search_page", **base, page_size=3), key=lambda h: h["rank"])["cursor"]
    payload, mac = cursor.split(".")
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert decoded["k"] == "search" and decoded["w"] == 100 and "t" not in decoded   # no tenant name in it

    def forged(**changes) -> str:
        body = json.dumps(decoded | changes, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(body).decode().rstrip("=") + "." + mac

    bad = {
        "another question": (base | {"query_text": "bravo"}, cursor),
        "another vector": (base | {"query_embedding": "[" + ",".join(["0.4"] * DIMS) + "]"}, cursor),
        "another collection": (base | {"collection": "pages-b"}, cursor),
        "another filter": (base | {"filter": Jsonb({"n": 1})}, cursor),
        "other knobs": (base | {"knobs": Jsonb({"mmr_lambda": 0.5})}, cursor),
        "altered payload": (base, _flip(cursor, 5)),
        "altered signature": (base, cursor[:-1] + ("0" if cursor[-1] != "0" else "1")),
        "served list forged": (base, forged(s=[1, 1, 1])),
        "window forged": (base, forged(w=1000)),
        "another tenant claimed": (base, forged(t="globex")),
        "garbage": (base, "not a cursor"),
        "empty": (base, ""),
        "dots": (base, "...."),
        "huge": (base, "A" * 70000 + "." + "0" * 32),
        "not base64 json": (base, "AAAA." + mac),
    }
    for label, (args, c) in bad.items():
        with refused("SF012"), db.transaction():
            rows(db, "search_page", **args, page_size=3, cursor=c)
        assert label
    with refused("SF012"):   # a search cursor does not continue finalize
        rows(db, "finalize_page", collection="pages", chunk_ids=[1, 2, 3], cursor=cursor, query_text="alpha")
    ids = [r[0] for r in db.execute("select chunk_id from sift.chunks order by chunk_id limit 30").fetchall()]
    fcur = max(rows(db, "finalize_page", collection="pages", chunk_ids=ids, page_size=3, query_text="alpha",
                    query_embedding=vec, filter=Jsonb({})), key=lambda h: h["rank"])["cursor"]
    for other in ({"query_embedding": "[" + ",".join(["-0.5"] * DIMS) + "]"}, {"filter": Jsonb({"n": 1})}):
        with refused("SF012"), db.transaction():   # the pool's vector and filter are the request's too
            rows(db, "finalize_page", **({"collection": "pages", "chunk_ids": ids, "page_size": 3,
                                          "query_text": "alpha", "query_embedding": vec, "filter": Jsonb({})}
                                         | other), cursor=fcur)
    # The same request by another tenant: its own collection of the same name, its own key binding.
    globex = Client(db, tenant="globex")
    globex.create_collection("pages", embedding_dims=DIMS)
    globex.upsert_documents("pages", random_documents(np.random.default_rng(3), 5, DIMS, words=WORDS))
    with pytest.raises(InvalidCursor, match="not issued to tenant"):
        globex.search_page("pages", "alpha", embedding=[0.5] * DIMS, page_size=3, cursor=cursor)
    with pytest.raises(InvalidCursor):
        kb.search_page("pages", "bravo", embedding=[0.5] * DIMS, page_size=3, cursor=cursor)
    for size in (0, -1, 1001):
        with refused("SF003"):
            rows(db, "search_page", **base, page_size=size)


def test_the_client_pages_as_sql_does(kb, db):
    vec = unit(np.random.default_rng(5).normal(size=DIMS))
    knobs = {"per_document_cap": 1, "mmr_lambda": 0.6}
    whole = kb.search("pages", "alpha delta", embedding=vec, top_k=100, **knobs)
    got = []
    page = kb.search_page("pages", "alpha delta", embedding=vec, page_size=6, **knobs)
    while True:
        got += sorted(page.hits, key=lambda h: h.rank)
        if page.cursor is None:
            break
        page = kb.search_page("pages", "alpha delta", embedding=vec, page_size=6, cursor=page.cursor, **knobs)
    assert [h.chunk_id for h in got] == [h.chunk_id for h in whole]
    assert page.end == ("window" if len(whole) >= 100 else "exhausted")

    async def run() -> list[int]:
        async with await psycopg.AsyncConnection.connect(db.info.dsn, autocommit=True) as conn:
            client = AsyncClient(conn)
            out: list[int] = []
            cursor = None
            while True:
                p = await client.search_page("pages", "alpha delta", embedding=vec, page_size=9, cursor=cursor,
                                             **knobs)
                out += [h.chunk_id for h in sorted(p.hits, key=lambda h: h.rank)]
                if p.cursor is None:
                    return out
                cursor = p.cursor

    assert asyncio.run(run()) == [h.chunk_id for h in whole]
    with pytest.raises(InvalidCursor):
        kb.search_page("pages", "alpha delta", embedding=vec, page_size=6, cursor="x.y")


def _text_score(query, documents):
    return [0.9 if "golf" in d else 0.1 + 0.001 * len(d) for d in documents]


def test_reranked_pages_concatenate_to_the_reranked_window(kb, db, monkeypatch):
    import_providers("httpx")
    loopback_only(monkeypatch)
    rerankers.clear_reranker_cache()
    db.execute("select sift.allow_endpoint(url_prefix => 'http://127.0.0.1:')")
    with RerankServer(scorer=_text_score, limits={"max_documents": 32}) as server:
        kb.register_reranker("tei", "tei", base_url=server.base_url("tei"))
        kb.alter_collection("pages", reranker="tei", rerank=True, page_window=40)
        whole = kb.search("pages", "alpha golf", top_k=40, embedding=[0.3] * DIMS, rerank_top_n=40)
        assert whole.reranked
        got, page, calls, first_cursor = [], None, 0, None
        while page is None or page.cursor is not None:
            page = kb.search_page("pages", "alpha golf", embedding=[0.3] * DIMS, page_size=15,
                                  cursor=None if page is None else page.cursor, rerank_top_n=40)
            calls += 1
            first_cursor = first_cursor or page.cursor
            assert page.reranked and page.rerank.requests == 2          # 40 candidates, 32 a request
            got += sorted(page.hits, key=lambda h: h.rank)
        assert [h.chunk_id for h in got] == [h.chunk_id for h in whole]
        assert all(h.rerank_score is not None for h in got) and calls == 3 and page.end == "window"
        assert first_cursor is not None
        with refused("SF012"):   # a reranked page's cursor is finalize_page's
            rows(db, "search_page", collection="pages", query_text="alpha golf", page_size=3, cursor=first_cursor)
    rerankers.clear_reranker_cache()


def test_a_later_page_that_falls_back_never_repeats_a_hit(kb, db, monkeypatch):
    import_providers("httpx")
    loopback_only(monkeypatch)
    rerankers.clear_reranker_cache()
    db.execute("select sift.allow_endpoint(url_prefix => 'http://127.0.0.1:')")
    with RerankServer(scorer=_text_score, fault="500", fail_after=1) as server:
        kb.register_reranker("tei", "tei", base_url=server.base_url("tei"), max_attempts=1)
        kb.alter_collection("pages", reranker="tei", rerank=True, page_window=30)
        window = {h.chunk_id for h in kb.search("pages", "alpha golf", top_k=30, embedding=[0.3] * DIMS,
                                                rerank=False)}
        pages = [kb.search_page("pages", "alpha golf", embedding=[0.3] * DIMS, page_size=12)]
        while pages[-1].cursor is not None:
            pages.append(kb.search_page("pages", "alpha golf", embedding=[0.3] * DIMS, page_size=12,
                                        cursor=pages[-1].cursor))
    served = [h.chunk_id for p in pages for h in p]
    assert pages[0].reranked and not pages[1].reranked and pages[1].rerank.fault == "server_error"
    assert len(served) == len(set(served)) and set(served) == window      # once each, the same window
    assert [len(p) for p in pages] == [12, 12, 6] and pages[-1].end == "window"
    rerankers.clear_reranker_cache()
