"""A parser for a model's plain arithmetic that builds sympy trees without evaluating Python.

Dynasor's `symbolic_equal` (``dynasor/core/evaluator.py`` line 781 at commit
0d2f1b93) hands a model's answer to sympy's ``parse_expr``, which rewrites the
text into Python source and runs ``eval`` on it: whatever the model wrote runs
(``__import__('os')...``), and ``9**9**9**9`` never returns. `parse_arith`
reads the arithmetic subset of that language itself -- a recursive-descent
parser over a closed token set -- and builds the tree by calling sympy's
constructors on already-built subtrees. It cannot call a function or look up a
name that is not in its own table, so there is nothing for model text to reach.

What it reads, as ``parse_expr`` with its standard transformations reads it
(Python's grammar and precedence, sympy's ``auto_number``, ``auto_symbol`` and
``factorial_notation``):

* numbers: integers as `Integer`, decimals and exponent forms as `Float`
  (``2.50``, ``.5``, ``1e-3``); a number followed by a letter is an error, as
  Python's tokenizer makes it;
* ``+ - * / **`` with Python's precedence (``-2**2`` is -4, ``**`` is
  right-associative), ``<  >  <=  >=`` between two operands (a relation),
  ``n!`` and ``n!!``, tuples ``(a, b)`` and lists ``[a, b]``;
* ``^`` as Python reads it, bitwise XOR: on two integers their XOR (so
  ``2^2^2^2`` is 0, as in Dynasor), on anything else an error -- exactly where
  ``parse_expr`` raises. (otbench's own grader, math-verify, reads ``^`` as a
  power; this module restates Dynasor's reading, not otbench's.)
* names: a constant or function of `_CONSTANTS` / `_FUNCTIONS` (the sympy
  names a model writes in arithmetic), else a `Symbol`; an unknown name
  applied to arguments is an undefined sympy `Function` of them, as
  ``auto_symbol`` makes it.

Where it departs from ``parse_expr``, the text is refused (`ArithError`) and
Dynasor's next parser is tried, as the source does when a parser raises:

* any other name that sympy's namespace or Python's builtins define (``S``,
  ``N``, ``Q``, ``gamma``, ``Integer``, ``max``, ...): ``parse_expr`` would
  resolve it to a sympy object or a callable; here nothing is resolved;
* ``==``, ``!=``, ``//``, ``%``, chained relations, attributes, keywords,
  strings and every character outside the arithmetic alphabet;
* the bounds: text over `MAX_CHARS` characters, nesting deeper than
  `MAX_DEPTH`, more than `MAX_NODES` operands, a number literal of more than
  `MAX_DIGITS` digits, a numeric exponent above `MAX_EXPONENT` in magnitude
  (or an integer power of more than `MAX_RESULT_DIGITS` digits), a factorial
  or binomial argument above `MAX_FACTORIAL`. Each bound keeps one parse to
  a small, fixed amount of work.
"""

import math
import re

from otbench.errors import ArgumentError

__all__ = ["ArithError", "check_tree", "parse_arith"]

MAX_CHARS = 1000
MAX_DEPTH = 64
MAX_NODES = 500
MAX_DIGITS = 40
MAX_EXPONENT = 10_000
MAX_RESULT_DIGITS = 10_000
MAX_FACTORIAL = 1000


class ArithError(ArgumentError):
    """The text is not in the arithmetic subset `parse_arith` reads, or breaks one of its bounds."""


_TOKEN = re.compile(r"""
    (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z][A-Za-z0-9]*)
  | (?P<op>\*\*|//|<=|>=|==|!=|!!|[-+*/^()\[\],<>!%=])
  | (?P<space>\s+)
""", re.VERBOSE)

# The sympy constructors `parse_expr` would reach for these names (sympy's namespace; ``abs`` is
# Python's builtin, which sympy answers with `Abs`; ``ln`` is sympy's alias of `log`).
_FUNCTIONS = ("sqrt", "cbrt", "root", "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos",
              "atan", "sinh", "cosh", "tanh", "log", "ln", "exp", "Abs", "abs", "floor", "ceiling",
              "factorial", "binomial", "gcd", "lcm")
_CONSTANTS = ("pi", "E", "I", "oo")
_BOUNDED_ARGS = ("factorial", "binomial")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ArithError(f"character {text[pos]!r} is outside the arithmetic alphabet")
        kind = m.lastgroup
        if kind == "num" and m.end() < len(text) and (text[m.end()].isalnum() or text[m.end()] == "."):
            raise ArithError("a number runs into a name")  # Python's tokenizer: invalid literal
        if kind != "space":
            out.append((kind, m.group()))
        pos = m.end()
    return out


