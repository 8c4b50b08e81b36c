"""The guarded JSON reader: every unsafe document is one line naming the place, never a traceback."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from otbench.analysis.measurement import MeasurementSetError

from otbench.files import loads_json

CASES = [
    ("deep nesting", "[" * 100_000 + "]" * 100_000, r"f: not accepted JSON \(nested deeper than 64 levels\)"),
    ("65 levels", "[" * 65 + "]" * 65, r"nested deeper than 64 levels"),
    ("4300+ digits", "9" * 5000, r"integer with 5000 digits is beyond int64"),
    ("beyond int64", "1" + "0" * 400, r"integer with 401 digits is beyond int64"),
    ("beyond float64", "[1e400]", r"number 1e400 is beyond float64"),
    ("NaN literal", "[NaN]", r"NaN is not a JSON number"),
    ("lone surrogate", '{"q": "\\ud800x"}', r"holds a lone surrogate \(not valid Unicode\)"),
    ("surrogate key", '{"\\udfff": 1}', r"holds a lone surrogate"),
    ("duplicate key", '{"y": 0, "y": 1}', r"duplicate key 'y' in one object"),
    ("syntax", "{oops", r"f: not valid JSON \(Expecting property name enclosed in double quotes at column 2\)"),
    ("not UTF-8", b"\xff{}", r"f: not UTF-8 text"),
]


@pytest.mark.parametrize("text,rule", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refusals_are_one_line(text, rule):
    with pytest.raises(MeasurementSetError, match=rule) as e:
        loads_json(text, "f")
    assert "\n" not in str(e.value)


def test_valid_documents_pass_unchanged():
    doc = {"a": [1, 2.5, "é", {"b": None, "c": True}], "d": "\\ud800 is text here"}
    assert loads_json(json.dumps(doc, ensure_ascii=False), "f") == doc
    assert loads_json(json.dumps(doc), "f") == doc
    deep = loads_json("[" * 64 + "]" * 64, "f")            # 64 levels are fine
    for _ in range(63):
        deep = deep[0]
    assert deep == []


_json = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
                     | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(), c, max_size=4),
                     max_leaves=30)


@given(_json)
def test_any_json_value_round_trips(doc):
    assert loads_json(json.dumps(doc), "f") == doc


@given(st.text() | st.binary())
def test_any_text_is_a_value_or_one_line(text):
    try:
        loads_json(text, "f")
    except MeasurementSetError as e:
        assert str(e).startswith("f: ") and "\n" not in str(e)


# -- the writer: `dumps_indented` is `json.dumps(indent=2, sort_keys=True, ...)` byte for byte --

_leaf = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70)
         | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6))
_docs = st.recursive(
    _leaf | st.lists(st.floats(allow_nan=False), max_size=5) | st.lists(st.integers(), max_size=5),
    lambda inner: (st.lists(inner, max_size=4) | st.tuples(inner, inner)
                   | st.dictionaries(st.text(max_size=4), inner, max_size=4)
                   | st.dictionaries(st.integers(0, 3), inner, max_size=2)),
    max_leaves=25)


def _standard(obj):
    try:
        return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False)
    except ValueError as e:
        return ("ValueError", str(e))


@given(_docs)
def test_dumps_indented_is_the_standard_text(obj):
    from otbench.files import dumps_indented

    try:
        ours = dumps_indented(obj)
    except ValueError as e:
        ours = ("ValueError", str(e))
    assert ours == _standard(obj)


def test_dumps_indented_cases():
    from otbench.files import dumps_indented

    doc = {"b": [0.1, 1e-300, 2.0], "a": {"x": [], "y": {}, "z": [1, 2]}, "é": "ü\n", "n": None,
           "t": (True, False), "mix": [1, 2.5, "s"]}
    assert dumps_indented(doc) == json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)
    with pytest.raises(ValueError, match="Out of range float"):
        dumps_indented({"a": [1.0, float("nan")]})
