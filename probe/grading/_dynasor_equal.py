"""Dynasor-CoT's answer equivalence, restated: `math_equal` of hao-ai-lab/Dynasor.

Source: hao-ai-lab/Dynasor, commit 0d2f1b93a60e031cfc7fb43843d2b736b225960c,
``dynasor/core/evaluator.py`` (adapted there from QwenLM/Qwen2.5-Math):
`math_equal` (lines 554-742), with `choice_answer_clean` (506-517),
`parse_digits` / `is_digit` (520-538), `str_to_pmatrix` (541-551),
`numeric_equal` (769-776) and `symbolic_equal` (779-832). Dynasor-CoT calls
it on the raw probe answers (no `strip_string`), without a timeout, through
`eqaul_group` (lines 749-762; `otbench.probe.grading._dynasor`).

Restated step by step in the source's order; where otbench departs, it says so:

* `symbolic_equal` parses with sympy's ``parse_latex``, then ``parse_expr``,
  then ``latex2sympy`` (line 781). ``parse_latex`` needs ANTLR 4.11; where it
  is missing (or another version is installed) it raises, exactly as in the
  source, and the next parser is tried. ``latex2sympy`` is taken from
  ``latex2sympy2_extended`` (math-verify's parser, a fork of the source's
  ``latex2sympy2``).
* **Model text never reaches ``eval``.** ``parse_expr`` turns its input into
  Python and evaluates it; in its place otbench runs `_arith.parse_arith`,
  which reads the same arithmetic (``^`` as Python's XOR, as ``parse_expr``
  reads it: ``2^2^2^2`` is 0 and not 65536, as in Dynasor) into a sympy tree
  by its own grammar, with size, depth and exponent bounds, and refuses the
  rest (`_arith`'s docstring lists where it departs).
* A text no parser reads stays a string in the source, and the later steps
  hand it to sympy's ``sympify`` (``a.equals(b)``, ``N(a)``), which evaluates
  it -- the source's second route to ``eval``. Here such a text is compared
  only as a string (``str(a) == str(b)``, the source's first check).
* The source runs sympy without a time limit (``timeout=False``); a tower of
  powers such as ``2^{2^{2^{9}}}`` would then never finish, stalling the
  probe. Each parse-and-compare runs in a child process under a hard
  deadline (`_deadline`, 5 s); an overrun counts as *not equal*, its reason is
  counted and logged, and a text whose parse overran is compared only as a
  string from then on. A string with more than two ``^`` or a number of more
  than 40 digits is not given to the LaTeX parsers (a cheap refusal of the
  common overrun; `parse_arith` reads it, with ``^`` as XOR), and answers longer than `MAX_ANSWER_CHARS` are compared only as
  strings.
"""

import math
import re

from ._arith import check_tree, parse_arith
from ._deadline import DEADLINE_S, compare

__all__ = ["math_equal"]

_CHOICES = ("A", "B", "C", "D", "E")
MAX_ANSWER_CHARS = 4096
"""Longer answers are compared only as strings: no benchmark answer is this long, and the string
steps before `symbolic_equal` (pmatrix and bracket splitting) grow with the text."""


def choice_answer_clean(pred: str) -> str:
    """Lines 506-517: the last standalone A-E letter of `pred` (upper-cased), else `pred` stripped."""
    pred = pred.strip("\n").rstrip(".").rstrip("/").strip(" ").lstrip(":")
    tmp = re.findall(r"\b(A|B|C|D|E)\b", pred.upper())
    picked = tmp if tmp else [pred.strip().strip(".")]
    return picked[-1].rstrip(".").rstrip("/")


def parse_digits(num) -> float | None:
    """Lines 520-533: a float with commas removed, `N%` / `N\\%` as N / 100, else None."""
    num = str(num).replace(",", "")
    try:
        return float(num)
    except ValueError:
        if num.endswith("%"):
            num = num[:-1]
            if num.endswith("\\"):
                num = num[:-1]
            try:
                return float(num) / 100
            except ValueError:
                pass
    return None


