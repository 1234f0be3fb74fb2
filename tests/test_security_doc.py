"""docs/SECURITY.md's examples of what is accepted and refused hold, through the API."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from service.app import create_app

DOC = (Path(__file__).resolve().parent.parent / "docs" / "SECURITY.md").read_text()
ACCEPTED_SENTENCE = re.search(r"Subnormal inputs, .*? are\s+accepted", DOC, re.DOTALL).group(0)


@pytest.fixture(scope="module")
def client() -> FlaskClient:
    return create_app({"TESTING": True}).test_client()


@pytest.mark.parametrize(
    ("expression", "bindings"),
    [("exp(a)", {"a": 709}), ("exp(690)", {}), ("tanh(1e300)", {}), ("0 ** 0", {})],
)
def test_what_the_document_calls_accepted_is_accepted(
    client: FlaskClient, expression: str, bindings: dict
) -> None:
    assert f"`{expression}`" in ACCEPTED_SENTENCE
    response = client.post("/v1/gradients", json={"expression": expression, "bindings": bindings})
    assert response.status_code == 200, response.get_json()


@pytest.mark.parametrize(
    ("expression", "kind"), [("exp(709)", "constant-too-large"), ("exp(710)", "overflow")]
)
def test_the_literal_exp_709_is_refused_as_the_document_says(
    client: FlaskClient, expression: str, kind: str
) -> None:
    assert f"`{expression}`" not in ACCEPTED_SENTENCE
    assert re.search(rf"`{re.escape(expression)}`.{{0,200}}?`{kind}`", DOC, re.DOTALL)
    response = client.post("/v1/gradients", json={"expression": expression, "bindings": {}})
    assert response.status_code == 422
    assert response.get_json()["type"].endswith(f"/{kind}")
