"""The frozen OTBench reference output (artifacts/otbench/reference-small-seed0.json) is reproduced.

Provenance of the expected numbers: the file was written by this module
(``OTBENCH_REGENERATE=1 pytest tests/test_otbench_reference.py``) from
``simulate("small", 0)`` (SYNTHETIC), the default split (seed 20260721,
60/20/20) and every built-in with a 9-point default sweep; it pins the whole
pipeline (simulator, split, features, ridge, walker, frontier, macro chain)
against silent changes. Integers, booleans and strings compare exactly;
floats within 1e-9 absolute. (The ridge solves are in fixed-order
arithmetic since issue 24 and give the same bits on every machine; the file
was written when they went through BLAS, and the new solves agree with it
to about 1e-14.)
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from otbench.analysis import simulate
from otbench.analysis.bench._evaluate import compare
from otbench.analysis.bench._splits import assign_splits

PATH = Path(__file__).resolve().parents[3] / "artifacts" / "otbench" / "reference-small-seed0.json"
SCHEMA = "otbench.bench-reference/1"


def reduced(results):
    """Macro points and summaries of every method, per-cell summaries (no per-cell points)."""
    out = []
    for r in results:
        d = r.to_json()
        out.append({k: d[k] for k in ("method", "strategy", "split", "points", "summary",
                                      "reference")}
                   | {"thetas": d["config"]["thetas"],
                      "cells": [{"model": c["model"], "group": c["group"],
                                 "summary": c["summary"]} for c in d["cells"]]})
    return out


# The built-ins the frozen file was written with (the field methods of issue 27
# came later and are pinned case by case in test_otbench_field.py).
PINNED = ("thinkswitcher", "predictive-scheduling", "thinkbrake-onectx")


def current():
    ms = assign_splits(simulate("small", 0))
    return reduced(compare(ms, methods=PINNED, theta_grid=9))


def close(a, b, path="$"):
    if isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None and abs(a - b) <= 1e-9, f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert set(a) == set(b), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def test_reference_output_is_reproduced():
    got = current()
    if os.environ.get("OTBENCH_REGENERATE"):
        doc = {"schema": SCHEMA, "synthetic": True,
               "provenance": {"data": "simulate('small', 0) -- SYNTHETIC, no model was run",
                              "split": "assign_splits defaults: seed 20260721, ratios 0.6/0.2/0.2",
                              "call": "compare(ms, methods=PINNED, theta_grid=9)",
                              "writer": "tests/test_otbench_reference.py (OTBENCH_REGENERATE=1)",
                              "numpy": np.__version__},
               "results": got}
        PATH.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    doc = json.loads(PATH.read_text())
    assert doc["schema"] == SCHEMA and doc["synthetic"] is True
    close(json.loads(json.dumps(got)), doc["results"])


def test_reference_file_is_small():
    assert PATH.stat().st_size < 40_000
    with pytest.raises(AssertionError):
        close({"a": 1.0}, {"a": 1.0 + 1e-6})