def is_digit(num) -> bool:
    return parse_digits(num) is not None


def str_to_pmatrix(input_str: str) -> str:
    """Lines 541-551."""
    out = []
    for m in re.findall(r"\{.*,.*\}", input_str.strip()):
        m = m.strip("{}")
        out.append(r"\begin{pmatrix}" + m.replace(",", "\\") + r"\end{pmatrix}")
    return ", ".join(out)


def numeric_equal(prediction: float, reference: float) -> bool:
    """Lines 769-776: relative tolerance 1e-4."""
    return math.isclose(reference, prediction, rel_tol=1e-4)


def _parse_expr(s: str):
    return parse_arith(s)  # in place of sympy's parse_expr, which runs eval (module docstring)


def _parse_latex(s: str):
    from sympy.parsing.latex import parse_latex

    return parse_latex(s)


def _latex2sympy(s: str):
    from latex2sympy2_extended import latex2sympy

    return latex2sympy(s)


_LONG_NUMBER = re.compile(r"\d{41,}")


def _too_costly(s: str) -> bool:
    """A string sympy may never finish evaluating (module docstring); kept as a string."""
    return s.count("^") > 2 or _LONG_NUMBER.search(s) is not None


def _parse(s: str):
    """The first parser's tree (line 781's order), or None: a string is never handed on to sympy."""
    costly = _too_costly(s)
    for f in (_parse_latex, _parse_expr, _latex2sympy):
        if costly and f is not _parse_expr:
            continue  # the LaTeX parsers read ^ as a power and would build the tower
        for text in (s.replace("\\\\", "\\"), s):
            try:
                tree = f(text)
                check_tree(tree)  # the bounds of parse_arith, on every parser's tree
                return tree
            except Exception:
                pass
    return None


def symbolic_equal_here(a: str, b: str, parsed=lambda side: None) -> bool:
    """Lines 779-832 in this process, no deadline: parse both, then compare the trees.

    Runs in `_deadline`'s child; `parsed(k)` is called once side `k` is parsed, so an overrun is
    pinned on the side that caused it. Call `symbolic_equal`, not this, on a model's text.
    """
    ta = _parse(a)
    parsed(1)
    tb = _parse(b)
    parsed(2)
    if ta is None or tb is None:
        return str(a if ta is None else ta) == str(b if tb is None else tb)
    a, b = ta, tb
    try:
        if str(a) == str(b) or a == b:
            return True
    except Exception:
        pass
    try:
        from sympy import simplify

        if a.equals(b) or simplify(a - b) == 0:
            return True
    except Exception:
        pass
    try:
        if (abs(a.lhs - a.rhs)).equals(abs(b.lhs - b.rhs)):
            return True
    except Exception:
        pass
    try:
        from sympy import N

        if numeric_equal(float(N(a)), float(N(b))):
            return True
    except Exception:
        pass
    try:
        if a.shape == b.shape:
            if a.applyfunc(lambda x: round(x, 3)).equals(b.applyfunc(lambda x: round(x, 3))):
                return True
    except Exception:
        pass
    return False


def symbolic_equal(a: str, b: str, deadline_s: float = DEADLINE_S) -> bool:
    """Lines 779-832 under a hard deadline in the comparison process (module docstring)."""
    if a == b:
        return True  # equal texts parse to equal trees: the source's first check, without sympy
    return compare("dynasor_symbolic", a, b, deadline_s)


def _bracketed(s: str) -> bool:
    return re.match(r"(\(|\[).+(\)|\])", s) is not None


