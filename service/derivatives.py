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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from service.budget import time_budget
from service.engine import Value
from service.errors import (
    BindingError,
    BudgetExceeded,
    DomainError,
    LimitExceeded,
)
from service.evaluator import DEFAULT_GRANULARITY, Compiled, Evaluator
from service.i18n import DEFAULT_LOCALE, _, _n
from service.parser import ParsedExpression

if TYPE_CHECKING:
    from types import ModuleType

SYMBOLIC_TOO_LARGE = "symbolic_too_large"
SYMBOLIC_TOO_EXPENSIVE = "symbolic_too_expensive"
SYMBOLIC_KINDS = (SYMBOLIC_TOO_LARGE, SYMBOLIC_TOO_EXPENSIVE)  # refusals of symbolic work

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
            seconds=format(seconds, "g"),
        )
        super().__init__(SYMBOLIC_TOO_EXPENSIVE, seconds, message)


class Differentiator:
    """The three derivatives of an expression, under an evaluator's limits and symbolic limits."""

    def __init__(
        self,
        evaluator: Evaluator | None = None,
        limits: SymbolicLimits = DEFAULT_SYMBOLIC_LIMITS,
    ) -> None:
        self.evaluator = evaluator or Evaluator()
        self.limits = limits

    def differentiate(
        self,
        expression: str,
        bindings: Mapping[str, float],
        variables: Sequence[str] | None = None,
        h: float | None = None,
        output: str | None = None,
        locale: str = DEFAULT_LOCALE,
    ) -> dict[str, Any]:
        """Value, LaTeX, and each derivative three ways, with what each way cost. For a
        program, `output` names the value differentiated (see `service.parser.parse`); the
        warnings about assignments it does not use are in `locale`."""
        compiled = self.evaluator.compile(expression, DEFAULT_GRANULARITY, output)
        parsed = compiled.parsed
        # Binding errors before any expensive work; the point is every input's value.
        env = self.evaluator.bind(parsed, bindings)
        point = {name: value.data for name, value in env.items()}
        chosen = _chosen(parsed, variables)
        self.check_size(parsed, expression)
        document = self.evaluator.evaluate(
            expression, bindings, DEFAULT_GRANULARITY, output, locale
        )
        symbolic = self.symbolic(parsed, chosen, point, compiled, document)
        scale = _rounding_scale(document)
        derivatives, agree = [], True
        centre = _value_at(compiled, env)
        for name in chosen:
            reverse = document["gradients"][name]
            exact = symbolic["derivatives"][name]
            numeric = _numeric(compiled, env, centre, name, h)
            derivatives.append(
                {
                    "variable": name,
                    "reverse_mode": reverse,
                    "symbolic": exact,
                    "numeric": _with_errors(numeric, exact["value"]),
                }
            )
            agree = agree and _agree(reverse, exact["value"], scale)
        nodes = document["graph"]["nodes"]
        return {
            "expression": expression,
            "output": document["output"],
            "latex": symbolic["latex"],
            "intermediates": symbolic["intermediates"],
            "value": document["value"],
            "derivatives": derivatives,
            "cost": {
                "reverse_mode": {
                    "nodes": len(nodes),
                    "forward_steps": sum(1 for node in nodes if node["kind"] == "operation"),
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
            "agree": agree,
            "warnings": document["warnings"],
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
            ).at(expression)

    def symbolic(
        self,
        parsed: ParsedExpression,
        chosen: list[str],
        bindings: Mapping[str, float],
        compiled: Compiled,
        document: dict[str, Any],
    ) -> dict[str, Any]:
        """The expression's LaTeX and size, and each derivative as text, LaTeX, exact value and
        size (see `service.formulas`); all within one time budget. The exact values are taken
        on the piece the engine's evaluation `document` lies on, relu by relu."""
        formulas = _formulas()
        try:
            with time_budget(self.limits.seconds, SYMBOLIC_TOO_EXPENSIVE):
                from service import symbolic as forms

                nodes = document["graph"]["nodes"]
                piece = forms.engine_piece(parsed, compiled.node_of, nodes)
                symbolic: dict[str, Any] = formulas.derivatives(
                    parsed,
                    chosen,
                    bindings,
                    self.limits.simplify_operations,
                    self.limits.seconds * self.limits.simplify_share,
                    piece,
                )
                return symbolic
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
            ).at(parsed.text) from None


def _formulas() -> ModuleType:
    """sympy's side, imported and run once on first use, before any budget is in force."""
    from service import formulas

    formulas.warm_up()
    return formulas


def _chosen(parsed: ParsedExpression, variables: Sequence[str] | None) -> list[str]:
    """The inputs to differentiate by, in the order of first use (then a program's declared
    inputs the output does not use, whose derivatives are 0): all, or those asked for."""
    if variables is None:
        return list(parsed.inputs)
    unknown = sorted({name for name in variables if name not in parsed.inputs})
    if unknown:
        # Said of the names the program does not have first; else of those it computes.
        strangers = [name for name in unknown if name not in parsed.assigned]
        inputs = ", ".join(parsed.inputs)
        if not inputs:
            message = _(
                "cannot differentiate by {names}: the expression has no inputs",
                names=", ".join(unknown),
            )
        elif strangers:
            message = _n(
                "cannot differentiate by {names}: not in the expression, whose variables are "
                "{variables}",
                "cannot differentiate by {names}: not in the expression, whose variables are "
                "{variables}",
                len(strangers),
                names=", ".join(strangers),
                variables=inputs,
            )
        else:  # `weight_fee`, which the shipping program computes
            message = _n(
                "cannot differentiate by {names}: the program computes it; differentiate by "
                "its inputs, {variables}",
                "cannot differentiate by {names}: the program computes them; differentiate by "
                "its inputs, {variables}",
                len(unknown),
                names=", ".join(unknown),
                variables=inputs,
            )
        raise BindingError("unknown_variables", message, unknown)
    asked = set(variables)
    return [name for name in parsed.inputs if name in asked]


def _numeric(
    compiled: Compiled,
    env: Mapping[str, Value],
    centre: float | None,
    name: str,
    h: float | None,
) -> dict[str, Any]:
    """Central and forward difference quotients of the engine's own function along `name`, from
    the inputs `env` where its value is `centre`."""
    x = env[name].data
    if h is None:
        step = CENTRAL_STEP * max(1.0, abs(x))
        # x + h rounds; taking h as (x + h) - x makes the step the one the function really sees
        # (below x when x is within a step of the largest double, where x + step overflows).
        h = (x + step) - x
        if math.isinf(h):
            h = x - (x - step)
    if x + h == x or x - h == x:  # a step below x's precision: no quotient can be formed
        return {"h": h, "central": None, "forward": None}
    if name not in compiled.parsed.variable_set:  # an input the output does not read: flat
        return {"h": h, "central": 0.0, "forward": 0.0}

    def moved(to: float) -> float | None:  # only this input moves: one run of the graph
        return _value_at(compiled, {**env, name: Value(to)}) if math.isfinite(to) else None

    above, below = moved(x + h), moved(x - h)
    central = (above - below) / (2 * h) if above is not None and below is not None else None
    forward = (above - centre) / h if above is not None and centre is not None else None
    return {"h": h, "central": _finite(central), "forward": _finite(forward)}


def _value_at(compiled: Compiled, env: Mapping[str, Value]) -> float | None:
    """The expression's value for the inputs `env`, or None where it is not defined (log of a
    negative step, an overflow): a difference quotient that needs it cannot be formed."""
    try:
        root, _results = compiled.build(env)
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
