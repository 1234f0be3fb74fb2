"""The three ways to a derivative: the lesson's numbers, LaTeX, agreement, accuracy and bounds."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from typing import Any

import pytest
import sympy
from conftest import make_app
from hypothesis import assume, example, given, note, settings
from reference_micrograd import Case, ProgramCase, cases, programs

from service.api.examples import DERIVATIVES_DOCUMENT
from service.derivatives import CENTRAL_STEP, Differentiator, SymbolicLimits
from service.errors import BindingError, BudgetExceeded, DomainError, LimitExceeded
from service.evaluator import Evaluator
from service.formulas import exact_value, latex
from service.parser import parse

differentiator = Differentiator()
LESSON = {"expression": "(a + b) * c", "bindings": {"a": 2.0, "b": -3.0, "c": 10.0}}
SHIPPING = {
    "expression": "relu(base_fee + weight * 15 + distance * 2 + discount)",
    "bindings": {"base_fee": 50.0, "weight": 3.0, "distance": 12.0, "discount": -8.0},
}
CASES = r"\begin{cases} 1 & \text{if } %s > 0 \\ 0 & \text{otherwise} \end{cases}"


def differentiate(expression: str, bindings: dict[str, float], **options: Any) -> dict[str, Any]:
    return differentiator.differentiate(expression, bindings, **options)


def by_variable(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["variable"]: item for item in document["derivatives"]}


def test_the_lesson() -> None:
    document = differentiate(**LESSON)
    assert document["expression"] == "(a + b) * c"
    assert document["latex"] == r"c \left(a + b\right)"
    assert document["value"] == -10.0
    assert [item["variable"] for item in document["derivatives"]] == ["a", "b", "c"]
    items = by_variable(document)
    for name, text, value in (("a", "c", 10.0), ("b", "c", 10.0), ("c", "a + b", -1.0)):
        item = items[name]
        assert item["reverse_mode"] == value
        assert item["symbolic"]["text"] == text
        assert item["symbolic"]["value"] == value
        assert item["numeric"]["central"] == pytest.approx(value, rel=1e-9)
        assert item["numeric"]["central_error"] == abs(item["numeric"]["central"] - value)
    assert items["c"]["symbolic"]["operations"] == 1
    # Five nodes (a, b, +, c, *); two operations forward; four edges backward.
    assert document["cost"] == {
        "reverse_mode": {"nodes": 5, "forward_steps": 2, "backward_steps": 4},
        "numeric": {"central_evaluations": 6, "forward_evaluations": 4},
        "symbolic": {"expression_operations": 2, "derivative_operations": 1},
    }
    assert document["agree"] is True


def test_the_spec_example_is_what_the_service_answers() -> None:
    assert differentiate(**LESSON) == DERIVATIVES_DOCUMENT


def test_the_shipping_cost() -> None:
    document = differentiate(**SHIPPING)
    assert document["value"] == 111.0  # 50 + 45 + 24 - 8
    inside = "base_fee + discount + 2*distance + 15*weight"
    items = by_variable(document)
    assert list(items) == ["base_fee", "weight", "distance", "discount"]
    for name, factor in (("base_fee", 1), ("weight", 15), ("distance", 2), ("discount", 1)):
        step = f"Heaviside({inside}, 0)"
        assert items[name]["symbolic"]["text"] == (step if factor == 1 else f"{factor}*{step}")
        assert items[name]["reverse_mode"] == items[name]["symbolic"]["value"] == factor
    assert (
        r"\text{if } \mathit{base\_fee} + \mathit{discount}"
        in items["base_fee"]["symbolic"]["latex"]
    )
    assert document["agree"] is True


# Expression, variable, the expression's LaTeX, then the derivative's text and LaTeX.
LATEX = [
    ("(a + b) * c", "c", r"c \left(a + b\right)", "a + b", "a + b"),
    ("relu(a)", "a", r"\operatorname{relu}{\left(a \right)}", "Heaviside(a, 0)", CASES % "a"),
    (
        "relu(a * b) * c",
        "a",
        r"c \operatorname{relu}{\left(a b \right)}",
        "b*c*Heaviside(a*b, 0)",
        r"b c \left(" + CASES % "a b" + r"\right)",
    ),
    (
        "relu(a) ** 3",
        "a",
        r"\operatorname{relu}^{3}{\left(a \right)}",
        "3*Heaviside(a, 0)*Max(0, a)**2",
        r"3 \left(" + CASES % "a" + r"\right) \operatorname{relu}^{2}{\left(a \right)}",
    ),
    ("exp(a) / b", "b", r"\frac{e^{a}}{b}", "-exp(a)/b**2", r"- \frac{e^{a}}{b^{2}}"),
    # sympy would write 1/cosh(a)**2; the language has no cosh, so the form stays.
    (
        "tanh(a) ** 2",
        "a",
        r"\tanh^{2}{\left(a \right)}",
        "(2 - 2*tanh(a)**2)*tanh(a)",
        r"\left(2 - 2 \tanh^{2}{\left(a \right)}\right) \tanh{\left(a \right)}",
    ),
    (
        "log(a) - a ^ 0.5",
        "a",
        r"- a^{0.5} + \log{\left(a \right)}",
        "-0.5/a**0.5 + 1/a",
        r"- \frac{0.5}{a^{0.5}} + \frac{1}{a}",
    ),
    ("0.1 * a", "a", "0.1 a", "0.1", "0.1"),  # floats as Python writes them
    ("a / 3", "a", r"\frac{a}{3}", "1/3", r"\frac{1}{3}"),
    ("1e-300 * a ** 2", "a", r"1 \cdot 10^{-300} a^{2}", "2e-300*a", r"2 \cdot 10^{-300} a"),
    ("a - b", "b", "a - b", "-1", "-1"),
    ("exp(-a) * alpha", "a", r"\alpha e^{- a}", "-alpha*exp(-a)", r"- \alpha e^{- a}"),
    # Names sympy would turn into broken LaTeX are written out; x1 is x subscript 1.
    ("x1 * _t", "_t", r"\mathit{\_t} x_{1}", "x1", "x_{1}"),
    # No two inputs look alike: x_1 is not x1, xdot no dotted x, distance no product of letters.
    ("x1 * x_1", "x_1", r"x_{1} \mathit{x\_1}", "x1", "x_{1}"),
    (
        "xdot * distance",
        "xdot",
        r"\mathit{distance} \mathit{xdot}",
        "distance",
        r"\mathit{distance}",
    ),
    ("alpha2 * pi", "pi", r"\alpha_{2} \mathit{pi}", "alpha2", r"\alpha_{2}"),
    ("a__b * t_", "t_", r"\mathit{a\_\_b} \mathit{t\_}", "a__b", r"\mathit{a\_\_b}"),
]


@pytest.mark.parametrize(("expression", "variable", "tex", "text", "dtex"), LATEX)
def test_latex(expression: str, variable: str, tex: str, text: str, dtex: str) -> None:
    bindings = dict.fromkeys(parse(expression).variables, 1.5)
    document = differentiate(expression, bindings, variables=[variable])
    assert document["latex"] == tex
    (item,) = document["derivatives"]
    assert item["symbolic"]["text"] == text
    assert item["symbolic"]["latex"] == dtex


@pytest.mark.slow
def test_the_text_reads_back_as_the_same_formula() -> None:
    expression = "tanh(a * b) / (1 + exp(-c)) + relu(a - c) + relu(a * c) ** 2"
    document = differentiate(expression, {"a": 1, "b": 2, "c": 3})
    names = {name: sympy.Symbol(name, real=True) for name in "abc"}
    at = {names["a"]: 1, names["b"]: 2, names["c"]: 3}
    for item in document["derivatives"]:
        # Test-only: the text is the service's own output, not user input. A relu left in a
        # derivative is written as sympy's Max, so it reads back as a function sympy evaluates.
        assert "relu" not in item["symbolic"]["text"]
        read = sympy.parse_expr(item["symbolic"]["text"], local_dict=names)
        assert float(read.subs(at)) == pytest.approx(item["symbolic"]["value"], rel=1e-12)


@pytest.mark.parametrize(
    ("expression", "at", "expected"),
    [("relu(a)", 0.0, 0.0), ("relu(a)", -0.0, 0.0), ("relu(a)", 1e-300, 1.0), ("relu(-a)", 0, 0)],
)
def test_relu_steps_at_zero_as_the_engine_does(expression: str, at: float, expected: float) -> None:
    (item,) = differentiate(expression, {"a": at})["derivatives"]
    assert item["reverse_mode"] == item["symbolic"]["value"] == expected


def test_variables_choose_and_keep_the_order_of_first_use() -> None:
    document = differentiate(**LESSON, variables=["c", "a", "c"])
    assert [item["variable"] for item in document["derivatives"]] == ["a", "c"]
    assert document["cost"]["numeric"] == {"central_evaluations": 4, "forward_evaluations": 3}
    with pytest.raises(BindingError) as refused:
        differentiate(**LESSON, variables=["a", "z", "y"])
    assert refused.value.kind == "unknown_variables"
    assert refused.value.variables == ["y", "z"]
    with pytest.raises(BindingError) as refused:
        differentiate("h = 2\nout = h * 3", {}, variables=["h"])
    assert refused.value.message == "cannot differentiate by h: the expression has no inputs"
    with pytest.raises(BindingError) as refused:
        differentiate(SHIPPING_PROGRAM, {}, variables=["weight_fee", "zzz"])
    assert refused.value.message.startswith("cannot differentiate by zzz: not in the expression")
    assert refused.value.variables == ["weight_fee", "zzz"]
    with pytest.raises(BindingError) as refused:
        differentiate(SHIPPING_PROGRAM, {}, variables=["weight_fee"])
    assert refused.value.message == (
        "cannot differentiate by weight_fee: the program computes it; differentiate by its "
        "inputs, base_fee, weight, distance, discount"
    )


@pytest.mark.parametrize("x", [0.0, 0.5, -3.0, 1e6, -2.5e-8])
def test_the_default_step_scales_with_x(x: float) -> None:
    (item,) = differentiate("a * a", {"a": x})["derivatives"]
    h = item["numeric"]["h"]
    assert h == pytest.approx(sys.float_info.epsilon ** (1 / 3) * max(1.0, abs(x)), rel=1e-6)
    assert (x + h) - x == h  # the step the function really sees
    assert pytest.approx(6.055e-6, rel=1e-3) == CENTRAL_STEP


def test_a_given_step_is_used_for_every_variable() -> None:
    document = differentiate("exp(a) * b", {"a": 0.0, "b": 1.0}, h=0.1)
    items = by_variable(document)
    assert {item["numeric"]["h"] for item in items.values()} == {0.1}
    numeric = items["a"]["numeric"]
    assert numeric["central"] == pytest.approx((math.exp(0.1) - math.exp(-0.1)) / 0.2)
    assert numeric["forward"] == pytest.approx((math.exp(0.1) - 1) / 0.1)
    # With a large step the lesson's point shows: forward errs by O(h), central by O(h**2).
    assert numeric["forward_error"] == pytest.approx(0.1 / 2, rel=0.1)
    assert numeric["central_error"] == pytest.approx(0.1**2 / 6, rel=0.1)


def test_a_step_off_the_domain_leaves_that_quotient_out() -> None:
    (item,) = differentiate("log(a)", {"a": 0.01}, h=0.02)["derivatives"]
    numeric = item["numeric"]
    assert numeric["central"] is None and numeric["central_error"] is None
    assert numeric["forward"] == pytest.approx((math.log(0.03) - math.log(0.01)) / 0.02)
    assert item["symbolic"]["value"] == pytest.approx(100.0)


def test_an_exactly_singular_point_has_no_exact_value() -> None:
    # In floats the denominator is 1.4e-17; exactly, at these binary fractions, it is 0.
    document = differentiate("2 / (0.5 - (0.5 + a) - b)", {"a": 0.1, "b": -0.1})
    assert document["value"] > 1e16
    item = by_variable(document)["a"]
    assert item["symbolic"]["value"] is None
    assert item["numeric"]["central_error"] is None
    assert document["agree"] is False  # reported as it is, not papered over


def test_exact_values_use_rationals() -> None:
    a = sympy.Symbol("a", real=True)
    # 0.1 is not 1/10; the derivative of (a - 0.1)**2 at a = 0.1 is exactly zero.
    assert exact_value(sympy.diff((a - sympy.Rational(0.1)) ** 2, a), {a: sympy.Rational(0.1)}) == 0


def test_the_simplification_has_its_own_short_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # A simplify that outruns its share of the budget: the derivative stays as diff wrote it,
    # and the request succeeds.
    simplify = sympy.simplify

    def slow_simplify(expression: sympy.Expr) -> sympy.Expr:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # busy, as sympy is: the alarm interrupts it
            pass
        return simplify(expression)

    hurried = Differentiator(limits=SymbolicLimits(simplify_share=0.05))
    expression = "(a * a - 1) / (a - 1)"
    (simplified,) = differentiate(expression, {"a": 3.0})["derivatives"]  # sympy warmed up
    monkeypatch.setattr(sympy, "simplify", slow_simplify)
    (item,) = hurried.differentiate(expression, {"a": 3.0})["derivatives"]
    assert simplified["symbolic"]["text"] == "1"
    assert simplified["symbolic"]["operations"] == 0
    assert item["symbolic"]["text"] == "2*a/(a - 1) - (a**2 - 1)/(a - 1)**2"
    assert item["symbolic"]["operations"] == 9
    assert item["symbolic"]["value"] == 1.0


def test_the_node_limit_is_checked_before_sympy_sees_anything() -> None:
    small = Differentiator(limits=SymbolicLimits(max_nodes=4))
    assert small.differentiate("a * b * c * d * e", dict.fromkeys("abcde", 1.0))["agree"]
    with pytest.raises(LimitExceeded) as refused:
        small.differentiate("a * b * c * d * e * f", dict.fromkeys("abcdef", 1.0))
    assert refused.value.kind == "symbolic_too_large"
    assert refused.value.limit == "max_symbolic_nodes"
    assert refused.value.maximum == 4
    assert "5 operators" in refused.value.message


@pytest.mark.slow
def test_the_time_budget_stops_sympy() -> None:
    quick = Differentiator(limits=SymbolicLimits(seconds=0.2))
    start = time.perf_counter()
    with pytest.raises(BudgetExceeded) as refused:
        quick.differentiate("tanh(" * 99 + "a" + ")" * 99, {"a": 0.5})
    assert time.perf_counter() - start < 2.0
    assert refused.value.kind == "symbolic_too_expensive"
    assert quick.differentiate(**LESSON)["agree"]


def test_errors_come_before_symbolic_work() -> None:
    with pytest.raises(BindingError):
        differentiate("(a + b) * c", {"a": 1.0})
    with pytest.raises(DomainError):
        differentiate("log(a)", {"a": -1.0})


def test_through_the_api() -> None:
    client = make_app().test_client()
    program = {"expression": "h = tanh(w * x)\nloss = (h - y) ** 2", "output": "h",
               "bindings": {"w": 0.5, "x": 2}}  # fmt: skip
    response = client.post("/v1/derivatives", json=program)
    assert response.status_code == 200
    assert response.get_json()["latex"] == r"\tanh{\left(w x \right)}"
    response = client.post("/v1/derivatives", json={**LESSON, "variables": ["c"], "h": 1e-3})
    assert response.status_code == 200
    document = response.get_json()
    assert document["derivatives"][0]["symbolic"]["text"] == "a + b"
    assert document["derivatives"][0]["numeric"]["h"] == 1e-3
    for body, pointer in (
        ({**LESSON, "h": 0}, "/h"),
        ({**LESSON, "h": -1}, "/h"),
        ({**LESSON, "variables": []}, "/variables"),
        ({**LESSON, "variables": "a"}, "/variables"),
        ({**LESSON, "granularity": "primitive"}, "/granularity"),
    ):
        response = client.post("/v1/derivatives", json=body)
        assert response.status_code == 422
        assert response.get_json()["errors"][0]["pointer"] == pointer


# -- programs ---------------------------------------------------------------------------------

SHIPPING_PROGRAM = """
base_fee = Value(50.0)          # base fee
weight = Value(3.0)             # kg
distance = Value(12.0)          # km
discount = Value(-8.0)          # seasonal discount

