"""Where the spec and the interactive docs are served: Swagger UI from the service's own files."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import flask_swagger_ui
import yaml
from flask import Blueprint, Flask, Response, current_app, redirect
from werkzeug.wrappers import Response as WerkzeugResponse

import service
from service.api import EXTENSION
from service.api.schemas import request_bounds

DOCS_PAGE = "/docs"
DOCS_ASSETS = "/docs/static"
SPEC_EXTENSION = "autograd.spec"  # the app's `extensions` key for its `APISpec`

# flask-smorest's settings: it serves /openapi.json and the Swagger UI page at /docs; the page's
# scripts and styles are Swagger UI 5's own files, as flask-swagger-ui ships them, served below, so
# the docs work offline.
SPEC_SETTINGS: dict[str, Any] = {
    "API_TITLE": "autograd-service",
    "API_VERSION": service.__version__,
    "OPENAPI_VERSION": "3.1.0",
    "OPENAPI_URL_PREFIX": "/",
    "OPENAPI_JSON_PATH": "openapi.json",
    "OPENAPI_SWAGGER_UI_PATH": DOCS_PAGE,
    "OPENAPI_SWAGGER_UI_URL": f"{DOCS_ASSETS}/",
    # Swagger UI would otherwise send the spec to validator.swagger.io for its badge.
    "OPENAPI_SWAGGER_UI_CONFIG": {"validatorUrl": None},
    "API_SPEC_OPTIONS": {
        "info": {
            "description": (
                "Shows how gradients flow through a computation graph: send an expression and "
                "values for its variables, get back the value, every gradient, the graph and "
                "the backward pass step by step, as micrograd computes them.\n\n"
                "Every error is an RFC 9457 `application/problem+json` document whose `type` "
                "names its kind. Every response carries an `X-Request-ID` header: the client's "
                "own when it is a token of at most 128 characters from `[A-Za-z0-9._-]`."
            ),
            "license": {"name": "MIT"},
        },
    },
}

SWAGGER_UI_FILES = Path(flask_swagger_ui.__file__).parent / "dist"
blp = Blueprint("docs", __name__, static_folder=str(SWAGGER_UI_FILES), static_url_path=DOCS_ASSETS)


@blp.route("/openapi.yaml")
def openapi_yaml() -> Response:
    return Response(spec_yaml(current_app), mimetype="application/yaml")


@blp.route("/docs/")
def docs_with_a_slash() -> WerkzeugResponse:
    # flask-smorest serves the page at /docs only; people type the slash too.
    return redirect(DOCS_PAGE, code=308)


def served_spec(app: Flask) -> dict[str, Any]:
    """The app's spec, stating the limits in force; a new document on every call.

    apispec's `to_dict` hands out its live spec: changing what it returns would change the spec
    served to every later request, so this works on a copy.
    """
    spec: dict[str, Any] = copy.deepcopy(app.extensions[SPEC_EXTENSION].to_dict())
    bounds = request_bounds(app.extensions[EXTENSION].limits)
    # Request fields in bodies, and in queries (GET /v1/sweep's `expression` and `output`).
    properties = [
        (f"{schema_name}.{name}", name, prop)
        for schema_name, schema in spec.get("components", {}).get("schemas", {}).items()
        for name, prop in schema.get("properties", {}).items()
    ] + [
        (parameter["name"], parameter["name"], parameter["schema"])
        for operations in spec.get("paths", {}).values()
        for operation in operations.values()
        for parameter in operation.get("parameters", [])
        if "schema" in parameter
    ]
    for qualified, name, prop in properties:
        stated = bounds.get(qualified, bounds.get(name))
        # Only the request fields state bounds; a response's `expression` has none.
        if stated is not None and stated.keys() <= prop.keys():
            _state(prop, stated)
    return spec


def _state(prop: dict[str, Any], bounds: dict[str, Any]) -> None:
    """`bounds` written into the schema `prop`, into its nested schemas (a list's `items`) too."""
    for key, value in bounds.items():
        if isinstance(value, dict) and isinstance(prop.get(key), dict):
            prop[key] = copy.copy(prop[key])  # the schemas may share it: this one's own
            _state(prop[key], value)
        else:
            prop[key] = copy.deepcopy(value)


def spec_yaml(app: Flask) -> str:
    """The app's spec as YAML; with the default limits, exactly what `make openapi` writes."""
    spec = served_spec(app)
    # The order a reader wants: what it is, then the paths, then the schemas they refer to.
    ordered = {key: spec.pop(key) for key in _READING_ORDER if key in spec} | spec
    ordered["paths"] = {
        path: {method: _operation_in_reading_order(op) for method, op in operations.items()}
        for path, operations in ordered["paths"].items()
    }
    return yaml.dump(ordered, Dumper=_SpecDumper, sort_keys=False, allow_unicode=True, width=100)


_READING_ORDER = ("openapi", "info", "tags", "paths", "components")


def _operation_in_reading_order(operation: dict[str, Any]) -> dict[str, Any]:
    """What the operation does, then what it takes, then its responses by status."""
    responses = operation.pop("responses")
    head = {key: operation.pop(key) for key in ("summary", "description") if key in operation}
    return head | operation | {"responses": {code: responses[code] for code in sorted(responses)}}


class _SpecDumper(yaml.SafeDumper):
    """Writes multi-line strings (the views' docstrings) as literal blocks, line for line."""


def _string(dumper: yaml.SafeDumper, text: str) -> Any:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_SpecDumper.add_representer(str, _string)
