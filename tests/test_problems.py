"""Every problem kind through the test client: its status, content type and body."""

from __future__ import annotations

import fcntl
import gzip
import json
import logging
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import CORE, COSTLY, CYRILLIC, JSON, SMALL_LIMITS, at, make_app
from flask import Flask, abort
from flask.testing import FlaskClient
from marshmallow import Schema, ValidationError, validate
from marshmallow.fields import Field

from service.api import costs, language
from service.api import schemas as schemas_module
from service.api import sweep as sweep_api
from service.api.logs import JsonFormatter
from service.app import create_app
from service.derivatives import SYMBOLIC_KINDS
from service.errors import (
    BINDING_KINDS,
    DOMAIN_KINDS,
    EXPRESSION_KINDS,
    LIMIT_KINDS,
    PICTURE_KINDS,
    SIZE_KINDS,
)
from service.i18n import translate
from service.kinds import HTTP_KINDS, KINDS, slug, type_uri

TESTED: set[str] = set()  # every kind a test below shows, to check none is left out


@pytest.fixture(scope="module")
def app() -> Flask:
    app = make_app(**SMALL_LIMITS)
    # Routes only these tests reach, for problems no request to the real API can cause.
    app.add_url_rule("/test/bad-request", "bad_request", lambda: abort(400))
    app.add_url_rule("/test/teapot", "teapot", lambda: abort(418))
    app.add_url_rule("/test/crash", "crash", lambda: 1 / 0)
    app.add_url_rule("/test/abort-500", "abort_500", lambda: abort(500))
    return app


@pytest.fixture(scope="module")
def roomy() -> FlaskClient:
    """A client of the app with the default limits: room for a deep document."""
    return make_app().test_client()


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


# Request members besides the expression and bindings.
EXTRA = {"unknown-output": {"output": "z"}}


@pytest.mark.parametrize(
    ("kind", "expression", "bindings", "expected"), CORE, ids=[case[0] for case in CORE]
)
def test_core_refusals(
    client: FlaskClient, kind: str, expression: str, bindings: dict, expected: dict
) -> None:
    request = {"expression": expression, "bindings": bindings, **EXTRA.get(kind, {})}
    body = problem(
        client.post("/v1/gradients", json=request),
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


def test_symbolic_problems_come_from_derivatives() -> None:
    client = make_app(MAX_SYMBOLIC_NODES=3).test_client()
    large = "a * b * c * d * e"
    body = {"expression": large, "bindings": dict.fromkeys("abcde", 1)}
    problem(
        client.post("/v1/derivatives", json=body),
        "symbolic-too-large",
        limit="max_symbolic_nodes",
        maximum=3,
        position=at(0, len(large)),
    )
    nested = "tanh(" * 3 + "a" + ")" * 3
    hurried = make_app(SYMBOLIC_SECONDS=0.01).test_client()
    body = {"expression": "tanh(" * 60 + "a" + ")" * 60, "bindings": {"a": 0.5}}
    detail = problem(hurried.post("/v1/derivatives", json=body), "symbolic-too-expensive")["detail"]
    assert "0.01 s" in detail
    # Below the bounds, the same service answers.
    small = {"expression": nested, "bindings": {"a": 0.5}}
    assert client.post("/v1/derivatives", json=small).status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "unbound"),
    [
        ("/v1/gradients", {"bindings": {"a": 1}}, ["b", "c"]),
        ("/v1/derivatives", {"bindings": {"a": 1}}, ["b", "c"]),
        ("/v1/sweep", {"vary": [{"name": "a", "from": 0, "to": 1, "points": 2}]}, ["b", "c"]),
        ("/v1/sweep", {"points": [{"a": 1}]}, ["b", "c"]),
    ],
)
def test_an_unbound_input_is_placed_at_its_first_use(
    client: FlaskClient, path: str, body: dict[str, Any], unbound: list[str]
) -> None:
    # b is first read by the second statement's `b * c` (the third statement's is later), and
    # a statement the output does not use is no use at all.
    program = "unused = z\nx = a + 1\ny = x * b * c\nout = y + b"
    response = client.post(path, json={"expression": program, **body})
    problem(response, "unbound-variables", variables=unbound, position=at(29, 30, 3, 9))


