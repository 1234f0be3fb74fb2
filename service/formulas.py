"""sympy's side of POST /v1/derivatives: derivative formulas, their exact values, text and LaTeX.

Imported only when a derivative is asked for, so the rest of the service never loads sympy. The
formulas are differentiated from the sympy form of our own syntax tree (`ParsedExpression.sympy`),
never from text. The caller bounds the time; `simplify` gets a short budget of its own.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from functools import cache
from typing import Any, cast

import sympy
from sympy.printing.latex import LatexPrinter
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter

from service.budget import time_budget
from service.errors import BudgetExceeded
from service.parser import ParsedExpression, postorder
from service.symbolic import from_tree, relu

_SIMPLIFY_OVERRUN = "simplify_overrun"  # never leaves this module: the formula stays unsimplified


def symbol(name: str) -> sympy.Symbol:
    """A variable as the sympy form writes it: real, which spares sympy many assumption checks."""
    return sympy.Symbol(name, real=True)


def derivatives(
    parsed: ParsedExpression,
    variables: list[str],
    bindings: Mapping[str, float],
    simplify_operations: int,
    simplify_seconds: float,
    piece: sympy.Expr,
) -> dict[str, Any]:
    """The expression's LaTeX and size, and for each variable the derivative's text, LaTeX,
    exact value at the bindings and size (`count_ops`).

    `simplify` is tried on derivatives of at most `simplify_operations` operations, within
    `simplify_seconds` for all of them together. `piece` is the output on the piece the
    engine's forward pass found the bindings on (`symbolic.engine_piece`; the function itself
    when it has no relu): the exact values are its derivatives', the formulas the function's.
    """
    function = parsed.sympy
    # The bindings as exact rationals: every float is a binary fraction, so this is the point the
    # engine computed at, with no rounding of its own.
    at = {symbol(name): sympy.Rational(value) for name, value in bindings.items()}
    simplify_left = simplify_seconds
    formulas = {}
    for name in variables:
        derivative = sympy.diff(function, symbol(name))
        operations = int(sympy.count_ops(derivative))
        if 0 < operations <= simplify_operations and simplify_left > 0:
            derivative, operations, spent = _simplified(derivative, operations, simplify_left)
            simplify_left -= spent
        # one piece, the whole function: its derivative is the one just taken
        on_piece = derivative if piece is function else sympy.diff(piece, symbol(name))
        formulas[name] = {
            "text": text(derivative),
            "latex": latex(derivative),
            "value": exact_value(on_piece, at),
            "operations": operations,
        }
    return {
        "latex": latex(function),
        "intermediates": intermediates(parsed),
        "operations": int(sympy.count_ops(function)),
        "derivatives": formulas,
    }


def intermediates(parsed: ParsedExpression) -> list[dict[str, str]]:
    """Each named value of a program the output is computed from, as LaTeX in the inputs, in
    the order the program computes them: the order its statements are written in, which is
    where each node is written (the tree's own order is depth first)."""
    named = [
        (node.span[0], node.assigned, node)
        for node in parsed.postorder()
        if node.kind == "operation" and node.assigned and node is not parsed.root
    ]
    return [
        {"name": name, "latex": latex(from_tree(postorder(node), node))}
        for _start, name, node in sorted(named, key=lambda entry: entry[0])
    ]


def _simplified(
    derivative: sympy.Expr, operations: int, seconds: float
) -> tuple[sympy.Expr, int, float]:
    """sympy's simplification within `seconds`, kept only if smaller: (formula, size, time spent).

    `simplify` tries rewrites whose cost is hard to foresee, so it gets a budget of its own, and
    an overrun leaves the derivative as `diff` gave it.
    """
    start = time.monotonic()
    try:
        with time_budget(seconds, _SIMPLIFY_OVERRUN):
            simpler = sympy.simplify(derivative)
            size = int(sympy.count_ops(simpler))
    except BudgetExceeded as overrun:
        if overrun.kind != _SIMPLIFY_OVERRUN:
            raise  # the request's symbolic budget ran out meanwhile: that one is reported
        return derivative, operations, time.monotonic() - start
    spent = time.monotonic() - start
    # Kept only when shorter, and written with the functions the derivative already used: a
    # learner should recognise `1 - tanh(a)**2`, which sympy would write with `cosh(a)`.
    if size < operations and _functions(simpler) <= _functions(derivative):
        return simpler, size, spent
    return derivative, operations, spent


def _functions(expression: sympy.Expr) -> set[type]:
    return {type(call) for call in expression.atoms(sympy.Function)}


def exact_value(derivative: sympy.Expr, at: Mapping[sympy.Symbol, sympy.Rational]) -> float | None:
    """The derivative at the point, computed exactly and then rounded to a float; None where it
    is not a finite real number (the engine's rounding can step off a singular point)."""
    exact = derivative.xreplace(at)
    number = sympy.N(exact, 30)
    if not (number.is_real and number.is_finite):
        return None
    value = float(number)
    return value if math.isfinite(value) else None


@cache
def warm_up() -> None:
    """Run every step once, outside any budget: sympy imports much of itself on first use
    (`simplify` alone 0.4 s), which would be charged to the first request's budgets, and an
    import interrupted by a budget could leave a module half made for every later request."""
    x = symbol("x")
    sympy.simplify(2 * x / (x - 1) - (x**2 - 1) / (x - 1) ** 2)
    formula = sympy.tanh(x) * sympy.exp(x) * sympy.log(x) * relu(x) + sympy.Float(0.5) * x**1.5
    derivative = sympy.diff(formula, x)
    sympy.count_ops(derivative)
    text(derivative), latex(derivative)
    exact_value(derivative, {x: sympy.Rational(0.75)})


# -- printing ---------------------------------------------------------------------------------


def _float_text(value: sympy.Float) -> str:
    """A float constant as Python writes it (0.1, not 0.10000000000000001): every constant of
    the language is a double, and so is the shortest text that reads back as it."""
    return repr(float(value))


class _Text(StrPrinter):  # type: ignore[misc]  # sympy ships no types: its printers are Any
    """sympy's own syntax, with floats written the shortest way and relu as sympy's `Max`, so
    that sympy reads the text back as the same function."""

    def _print_Float(self, expr: sympy.Float) -> str:
        return _float_text(expr)

    def _print_relu(self, expr: relu) -> str:
        return f"Max(0, {self._print(expr.args[0])})"


class _AnswerText(_Text):
    """The formula in the answers' language, the service's own grammar, so that /v1/check reads
    it back as an answer: e as `exp(1)`, relu as `relu`, and |x| and sign(x), which sympy makes
    of `(x**2)**0.5` and its derivative, through the powers they came from."""

    def _print_Exp1(self, expr: sympy.Expr) -> str:
        return "exp(1)"

    def _print_relu(self, expr: relu) -> str:
        return f"relu({self._print(expr.args[0])})"

    def _print_Abs(self, expr: sympy.Abs) -> str:
        # Bracketed whole, as a function call is: it may be the base of a power, `Abs(c)**2.0`.
        return f"(({self.parenthesize(expr.args[0], PRECEDENCE['Pow'])}**2)**0.5)"

    def _print_sign(self, expr: sympy.sign) -> str:
        # x/|x|: undefined at x = 0, where sympy's sign is 0, but no derivative is taken there
        # either (the engine's `(x**2)**0.5` divides by 0).
        x = expr.args[0]
        numerator = self.parenthesize(x, PRECEDENCE["Mul"])
        return f"({numerator}/({self.parenthesize(x, PRECEDENCE['Pow'])}**2)**0.5)"


# A letter, or a lowercase Greek letter LaTeX has a command for, then perhaps digits: names
# written as symbols.
_GREEK = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho "
    "sigma tau upsilon phi chi psi omega"
)
_MATHEMATICAL_NAME = re.compile(rf"([A-Za-z]|{'|'.join(_GREEK.split())})([0-9]*)")


