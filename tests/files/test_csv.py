"""The one CSV encoder (`otbench.files.csv_text`): RFC 4180 as Python's `csv` writes it, plus
the formula guard, used by the report tables, the sweep tables and the leaderboard."""

import csv
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.files import csv_field, csv_text


def test_text_that_a_spreadsheet_would_run_is_written_as_text():
    assert csv_field('=HYPERLINK("http://x","y")') == '"\'=HYPERLINK(""http://x"",""y"")"'
    assert [csv_field(v) for v in ("=HYPERLINK(\"x\")", "+1", "-x", "@a", "ok", "-12.5", "\tx")] \
        == ['"\'=HYPERLINK(""x"")"', "+1", "'-x", "'@a", "ok", "-12.5", "'\tx"]


def test_numbers_and_none():
    assert [csv_field(v) for v in (-0.5, 3, None, 1e-7, True)] == ["-0.5", "3", "", "1e-07", "True"]


def test_comment_line_and_empty_table():
    assert csv_text(["a", "b"], [[1, None]], comment="SYNTHETIC") == "# SYNTHETIC\na,b\n1,\n"
    assert csv_text([], []) == "\n"


# Python 3.11's writer leaves a carriage return unquoted when the line end is "\n"; otbench
# quotes it (RFC 4180), so the comparison leaves it out.
_safe_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",),
                                   exclude_characters="\r"), max_size=12).filter(
    lambda s: s[:1] not in ("=", "+", "-", "@", "\t", "\r"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.one_of(_safe_text, st.integers(-10**6, 10**6),
                                   st.floats(allow_nan=False)), min_size=2, max_size=5),
                min_size=0, max_size=6))
def test_same_bytes_as_the_csv_module_where_no_guard_applies(rows):
    # Python's writer quotes a lone empty field (`""`); otbench's tables never have one column.
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["h1", "h2"])
    w.writerows(rows)
    assert csv_text(["h1", "h2"], rows) == buf.getvalue()
    back = list(csv.reader(io.StringIO(csv_text(["h1", "h2"], rows), newline="")))
    assert back[1:] == [[str(v) for v in r] for r in rows]


def test_csv_records_reads_what_csv_text_writes_and_refuses_in_one_line():
    from otbench.files import csv_records

    rows = [["a,b", 'say "x"', "two\nlines"], ["", "1", "=1+1"]]
    text = csv_text(["h1", "h2", "h3"], rows)
    fail = lambda line, why: ValueError(f"f.csv, line {line}: {why}")   # noqa: E731
    got = list(csv_records(text, fail))
    assert got[0] == ["h1", "h2", "h3"] and got[1] == rows[0] and got[2] == ["", "1", "'=1+1"]
    assert list(csv_records(io.StringIO(text, newline=""), fail)) == got      # a stream too
    with pytest.raises(ValueError, match=r"^f\.csv, line 2: not valid CSV \(field larger than "):
        list(csv_records("h\n" + "x" * 200_000 + "\n", fail))