def _reserved(name: str) -> bool:
    import builtins
    import keyword

    import sympy

    return keyword.iskeyword(name) or hasattr(builtins, name) or hasattr(sympy, name)


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]):
        import sympy

        self.sp = sympy
        self.toks = tokens
        self.i = 0
        self.depth = 0
        self.nodes = 0

    # -- the token stream ------------------------------------------------------------------
    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise ArithError("the expression ends early")
        tok = self.toks[self.i]
        if want is not None and tok[1] != want:
            raise ArithError(f"expected {want!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ArithError(f"nested deeper than {MAX_DEPTH}")

    # -- the grammar, lowest precedence first (Python's) --------------------------------------
    def relation(self):
        # A chain `a < b < c` is Python's `(a < b) and (b < c)`, as `parse_expr` evaluates it: each
        # link but the last is made a truth value (a relation of symbols has none: refused, as
        # sympy's `bool()` raises there), the first false link is the value, else the last link.
        rels = ("<", ">", "<=", ">=")
        left = self.xor()
        value = None
        while self.peek() in rels:
            op = self.take()[1]
            right = self.xor()
            link = {"<": self.sp.Lt, ">": self.sp.Gt, "<=": self.sp.Le, ">=": self.sp.Ge}[op](left, right)
            if link is NotImplemented:          # a tuple or list compared (Python raises TypeError)
                raise ArithError("a relation of a tuple or list")
            if value is None or value is self.sp.true:
                value = link
            if self.peek() in rels and value is not self.sp.false:
                if value is not self.sp.true:
                    raise ArithError("a chained relation of symbols (no truth value)")
            left = right
        return left if value is None else value

    def xor(self):
        left = self.arith()
        while self.peek() == "^":
            self.take()
            right = self.arith()
            if not (isinstance(left, self.sp.Integer) and isinstance(right, self.sp.Integer)):
                raise ArithError("^ (Python's XOR) of non-integers")  # parse_expr raises TypeError
            left = self.sp.Integer(int(left) ^ int(right))
        return left

    def arith(self):
        left = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            right = self.term()
            left = left + right if op == "+" else left - right
        return left

    def term(self):
        left = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()[1]
            right = self.unary()
            left = left * right if op == "*" else left / right
        return left

    def unary(self):
        if self.peek() in ("+", "-"):
            op = self.take()[1]
            self.enter()
            v = self.unary()
            self.depth -= 1
            return v if op == "+" else -v
        return self.power()

    def power(self):
        base = self.postfix()
        if self.peek() == "**":
            self.take()
            self.enter()
            exp = self.unary()  # Python: the exponent is a unary expression, right-associative
            self.depth -= 1
            return self.pow(base, exp)
        return base

    def postfix(self):
        v = self.atom()
        while self.peek() in ("!", "!!"):
            op = self.take()[1]
            self.bound_argument(v)
            v = self.sp.factorial(v) if op == "!" else self.sp.factorial2(v)
        return v

    def atom(self):
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ArithError(f"more than {MAX_NODES} operands")
        kind, text = self.take()
        if kind == "num":
            if sum(c.isdigit() for c in text) > MAX_DIGITS:
                raise ArithError(f"a number of more than {MAX_DIGITS} digits")
            return self.sp.Integer(text) if text.isdigit() else self.sp.Float(text)
        if kind == "name":
            return self.name(text)
        if text in ("(", "["):
            return self.group(text)
        raise ArithError(f"unexpected {text!r}")

    def group(self, opener: str):
        closer = ")" if opener == "(" else "]"
        self.enter()
        items, trailing = [], False
        while self.peek() != closer:
            items.append(self.relation())
            trailing = False
            if self.peek() != ",":
                break
            self.take(",")
            trailing = True
        self.take(closer)
        self.depth -= 1
        if opener == "[":
            return items
        if len(items) == 1 and not trailing:
            return items[0]
        return tuple(items)

    def arguments(self) -> list:
        self.take("(")
        self.enter()
        args = []
        while self.peek() != ")":
            args.append(self.relation())
            if self.peek() != ",":
                break
            self.take(",")
        self.take(")")
        self.depth -= 1
        return args

    def name(self, name: str):
        if self.peek() == "(":
            if name in _FUNCTIONS:
                args = self.arguments()
                if name in _BOUNDED_ARGS:
                    for a in args:
                        self.bound_argument(a)
                fn = {"ln": "log", "abs": "Abs"}.get(name, name)
                return getattr(self.sp, fn)(*args)
            if _reserved(name):
                raise ArithError(f"{name!r} is a name otbench does not resolve")
            return self.sp.Function(name)(*self.arguments())
        if name in _CONSTANTS:
            return getattr(self.sp, name)
        if name in _FUNCTIONS or _reserved(name):
            raise ArithError(f"{name!r} is a name otbench does not resolve")
        return self.sp.Symbol(name)

    # -- the bounds -------------------------------------------------------------------------
    def bound_argument(self, v) -> None:
        if isinstance(v, self.sp.Number) and abs(v) > MAX_FACTORIAL:
            raise ArithError(f"a factorial or binomial of a number above {MAX_FACTORIAL}")

    def pow(self, base, exp):
        sp = self.sp
        if isinstance(exp, (tuple, list)) or isinstance(base, (tuple, list)):
            return base ** exp  # Python raises TypeError, as parse_expr would
        if isinstance(exp, sp.Number) and exp.is_finite and abs(exp) > MAX_EXPONENT \
                and base not in (sp.S.Zero, sp.S.One, sp.S.NegativeOne):
            raise ArithError(f"an exponent above {MAX_EXPONENT} in magnitude")
        if isinstance(base, sp.Rational) and isinstance(exp, sp.Rational) and base not in (0, 1, -1):
            size = max(abs(base.p), abs(base.q))
            if float(abs(exp)) * math.log10(size) > MAX_RESULT_DIGITS:
                raise ArithError(f"a power of more than {MAX_RESULT_DIGITS} digits")
        return base ** exp


def parse_arith(text: str):
    """The sympy tree of `text` as Dynasor's ``parse_expr`` reads it (module docstring), or `ArithError`.

    >>> parse_arith("2*x + 1/2")
    2*x + 1/2
    >>> parse_arith("2^2^2^2")              # Python's XOR, as in Dynasor's parse_expr
    0
    >>> parse_arith("__import__('os')")
    Traceback (most recent call last):
    ...
    otbench.probe.grading._arith.ArithError: character '_' is outside the arithmetic alphabet
    """
    if not isinstance(text, str):
        raise ArithError("not a string")
    if len(text) > MAX_CHARS:
        raise ArithError(f"longer than {MAX_CHARS} characters")
    p = _Parser(_tokens(text))
    if not p.toks:
        raise ArithError("no expression")
    try:
        v = p.relation()
    except (TypeError, ValueError, ZeroDivisionError, AttributeError) as e:
        raise ArithError(f"{type(e).__name__}: {e}") from None
    if p.i != len(p.toks):
        raise ArithError(f"unexpected {p.toks[p.i][1]!r}")
    return v


def _log10_size(e, sp) -> float:
    """An upper estimate of log10 |e| for a tree of numbers and powers (0 for other nodes)."""
    if isinstance(e, sp.Rational):
        return math.log10(max(abs(e.p), abs(e.q), 1))
    if isinstance(e, sp.Float):
        return abs(float(sp.log(abs(e), 10))) if e != 0 and e.is_finite else 0.0
    if isinstance(e, sp.Pow):
        return _exponent_size(e.exp, sp) * max(_log10_size(e.base, sp), 1.0)
    if isinstance(e, (sp.Mul, sp.Add)):
        return sum(_log10_size(a, sp) for a in e.args) + len(e.args)
    return 0.0


def _exponent_size(e, sp) -> float:
    lg = _log10_size(e, sp)
    return 10.0 ** min(lg, 300.0)


def check_tree(tree) -> None:
    """Refuse (`ArithError`) a tree another parser built beyond `parse_arith`'s bounds.

    ``latex2sympy`` keeps ``9^{9^{9}}`` as an unevaluated power, which `simplify` or `N` would
    then expand; the same node and exponent bounds as `parse_arith` apply to it before any
    comparison runs.
    """
    import sympy as sp

    seen = 0
    for node in sp.preorder_traversal(tree) if isinstance(tree, sp.Basic) else ():
        seen += 1
        if seen > 4 * MAX_NODES:
            raise ArithError(f"a tree of more than {4 * MAX_NODES} nodes")
        if isinstance(node, sp.Pow) and not node.exp.free_symbols and node.base not in (0, 1, -1):
            if _exponent_size(node.exp, sp) > MAX_EXPONENT:
                raise ArithError(f"an exponent above {MAX_EXPONENT} in magnitude")
        if isinstance(node, (sp.factorial, sp.factorial2, sp.binomial)):
            for a in node.args:
                if isinstance(a, sp.Number) and abs(a) > MAX_FACTORIAL:
                    raise ArithError(f"a factorial or binomial of a number above {MAX_FACTORIAL}")
