"""The operation table is the single source: every entry is parsed, evaluated, differentiated by
the sympy oracle, counted as micrograd counts it and documented by `/v1/operations`."""

from __future__ import annotations

import itertools
import re
from operator import attrgetter

import pytest
import sympy
from conftest import CYRILLIC
from flask.testing import FlaskClient
from reference_micrograd import local_grads, run

from service.api.config import DEFAULTS
from service.api.operations import catalogue
from service.engine import Value
from service.evaluator import GRANULARITIES, Evaluator
from service.i18n import Message
from service.operations import BY_NAME, FUNCTIONS, OPERATIONS, Operation
from service.parser import parse

evaluator = Evaluator()
OPERANDS = {"v": ("a", "b"), "c": ("3", "0.5")}
AT = {"a": 0.75, "b": 1.25}
NAME = attrgetter("name")  # test ids that are the same on every run, unlike the repr's addresses


def shapes(operation: Operation) -> list[str]:
    return [s for s in map("".join, itertools.product("vc", repeat=operation.arity)) if "v" in s]


def written(operation: Operation, form: str) -> str:
    operands = [OPERANDS[kind][i] for i, kind in enumerate(form)]
    return operation.write(*operands, k="3")


CASES = [(op, form) for op in OPERATIONS for form in shapes(op)]


@pytest.mark.parametrize(("operation", "form"), CASES, ids=[f"{o.name}:{f}" for o, f in CASES])
def test_every_entry_is_parsed_evaluated_and_differentiated(
    operation: Operation, form: str
) -> None:
    text = written(operation, form)
    parsed = parse(text)
    assert parsed.root.op == operation.name
    assert [arg.is_constant for arg in parsed.root.args] == [kind == "c" for kind in form]
    bindings = {name: AT[name] for name in parsed.variables}

    # micrograd's graph, node for node in number: the count the table states for this shape
    primitive = evaluator.evaluate(text, bindings, "primitive")
    assert len(primitive["graph"]["nodes"]) == operation.nodes[form] + len(parsed.variables)
    assert parsed.node_count == len(primitive["graph"]["nodes"])
    reference, _ = run(text, bindings)
    assert primitive["value"] == pytest.approx(reference.data, rel=1e-15)

    # the sympy form, from the table, differentiates to the engine's gradients
    expression = parse(text).sympy
    at = {sympy.Symbol(n, real=True): sympy.Rational(v) for n, v in bindings.items()}
    for granularity in GRANULARITIES:
        document = evaluator.evaluate(text, bindings, granularity)
        for name, grad in document["gradients"].items():
            exact = sympy.diff(expression, sympy.Symbol(name, real=True)).subs(at)
            assert grad == pytest.approx(float(exact), rel=1e-12), (text, granularity, name)

    # the operator view: one node whose local derivatives are the table's rule
    operator = evaluator.evaluate(text, bindings, "operator")
    node = operator["graph"]["nodes"][operator["graph"]["root"]]
    assert node["op"] == operation.name
    assert node["derived"] is (not operation.primitive)
    values = [operator["graph"]["nodes"][child]["value"] for child in node["children"]]
    expected = operation.local_grads(parsed.root.exponent, node["value"], *values)
    assert node["local_grads"] == pytest.approx(list(expected), rel=1e-15)
    if not operation.primitive:
        assert node["expansion"] == operation.expansions[form].format(
            *[OPERANDS[kind][i] for i, kind in enumerate(form)],
            neg1="-0.5",
            inv1="2",
        )


@pytest.mark.parametrize("operation", [op for op in OPERATIONS if op.primitive], ids=NAME)
def test_a_primitives_rule_is_the_engines(operation: Operation) -> None:
    operands = [Value(AT["a"]), Value(AT["b"])][: operation.arity]
    k = 3.0 if operation.grammar == "power" else None
    out = operation.apply(k, *operands)
    assert isinstance(out, Value)
    assert out.op == operation.name
    expected = operation.local_grads(k, out.data, *(x.data for x in operands))
    assert out.local_grads == pytest.approx(expected, rel=1e-15)
    reference, _ = run(operation.write("a", "b", k="3"), AT)
    assert out.local_grads == pytest.approx(local_grads(reference), rel=1e-15)


@pytest.mark.parametrize("operation", OPERATIONS, ids=NAME)
def test_every_entry_folds_as_python_does(operation: Operation) -> None:
    operands = (0.75, 1.25)[: operation.arity]
    folded = parse(operation.write("0.75", "1.25", k="3") + " + a").root.args[0]
    assert folded.is_constant
    assert folded.value == operation.fold(3.0, *operands)


def test_every_entry_is_documented() -> None:
    documented = catalogue(DEFAULTS)["operations"]
    assert [op["name"] for op in documented] == [op.name for op in OPERATIONS]
    for document, operation in zip(documented, OPERATIONS, strict=True):
        assert document["syntax"] == operation.syntax
        assert document["rule"] == operation.rule
        assert document["arity"] == operation.arity
        assert (document["expansion"] is None) is operation.primitive


def test_functions_are_the_call_entries() -> None:
    assert set(FUNCTIONS) == {op.name for op in OPERATIONS if op.grammar == "call"}
    assert all(BY_NAME[name].arity == 1 for name in FUNCTIONS)


CODE_WORDS = {*FUNCTIONS, "else"}  # the words a formula may hold; any other word is prose


@pytest.mark.parametrize("locale", ["ru", "et"])
def test_the_prose_of_the_catalogue_is_translated_and_its_formulas_kept(
    client: FlaskClient, locale: str
) -> None:
    response = client.get("/v1/operations", headers={"Accept-Language": locale})
    assert response.headers["Content-Language"] == locale
    translated = response.get_json()["operations"]
    marked = 0
    for document, operation in zip(translated, OPERATIONS, strict=True):
        for key in ("rule", "syntax"):
            text = getattr(operation, key)
            if isinstance(text, Message):  # prose around formulas, which are its parameters
                marked += 1
                assert document[key] != text
                assert bool(CYRILLIC.search(document[key])) == (locale == "ru")
                assert all(formula in document[key] for formula in text.params.values())
            else:  # a formula alone: code, the same in every language
                assert document[key] == text
                assert set(re.findall("[a-z]{3,}", text)) <= CODE_WORDS, text
    assert marked >= 4
    power = {op["name"]: op for op in translated}["**"]
    assert power["rule"].startswith("d(a ** k)/da = k * a ** (k - 1); ")