@pytest.mark.parametrize(
    ("expression", "position"),
    [
        ("x = b\ny = a\ny * x", at(4, 5)),  # b is read first in the text, though listed second
        ("(\nb\n)", at(2, 3, 2, 1)),  # the name, not the brackets around it
        ("(b).relu() + 1", at(1, 2)),
    ],
)
def test_unbound_inputs_are_placed_at_the_first_use_in_the_text(
    client: FlaskClient, expression: str, position: dict[str, int]
) -> None:
    response = client.post("/v1/gradients", json={"expression": expression})
    assert problem(response, "unbound-variables")["position"] == position


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
    assert body["position"] == {"start": 0, "end": 5, "line": 1, "column": 1}


# Bindings are checked once, by the core: a value that is not a finite number is refused by the
# variable's name, and over HTTP the problem also points at it in the body.
@pytest.mark.parametrize(
    ("body", "name", "shown"),
    [
        ('{"expression": "a", "bindings": {"a": NaN}}', "a", "NaN"),
        ('{"expression": "a", "bindings": {"a": -Infinity}}', "a", "-Infinity"),
        ('{"expression": "a", "bindings": {"a": 1e400}}', "a", "1e400, which overflows"),
        ('{"expression": "a", "bindings": {"a": ' + "9" * 400 + "}}", "a", "9" * 16 + "…, which"),
        ('{"expression": "a", "bindings": {"a": true}}', "a", "true"),
        ('{"expression": "a", "bindings": {"a": null}}', "a", "null"),
        ('{"expression": "a", "bindings": {"a": "1"}}', "a", '"1"'),
        ('{"expression": "a", "bindings": {"a": []}}', "a", "[]"),
        ('{"expression": "a", "bindings": {"a": {}}}', "a", "{}"),
        ('{"expression": "a * b", "bindings": {"a": 1, "b": false}}', "b", "false"),
    ],
)
def test_invalid_binding(client: FlaskClient, body: str, name: str, shown: str) -> None:
    got = problem(
        client.post("/v1/gradients", data=body, headers=JSON), "invalid-binding", variables=[name]
    )
    assert got["detail"].startswith(f"{name} must be bound to a finite number, not {shown}")
    assert got["errors"] == [{"pointer": f"/bindings/{name}", "detail": got["detail"]}]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"expression": "a", "bindings": {"a": 1}', "not valid JSON at line 1, column 41: ','"),
        (
            b'{"expression": "a", "expression": "b", "bindings": {}}',
            'the key "expression" appears twice',
        ),
        (b'{"expression": "a", "bindings": {"a": 1, "a": 2}}', 'the key "a" appears twice'),
        (b"", "the request body is empty"),
        (b"[" * 100_000, "nests too deeply"),
        (b"{\"expression\": 'a'}", "not valid JSON"),
        (b'{"expression": "a\xff"}', "not UTF-8: the byte 0xff at position 17"),
        (b'{"expression": "\xed\xa0\x80"}', "not UTF-8: the byte 0xed"),  # a UTF-8 surrogate
        ('{"expression": "a"}'.encode("utf-16"), "not UTF-8: the byte 0xff at position 0"),
    ],
)
def test_malformed_json(roomy: FlaskClient, body: bytes, detail: str) -> None:
    for path in ("/v1/gradients", "/v1/graph"):
        got = problem(roomy.post(path, data=body, headers=JSON), "malformed-json")
        assert detail in got["detail"]


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ('{"expression": "a", "bindings": {}, "extra": 1}', [("/extra", "Unknown field.")]),
        ('{"bindings": {}}', [("/expression", "Missing data for required field.")]),
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
    where = first["pointer"] or "the request body"  # the whole body has the empty pointer
    assert got["detail"].startswith(f"{where}: {first['detail']}")


LINE = [{"name": "x", "from": -1, "to": 1, "points": 3}]


