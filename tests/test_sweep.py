"""Sweeps against the scalar engine: every point of a line, a grid or a list of points must be the
engine's own value and gradients (to 1e-12 relative), or the engine's domain error at that point."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from conftest import CYRILLIC
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service import sweep as sweeps
from service.api.examples import SHIPPING_PROGRAM as SHIPPING
from service.errors import AutogradError, BindingError, DomainError, RequestTooLarge
from service.evaluator import Evaluator
from service.limits import Limits
from service.operations import FUNCTIONS
from service.sweep import Axis
from service.tape import power, tanh

EVALUATOR = Evaluator()
REL = 1e-12

sweep_settings = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def sweep(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """A sweep's document as a client reads it: JSON lists, with null at failed points."""
    return json.loads(sweeps.to_json(sweeps.sweep(*args, **kwargs)))


def scalar(expression: str, bindings: dict[str, float]) -> dict[str, Any] | str:
    """The engine's answer at one point: the document, or the domain error's kind."""
    try:
        return EVALUATOR.evaluate(expression, bindings, "primitive")
    except DomainError as error:
        return error.kind


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


def check_point(
    document: dict[str, Any], expression: str, at: dict[str, float], index: Any, value: Any
) -> None:
    """The sweep's numbers at one point are the engine's, or null with the engine's reason."""
    expected = scalar(expression, at)
    errors = {_key(e["index"]): e for e in document["errors"]}
    gradients = {name: _at(rows, index) for name, rows in document["gradients"].items()}
    if isinstance(expected, str):
        assert value is None, (at, expected, value)
        assert all(g is None for g in gradients.values())
        assert errors[_key(index)]["kind"] == expected, (at, errors[_key(index)], expected)
        return
    assert _key(index) not in errors, (at, errors[_key(index)])
    assert close(value, expected["value"]), (at, value, expected["value"])
    for name, grad in expected["gradients"].items():
        assert close(gradients[name], grad), (at, name, gradients[name], grad)


def _key(index: Any) -> Any:
    return tuple(index) if isinstance(index, list) else index


def _at(rows: list[Any], index: Any) -> Any:
    if isinstance(index, int):
        return rows[index]
    return rows[index[0]][index[1]]


# -- random expressions of the language ---------------------------------------------------------


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> str:
    """A well-formed expression over a, b and c, reaching every operation and its domain edges."""
    if depth > 3 or draw(st.booleans()):
        return draw(st.sampled_from(["a", "b", "c", "a", "2", "0.5", "0", "-1", "3"]))
    shape = draw(st.sampled_from(["binary", "binary", "call", "neg", "power"]))
    inner = draw(expressions(depth + 1))
    if shape == "binary":
        op = draw(st.sampled_from(["+", "-", "*", "/"]))
        return f"({inner} {op} {draw(expressions(depth + 1))})"
    if shape == "call":
        return f"{draw(st.sampled_from(FUNCTIONS))}({inner})"
    if shape == "neg":
        return f"-{inner}"
    exponent = draw(st.sampled_from(["2", "3", "-1", "0.5", "0", "-2.5", "1.5"]))
    return f"({inner}) ** {exponent}"


numbers = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 700.0, -710.0, 1e-300, 1e300]),
    st.floats(-5, 5, allow_nan=False),
)


def compiles(expression: str) -> list[str] | None:
    try:
        return list(EVALUATOR.compile(expression, "primitive").parsed.variables)
    except AutogradError:
        return None


@pytest.mark.slow
@sweep_settings
@given(expressions(), numbers, numbers, st.integers(1, 40), st.data())
def test_line_matches_the_engine_at_every_point(
    expression: str, start: float, stop: float, count: int, data: st.DataObject
) -> None:
    variables = compiles(expression)
    if not variables:
        return
    varied = data.draw(st.sampled_from(variables))
    bindings = {name: data.draw(numbers) for name in variables if name != varied}
    document = sweep(EVALUATOR, expression, bindings, vary=[Axis(varied, start, stop, count)])
    axis = document["axes"][varied]
    assert len(axis) == len(document["value"]) == count
    assert axis[0] == start and axis[-1] == (stop if count > 1 else start)
    for i, x in enumerate(axis):
        check_point(document, expression, {**bindings, varied: x}, i, document["value"][i])


