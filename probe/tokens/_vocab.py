"""Boundary vocabulary, its audit, and the boundary→content mappings of a tokenizer (docs/rules.md-§3.3).

Every rule here looks at one token id at a time ("its own decoded form");
nothing decodes a trajectory. The tokenizer is any object with
``decode(ids, skip_special_tokens=..., clean_up_tokenization_spaces=...)``
and ``encode(text, add_special_tokens=False)`` (Hugging Face tokenizers).
"""

import dataclasses
import hashlib
from collections import Counter

import numpy as np

KINDS = ("pure", "whitespace", "suffix", "infix")
"""Boundary form kinds, as in the paper's audit: pure double LF (only `\\n`),
other whitespace-only, compound suffix (text, then the double LF and only
whitespace after it), compound infix (text after a double LF)."""

DOUBLE_LF = "\n\n"


def classify_form(form: str) -> str | None:
    """The boundary kind of a decoded token form, or None when it is no boundary.

    >>> [classify_form(s) for s in ["\\n\\n", " \\n\\n", ".\\n\\n", "\\n\\nThe", "a\\n"]]
    ['pure', 'whitespace', 'suffix', 'infix', None]
    """
    i = form.find(DOUBLE_LF)
    if i < 0:
        return None
    if set(form) == {"\n"}:
        return "pure"
    if form.isspace():
        return "whitespace"
    # Suffix: all visible text comes before the first double LF.
    return "infix" if form[i:].strip() else "suffix"


def content_form(form: str) -> str:
    """The text a boundary token is replaced by when a probe closes the thinking there.

    The part before the first double LF: the paragraph break (and any text
    that would open the next paragraph) is dropped so the retained text ends
    where the step's own text ends; the family's separator and thinking-end
    marker then follow (docs/rules.md).

    >>> [content_form(s) for s in ["\\n\\n", ".\\n\\n", ".\\n\\nThe", ")\\n\\n\\n"]]
    ['', '.', '.', ')']
    """
    return form[: form.find(DOUBLE_LF)]


def newline_form(form: str) -> str:
    """The text of a boundary form up to and including one line feed of its first double LF.

    The text a step keeps when it closes on a single line break, the way the
    tokenizer itself closes a line (`.\\n` rather than `.` then `\\n`).

    >>> [newline_form(s) for s in ["\\n\\n", ".\\n\\n", ".\\n\\nThe", " \\n\\n\\n"]]
    ['\\n', '.\\n', '.\\n', ' \\n']
    """
    return form[: form.find(DOUBLE_LF) + 1]


def token_forms(tokenizer, vocab_size: int) -> list[str]:
    """Decoded form of every id `0..vocab_size-1` (special tokens kept, no clean-up)."""
    kw = dict(skip_special_tokens=False, clean_up_tokenization_spaces=False)
    if hasattr(tokenizer, "batch_decode"):
        return list(tokenizer.batch_decode([[i] for i in range(vocab_size)], **kw))
    return [tokenizer.decode([i], **kw) for i in range(vocab_size)]


def tokenizer_vocab_size(tokenizer) -> int:
    """Number of ids the tokenizer can produce (base vocabulary plus added tokens)."""
    n = len(tokenizer)
    get = getattr(tokenizer, "get_vocab", None)
    if get is not None:
        v = get()
        if v:
            n = max(n, max(v.values()) + 1)
    return n


def tokenizer_hash(tokenizer) -> str:
    """sha256 of the tokenizer's full serialized definition (fast tokenizers) or vocabulary."""
    h = hashlib.sha256()
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        h.update(backend.to_str().encode())
    else:
        for tok, i in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1]):
            h.update(f"{i}\t{tok}\n".encode())
    return h.hexdigest()


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """The per-tokenizer tables the probe needs, computed once.

    Attributes:
      size: number of ids covered by the tables.
      forms: decoded form of every id.
      boundary_ids: int32[|B|] sorted ids whose own form contains a double LF.
      mask: bool[size] boundary lookup table (`_segment.boundary_mask`).
      ends_newline: bool[size] the id's form ends with a line feed (the probe
        omits the family's separator after such a token).
      starts_newline: bool[size] the id's form starts with a line feed (with
        `ends_newline`, the "vocab+span" boundary rule of `_segment`).
      content: boundary id -> token ids of its content form (`content_form`),
        possibly empty.
      content_newline: boundary id -> the single id whose form is the
        boundary's `newline_form`, for the boundary ids whose text up to one
        line feed is one token of the vocabulary (the tokenizer's own
        encoding of that text when it is one token, else the lowest id with
        exactly that form); absent ids have no such token.
      tokenizer_hash: `tokenizer_hash` of the tokenizer.
    """

    size: int
    forms: tuple[str, ...]
    boundary_ids: np.ndarray
    mask: np.ndarray
    ends_newline: np.ndarray
    starts_newline: np.ndarray
    content: dict[int, tuple[int, ...]]
    tokenizer_hash: str
    content_newline: dict[int, int] = dataclasses.field(default_factory=dict)

    def kinds(self) -> dict[str, list[int]]:
        """kind -> boundary ids of that kind (see `KINDS`)."""
        out: dict[str, list[int]] = {k: [] for k in KINDS}
        for i in self.boundary_ids.tolist():
            out[classify_form(self.forms[i])].append(i)
        return out


