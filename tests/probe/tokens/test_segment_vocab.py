"""Boundary vocabulary, audit and boundary->content mapping (SPEC §3.2-§3.3), on a hand-made tokenizer."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otbench.probe.tokens._vocab import (
    KINDS,
    audit,
    build_vocabulary,
    classify_form,
    content_form,
    count_events,
    mapping_coverage,
    newline_form,
)


class FakeTokenizer:
    """A tokenizer with a hand-written vocabulary; `encode` is greedy longest-match."""

    def __init__(self, forms):
        self.forms = list(forms)

    def __len__(self):
        return len(self.forms)

    def get_vocab(self):
        return {f: i for i, f in enumerate(self.forms)}

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        return "".join(self.forms[i] for i in ids)

    def encode(self, text, add_special_tokens=False):
        out, i = [], 0
        while i < len(text):
            best = max((j for j, f in enumerate(self.forms) if f and text.startswith(f, i)),
                       key=lambda j: len(self.forms[j]))
            out.append(best)
            i += len(self.forms[best])
        return out


FORMS = ["a", ".", "\n", "\n\n", "\n\n\n", " \n\n", ".\n\n", ").\n\n", "\n\nThe", " ", "The", ")",
         ".\n", "b\n\n c", "b"]
#          0    1     2      3        4         5        6         7          8        9    10     11
#         12      13       14


@pytest.fixture(scope="module")
def vocab():
    return build_vocabulary(FakeTokenizer(FORMS))


@pytest.mark.parametrize("form,kind", [
    ("\n\n", "pure"), ("\n\n\n", "pure"),          # only line feeds
    (" \n\n", "whitespace"), ("\n\n\t", "whitespace"),
    (".\n\n", "suffix"), (").\n\n ", "suffix"),    # text, then LF LF and only whitespace
    ("\n\nThe", "infix"), ("b\n\n c", "infix"),    # text after the double LF
    ("\n", None), ("a\nb\n", None), ("", None),     # no double LF: not a boundary
])
def test_classify(form, kind):
    assert classify_form(form) == kind


def test_boundary_set_and_content(vocab):
    # ids whose own form contains "\n\n" (hand list from FORMS above)
    assert vocab.boundary_ids.tolist() == [3, 4, 5, 6, 7, 8, 13]
    assert vocab.mask.tolist() == [i in (3, 4, 5, 6, 7, 8, 13) for i in range(len(FORMS))]
    # content = text before the first double LF, re-encoded once for the table
    assert vocab.content == {3: (), 4: (), 5: (9,), 6: (1,), 7: (11, 1), 8: (), 13: (14,)}
    assert [i for i in range(len(FORMS)) if vocab.ends_newline[i]] == [2, 3, 4, 5, 6, 7, 12]
    assert [i for i in range(len(FORMS)) if vocab.starts_newline[i]] == [2, 3, 4, 8]


def test_one_newline_tokens(vocab):
    # boundary -> the single token of its text up to one line feed, when one exists:
    # "\n\n", "\n\n\n", "\n\nThe" -> "\n" (2); ".\n\n" -> ".\n" (12); " \n", ").\n"
    # and "b\n" are no tokens of FORMS
    assert vocab.content_newline == {3: 2, 4: 2, 6: 12, 8: 2}
    assert [newline_form(s) for s in ["\n\n", ".\n\n\n", "x\n\ny\n\n", " \n\n"]] == \
        ["\n", ".\n", "x\n", " \n"]


class CharTokenizer(FakeTokenizer):
    """Encodes one character per token: ".\n" is in the vocabulary but never its own encoding."""

    def encode(self, text, add_special_tokens=False):
        return [self.forms.index(c) for c in text]


def test_one_newline_token_by_form_when_not_the_encoding():
    v = build_vocabulary(CharTokenizer(FORMS))
    assert v.content_newline == {3: 2, 4: 2, 6: 12, 8: 2}


def test_mapping_coverage(vocab):
    m = mapping_coverage(vocab, top=10)
    assert (m["mapped"], m["total"]) == (4, 7) and m["fraction"] == 4 / 7
    assert m["kinds"] == {"pure": {"mapped": 2, "total": 2}, "whitespace": {"mapped": 0, "total": 1},
                          "suffix": {"mapped": 1, "total": 2}, "infix": {"mapped": 1, "total": 2}}
    assert m["unmapped"] == [[" \\n\\n", 1], [").\\n\\n", 1], ["b\\n\\n c", 1]]
    assert audit(vocab)["mapping"] == mapping_coverage(vocab)


def test_audit_counts(vocab):
    a = audit(vocab, top=10)
    assert a["size"] == 7
    assert {k: a["kinds"][k]["count"] for k in KINDS} == {"pure": 2, "whitespace": 1,
                                                          "suffix": 2, "infix": 2}
    # most ids first, then by form (")" sorts before ".")
    assert a["kinds"]["suffix"]["forms"] == [[").\\n\\n", 1], [".\\n\\n", 1]]


def test_content_form_examples():
    assert [content_form(s) for s in ["\n\n", ".\n\n", ".\n\nThe", ")\n\n\n", "x\n\ny\n\n"]] == \
        ["", ".", ".", ")", "x"]


def twin_events(rows, vocab):
    events = cross = unmarked = 0
    for r in rows:
        for i, t in enumerate(r):
            events += "\n\n" in vocab.forms[t]
            if i and vocab.forms[r[i - 1]].endswith("\n") and vocab.forms[t].startswith("\n"):
                cross += 1
                unmarked += "\n\n" not in vocab.forms[t]
    return {"events": events, "cross": cross, "unmarked": unmarked}


@given(st.lists(st.lists(st.integers(0, len(FORMS) - 1), max_size=30), min_size=1, max_size=5))
@settings(max_examples=60)
def test_count_events_matches_twin(rows):
    v = build_vocabulary(FakeTokenizer(FORMS))
    off = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=off[1:])
    flat = np.asarray([t for r in rows for t in r], dtype=np.int64)
    assert count_events(flat, off, v.mask, v.ends_newline, v.starts_newline) == twin_events(rows, v)


def test_vocab_size_covers_padded_model_vocab():
    v = build_vocabulary(FakeTokenizer(FORMS), vocab_size=20)
    assert v.size == 20 and v.mask.shape == (20,) and v.forms[19] == ""
