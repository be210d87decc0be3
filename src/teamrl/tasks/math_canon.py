"""The meaning of a math expression as written, spelling aside: what the echo rule compares.

An answer that hands the question's expression back (`teamrl.tasks.math_echo`) must be recognised
however it is spelled: `\\dfrac` or `\\frac`, `\\left(` or `(`, `\\frac12` or `\\frac{1}{2}`, `x + 0`,
`1 \\cdot x`, `(x)`, `[x]`, `--x`, terms in another order. :func:`canonical` parses one expression
(LaTeX or plain) into a tree and normalises it without evaluating anything: brackets and spacing
vanish, `a - b` is `a + (-1)b`, `a / b` is `a b^{-1}`, `\\sqrt[n]{a}` is `a^{1/n}`, a decimal is the
fraction it spells, sums and products are flattened and their operands sorted, and the trivial
identities are removed (`+ 0`, `* 1`, `/ 1`, `^1`, `1^y`, `0 \\cdot y`, an even number of minus signs,
and `t - t`, `x x^{-1}` where `t`, `x` are not all numbers). `99^2+99+1` stays a sum and `8 - 8` stays
a difference: nothing is computed, so the result says how an expression is built, not its value.

Every function here is linear in its input up to the bounds below and never raises on `str` input;
what it cannot read is `None`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Union

from teamrl.tasks.math_shape import ascii_digits

__all__ = ["MAX_CANON_CHARS", "Node", "canonical", "subtrees"]

MAX_CANON_CHARS = 2000
"""Longest expression read; a longer one has no canonical form (questions' formulas are shorter)."""
_MAX_DEPTH = 40  # bracket and operator nesting, so that recursion stays far from Python's limit

Node = tuple[Union[str, Fraction, tuple], ...]
"""('n', Fraction) a number, ('v', name) a symbol, ('+', terms), ('*', factors), ('^', base, exponent),
('f', name, args) a function or command applied, ('t', items) a list, ('=', left, right)."""

# Spellings that print the same, written one way (longest first where one is a prefix of another).
_RESPELL = [
    (
        re.compile(
            r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|Biggl|Biggr|bigm|Bigm|big|Big|bigg|Bigg)"
            r"(?![A-Za-z])\.?"
        ),
        "",
    ),
    (
        re.compile(
            r"\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits|mathrm|mathit|mathbf|boldsymbol)(?![A-Za-z])"
        ),
        "",
    ),
    (re.compile(r"\\(?:text|textrm|textbf|textit|mbox|hbox)\s*\{[A-Za-z .]*\}"), ""),  # a unit or a word aside
    (re.compile(r"\\[,;:! ]|\\q?quad(?![A-Za-z])|[$~]"), " "),  # a space still ends a command name
    (re.compile(r"\\[dtc]frac(?![A-Za-z])"), r"\\frac"),
    (re.compile(r"\\[dt]binom(?![A-Za-z])"), r"\\binom"),
    (re.compile(r"\*\*"), "^"),  # Python's power
    (re.compile(r"\\(?:cdot|times|ast|bullet)(?![A-Za-z])|[×·⋅∗]"), "*"),
    (re.compile(r"\\div(?![A-Za-z])|÷"), "/"),
    (re.compile(r"[−–]"), "-"),
    (re.compile(r"\\[{\[]|\\l(?:brace|brack|paren)(?![A-Za-z])"), "("),
    (re.compile(r"\\[}\]]|\\r(?:brace|brack|paren)(?![A-Za-z])"), ")"),
    (re.compile(r"\\[lr]?vert(?![A-Za-z])|\\mid(?![A-Za-z])"), "|"),
    (re.compile(r"\\(?:[lc]dots|dots[bc]?|ldots|cdots)(?![A-Za-z])|\.\.\.|…"), r"\\dots"),
    (re.compile(r"\\%|%"), r"\\%"),
]
_TOKEN_RE = re.compile(r"\d+(?:\.\d+)?|\.\d+|\\[A-Za-z]+|\\.|[A-Za-z]|[^\s]")
_OPEN, _CLOSE = ("(", "[", "{"), (")", "]", "}")
_NEGATIVE_ONE, _ZERO, _ONE = ("n", Fraction(-1)), ("n", Fraction(0)), ("n", Fraction(1))
_FUNCTIONS = frozenset(
    "sin cos tan sec csc cot arcsin arccos arctan sinh cosh tanh log ln lg exp gcd lcm max min det deg arg "
    "lfloor lceil".split()
)
_CLOSERS = {"\\lfloor": "\\rfloor", "\\lceil": "\\rceil"}
_TWO_ARGS = frozenset(("\\frac", "\\binom"))