class _Latex(LatexPrinter):  # type: ignore[misc]  # sympy ships no types: its printers are Any
    """sympy's LaTeX, with relu's derivative as cases, plain floats and safe variable names."""

    def _print_Float(self, expr: sympy.Float) -> str:
        mantissa, _e, exponent = _float_text(expr).partition("e")
        if not exponent:
            return mantissa
        return rf"{mantissa} \cdot 10^{{{int(exponent)}}}"

    def _print_Heaviside(self, expr: sympy.Heaviside, exp: Any = None) -> str:
        # The engine's relu has derivative 1 for x > 0 and 0 otherwise (H(0) = 0).
        condition = self._print(sympy.StrictGreaterThan(expr.args[0], 0))
        cases = rf"1 & \text{{if }} {condition} \\ 0 & \text{{otherwise}}"
        tex = rf"\begin{{cases}} {cases} \end{{cases}}"
        if exp is not None:
            return rf"\left({tex}\right)^{{{exp}}}"
        # Standing alone it needs no brackets; as a factor or a term it does.
        return rf"\left({tex}\right)" if self._print_level > 1 else tex

    def _print_Symbol(self, expr: sympy.Symbol, style: str = "plain") -> str:
        # Two inputs must never look alike: sympy would write both `x1` and `x_1` as x_{1},
        # `xdot` as an x with a dot, and `distance` as eight italic letters, a product. So a
        # letter or a Greek letter's name, perhaps with digits as its subscript, is written as
        # sympy writes it (`x`, `x_{1}`, `\alpha_{2}`), and every other name as it is spelt.
        name: str = expr.name
        match = _MATHEMATICAL_NAME.fullmatch(name)
        if match is None or match[1] == "pi":  # no π: the language has no such constant
            return r"\mathit{" + name.replace("_", r"\_") + "}"
        letter, digits = match.groups()
        written = f"\\{letter}" if len(letter) > 1 else letter
        return f"{written}_{{{digits}}}" if digits else written


def text(expression: sympy.Expr) -> str:
    """The formula in sympy's syntax, e.g. `c*Heaviside(a*b, 0)`."""
    return cast(str, _Text().doprint(expression))


def answer_text(expression: sympy.Expr) -> str:
    """The formula as an answer to /v1/check writes it, e.g. `b*exp(a*b)`: the revealed
    `expected` of a derivative, which a learner may send back as it is."""
    return cast(str, _AnswerText().doprint(expression))


def latex(expression: sympy.Expr) -> str:
    return cast(str, _Latex().doprint(expression))
