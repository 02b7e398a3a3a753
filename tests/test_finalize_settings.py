"""The ranking settings of a collection: defaults, create/alter through the client,
sift.alter_ranking with reset, and the domain CHECKs that guard both the stored
setting and the per-call override."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from psycopg import errors as pgerrors

import pgsift

DEFAULTS = {"recency_field": None, "recency_half_life": timedelta(days=30), "recency_weight": 0.2,
            "recency_ceiling": 0.5, "per_document_cap": 5, "mmr_lambda": None, "boost": 1.0,
            "score_threshold": None, "lost_in_the_middle": False}

# (setting, bad value) for the stored settings and the per-call overrides alike.
BAD = [
    ("recency_field", "  "),
    ("recency_half_life", timedelta(0)),
    ("recency_half_life", timedelta(days=-1)),
    ("recency_weight", -0.1),
    ("recency_weight", 1.5),
    ("recency_ceiling", 1.01),
    ("per_document_cap", -1),
    ("per_document_cap", 1001),
    ("mmr_lambda", -0.01),
    ("mmr_lambda", 1.01),
    ("boost", 0),
    ("boost", -1),
    ("boost", float("inf")),
    ("score_threshold", float("nan")),
    ("score_threshold", float("inf")),
]
PER_CALL_ONLY = [("recency_bias", -0.1), ("recency_bias", 1.1)]


def settings(collection) -> dict:
    return {k: getattr(collection, k) for k in DEFAULTS}


def test_defaults(client):
    assert settings(client.create_collection("c", embedding_dims=4)) == DEFAULTS


def test_create_and_alter_ranking_settings(client):
    chosen = {"recency_field": "published", "recency_half_life": timedelta(days=7), "recency_weight": 0.3,
              "recency_ceiling": 0.9, "per_document_cap": 2, "mmr_lambda": 0.6, "boost": 1.5,
              "score_threshold": 0.01, "lost_in_the_middle": True}
    created = client.create_collection("c", embedding_dims=4, fetch_k=12, **chosen)
    assert settings(created) == chosen and created.fetch_k == 12
    assert client.get_collection("c") == created

    changed = client.alter_collection("c", per_document_cap=0, dense_weight=0.5, recency_half_life="2 weeks")
    assert (changed.per_document_cap, changed.dense_weight, changed.mmr_lambda) == (0, 0.5, 0.6)
    assert changed.recency_half_life == timedelta(days=14)
    # None switches off the settings whose "off" is null, and leaves the others alone.
    off = client.alter_collection("c", recency_field=None, mmr_lambda=None, score_threshold=None,
                                  boost=None)
    assert (off.recency_field, off.mmr_lambda, off.score_threshold, off.boost) == (None, None, None, 1.5)


def test_a_failed_create_leaves_nothing(client):
    with pytest.raises(pgsift.InvalidKnob):
        client.create_collection("c", embedding_dims=4, recency_weight=0.9)   # above the 0.5 ceiling
    assert client.list_collections() == []


def test_alter_ranking_in_sql(db, client):
    client.create_collection("c", embedding_dims=4, mmr_lambda=0.4, per_document_cap=2)
    row = db.execute("select per_document_cap, mmr_lambda, boost from sift.alter_ranking("
                     "collection => 'c', boost => 2, reset => array['mmr_lambda', 'per_document_cap'])").fetchone()
    assert row == (5, None, 2)
    with pytest.raises(psycopg.Error) as err:
        db.execute("select sift.alter_ranking(collection => 'c', reset => array['dense_weight'])")
    assert err.value.sqlstate == "SF003"
    with pytest.raises(psycopg.Error) as err:
        db.execute("select sift.alter_ranking(collection => 'nope')")
    assert err.value.sqlstate == "SF001"
    comment = db.execute("select obj_description('sift.alter_ranking'::regproc, 'pg_proc')").fetchone()[0]
    assert "Writes." in comment


@pytest.mark.parametrize("setting, value", BAD, ids=lambda v: str(v))
def test_bad_setting_is_refused_everywhere(client, db, setting, value):
    client.create_collection("c", embedding_dims=4)
    before = client.get_collection("c")
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.create_collection("d", embedding_dims=4, **{setting: value})
    assert info.value.knob == setting
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.alter_collection("c", **{setting: value})
    assert info.value.knob == setting
    assert client.get_collection("c") == before
    with pytest.raises(pgerrors.CheckViolation):                       # the table itself refuses it
        db.execute(f"update sift.collections set {setting} = %s", (value,))
    if setting != "recency_ceiling":                                   # the ceiling is no per-call knob
        knob = "boosts" if setting == "boost" else setting
        call = {knob: [value] if knob == "boosts" else value}
        with pytest.raises(pgsift.InvalidKnob) as info:
            client.search("c", "x", **call)
        assert info.value.knob == setting
        with pytest.raises(pgsift.InvalidKnob):
            client.finalize("c", [1], **call)


@pytest.mark.parametrize("knob, value", PER_CALL_ONLY, ids=lambda v: str(v))
def test_bad_per_call_knob_is_refused(client, knob, value):
    client.create_collection("c", embedding_dims=4)
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.search("c", "x", **{knob: value})
    assert info.value.knob == knob


def test_boundary_values_are_accepted(client):
    low = client.create_collection("low", embedding_dims=4, recency_half_life=timedelta(microseconds=1),
                                   recency_weight=0, recency_ceiling=0, per_document_cap=0, mmr_lambda=0,
                                   boost=0.000001, score_threshold=-1e300)
    high = client.create_collection("high", embedding_dims=4, recency_half_life="1000 years", recency_weight=1,
                                    recency_ceiling=1, per_document_cap=1000, mmr_lambda=1, boost=1e6,
                                    score_threshold=1e300)
    assert (low.boost, high.boost, high.recency_weight) == (0.000001, 1e6, 1)
    for name in ("low", "high"):
        assert len(client.search(name, "x", recency_bias=1, recency_weight=0)) == 0
