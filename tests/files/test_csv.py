"""The one CSV encoder (`otbench.files.csv_text`): RFC 4180 as Python's `csv` writes it, plus
the formula guard, used by the report tables, the sweep tables and the leaderboard."""

import csv
import io

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
