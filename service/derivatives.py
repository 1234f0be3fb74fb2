"""Three ways to a derivative, side by side: reverse mode, symbolic (sympy) and numeric.

Reverse mode is the engine's backward pass. The symbolic derivative is sympy's, of the sympy form
built from our own syntax tree (never from text), evaluated exactly at the bindings. The numeric
one is a difference quotient of the same function the engine computes. The symbolic work is
bounded three ways: a node limit checked before sympy sees anything, real symbols, and a time
budget that interrupts sympy where it is (see `service.budget`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import sympy
from sympy.printing.latex import LatexPrinter
from sympy.printing.str import StrPrinter

from service.budget import time_budget
from service.engine import Value
from service.errors import (
    AutogradError,
    BindingError,
    BudgetExceeded,
    DomainError,
    LimitExceeded,
)
from service.evaluator import Evaluator
from service.i18n import _
from service.parser import ParsedExpression

SYMBOLIC_TOO_LARGE = "symbolic_too_large"
SYMBOLIC_TOO_EXPENSIVE = "symbolic_too_expensive"
SYMBOLIC_KINDS = (SYMBOLIC_TOO_LARGE, SYMBOLIC_TOO_EXPENSIVE)  # refusals of symbolic work
_SIMPLIFY_OVERRUN = "simplify_overrun"  # never leaves this module: the formula stays unsimplified

# The default step of the difference quotients, relative to max(1, |x|). A central difference
# errs by about h² |f'''| / 6 (truncation) plus eps |f| / h (rounding); the sum is smallest at
# h ~ eps^(1/3), about 6e-6. The forward difference uses the same h, so its O(h) truncation
# error shows beside the central one's O(h²): the lesson's "approximate, and depends on h".
EPSILON = sys.float_info.epsilon
CENTRAL_STEP = EPSILON ** (1 / 3)

# Reverse mode and the exact value agree when they differ by no more than float rounding: a
# relative 1e-9 of the derivative, or 1e-12 of the largest number the graph handled, since terms
# that cancel (`b - c` with b near c, `1 - tanh(x)**2` near saturation) lose digits relative to
# what cancelled, not to the result.
AGREE_RELATIVE = 1e-9
AGREE_SCALE = 1e-12


@dataclass(frozen=True)
class SymbolicLimits:
    """How much symbolic work one request may cause."""

    max_nodes: int = 100  # operator nodes of the expression sympy is given
    seconds: float = 2.0  # all symbolic work of one request: build, diff, simplify, print
    # `simplify` is tried only on a derivative this small (sympy's `count_ops`) ...
    simplify_operations: int = 50
    # ... and within this share of the time, for all derivatives of a request together.
    simplify_share: float = 0.25


DEFAULT_SYMBOLIC_LIMITS = SymbolicLimits()


class SymbolicTooExpensive(BudgetExceeded):
    """The symbolic work of a request ran out of time, and was stopped where it was."""

    def __init__(self, seconds: float) -> None:
        message = _(
            "symbolic differentiation of this expression took longer than the {seconds} s it "
            "may take: its derivative formulas grow too large; reverse mode (POST /v1/gradients) "
            "has no such limit",
            seconds=f"{seconds:g}",
        )
        AutogradError.__init__(self, SYMBOLIC_TOO_EXPENSIVE, message)
        self.seconds = seconds


class Differentiator:
    """The three derivatives of an expression, under an evaluator's limits and symbolic limits."""

    def __init__(
        self,
        evaluator: Evaluator | None = None,
        limits: SymbolicLimits = DEFAULT_SYMBOLIC_LIMITS,
    ) -> None:
        self.evaluator = evaluator or Evaluator()
        self.limits = limits
        _warm_up()

    def differentiate(
        self,
        expression: str,
        bindings: Mapping[str, float],
        variables: Sequence[str] | None = None,
        h: float | None = None,
    ) -> dict[str, Any]:
        """Value, LaTeX, and each derivative three ways, with what each way cost."""
        compiled = self.evaluator.compile(expression)
        parsed = compiled.parsed
        self.evaluator.bind(parsed, bindings)  # binding errors before any expensive work
        chosen = _chosen(parsed, variables)
        self.check_size(parsed, expression)
        document = self.evaluator.evaluate(expression, bindings)
        symbolic = self.symbolic(parsed, chosen, bindings)
        numeric = {name: _numeric(self.evaluator, compiled, bindings, name, h) for name in chosen}
        scale = _rounding_scale(document)
        derivatives = []
        for name in chosen:
            reverse = document["gradients"][name]
            exact = symbolic["derivatives"][name]
            derivatives.append(
                {
                    "variable": name,
                    "reverse_mode": reverse,
                    "symbolic": exact,
                    "numeric": _with_errors(numeric[name], exact["value"]),
                    "agree": _agree(reverse, exact["value"], scale),
                }
            )
        nodes = document["graph"]["nodes"]
        operations = sum(1 for node in nodes if node["kind"] == "operation")
        return {
            "expression": expression,
            "latex": symbolic["latex"],
            "value": document["value"],
            "derivatives": [
                {key: value for key, value in item.items() if key != "agree"}
                for item in derivatives
            ],
            "cost": {
                "reverse_mode": {
                    "nodes": len(nodes),
                    "forward_steps": operations,
                    "backward_steps": sum(len(step["sends"]) for step in document["backward"]),
                },
                "numeric": {
                    "central_evaluations": 2 * len(chosen),
                    "forward_evaluations": len(chosen) + 1 if chosen else 0,
                },
                "symbolic": {
                    "expression_operations": symbolic["operations"],
                    "derivative_operations": sum(
                        item["symbolic"]["operations"] for item in derivatives
                    ),
                },
            },
            "agree": all(item["agree"] for item in derivatives),
        }

    def check_size(self, parsed: ParsedExpression, expression: str) -> None:
        """Refuse, before sympy sees it, an expression too large for symbolic work."""
        operators = sum(1 for node in parsed.postorder() if node.kind == "operation")
        if operators > self.limits.max_nodes:
            raise LimitExceeded(
                SYMBOLIC_TOO_LARGE,
                _(
                    "the expression has {count} operators; symbolic differentiation takes at "
                    "most {maximum}",
                    count=operators,
                    maximum=self.limits.max_nodes,
                ),
                (0, len(expression)),
                "max_symbolic_nodes",
                self.limits.max_nodes,
            )

    def symbolic(
        self, parsed: ParsedExpression, chosen: list[str], bindings: Mapping[str, float]
    ) -> dict[str, Any]:
        """The expression's LaTeX and size, and each derivative as text, LaTeX, exact value and
        size; all within one time budget."""
        try:
            with time_budget(self.limits.seconds, SYMBOLIC_TOO_EXPENSIVE):
                return self._symbolic(parsed, chosen, bindings)
        except BudgetExceeded as overrun:
            if overrun.kind != SYMBOLIC_TOO_EXPENSIVE:
                raise  # an enclosing budget (the whole request's) ran out: that one is reported
            raise SymbolicTooExpensive(overrun.seconds) from None
        except RecursionError:
            # sympy recurses over the formula; a derivative nested deep enough exhausts the stack.
            raise LimitExceeded(
                SYMBOLIC_TOO_LARGE,
                _("the derivative nests too deeply for symbolic differentiation"),
                (0, len(parsed.text)),
                "max_symbolic_nodes",
                self.limits.max_nodes,
            ) from None

    def _symbolic(
        self, parsed: ParsedExpression, chosen: list[str], bindings: Mapping[str, float]
    ) -> dict[str, Any]:
        function = parsed.sympy
        # The bindings as exact rationals: every float is a binary fraction, so this is the
        # point the engine computed at, with no rounding of its own.
        at = {sympy.Symbol(n, real=True): sympy.Rational(v) for n, v in bindings.items()}
        simplify_left = self.limits.seconds * self.limits.simplify_share
        derivatives = {}
        for name in chosen:
            derivative = sympy.diff(function, sympy.Symbol(name, real=True))
            operations = int(sympy.count_ops(derivative))
            if 0 < operations <= self.limits.simplify_operations and simplify_left > 0:
                derivative, operations, spent = _simplified(derivative, operations, simplify_left)
                simplify_left -= spent
            derivatives[name] = {
                "text": text(derivative),
                "latex": latex(derivative),
                "value": exact_value(derivative, at),
                "operations": operations,
            }
        return {
            "latex": latex(function),
            "operations": int(sympy.count_ops(function)),
            "derivatives": derivatives,
        }