@pytest.mark.slow
@sweep_settings
@given(expressions(), st.lists(st.fixed_dictionaries({}, optional={"a": numbers, "b": numbers,
       "c": numbers}), min_size=1, max_size=12), st.data())  # fmt: skip
def test_points_match_the_engine_at_every_point(
    expression: str, points: list[dict[str, float]], data: st.DataObject
) -> None:
    variables = compiles(expression)
    if variables is None:
        return
    points = [{k: v for k, v in point.items() if k in variables} for point in points]
    bindings = {name: data.draw(numbers) for name in variables}
    document = sweep(EVALUATOR, expression, bindings, points=points)
    for i, point in enumerate(points):
        check_point(document, expression, {**bindings, **point}, i, document["value"][i])


@pytest.mark.slow
@sweep_settings
@given(expressions(), numbers, numbers, st.integers(1, 6), st.integers(1, 6), st.data())
def test_grid_matches_the_engine_at_every_point(
    expression: str, low: float, high: float, rows: int, columns: int, data: st.DataObject
) -> None:
    variables = compiles(expression)
    if not variables or len(variables) < 2:
        return
    first, second = data.draw(st.permutations(variables))[:2]
    bindings = {name: data.draw(numbers) for name in variables if name not in (first, second)}
    vary = [Axis(first, low, high, rows), Axis(second, high, low, columns)]
    document = sweep(EVALUATOR, expression, bindings, vary=vary)
    assert len(document["value"]) == rows and all(len(r) == columns for r in document["value"])
    for i, x in enumerate(document["axes"][first]):
        for j, y in enumerate(document["axes"][second]):
            at = {**bindings, first: x, second: y}
            check_point(document, expression, at, [i, j], document["value"][i][j])


# -- domain edges inside a sweep ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "start", "stop", "failing"),
    [
        ("log(x)", -1.0, 1.0, {0: "log_domain", 1: "log_domain", 2: "log_domain"}),
        ("1 / x", -1.0, 1.0, {2: "division_by_zero"}),
        ("x ** 0.5", -1.0, 1.0, {0: "complex_result", 1: "complex_result", 2: "non_finite"}),
        ("exp(x)", 700.0, 720.0, {2: "overflow", 3: "overflow", 4: "overflow"}),
        ("x * x * 1e300", 1e3, 1e5, {1: "overflow", 2: "overflow", 3: "overflow", 4: "overflow"}),
        ("relu(x)", -1.0, 1.0, {}),
    ],
)
def test_domain_edges_fail_only_their_points(
    expression: str, start: float, stop: float, failing: dict[int, str]
) -> None:
    document = sweep(EVALUATOR, expression, {}, vary=[Axis("x", start, stop, 5)])
    assert {e["index"]: e["kind"] for e in document["errors"]} == failing
    for i, x in enumerate(document["axes"]["x"]):
        check_point(document, expression, {"x": x}, i, document["value"][i])
        assert (document["value"][i] is None) == (i in failing)


def test_relu_gradient_is_zero_at_zero() -> None:
    document = sweep(EVALUATOR, "relu(x)", {}, points=[{"x": 0.0}, {"x": -0.0}, {"x": 1e-300}])
    assert document["gradients"]["x"] == [0.0, 0.0, 1.0]
    assert math.copysign(1, document["value"][1]) == -1  # micrograd keeps -0.0


