"""The real server: gunicorn started as in production, spoken to over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from conftest import LESSON, LESSON_GRADIENTS, LESSON_VALUE

from service.devserver import Gunicorn

pytestmark = pytest.mark.slow  # each module starts server processes
BODY_LIMIT = 2048


@pytest.fixture(scope="module")
def server() -> Iterator[Gunicorn]:
    env = {"AUTOGRAD_WORKERS": "1", "AUTOGRAD_MAX_BODY_BYTES": str(BODY_LIMIT)}
    with Gunicorn(env=env) as server:
        yield server


def test_the_lesson_over_http(server: Gunicorn) -> None:
    url = server.url
    response = requests.post(
        f"{url}/v1/gradients", json=LESSON, headers={"X-Request-ID": "lesson-1"}, timeout=5
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["X-Request-ID"] == "lesson-1"
    document = response.json()
    assert document["value"] == LESSON_VALUE
    assert document["gradients"] == LESSON_GRADIENTS
    assert [step["node"] for step in document["backward"]] == [4, 3, 2, 1, 0]


def test_problems_over_http(server: Gunicorn) -> None:
    url = server.url
    json_type = {"Content-Type": "application/json"}
    cases = [
        (
            requests.post(
                f"{url}/v1/gradients",
                data=b'{"expression": "a", "bindings": {"a": NaN}}',
                headers=json_type,
                timeout=5,
            ),
            422,
            "invalid-binding",
        ),
        (
            requests.post(
                f"{url}/v1/graph", data=b'{"expression": "a",', headers=json_type, timeout=5
            ),
            400,
            "malformed-json",
        ),
        (requests.post(f"{url}/v1/graph", data=b"{}", timeout=5), 415, "unsupported-media-type"),
        (
            requests.post(
                f"{url}/v1/graph", data=b" " * (2 * BODY_LIMIT), headers=json_type, timeout=5
            ),
            413,
            "body-too-large",
        ),
        # Without a Content-Length the limit holds too: the body is cut off as it is read.
        (
            requests.post(
                f"{url}/v1/graph", data=iter([b" " * BODY_LIMIT] * 2), headers=json_type, timeout=5
            ),
            413,
            "body-too-large",
        ),
        (
            requests.post(f"{url}/v1/graph", json={"expression": "a ^ b"}, timeout=5),
            422,
            "variable-exponent",
        ),
        (requests.get(f"{url}/nowhere", timeout=5), 404, "not-found"),
        (requests.delete(f"{url}/healthz", timeout=5), 405, "method-not-allowed"),
    ]
    for response, status, kind in cases:
        assert response.status_code == status, response.text
        assert response.headers["Content-Type"] == "application/problem+json"
        assert response.json()["type"].endswith(f"/problems/{kind}")
        assert response.headers["X-Request-ID"]


def test_docs_and_spec_over_http(server: Gunicorn) -> None:
    url = server.url
    page = requests.get(f"{url}/docs", timeout=5)
    assert page.status_code == 200
    assert requests.get(f"{url}/docs/", timeout=5).url == f"{url}/docs"
    script = requests.get(f"{url}/docs/static/swagger-ui-bundle.js", timeout=5)
    assert script.status_code == 200
    assert len(script.content) > 100_000
    for _ in range(3):  # the same spec on every request to the worker
        assert requests.get(f"{url}/openapi.yaml", timeout=5).text.startswith("openapi: 3.1.0")
        assert requests.get(f"{url}/openapi.json", timeout=5).json()["paths"]


def test_access_log_lines_carry_the_request_id(server: Gunicorn) -> None:
    requests.get(f"{server.url}/healthz", headers={"X-Request-ID": "logged-7"}, timeout=5)
    output = server.stop()  # the module's last test: stop the server to read all it wrote
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any(record.get("request_id") == "logged-7" for record in records)


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("AUTOGRAD_MAX_DEPTH", "abc", "AUTOGRAD_MAX_DEPTH must be a positive whole number"),
        ("AUTOGRAD_MAX_DEPHT", "5", "did you mean AUTOGRAD_MAX_DEPTH?"),
    ],
)
def test_a_bad_setting_stops_the_server_with_one_line(variable: str, value: str, said: str) -> None:
    with pytest.raises(RuntimeError) as failed:
        Gunicorn(env={variable: value, "AUTOGRAD_WORKERS": "1"}).start()
    head, _, output = str(failed.value).partition("\n")
    assert head == "gunicorn exited with status 1:"
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith(f"Error: {variable}")
    assert said in lines[0]
