"""How a request is read: its JSON body, strictly and within the size limit, and its id."""

from __future__ import annotations

import io
import json
import re

import pytest
from conftest import JSON, LESSON, make_app, strict
from flask.testing import FlaskClient


def test_integer_and_float_bindings_give_the_same_document(client: FlaskClient) -> None:
    floats = {**LESSON, "bindings": {"a": 2.0, "b": -3.0, "c": 10.0}}
    ints = client.post("/v1/gradients", json=LESSON).data
    assert ints == client.post("/v1/gradients", json=floats).data


def test_a_byte_order_mark_is_ignored(client: FlaskClient) -> None:
    body = b"\xef\xbb\xbf" + json.dumps(LESSON).encode()
    response = client.post("/v1/gradients", data=body, content_type="application/json")
    assert strict(response.data)["value"] == -10


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


BODY_LIMIT = 1024


@pytest.fixture(scope="module")
def limited() -> FlaskClient:
    return make_app(MAX_BODY_BYTES=BODY_LIMIT).test_client()


@pytest.mark.parametrize(
    ("size", "status"), [(BODY_LIMIT - 1, 200), (BODY_LIMIT, 200), (BODY_LIMIT + 1, 413)]
)
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_of_exactly_the_limit_is_accepted(
    limited: FlaskClient, size: int, status: int, chunked: bool
) -> None:
    body = json.dumps(LESSON).encode().ljust(size)  # the same document at every size
    if chunked:  # as gunicorn hands a chunked body over: no length, the stream ends it
        response = limited.post(
            "/v1/gradients",
            input_stream=io.BytesIO(body),
            headers={**JSON, "Transfer-Encoding": "chunked"},
            environ_overrides={"wsgi.input_terminated": True},
        )
    else:
        response = limited.post("/v1/gradients", data=body, headers=JSON)
    assert response.status_code == status, response.get_data()[:200]
    if status == 413:
        assert response.get_json()["type"].endswith("/body-too-large")


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


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "application/problem+json",
     "application/merge-patch+json"],
)  # fmt: skip
def test_a_json_body_is_read_under_any_json_media_type(
    client: FlaskClient, content_type: str
) -> None:
    # RFC 6839: a `+json` type is JSON, as Werkzeug reads it; docs/SECURITY.md says so.
    body = json.dumps({"expression": "a * 2", "bindings": {"a": 3}})
    response = client.post("/v1/gradients", data=body, content_type=content_type)
    assert response.status_code == 200
    assert response.get_json()["gradients"] == {"a": 2.0}
