"""The primitive graph, node for node, against an independent micrograd running the same text."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, example, given, note, settings
from reference_micrograd import Case, Value, cases, exponent, local_grads, op_name, run

from service.errors import DomainError
from service.evaluator import Evaluator

evaluator = Evaluator()


def primitive_document(case: Case) -> dict[str, Any]:
    try:
        return evaluator.evaluate(case.text, case.bindings, "primitive")
    except DomainError:
        # Domain errors are checked in test_schedule; here only graphs both sides can build.
        assume(False)
        raise


def assert_same_graph(case: Case) -> None:
    document = primitive_document(case)
    result, variables = run(case.text, case.bindings)
    assert isinstance(result, Value)
    topo = result.backward()
    position = {id(node): i for i, node in enumerate(topo)}
    names = {id(value): name for name, value in variables.items()}
    nodes = document["graph"]["nodes"]

    assert len(nodes) == len(topo)
    assert document["graph"]["root"] == len(topo) - 1  # micrograd's sort puts the root last
    assert document["value"] == result.data
    for node, reference in zip(nodes, topo, strict=True):
        where = f"node {node['id']} of {case.text!r}"
        assert node["children"] == [position[id(child)] for child in reference._prev], where
        assert node["op"] == op_name(reference), where
        assert node["exponent"] == exponent(reference), where
        # The forward pass does the same float operations in the same order: equal bit for bit.
        # (Python keeps an integer constant as an int; the document holds its float.)
        assert node["value"] == float(reference.data), where
        # So does the backward pass, except that micrograd writes `t**2` where the engine may
        # write `t * t`: allow the last bits to differ.
        assert node["grad"] == pytest.approx(reference.grad, rel=1e-9, abs=1e-300), where
        assert node["local_grads"] == pytest.approx(local_grads(reference), rel=1e-9), where
        if id(reference) in names:
            assert (node["kind"], node["label"]) == ("variable", names[id(reference)]), where
        elif not reference._prev:
            assert node["kind"] == "constant", where
            assert float(node["label"]) == float(reference.data), where
        else:
            assert node["kind"] == "operation", where
            assert node["derived"] is False, where
    for name, value in variables.items():
        assert document["gradients"][name] == pytest.approx(value.grad, rel=1e-9, abs=1e-300)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(cases())
# Each derived operation, in every arrangement of constants, as Python dispatches it.
@example(Case("2 - a", {"a": 3.0}))
@example(Case("a - 2", {"a": 3.0}))
@example(Case("a - b", {"a": 3.0, "b": -1.5}))
@example(Case("2 / a", {"a": 3.0}))
@example(Case("a / 2", {"a": 3.0}))
@example(Case("a / b", {"a": 3.0, "b": -1.5}))
@example(Case("-a", {"a": 3.0}))
@example(Case("2 + a", {"a": 3.0}))
@example(Case("2 * a", {"a": 3.0}))
@example(Case("a * a", {"a": 3.0}))
@example(Case("2*3*a", {"a": 3.0}))
@example(Case("a*2*3", {"a": 3.0}))
@example(Case("-a**2 + a^2^3", {"a": 1.25}))
@example(Case("a ** (1/2) + a * (1/2)", {"a": 1.25}))
@example(Case("relu(a - a) + relu(-a) + tanh(a) * log(exp(a))", {"a": 0.75}))
@example(Case("(a + b) * c", {"a": 2.0, "b": -3.0, "c": 10.0}))
def test_primitive_graph_is_micrograds_graph(case: Case) -> None:
    note(repr(case))  # hypothesis shows the generated case only as `case=`
    assert_same_graph(case)
