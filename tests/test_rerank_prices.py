"""Rerank metering with a price (issue 36, item 7): sift.rerank_prices, the operator's table;
each usage row priced when written at the price in effect at its time (sift.rerank_cost, the
table's trigger), kept until the operator reprices; sift.rerank_spend sums it per tenant,
provider, model and currency, and usage without a price is unpriced (null), never 0.

Expected costs come from an oracle written here with Decimal (the price in effect, then
tokens / 1e6 x rate + search units x rate), not from constants worked out by hand."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from pgsift import Client
from psycopg.rows import dict_row

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
ROLES = ("t_reader", "t_writer", "t_admin")


def price(db: psycopg.Connection[Any], provider: str, model: str, effective_from: Any,
          per_million: Any = None, per_unit: Any = None, currency: str = "USD") -> int:
    return db.execute("insert into sift.rerank_prices (provider, model, effective_from, price_per_million_tokens, "
                      "price_per_search_unit, currency) values (%s, %s, %s, %s, %s, %s) returning price_id",
                      [provider, model, effective_from, per_million, per_unit, currency]).fetchone()[0]


def usage(db: psycopg.Connection[Any], tenant: str, provider: str, model: str, at: datetime,
          tokens: int | None = None, search_units: float | None = None, ok: bool = True) -> int:
    """A usage row at a given time, as the operator writes it (the trigger prices it)."""
    return db.execute(
        "insert into sift.rerank_usage (tenant, provider, model, documents, tokens, search_units, latency_ms, "
        "ok, billed, error, created_at) values (%s, %s, %s, 3, %s, %s, 10, %s, %s, %s, %s) returning usage_id",
        [tenant, provider, model, tokens, search_units, ok, ok, None if ok else "timeout", at]).fetchone()[0]


def row(db: psycopg.Connection[Any], usage_id: int) -> tuple[Any, ...]:
    return db.execute("select price_id, cost, currency from sift.rerank_usage where usage_id = %s",
                      [usage_id]).fetchone()


def oracle(prices: list[dict[str, Any]], provider: str, model: str, at: datetime, tokens: int | None,
           search_units: float | None, billed: bool = True) -> tuple[Any, Decimal | None, str | None]:
    """(price_id, cost, currency): the model's own price in effect at `at`, else the provider's '*'."""
    def in_effect(m: str) -> dict[str, Any] | None:
        rows = [p for p in prices if p["provider"] == provider and p["model"] == m and p["from"] <= at]
        return max(rows, key=lambda p: p["from"]) if rows else None

    p = in_effect(model) or in_effect("*")
    if p is None:
        return None, None, None
    if not billed:
        return p["id"], Decimal(0), p["currency"]
    cost: Decimal | None = Decimal(0)
    for rate, units, scale in ((p["per_million"], tokens, Decimal(1_000_000)), (p["per_unit"], search_units, 1)):
        if rate is None or rate == 0:
            continue
        cost = None if units is None or cost is None else cost + Decimal(units) * rate / scale
    return p["id"], cost, p["currency"] if cost is not None else None


def test_usage_is_priced_by_tokens_and_search_units(db):
    client = Client(db, tenant="acme")
    price(db, "voyage", "*", T0, per_million=Decimal("0.05"))
    price(db, "cohere", "*", T0, per_unit=Decimal("0.002"))
    with client.transaction() as conn:
        voyage = conn.execute("select sift.record_rerank_usage('v', 'voyage', 'rerank-2', 10, 12.5, true, "
                              "tokens => 12345)").fetchone()[0]
        # Cohere reports input tokens as well; its price is per search unit only.
        cohere = conn.execute("select sift.record_rerank_usage('c', 'cohere', 'rerank-v3.5', 10, 12.5, true, "
                              "tokens => 999, search_units => 3)").fetchone()[0]
    assert row(db, voyage)[1:] == (Decimal("12345") * Decimal("0.05") / 1_000_000, "USD")
    assert row(db, cohere)[1:] == (Decimal("0.006"), "USD")


def test_the_price_in_effect_at_the_rows_time_on_random_histories(db):
    """Prices of a model and of its provider's '*' changing over a year; usage rows at random
    times: every stored cost is the oracle's."""
    rng = random.Random(20250601)
    prices: list[dict[str, Any]] = []
    for provider, model in (("voyage", "rerank-2"), ("voyage", "*"), ("cohere", "*"), ("tei", "bge")):
        for _ in range(rng.randint(1, 4)):
            start = T0 + timedelta(days=rng.randint(0, 365), seconds=rng.randint(0, 86399))
            if any(p["provider"] == provider and p["model"] == model and p["from"] == start for p in prices):
                continue
            per_million = Decimal(rng.randint(0, 500)) / 1000 if rng.random() < 0.8 else None
            per_unit = Decimal(rng.randint(1, 50)) / 10000 if per_million is None or rng.random() < 0.3 else None
            currency = rng.choice(["USD", "EUR"])
            pid = price(db, provider, model, start, per_million, per_unit, currency)
            prices.append({"id": pid, "provider": provider, "model": model, "from": start,
                           "per_million": per_million, "per_unit": per_unit, "currency": currency})
    checked = priced = 0
    for _ in range(300):
        provider, model = rng.choice([("voyage", "rerank-2"), ("voyage", "rerank-2.5"), ("cohere", "rerank-v3.5"),
                                      ("tei", "bge"), ("tei", "other")])
        at = T0 + timedelta(days=rng.randint(-30, 400), seconds=rng.randint(0, 86399))
        tokens = rng.choice([None, rng.randint(0, 10**7)])
        units = rng.choice([None, float(rng.randint(0, 20))])
        ok = rng.random() < 0.9
        uid = usage(db, "acme", provider, model, at, tokens if ok else None, units if ok else None, ok)
        expected = oracle(prices, provider, model, at, tokens if ok else None, units if ok else None, ok)
        assert row(db, uid) == expected, (provider, model, at, tokens, units, ok)
        checked += 1
        priced += expected[1] is not None
    assert checked == 300 and 50 < priced < 300   # both kinds met


