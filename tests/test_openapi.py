"""The spec stays true: openapi.yaml is what the code makes, it is valid, and responses fit it."""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CORE, LESSON, SAFE_LOADER, SMALL_LIMITS, make_app
from flask import Flask
from flask.testing import FlaskClient
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate as validate_spec

from service.api import costs
from service.api.schemas import IDENTIFIER_PATTERN
from service.api.spec import generate, main
from service.errors import BudgetExceeded
from service.kinds import KINDS
from service.limits import DEFAULT_LIMITS

SPEC_FILE = Path(__file__).resolve().parent.parent / "openapi.yaml"
SPEC: dict[str, Any] = yaml.load(SPEC_FILE.read_text(), Loader=SAFE_LOADER)
WITH_BODY = ("/v1/gradients", "/v1/graph")
PLAIN_TEXT = ("/metrics",)  # answered in Prometheus' text format, for scrapers


def resolved(node: Any) -> Any:
    """`node` with every `$ref` into the spec replaced by what it points at."""
    if isinstance(node, dict):
        if "$ref" in node:
            target: Any = SPEC
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            return resolved(target)
        return {key: resolved(value) for key, value in node.items()}
    if isinstance(node, list):
        return [resolved(item) for item in node]
    return node


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op) for path, item in SPEC["paths"].items() for method, op in item.items()
    ]


def test_the_checked_in_spec_is_what_the_code_generates() -> None:
    assert SPEC_FILE.read_text() == generate(), "openapi.yaml is out of date: run `make openapi`"


@pytest.mark.slow
def test_the_generator_writes_the_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main([str(tmp_path / "openapi.yaml")]) == 0
    assert (tmp_path / "openapi.yaml").read_text() == SPEC_FILE.read_text()
    assert main([]) == 0
    assert capsys.readouterr().out == SPEC_FILE.read_text()


@pytest.mark.slow
def test_the_spec_does_not_depend_on_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOGRAD_MAX_NODES", "5")
    monkeypatch.setenv("AUTOGRAD_MAX_BODY_BYTES", "100")
    assert generate() == SPEC_FILE.read_text()


def test_the_spec_is_valid_openapi_3_1() -> None:
    assert SPEC["openapi"] == "3.1.0"
    validate_spec(SPEC)


@pytest.mark.slow
def test_the_served_spec_is_the_checked_in_one() -> None:
    client = make_app().test_client()
    assert json.loads(client.get("/openapi.json").data) == SPEC
    assert client.get("/openapi.yaml").get_data(as_text=True) == SPEC_FILE.read_text()


def first_example(medium: dict[str, Any]) -> Any:
    """The medium's example, or the first of its named examples (the lesson comes first)."""
    if "example" in medium:
        return medium["example"]
    return next(iter(medium["examples"].values()))["value"]


@pytest.mark.parametrize(("path", "method", "op"), operations(), ids=lambda x: str(x)[:20])
def test_every_operation_is_documented_with_the_lesson(path: str, method: str, op: dict) -> None:
    assert op["summary"]
    assert len(op["description"]) > 80
    success = resolved(op["responses"]["200"])
    assert "X-Request-ID" in success["headers"]
    media_type = "text/plain" if path in PLAIN_TEXT else "application/json"
    assert first_example(success["content"][media_type])
    assert resolved(op["responses"]["default"])["content"].keys() == {"application/problem+json"}
    if path in WITH_BODY:
        example = first_example(op["requestBody"]["content"]["application/json"])
        assert example["expression"] == "(a + b) * c"
        assert {"400", "413", "415", "422"} <= op["responses"].keys()
        for status in ("400", "413", "415", "422"):
            content = resolved(op["responses"][status])["content"]
            assert content["application/problem+json"]["schema"]["properties"]["type"]
    if path == "/v1/gradients":
        document = first_example(op["responses"]["200"]["content"]["application/json"])
        assert example["bindings"] == {"a": 2, "b": -3, "c": 10}
        assert document["value"] == -10
        assert document["gradients"] == {"a": 10, "b": 10, "c": -1}


@contextmanager
def _spent(seconds: float, kind: str) -> Iterator[None]:
    """A time budget that has run out before the work starts."""
    raise BudgetExceeded(kind, seconds)
    yield