class _Unreadable(Exception):
    """The expression is not one this parser reads; :func:`canonical` answers None."""


def respell(text: str) -> str:
    """`text` with each spelling of a symbol written one way and spacing removed.

    >>> respell(r"\\dfrac{1}{2} \\cdot \\left( x \\right)")
    '\\\\frac{1}{2} * ( x )'
    """
    text = ascii_digits(text)
    for pattern, replacement in _RESPELL:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


class _Parser:
    """Recursive descent over tokens: sum > product (implicit too) > sign > power > postfix > atom."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.pos, self.depth, self.bars = tokens, 0, 0, 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise _Unreadable(f"expected {expected!r}, found {token!r}")
        self.pos += 1
        return token

    def descend(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Unreadable("nested too deep")

    def top(self) -> Node:
        """A whole expression: a relation, a list or a sum."""
        items = [self.relation()]
        while self.peek() == ",":
            self.take()
            items.append(self.relation())
        return items[0] if len(items) == 1 else ("t", tuple(items))

    def relation(self) -> Node:
        left = self.sum()
        if self.peek() == "=":
            self.take()
            return ("=", left, self.sum())
        return left

    def sum(self) -> Node:
        self.descend()
        terms = [self.product()]
        while self.peek() in ("+", "-"):
            sign = self.take()
            term = self.product()
            terms.append(term if sign == "+" else _negate(term))
        self.depth -= 1
        return _sum(terms)

    def product(self) -> Node:
        factors = [self.signed()]
        while True:
            token = self.peek()
            if token in ("*", "/"):
                self.take()
                factor = self.signed()
                factors.append(factor if token == "*" else _power(factor, _NEGATIVE_ONE))
            elif token is not None and self.starts_atom(token):
                factors.append(self.power())  # implicit: 2x, 5\sqrt{3}, (a)(b)
            else:
                return _product(factors)

    def starts_atom(self, token: str) -> bool:
        if token == "|":
            return self.bars == 0  # inside |...| a bar closes
        return (
            token[0].isalnum()
            or token[0] == "."
            or token in _OPEN
            or (token.startswith("\\") and token not in ("\\%", "\\rfloor", "\\rceil", "\\choose"))
        )

    def signed(self) -> Node:
        if self.peek() in ("+", "-"):
            sign = self.take()
            self.descend()
            inner = self.signed()
            self.depth -= 1
            return inner if sign == "+" else _negate(inner)
        return self.power()

    def power(self) -> Node:
        base = self.postfix(self.atom())
        while self.peek() in ("^", "_"):
            op = self.take()
            argument = self.argument(whole_number=op == "^")
            base = _power(base, argument) if op == "^" else ("f", "_", (base, argument))
            base = self.postfix(base)
        return base

    def postfix(self, node: Node) -> Node:
        while self.peek() in ("!", "\\%", "'"):
            node = ("f", self.take(), (node,))
        return node

    def argument(self, whole_number: bool = False) -> Node:
        """A TeX argument: a group, a signed number after ^, else one token (`\\frac12` reads 1 then 2)."""
        token = self.peek()
        if token is None:
            raise _Unreadable("a missing argument")
        if token in _OPEN:
            return self.group()
        if token == "-" and whole_number:
            self.take()
            return _negate(self.argument(whole_number))
        if token[0].isdigit() and len(token) > 1 and not whole_number:
            self.tokens[self.pos] = token[1:]  # TeX takes one digit as an argument
            return _number(token[0])
        if token.startswith("\\"):
            return self.atom()
        self.take()
        return _number(token) if token[0].isdigit() or token[0] == "." else ("v", token)

    def group(self) -> Node:
        opener = self.take()
        self.descend()
        inner = self.top()
        if self.peek() == "\\choose":  # {n \choose k}
            self.take()
            inner = ("f", "\\binom", (inner, self.top()))
        self.depth -= 1
        if self.peek() not in _CLOSE:
            raise _Unreadable(f"unclosed {opener!r}")
        self.take()
        return inner  # a bracket says nothing about meaning: (x), [x] and {x} are x

    def atom(self) -> Node:
        token = self.peek()
        if token is None:
            raise _Unreadable("an operand is missing")
        if token in _OPEN:
            return self.group()
        if token == "|":
            self.take()
            self.bars += 1
            inner = self.top()
            self.bars -= 1
            self.take("|")
            return ("f", "abs", (inner,))
        self.take()
        if token[0].isdigit() or token[0] == ".":
            return _number(token)
        if token[0].isalpha():
            return ("v", token)
        if not token.startswith("\\") or token in ("\\%", "\\rfloor", "\\rceil", "\\choose"):
            raise _Unreadable(f"unexpected {token!r}")
        return self.command(token)

    def command(self, name: str) -> Node:
        if name in _TWO_ARGS:
            first, second = self.argument(), self.argument()
            return (
                _product([first, _power(second, _NEGATIVE_ONE)]) if name == "\\frac" else ("f", name, (first, second))
            )
        if name == "\\sqrt":
            index = _number("2")
            if self.peek() == "[":
                index = self.group()
            return _power(self.argument(), _power(index, _NEGATIVE_ONE))
        if name[1:] in _FUNCTIONS:
            return self.function(name)
        if self.peek() == "{":  # \overline{7}, \operatorname{...}: a command applied to its argument
            return ("f", name, (self.group(),))
        return ("v", name)  # \pi, \infty, \theta, \circ, \dots

    def function(self, name: str) -> Node:
        """`\\sin x`, `\\sin^2 x`, `\\log_2 64`, `\\gcd(a, b)`, `\\lfloor x \\rfloor`."""
        power = base = None
        while self.peek() in ("^", "_"):
            if self.take() == "^":
                power = self.argument(whole_number=True)
            else:
                base = self.argument()
        if name in _CLOSERS:
            self.descend()
            inner = self.top()
            self.depth -= 1
            self.take(_CLOSERS[name])
        elif self.peek() in _OPEN:
            inner = self.group()
        else:
            inner = self.power()
        node: Node = ("f", name, (inner,) if base is None else (inner, base))
        return node if power is None else _power(node, power)


def _number(text: str) -> Node:
    """A literal; a decimal with a fractional part is the fraction it spells (0.5 is 1/2, 3.60 is 18/5)."""
    value = Fraction(text)
    if value.denominator == 1:
        return ("n", value)
    return _product([("n", Fraction(value.numerator)), _power(("n", Fraction(value.denominator)), _NEGATIVE_ONE)])


def _negate(node: Node) -> Node:
    if node[0] == "n":
        return ("n", -node[1])  # type: ignore[operator]
    return _product([_NEGATIVE_ONE, node])


def _key(node: Node) -> str:
    return repr(node)


def _cancel(nodes: list[Node], opposite: Callable[[Node], Node]) -> list[Node]:
    """`nodes` without each pair of a node and its opposite (t and -t in a sum, x and 1/x in a product)."""
    counts = Counter(nodes)
    for node in list(counts):
        if _numeric(node):
            continue  # 8 - 8 or 3/3 is arithmetic, work to do; x - x is an identity
        other = opposite(node)
        if other != node and other in counts:
            pairs = min(counts[node], counts[other])
            counts[node] -= pairs
            counts[other] -= pairs
    kept = []
    for node in nodes:  # in their order, each as often as it survived
        if counts[node] > 0:
            counts[node] -= 1
            kept.append(node)
    return kept


def _numeric(node: Node) -> bool:
    """Whether `node` is built from numbers only (no symbol, no function)."""
    if node[0] == "n":
        return True
    if node[0] == "^":
        return _numeric(node[1]) and _numeric(node[2])  # type: ignore[arg-type]
    if node[0] in ("+", "*"):
        return all(_numeric(part) for part in node[1])  # type: ignore[union-attr, arg-type]  # parts of a sum or product are nodes
    return False


def _sum(terms: list[Node]) -> Node:
    flat: list[Node] = []
    for term in terms:
        flat.extend(term[1] if term[0] == "+" else (term,))  # type: ignore[arg-type]
    kept = _cancel([t for t in flat if t != _ZERO], _negate)
    if not kept:
        return _ZERO
    return kept[0] if len(kept) == 1 else ("+", tuple(sorted(kept, key=_key)))


def _product(factors: list[Node]) -> Node:
    flat: list[Node] = []
    for factor in factors:
        flat.extend(factor[1] if factor[0] == "*" else (factor,))  # type: ignore[arg-type]
    if _ZERO in flat:
        return _ZERO
    negative = False
    for i, factor in enumerate(flat):  # every sign comes out front: 2(-3) and -(2 \cdot 3) are one product
        if factor[0] == "n" and factor[1] < 0:  # type: ignore[operator]
            negative, flat[i] = not negative, ("n", -factor[1])  # type: ignore[operator]
    kept = sorted(_cancel([f for f in flat if f != _ONE], lambda f: _power(f, _NEGATIVE_ONE)), key=_key)
    if negative:
        numbers = [i for i, f in enumerate(kept) if f[0] == "n"]
        if numbers:
            kept[numbers[0]] = ("n", -kept[numbers[0]][1])  # type: ignore[operator]
        else:
            kept.insert(0, _NEGATIVE_ONE)
    if not kept:
        return _NEGATIVE_ONE if negative else _ONE
    return kept[0] if len(kept) == 1 else ("*", tuple(kept))


def _power(base: Node, exponent: Node) -> Node:
    """`base^exponent` with `x^1`, `1^y`, `(x^a)^b = x^{ab}` and `(xy)^k = x^k y^k` applied, so that
    `\\frac{3}{\\sqrt{27}}` and `3 \\cdot 27^{-1/2}` are one product."""
    if exponent == _ONE or base == _ONE or (base == _NEGATIVE_ONE and exponent == _NEGATIVE_ONE):
        return base
    if base[0] == "^":
        return _power(base[1], _product([base[2], exponent]))  # type: ignore[arg-type, list-item]  # the base and exponent of a power are nodes
    if base[0] == "*":
        return _product([_power(factor, exponent) for factor in base[1]])  # type: ignore[union-attr, arg-type]  # factors of a product are nodes
    return ("^", base, exponent)


def canonical(text: str) -> Node | None:
    """The normalised tree of one expression, or None when it is not one this reads.

    >>> canonical(r"\\left(\\dfrac{1}{2}\\right) + 0") == canonical("1/2") == canonical(r"\\frac12 \\cdot 1")
    True
    >>> canonical("99^2+99+1") == canonical("1 + 99 + 99^{2}"), canonical("99^2+100") == canonical("99^2+99+1")
    (True, False)
    >>> canonical(r"\\sqrt{242}") == canonical(r"242^{1/2}") == canonical(r"\\sqrt[2]{(242)}")
    True
    """
    if not isinstance(text, str) or len(text) > MAX_CANON_CHARS:
        return None
    tokens = _TOKEN_RE.findall(respell(text))
    if not tokens:
        return None
    parser = _Parser(tokens)
    try:
        node = parser.top()
    except (_Unreadable, ValueError, ZeroDivisionError):
        return None
    return node if parser.peek() is None else None


def subtrees(node: Node) -> list[Node]:
    """`node` and every expression inside it (operands, arguments, list items), in no set order.

    >>> sorted(map(repr, subtrees(canonical("x + 1"))))
    ["('+', (('n', Fraction(1, 1)), ('v', 'x')))", "('n', Fraction(1, 1))", "('v', 'x')"]
    """
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        found.append(current)
        for part in current[1:]:
            if isinstance(part, tuple):
                stack.extend(p for p in (part if part and isinstance(part[0], tuple) else (part,)))
    return found