@cache
def _warm_up() -> None:
    """Run every step once, outside any budget: sympy imports much of itself on first use
    (`simplify` alone 0.4 s), which would be charged to the first request's budgets, and an
    import interrupted by a budget could leave a module half made for every later request."""
    from service.symbolic import relu

    x = sympy.Symbol("x", real=True)
    sympy.simplify(2 * x / (x - 1) - (x**2 - 1) / (x - 1) ** 2)
    formula = sympy.tanh(x) * sympy.exp(x) * sympy.log(x) * relu(x) + sympy.Float(0.5) * x**1.5
    derivative = sympy.diff(formula, x)
    sympy.count_ops(derivative)
    text(derivative), latex(derivative)
    exact_value(derivative, {x: sympy.Rational(0.75)})


def _chosen(parsed: ParsedExpression, variables: Sequence[str] | None) -> list[str]:
    """The variables to differentiate by, in the order of first use: all, or those asked for."""
    if variables is None:
        return list(parsed.variables)
    unknown = sorted({name for name in variables if name not in parsed.variable_set})
    if unknown:
        raise BindingError(
            "unknown_variables",
            _(
                "cannot differentiate by {names}: not in the expression, whose variables are "
                "{variables}",
                names=", ".join(unknown),
                variables=", ".join(parsed.variables) or "none",
            ),
            unknown,
        )
    asked = set(variables)
    return [name for name in parsed.variables if name in asked]


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