def test_non_finite_gradient_is_an_error_of_its_point() -> None:
    # The value is finite, but d/dx of x ** 1e3 * 1e-300 overflows far out.
    document = sweep(EVALUATOR, "(x ** 3) * 1e-300", {}, points=[{"x": 1.0}, {"x": 1e103}])
    assert document["value"][0] == 1e-300
    assert [e["kind"] for e in document["errors"]] == [scalar("(x ** 3) * 1e-300", {"x": 1e103})]


def test_grid_rows_follow_the_first_name() -> None:
    document = sweep(EVALUATOR, "x - 10 * y", {}, vary=[Axis("x", 0, 2, 3), Axis("y", 0, 1, 2)])
    assert document["value"] == [[0.0, -10.0], [1.0, -9.0], [2.0, -8.0]]
    assert document["gradients"]["y"] == [[-10.0] * 2] * 3


def test_bindings_are_overridden_by_the_varied_name_and_points() -> None:
    line = sweep(EVALUATOR, "a * b", {"a": 5, "b": 2}, vary=[Axis("a", 1, 3, 3)])
    assert line["value"] == [2.0, 4.0, 6.0]
    points = sweep(EVALUATOR, "a * b", {"a": 5, "b": 2}, points=[{"b": 3}, {"a": 1}])
    assert points["value"] == [15.0, 2.0]
    assert points["axes"] == {"a": [5.0, 1.0], "b": [3.0, 2.0]}


def test_chunks_give_the_same_answer_as_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = sweep(EVALUATOR, "tanh(a * b) + log(a)", {"b": 3}, vary=[Axis("a", -1, 2, 301)])
    monkeypatch.setattr("service.tape.CHUNK_CELLS", 7)
    monkeypatch.setattr(sweeps, "_tapes", type(sweeps._tapes)())
    chunked = sweep(EVALUATOR, "tanh(a * b) + log(a)", {"b": 3}, vary=[Axis("a", -1, 2, 301)])
    assert chunked == whole


def test_a_point_the_step_lands_on_is_exact() -> None:
    # -4, -2, 0, 2: at 0 the reciprocal is a division by zero, not -4.5e15 from a 0 off by 2e-16.
    document = sweep(EVALUATOR, "1 / x", {}, vary=[Axis("x", -4, 2, 4)])
    assert document["axes"]["x"] == [-4.0, -2.0, 0.0, 2.0]
    assert [error["kind"] for error in document["errors"]] == ["division_by_zero"]


def test_far_ends_do_not_overflow_the_axis() -> None:
    document = sweep(EVALUATOR, "x", {}, vary=[Axis("x", -1e308, 1e308, 3)])
    assert document["axes"]["x"] == [-1e308, 0.0, 1e308]


# -- refusals -----------------------------------------------------------------------------------


def test_limits_have_their_own_kinds() -> None:
    small = Evaluator(Limits(max_sweep_points=10, max_sweep_grid=4, max_sweep_cells=40))
    with pytest.raises(RequestTooLarge) as line:
        sweep(small, "x", {}, vary=[Axis("x", 0, 1, 11)])
    assert (line.value.kind, line.value.maximum) == ("too_many_points", 10)
    with pytest.raises(RequestTooLarge) as grid:
        sweep(small, "x*y", {}, vary=[Axis("x", 0, 1, 5), Axis("y", 0, 1, 2)])
    assert grid.value.kind == "grid_too_large"
    with pytest.raises(RequestTooLarge) as points:
        sweep(small, "x", {}, points=[{"x": 1.0}] * 11)
    assert points.value.kind == "too_many_points"
    with pytest.raises(RequestTooLarge) as cells:
        sweep(small, "tanh(tanh(x))*2", {}, vary=[Axis("x", 0, 1, 10)])
    assert cells.value.kind == "sweep_too_large"


