"""The endpoints through Flask's test client: what each answers to a valid request."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import LESSON, make_app, strict
from flask import Flask
from flask.testing import FlaskClient

from service.evaluator import Evaluator
from service.limits import DEFAULT_LIMITS
from service.operations import OPERATIONS


def test_gradients_returns_the_lesson_document(client: FlaskClient) -> None:
    response = client.post("/v1/gradients", json=LESSON)
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    document = strict(response.data)
    assert document["value"] == -10
    assert document["gradients"] == {"a": 10, "b": 10, "c": -1}
    assert document["granularity"] == "operator"
    bindings = {name: float(value) for name, value in LESSON["bindings"].items()}
    assert document == Evaluator().evaluate(LESSON["expression"], bindings)


def test_gradients_in_primitive_granularity_expands_derived_operations(
    client: FlaskClient,
) -> None:
    body = {"expression": "a - b", "bindings": {"a": 1, "b": 2}, "granularity": "primitive"}
    document = strict(client.post("/v1/gradients", json=body).data)
    assert document["granularity"] == "primitive"
    assert document["gradients"] == {"a": 1, "b": -1}
    assert {node["op"] for node in document["graph"]["nodes"]} == {None, "*", "+"}


def test_a_constant_expression_takes_empty_bindings(client: FlaskClient) -> None:
    document = strict(
        client.post("/v1/gradients", json={"expression": "2 * 3", "bindings": {}}).data
    )
    assert document["value"] == 6
    assert document["gradients"] == {}


def test_graph_returns_the_structure_without_numbers(client: FlaskClient) -> None:
    response = client.post("/v1/graph", json={"expression": "(a + b) * c"})
    assert response.status_code == 200
    document = strict(response.data)
    assert document["variables"] == ["a", "b", "c"]
    assert document == Evaluator().structure("(a + b) * c")
    assert all("value" not in node and "grad" not in node for node in document["graph"]["nodes"])


def test_graph_of_a_syntax_error_gives_its_position(client: FlaskClient) -> None:
    response = client.post("/v1/graph", json={"expression": "(a + b"})
    assert response.status_code == 422
    assert strict(response.data)["position"] == {"start": 0, "end": 1, "line": 1, "column": 1}


def test_operations_lists_every_operation_and_the_default_limits(client: FlaskClient) -> None:
    response = client.get("/v1/operations")
    assert response.status_code == 200
    document = strict(response.data)
    assert [op["name"] for op in document["operations"]] == [op.name for op in OPERATIONS]
    divide = next(op for op in document["operations"] if op["name"] == "/")
    assert divide == {
        "name": "/",
        "syntax": "a / b",
        "arity": 2,
        "primitive": False,
        "rule": "d(a / b)/da = 1 / b; d(a / b)/db = -a / b ** 2",
        "expansion": "a * b ** -1",
    }
    assert document["limits"] == {
        **DEFAULT_LIMITS.as_dict(),
        "max_body_bytes": 1024 * 1024,
        "max_response_bytes": 16 * 1024 * 1024,
        "max_symbolic_nodes": 100,
    }
    assert document["settings"] == {
        "request_budget": 5.0,
        "heavy_request_bytes": 16384,
        "heavy_request_slots": 0,
        "picture_rate": 2.0,
        "picture_burst": 10,
        "symbolic_seconds": 2.0,
    }
    assert document["cache_size"] == 256


def test_operations_reports_the_configured_limits() -> None:
    client = make_app(
        MAX_NODES=50, MAX_BODY_BYTES=4096, CACHE_SIZE=0, REQUEST_BUDGET=0, SYMBOLIC_SECONDS=0.5
    ).test_client()
    document = strict(client.get("/v1/operations").data)
    assert document["limits"]["max_nodes"] == 50
    assert document["limits"]["max_body_bytes"] == 4096
    assert document["settings"]["request_budget"] == 0  # no budget
    assert document["settings"]["symbolic_seconds"] == 0.5
    assert document["cache_size"] == 0


def test_healthz(client: FlaskClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert strict(response.data) == {"status": "ok"}


def test_the_expression_cache_is_used_across_requests(app: Flask, client: FlaskClient) -> None:
    for a in range(5):
        client.post("/v1/gradients", json={**LESSON, "bindings": {"a": a, "b": 1, "c": 2}})
    assert app.extensions["autograd"].cache_info()["hits"] >= 4


@pytest.mark.slow
def test_large_but_legal_requests_are_answered(client: FlaskClient) -> None:
    names = [f"x{i}" for i in range(2000)]
    body = {"expression": " + ".join(names), "bindings": dict.fromkeys(names, 1.5)}
    response = client.post("/v1/gradients", json=body)
    assert response.status_code == 200
    assert strict(response.data)["value"] == 3000


@pytest.mark.slow
def test_serving_never_imports_sympy() -> None:
    # sympy is the tests' oracle only; the app, every endpoint and the command line do without it.
    program = """
import json, sys
from service.app import create_app
from service.cli import main
client = create_app({"TESTING": True}).test_client()
assert client.post("/v1/gradients", json=json.loads(sys.argv[1])).status_code == 200
graph = {"expression": "exp(a) / log(b) - relu(c) ** 2"}
assert client.post("/v1/graph", json=graph).status_code == 200
for path in ("/v1/operations", "/openapi.json", "/openapi.yaml", "/docs", "/healthz"):
    assert client.get(path).status_code == 200, path
print(json.dumps("sympy" in sys.modules))
"""
    finished = subprocess.run(
        [sys.executable, "-c", program, json.dumps(LESSON)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "false"