@pytest.mark.parametrize(
    ("method", "path", "body", "english"),
    [
        ("post", "/v1/sweep", {"expression": "x", "vary": LINE, "output": "1x"},
         "/output: must be a name: a letter or _, then letters, digits or _"),
        ("post", "/v1/sweep", {"expression": "x"}, "the request body: give either vary or points"),
        ("post", "/v1/sweep", {"expression": "x", "vary": LINE, "points": [{"x": 1}]},
         "the request body: give either vary or points"),
        ("post", "/v1/sweep", {"expression": "x", "points": []},
         "/points: Shorter than minimum length 1."),
        ("post", "/v1/sweep", {"expression": "x", "vary": LINE * 3},
         "/vary: Length must be between 1 and 2."),
        ("post", "/v1/sweep", {"expression": "x", "vary": [{**LINE[0], "points": 0}]},
         "/vary/0/points: Must be greater than or equal to 1."),
        ("post", "/v1/derivatives", {"expression": "x", "bindings": {"x": 1}, "variables": []},
         "/variables: Shorter than minimum length 1."),
        ("post", "/v1/derivatives", {"expression": "x", "bindings": {"x": 1}, "h": 0},
         "/h: Must be greater than 0."),
        ("post", "/v1/gradients", {"expression": "x", "bindings": {"x": 1}, "fields": "all"},
         "/fields: a comma-separated list of parts of the response, each one of expression, "),
        ("get", "/v1/sweep?expression=a*x&vary=x:-3:3:200&bind=x:nan", None,
         "/bind/0: expected the form a:2, not 'x:nan'"),
        ("get", "/v1/sweep?expression=x&vary=x:-3:3", None,
         "/vary/0: expected the form x:-3:3:200, not 'x:-3:3'"),
        ("get", "/v1/sweep?expression=x&vary=x:0:1:2&vary=x:0:1:2&vary=x:0:1:2", None,
         "/vary: Length must be between 1 and 2."),
        ("get", "/v1/sweep?expression=x&vary=x:0:1:2&output=1x", None,
         "/output: must be a name: a letter or _, then letters, digits or _"),
        # the whole value matches: Python's `$` alone would let a trailing newline through
        ("post", "/v1/gradients", {"expression": "y = x", "bindings": {"x": 1}, "output": "y\n"},
         "/output: must be a name: a letter or _, then letters, digits or _"),
        ("get", "/v1/sweep?expression=x&vary=x:0:1:2%0A", None,
         "/vary/0: expected the form x:-3:3:200, not 'x:0:1:2\\n'"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("locale", ["ru", "et"])
def test_validation_details_speak_the_language_asked_for(
    client: FlaskClient, method: str, path: str, body: Any, english: str, locale: str
) -> None:
    untold = problem(getattr(client, method)(path, json=body), "validation-error")["detail"]
    assert untold.startswith(english)
    response = getattr(client, method)(path, json=body, headers={"Accept-Language": locale})
    assert response.status_code == 422
    translated = response.get_json()["detail"]
    pointer = english.split(":")[0]
    if pointer.startswith("/"):  # a JSON pointer reads the same in every language
        assert translated.startswith(pointer + ": ")
    assert translated.removeprefix(pointer) != untold.removeprefix(pointer)
    assert bool(CYRILLIC.search(translated)) == (locale == "ru")


def _schema_fields(schema: Schema) -> list[Field]:
    """Every field of `schema`, with the items and values of its lists and mappings."""
    found: list[Field] = []
    waiting = list(schema.fields.values())
    while waiting:
        field = waiting.pop()
        found.append(field)
        for inner in ("inner", "key_field", "value_field"):
            if getattr(field, inner, None) is not None:
                waiting.append(getattr(field, inner))
    return found


def _refused(validator: Any) -> Any:
    """A value `validator` refuses, whichever of marshmallow's sentences it says it with."""
    if isinstance(validator, validate.Range):
        if validator.min is not None:
            return validator.min if not validator.min_inclusive else validator.min - 1
        return validator.max if not validator.max_inclusive else validator.max + 1
    if isinstance(validator, validate.Length):
        if validator.equal is not None:
            return [0] * (validator.equal + 1)
        if validator.min:
            return [0] * (validator.min - 1)
        return [0] * (validator.max + 1)
    if isinstance(validator, validate.OneOf):
        return object()
    if isinstance(validator, validate.Regexp):
        return "!"
    raise AssertionError(f"a validator the test does not know: {validator!r}")


def _every_schema_sentence() -> list[tuple[str, str]]:
    """(where, English sentence) for everything a field or validator of the API's schemas says."""
    schemas = [
        value()
        for module in (schemas_module, sweep_api)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Schema) and value is not Schema
    ]
    assert len(schemas) > 20
    sentences = []
    for schema in schemas:
        where = type(schema).__name__
        sentences += [(where, message) for message in schema.error_messages.values()]
        for field in _schema_fields(schema):
            sentences += [
                (f"{where}.{field.name}", message.format_map(defaultdict(lambda: "1")))
                for message in field.error_messages.values()
            ]
            for validator in field.validators:
                with pytest.raises(ValidationError) as refusal:
                    validator(_refused(validator))
                messages = refusal.value.messages
                assert isinstance(messages, list)
                sentences += [(f"{where}.{field.name}", message) for message in messages]
    return sentences


@pytest.mark.parametrize("locale", ["ru", "et"])
def test_every_sentence_a_schema_can_say_is_translated(locale: str) -> None:
    untranslated = [
        f"{where}: {english}"
        for where, english in _every_schema_sentence()
        if translate(language.schema_sentence(english), locale) == english
    ]
    assert not untranslated, "\n".join(untranslated)


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
    got = problem(
        client.post("/v1/gradients", data=body, headers=JSON),
        "body-too-large",
        limit="max_body_bytes",
        maximum=1024,
    )
    assert "1024 bytes" in got["detail"]


def test_not_found(client: FlaskClient) -> None:
    # `/v1//operations` too: not redirected to the merged path, which names the client's Host.
    paths = ("/v1", "/v1/gradient", "/v2/gradients", "/v1/gradients/", "/docs/static/x.js",
             "/v1//operations")  # fmt: skip
    for path in (*paths, "/playground/", "/playground/static/x.js", "/index.html"):
        got = problem(client.get(path), "not-found")
        assert path in got["detail"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/v1/gradients", "OPTIONS, POST"),
        ("PUT", "/v1/graph", "OPTIONS, POST"),
        ("POST", "/v1/operations", "GET, HEAD, OPTIONS"),
        ("DELETE", "/healthz", "GET, HEAD, OPTIONS"),
        ("POST", "/", "GET, HEAD, OPTIONS"),
        ("PUT", "/playground", "GET, HEAD, OPTIONS"),
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

    # The view renders the evaluation's bytes directly; `evaluate` is the dictionary route.
    for route in ("evaluate", "render"):
        monkeypatch.setattr(app.extensions["autograd"], route, crash)
    body = problem(
        client.post("/v1/gradients", json={"expression": "a", "bindings": {"a": 1}}),
        "internal-error",
    )
    assert "a bug" not in body["detail"]


def test_request_too_expensive() -> None:
    client = make_app(REQUEST_BUDGET=0.02).test_client()
    response = client.post("/v1/gradients", json=COSTLY)
    problem(response, "request-too-expensive")
    assert response.headers["Retry-After"] == "1"


def test_service_busy(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(costs, "SERVER", costs.Server())
    costs.join_server(str(tmp_path), 2)  # two workers: one slot for heavy requests
    held = (tmp_path / "heavy-0").open("ab")
    fcntl.flock(held, fcntl.LOCK_EX)
    client = make_app(HEAVY_REQUEST_BYTES=64).test_client()
    response = client.post("/v1/graph", json={"expression": "a + b" * 20})
    problem(response, "service-busy")
    assert response.headers["Retry-After"] == "1"
    held.close()


def test_response_too_large() -> None:
    client = make_app(MAX_RESPONSE_BYTES=100).test_client()
    body = problem(client.post("/v1/graph", json={"expression": "a + b"}), "response-too-large")
    assert (body["limit"], body["maximum"]) == ("max_response_bytes", 100)


# -- sweeps and pictures ------------------------------------------------------------------------

SWEEP_LIMITS = {"MAX_SWEEP_POINTS": 10, "MAX_SWEEP_GRID": 4, "MAX_SWEEP_CELLS": 30,
                "MAX_DRAWN_NODES": 3, "PICTURE_BURST": 1, "PICTURE_RATE": 0.001}  # fmt: skip


def _line(points: int, expression: str = "x") -> dict[str, Any]:
    return {"expression": expression, "vary": [{"name": "x", "from": 0, "to": 1, "points": points}]}


@pytest.fixture
def small() -> FlaskClient:
    return create_app({"TESTING": True, **SWEEP_LIMITS}).test_client()


def test_sweep_limits_have_their_own_problems(small: FlaskClient) -> None:
    body = problem(small.post("/v1/sweep", json=_line(11)), "too-many-points")
    assert (body["limit"], body["maximum"]) == ("max_sweep_points", 10)
    points = {"expression": "x", "points": [{"x": 1}] * 11}
    problem(small.post("/v1/sweep", json=points), "too-many-points")
    sides = [{"name": "x", "from": 0, "to": 1, "points": 5}, {"name": "y", "from": 0, "to": 1,
                                                               "points": 2}]  # fmt: skip
    grid = {"expression": "x * y", "vary": sides}
    body = problem(small.post("/v1/sweep", json=grid), "grid-too-large")
    assert body["maximum"] == 4
    body = problem(small.post("/v1/sweep", json=_line(10, "tanh(exp(x)) * 2")), "sweep-too-large")
    assert body["limit"] == "max_sweep_cells"


def test_pictures_have_their_own_rate(small: FlaskClient) -> None:
    svg = {"Accept": "image/svg+xml"}
    assert small.post("/v1/sweep", json=_line(5), headers=svg).status_code == 200
    response = small.post("/v1/sweep", json=_line(5), headers=svg)
    problem(response, "too-many-pictures")
    assert int(response.headers["Retry-After"]) >= 1
    # A refusal from a URL is never kept, as the plot would be.
    url = "/v1/sweep?expression=x*x&vary=x:0:1:5&format=svg"
    refused = small.get(url, headers={"If-None-Match": "*"})
    assert refused.status_code == 429 and "Cache-Control" not in refused.headers
    # JSON and text drawings are not pictures: they are still answered.
    assert small.post("/v1/sweep", json=_line(5)).status_code == 200
    lesson = {"expression": "a * b", "bindings": {"a": 1, "b": 2}, "format": "dot"}
    assert small.post("/v1/gradients", json=lesson).status_code == 200


def test_a_graph_whose_edges_cross_too_many_columns_is_refused_before_graphviz_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = make_app().test_client()
    # Every term reads a and b: 101 terms make the edges from them pass through 19,800 columns,
    # whose layout takes Graphviz seconds; 40 terms, 2,964.
    monkeypatch.setattr("service.pictures.render_svg", lambda source: b"<svg/>")
    body = {"expression": "+".join(["a*b"] * 101), "format": "svg"}
    got = problem(client.post("/v1/graph", json=body), "graph-too-large-to-draw")
    assert (got["limit"], got["maximum"]) == ("max_drawn_edge_ranks", 10_000)
    assert "19800 columns" in got["detail"]
    body["expression"] = "+".join(["a*b"] * 40)
    assert client.post("/v1/graph", json=body).status_code == 200


def test_numbers_too_large_to_plot() -> None:
    body = {"expression": "x*1e300*1e8", "vary": [{"name": "x", "from": -1, "to": 1, "points": 5}]}
    response = (
        make_app().test_client().post("/v1/sweep", json=body, headers={"Accept": "image/png"})
    )
    assert "1e+308" in problem(response, "plot-out-of-range")["detail"]


def test_a_graph_too_large_to_draw(small: FlaskClient) -> None:
    body = {"expression": "a * b + c", "format": "svg"}
    problem(small.post("/v1/graph", json=body), "graph-too-large-to-draw")


def test_without_graphviz_svg_is_a_501(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shutil.which", lambda name, *args, **kwargs: None)
    body = {"expression": "a * b", "format": "svg"}
    detail = problem(client.post("/v1/graph", json=body), "graphviz-unavailable")["detail"]
    assert "apt-get install graphviz" in detail
    body["format"] = "dot"
    assert client.post("/v1/graph", json=body).status_code == 200


def test_a_drawing_that_takes_too_long_is_refused_and_dot_is_stopped(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A `dot` that never finishes, and says which process it is.
    pid_file = tmp_path / "pid"
    fake = tmp_path / "dot"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("service.pictures._DRAWING_SECONDS", 0.5)
    problem(client.post("/v1/graph", json={"expression": "a", "format": "svg"}), "drawing-too-slow")
    pid = int(pid_file.read_text())
    # killed, and reaped: no such process is left behind
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_the_table_has_every_kind_of_the_core_and_every_http_kind() -> None:
    core = {slug(kind) for kind in (*EXPRESSION_KINDS, *LIMIT_KINDS, *BINDING_KINDS, *DOMAIN_KINDS,
                                    *SIZE_KINDS, *PICTURE_KINDS, *SYMBOLIC_KINDS)}  # fmt: skip
    assert core <= KINDS.keys()
    assert set(HTTP_KINDS.values()) <= KINDS.keys()
    assert all(KINDS[kind][0] == status for status, kind in HTTP_KINDS.items())
    titles = [title for _, title in KINDS.values()]
    assert len(set(titles)) == len(titles)


def test_answers_for_items_the_expression_lacks(client: FlaskClient) -> None:
    body = {"expression": "a * b", "bindings": {"a": 1, "b": 2}, "answers": {"nodes": {"9": 1}}}
    problem(client.post("/v1/check", json=body), "unknown-answer-items")


def test_one_node_answered_twice(client: FlaskClient) -> None:
    answers = {"nodes": {"0": 1, "a": 1}}  # an input, by its id and by its name
    body = {"expression": "a * b", "bindings": {"a": 1, "b": 2}, "answers": answers}
    got = problem(client.post("/v1/check", json=body), "duplicate-answer-items")
    assert got["detail"] == "nodes.0, nodes.a answer the same node; give one answer for each node"


def test_symbolic_answers_past_their_budget() -> None:
    from service import check

    # As gunicorn's master does before forking: the first symbolic check of a process loads sympy
    # for seconds, which would otherwise count against this request's own budget.
    check.warm_up()
    hurried = make_app(SYMBOLIC_SECONDS=0.001).test_client()
    # Answers are judged at sample points; revealing the derivatives is sympy's work: simplifying
    # these takes far more than the budget's 1 ms.
    answers = {"derivatives": {"a": "b"}}
    expression = "(a + 1) ** 40 * b - (a ** 2 + 2 * a + 1) ** 20 * b"
    body = {"expression": expression, "bindings": {"a": 1, "b": 2}, "answers": answers}
    refused = problem(
        hurried.post("/v1/check", json={**body, "reveal": True}), "check-too-expensive"
    )
    # The symbolic budget is named, not the request's (whose 5 s were far from spent).
    assert refused["detail"].startswith(
        "checking the derivatives symbolically took longer than the 0.001 s it may take"
    )


def test_every_kind_was_shown_by_a_test() -> None:
    # Runs last in this module: every kind of the table must have been checked above.
    if not TESTED:
        pytest.skip("run the whole module to check that every kind is shown")
    # A request that never arrived is answered by gunicorn, not the app (tests/test_gunicorn.py).
    assert set(KINDS) - TESTED == {"request-timeout"}


@pytest.mark.parametrize("coding", ["gzip", "br", "deflate, gzip", "identity, gzip"])
def test_a_compressed_body_is_refused_not_read_as_json(client: FlaskClient, coding: str) -> None:
    body = gzip.compress(json.dumps({"expression": "a", "bindings": {"a": 1}}).encode())
    for path in ("/v1/gradients", "/v1/sweep", "/v1/check"):
        response = client.post(
            path,
            data=body,
            headers={"Content-Type": "application/json", "Content-Encoding": coding},
        )
        got = problem(response, "unsupported-media-type")
        assert f"Content-Encoding: {coding.removeprefix('identity, ')}" in got["detail"]
        assert response.headers["Accept-Encoding"] == "identity"


def test_a_coding_with_no_body_is_no_matter(client: FlaskClient) -> None:
    gzip_header = {"Content-Encoding": "gzip"}
    assert client.get("/healthz", headers=gzip_header).status_code == 200
    url = "/v1/sweep?expression=x&vary=x:0:1:3&format=json"
    assert client.get(url, headers=gzip_header).status_code == 200


def test_a_long_coding_is_quoted_short(client: FlaskClient) -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": "x" * 5000}
    got = problem(
        client.post("/v1/gradients", data=b"{}", headers=headers), "unsupported-media-type"
    )
    assert len(got["detail"]) < 200


def test_an_identity_coding_is_no_coding(client: FlaskClient) -> None:
    response = client.post(
        "/v1/gradients",
        json={"expression": "a", "bindings": {"a": 1}},
        headers={"Content-Encoding": "identity"},
    )
    assert response.status_code == 200


def test_a_picture_refused_before_drawing_leaves_the_rate_alone(small: FlaskClient) -> None:
    # One picture in the burst, graphs of at most 3 nodes drawn (SWEEP_LIMITS): two refused
    # drawings and a refused plot, then the one picture allowed.
    svg = {"Accept": "image/svg+xml"}
    body = {"expression": "a * b + c", "bindings": {"a": 1, "b": 2, "c": 3}, "format": "svg"}
    for _ in range(2):
        problem(small.post("/v1/gradients", json=body), "graph-too-large-to-draw")
    huge = {"expression": "x * 1e300", "vary": [{"name": "x", "from": 0, "to": 10, "points": 3}]}
    problem(small.post("/v1/sweep", json=huge, headers=svg), "plot-out-of-range")
    assert small.post("/v1/sweep", json=_line(5), headers=svg).status_code == 200
    problem(small.post("/v1/sweep", json=_line(5), headers=svg), "too-many-pictures")
