"""The HTTP API through Flask's test client: every endpoint, headers, CORS and configuration."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from service.api.config import DEFAULTS, SETTINGS
from service.app import create_app
from service.evaluator import Evaluator
from service.limits import DEFAULT_LIMITS, Limits
from service.operations import OPERATIONS

LESSON = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}


def strict(body: bytes) -> Any:
    """Parses a response as standard JSON: a NaN or Infinity in it fails the test."""

    def refuse(literal: str) -> None:
        raise AssertionError(f"{literal} in a response body")

    return json.loads(body, parse_constant=refuse)


@pytest.fixture
def app() -> Flask:
    return create_app({"TESTING": True})


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


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


def test_integer_and_float_bindings_give_the_same_document(client: FlaskClient) -> None:
    floats = {**LESSON, "bindings": {"a": 2.0, "b": -3.0, "c": 10.0}}
    ints = client.post("/v1/gradients", json=LESSON).data
    assert ints == client.post("/v1/gradients", json=floats).data


def test_a_constant_expression_takes_empty_bindings(client: FlaskClient) -> None:
    document = strict(
        client.post("/v1/gradients", json={"expression": "2 * 3", "bindings": {}}).data
    )
    assert document["value"] == 6
    assert document["gradients"] == {}


def test_a_byte_order_mark_is_ignored(client: FlaskClient) -> None:
    body = b"\xef\xbb\xbf" + json.dumps(LESSON).encode()
    response = client.post("/v1/gradients", data=body, content_type="application/json")
    assert strict(response.data)["value"] == -10


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
    assert strict(response.data)["position"] == {"start": 0, "end": 1}


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
    assert document["limits"] == {**DEFAULT_LIMITS.as_dict(), "max_body_bytes": 1024 * 1024}
    assert document["cache_size"] == 256


def test_operations_reports_the_configured_limits() -> None:
    client = create_app({"MAX_NODES": 50, "MAX_BODY_BYTES": 4096, "CACHE_SIZE": 0}).test_client()
    document = strict(client.get("/v1/operations").data)
    assert document["limits"]["max_nodes"] == 50
    assert document["limits"]["max_body_bytes"] == 4096
    assert document["cache_size"] == 0


def test_healthz(client: FlaskClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert strict(response.data) == {"status": "ok"}


def test_the_spec_is_served_as_json_and_yaml(client: FlaskClient) -> None:
    as_json = client.get("/openapi.json")
    as_yaml = client.get("/openapi.yaml")
    assert as_json.status_code == as_yaml.status_code == 200
    assert as_json.mimetype == "application/json"
    assert as_yaml.mimetype == "application/yaml"
    assert strict(as_json.data)["paths"].keys() == {
        "/v1/gradients",
        "/v1/graph",
        "/v1/operations",
        "/healthz",
        "/metrics",
    }
    assert as_yaml.data.startswith(b"openapi: 3.0.3\n")


def test_docs_load_every_asset_from_the_service_itself(client: FlaskClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert {asset.rsplit("/", 1)[1] for asset in assets} >= {
        "swagger-ui.css",
        "swagger-ui-bundle.js",
    }
    assert "//" not in "".join(assets), "an asset comes from another host"
    assert '"validatorUrl": null' in html  # no spec is sent to validator.swagger.io either
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset
        assert response.mimetype in ("text/css", "text/javascript", "application/javascript")
        assert len(response.data) > 1000


@pytest.mark.parametrize(
    ("given", "echoed"),
    [
        ("abc-123", True),
        ("A.b_C-9", True),
        ("x" * 128, True),
        ("x" * 129, False),
        ("bad id", False),
        ("<script>", False),
        ("", False),
        ("é", False),
    ],
)
def test_request_id_is_echoed_only_when_sane(client: FlaskClient, given: str, echoed: bool) -> None:
    response = client.get("/healthz", headers={"X-Request-ID": given})
    request_id = response.headers["X-Request-ID"]
    if echoed:
        assert request_id == given
    else:
        assert re.fullmatch(r"[0-9a-f]{32}", request_id)


def test_every_response_has_a_request_id(client: FlaskClient) -> None:
    for response in (
        client.get("/nowhere"),
        client.post("/v1/gradients", data="{"),
        client.get("/docs"),
        client.options("/v1/gradients"),
    ):
        assert response.headers["X-Request-ID"]


def test_cors_allows_any_origin_by_default_without_credentials(client: FlaskClient) -> None:
    response = client.post("/v1/gradients", json=LESSON, headers={"Origin": "https://lms.example"})
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert "X-Request-ID" in response.headers["Access-Control-Expose-Headers"]
    assert "Access-Control-Allow-Credentials" not in response.headers


def test_cors_preflight_is_answered_and_cached(client: FlaskClient) -> None:
    response = client.options(
        "/v1/gradients",
        headers={
            "Origin": "https://lms.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "Content-Type",
        },
    )
    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in response.headers["Access-Control-Allow-Methods"]
    assert int(response.headers["Access-Control-Max-Age"]) > 0


def test_cors_origins_can_be_restricted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOGRAD_CORS_ORIGINS", "https://a.example, https://b.example")
    client = create_app().test_client()
    allowed = client.get("/healthz", headers={"Origin": "https://b.example"})
    refused = client.get("/healthz", headers={"Origin": "https://evil.example"})
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://b.example"
    assert "Access-Control-Allow-Origin" not in refused.headers
    assert refused.status_code == 200  # CORS is the browser's to enforce


def test_configuration_comes_from_autograd_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    environment = {
        "AUTOGRAD_MAX_EXPRESSION_LENGTH": "500",
        "AUTOGRAD_MAX_DEPTH": "20",
        "AUTOGRAD_MAX_NODES": "100",
        "AUTOGRAD_MAX_IDENTIFIER_LENGTH": "8",
        "AUTOGRAD_MAX_CONSTANT_MAGNITUDE": "1e6",
        "AUTOGRAD_MAX_BINDINGS": "5",
        "AUTOGRAD_MAX_BODY_BYTES": "2048",
        "AUTOGRAD_CACHE_SIZE": "3",
        "AUTOGRAD_LOG_LEVEL": "warning",
    }
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    app = create_app()
    evaluator = app.extensions["autograd"]
    assert evaluator.limits == Limits(500, 20, 100, 8, 1e6, 5)
    assert evaluator.cache_size == 3
    assert app.config["MAX_CONTENT_LENGTH"] == 2048
    # The test configuration overrides the environment.
    assert create_app({"MAX_NODES": 7}).extensions["autograd"].limits.max_nodes == 7


def test_every_setting_has_a_default_and_an_explanation() -> None:
    assert DEFAULTS.keys() == SETTINGS.keys()
    assert all(isinstance(text, str) and text for _, text in SETTINGS.values())
    assert {name.upper() for name in Limits.names()} <= DEFAULTS.keys()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AUTOGRAD_MAX_NODES", "lots"),
        ("AUTOGRAD_MAX_NODES", "0"),
        ("AUTOGRAD_MAX_DEPTH", "2.5"),
        ("AUTOGRAD_MAX_BODY_BYTES", "true"),
        ("AUTOGRAD_CACHE_SIZE", "-1"),
        ("AUTOGRAD_LOG_LEVEL", "chatty"),
    ],
)
def test_a_mistyped_setting_stops_the_start_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        create_app()


def test_the_expression_cache_is_used_across_requests(app: Flask, client: FlaskClient) -> None:
    for a in range(5):
        client.post("/v1/gradients", json={**LESSON, "bindings": {"a": a, "b": 1, "c": 2}})
    assert app.extensions["autograd"].cache_info()["hits"] >= 4


def test_large_but_legal_requests_are_answered(client: FlaskClient) -> None:
    names = [f"x{i}" for i in range(2000)]
    body = {"expression": " + ".join(names), "bindings": dict.fromkeys(names, 1.5)}
    response = client.post("/v1/gradients", json=body)
    assert response.status_code == 200
    assert strict(response.data)["value"] == 3000


# Requests a hostile or careless client may send: none may cause a 500 or a non-JSON answer.
HOSTILE = [
    ("deep JSON", b"[" * 100_000 + b"]" * 100_000),
    ("deep objects", b'{"a":' * 5000 + b"1" + b"}" * 5000),
    ("huge integer", b'{"expression": "a", "bindings": {"a": 1' + b"0" * 5000 + b"}}"),
    ("huge exponent", b'{"expression": "a", "bindings": {"a": 1e999999999}}'),
    ("tiny number", b'{"expression": "a", "bindings": {"a": 1e-999999}}'),
    ("NUL in expression", b'{"expression": "a\\u0000", "bindings": {"a": 1}}'),
    ("lone surrogate", b'{"expression": "\\ud800", "bindings": {}}'),
    ("surrogate name", b'{"expression": "a", "bindings": {"\\ud800": "x"}}'),
    ("surrogate unknown", b'{"expression": "a", "bindings": {"a": 1, "\\udfff": 1}}'),
    ("surrogate key twice", b'{"\\ud800": 1, "\\ud800": 2}'),
    ("latin-1 body", '{"expression": "é"}'.encode("latin-1")),
    ("utf-16 body", json.dumps(LESSON).encode("utf-16")),
    ("BOM", b"\xef\xbb\xbf" + json.dumps(LESSON).encode()),
    ("top-level string", b'"(a + b) * c"'),
    ("top-level null", b"null"),
    ("expression is a list", b'{"expression": ["a"], "bindings": {}}'),
    ("bindings is a list", b'{"expression": "a", "bindings": [1]}'),
    ("nested binding", b'{"expression": "a", "bindings": {"a": {"b": 1}}}'),
    ("empty name", b'{"expression": "a", "bindings": {"": 1, "a": 1}}'),
    (
        "long expression",
        json.dumps({"expression": "a+" * 60_000 + "a", "bindings": {"a": 1}}).encode(),
    ),
    ("deep expression", json.dumps({"expression": "(" * 10_000 + "a" + ")" * 10_000}).encode()),
    (
        "many variables",
        json.dumps(
            {
                "expression": "+".join(f"v{i}" for i in range(12_000)),
                "bindings": {f"v{i}": 1 for i in range(12_000)},
            }
        ).encode(),
    ),
    ("granularity null", b'{"expression": "a", "bindings": {"a": 1}, "granularity": null}'),
    ("trailing garbage", json.dumps(LESSON).encode() + b" x"),
    ("two documents", json.dumps(LESSON).encode() * 2),
]


@pytest.mark.parametrize(("label", "body"), HOSTILE, ids=[label for label, _ in HOSTILE])
def test_hostile_bodies_get_a_problem_or_a_document(
    client: FlaskClient, label: str, body: bytes
) -> None:
    for path in ("/v1/gradients", "/v1/graph"):
        response = client.post(path, data=body, headers={"Content-Type": "application/json"})
        assert response.status_code in (200, 400, 413, 422), (label, response.data[:300])
        strict(response.data)
        if response.status_code != 200:
            assert response.mimetype == "application/problem+json"
