"""`metrics()` is the central result: a dict for every reader and a tidy table (issue 30)."""

import json
import math

import numpy as np
import pytest
from otbench.analysis import METRICS, MetricsResult, metrics, simulate


@pytest.fixture(scope="module")
def doc():
    return metrics(simulate("tiny", 2))


def _twin_rows(d):
    """Plain Python: (scope, model, group, metric, value) in the documented order."""
    out = []
    for c in d["cells"]:
        out += [("cell", c["model"], c["group"], k, c[k]) for k in METRICS]
    for m, v in d["by_model"].items():
        out += [("model", m, None, k, v[k]) for k in METRICS]
    for g, v in d["by_group"].items():
        out += [("group", None, g, k, v[k]) for k in METRICS]
    return out + [("macro", None, None, k, d["macro"][k]) for k in METRICS]


def test_the_document_is_still_a_plain_json_dict(doc):
    assert isinstance(doc, MetricsResult) and isinstance(doc, dict)
    assert doc["schema"] == "otbench.metrics/1"
    assert json.loads(json.dumps(doc)) == doc.to_json() == dict(doc)
    assert type(doc.to_json()) is dict


def test_arrow_pandas_and_polars_rows_match_the_document(doc):
    t = doc.to_arrow()
    assert t.column_names == ["scope", "model", "group", "metric", "value"]
    want = _twin_rows(doc)
    got = list(zip(*(t.column(n).to_pylist() for n in t.column_names)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[:4] == w[:4]
        assert (w[4] is None and (g[4] is None or math.isnan(g[4]))) or g[4] == w[4]
    pd = pytest.importorskip("pandas")
    df = doc.to_pandas()
    assert isinstance(df, pd.DataFrame) and len(df) == len(want)
    macro_or = df[(df.scope == "macro") & (df.metric == "or")].value.item()
    assert macro_or == doc["macro"]["or"]
    pl = pytest.importorskip("polars")
    assert doc.to_polars().shape == (len(want), 5)
    assert np.isclose(doc.to_polars().filter(pl.col("scope") == "macro")["value"].sum(),
                      sum(v for v in doc["macro"].values() if v is not None))
