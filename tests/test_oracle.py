"""Gradients against two independent opinions: sympy's derivative and central differences."""

from __future__ import annotations

import math
from typing import Any

import pytest
import sympy
from hypothesis import assume, example, given, note, settings
from reference_micrograd import Case, cases, rounding_scale

from service.errors import DomainError
from service.evaluator import GRANULARITIES, Evaluator
from service.parser import parse

evaluator = Evaluator()
# Names sympy's own parser would read as constants or classes.
SPECIAL_NAMES = ("E", "pi", "I", "S", "N", "Symbol")


def documents(case: Case) -> dict[str, dict[str, Any]]:
    try:
        return {g: evaluator.evaluate(case.text, case.bindings, g) for g in GRANULARITIES}
    except DomainError:
        assume(False)
        raise


def relu_inputs(document: dict[str, Any]) -> list[float]:
    nodes = document["graph"]["nodes"]
    return [nodes[n["children"][0]]["value"] for n in nodes if n["op"] == "relu"]


def symbolic_gradients(case: Case) -> dict[str, sympy.Expr]:
    """d(expression)/d(variable) by sympy from the syntax tree, at the exact binary bindings."""
    expression = parse(case.text).sympy
    at = {sympy.Symbol(name, real=True): sympy.Rational(v) for name, v in case.bindings.items()}
    return {
        name: sympy.diff(expression, sympy.Symbol(name, real=True)).subs(at).evalf(30)
        for name in case.bindings
    }


def central_difference(case: Case, name: str, h: float) -> float | None:
    """(f(x + h) - f(x - h)) / 2h from the documents' values; None where f is undefined nearby."""
    values = []
    for step in (h, -h):
        shifted = {**case.bindings, name: case.bindings[name] + step}
        try:
            values.append(evaluator.evaluate(case.text, shifted)["value"])
        except DomainError:
            return None
    return (values[0] - values[1]) / (2 * h)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(cases())
@example(Case("(a + b) * c", {"a": 2.0, "b": -3.0, "c": 10.0}))
@example(Case("relu(a - a) * b + relu(a)", {"a": 0.5, "b": 2.0}))
@example(Case("a / b - 2 / a + -a ** 2 + a ^ 0.5", {"a": 1.5, "b": -0.25}))
@example(Case("E * pi + I / S - N ** 3 + log(exp(Symbol))", dict.fromkeys(SPECIAL_NAMES, 1.5)))
def test_gradients_match_sympy_and_finite_differences(case: Case) -> None:
    note(repr(case))  # hypothesis shows the generated case only as `case=`
    views = documents(case)
    size = max(rounding_scale(document) for document in views.values())
    kinks = relu_inputs(views["primitive"])
    # At a relu whose input rounding has moved off 0 (or onto it), the exact derivative and the
    # float one legitimately differ; an input of exactly 0 has derivative 0 in both.
    assume(not any(0 < abs(v) < 1e-9 * size for v in kinks))

    exact = symbolic_gradients(case)
    # Rounding can move a float evaluation off a singular point (`2/(0.5 - (0.5 + a) - b)` is
    # 2/0 exactly at b = -a, but finite in floats); there the exact answer is no yardstick.
    assume(all(g.is_finite and g.is_real for g in exact.values()))
    expected = {name: float(g) for name, g in exact.items()}
    for granularity, document in views.items():
        assert list(document["gradients"]) == list(case.bindings)
        for name, grad in document["gradients"].items():
            assert abs(grad - expected[name]) <= 1e-9 * abs(expected[name]) + 1e-12 * size, (
                f"{granularity} d/d{name} of {case.text!r} at {case.bindings}: "
                f"{grad} but sympy says {expected[name]}"
            )

    # Finite differences are blind near a kink and rough near a singularity: when two step sizes
    # disagree, f is not smooth enough at that scale for a third opinion.
    if any(abs(v) < 1e-2 for v in kinks):
        return
    for name, grad in views["operator"]["gradients"].items():
        h = 1e-5 * max(1.0, abs(case.bindings[name]))
        coarse, fine = central_difference(case, name, h), central_difference(case, name, h / 2)
        if coarse is None or fine is None:
            continue
        tolerance = 1e-5 * max(abs(grad), 1.0) + 1e-6 * size
        if abs(coarse - fine) > tolerance:
            continue
        assert abs(fine - grad) <= tolerance, (
            f"d/d{name} of {case.text!r} at {case.bindings}: {grad}, finite differences {fine}"
        )


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        ("relu(a)", 0.0, 0.0),  # Heaviside(0, 0): micrograd's relu has derivative 0 at 0
        ("relu(a)", 1e-300, 1.0),
        ("relu(a)", -1e-300, 0.0),
        ("relu(a) * a", 0.0, 0.0),
        ("relu(-a)", 0.0, 0.0),
    ],
)
def test_relu_derivative_is_heaviside_zero_at_zero(text: str, at: float, expected: float) -> None:
    assert float(symbolic_gradients(Case(text, {"a": at}))["a"]) == expected
    for granularity in GRANULARITIES:
        assert evaluator.evaluate(text, {"a": at}, granularity)["gradients"]["a"] == expected


def test_special_sympy_names_are_plain_symbols() -> None:
    # sympy would read E as Euler's number and I as the imaginary unit; the oracle must not.
    expression = parse("E * I + pi - S / N").sympy
    assert {str(s) for s in expression.free_symbols} == {"E", "I", "pi", "S", "N"}
    assert not math.isnan(float(expression.subs(dict.fromkeys(expression.free_symbols, 2))))