def _numeric(
    evaluator: Evaluator, compiled: Any, bindings: Mapping[str, float], name: str, h: float | None
) -> dict[str, Any]:
    """Central and forward difference quotients of the engine's own function along `name`."""
    x = bindings[name]
    if h is None:
        step = CENTRAL_STEP * max(1.0, abs(x))
        # x + h rounds; taking h as (x + h) - x makes the step the one the function really sees.
        h = (x + step) - x
    points = {}
    for offset in (h, -h, 0.0):
        shifted = {**bindings, name: x + offset}
        points[offset] = _value_at(evaluator, compiled, shifted)
    above, below, centre = points[h], points[-h], points[0.0]
    central = (above - below) / (2 * h) if above is not None and below is not None else None
    forward = (above - centre) / h if above is not None and centre is not None else None
    return {"h": h, "central": _finite(central), "forward": _finite(forward)}


def _value_at(evaluator: Evaluator, compiled: Any, bindings: Mapping[str, float]) -> float | None:
    """The expression's value at `bindings`, or None where it is not defined (log of a
    negative step, an overflow): a difference quotient that needs it cannot be formed."""
    try:
        root, _results = compiled.build(evaluator.bind(compiled.parsed, bindings))
    except DomainError:
        return None
    return root.data if isinstance(root, Value) else float(root)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _with_errors(numeric: dict[str, Any], exact: float | None) -> dict[str, Any]:
    def error(approximation: float | None) -> float | None:
        if approximation is None or exact is None:
            return None
        return _finite(abs(approximation - exact))

    return {
        **numeric,
        "central_error": error(numeric["central"]),
        "forward_error": error(numeric["forward"]),
    }


def _agree(reverse: float, exact: float | None, scale: float) -> bool:
    if exact is None:
        return False
    return abs(reverse - exact) <= AGREE_RELATIVE * abs(exact) + AGREE_SCALE * scale


def _rounding_scale(document: dict[str, Any]) -> float:
    """The largest number the engine handled: values, gradients and each edge's contribution."""
    numbers = [1.0]
    for node in document["graph"]["nodes"]:
        numbers += [abs(node["value"]), abs(node["grad"])]
    for step in document["backward"]:
        numbers += [abs(send["contribution"]) for send in step["sends"]]
    return max(numbers)


# -- printing ---------------------------------------------------------------------------------


def _float_text(value: sympy.Float) -> str:
    """A float constant as Python writes it (0.1, not 0.10000000000000001): every constant of
    the language is a double, and so is the shortest text that reads back as it."""
    return repr(float(value))


class _Text(StrPrinter):
    """sympy's own syntax, with floats written the shortest way."""

    def _print_Float(self, expr: sympy.Float) -> str:
        return _float_text(expr)


class _Latex(LatexPrinter):
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
        name = expr.name
        # sympy reads `x_1` as x subscript 1 and `alpha` as the Greek letter; names it would
        # turn into broken LaTeX (`_t`, `a__b`, `t_`) are written out as they are.
        if name.startswith("_") or name.endswith("_") or "__" in name:
            return r"\mathit{" + name.replace("_", r"\_") + "}"
        return super()._print_Symbol(expr, style)


def text(expression: sympy.Expr) -> str:
    """The formula in sympy's syntax, e.g. `c*Heaviside(a*b, 0)`."""
    return _Text().doprint(expression)


def latex(expression: sympy.Expr) -> str:
    return _Latex().doprint(expression)
