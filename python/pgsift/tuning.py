"""Tuning: a collection's knobs chosen from its golden set with k-fold cross-validation.

:func:`tune` calls ``sift.tune_golden_set`` (``sql/73_tuning.sql``), where all the work
happens: every cell of a grid of knob objects scores every answerable question
(nDCG@k, as ``sift.score_golden_set`` scores it), the questions are dealt into folds by
a hash of their key seeded by ``seed``, each fold's pick is the best cell on the other
folds and is scored on the fold, and the cross-validated gain over the collection's
current knobs comes with a 95% paired bootstrap interval (2,000 resamples, drawn by a
seeded hash: the same seed gives the same figures). With ``store=True`` the best cell
on every question is stored on the collection only when that interval lies above 0.

:func:`read_grid` reads a grid file: a JSON array of knob objects, or an object mapping
each knob to a list of values (every combination is a cell).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from . import queries as q
from .client import Client
from .errors import InvalidArgument

__all__ = ["TuneRow", "Tuning", "expand_grid", "read_grid", "tune"]


@dataclass(frozen=True)
class TuneRow:
    """One row of ``sift.tune_golden_set``: kind is current, cell, fold, question, held_out or decision."""

    kind: str
    cell: int | None
    fold: int | None
    question_key: str | None
    knobs: dict[str, Any] | None
    questions: int | None
    ndcg: float | None
    current_ndcg: float | None
    gain: float | None
    ci_low: float | None
    ci_high: float | None
    stored: bool | None
    note: str | None


@dataclass(frozen=True)
class Tuning:
    """What ``sift.tune_golden_set`` reported, row by row, with the parts by name."""

    collection: str
    golden_set: str | None
    k: int
    folds: int
    seed: int
    rows: list[TuneRow]

    def _of(self, kind: str) -> list[TuneRow]:
        return [r for r in self.rows if r.kind == kind]

    @property
    def current(self) -> TuneRow:
        return self._of("current")[0]

    @property
    def cells(self) -> list[TuneRow]:
        return self._of("cell")

    @property
    def fold_picks(self) -> list[TuneRow]:
        return self._of("fold")

    @property
    def per_question(self) -> list[TuneRow]:
        return self._of("question")

    @property
    def held_out(self) -> TuneRow:
        return self._of("held_out")[0]

    @property
    def decision(self) -> TuneRow:
        return self._of("decision")[0]

    @property
    def significant(self) -> bool:
        """The best cell differs from the current knobs and the held-out gain's 95% interval lies
        above 0 (the decision's note starts with "stored" or "significant"; else "nothing stored")."""
        return (self.decision.note or "").startswith(("stored", "significant"))

    @property
    def stored(self) -> bool:
        return bool(self.decision.stored)

    def to_json(self) -> dict[str, Any]:
        return {"collection": self.collection, "golden_set": self.golden_set, "k": self.k, "folds": self.folds,
                "seed": self.seed, "significant": self.significant, "stored": self.stored,
                "current": asdict(self.current), "cells": [asdict(r) for r in self.cells],
                "fold_picks": [asdict(r) for r in self.fold_picks],
                "per_question": [asdict(r) for r in self.per_question],
                "held_out": asdict(self.held_out), "decision": asdict(self.decision)}


def expand_grid(grid: Any) -> list[dict[str, Any]]:
    """A grid as cells: a list of knob objects as it is, or ``{"knob": [values], ...}`` as
    every combination (the first knob varying slowest). The database checks the knobs."""
    if isinstance(grid, list):
        if not all(isinstance(cell, dict) for cell in grid):
            raise InvalidArgument("a grid list holds knob objects, e.g. [{\"dense_weight\": 0.3}]")
        return list(grid)
    if isinstance(grid, dict):
        if not grid or not all(isinstance(v, list) and v for v in grid.values()):
            raise InvalidArgument("a grid object maps each knob to a non-empty list of values, "
                                  "e.g. {\"dense_weight\": [0.3, 0.5]}")
        names = list(grid)
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(grid[n] for n in names))]
    raise InvalidArgument("a grid is a JSON array of knob objects or an object of knob -> values")


def read_grid(path: str | Path) -> list[dict[str, Any]]:
    """Read a grid file (JSON): see :func:`expand_grid`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"cannot read grid {path}: {exc}") from exc
    return expand_grid(data)


def tune(client: Client, collection: str, *, golden_set: str | None = None, k: int = 10, folds: int = 5,
         grid: Any = None, seed: int = 0, store: bool = False, per_question: bool = False) -> Tuning:
    """Tune the collection's knobs on its golden set (``sift.tune_golden_set``); ``grid``: a list
    of knob objects or ``{"knob": [values]}`` (None: the database's default grid). Typed errors:
    InvalidArgument (SF003) for bad k, folds, seed or grid; InvalidKnob (SF009) for a bad cell;
    CollectionNotFound and GoldenSetNotFound for what this tenant cannot see."""
    cells = None if grid is None else expand_grid(grid)
    with client.transaction() as conn:
        cur = conn.cursor(row_factory=class_row(TuneRow))
        rows = cur.execute(q.TUNE_GOLDEN_SET, {
            "collection": collection, "golden_set": golden_set, "k": k, "folds": folds,
            "grid": None if cells is None else Jsonb(cells), "seed": seed, "store": store,
            "per_question": per_question}, prepare=False).fetchall()
    return Tuning(collection=collection, golden_set=golden_set, k=k, folds=folds, seed=seed, rows=rows)
