"""The evaluation document's invariants, and every way bindings or arithmetic are refused."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import assume, example, given, note, settings
from reference_micrograd import Case, cases, rounding_scale

from service.errors import (
    BINDING_KINDS,
    DOMAIN_KINDS,
    BindingError,
    DomainError,
)
from service.evaluator import GRANULARITIES, Evaluator
from service.parser import parse

evaluator = Evaluator()

PRIMITIVES = {"+", "*", "**", "exp", "log", "relu", "tanh"}
DERIVED = {"neg", "-", "/"}


def numbers(document: Any) -> Iterator[float]:
    """Every number anywhere in a document."""
    if isinstance(document, dict):
        for value in document.values():
            yield from numbers(value)
    elif isinstance(document, list):
        for value in document:
            yield from numbers(value)
    elif isinstance(document, int | float) and not isinstance(document, bool):
        yield document


def expected_local_grads(node: dict[str, Any], nodes: list[dict[str, Any]]) -> list[float]:
    """Each edge's local derivative from the operand values, by the rules of the contract."""
    x = [nodes[child]["value"] for child in node["children"]]
    op, out = node["op"], node["value"]
    rules = {
        "+": lambda: [1.0, 1.0],
        "*": lambda: [x[1], x[0]],
        "**": lambda: [node["exponent"] * x[0] ** (node["exponent"] - 1)],
        "exp": lambda: [out],
        "log": lambda: [1 / x[0]],
        "relu": lambda: [1.0 if x[0] > 0 else 0.0],
        "tanh": lambda: [1 - out**2],
        # Derived operations carry their composite derivatives, not their expansion's.
        "neg": lambda: [-1.0],
        "-": lambda: [1.0, -1.0],
        "/": lambda: [1 / x[1], -x[0] / x[1] ** 2],
    }
    return rules[op]()


def evaluate_fragment(text: str, bindings: dict[str, float]) -> float:
    """The value of a piece of the expression text, with the bindings its variables need."""
    variables = parse(text).variables
    return evaluator.evaluate(text, {name: bindings[name] for name in variables})["value"]


def check_document(case: Case, document: dict[str, Any], granularity: str) -> None:
    text = case.text
    nodes = document["graph"]["nodes"]
    n = len(nodes)
    assert document["expression"] == text
    assert document["granularity"] == granularity
    assert [node["id"] for node in nodes] == list(range(n))
    assert all(math.isfinite(x) for x in numbers(document))

    # forward: a topological order, every child before its parent, the root last.
    forward = document["forward"]
    assert sorted(forward) == list(range(n))
    rank = {node: i for i, node in enumerate(forward)}
    for node in nodes:
        assert all(rank[child] < rank[node["id"]] for child in node["children"])
    assert forward[-1] == document["graph"]["root"]
    assert document["value"] == nodes[document["graph"]["root"]]["value"]

    # backward: one step per node, in reverse forward order, starting at the root with grad 1.
    backward = document["backward"]
    assert [step["node"] for step in backward] == forward[::-1]
    assert backward[0]["grad"] == 1.0
    contributions: dict[int, list[float]] = {i: [] for i in range(n)}
    for step in backward:
        node = nodes[step["node"]]
        # A node sends only once everything above it has sent to it: its gradient is final,
        # the sum of what it received, added up in the order it was sent, exactly.
        if step["node"] != document["graph"]["root"]:
            assert step["grad"] == sum_in_order(contributions[node["id"]]) == node["grad"]
        assert [send["to"] for send in step["sends"]] == node["children"]
        assert [send["local_grad"] for send in step["sends"]] == node["local_grads"]
        for send in step["sends"]:
            assert send["contribution"] == send["local_grad"] * step["grad"]
            contributions[send["to"]].append(send["contribution"])
            assert send["grad_after"] == sum_in_order(contributions[send["to"]])

    # nodes: kinds, labels, ops, spans.
    parsed = parse(text)
    variables = [node for node in nodes if node["kind"] == "variable"]
    assert sorted(node["label"] for node in variables) == sorted(parsed.variables)
    assert document["gradients"] == {
        name: next(v["grad"] for v in variables if v["label"] == name) for name in parsed.variables
    }
    assert list(document["gradients"]) == list(parsed.variables)  # order of first appearance
    for node in nodes:
        start, end = node["span"]
        assert 0 <= start < end <= len(text)
        if node["kind"] == "operation":
            assert node["children"] and node["op"] in PRIMITIVES | DERIVED
            assert node["local_grads"] == pytest.approx(
                expected_local_grads(node, nodes), rel=1e-12, abs=1e-300
            )
            assert node["derived"] is (node["op"] in DERIVED)
            assert (node["expansion"] is not None) is node["derived"]
            assert node["exponent"] is None or node["op"] == "**"
            if node["op"] == "**":
                assert node["label"].startswith("**")
                assert float(node["label"][2:]) == node["exponent"]
            else:
                assert node["label"] == {"neg": "-"}.get(node["op"], node["op"])
        else:
            assert node["children"] == [] and node["local_grads"] == [] and node["op"] is None
            if node["kind"] == "constant":
                assert float(node["label"]) == node["value"]
            else:
                assert node["kind"] == "variable"
    if granularity == "primitive":
        assert not any(node["derived"] for node in nodes)
    else:
        # One node per operator written and per constant written, one per variable; a piece of
        # text at a node's span computes that node's value.
        tree = parsed.postorder()
        assert n == sum(t.kind != "variable" for t in tree) + len(parsed.variables)
        for node in nodes:
            fragment = text[node["span"][0] : node["span"][1]]
            assert evaluate_fragment(fragment, case.bindings) == node["value"], fragment


