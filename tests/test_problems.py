"""Every problem kind through the test client: its status, content type and body."""

from __future__ import annotations

import fcntl
import json
import logging
from typing import Any

import pytest
from flask import Flask, abort
from flask.testing import FlaskClient

from service.api import costs
from service.api.kinds import HTTP_KINDS, KINDS, slug, type_uri
from service.api.logs import JsonFormatter
from service.app import create_app
from service.errors import BINDING_KINDS, DOMAIN_KINDS, EXPRESSION_KINDS, LIMIT_KINDS, BindingError

# Small limits, so each limit is easy to exceed.
LIMITS = {
    "MAX_EXPRESSION_LENGTH": 200,
    "MAX_DEPTH": 5,
    "MAX_NODES": 12,
    "MAX_IDENTIFIER_LENGTH": 8,
    "MAX_CONSTANT_MAGNITUDE": 1000,
    "MAX_BINDINGS": 3,
    "MAX_BODY_BYTES": 1024,
}
JSON = {"Content-Type": "application/json"}
TESTED: set[str] = set()  # every kind a test below shows, to check none is left out


@pytest.fixture(scope="module")
def app() -> Flask:
    app = create_app({"TESTING": True, **LIMITS})
    # Routes only these tests reach, for problems no request to the real API can cause.
    app.add_url_rule("/test/bad-request", "bad_request", lambda: abort(400))
    app.add_url_rule("/test/teapot", "teapot", lambda: abort(418))
    app.add_url_rule("/test/crash", "crash", lambda: 1 / 0)
    app.add_url_rule("/test/abort-500", "abort_500", lambda: abort(500))
    return app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def problem(response: Any, kind: str, **expected: Any) -> dict[str, Any]:
    """Checks a problem response of `kind` and returns its body."""
    TESTED.add(kind)
    status, title = KINDS[kind]
    body = json.loads(response.data)
    assert response.status_code == status, body
    assert response.mimetype == "application/problem+json"
    assert response.headers["X-Request-ID"]
    assert body["type"] == type_uri(kind) == f"https://autograd-service.dev/problems/{kind}"
    assert body["title"] == title
    assert body["status"] == status
    assert isinstance(body["detail"], str)
    assert body["detail"]
    for name, value in expected.items():
        assert body[name] == value, name
    return body


def at(start: int, end: int) -> dict[str, int]:
    return {"start": start, "end": end}


# The core's refusals: kind, expression, bindings and the members the problem must carry.
CORE = [
    ("empty-expression", "", {}, {"position": at(0, 0)}),
    ("unexpected-token", "a + * b", {}, {"position": at(4, 5)}),
    ("unexpected-end", "a +", {}, {"position": at(3, 3)}),
    ("unbalanced-parenthesis", "(a", {}, {"position": at(0, 1)}),
    ("unknown-function", "foo(a)", {}, {"position": at(0, 4)}),
    ("wrong-arity", "exp(a, b)", {}, {"position": at(0, 9)}),
    ("variable-exponent", "a ^ b", {}, {"position": at(4, 5)}),
    ("implicit-multiplication", "2a", {}, {"position": at(0, 2)}),
    ("invalid-character", "a é", {}, {"position": at(2, 3)}),
    ("unsupported-syntax", "a $ b", {}, {"position": at(2, 3)}),
    (
        "expression-too-long",
        "a + " * 60 + "a",
        {},
        {"limit": "max_expression_length", "maximum": 200, "position": at(200, 241)},
    ),
    (
        "nesting-too-deep",
        "((((((a))))))",
        {},
        {"limit": "max_depth", "maximum": 5, "position": at(5, 6)},
    ),
    (
        "too-many-nodes",
        "a*2 + a*3 + a*4 + a*5 + a*6",
        {"a": 1},
        {"limit": "max_nodes", "maximum": 12, "position": at(24, 27)},
    ),
    (
        "identifier-too-long",
        "abcdefghijk",
        {},
        {"limit": "max_identifier_length", "maximum": 8, "position": at(0, 11)},
    ),
    (
        "constant-too-large",
        "a * 5000",
        {},
        {"limit": "max_constant_magnitude", "maximum": 1000, "position": at(4, 8)},
    ),
    ("unbound-variables", "(a + b) * c", {"a": 2, "b": -3}, {"variables": ["c"]}),
    ("unknown-variables", "a", {"a": 1, "b": 2, "z": 3}, {"variables": ["b", "z"]}),
    ("too-many-bindings", "a+b+c+d", dict.fromkeys("abcd", 1), {"variables": []}),
    ("log-domain", "log(a)", {"a": -1}, {"node": 1, "position": at(0, 6)}),
    ("division-by-zero", "a / b", {"a": 1, "b": 0}, {"node": 2, "position": at(0, 5)}),
    ("complex-result", "a ** 0.5", {"a": -1}, {"node": 1, "position": at(0, 8)}),
    ("overflow", "exp(a)", {"a": 1000}, {"node": 1, "position": at(0, 6)}),
    ("non-finite", "a ** 0.5", {"a": 0}, {"node": 1, "position": at(0, 8)}),
]


