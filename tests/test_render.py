"""The rendered response: the very bytes of the whole document, or the parts `fields` selects."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from service.errors import DomainError
from service.evaluator import FIELDS, GRANULARITIES, Evaluator, select
from tests.reference_micrograd import Case, ProgramCase, cases, programs

evaluator = Evaluator()
LESSON = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}


def _same_bytes(text: str, bindings: dict[str, float], output: str | None = None) -> None:
    for granularity in GRANULARITIES:
        try:
            whole = evaluator.evaluate(text, bindings, granularity, output)
        except DomainError as error:
            with pytest.raises(DomainError) as raised:
                evaluator.render(text, bindings, granularity, output)
            assert (raised.value.kind, raised.value.node, raised.value.span) == (
                error.kind,
                error.node,
                error.span,
            )
            assume(False)
            return
        assert evaluator.render(text, bindings, granularity, output) == orjson.dumps(whole)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_a_rendered_expression_is_its_documents_bytes(case: Case) -> None:
    note(case.text)
    _same_bytes(case.text, case.bindings)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_a_rendered_program_is_its_documents_bytes(case: ProgramCase) -> None:
    note(case.text)
    _same_bytes(case.text, case.bindings, case.output)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.lists(st.sampled_from(FIELDS), min_size=1, max_size=6))
def test_a_selection_is_the_documents_parts(case: Case, names: list[str]) -> None:
    try:
        whole = evaluator.evaluate(case.text, case.bindings, "primitive")
    except DomainError:
        assume(False)
        raise
    selected = json.loads(evaluator.render(case.text, case.bindings, "primitive", None,
                                           ",".join(names)))  # fmt: skip
    top = [name for name in FIELDS if name in names and "." not in name]
    columns = [name[6:] for name in FIELDS if name in names and name.startswith("nodes.")]
    assert list(selected) == top + (["nodes"] if columns else [])
    for name in top:
        assert selected[name] == whole[name]
    nodes = whole["graph"]["nodes"]
    for column in columns:
        assert selected["nodes"][column] == [node[column] for node in nodes]


def test_the_same_bindings_again_render_the_same_bytes() -> None:
    first = evaluator.render("a * b - a / b", {"a": 3, "b": 4}, fields="value,gradients")
    evaluator.render("a * b - a / b", {"a": 1, "b": 2}, fields="value,gradients")
    assert evaluator.render("a * b - a / b", {"a": 3, "b": 4}, fields="value,gradients") == first
    assert json.loads(first) == {"value": 11.25, "gradients": {"a": 3.75, "b": 3.1875}}


def test_unknown_fields_are_named() -> None:
    with pytest.raises(ValueError, match=r"nodes\.colour"):
        select("value,nodes.colour")
    assert select(" gradients , value ") == ("value", "gradients")


def test_a_slider_asks_for_the_value_and_gradients(client: FlaskClient) -> None:
    response = client.post("/v1/gradients", json={**LESSON, "fields": "value,gradients"})
    assert response.status_code == 200
    assert response.get_json() == {"value": -10.0, "gradients": {"a": 10.0, "b": 10.0, "c": -1.0}}


def test_node_columns(client: FlaskClient) -> None:
    fields = "value,gradients,nodes.value,nodes.grad"
    body: Any = client.post("/v1/gradients", json={**LESSON, "fields": fields}).get_json()
    assert body["nodes"] == {
        "value": [2.0, -3.0, -1.0, 10.0, -10.0],
        "grad": [10.0, 10.0, 10.0, -1.0, 1.0],
    }


def test_without_fields_the_whole_document(client: FlaskClient) -> None:
    body: Any = client.post("/v1/gradients", json={**LESSON, "fields": None}).get_json()
    assert list(body) == list(evaluator.evaluate(LESSON["expression"], LESSON["bindings"]))


@pytest.mark.parametrize("fields", ["colour", "value,,gradients", "", "nodes", "nodes.value.x"])
def test_a_field_not_in_the_response_is_a_problem(client: FlaskClient, fields: str) -> None:
    response = client.post("/v1/gradients", json={**LESSON, "fields": fields})
    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    assert "each one of" in json.dumps(response.get_json())