@pytest.mark.parametrize("count", [10**30, int(1e30)])
def test_a_huge_count_of_points_is_told_as_it_was_written(client: FlaskClient, count: int) -> None:
    axis = {"name": "x", "from": -1, "to": 1, "points": count}
    body = {"expression": "x * y", "bindings": {"y": 1}, "vary": [axis]}
    assert (
        client.post("/v1/sweep", json=body)
        .get_json()["detail"]
        .startswith("1e+30 points; a sweep has at most")
    )
    grid = {"expression": "x * y", "vary": [axis, {**axis, "name": "y", "points": 3}]}
    assert (
        client.post("/v1/sweep", json=grid)
        .get_json()["detail"]
        .startswith("a grid of 1e+30 x 3 points;")
    )


@pytest.mark.parametrize(
    ("bindings", "vary", "kind"),
    [
        ({}, [Axis("z", 0, 1, 2)], "unknown_variables"),
        ({}, [Axis("x", 0, 1, 2)], "unbound_variables"),
        ({"y": 1, "q": 2}, [Axis("x", 0, 1, 2)], "unknown_variables"),
        ({"y": 1}, [Axis("x", 0, 1, 2), Axis("x", 0, 1, 2)], "invalid_binding"),
        ({"y": 1}, [Axis("x", 0, math.inf, 2)], "invalid_binding"),
    ],
)
def test_bad_bindings_are_refused(bindings: dict, vary: list[Axis], kind: str) -> None:
    with pytest.raises(BindingError) as error:
        sweep(EVALUATOR, "x * y", bindings, vary=vary)
    assert error.value.kind == kind


def test_a_point_that_lacks_inputs_others_give_is_named_with_all_it_lacks() -> None:
    program = "h = a * b\nout = h + c"
    points = [{"a": 1, "b": 1, "c": 1}, {"c": 1}]
    with pytest.raises(BindingError) as refused:
        sweep(EVALUATOR, program, {}, points=points)
    assert refused.value.kind == "unbound_variables"
    assert refused.value.variables == ["a", "b"]
    assert refused.value.message == "no values given for a, b in points[1]"
    assert refused.value.span == (4, 5)  # a, where the program first reads it


@pytest.mark.parametrize("value", [math.nan, math.inf, "1", None, True, 10**400])
def test_values_that_are_not_finite_numbers_are_refused(value: Any) -> None:
    with pytest.raises(BindingError) as bound:
        sweep(EVALUATOR, "x * y", {"y": value}, vary=[Axis("x", 0, 1, 2)])
    assert (bound.value.kind, bound.value.variables) == ("invalid_binding", ["y"])
    with pytest.raises(BindingError) as point:
        sweep(EVALUATOR, "x * y", {"y": 1}, points=[{"x": 1}, {"x": value}])
    assert (point.value.kind, point.value.variables) == ("invalid_binding", ["x"])


def test_a_point_without_a_value_is_refused() -> None:
    with pytest.raises(BindingError) as error:
        sweep(EVALUATOR, "x * y", {"y": 1}, points=[{"x": 1}, {"y": 2}])
    assert error.value.kind == "unbound_variables"


# -- the exact elementwise functions ------------------------------------------------------------


def test_tanh_and_power_match_the_c_library_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    edges = [0.0, -0.0, 1e-20, -5e-324, 1e-300, 2.0**-55, 1.0, -1.0, 22.0, 25.0, -400.0, 1e300]
    x = np.concatenate([rng.uniform(-30, 30, 2000), rng.normal(0, 1e-3, 2000), edges])
    with np.errstate(over="ignore"):
        assert tanh(x).tolist() == [math.tanh(v) for v in x]
    y = np.abs(x[np.abs(x) < 100]) + 1e-3
    for k in (2.0, -1.0, 0.5, 3.0, -2.5):
        assert power(y, k).tolist() == [v**k for v in y]


# -- the command line ---------------------------------------------------------------------------