@pytest.mark.parametrize(
    ("kind", "expression", "bindings", "expected"), CORE, ids=[case[0] for case in CORE]
)
def test_core_refusals(
    client: FlaskClient, kind: str, expression: str, bindings: dict, expected: dict
) -> None:
    body = problem(
        client.post("/v1/gradients", json={"expression": expression, "bindings": bindings}),
        kind,
        **expected,
    )
    assert body.keys() == {"type", "title", "status", "detail", *expected}


def test_expression_problems_come_from_graph_too(client: FlaskClient) -> None:
    problem(
        client.post("/v1/graph", json={"expression": "(a + b"}),
        "unbalanced-parenthesis",
        position=at(0, 1),
    )


def test_a_domain_problem_in_a_constant_part_has_no_node(client: FlaskClient) -> None:
    body = problem(
        client.post("/v1/gradients", json={"expression": "log(0) + a", "bindings": {"a": 1}}),
        "log-domain",
        node=None,
        position=at(0, 6),
    )
    assert "node" in body


def test_a_variable_over_constant_zero_is_a_domain_problem(client: FlaskClient) -> None:
    response = client.post("/v1/gradients", json={"expression": "a / 0", "bindings": {"a": 1}})
    assert response.status_code == 422
    body = json.loads(response.data)
    assert body["type"].endswith("/division-by-zero")
    assert body["position"] == {"start": 0, "end": 5}