def test_the_models_price_wins_and_the_providers_holds_until_it_starts(db):
    star = price(db, "voyage", "*", T0, per_million=1)
    own = price(db, "voyage", "rerank-2", T0 + timedelta(days=10), per_million=2)
    before = usage(db, "acme", "voyage", "rerank-2", T0 + timedelta(days=5), tokens=1_000_000)
    after = usage(db, "acme", "voyage", "rerank-2", T0 + timedelta(days=15), tokens=1_000_000)
    other = usage(db, "acme", "voyage", "rerank-lite-1", T0 + timedelta(days=15), tokens=1_000_000)
    assert row(db, before) == (star, 1, "USD")
    assert row(db, after) == (own, 2, "USD")
    assert row(db, other) == (star, 1, "USD")


def test_unpriced_usage_is_null_never_zero(db):
    price(db, "voyage", "*", T0, per_million=Decimal("0.05"))
    price(db, "tei", "free", T0, per_million=0)
    early = usage(db, "acme", "voyage", "rerank-2", T0 - timedelta(seconds=1), tokens=100)     # before any price
    cohere = usage(db, "acme", "cohere", "rerank-v3.5", T0, search_units=1)                   # no price at all
    no_tokens = usage(db, "acme", "voyage", "rerank-2", T0, tokens=None)                       # a unit not reported
    free = usage(db, "acme", "tei", "free", T0, tokens=None)                                   # a rate of 0: 0 anyway
    failed = usage(db, "acme", "voyage", "rerank-2", T0, ok=False)                             # not billed: 0
    failed_unpriced = usage(db, "acme", "cohere", "rerank-v3.5", T0, ok=False)
    assert row(db, early) == (None, None, None)
    assert row(db, cohere) == (None, None, None)
    assert row(db, no_tokens)[1:] == (None, None) and row(db, no_tokens)[0] is not None
    assert row(db, free)[1:] == (0, "USD")
    assert row(db, failed)[1:] == (0, "USD")
    assert row(db, failed_unpriced) == (None, None, None)
    spend = db.execute("select provider, model, currency, calls, cost, unpriced_calls from sift.rerank_spend() "
                       "order by provider, model, currency").fetchall()
    assert spend == [("cohere", "rerank-v3.5", None, 1, None, 1),
                     ("tei", "free", "USD", 1, 0, 0),
                     ("voyage", "rerank-2", None, 2, None, 2)]


def test_a_stored_cost_is_kept_until_the_operator_reprices(db):
    pid = price(db, "voyage", "*", T0, per_million=1)
    uid = usage(db, "acme", "voyage", "rerank-2", T0 + timedelta(days=1), tokens=500_000)
    early = usage(db, "globex", "voyage", "rerank-2", T0 - timedelta(days=1), tokens=500_000)
    assert row(db, uid) == (pid, Decimal("0.5"), "USD") and row(db, early) == (None, None, None)
    # A late fix: the rate was wrong, and the price was in effect earlier than entered.
    db.execute("update sift.rerank_prices set price_per_million_tokens = 3, effective_from = %s "
               "where price_id = %s", [T0 - timedelta(days=30), pid])
    assert row(db, uid) == (pid, Decimal("0.5"), "USD")   # frozen: a bill sent does not change by itself
    assert db.execute("select sift.reprice_rerank_usage(%s, tenants => array['acme'])",
                      [T0]).fetchone()[0] == 1
    assert row(db, uid) == (pid, Decimal("1.5"), "USD") and row(db, early) == (None, None, None)
    assert db.execute("select sift.reprice_rerank_usage('-infinity')").fetchone()[0] == 1
    assert row(db, early) == (pid, Decimal("1.5"), "USD")
    assert db.execute("select sift.reprice_rerank_usage('-infinity')").fetchone()[0] == 0   # nothing left to change
    # A price that priced rows stays (update it and reprice); one that priced none may go.
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        db.execute("delete from sift.rerank_prices where price_id = %s", [pid])
    spare = price(db, "cohere", "*", T0, per_unit=1)
    db.execute("delete from sift.rerank_prices where price_id = %s", [spare])