def test_cli_sweep_json_svg_and_errors(
    capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Any
) -> None:
    from service.cli import main

    assert main(["sweep", "log(x) * y", "y=2", "--vary", "x:-1:1:5"]) == 0
    document = json.loads(capsysbinary.readouterr().out)
    assert document["value"][3:] == [-1.3862943611198906, 0.0]
    assert [e["kind"] for e in document["errors"]] == ["log_domain"] * 3
    assert main(["sweep", "x*y", "--vary", "x:0:1:3", "--vary", "y:0:1:2"]) == 0
    assert json.loads(capsysbinary.readouterr().out)["value"] == [[0, 0], [0, 0.5], [0, 1]]
    assert main(["sweep", "a / b", "a=1", "--point", "b=2", "--point", "b=4"]) == 0
    assert json.loads(capsysbinary.readouterr().out)["value"] == [0.5, 0.25]
    target = tmp_path / "plot.svg"
    assert main(["sweep", "-x * tanh(x)", "--vary", "x:-3:3:50", "--format", "svg",
                 "--save", str(target)]) == 0  # fmt: skip
    assert b"<svg" in target.read_bytes()
    assert main(["sweep", "x * z", "--vary", "x:0:1:3"]) == 2
    problem = json.loads(capsysbinary.readouterr().out)
    assert problem["type"].endswith("/unbound-variables")
    assert main(["eval", "(a + b) * c", "a=2", "b=-3", "c=10", "--format", "mermaid"]) == 0
    assert capsysbinary.readouterr().out.startswith(b"flowchart LR")


# -- programs -----------------------------------------------------------------------------------


@st.composite
def programs(draw: st.DrawFn) -> str:
    """A program over a, b and c whose statements share and reassign names, as micrograd code
    does: each statement may use the inputs and every name assigned before it."""
    names: list[str] = []
    lines = []
    for i in range(draw(st.integers(1, 4))):
        text = draw(expressions())
        for name in names:  # sometimes read an earlier result instead of an input
            if draw(st.booleans()):
                text = f"({text}) * {name}" if draw(st.booleans()) else f"{name} + ({text})"
        target = draw(st.sampled_from([f"t{i}", *names[-1:]]))
        op = draw(st.sampled_from(["=", "+=", "*="])) if target in names else "="
        lines.append(f"{target} {op} {text}")
        if target not in names:
            names.append(target)
    return "\n".join(lines)


@pytest.mark.slow
@sweep_settings
@given(programs(), numbers, numbers, st.integers(1, 12), st.data())
def test_programs_match_the_engine_at_every_point(
    program: str, start: float, stop: float, count: int, data: st.DataObject
) -> None:
    variables = compiles(program)
    if not variables:
        return
    varied = data.draw(st.sampled_from(variables))
    bindings = {name: data.draw(numbers) for name in variables if name != varied}
    document = sweep(EVALUATOR, program, bindings, vary=[Axis(varied, start, stop, count)])
    for i, x in enumerate(document["axes"][varied]):
        check_point(document, program, {**bindings, varied: x}, i, document["value"][i])


def test_the_shipping_cost_program_over_its_weight() -> None:
    document = sweep(EVALUATOR, SHIPPING, {}, vary=[Axis("weight", -4, 4, 9)])
    # raw cost is 50 + 15 w + 24 - 8 = 66 + 15 w: positive from w = -4 on, so relu passes it
    assert document["value"] == [66.0 + 15 * w for w in range(-4, 5)]
    assert document["gradients"]["weight"] == [15.0] * 9
    assert document["gradients"]["distance"] == [2.0] * 9
    assert set(document["gradients"]) == {"base_fee", "weight", "distance", "discount"}
    below = sweep(EVALUATOR, SHIPPING, {}, vary=[Axis("discount", -139, -99, 3)])
    # 50 + 45 + 24 + d: -20 at d = -139 (relu: 0, gradient 0), 0 at d = -119 (gradient 0 at 0)
    assert below["value"] == [0.0, 0.0, 20.0]
    assert below["gradients"]["discount"] == [0.0, 0.0, 1.0]
    for i, d in enumerate(below["axes"]["discount"]):
        check_point(below, SHIPPING, {"discount": d}, i, below["value"][i])