def test_invalid_binding(app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # The schema refuses a binding that is not a finite number before the core sees it, so
    # the core's own refusal is shown through a stand-in evaluator.
    def refuse(*args: Any) -> None:
        raise BindingError("invalid_binding", "a must be bound to a finite number, not nan", ["a"])

    monkeypatch.setattr(app.extensions["autograd"], "evaluate", refuse)
    problem(
        client.post("/v1/gradients", json={"expression": "a", "bindings": {"a": 1}}),
        "invalid-binding",
        variables=["a"],
    )


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"expression": "a", "bindings": {"a": 1}', "not valid JSON: Expecting ',' delimiter"),
        (
            b'{"expression": "a", "expression": "b", "bindings": {}}',
            'the key "expression" appears twice',
        ),
        (b'{"expression": "a", "bindings": {"a": 1, "a": 2}}', 'the key "a" appears twice'),
        (b"", "the request body is empty"),
        (b"[" * 100_000, "nests too deeply"),
        (b"{\"expression\": 'a'}", "not valid JSON"),
        (b'{"expression": "a\xff"}', "can't decode byte 0xff"),
        (b'{"expression": "\xed\xa0\x80"}', "can't decode byte 0xed"),  # a UTF-8 surrogate
        ('{"expression": "a"}'.encode("utf-16"), "can't decode byte 0xff"),
    ],
)
def test_malformed_json(body: bytes, detail: str) -> None:
    client = create_app({"TESTING": True}).test_client()  # with room for a deep document
    for path in ("/v1/gradients", "/v1/graph"):
        got = problem(client.post(path, data=body, headers=JSON), "malformed-json")
        assert detail in got["detail"]


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        (
            '{"expression": "a", "bindings": {"a": NaN}}',
            [("/bindings/a", "a must be bound to a finite number, not NaN")],
        ),
        (
            '{"expression": "a", "bindings": {"a": Infinity, "b": -Infinity}}',
            [
                ("/bindings/a", "a must be bound to a finite number, not Infinity"),
                ("/bindings/b", "b must be bound to a finite number, not -Infinity"),
            ],
        ),
        (
            '{"expression": "a", "bindings": {"a": 1e400}}',
            [
                (
                    "/bindings/a",
                    "a must be bound to a finite number, not 1e400, which overflows a 64-bit float",
                )
            ],
        ),
        (
            '{"expression": "a", "bindings": {"a": ' + "9" * 400 + "}}",
            [
                (
                    "/bindings/a",
                    "a must be bound to a finite number, not "
                    + "9" * 400
                    + ", which overflows a 64-bit float",
                )
            ],
        ),
        (
            '{"expression": "a", "bindings": {"a": true, "b": null, "c": "1", "d": [], "e": {}}}',
            [
                ("/bindings/a", "a must be bound to a finite number, not true"),
                ("/bindings/b", "b must be bound to a finite number, not null"),
                ("/bindings/c", "c must be bound to a finite number, not a string"),
                ("/bindings/d", "d must be bound to a finite number, not an array"),
                ("/bindings/e", "e must be bound to a finite number, not an object"),
            ],
        ),
        (
            '{"expression": "a", "bindings": {"x/y~z": null}}',
            [("/bindings/x~1y~0z", "x/y~z must be bound to a finite number, not null")],
        ),
        ('{"expression": "a", "bindings": {}, "extra": 1}', [("/extra", "Unknown field.")]),
        ('{"bindings": {}}', [("/expression", "Missing data for required field.")]),
        ('{"expression": "a"}', [("/bindings", "Missing data for required field.")]),
        (
            '{"expression": 1, "bindings": []}',
            [("/expression", "Not a valid string."), ("/bindings", "Not a valid mapping type.")],
        ),
        (
            '{"expression": "a", "bindings": {}, "granularity": "atoms"}',
            [("/granularity", "Must be one of: operator, primitive.")],
        ),
        ("[]", [("", "Invalid input type.")]),
        ('"a"', [("", "Invalid input type.")]),
    ],
)
def test_validation_errors_point_at_the_fault(
    client: FlaskClient, body: str, errors: list[tuple[str, str]]
) -> None:
    got = problem(client.post("/v1/gradients", data=body, headers=JSON), "validation-error")
    assert sorted((e["pointer"], e["detail"]) for e in got["errors"]) == sorted(errors)
    first = got["errors"][0]
    assert got["detail"].startswith(f"{first['pointer'] or '/'}: {first['detail']}")


def test_validation_errors_on_graph(client: FlaskClient) -> None:
    got = problem(
        client.post("/v1/graph", json={"expression": "a", "bindings": {}}), "validation-error"
    )
    assert got["errors"] == [{"pointer": "/bindings", "detail": "Unknown field."}]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "multipart/form-data; boundary=x"},
    ],
)
def test_unsupported_media_type(client: FlaskClient, headers: dict[str, str]) -> None:
    body = json.dumps({"expression": "a", "bindings": {"a": 1}})
    for path in ("/v1/gradients", "/v1/graph"):
        got = problem(client.post(path, data=body, headers=headers), "unsupported-media-type")
        assert "application/json" in got["detail"]


def test_json_with_a_charset_is_json(client: FlaskClient) -> None:
    response = client.post(
        "/v1/gradients",
        data='{"expression": "a", "bindings": {"a": 1}}',
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 200


def test_body_too_large(client: FlaskClient) -> None:
    body = json.dumps({"expression": "a" + " " * 2000, "bindings": {"a": 1}})
    got = problem(client.post("/v1/gradients", data=body, headers=JSON), "body-too-large")
    assert "1024 bytes" in got["detail"]


def test_not_found(client: FlaskClient) -> None:
    for path in ("/", "/v1/gradient", "/v2/gradients", "/v1/gradients/", "/docs/static/x.js"):
        got = problem(client.get(path), "not-found")
        assert path in got["detail"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/v1/gradients", "OPTIONS, POST"),
        ("PUT", "/v1/graph", "OPTIONS, POST"),
        ("POST", "/v1/operations", "GET, HEAD, OPTIONS"),
        ("DELETE", "/healthz", "GET, HEAD, OPTIONS"),
    ],
)
def test_method_not_allowed(client: FlaskClient, method: str, path: str, allowed: str) -> None:
    response = client.open(path, method=method)
    problem(response, "method-not-allowed")
    assert response.headers["Allow"] == allowed


