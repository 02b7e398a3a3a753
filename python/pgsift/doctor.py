"""`pgsift doctor`: what on this server will make a leg slow, checked against its settings and
pgsift's indexes, with what to set. For any server (the embedded one sizes itself; a managed
one is set in its console or parameter group: docs/operations.md).

Each check reads the catalog and settings only (no table scan), so it is safe on a busy
primary or a standby.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg

from . import queries as q
from .client import REFRESH_BACKLOG

MB = 2**20
# Write statements of one collection left unfolded past which searches slow (ten times the
# Python client's refresh backlog).
PENDING_WARN = 10 * REFRESH_BACKLOG


@dataclass(frozen=True)
class Check:
    """One finding: `status` ok, warn or info; `value` what was found; `advice` what to do."""

    name: str
    status: str
    value: str
    advice: str


def _size(n: float) -> str:
    for unit, scale in (("GB", 2**30), ("MB", MB), ("kB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def checks(conn: psycopg.Connection[Any]) -> list[Check]:
    """Every check, in a fixed order. Needs pgsift installed (it reads its indexes)."""
    settings = {name: (value, unit) for name, value, unit in conn.execute(q.DOCTOR_SETTINGS).fetchall()}

    def setting_bytes(name: str) -> float:
        """pg_settings' value in its unit: B, kB, MB, GB, or a block size such as 8kB."""
        value, unit = settings[name]
        m = re.fullmatch(r"(\d*)(B|kB|MB|GB|TB)", unit or "B")
        if m is None:
            raise ValueError(f"unknown unit {unit!r} for {name}")
        scale = {"B": 1, "kB": 1024, "MB": MB, "GB": 2**30, "TB": 2**40}[m.group(2)]
        return float(value) * scale * int(m.group(1) or 1)

    shared = setting_bytes("shared_buffers")
    cache = setting_bytes("effective_cache_size")
    maintenance = setting_bytes("maintenance_work_mem")
    indexes = conn.execute(q.DOCTOR_HNSW_INDEXES).fetchall()
    total = sum(size for _name, size in indexes)
    largest = max((size for _name, size in indexes), default=0)
    vector_version = conn.execute(q.DOCTOR_PGVECTOR).fetchone()
    found: list[Check] = []

    ok = total <= shared
    found.append(Check(
        "hnsw indexes in shared_buffers", "ok" if ok else ("warn" if total > cache else "info"),
        f"{len(indexes)} index(es), {_size(total)}; shared_buffers {_size(shared)}, "
        f"effective_cache_size {_size(cache)}",
        "every HNSW walk stays in memory" if ok else
        f"a dense leg reads index pages from {'disk' if total > cache else 'the OS cache'}: raise shared_buffers "
        f"to at least {_size(total * 1.25)} (a quarter to a third of the machine's memory)"))
    ok = largest <= maintenance
    found.append(Check(
        "hnsw builds in maintenance_work_mem", "ok" if ok else "warn",
        f"largest index {_size(largest)}; maintenance_work_mem {_size(maintenance)}",
        "an index builds in memory" if ok else
        f"a build (a new collection size, a restore) spills the graph and slows down many times: set "
        f"maintenance_work_mem to {_size(largest * 1.25)} for the build (a session setting is enough)"))
    workers = int(settings["max_parallel_maintenance_workers"][0])
    found.append(Check(
        "parallel index builds", "ok" if workers > 0 else "info", f"max_parallel_maintenance_workers {workers}",
        "HNSW builds use several cores" if workers > 0 else
        "HNSW builds run on one core: set max_parallel_maintenance_workers (cores - 1) for bulk loads"))
    version = vector_version[0] if vector_version else None
    iterative = version is not None and tuple(int(p) for p in version.split(".")[:2]) >= (0, 8)
    found.append(Check(
        "pgvector", "ok" if iterative else "warn", f"version {version or 'not installed'}",
        "iterative index scans keep a small collection's top n full in the shared index" if iterative else
        "before 0.8, a filtered walk can come back short and the leg falls back to an exact scan: upgrade pgvector"))
    jit = settings["jit"][0]
    found.append(Check(
        "jit", "ok" if jit == "off" else "warn", f"jit {jit}",
        "no compile time in a search" if jit == "off" else
        "a search whose estimated cost passes jit_above_cost (a large collection) compiles its plan first, "
        "milliseconds a ranking query never earns back: set jit = off (ALTER DATABASE ... SET jit = off)"))
    page_cost = float(settings["random_page_cost"][0])
    found.append(Check(
        "random_page_cost", "ok" if page_cost <= 2 else "info", f"random_page_cost {page_cost:g}",
        "index scans are costed for fast storage" if page_cost <= 2 else
        "4 assumes spinning disks; on SSD or cloud storage set 1.1 so the planner takes the lexical leg's "
        "indexes where they pay"))
    storage, dims = conn.execute(q.DOCTOR_SEARCH_VECTORS).fetchone() or ("x", None)
    inline, large = storage == "m", dims is not None and dims > 1024
    found.append(Check(
        "search vectors in the row", "warn" if inline and large else ("info" if not (inline or large) else "ok"),
        f"storage {'main' if inline else 'extended'}; largest embedding indexed on sift.chunks {dims or 'none'}",
        ("lexical scoring reads each chunk's vector without a TOAST lookup" if inline else
         f"kept out of line so that long chunks keep their {dims}-dimension embeddings in the row")
        if inline != large else
        ("an index holds more than 1,024 dimensions: long chunks move their embeddings out of line; as the "
         "operator, run select sift.ensure_dense_indexes() when searches are quiet" if inline else
         "every chunk the lexical leg scores costs a TOAST lookup (~5 us): ALTER TABLE sift.chunks ALTER COLUMN "
         "search_vector SET STORAGE main (VACUUM FULL sift.chunks moves the rows already written)")))
    queued, shapes = conn.execute(q.DOCTOR_QUEUED_INDEXES).fetchone() or (0, None)
    found.append(Check(
        "hnsw indexes queued", "ok" if not queued else "warn",
        f"{queued} HNSW index(es) a vector space walks not built" + (f": {shapes}" if shapes else ""),
        "every vector space walks its index" if not queued else
        "collections whose spaces walk these are searched by exact scan (collection_info's dense_index "
        "says queued): as the operator, run select sift.ensure_dense_indexes() (or schedule it, e.g. "
        "with pg_cron) to build them"))
    # Searches read a collection's unfolded statements for their terms (a row each per term's
    # bucket) and the text index's pending entries: cheap at the client's backlog (10), not at
    # ten times it.
    pending = conn.execute(q.DOCTOR_PENDING_STATS).fetchone()
    name, backlog = (str(pending[0]), int(pending[1])) if pending else (None, 0)
    found.append(Check(
        "lexical statistics", "ok" if backlog < PENDING_WARN else "warn",
        f"{backlog} write statements not yet folded" + (f" in collection {name!r}" if name else ""),
        "BM25 statistics are folded as they should be" if backlog < PENDING_WARN else
        f"run select * from sift.refresh_lexical_stats('{name}') after writing through SQL (the client "
        f"refreshes once {REFRESH_BACKLOG} statements wait)"))
    return found