def test_rerank_spend_sums_by_tenant_provider_model_and_currency(db):
    price(db, "voyage", "*", T0, per_million=Decimal("0.05"))
    price(db, "voyage", "*", T0 + timedelta(days=20), per_million=Decimal("0.04"), currency="EUR")
    price(db, "cohere", "*", T0, per_unit=Decimal("0.002"))
    rng = random.Random(7)
    rows = []
    for _ in range(200):
        tenant = rng.choice(["acme", "globex"])
        provider, model = rng.choice([("voyage", "rerank-2"), ("cohere", "rerank-v3.5"), ("tei", "bge")])
        at = T0 + timedelta(days=rng.randint(-5, 40), hours=rng.randint(0, 23))
        tokens, units = rng.randint(0, 10**6), float(rng.randint(1, 5))
        ok = rng.random() < 0.9
        usage(db, tenant, provider, model, at, tokens, units, ok)
        rows.append((tenant, provider, model, at, tokens, units, ok))
    since, until = T0 + timedelta(days=1), T0 + timedelta(days=30)
    stored = {r[0]: r[1:] for r in db.execute("select usage_id, tenant, provider, model, created_at, tokens, "
                                               "search_units, cost, currency, billed from sift.rerank_usage")}
    expected: dict[tuple[Any, ...], list[Any]] = {}
    for tenant, provider, model, at, tokens, units, cost, currency, billed in stored.values():
        if not billed or not since <= at < until:
            continue
        key = (tenant, provider, model, currency)
        acc = expected.setdefault(key, [0, 0, 0.0, Decimal(0), 0])
        acc[0] += 1
        acc[1] += tokens
        acc[2] += units
        acc[3] = None if cost is None or acc[3] is None else acc[3] + cost
        acc[4] += cost is None
    got = db.execute("select tenant, provider, model, currency, calls, tokens, search_units, cost, unpriced_calls "
                     "from sift.rerank_spend(%s, %s)", [since, until]).fetchall()
    assert [r[:4] for r in got] == sorted(expected, key=lambda k: (k[0], k[1], k[2], k[3] is None, k[3] or ""))
    for r in got:
        calls, tokens, units, cost, unpriced = expected[r[:4]]
        assert r[4:] == (calls, tokens, pytest.approx(units), cost, unpriced)
        assert (r[3] is None) == (r[7] is None) == (r[8] == r[4])   # a group is priced or unpriced throughout
    assert {r[3] for r in got} == {"USD", "EUR", None}
    only = db.execute("select distinct tenant from sift.rerank_spend(%s, %s, tenants => array['globex'])",
                      [since, until]).fetchall()
    assert only == [("globex",)]


def test_prices_are_checked(db):
    bad = [
        ("provider", "insert into sift.rerank_prices (provider, model, effective_from, price_per_million_tokens, "
                     "currency) values ('nobody', '*', now(), 1, 'USD')", "23503"),
        ("negative", "insert into sift.rerank_prices (provider, model, effective_from, price_per_million_tokens, "
                     "currency) values ('voyage', '*', now(), -1, 'USD')", "23514"),
        ("NaN", "insert into sift.rerank_prices (provider, model, effective_from, price_per_search_unit, "
                "currency) values ('voyage', '*', now(), 'NaN', 'USD')", "23514"),
        ("Infinity", "insert into sift.rerank_prices (provider, model, effective_from, price_per_search_unit, "
                     "currency) values ('voyage', '*', now(), 'Infinity', 'USD')", "23514"),
        ("no rate", "insert into sift.rerank_prices (provider, model, effective_from, currency) "
                    "values ('voyage', '*', now(), 'USD')", "23514"),
        ("currency", "insert into sift.rerank_prices (provider, model, effective_from, price_per_million_tokens, "
                     "currency) values ('voyage', '*', now(), 1, 'dollars')", "23514"),
        ("model", "insert into sift.rerank_prices (provider, model, effective_from, price_per_million_tokens, "
                  "currency) values ('voyage', ' ', now(), 1, 'USD')", "23514"),
        ("never", "insert into sift.rerank_prices (provider, model, effective_from, price_per_million_tokens, "
                  "currency) values ('voyage', '*', 'infinity', 1, 'USD')", "23514"),
        ("no date", "insert into sift.rerank_prices (provider, model, price_per_million_tokens, currency) "
                    "values ('voyage', '*', 1, 'USD')", "23502"),
    ]
    for label, statement, code in bad:
        with pytest.raises(psycopg.Error) as info:
            db.execute(statement)
        assert info.value.sqlstate == code, (label, info.value)
    price(db, "voyage", "*", "-infinity", per_million=1)
    with pytest.raises(psycopg.errors.UniqueViolation):
        price(db, "voyage", "*", "-infinity", per_million=2)
    # A usage row's cost and currency come together.
    uid = usage(db, "acme", "voyage", "m", T0, tokens=1)
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("update sift.rerank_usage set currency = null where usage_id = %s", [uid])