@pytest.fixture(scope="module")
def every_body_heavy() -> Flask:
    return make_app(HEAVY_REQUEST_BYTES=1)


@pytest.mark.parametrize(("path", "method"), [(path, method) for path, method, _ in operations()])
def test_every_operation_runs_within_the_bounds_and_documents_their_503(
    path: str,
    method: str,
    every_body_heavy: Flask,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    documented = resolved(SPEC["paths"][path][method]["responses"]["503"])
    assert "Retry-After" in documented["headers"]
    examples = documented["content"]["application/problem+json"]["examples"]
    client = every_body_heavy.test_client()
    # Past the time budget, and heavy (any body) with every slot of a server of three workers held.
    monkeypatch.setattr(costs, "time_budget", _spent)
    refused = [client.open(path, method=method)]
    monkeypatch.undo()
    monkeypatch.setattr(costs, "SERVER", costs.Server(str(tmp_path), 3))
    held = [(tmp_path / f"heavy-{slot}").open("ab") for slot in range(2)]
    for slot in held:
        fcntl.flock(slot, fcntl.LOCK_EX | fcntl.LOCK_NB)
    refused.append(client.open(path, method=method, data=b"{}"))
    for response, kind in zip(refused, ("request-too-expensive", "service-busy"), strict=True):
        assert response.status_code == 503, response.data[:200]
        assert response.get_json()["type"].endswith(f"/problems/{kind}")
        assert response.headers["Retry-After"]
        assert kind in examples
    for slot in held:
        slot.close()


def test_every_example_fits_its_schema() -> None:
    count = 0
    for _, _, op in operations():
        media = [*op.get("requestBody", {}).get("content", {}).values()]
        # every response with a body (a 304 has none)
        bodies = [resolved(r).get("content", {}) for r in op["responses"].values()]
        media += [m for content in bodies for m in content.values()]
        for medium in media:
            schema = resolved(medium["schema"])
            examples = [e["value"] for e in medium.get("examples", {}).values()]
            for example in [*examples, *([medium["example"]] if "example" in medium else [])]:
                OAS31Validator(schema).validate(example)
                count += 1
    assert count >= 10


@pytest.mark.parametrize("path", ["/v1/gradients", "/v1/graph"])
@pytest.mark.parametrize(
    ("format", "medium"), [("dot", "text/vnd.graphviz"), ("mermaid", "text/vnd.mermaid")]
)
def test_the_drawing_examples_are_what_the_endpoint_draws(
    client: FlaskClient, path: str, format: str, medium: str
) -> None:
    request = {**LESSON, "format": format}
    if path == "/v1/graph":
        del request["bindings"]
    drawn = client.post(path, json=request).get_data(as_text=True)
    assert SPEC["paths"][path]["post"]["responses"]["200"]["content"][medium]["example"] == drawn


def test_every_problem_type_is_in_the_spec() -> None:
    types = SPEC["components"]["schemas"]["Problem"]["properties"]["type"]["enum"]
    assert {t.rsplit("/", 1)[-1] for t in types} == {*KINDS, "about:blank"}


# Real requests, one or more for every endpoint and every kind of problem.
REQUESTS: list[tuple[str, str, Any, dict[str, str]]] = [
    ("post", "/v1/gradients", LESSON, {}),
    ("post", "/v1/gradients", {**LESSON, "granularity": "primitive"}, {}),
    ("post", "/v1/graph", {"expression": "-a / b - exp(c) ** 2"}, {}),
    ("get", "/v1/operations", None, {}),
    ("get", "/healthz", None, {}),
    *[("post", "/v1/gradients", {"expression": e, "bindings": b}, {}) for _, e, b, _ in CORE],
    ("post", "/v1/graph", {"expression": "(a"}, {}),
    ("post", "/v1/gradients", b'{"expression": NaN}', {"Content-Type": "application/json"}),
    ("post", "/v1/gradients", b'{"a": 1, "a": 1}', {"Content-Type": "application/json"}),
    ("post", "/v1/graph", b'{"expression": "a"', {"Content-Type": "application/json"}),
    ("post", "/v1/graph", b'{"expression": "a"}', {"Content-Type": "text/plain"}),
    ("post", "/v1/gradients", b"[" * 2000, {"Content-Type": "application/json"}),
    ("post", "/v1/gradients", {"expression": "a", "bindings": {"a": None}}, {}),
    ("post", "/v1/check", {**LESSON, "answers": {"gradients": {"a": 10, "b": "x"}}}, {}),
    ("post", "/v1/check", {**LESSON, "answers": {"nodes": {"2": 1}}, "reveal": True}, {}),
    ("post", "/v1/check", {**LESSON, "answers": {"gradients": {"z": 1}}}, {}),
    ("post", "/v1/exercises", {"seed": 1, "kind": "backward-pass", "reveal": True}, {}),
    ("post", "/v1/exercises", {"seed": -1}, {}),
    ("get", "/v1/nowhere", None, {}),
    ("get", "/v1/gradients", None, {}),
    ("post", "/v1/sweep", {"expression": "log(x) * y", "bindings": {"y": 2},
                           "vary": [{"name": "x", "from": -1, "to": 1, "points": 5}]}, {}),
    ("post", "/v1/sweep", {"expression": "x / y", "vary": [{"name": "x", "from": -1, "to": 1,
     "points": 3}, {"name": "y", "from": 0, "to": 1, "points": 2}]}, {}),
    ("post", "/v1/sweep", {"expression": "x / y", "points": [{"x": 1, "y": 0}, {"x": 1, "y": 2}]},
     {}),
    ("post", "/v1/sweep", {"expression": "x", "vary": [{"name": "x", "from": 0, "to": 1,
                                                         "points": 10**6}]}, {}),
    ("post", "/v1/sweep", {"expression": "x", "bindings": {"x": 1}}, {}),
    ("get", "/v1/sweep?expression=x*y&vary=x:0:1:3&bind=y:2&format=json", None, {}),
    ("get", "/v1/sweep?expression=x*y&vary=x:0:1", None, {}),
    ("get", "/v1/sweep?expression=z%3Dx*y%3Bw%3Dz%2B1&vary=x:0:1:3&bind=y:2&output=z&format=json",
     None, {}),
    ("get", "/v1/sweep?expression=x&vary=x:0:1:3&bogus=1", None, {}),
]  # fmt: skip


@pytest.fixture(scope="module")
def app() -> Flask:
    return make_app(**SMALL_LIMITS)


@pytest.mark.parametrize(("method", "path", "body", "headers"), REQUESTS)
def test_real_responses_fit_the_spec(
    client: FlaskClient, method: str, path: str, body: Any, headers: dict[str, str]
) -> None:
    if isinstance(body, bytes):
        response = client.open(path, method=method, data=body, headers=headers)
    else:
        response = client.open(path, method=method, json=body, headers=headers)
    op = SPEC["paths"].get(path.split("?")[0], {}).get(method)
    if op is None:  # 404 and 405 belong to no operation: they are problems like any other
        documented = resolved(SPEC["components"]["responses"]["DEFAULT_ERROR"])
    else:
        responses = op["responses"]
        documented = resolved(responses.get(str(response.status_code), responses["default"]))
    assert response.mimetype in documented["content"], response.status_code
    schema = documented["content"][response.mimetype]["schema"]
    OAS31Validator(schema).validate(json.loads(response.data))
    assert all(header in response.headers for header in documented["headers"])


def test_the_checked_in_spec_states_the_default_limits() -> None:
    schemas = SPEC["components"]["schemas"]
    for name in ("GradientsRequest", "GraphRequest"):
        expression = schemas[name]["properties"]["expression"]
        assert expression["minLength"] == 1
        assert expression["maxLength"] == DEFAULT_LIMITS.max_expression_length
    bindings = schemas["GradientsRequest"]["properties"]["bindings"]
    assert bindings["maxProperties"] == DEFAULT_LIMITS.max_bindings
    assert bindings["propertyNames"] == {
        "pattern": IDENTIFIER_PATTERN,
        "maxLength": DEFAULT_LIMITS.max_identifier_length,
    }
    assert bindings["additionalProperties"] == {"type": "number"}
