"""What the tests share: the lesson, the app and client fixtures, and the core's refusals."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask import Flask
from flask.testing import FlaskClient

from service.api.config import DEFAULTS
from service.api.examples import GRADIENTS_REQUEST
from service.app import create_app

# The lesson every front end starts with, as the spec shows it: (a + b) * c at a=2, b=-3, c=10.
LESSON: dict[str, Any] = GRADIENTS_REQUEST
LESSON_VALUE = -10
LESSON_GRADIENTS = {"a": 10, "b": 10, "c": -1}

JSON = {"Content-Type": "application/json"}
PROBLEM = "application/problem+json"
CYRILLIC = re.compile("[\u0400-\u04ff]")  # a Russian sentence has these letters, others none
# Tests that draw with Graphviz's `dot`, which `make test` installs and a bare machine may lack.
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
# libyaml's safe loader where PyYAML has it: a tenth of the pure-Python loader's time on the spec.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# The costliest request within the default limits (loadtest/run.py:worst_expression): a 100 KB
# expression, a constant sum and about 10,000 divisions. A tenth of a second or more of work on
# any machine, so a budget of 0.02 s always stops it.
COSTLY: dict[str, Any] = {
    "expression": "(" + "1 + " * 15_000 + "1) * a" + " / a" * 9_990,
    "bindings": {"a": 1.5},
}

# Small limits, so each one is easy to exceed.
SMALL_LIMITS = {
    "MAX_EXPRESSION_LENGTH": 200,
    "MAX_DEPTH": 5,
    "MAX_NODES": 12,
    "MAX_STATEMENTS": 5,
    "MAX_IDENTIFIER_LENGTH": 8,
    "MAX_CONSTANT_MAGNITUDE": 1000,
    "MAX_BINDINGS": 3,
    "MAX_BODY_BYTES": 1024,
}


def at(start: int, end: int, line: int = 1, column: int | None = None) -> dict[str, int]:
    """A problem's position: single-line expressions start on line 1, at column start + 1."""
    return {
        "start": start,
        "end": end,
        "line": line,
        "column": start + 1 if column is None else column,
    }


# The core's refusals under SMALL_LIMITS, one of each kind: kind, expression, bindings and the
# members the problem must carry.
CORE: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
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
    (
        "too-many-statements",
        "a = x\nb = a\nc = b\nd = c\ne = d\nf = e",
        {"x": 1},
        {"limit": "max_statements", "maximum": 5, "position": at(30, 31, line=6, column=1)},
    ),
    ("function-name", "exp + 1", {}, {"position": at(0, 3)}),
    (
        "used-before-assignment",
        "y = x * 2\nx = Value(1.0)",
        {},
        {"position": at(4, 5)},
    ),
    ("unknown-output", "y = x * 2", {"x": 1}, {"variables": ["z"]}),
    (
        "unbound-variables",
        "(a + b) * c",
        {"a": 2, "b": -3},
        {"variables": ["c"], "position": at(10, 11)},
    ),
    ("unknown-variables", "a", {"a": 1, "b": 2, "z": 3}, {"variables": ["b", "z"]}),
    (
        "too-many-bindings",
        "a+b+c+d",
        dict.fromkeys("abcd", 1),
        {"variables": [], "limit": "max_bindings", "maximum": 3},
    ),
    ("log-domain", "log(a)", {"a": -1}, {"node": 1, "position": at(0, 6)}),
    ("division-by-zero", "a / b", {"a": 1, "b": 0}, {"node": 2, "position": at(0, 5)}),
    ("complex-result", "a ** 0.5", {"a": -1}, {"node": 1, "position": at(0, 8)}),
    ("overflow", "exp(a)", {"a": 1000}, {"node": 1, "position": at(0, 6)}),
    ("non-finite", "a ** 0.5", {"a": 0}, {"node": 1, "position": at(0, 8)}),
]


def make_app(testing: bool = True, **config: Any) -> Flask:
    """The service with the default settings (whatever `AUTOGRAD_*` says) and `config`.

    In testing mode an unexpected exception fails the test; without it, the client gets the 500
    problem a real client would.
    """
    return create_app({**DEFAULTS, "TESTING": testing, **config})


@pytest.fixture(scope="module")
def app() -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def strict(body: bytes) -> Any:
    """Parses a response as standard JSON: a NaN or Infinity in it fails the test."""

    def refuse(literal: str) -> None:
        raise AssertionError(f"{literal} in a response body")

    return json.loads(body, parse_constant=refuse)


def check_lesson(client: FlaskClient, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The service answers the lesson, correctly; returns the document."""
    response = client.post("/v1/gradients", json=LESSON, headers=dict(headers or {}))
    assert response.status_code == 200, response.get_data()[:500]
    document: dict[str, Any] = strict(response.data)
    assert document["value"] == LESSON_VALUE
    assert document["gradients"] == LESSON_GRADIENTS
    return document


SLOW_MODULE = "pytestmark = pytest.mark.slow"  # how a module marks all its tests slow


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # The fast loop (`-m "not slow"`) does not even import a module that is slow as a whole:
    # building its cases (the schemathesis run, hundreds of hostile bodies) takes seconds.
    if "not slow" not in (config.option.markexpr or ""):
        return None
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        lines = collection_path.read_text(encoding="utf-8").splitlines()
        if any(line.startswith(SLOW_MODULE) for line in lines):
            return True
    return None