# -- trust: tenants read prices and their own spend, and write neither ------------------------

@pytest.fixture
def metered(db):
    """Prices; acme and globex each with priced usage; login roles of each kind mapped to acme."""
    price(db, "tei", "*", T0, per_million=10)
    for tenant, tokens in (("acme", 100_000), ("globex", 700_000)):
        with Client(db, tenant=tenant).transaction() as conn:
            conn.execute("select sift.record_rerank_usage('rr', 'tei', 'tei', 3, 12.5, true, tokens => %s)",
                         [tokens])
    for role in ROLES:
        db.execute("select sift.map_role(%s, 'acme')", [role])
    return db


def test_a_tenant_reads_prices_but_cannot_write_them(metered, connect_as):
    before = metered.execute("select * from sift.rerank_prices order by price_id").fetchall()
    for role in (*ROLES, "t_gateway"):
        conn = connect_as(role)
        with conn.transaction():
            if role == "t_gateway":
                conn.execute("select sift.set_tenant('acme')")
            assert conn.execute("select count(*) from sift.rerank_prices").fetchone()[0] == 1
        for statement in (
                "insert into sift.rerank_prices (provider, model, effective_from, price_per_million_tokens, "
                "currency) values ('tei', 'tei', '-infinity', 0, 'USD')",
                "update sift.rerank_prices set price_per_million_tokens = 0",
                "delete from sift.rerank_prices",
                "truncate sift.rerank_prices",
                "select sift.reprice_rerank_usage('-infinity')",
                "update sift.rerank_usage set cost = 0"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                if role == "t_gateway":
                    conn.execute("select sift.set_tenant('acme')")
                conn.execute(statement)
    assert metered.execute("select * from sift.rerank_prices order by price_id").fetchall() == before


def test_a_tenant_cannot_forge_its_cost(metered, connect_as):
    reader = connect_as("t_reader")
    uid = reader.execute("insert into sift.rerank_usage (tenant, provider, model, documents, tokens, latency_ms, ok, "
                         "billed, cost, currency, price_id) values ('acme', 'tei', 'tei', 1, 300000, 1, true, true, "
                         "0, 'XXX', null) returning usage_id").fetchone()[0]
    assert row(metered, uid)[1:] == (Decimal(3), "USD")
    # Backdated before every price: unpriced, not free.
    uid = reader.execute("insert into sift.rerank_usage (tenant, provider, model, documents, tokens, latency_ms, ok, "
                         "billed, cost, currency, created_at) values ('acme', 'tei', 'tei', 1, 300000, 1, true, true, "
                         "0, 'USD', '2000-01-01') returning usage_id").fetchone()[0]
    assert row(metered, uid) == (None, None, None)


def test_a_tenant_sums_only_its_own_spend(metered, connect_as):
    everyone = metered.execute("select tenant, cost from sift.rerank_spend()").fetchall()
    assert everyone == [("acme", Decimal(1)), ("globex", Decimal(7))]   # the operator: every tenant
    for role in (*ROLES, "t_gateway"):
        conn = connect_as(role)
        with conn.transaction():
            if role == "t_gateway":
                conn.execute("select sift.set_tenant('acme')")
            cur = conn.cursor(row_factory=dict_row)
            mine = cur.execute("select * from sift.rerank_spend()").fetchall()
            assert [(r["tenant"], r["cost"], r["calls"]) for r in mine] == [("acme", Decimal(1), 1)], role
            # Another tenant's name in every argument: nothing of theirs.
            assert cur.execute("select * from sift.rerank_spend('-infinity', 'infinity', array['globex'])"
                               ).fetchall() == [], role
            assert cur.execute("select * from sift.rerank_spend(tenants => array['globex', 'acme'])"
                               ).fetchall() == mine, role
            assert cur.execute("select * from sift.rerank_usage where tenant = 'globex'").fetchall() == []
            # The price of a call is no secret, and no tenant's.
            assert cur.execute("select cost, currency from sift.rerank_cost('tei', 'globex', 1000000)"
                               ).fetchone() == {"cost": Decimal(10), "currency": "USD"}