def _matrix_equal(prediction: str, reference: str, include_percentage: bool, is_close: bool) -> bool:
    """Lines 647-704: row by row, cell by cell (`&`), each cell by `math_equal`."""
    begin, end = len("\\begin{pmatrix}"), len("\\end{pmatrix}")
    pred_lines = [ln.strip() for ln in prediction[begin:-end].split("\\\\") if ln.strip()]
    ref_lines = [ln.strip() for ln in reference[begin:-end].split("\\\\") if ln.strip()]
    if len(pred_lines) != len(ref_lines):
        return False
    for pl, rl in zip(pred_lines, ref_lines):
        pp, rp = pl.split("&"), rl.split("&")
        if len(pp) != len(rp) or not all(math_equal(pp[i], rp[i], include_percentage, is_close)
                                         for i in range(len(pp))):
            return False
    return True


def _is_matrix(s: str) -> bool:
    return (s.startswith("\\begin{pmatrix}") or s.startswith("\\begin{bmatrix}")) and \
        (s.endswith("\\end{pmatrix}") or s.endswith("\\end{bmatrix}"))


def math_equal(prediction, reference, include_percentage: bool = True, is_close: bool = True) -> bool:
    """Whether `prediction` equals `reference` by Dynasor's rule (lines 554-742, `timeout=False`).

    >>> math_equal("0.5", "50")          # the percentage rule: 0.5 * 100
    True
    >>> math_equal("x=3", "3")
    True
    >>> math_equal("", "")
    True
    """
    if prediction is None or reference is None:
        return False
    if str(prediction.strip().lower()) == str(reference.strip().lower()):
        return True
    if len(str(prediction)) > MAX_ANSWER_CHARS or len(str(reference)) > MAX_ANSWER_CHARS:
        return False  # compared only as strings, just above (module docstring)
    if reference in _CHOICES and choice_answer_clean(prediction) == reference:
        return True
    try:  # 1. numerical equal (a float comparison never raises here; the source's try is kept)
        if is_digit(prediction) and is_digit(reference):
            p, r = parse_digits(prediction), parse_digits(reference)
            for item in ([r / 100, r, r * 100] if include_percentage else [r]):
                try:
                    if (numeric_equal(p, item) if is_close else item == p):
                        return True
                except Exception:
                    continue
            return False
    except Exception:
        pass
    if not prediction and prediction not in [0, False]:
        return False
    # 2. symbolic equal
    reference, prediction = str(reference).strip(), str(prediction).strip()
    if "pmatrix" in prediction and "pmatrix" not in reference:
        reference = str_to_pmatrix(reference)
    pred_str, ref_str = prediction, reference
    if (prediction.startswith("[") and prediction.endswith("]") and not reference.startswith("(")) or \
            (prediction.startswith("(") and prediction.endswith(")") and not reference.startswith("[")):
        pred_str, ref_str = pred_str.strip("[]()"), ref_str.strip("[]()")
    for s in ("{", "}", "(", ")"):
        ref_str, pred_str = ref_str.replace(s, ""), pred_str.replace(s, "")
    if pred_str.lower() == ref_str.lower():
        return True
    if _bracketed(prediction) and _bracketed(reference):
        pp, rp = prediction[1:-1].split(","), reference[1:-1].split(",")
        if len(pp) == len(rp) and all(math_equal(pp[i], rp[i], include_percentage, is_close)
                                      for i in range(len(pp))):
            return True
    if _is_matrix(prediction) and _is_matrix(reference) and \
            _matrix_equal(prediction, reference, include_percentage, is_close):
        return True
    if prediction.count("=") == 1 and reference.count("=") == 1:
        p = prediction.split("=")
        p = f"{p[0].strip()} - ({p[1].strip()})"
        r = reference.split("=")
        r = f"{r[0].strip()} - ({r[1].strip()})"
        if symbolic_equal(p, r) or symbolic_equal(f"-({p})", r):
            return True
    elif prediction.count("=") == 1 and len(prediction.split("=")[0].strip()) <= 2 and "=" not in reference:
        if math_equal(prediction.split("=")[1], reference, include_percentage, is_close):
            return True
    elif reference.count("=") == 1 and len(reference.split("=")[0].strip()) <= 2 and "=" not in prediction:
        if math_equal(prediction, reference.split("=")[1], include_percentage, is_close):
            return True
    return bool(symbolic_equal(prediction, reference))