weight_fee = weight * 15.0
distance_fee = distance * 2.0

raw_cost = base_fee + weight_fee + distance_fee + discount
cost = raw_cost.relu()
"""


def test_the_shipping_cost_program() -> None:
    document = differentiate(SHIPPING_PROGRAM, {})
    assert document["value"] == 111.0
    assert document["latex"] == (
        r"\operatorname{relu}{\left(\mathit{base\_fee} + \mathit{discount} + 2 \mathit{distance} + "
        r"15 \mathit{weight} \right)}"
    )
    assert document["intermediates"] == [
        {"name": "weight_fee", "latex": r"15 \mathit{weight}"},
        {"name": "distance_fee", "latex": r"2 \mathit{distance}"},
        {
            "name": "raw_cost",
            "latex": r"\mathit{base\_fee} + \mathit{discount} + 2 \mathit{distance} + "
            r"15 \mathit{weight}",
        },
    ]
    # The same derivatives as the one-expression form; bindings override declared defaults.
    expression = differentiate(**SHIPPING)
    assert document["derivatives"] == expression["derivatives"]
    assert document["cost"] == expression["cost"]
    cheap = differentiate(SHIPPING_PROGRAM, {"base_fee": -100.0})
    assert [item["symbolic"]["value"] for item in cheap["derivatives"]] == [0.0, 0.0, 0.0, 0.0]
    assert cheap["agree"] is True


@pytest.mark.slow
def test_the_output_names_what_is_differentiated() -> None:
    program = "h = tanh(w * x)\nloss = (h - y) ** 2"
    bindings = {"w": 0.5, "x": 2.0, "y": 1.0}
    hidden = differentiate(program, bindings, output="h")
    # y is still an input of the program: h does not depend on it.
    assert [(item["variable"], item["reverse_mode"]) for item in hidden["derivatives"]] == [
        ("w", pytest.approx(2 * (1 - math.tanh(1) ** 2))),
        ("x", pytest.approx(0.5 * (1 - math.tanh(1) ** 2))),
        ("y", 0.0),
    ]
    assert hidden["latex"] == r"\tanh{\left(w x \right)}"
    assert hidden["intermediates"] == []
    loss = differentiate(program, bindings)
    assert [item["variable"] for item in loss["derivatives"]] == ["w", "x", "y"]
    assert loss["intermediates"] == [{"name": "h", "latex": r"\tanh{\left(w x \right)}"}]
    assert loss["agree"] is True


def test_a_shared_intermediate_is_differentiated_through_every_use() -> None:
    # A DAG: s is used twice, so d(out)/da sums over both paths.
    program = "s = a * b\nout = s * s + s"
    document = differentiate(program, {"a": 2.0, "b": 3.0})
    items = by_variable(document)
    assert items["a"]["reverse_mode"] == items["a"]["symbolic"]["value"] == 2 * 6 * 3 + 3
    assert document["intermediates"] == [{"name": "s", "latex": "a b"}]
    assert document["agree"] is True


def test_intermediates_come_in_the_order_the_program_computes_them() -> None:
    # The tree, walked depth first from c = b * a, would meet b before a.
    program = "x = Value(2.0)\na = x * 3\nb = x + 1\nc = b * a\nd = c + a"
    document = differentiate(program, {})
    assert [item["name"] for item in document["intermediates"]] == ["a", "b", "c"]


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(programs(max_statements=5))
def test_reverse_mode_and_symbolic_agree_on_programs(case: ProgramCase) -> None:
    note(case.text)
    try:
        document = differentiate(case.text, case.bindings, output=case.output)
    except (DomainError, BudgetExceeded, LimitExceeded):
        # A domain error, or a program whose formulas outgrow the symbolic bounds (shared
        # names make a DAG, whose formula can double with every use).
        assume(False)
        raise
    # relus next to a kink too: the exact values are taken on the engine's piece
    assume(all(item["symbolic"]["value"] is not None for item in document["derivatives"]))
    assert document["agree"] is True, document["derivatives"]
    names = [item["name"] for item in document["intermediates"]]
    assert all(name in case.text for name in names)


# -- agreement and accuracy on random expressions -----------------------------------------


EVALUATOR = Evaluator()


def relu_inputs(case: Case) -> list[float]:
    document = EVALUATOR.evaluate(case.text, case.bindings, "primitive")
    nodes = document["graph"]["nodes"]
    return [nodes[n["children"][0]]["value"] for n in nodes if n["op"] == "relu"]


def central_difference(case: Case, name: str, h: float) -> float | None:
    values = []
    for step in (h, -h):
        shifted = {**case.bindings, name: case.bindings[name] + step}
        try:
            values.append(EVALUATOR.evaluate(case.text, shifted)["value"])
        except DomainError:
            return None
    return (values[0] - values[1]) / (2 * h)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(cases())
@example(Case("(a + b) * c", {"a": 2.0, "b": -3.0, "c": 10.0}))
@example(Case("relu(a - a) * b + relu(a)", {"a": 0.5, "b": 2.0}))
@example(Case("a / b - 2 / a + -a ** 2 + a ^ 0.5", {"a": 1.5, "b": -0.25}))
# The engine's sum is exactly 0.0 (relu off); the exact binary fractions' is 5.6e-17 (on).
@example(Case("relu(w * x + b)", {"w": 0.1, "x": 10.0, "b": -1.0}))
@example(Case("relu(a + b - c)", {"a": 1.0, "b": 1e-17, "c": 1.0}))
def test_reverse_mode_and_symbolic_agree(case: Case) -> None:
    note(repr(case))
    try:
        document = differentiate(case.text, case.bindings)
    except DomainError:
        assume(False)
        raise
    kinks = relu_inputs(case)
    items = document["derivatives"]
    assume(all(item["symbolic"]["value"] is not None for item in items))
    assert document["agree"] is True, items
    # Central differences are accurate to about h**2 |f'''| plus eps |f| / h. Away from kinks
    # and where two steps agree (f smooth at that scale), the default step gets 5 digits (6 in
    # most cases; a steep exp(4/a) near a = 0.1 loses one).
    if any(abs(v) < 1e-2 for v in kinks):
        return
    for item in items:
        numeric, exact = item["numeric"], item["symbolic"]["value"]
        if numeric["central"] is None:
            continue
        halved = central_difference(case, item["variable"], numeric["h"] / 2)
        tolerance = 1e-6 * max(1.0, abs(exact), abs(document["value"]))
        if halved is None or abs(halved - numeric["central"]) > tolerance:
            continue
        assert numeric["central_error"] <= 10 * tolerance, (item, document["value"])


def test_latex_renders_relu_with_exponent() -> None:
    a = sympy.Symbol("a", real=True)
    assert latex(sympy.Heaviside(a, 0) ** 2) == r"\left(" + CASES % "a" + r"\right)^{2}"


@pytest.mark.slow
def test_sympy_is_loaded_only_for_a_derivative() -> None:
    # The rest of the service never needs sympy; the first derivative loads it.
    program = """
