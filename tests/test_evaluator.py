"""The evaluator's cache and its guards against costs that grow with the request."""

from __future__ import annotations

import pytest

from service.errors import BindingError, DomainError
from service.evaluator import Evaluator


def _sum(n: int, offset: int = 0) -> str:
    return " + ".join(f"x{offset + i}" for i in range(n))


def test_repeated_expressions_come_from_the_cache() -> None:
    evaluator = Evaluator()
    first = evaluator.compile("(a + b) * c")
    assert evaluator.compile("(a + b) * c") is first
    assert evaluator.compile("(a + b) * c", "primitive") is not first  # keyed by granularity too
    info = evaluator.cache_info()
    assert (info["hits"], info["misses"], info["entries"]) == (1, 2, 2)
    # New bindings, the same compiled shape, fresh numbers.
    assert evaluator.evaluate("(a + b) * c", {"a": 1, "b": 1, "c": 1})["value"] == 2.0
    assert evaluator.evaluate("(a + b) * c", {"a": 2, "b": -3, "c": 10})["value"] == -10.0


def test_the_cache_is_bounded_by_entries() -> None:
    evaluator = Evaluator(cache_size=3)
    for i in range(10):
        evaluator.compile(f"a + {i}")
    assert evaluator.cache_info()["entries"] == 3
    # Least recently used goes first: the last three stay.
    evaluator.compile("a + 9")
    assert evaluator.cache_info()["hits"] == 1


@pytest.mark.slow
def test_the_cache_is_bounded_by_graph_nodes() -> None:
    evaluator = Evaluator(cache_size=100, cache_nodes=2_500)
    for offset in range(5):
        evaluator.compile(_sum(500, offset * 1000))  # 999 nodes each
    info = evaluator.cache_info()
    assert info["nodes"] <= 2_500
    assert info["entries"] == 2
    # An expression larger than the whole budget is evaluated but never cached.
    evaluator.compile(_sum(2_000))
    assert evaluator.cache_info()["nodes"] <= 2_500
    assert evaluator.compile(_sum(2_000)) is not evaluator.compile(_sum(2_000))


def test_a_disabled_cache_keeps_nothing() -> None:
    evaluator = Evaluator(cache_size=0)
    evaluator.compile("a * b")
    assert evaluator.cache_info()["entries"] == 0


@pytest.mark.slow
def test_an_unknown_binding_among_thousands_is_named() -> None:
    # How the check scales with the number of bindings is measured by bench/linear.py.
    expression = _sum(5_000)
    evaluator = Evaluator()
    bindings = {f"x{i}": 1.0 for i in range(5_000)}
    evaluator.compile(expression)
    with pytest.raises(BindingError) as raised:
        evaluator.evaluate(expression, {**bindings, "typo": 1.0})
    assert raised.value.variables == ["typo"]
    assert evaluator.evaluate(expression, bindings)["value"] == 5_000.0


@pytest.mark.parametrize(
    ("bindings", "message"),
    [
        ({"a": 1, "": 2}, "'' is not in the expression"),
        ({"a": 1, "a b": 2}, "'a b' is not in the expression"),
        ({"a": 1, "a\u200b": 2}, "'a\\u200b' is not in the expression"),
        ({"a": 1, "b": 2, "": 3}, "'', b are not in the expression"),
        ({"": 2}, "no value given for a (the bindings name '', which the expression does not use)"),
    ],
)
def test_a_binding_name_that_is_not_a_name_is_quoted(
    bindings: dict[str, float], message: str
) -> None:
    with pytest.raises(BindingError) as raised:
        Evaluator().evaluate("a", bindings)
    assert raised.value.message.startswith(message)


@pytest.mark.parametrize("granularity", ["operator", "primitive"])
@pytest.mark.parametrize("divisor", [1e-200, 5e-324, -1e-170])
def test_a_tiny_divisor_is_a_domain_error(granularity: str, divisor: float) -> None:
    # 1/b is finite but -a/b**2 is not: the derivative overflows, and says so.
    with pytest.raises(DomainError) as raised:
        Evaluator().evaluate("a / b", {"a": 1.0, "b": divisor}, granularity)
    assert raised.value.kind in ("overflow", "non_finite")
    assert raised.value.span == (0, 5)


def test_an_overflowing_power_derivative_names_the_power_written() -> None:
    # micrograd builds x / k as x * k ** -1, whose derivative k ** -2 overflows for a tiny k: the
    # sentence names k ** -1, which the operator view's expansion shows, not k ** -2
    for text in ("x / 1e-160", "x * (y ** -1)"):
        with pytest.raises(DomainError) as raised:
            Evaluator().evaluate(text, {"x": 2.0, "y": 1e-160}, "operator")
        assert raised.value.message == "the derivative of 1e-160 ** -1 overflows"