def test_a_program_output_and_shared_nodes() -> None:
    program = "z = x * y\nq = z + x\nw = q * z"
    document = sweep(EVALUATOR, program, {"y": 2.0}, vary=[Axis("x", -1, 1, 5)], output="q")
    assert document["value"] == [-3.0, -1.5, 0.0, 1.5, 3.0]  # q = 3x at y = 2
    assert document["gradients"]["x"] == [3.0] * 5
    shared = sweep(EVALUATOR, program, {"y": 2.0}, vary=[Axis("x", -1, 1, 5)])
    for i, x in enumerate(shared["axes"]["x"]):
        check_point(shared, program, {"x": x, "y": 2.0}, i, shared["value"][i])


def test_a_failure_is_named_where_the_engine_stops() -> None:
    # Both logs fail at x = -1; the engine computes the right operand's statement first only
    # if the program says so, and the sweep reports the same one.
    program = "p = log(x)\nq = (x - 1) ** -1\nr = q * p"
    document = sweep(EVALUATOR, program, {}, points=[{"x": 1.0}, {"x": -1.0}, {"x": 0.0}])
    for i, x in enumerate([1.0, -1.0, 0.0]):
        check_point(document, program, {"x": x}, i, document["value"][i])


def test_the_tape_has_every_primitive_of_the_operation_table() -> None:
    # A derived operation reaches the tape as the primitives micrograd builds it from, so the
    # tape needs an array rule for exactly the primitives; a new one must be added there too.
    from service.operations import OPERATIONS
    from service.tape import FORWARD

    assert set(FORWARD) == {op.name for op in OPERATIONS if op.primitive}


def test_a_failed_point_says_where_in_the_program() -> None:
    document = sweep(EVALUATOR, "y = x * 2\nz = log(y)", {}, points=[{"x": -1.0}])
    [error] = document["errors"]
    assert error["position"] == {"start": 14, "end": 20, "line": 2, "column": 5}
    assert error["kind"] == "log_domain" and error["message"] == "log of a non-positive number (-2)"


@pytest.mark.parametrize(
    ("expression", "at"),
    [
        ("x ** 0.5 + 1", 0.0),
        ("x ** 0.5", -1.0),
        ("x ** -1", 0.0),
        ("x ** 2", 1e200),
        ("exp(x) * 2", 800.0),
        ("log(x)", -1.0),
        ("log(x)", 1e-320),
        ("x * x", 1e200),
        ("x + x", 1e308),
        ("1 / x", 0.0),
        ("y = x - 1\nz = 3 / (y * 2)", 1.0),
        ("2 / x", 1e-320),
        # a gradient that overflows, found by the backward pass, where it arises
        ("y = x / (x / x)", 1e200),
        ("y = x / (2 / x)", 1e154),
    ],
)
def test_a_failed_point_says_what_the_engine_says(expression: str, at: float) -> None:
    (error,) = sweep(EVALUATOR, expression, {}, points=[{"x": at}])["errors"]
    with pytest.raises(DomainError) as raised:
        EVALUATOR.evaluate(expression, {"x": at}, "primitive")
    engine = raised.value
    assert (error["kind"], error["message"], error["node"]) == (
        engine.kind,
        engine.message,
        engine.node,
    )


# -- the language of a sweep --------------------------------------------------------------------

FAILING = [
    ("x = Value(1)\ny = x.log()", "log_domain"),
    ("log(x)", "log_domain"),
    ("x ** 0.5", "complex_result"),
    ("y = x ** 0.5", "complex_result"),
    ("exp(x)", "overflow"),
    ("w = Value(2.0)  # weight\nout = (w * x).exp()", "overflow"),
]


