"""The finalize latency benchmark runs end to end on a tiny configuration, reports every
configuration at every pool size, and leaves no scratch collection behind (facts, not
timings)."""

from __future__ import annotations

import math

import pytest
from pgsift.bench.finalize import CONFIGS, TENANT, format_table, run_finalize


def test_run_finalize_reports_each_pool_and_cleans_up(db):
    result = run_finalize(db, pool_sizes=(5, 30), repeats=2, dims=8)
    assert [p["pool"] for p in result["pools"]] == [5, 30]
    for p in result["pools"]:
        assert set(p["finalize"]) == set(CONFIGS) and set(p["search"]) == {"off", "all"}
        for t in [*p["finalize"].values(), *p["search"].values()]:
            assert t["median_ms"] > 0 and t["p95_ms"] >= t["median_ms"] and math.isfinite(t["p95_ms"])
        finalize = p["finalize"]
        assert p["extra_median_ms"] == pytest.approx(finalize["all"]["median_ms"] - finalize["off"]["median_ms"])
    assert result["chunks"] >= 60 and result["dims"] == 8
    assert db.execute("select count(*) from sift.collections where tenant = %s", (TENANT,)).fetchone()[0] == 0

    table = format_table(result)
    lines = table.splitlines()
    assert lines[0].startswith("finalize stage:") and "pgvector" in lines[0]
    for pool in ("5", "30"):
        for call, labels in (("finalize", CONFIGS), ("search", ("off", "all"))):
            for label in labels:
                assert any(line.split()[:3] == [pool, call, label] for line in lines), (pool, call, label)


@pytest.mark.parametrize("kwargs", [{"pool_sizes": ()}, {"pool_sizes": (0,)}, {"pool_sizes": (1001,)},
                                    {"repeats": 0}])
def test_run_finalize_refuses_bad_arguments(db, kwargs):
    with pytest.raises(ValueError):
        run_finalize(db, **kwargs)