def test_bad_request(client: FlaskClient) -> None:
    problem(client.get("/test/bad-request"), "bad-request")


def test_another_http_error_is_an_about_blank_problem(client: FlaskClient) -> None:
    response = client.get("/test/teapot")
    body = json.loads(response.data)
    assert response.status_code == 418
    assert response.mimetype == "application/problem+json"
    assert body["type"] == "about:blank"
    assert body["title"] == "I'm a Teapot"
    assert body["status"] == 418


@pytest.mark.parametrize("path", ["/test/crash", "/test/abort-500"])
def test_internal_error_is_generic_and_logged_with_the_request_id(
    client: FlaskClient, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    with caplog.at_level(logging.ERROR, logger="service.api"):
        response = client.get(path, headers={"X-Request-ID": "trace-42"})
    body = problem(response, "internal-error")
    assert "trace-42" in body["detail"]
    assert "ZeroDivisionError" not in response.get_data(as_text=True)  # no internals leak
    [record] = [r for r in caplog.records if r.name == "service.api"]
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "error"
    assert line["request_id"] == "trace-42"
    assert line["path"] == path
    if path == "/test/crash":
        assert "ZeroDivisionError" in line["exception"]


def test_an_unexpected_error_in_the_core_is_an_internal_error(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(app.extensions["autograd"], "evaluate", crash)
    body = problem(
        client.post("/v1/gradients", json={"expression": "a", "bindings": {"a": 1}}),
        "internal-error",
    )
    assert "a bug" not in body["detail"]


def test_request_too_expensive() -> None:
    client = create_app({"TESTING": True, "REQUEST_BUDGET": 0.01}).test_client()
    heavy = {"expression": "2 * a" + " / a" * 3000, "bindings": {"a": 1.5}}
    response = client.post("/v1/gradients", json=heavy)
    problem(response, "request-too-expensive")
    assert response.headers["Retry-After"] == "1"


def test_service_busy(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(costs, "SERVER", costs.Server())
    costs.join_server(str(tmp_path), 2)  # two workers: one slot for heavy requests
    held = (tmp_path / "heavy-0").open("ab")
    fcntl.flock(held, fcntl.LOCK_EX)
    client = create_app({"TESTING": True, "HEAVY_REQUEST_BYTES": 64}).test_client()
    response = client.post("/v1/graph", json={"expression": "a + b" * 20})
    problem(response, "service-busy")
    assert response.headers["Retry-After"] == "1"
    held.close()


def test_response_too_large() -> None:
    client = create_app({"TESTING": True, "MAX_RESPONSE_BYTES": 100}).test_client()
    body = problem(client.post("/v1/graph", json={"expression": "a + b"}), "response-too-large")
    assert (body["limit"], body["maximum"]) == ("max_response_bytes", 100)


def test_the_table_has_every_kind_of_the_core_and_every_http_kind() -> None:
    core = {slug(kind) for kind in (*EXPRESSION_KINDS, *LIMIT_KINDS, *BINDING_KINDS, *DOMAIN_KINDS)}
    assert core <= KINDS.keys()
    assert set(HTTP_KINDS.values()) <= KINDS.keys()
    assert all(KINDS[kind][0] == status for status, kind in HTTP_KINDS.items())
    titles = [title for _, title in KINDS.values()]
    assert len(set(titles)) == len(titles)


def test_every_kind_was_shown_by_a_test() -> None:
    # Runs last in this module: every kind of the table must have been checked above.
    if not TESTED:
        pytest.skip("run the whole module to check that every kind is shown")
    assert set(KINDS) - TESTED == set()