@pytest.mark.parametrize(("expression", "kind"), FAILING)
@pytest.mark.parametrize("locale", ["ru", "et"])
def test_the_errors_of_points_speak_the_language_asked_for(
    client: FlaskClient, expression: str, kind: str, locale: str
) -> None:
    body = {"expression": expression, "vary": [{"name": "x", "from": -1, "to": 1000, "points": 3}]}
    english = client.post("/v1/sweep", json=body).get_json()["errors"]
    response = client.post("/v1/sweep", json=body, headers={"Accept-Language": locale})
    assert response.headers["Content-Language"] == locale
    errors = response.get_json()["errors"]
    assert [e["kind"] for e in errors] == [e["kind"] for e in english] and errors
    assert kind in {e["kind"] for e in errors}
    for error, original in zip(errors, english, strict=True):
        assert error["message"] != original["message"]
        assert bool(CYRILLIC.search(error["message"])) == (locale == "ru")
        assert {**error, "message": None} == {**original, "message": None}


@pytest.mark.parametrize("locale", ["en", "ru"])
def test_an_axis_end_that_overflows_a_float_is_told_so_as_a_binding_is(
    client: FlaskClient, locale: str
) -> None:
    headers = {"Accept-Language": locale, "Content-Type": "application/json"}
    axis = b'{"expression": "a", "vary": [{"name": "a", "from": 1e400, "to": 1, "points": 3}]}'
    bound = b'{"expression": "a", "bindings": {"a": 1e400}}'
    refused = client.post("/v1/sweep", data=axis, headers=headers).get_json()
    binding = client.post("/v1/gradients", data=bound, headers=headers).get_json()
    overflow = binding["detail"].split("1e400")[1]  # ", which overflows a 64-bit float"
    assert overflow and refused["detail"].endswith("1e400" + overflow)


def test_a_sweep_is_localized_without_touching_its_arrays() -> None:
    document = sweeps.sweep(EVALUATOR, "log(x)", {}, [Axis("x", -1, 1, 1001)])
    assert sweeps.localized(document, "en") is document
    russian = sweeps.localized(document, "ru")
    assert russian["value"] is document["value"] and russian["axes"] is document["axes"]
    assert len(russian["errors"]) == len(document["errors"]) == 501
    assert russian["errors"][0]["message"] == "логарифм неположительного числа (-1)"
    assert all(CYRILLIC.search(e["message"]) for e in russian["errors"])
    assert str(document["errors"][0]["message"]) == "log of a non-positive number (-1)"


@pytest.mark.parametrize(
    ("expression", "output", "caption"),
    [
        ("x * tanh(x)", None, "x * tanh(x)"),
        ("x * tanh(x)  # the activation", None, "x * tanh(x)"),
        ("(x +\n y)", None, "(x + y)"),
        ("x * y", "x", "x"),
        (SHIPPING, None, "cost"),
        (SHIPPING, "raw_cost", "raw_cost"),
        ("a = Value(2.0)  # a leaf\nb = a * x\nb + \\\n  1  # plus one", None, "b + 1"),
    ],
)
def test_a_caption_is_one_line_naming_the_output(
    expression: str, output: str | None, caption: str
) -> None:
    assert sweeps.caption(EVALUATOR, expression, output) == caption


