"""From a row of sift.reranker_for to a working reranker: the provider's implementation,
its key from where the operator keeps it, built once per setting and key.

The list of providers is SQL's (sift.reranker_providers, which the CHECKs and
sift.register_reranker read); IMPLEMENTATIONS is the Python class of each, and
a test holds the two equal.
"""

from __future__ import annotations

import hashlib
import os
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..models import RerankerConfig
from .base import DEFAULT_ATTEMPT_TIMEOUT_S, EndpointRefused, Reranker, RerankerUnavailable
from .cohere import CohereReranker
from .tei import TEIReranker
from .voyage import VoyageReranker

IMPLEMENTATIONS: dict[str, type[Any]] = {
    "voyage": VoyageReranker,
    "cohere": CohereReranker,
    "tei": TEIReranker,
}

# The application's resolver for keys the operator keeps outside environment variables:
# it gets the operator's reference (sift.secret_mappings.source, e.g. "vault:kv/acme/voyage").
SecretResolver = Callable[[str], "str | None"]


def resolve_secret(config: RerankerConfig, resolver: SecretResolver | None = None) -> str | None:
    """The key of a reranker, from where the operator mapped this tenant's secret_ref: an
    environment variable ("env:NAME") or the application's resolver (other schemes). A
    tenant never names a variable of this process itself."""
    if not config.secret_ref:
        return None
    source = config.secret_source
    if not source:
        raise RerankerUnavailable(
            f"secret_ref {config.secret_ref!r} of tenant {config.tenant!r} is not mapped to a key: the "
            f"operator maps it with sift.map_secret({config.tenant!r}, {config.secret_ref!r}, 'env:VARIABLE', "
            f"provider => {config.provider!r})")
    scheme, _, where = source.partition(":")
    try:
        if scheme == "env":
            key = os.environ.get(where)
        elif resolver is not None:
            key = resolver(source)
        else:
            raise RerankerUnavailable(f"the key of reranker {config.alias!r} is kept at a {scheme}: reference; "
                                      "pass a resolver (Client(..., secrets=...)) that reads it")
    except RerankerUnavailable:
        raise
    except Exception as exc:  # a resolver's failure is this reranker's, not the search's
        raise RerankerUnavailable(f"resolving the key of reranker {config.alias!r} failed: "
                                  f"{type(exc).__name__}") from exc
    if key is not None and not isinstance(key, str):
        raise RerankerUnavailable(f"the resolver gave the key of reranker {config.alias!r} as a "
                                  f"{type(key).__name__}, which is not a string")
    if not key:
        raise RerankerUnavailable(f"the key of reranker {config.alias!r} is not set "
                                  f"(the operator keeps it at {source})")
    return key


def check_endpoint(base_url: str | None) -> None:
    """Refuse a base_url whose requests would go somewhere other than it seems to say: user
    information before the host ("http://127.0.0.1:1@elsewhere/" calls elsewhere, yet an
    allow-list prefix "http://127.0.0.1:" matches it), a backslash, or no http(s) host."""
    if base_url is None:
        return
    try:
        parts = urllib.parse.urlsplit(base_url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise EndpointRefused(f"base_url {base_url[:200]!r} is not a URL: {exc}") from exc
    if "@" in parts.netloc:
        raise EndpointRefused("base_url carries credentials before its host: refused (a key is mapped by "
                              "the operator with sift.map_secret, never written into a URL)")
    if parts.scheme not in ("http", "https") or not parts.hostname or "\\" in base_url:
        raise EndpointRefused(f"base_url {base_url[:200]!r} is not an http(s) URL with a host")


def make_reranker(config: RerankerConfig, key: str | None) -> Reranker:
    """Build the reranker a config names with its key (no cache: see build_reranker)."""
    implementation = IMPLEMENTATIONS.get(config.provider or "")
    if implementation is None:
        raise RerankerUnavailable(f"no implementation of reranker provider {config.provider!r}")
    timeout_s = (config.timeout_ms or DEFAULT_ATTEMPT_TIMEOUT_S * 1000) / 1000
    kwargs: dict[str, Any] = {"api_key": key, "base_url": config.base_url, "timeout_s": timeout_s}
    reranker: Reranker = implementation(config.model, **kwargs) if config.model else implementation(**kwargs)
    return reranker


_CACHE: OrderedDict[tuple[Any, ...], Reranker] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 64


def build_reranker(config: RerankerConfig, resolver: SecretResolver | None = None) -> Reranker:
    """The reranker for a config, built once and reused by every search (keyed by its settings
    and a fingerprint of its key, so a rotated key builds a new one). Raises
    RerankerUnavailable (no implementation, client package missing, key not mapped or unset)
    and EndpointRefused (a base_url that would send the request elsewhere), before any call."""
    check_endpoint(config.base_url)
    key = resolve_secret(config, resolver)
    fingerprint = hashlib.sha256(key.encode()).hexdigest()[:16] if key else None
    cache_key = (config.provider, config.model, config.base_url, config.timeout_ms, fingerprint)
    with _CACHE_LOCK:
        hit = _CACHE.get(cache_key)
        if hit is not None:
            _CACHE.move_to_end(cache_key)
            return hit
    built = make_reranker(config, key)
    with _CACHE_LOCK:
        hit = _CACHE.setdefault(cache_key, built)
        _CACHE.move_to_end(cache_key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return hit


def clear_reranker_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()