def sum_in_order(terms: list[float]) -> float:
    """Left to right, as the engine adds (not `math.fsum`, and not `sum`'s compensated form)."""
    total = 0.0
    for term in terms:
        total += term
    return total


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(cases())
@example(Case("(a + b) * c", {"a": 2.0, "b": -3.0, "c": 10.0}))
@example(Case("a * a * a - a / a", {"a": 1.5}))
@example(Case("2 - a + 2 / a + -a + a ** -1 + +a", {"a": -1.5}))
@example(Case("-(2) * a + a - -2 + a / (2) + exp((a))", {"a": 0.5}))
def test_document_invariants(case: Case) -> None:
    note(repr(case))  # hypothesis shows the generated case only as `case=`
    try:
        documents = {g: evaluator.evaluate(case.text, case.bindings, g) for g in GRANULARITIES}
    except DomainError:
        assume(False)
        raise
    for granularity, document in documents.items():
        check_document(case, document, granularity)
    operator, primitive = documents["operator"], documents["primitive"]
    assert operator["value"] == primitive["value"]
    # The views sum the same terms grouped differently (`a - b` is one step, or three).
    size = max(rounding_scale(operator), rounding_scale(primitive))
    for name, grad in operator["gradients"].items():
        assert abs(grad - primitive["gradients"][name]) <= 1e-9 * abs(grad) + 1e-12 * size
    # The structure is the document without its numbers, whatever the bindings.
    for granularity, document in documents.items():
        structure = evaluator.structure(case.text, granularity)
        assert structure["variables"] == list(document["gradients"])
        numbered = [
            {k: v for k, v in node.items() if k not in ("value", "grad", "local_grads")}
            for node in document["graph"]["nodes"]
        ]
        assert structure["graph"]["nodes"] == numbered


# -- bindings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bindings", "kind", "variables"),
    [
        ({"a": 1.0}, "unbound_variables", ["b"]),
        ({}, "unbound_variables", ["a", "b"]),
        ({"a": 1.0, "b": 2.0, "c": 3.0}, "unknown_variables", ["c"]),
        ({"a": 1.0, "b": 2.0, "A": 3.0}, "unknown_variables", ["A"]),  # names are case-sensitive
        ({"a": True, "b": 2.0}, "invalid_binding", ["a"]),
        ({"a": False, "b": 2.0}, "invalid_binding", ["a"]),
        ({"a": "1", "b": 2.0}, "invalid_binding", ["a"]),
        ({"a": None, "b": 2.0}, "invalid_binding", ["a"]),
        ({"a": [1.0], "b": 2.0}, "invalid_binding", ["a"]),
        ({"a": 1.0, "b": math.nan}, "invalid_binding", ["b"]),
        ({"a": 1.0, "b": math.inf}, "invalid_binding", ["b"]),
        ({"a": 1.0, "b": -math.inf}, "invalid_binding", ["b"]),
        ({"a": 1.0, "b": 10**400}, "invalid_binding", ["b"]),  # an int no float can hold
    ],
)
def test_bad_bindings_are_refused(
    bindings: dict[str, Any], kind: str, variables: list[str]
) -> None:
    for granularity in GRANULARITIES:
        with pytest.raises(BindingError) as raised:
            evaluator.evaluate("a * b", bindings, granularity)
        assert raised.value.kind == kind
        assert kind in BINDING_KINDS
        assert raised.value.variables == variables
        assert raised.value.message


def test_integer_bindings_are_numbers() -> None:
    document = evaluator.evaluate("a * b", {"a": 2, "b": -3})
    assert document["value"] == -6.0
    assert document["gradients"] == {"a": -3.0, "b": 2.0}