def build_vocabulary(tokenizer, vocab_size: int | None = None) -> Vocabulary:
    """Decode every id once and derive the boundary set, its content map and newline table.

    Args:
      tokenizer: a Hugging Face tokenizer.
      vocab_size: ids to cover (default: `tokenizer_vocab_size`); pass the
        model's (possibly padded) vocabulary size so every generated id is covered.
    """
    n_tok = tokenizer_vocab_size(tokenizer)
    size = max(n_tok, int(vocab_size or 0))
    forms = token_forms(tokenizer, n_tok) + [""] * (size - n_tok)
    boundary = [i for i, f in enumerate(forms) if DOUBLE_LF in f]
    mask = np.zeros(size, dtype=bool)
    mask[boundary] = True
    ends = np.fromiter((f.endswith("\n") for f in forms), dtype=bool, count=size)
    starts = np.fromiter((f.startswith("\n") for f in forms), dtype=bool, count=size)
    content: dict[int, tuple[int, ...]] = {}
    cache: dict[str, tuple[int, ...]] = {}
    for i in boundary:
        text = content_form(forms[i])
        if text not in cache:
            # A fixed short string per boundary kind, encoded once for the
            # table; trajectory prefixes themselves are never re-encoded.
            cache[text] = tuple(int(t) for t in tokenizer.encode(text, add_special_tokens=False)) \
                if text else ()
        content[i] = cache[text]
    return Vocabulary(size=size, forms=tuple(forms),
                      boundary_ids=np.asarray(boundary, dtype=np.int32), mask=mask,
                      ends_newline=ends, starts_newline=starts, content=content,
                      tokenizer_hash=tokenizer_hash(tokenizer),
                      content_newline=_newline_tokens(tokenizer, forms, boundary))


def _newline_tokens(tokenizer, forms: list[str], boundary: list[int]) -> dict[int, int]:
    """boundary id -> the one id whose form is its `newline_form` (see `Vocabulary`)."""
    special = set(getattr(tokenizer, "all_special_ids", None) or ())
    by_form: dict[str, int] | None = None
    found: dict[str, int | None] = {}
    out: dict[int, int] = {}
    for i in boundary:
        text = newline_form(forms[i])
        if text not in found:
            enc = [int(t) for t in tokenizer.encode(text, add_special_tokens=False)]
            if len(enc) == 1 and forms[enc[0]] == text:
                found[text] = enc[0]
            else:
                if by_form is None:  # built once, only when some text is not its own encoding
                    by_form = {}
                    for j, f in enumerate(forms):
                        if f and j not in special:
                            by_form.setdefault(f, j)
                found[text] = by_form.get(text)
        if found[text] is not None:
            out[i] = found[text]
    return out


def audit(vocab: Vocabulary, *, top: int = 10) -> dict:
    """Size of the boundary set and its forms by kind, with counts (JSON-ready).

    Returns:
      {"size": |B|, "vocab_size": ..., "tokenizer_hash": ...,
       "kinds": {kind: {"count": int, "forms": [[escaped form, ids], ...]}}}
      where `forms` lists up to `top` distinct forms of the kind, most ids first.
    """
    kinds = vocab.kinds()
    out = {"size": int(vocab.boundary_ids.size), "vocab_size": vocab.size,
           "tokenizer_hash": vocab.tokenizer_hash, "kinds": {}}
    for k in KINDS:
        out["kinds"][k] = {"count": len(kinds[k]),
                           "forms": _top_forms((vocab.forms[i] for i in kinds[k]), top)}
    out["mapping"] = mapping_coverage(vocab, top=top)
    return out


def _escaped(form: str) -> str:
    return form.encode("unicode_escape").decode("ascii")


def _top_forms(forms, top: int) -> list[list]:
    c = Counter(forms)
    return [[_escaped(f), n] for f, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]


def mapping_coverage(vocab: Vocabulary, *, top: int = 10) -> dict:
    """How many boundary ids close on one token that keeps their text up to one line feed.

    Returns:
      {"mapped": n, "total": |B|, "fraction": n / |B| (1.0 for an empty set),
       "kinds": {kind: {"mapped": int, "total": int}},
       "unmapped": [[escaped form, ids], ...]} (up to `top` forms without
      such a token; they close on their `content_form` ids and the separator).
    """
    kinds = vocab.kinds()
    mapped = set(vocab.content_newline)
    total = int(vocab.boundary_ids.size)
    return {"mapped": len(mapped), "total": total,
            "fraction": len(mapped) / total if total else 1.0,
            "kinds": {k: {"mapped": sum(i in mapped for i in kinds[k]), "total": len(kinds[k])}
                      for k in KINDS},
            "unmapped": _top_forms((vocab.forms[i] for i in vocab.boundary_ids.tolist()
                                    if i not in mapped), top)}


def count_events(ids: np.ndarray, offsets: np.ndarray, mask: np.ndarray, ends_newline: np.ndarray,
                 starts_newline: np.ndarray) -> dict[str, int]:
    """Boundary audit of stored trajectories (the paper's Events / Cross / Unmarked columns).

    Args:
      ids: int[total] thinking ids of all trajectories; offsets: int64[T+1].
      mask, ends_newline, starts_newline: bool[vocab] tables (`Vocabulary`).

    Returns:
      {"events": occurrences of boundary ids, "cross": adjacent token pairs
      whose LF-LF spans the two tokens, "unmarked": those crossings whose
      right token is not itself a boundary id}. A crossing is a paragraph
      break the vocabulary rule cannot see; the paper's audit found none for
      its tokenizers, and this lets a user check their own data.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return {"events": 0, "cross": 0, "unmarked": 0}
    pair = np.zeros(ids.size, dtype=bool)
    pair[1:] = ends_newline[ids[:-1]] & starts_newline[ids[1:]]
    starts = np.asarray(offsets[:-1], dtype=np.int64)
    pair[starts[starts < ids.size]] = False
    return {"events": int(mask[ids].sum()), "cross": int(pair.sum()),
            "unmarked": int((pair & ~mask[ids]).sum())}
