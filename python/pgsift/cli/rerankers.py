"""`pgsift reranker add|list|test|spend|drop`: the tenant's rerankers from the command line.

`add` registers (or replaces) one (sift.register_reranker), `list` shows them with whether a
search can use each and why not, `test` scores three passages with an obvious order through the
provider (pgsift.rerankers.test_connection) and exits 1 when that fails, `spend` sums what
reranking cost at the operator's prices (sift.rerank_spend), `drop` deletes one.
A key is never given here: a reranker names a secret_ref, which the operator maps to where the
key is kept (sift.map_secret); the command line reads keys kept in environment variables
("env:NAME").
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Any

from psycopg.rows import dict_row

from .. import queries as q
from ..client import Client
from ..models import RerankerConfig
from ..rerankers import EndpointRefused, RerankerUnavailable, build_reranker, test_connection
from ..rerankers.engine import PROBE_ORDER
from . import common
from .common import add_command, dump, table

CONFIG_FIELDS = {f.name for f in dataclasses.fields(RerankerConfig)}


def list_rerankers(client: Client) -> list[dict[str, Any]]:
    """The client's tenant's rerankers (queries.LIST_RERANKERS), each with `usable`, `why_not`
    (why a search cannot use it: refused by the operator's rules, or its secret_ref not
    mapped) and `key` (where its key is kept, and whether this process can read it)."""
    with client.transaction() as conn:
        rows = conn.cursor(row_factory=dict_row).execute(q.LIST_RERANKERS, prepare=False).fetchall()
    for row in rows:
        row["why_not"] = row["refused"] or _unmapped(row)
        row["usable"] = row["why_not"] is None
        row["key"] = _key_state(row)
    return rows


def _unmapped(row: dict[str, Any]) -> str | None:
    if row["secret_ref"] and not row["secret_source"]:
        return (f"secret_ref {row['secret_ref']!r} is not mapped to a key: the operator maps it with "
                f"sift.map_secret({row['tenant']!r}, {row['secret_ref']!r}, 'env:VARIABLE', "
                f"provider => {row['provider']!r})")
    return None


def _key_state(row: dict[str, Any]) -> str:
    """Where the key is kept, as this process sees it (searches run elsewhere may differ)."""
    source = row["secret_source"]
    if not row["secret_ref"]:
        return "none needed"
    if not source:
        return "not mapped"
    scheme, _, where = source.partition(":")
    if scheme != "env":
        return f"{source} (read by the application's resolver)"
    return f"{source} ({'set' if os.environ.get(where) else 'not set here'})"


def _find(client: Client, alias: str) -> dict[str, Any] | None:
    return next((r for r in list_rerankers(client) if r["alias"] == alias), None)


def config_of(row: dict[str, Any]) -> RerankerConfig:
    """A listed reranker as the config a search would get for it by name."""
    return RerankerConfig(**{k: v for k, v in row.items() if k in CONFIG_FIELDS}, chosen_by="named")


def _not_found(alias: str, args: argparse.Namespace) -> int:
    tenant = getattr(args, "tenant", None)
    print(f"error: no reranker {alias!r} is registered for " + (f"tenant {tenant!r}" if tenant else "this tenant")
          + " (`pgsift reranker list` shows them)", file=sys.stderr)
    return 1


def cmd_add(args: argparse.Namespace) -> int:
    settings = {"model": args.model, "base_url": args.base_url, "secret_ref": args.secret_ref,
                "timeout_ms": args.timeout_ms, "deadline_ms": args.deadline_ms,
                "max_attempts": args.max_attempts, "context_chars": args.context_chars,
                "is_default": True if args.default else None}
    with common.connect(args) as conn:
        client = common.client_for(conn, args)
        saved = client.register_reranker(args.alias, args.provider, **settings)
        row = _find(client, args.alias)
    print(f"registered {saved['alias']}: {saved['provider']} {saved['model'] or ''}".rstrip()
          + (f" at {saved['base_url']}" if saved["base_url"] else "")
          + (" (the tenant's default)" if saved["is_default"] else ""))
    if row is not None and not row["usable"]:
        print(f"note: searches cannot use it yet: {row['why_not']}", file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with common.connect(args) as conn:
        rows = list_rerankers(common.client_for(conn, args))
    if args.json:
        dump(rows)
        return 0
    print(table([(r["alias"], r["provider"], r["model"], r["base_url"] or "(provider's)", r["secret_ref"] or "",
                  r["key"], "yes" if r["is_default"] else "", "yes" if r["usable"] else "no", r["why_not"] or "")
                 for r in rows],
                ["alias", "provider", "model", "base_url", "secret_ref", "key", "default", "usable", "why not"]))
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    with common.connect(args) as conn:
        row = _find(common.client_for(conn, args), args.alias)
    if row is None:
        return _not_found(args.alias, args)
    config = config_of(row)
    where = f"{config.provider} {config.model or ''}".rstrip() + (f" at {config.base_url}" if config.base_url else "")
    if row["why_not"]:
        print(f"error: {args.alias} ({where}) cannot be used: {row['why_not']}", file=sys.stderr)
        return 1
    try:
        reranker = build_reranker(config)
    except (RerankerUnavailable, EndpointRefused) as exc:
        hint = ""
        if config.secret_source and not config.secret_source.startswith("env:"):
            hint = " (the command line reads keys kept in environment variables only)"
        print(f"error: {args.alias} ({where}): {exc.fault}: {exc}{hint}", file=sys.stderr)
        return 1
    check = test_connection(reranker, timeout_s=args.timeout_s)
    if args.json:
        dump({"alias": args.alias, **dataclasses.asdict(check)})
    else:
        print(f"reranker: {args.alias} ({where})")
        print(f"ok: {'yes' if check.ok else 'no'}")
        print(f"order_ok: {'yes' if check.order_ok else 'no'}"
              + (f" ({' > '.join(check.order)})" if check.order else ""))
        print(f"latency_ms: {check.latency_ms:.1f}")
        for name, value in (("min_score", check.min_score), ("max_score", check.max_score)):
            print(f"{name}: {'-' if value is None else format(value, '.4f')}")
    if not check.ok:
        hint = ""
        if "HTTP 401" in (check.error or "") or "HTTP 403" in (check.error or ""):
            hint = (f" (the provider refused the key: check the one kept at {config.secret_source})"
                    if config.secret_source else " (the provider wants a key: register it with --secret-ref)")
        print(f"error: {args.alias} ({where}) failed: {check.error}{hint}", file=sys.stderr)
        return 1
    if not check.order_ok:
        print(f"error: {args.alias} ({where}) answered, but ranked three passages of an obvious order as "
              f"{' > '.join(check.order)} (expected {' > '.join(PROBE_ORDER)}): is the model a reranker, "
              "and the endpoint its rerank endpoint?", file=sys.stderr)
        return 1
    return 0


def cmd_drop(args: argparse.Namespace) -> int:
    with common.connect(args) as conn:
        dropped = common.client_for(conn, args).drop_reranker(args.alias)
    if not dropped:
        return _not_found(args.alias, args)
    print(f"dropped {args.alias} (collections that named it no longer rerank)")
    return 0


def _spend_tenants(args: argparse.Namespace) -> list[str] | None:
    """Whose spend: those named with --tenant-of, else the tenant the command acts for (--tenant),
    else every tenant the connection may see (row-level security: a tenant's role, its own)."""
    tenant = getattr(args, "tenant", None)
    return list(args.tenants) if args.tenants else ([tenant] if tenant else None)


def cmd_spend(args: argparse.Namespace) -> int:
    """What reranking cost (sift.rerank_spend): the tenant's own, or the operator's over every
    tenant; a group without a price says so (its cost is unknown, never 0)."""
    with common.connect(args) as conn:
        client = common.client_for(conn, args)
        with client.transaction() as tx:
            rows = tx.cursor(row_factory=dict_row).execute(
                q.RERANK_SPEND, {"since": args.since, "until": args.until, "tenants": _spend_tenants(args)},
                prepare=False).fetchall()
    if args.json:
        dump(rows)
        return 0
    print(table([(r["tenant"], r["provider"], r["model"], r["calls"], r["tokens"], r["search_units"],
                  "unpriced" if r["cost"] is None else f"{r['cost']:.4f} {r['currency']}", r["unpriced_calls"])
                 for r in rows],
                ["tenant", "provider", "model", "calls", "tokens", "search units", "cost", "unpriced calls"]))
    if any(r["cost"] is None for r in rows):
        print("unpriced: no price in sift.rerank_prices was in effect for those calls (the operator sets one, "
              "then sift.reprice_rerank_usage prices them)")
    return 0


def register(sub: Any) -> None:
    """Add `pgsift reranker` and its verbs to pgsift's subcommands."""
    top = add_command(sub, "reranker", "the tenant's rerankers: add, list, test, spend, drop",
                      description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = top.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = add_command(verbs, "add", "register a reranker (or replace every setting of one) under an alias")
    p.add_argument("alias", help="the name collections and searches use for it")
    p.add_argument("provider", help="voyage, cohere or tei (sift.reranker_providers)")
    p.add_argument("--model", help="the provider's model (default: the provider's default)")
    p.add_argument("--base-url", metavar="URL",
                   help="an endpoint the operator allowed (sift.allow_endpoint); default: the provider's own "
                        "(tei has none)")
    p.add_argument("--secret-ref", metavar="NAME",
                   help="the name the operator maps to this tenant's key (sift.map_secret), never the key "
                        "(needed by voyage and cohere)")
    p.add_argument("--timeout-ms", type=int, metavar="MS", help="per HTTP attempt (default 2000)")
    p.add_argument("--deadline-ms", type=int, metavar="MS", help="a search's whole rerank (default 3000)")
    p.add_argument("--max-attempts", type=int, metavar="N", help="attempts per request (default 2)")
    p.add_argument("--context-chars", type=int, metavar="N",
                   help="characters of conversation sent before the query (default 1500)")
    p.add_argument("--default", action="store_true",
                   help="make it the tenant's default (it scores searches over collections naming different "
                        "rerankers)")
    p.set_defaults(func=cmd_add)

    p = add_command(verbs, "list", "the tenant's rerankers, whether searches can use each and why not")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=cmd_list)

    p = add_command(verbs, "test", "score three passages with an obvious order through the reranker: ok, "
                                   "order, latency and score range; exit 1 when it fails")
    p.add_argument("alias", help="the reranker to test")
    p.add_argument("--timeout-s", type=float, default=10.0,
                   help="seconds the call may take (default 10; one attempt)")
    p.add_argument("--json", action="store_true", help="print the check as JSON")
    p.set_defaults(func=cmd_test)

    p = add_command(verbs, "spend", "what reranking cost, per tenant, provider, model and currency, at the "
                                    "operator's prices (sift.rerank_spend)")
    p.add_argument("--since", default="-infinity", metavar="TIME", help="from this time on (default: all)")
    p.add_argument("--until", default="infinity", metavar="TIME", help="before this time (default: now on)")
    p.add_argument("--tenant-of", dest="tenants", action="append", metavar="TENANT",
                   help="only this tenant's (repeatable; default: --tenant's, else every tenant the "
                        "connection sees: a tenant's role sees only its own)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=cmd_spend)

    p = add_command(verbs, "drop", "delete a reranker (the collections that named it stop reranking)")
    p.add_argument("alias", help="the reranker to delete")
    p.set_defaults(func=cmd_drop)