def test_a_point_that_is_not_a_number_is_pointed_at_in_points() -> None:
    from conftest import make_app

    body = b'{"expression": "x * 2", "points": [{"x": 1}, {"x": NaN}]}'
    response = (
        make_app().test_client().post("/v1/sweep", data=body, content_type="application/json")
    )
    assert response.status_code == 422
    assert [error["pointer"] for error in response.get_json()["errors"]] == ["/points/1/x"]


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("expression=x*y&vary=x:0:1:3&bind=y:1&bind=y:2", ["y"]),
        ("expression=x*y&vary=x:0:1:3&bind=y:1&bind=y:1", ["y"]),  # even to the same number
        ("expression=x*y&vary=x:0:1:3&bind=x:1&bind=y:2&bind=x:2", ["x"]),  # a varied one too
        ("expression=x*y*z&vary=x:0:1:3&bind=z:1&bind=y:1&bind=y:2&bind=z:2", ["z", "y"]),
    ],
)
def test_a_name_bound_twice_in_the_get_form_is_refused_not_read_as_its_last(
    client: FlaskClient, query: str, names: list[str]
) -> None:
    # refused as bindings that do not fit: each `bind` is valid on its own, as the spec says
    response = client.get(f"/v1/sweep?{query}&format=json")
    assert response.status_code == 422
    problem = response.get_json()
    assert problem["type"].endswith("/invalid-binding")
    assert problem["variables"] == names
    assert problem["detail"] == f"{names[0]} is bound more than once; bind it once"


def test_a_varied_name_may_be_bound_once_to_mark_its_point(client: FlaskClient) -> None:
    response = client.get("/v1/sweep?expression=x*y&vary=x:0:1:3&bind=y:2&bind=x:1&format=json")
    assert response.status_code == 200
    assert response.get_json()["value"] == [0.0, 1.0, 2.0]


def test_a_plot_from_a_url_may_be_cached_and_revalidated(client: FlaskClient) -> None:
    # The URL decides the picture byte for byte: a page a class opens draws it once.
    url = "/v1/sweep?expression=x*tanh(x)&vary=x:-3:3:20&format=svg"
    first, again = client.get(url), client.get(url)
    assert first.status_code == again.status_code == 200
    assert first.headers["Cache-Control"] == "public, max-age=86400"
    assert first.headers["ETag"] == again.headers["ETag"]
    unchanged = client.get(url, headers={"If-None-Match": first.headers["ETag"]})
    assert (unchanged.status_code, unchanged.data) == (304, b"")
    refused = client.get("/v1/sweep?expression=x*&vary=x:0:1:3")
    assert refused.status_code == 422 and "Cache-Control" not in refused.headers


def test_a_sweep_says_its_answer_varies_with_accept(client: FlaskClient) -> None:
    body = {"expression": "x", "vary": [{"name": "x", "from": 0, "to": 1, "points": 3}]}
    assert "Accept" in client.post("/v1/sweep", json=body).headers["Vary"]


def test_a_plus_left_as_it_is_in_a_url_gets_a_hint(client: FlaskClient) -> None:
    # A query string reads `+` as a space: `x+y` arrives as `x y`.
    hinted = client.get("/v1/sweep?expression=x+y&vary=x:0:1:3&bind=y:2&format=json")
    assert hinted.status_code == 422
    assert hinted.get_json()["detail"].endswith("(in a URL a + stands for a space: write + as %2B)")
    encoded = client.get("/v1/sweep?expression=x%2By&vary=x:0:1:3&bind=y:2&format=json")
    assert encoded.get_json()["value"] == [2.0, 2.5, 3.0]
    plain = client.get("/v1/sweep?expression=x*&vary=x:0:1:3&format=json")
    assert "%2B" not in plain.get_json()["detail"]
    # a signed number in `bind` or `vary` the same
    signed = client.get("/v1/sweep?expression=x*y&vary=x:0:1:3&bind=y:+2&format=json")
    assert signed.get_json()["detail"].endswith("(in a URL a + stands for a space: write + as %2B)")


def test_a_query_that_is_no_utf8_is_refused_as_such(client: FlaskClient) -> None:
    # `%FF` is no UTF-8: read as written it would be the remainder operator `%`.
    response = client.get("/v1/sweep?expression=x%FF&vary=x:0:1:3&format=json")
    assert response.status_code == 400
    assert response.get_json()["detail"] == (
        "the URL's query is not UTF-8 once its percent escapes are decoded"
    )
