"""The scalar tape is the engine's exact twin: node for node, the same values, gradients and local
derivatives as `Value`, and no run where `Value` raises."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, note, settings

from service.errors import DomainError
from service.evaluator import Evaluator
from tests.reference_micrograd import Case, ProgramCase, cases, programs

evaluator = Evaluator()


def _bits(numbers: list[float] | tuple[float, ...]) -> list[str]:
    # Compares -0.0 with 0.0 and NaN with NaN as different and equal, as the bytes would.
    return [x.hex() if not math.isnan(x) else "nan" for x in numbers]


def _twins(text: str, bindings: dict[str, float], output: str | None = None) -> None:
    for granularity in ("primitive", "operator"):
        _twin(text, bindings, output, granularity)


def _twin(text: str, bindings: dict[str, float], output: str | None, granularity: str) -> None:
    try:
        compiled = evaluator.compile(text, granularity, output)
        env = evaluator.bind(compiled.parsed, bindings)
    except (DomainError, ValueError):
        return
    assert compiled.tape is not None, granularity
    run = compiled.tape.run({name: value.data for name, value in env.items()})
    try:
        root, _ = compiled.build(env)
    except DomainError:
        assert run is None  # the tape never answers where the engine refuses
        return
    order = root.backward()
    if run is None:  # only a sum of values overflowing: the engine then decides
        assert not math.isfinite(sum(node.data for node in order))
        return
    values, grads, locals_ = run
    assert len(values) == len(order) == len(compiled.templates)
    assert _bits(values) == _bits([node.data for node in order])
    assert _bits(grads) == _bits([node.grad for node in order])
    for mine, node in zip(locals_, order, strict=True):
        assert _bits(mine) == _bits(node.local_grads)
    assert compiled.tape.root == compiled.root
    inputs = compiled.parsed.inputs
    assert [grads[i] if i is not None else 0.0 for i in compiled.input_nodes] == [
        env[name].grad for name in inputs
    ]


# Every operation, a shared node, a relu at its step, the edges of each domain, and a program with
# a chosen output: the random expressions and programs below (slow) reach these and more.
@pytest.mark.parametrize(
    ("text", "bindings", "output"),
    [
        ("(a + b) * c", {"a": 2.0, "b": -3.0, "c": 10.0}, None),
        ("a / b - 2 / a + -a ** 2 + a ^ 0.5", {"a": 1.5, "b": -0.25}, None),
        ("tanh(a * b) / (1 + exp(-c)) + relu(a - c)", {"a": 1.0, "b": 2.0, "c": 3.0}, None),
        ("log(a) * a ** -2.5 - relu(a - a) * b", {"a": 0.5, "b": 2.0}, None),
        ("exp(a) * exp(a) + a ** 3 / a", {"a": 700.0}, None),
        ("-0.0 * a + relu(-a)", {"a": -0.0}, None),
        ("s = a * b\nout = s * s + s", {"a": 2.0, "b": 3.0}, None),
        ("h = tanh(w * x)\nloss = (h - y) ** 2", {"w": 0.5, "x": 2.0, "y": 1.0}, "h"),
    ],
)
def test_the_tape_is_the_engine_on_examples(
    text: str, bindings: dict[str, float], output: str | None
) -> None:
    _twins(text, bindings, output)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(max_depth=5))
def test_the_tape_is_the_engine_on_expressions(case: Case) -> None:
    note(case.text)
    _twins(case.text, case.bindings)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_the_tape_is_the_engine_on_programs(case: ProgramCase) -> None:
    note(case.text)
    _twins(case.text, case.bindings, case.output)


def test_where_the_engine_refuses_the_tape_gives_way() -> None:
    for text, bindings in [
        ("log(a)", {"a": 0.0}),
        ("a ** 0.5", {"a": -1.0}),
        ("a ** 0.5", {"a": 0.0}),
        ("exp(a)", {"a": 1000.0}),
        ("a * a * a", {"a": 1e200}),
        ("1 / a", {"a": 0.0}),
    ]:
        for granularity in ("primitive", "operator"):
            compiled = evaluator.compile(text, granularity)
            env = evaluator.bind(compiled.parsed, bindings)
            assert compiled.tape is not None
            assert compiled.tape.run({n: v.data for n, v in env.items()}) is None, text


def test_the_lesson_on_the_tape() -> None:
    compiled = evaluator.compile("(a + b) * c", "primitive")
    assert compiled.tape is not None
    run = compiled.tape.run({"a": 2.0, "b": -3.0, "c": 10.0})
    assert run is not None
    values, grads, _ = run
    assert values == [2.0, -3.0, -1.0, 10.0, -10.0]
    assert grads == [10.0, 10.0, 10.0, -1.0, 1.0]