# -- domain errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bindings", "kind", "span"),
    [
        ("log(a)", {"a": 0.0}, "log_domain", (0, 6)),
        ("log(a)", {"a": -1.0}, "log_domain", (0, 6)),
        ("b + log(a) * 2", {"a": -1.0, "b": 1.0}, "log_domain", (4, 10)),
        ("a / b", {"a": 1.0, "b": 0.0}, "division_by_zero", (0, 5)),
        ("a / b", {"a": 1.0, "b": -0.0}, "division_by_zero", (0, 5)),
        ("1/(a-a)", {"a": 1.0}, "division_by_zero", (0, 7)),
        ("a ** -1", {"a": 0.0}, "division_by_zero", (0, 7)),
        ("2 / a", {"a": 0.0}, "division_by_zero", (0, 5)),
        ("a ** 0.5", {"a": -1.0}, "complex_result", (0, 8)),
        ("2 - a ^ (1/3)", {"a": -8.0}, "complex_result", (4, 13)),
        ("exp(a)", {"a": 1000.0}, "overflow", (0, 6)),
        ("b + exp(a)", {"a": 1000.0, "b": 1.0}, "overflow", (4, 10)),
        ("a * a", {"a": 1e200}, "overflow", (0, 5)),
        ("a ** 2", {"a": 1e200}, "overflow", (0, 6)),
        # Every value is finite, but d/da = 1e200 * 1e200 is not: caught on the way back.
        ("a * 1e200 * 1e200", {"a": 1e-300}, "non_finite", (0, 9)),
        # Two finite contributions whose sum is not.
        ("a * b + a * b", {"a": 1e-10, "b": 1e308}, "non_finite", (0, 1)),
    ],
)
def test_domain_errors_name_the_operation(
    text: str, bindings: dict[str, float], kind: str, span: tuple[int, int]
) -> None:
    for granularity in GRANULARITIES:
        with pytest.raises(DomainError) as raised:
            evaluator.evaluate(text, bindings, granularity)
        error = raised.value
        assert (error.kind, error.span) == (kind, span)
        assert kind in DOMAIN_KINDS
        # The node is the graph node at that span, so a client can highlight it.
        nodes = evaluator.structure(text, granularity)["graph"]["nodes"]
        assert isinstance(error.node, int)
        assert tuple(nodes[error.node]["span"]) == span
        assert error.as_dict()["node"] == error.node


@pytest.mark.parametrize(
    ("text", "kind", "span"),
    [
        ("0 ** -1", "division_by_zero", (0, 7)),
        ("b + 2 / (3 - 3)", "division_by_zero", (4, 15)),
        ("exp(1000)", "overflow", (0, 9)),
        ("b + log(0) * 2", "log_domain", (4, 10)),
        ("b * (-8) ** 0.5", "complex_result", (4, 15)),
    ],
)
def test_domain_errors_while_folding_constants(text: str, kind: str, span: tuple[int, int]) -> None:
    # A constant subexpression fails before any graph exists: no node, but the span of the
    # subexpression, whatever the bindings.
    for granularity in GRANULARITIES:
        with pytest.raises(DomainError) as raised:
            evaluator.evaluate(text, {"b": 1.0} if "b" in text else {}, granularity)
        assert (raised.value.kind, raised.value.node, raised.value.span) == (kind, None, span)


@pytest.mark.parametrize(
    ("text", "kind", "span"),
    [
        # A constant divisor of 0, written or reached by folding, is a division by zero...
        ("a / 0", "division_by_zero", (0, 5)),
        ("a / (1 - 1)", "division_by_zero", (0, 11)),
        ("a / exp(-1000)", "division_by_zero", (0, 14)),
        # ...and 1 / 1e-310 is larger than any float: Python raises its own errors for both.
        ("a / 1e-310", "overflow", (0, 10)),
        ("2 * a / 1e-310", "overflow", (0, 14)),
    ],
)
def test_a_variable_over_a_bad_constant(text: str, kind: str, span: tuple[int, int]) -> None:
    # The failure does not depend on the bindings, so there may be no graph to point into.
    for granularity in GRANULARITIES:
        with pytest.raises(DomainError) as raised:
            evaluator.evaluate(text, {"a": 1.0}, granularity)
        assert (raised.value.kind, raised.value.span) == (kind, span)
        assert raised.value.node is None or isinstance(raised.value.node, int)


def test_edge_values_that_are_not_errors() -> None:
    # x ** 0 has derivative 0 everywhere, also at 0 where micrograd's formula divides by zero.
    assert evaluator.evaluate("a ** 0", {"a": 0.0})["gradients"] == {"a": 0.0}
    # Saturated tanh and relu on both sides of 0 are finite.
    assert evaluator.evaluate("tanh(a)", {"a": 1e300})["gradients"] == {"a": 0.0}
    assert evaluator.evaluate("relu(a)", {"a": -1e300})["gradients"] == {"a": 0.0}
    # Underflow to 0 is a number, not an error.
    assert evaluator.evaluate("a * 1e-300", {"a": 1e-300})["value"] == 0.0
