"""The interactive docs and the spec as served."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import SAFE_LOADER, make_app, strict
from flask.testing import FlaskClient

from service.api.schemas import IDENTIFIER_PATTERN


def test_the_spec_is_served_as_json_and_yaml(client: FlaskClient) -> None:
    as_json = client.get("/openapi.json")
    as_yaml = client.get("/openapi.yaml")
    assert as_json.status_code == as_yaml.status_code == 200
    assert as_json.mimetype == "application/json"
    assert as_yaml.mimetype == "application/yaml"
    assert strict(as_json.data)["paths"].keys() == {
        "/v1/gradients",
        "/v1/graph",
        "/v1/sweep",
        "/v1/derivatives",
        "/v1/operations",
        "/healthz",
        "/v1/check",
        "/v1/exercises",
        "/metrics",
    }
    assert as_yaml.data.startswith(b"openapi: 3.1.0\n")


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


def test_docs_with_a_trailing_slash_lead_to_the_docs(client: FlaskClient) -> None:
    response = client.get("/docs/")
    assert response.status_code in (301, 308)
    assert response.headers["Location"] == "/docs"
    assert client.get("/docs/", follow_redirects=True).status_code == 200


@pytest.mark.slow
def test_the_spec_is_served_the_same_on_every_request() -> None:
    # A fresh app: the first request is the one that used to damage apispec's live spec.
    client = make_app().test_client()
    first_json = strict(client.get("/openapi.json").data)
    first_yaml = client.get("/openapi.yaml").data
    for _ in range(3):
        as_yaml = client.get("/openapi.yaml")
        assert as_yaml.status_code == 200
        assert as_yaml.data == first_yaml
        assert strict(client.get("/openapi.json").data) == first_json
    gradients = first_json["paths"]["/v1/gradients"]["post"]
    assert gradients["summary"] and gradients["description"] and gradients["responses"]


def test_the_served_spec_states_the_limits_in_force() -> None:
    client = make_app(
        MAX_EXPRESSION_LENGTH=77, MAX_BINDINGS=5, MAX_IDENTIFIER_LENGTH=9
    ).test_client()
    for spec in (
        strict(client.get("/openapi.json").data),
        yaml.load(client.get("/openapi.yaml").data, Loader=SAFE_LOADER),
    ):
        schemas = spec["components"]["schemas"]
        for name in ("GradientsRequest", "GraphRequest"):
            assert schemas[name]["properties"]["expression"]["maxLength"] == 77
            assert schemas[name]["properties"]["expression"]["minLength"] == 1
        bindings = schemas["GradientsRequest"]["properties"]["bindings"]
        assert bindings["maxProperties"] == 5
        assert bindings["propertyNames"] == {"pattern": IDENTIFIER_PATTERN, "maxLength": 9}
        assert "maxLength" not in schemas["Evaluation"]["properties"]["expression"]