import json, sys
from service.app import create_app
client = create_app({"TESTING": True}).test_client()
assert client.get("/openapi.json").status_code == 200
before = "sympy" in sys.modules
body = {"expression": "relu(a) * b", "bindings": {"a": 1, "b": 2}}
assert client.post("/v1/derivatives", json=body).status_code == 200
print(json.dumps([before, "sympy" in sys.modules]))
"""
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout) == [False, True]


def test_a_declared_input_the_output_does_not_use_has_derivative_zero() -> None:
    # As /v1/gradients keys it among the gradients, and /v1/graph lists it among the inputs.
    program = "x = Value(2.0)\nw = Value(1.0)\ny = x * x"
    document = differentiate(program, {})
    assert [(item["variable"], item["reverse_mode"]) for item in document["derivatives"]] == [
        ("x", 4.0),
        ("w", 0.0),
    ]
    [w] = differentiate(program, {}, variables=["w"])["derivatives"]
    assert (w["symbolic"]["value"], w["numeric"]["central"]) == (0.0, 0.0)


def test_an_input_read_only_by_an_unused_statement_has_derivative_zero_bound_or_not() -> None:
    program = "x = Value(2.0)\nt = u * 3\ny = x * x"
    for bindings in ({}, {"u": 7.0}):
        document = differentiate(program, bindings)
        [x, u] = document["derivatives"]
        assert (x["variable"], x["reverse_mode"], u["variable"]) == ("x", 4.0, "u")
        assert (u["reverse_mode"], u["symbolic"]["value"], u["numeric"]["central"]) == (0, 0, 0)
        assert document["agree"] is True


@pytest.mark.parametrize(
    ("body", "h"),
    [
        # x + step overflows at the largest double: the step is taken below it, and reported
        ({"expression": "x", "bindings": {"x": 1.7976931348623157e308}}, None),
        # a step below x's precision: x + h is x, so no quotient can be formed
        ({"expression": "x * x", "bindings": {"x": 3}, "h": 1e-320}, 1e-320),
    ],
)
def test_a_step_that_cannot_move_x_gives_no_quotient_and_a_finite_h(
    body: dict[str, Any], h: float | None
) -> None:
    response = make_app().test_client().post("/v1/derivatives", json=body)
    assert response.status_code == 200
    numeric = response.get_json()["derivatives"][0]["numeric"]
    assert math.isfinite(numeric["h"]) and numeric["h"] > 0
    assert h is None or numeric["h"] == h
    assert (numeric["central"], numeric["forward"]) == (None, None)
