"""The engine, op by op against plain math, and the lessons the documents must tell exactly."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from service.engine import Value
from service.evaluator import Evaluator, evaluate
from service.parser import parse

Inputs = Sequence[tuple[float, ...]]

ANY = [(-2.0,), (-0.5,), (0.75,), (3.0,)]
POSITIVE = [(0.25,), (0.75,), (3.0,)]
PAIRS = [(2.0, -3.0), (0.5, 4.0), (-1.25, -0.75), (3.0, 3.0)]


def check(
    op: Callable[..., Any],
    derivatives: Callable[..., tuple[float, ...]],
    samples: Inputs,
    reference: Callable[..., float] | None = None,
    primitive: bool = True,
) -> None:
    """`op` on Values against `reference` (by default `op` itself on floats) and its derivatives.

    For a primitive the derivatives are also the local derivatives the node stores (a number
    operand is a constant leaf of its own); a derived operation is several nodes, so only the
    gradients that reach the inputs are checked.
    """
    for inputs in samples:
        leaves = [Value(x) for x in inputs]
        out = op(*leaves)
        out.backward()
        expected = (reference or op)(*inputs)
        assert out.data == pytest.approx(expected, rel=1e-12), inputs
        assert [leaf.grad for leaf in leaves] == pytest.approx(derivatives(*inputs), rel=1e-12)
        if primitive:  # one node: its edges to the inputs carry exactly these derivatives
            edges = [
                (child, local)
                for child, local in zip(out.children, out.local_grads, strict=True)
                if any(child is leaf for leaf in leaves)
            ]
            assert [child for child, _ in edges] == leaves
            assert [local for _, local in edges] == pytest.approx(derivatives(*inputs), rel=1e-12)


# -- primitives ---------------------------------------------------------------------------------
def test_add() -> None:
    check(lambda a, b: a + b, lambda a, b: (1, 1), PAIRS)


def test_mul() -> None:
    check(lambda a, b: a * b, lambda a, b: (b, a), PAIRS)


def test_pow_integer() -> None:
    check(lambda a: a**3, lambda a: (3 * a**2,), ANY)


def test_pow_negative() -> None:
    check(lambda a: a**-2, lambda a: (-2 * a**-3,), ANY)


def test_pow_fractional() -> None:
    check(lambda a: a**0.5, lambda a: (0.5 / math.sqrt(a),), POSITIVE)


def test_pow_zero() -> None:
    check(lambda a: a**0, lambda a: (0,), [*ANY, (0.0,)])


def test_exp() -> None:
    check(Value.exp, lambda a: (math.exp(a),), ANY, math.exp)


def test_log() -> None:
    check(Value.log, lambda a: (1 / a,), POSITIVE, math.log)


def test_tanh() -> None:
    check(Value.tanh, lambda a: (1 - math.tanh(a) ** 2,), ANY, math.tanh)


def test_relu() -> None:
    check(Value.relu, lambda a: (float(a > 0),), [*ANY, (0.0,)], relu)


# -- derived, as micrograd builds them ------------------------------------------------------------
def test_neg() -> None:
    check(lambda a: -a, lambda a: (-1,), ANY, primitive=False)


def test_sub() -> None:
    check(lambda a, b: a - b, lambda a, b: (1, -1), PAIRS, primitive=False)


def test_div() -> None:
    check(lambda a, b: a / b, lambda a, b: (1 / b, -a / b**2), PAIRS, primitive=False)


def test_radd() -> None:
    check(lambda a: 2 + a, lambda a: (1,), ANY)


def test_rmul() -> None:
    check(lambda a: 2 * a, lambda a: (2,), ANY)


def test_add_number() -> None:
    check(lambda a: a + 2, lambda a: (1,), ANY)


def test_mul_number() -> None:
    check(lambda a: a * 2, lambda a: (2,), ANY)


def test_rsub() -> None:
    check(lambda a: 2 - a, lambda a: (-1,), ANY, primitive=False)


def test_sub_number() -> None:
    check(lambda a: a - 2, lambda a: (1,), ANY)


def test_rdiv() -> None:
    check(lambda a: 2 / a, lambda a: (-2 / a**2,), ANY, primitive=False)


def test_div_number() -> None:
    check(lambda a: a / 4, lambda a: (0.25,), ANY)


def relu(x: float) -> float:
    return 0.0 if x < 0 else x


def test_pow_takes_only_a_constant_exponent() -> None:
    with pytest.raises(TypeError):
        Value(2.0) ** Value(3.0)  # type: ignore[operator]


def test_numbers_become_constant_leaves_one_per_occurrence() -> None:
    a = Value(3.0)
    out = a * 2 + 2
    product, two = out.children
    assert two.children == () and two.data == 2.0
    assert product.children[0] is a and product.children[1] is not two


def test_a_times_a_keeps_both_edges() -> None:
    a = Value(3.0)
    out = a * a
    out.backward()
    assert out.children == (a, a)
    assert a.grad == 6.0  # two contributions of 3


def test_gradients_do_not_accumulate_across_backward_passes() -> None:
    a, b = Value(0.5), Value(-1.5)
    out = (a * b + a / b).tanh()
    out.backward()
    first = (a.grad, b.grad, out.grad)
    out.backward()
    assert (a.grad, b.grad, out.grad) == first


@pytest.mark.slow
def test_a_chain_deeper_than_the_recursion_limit() -> None:
    x = Value(0.5)
    y = x
    for _ in range(100_000):
        y = y.relu()
    order = y.backward()
    assert len(order) == 100_001
    assert order[0] is x and order[-1] is y
    assert x.grad == 1.0


def test_the_topological_order_is_deterministic() -> None:
    def build() -> list[str]:
        a, b = Value(1.0), Value(2.0)
        out = (a * b + b).exp() * (a - b) + a * a
        return [f"{node.op}:{node.data}" for node in out.topological_order()]

    first = build()
    assert all(build() == first for _ in range(5))


# -- the lesson, as the documents tell it -------------------------------------------------------


def test_the_lesson_value_and_gradients() -> None:
    document = evaluate("(a + b) * c", {"a": 2, "b": -3, "c": 10})
    assert document["value"] == -10.0
    assert document["gradients"] == {"a": 10.0, "b": 10.0, "c": -1.0}


def test_the_lesson_backward_schedule() -> None:
    document = evaluate("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "operator")
    labels = [node["label"] for node in document["graph"]["nodes"]]
    assert labels == ["a", "b", "+", "c", "*"]  # micrograd's depth-first order
    a, b, total, c, root = range(5)
    assert document["graph"]["root"] == root
    assert document["forward"] == [a, b, total, c, root]

    def send(to: int, local: float, contribution: float, after: float) -> dict[str, Any]:
        return {"to": to, "local_grad": local, "contribution": contribution, "grad_after": after}

    assert document["backward"] == [
        # The root sends 1 x c = 10 to (a + b), and 1 x (a + b) = -1 to c.
        {"node": root, "grad": 1.0, "sends": [send(total, 10, 10, 10), send(c, -1, -1, -1)]},
        {"node": c, "grad": -1.0, "sends": []},
        # (a + b) passes its 10 on to each of a and b, times the local derivative 1.
        {"node": total, "grad": 10.0, "sends": [send(a, 1, 10, 10), send(b, 1, 10, 10)]},
        {"node": b, "grad": 10.0, "sends": []},
        {"node": a, "grad": 10.0, "sends": []},
    ]


@pytest.mark.parametrize("granularity", ["operator", "primitive"])
def test_a_times_a_receives_two_contributions(granularity: str) -> None:
    document = evaluate("a * a", {"a": 3}, granularity)
    nodes = document["graph"]["nodes"]
    assert [node["label"] for node in nodes] == ["a", "*"]
    assert nodes[1]["children"] == [0, 0]
    assert document["backward"][0]["sends"] == [
        {"to": 0, "local_grad": 3.0, "contribution": 3.0, "grad_after": 3.0},
        {"to": 0, "local_grad": 3.0, "contribution": 3.0, "grad_after": 6.0},
    ]
    assert document["gradients"] == {"a": 6.0}


@pytest.mark.parametrize("granularity", ["operator", "primitive"])
def test_a_closed_relu_stops_every_gradient_below_it(granularity: str) -> None:
    document = evaluate("relu(a * b) + c", {"a": 2, "b": -3, "c": 1}, granularity)
    assert document["gradients"] == {"a": 0.0, "b": 0.0, "c": 1.0}
    product = next(node for node in document["graph"]["nodes"] if node["op"] == "*")
    assert product["grad"] == 0.0


def test_relu_at_zero_has_gradient_zero() -> None:
    x = Value(0.0)
    out = x.relu()
    out.backward()
    assert (out.data, x.grad) == (0.0, 0.0)
    for granularity in ("operator", "primitive"):
        assert evaluate("relu(a)", {"a": 0}, granularity)["gradients"] == {"a": 0.0}
        assert evaluate("relu(0)", {}, granularity)["value"] == 0.0


def test_a_constant_expression_is_one_leaf() -> None:
    for granularity in ("operator", "primitive"):
        document = evaluate("2 * 3 - exp(0)", {}, granularity)
        assert document["value"] == 5.0
        assert document["gradients"] == {}
        assert [node["kind"] for node in document["graph"]["nodes"]] == ["constant"]
        assert document["backward"] == [{"node": 0, "grad": 1.0, "sends": []}]


def test_every_evaluation_starts_from_fresh_gradients() -> None:
    # The evaluator caches the compiled expression; the numbers must not carry over.
    evaluator = Evaluator()
    first = evaluator.evaluate("a * b + a", {"a": 2, "b": 5})
    evaluator.evaluate("a * b + a", {"a": -7, "b": 0.5})
    assert evaluator.evaluate("a * b + a", {"a": 2, "b": 5}) == first


# -- derived operations in both views -----------------------------------------------------------


def tree(text: str, granularity: str) -> str:
    """The document's graph written out from the root: `+(*(a, -1), 2)` for micrograd's `2 - a`."""
    bindings = dict.fromkeys(parse(text).variables, 1.5)
    document = evaluate(text, bindings, granularity)
    nodes = document["graph"]["nodes"]

    def write(i: int) -> str:  # expressions in these tests are a few levels deep
        node = nodes[i]
        if node["kind"] != "operation":
            return node["label"]
        name = node["label"] if node["op"] == "**" else node["op"]
        return f"{name}({', '.join(write(child) for child in node['children'])})"

    return write(document["graph"]["root"])


@pytest.mark.parametrize(
    ("text", "primitive", "operator"),
    [
        ("-a", "*(a, -1)", "neg(a)"),
        ("a - b", "+(a, *(b, -1))", "-(a, b)"),
        ("a - 2", "+(a, -2)", "-(a, 2)"),
        ("2 - a", "+(*(a, -1), 2)", "-(2, a)"),
        ("a / b", "*(a, **-1(b))", "/(a, b)"),
        ("a / 4", "*(a, 0.25)", "/(a, 4)"),
        ("2 / a", "*(**-1(a), 2)", "/(2, a)"),
        ("2 + a", "+(a, 2)", "+(2, a)"),
        ("2 * a", "*(a, 2)", "*(2, a)"),
        ("a ** 3", "**3(a)", "**3(a)"),
        ("a ^ -1", "**-1(a)", "**-1(a)"),
        ("-a ** 2", "*(**2(a), -1)", "neg(**2(a))"),
        ("a - -b", "+(a, *(*(b, -1), -1))", "-(a, neg(b))"),
        ("2 * 3 * a", "*(a, 6)", "*(6, a)"),
        ("a * 2 * 3", "*(*(a, 2), 3)", "*(*(a, 2), 3)"),
        ("a * (1/2)", "*(a, 0.5)", "*(a, 0.5)"),
        ("(a + 2) * (a + 2)", "*(+(a, 2), +(a, 2))", "*(+(a, 2), +(a, 2))"),
        (
            "relu(a) + tanh(b) * exp(log(a))",
            "+(relu(a), *(tanh(b), exp(log(a))))",
            "+(relu(a), *(tanh(b), exp(log(a))))",
        ),
    ],
)
def test_derived_operations(text: str, primitive: str, operator: str) -> None:
    assert tree(text, "primitive") == primitive
    assert tree(text, "operator") == operator


@pytest.mark.parametrize(
    ("text", "expansion", "local_grads"),
    [
        ("-a", "a*-1", [-1.0]),
        ("a - b", "a+(b*-1)", [1.0, -1.0]),
        ("2 - a", "(a*-1)+2", [1.0, -1.0]),
        ("a / b", "a*b**-1", [1 / -1.5, -3.0 / (-1.5) ** 2]),
        ("2 / a", "(a**-1)*2", [1 / 3.0, -2 / 3.0**2]),
    ],
)
def test_a_derived_node_has_its_expansion_and_composite_derivatives(
    text: str, expansion: str, local_grads: list[float]
) -> None:
    document = evaluate(text, {name: v for name, v in [("a", 3.0), ("b", -1.5)] if name in text})
    root = document["graph"]["nodes"][document["graph"]["root"]]
    assert root["derived"] is True
    assert "".join(root["expansion"].split()) == expansion
    assert root["local_grads"] == local_grads
