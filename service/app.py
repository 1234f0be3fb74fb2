"""The application factory: `gunicorn 'service.app:create_app()'` serves what it returns."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, current_app, request
from flask_cors import CORS

from service.api import (
    EXTENSION,
    costs,
    derivatives,
    docs,
    gradients,
    graph,
    health,
    language,
    logs,
    metrics,
    operations,
    pictures,
    playground,
    sweep,
)
from service.api import check as check_api
from service.api import exercises as exercises_api
from service.api.config import (
    DEFAULTS,
    ENVIRONMENT_PREFIX,
    body_limit,
    cache_nodes,
    cache_size,
    check_variables,
    cors_origins,
    limits_from,
    log_level,
    request_costs,
)
from service.api.problems import ProblemApi
from service.api.request import REQUEST_ID_HEADER, ApiRequest, StrictJSONProvider
from service.evaluator import Evaluator

RESOURCES = (
    gradients.blp,
    graph.blp,
    sweep.blp,
    derivatives.blp,
    check_api.blp,
    exercises_api.blp,
    operations.blp,
    health.blp,
    metrics.blp,
)
ALLOW_METHODS = "Access-Control-Allow-Methods"
PREFLIGHT_MAX_AGE = 3600  # seconds a browser may reuse a CORS preflight: one per slider session


class Service(Flask):
    """Flask, with every view's work bounded in time, in heavy requests at once and in response
    size (service/api/costs.py): the one place all requests pass through."""

    def dispatch_request(self) -> Any:
        return costs.bounded(self, super().dispatch_request)


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The service: defaults, then `AUTOGRAD_*` environment variables, then `config` (tests)."""
    app = Service(__name__, static_folder=None)
    app.request_class = ApiRequest
    # `/v1//gradients` is no route: Werkzeug would redirect it, with a Location built from the
    # client's Host header, in an HTML page, where every other unknown path is a 404 problem.
    app.url_map.merge_slashes = False
    app.json = StrictJSONProvider(app)
    app.config.update(DEFAULTS, **docs.SPEC_SETTINGS)
    check_variables(os.environ)
    app.config.from_prefixed_env(ENVIRONMENT_PREFIX)
    app.config.update(config or {})
    app.config["MAX_CONTENT_LENGTH"] = body_limit(app.config)
    logs.configure(log_level(app.config))
    app.extensions[costs.EXTENSION] = request_costs(app.config)
    app.extensions[EXTENSION] = Evaluator(
        limits_from(app.config), cache_size(app.config), cache_nodes(app.config)
    )
    pictures.init_app(app)

    api = ProblemApi(app)
    for resource in RESOURCES:
        api.register_blueprint(resource)
    sweep.document(api.spec)
    app.register_blueprint(docs.blp)
    app.register_blueprint(playground.blp)
    app.extensions[docs.SPEC_EXTENSION] = api.spec
    # Registered before CORS adds its own hook, so it runs after it: Flask runs them in reverse.
    app.after_request(_preflight_names_the_routes_methods)
    origins = cors_origins(app.config)
    CORS(
        app,
        # Each listed origin matched as written (flask-cors reads text with `[` or `*` in it as
        # a pattern, and an IPv6 origin has brackets), in any case, as origins compare.
        origins="*" if origins == "*" else [_exactly(origin) for origin in origins],
        send_wildcard=origins == "*",  # `*` rather than echoing each origin: one cacheable answer
        always_send=origins == "*",  # a listed origin is named only to a request from it
        vary_header=False,  # with a list, `_varies_by_origin` says so on every answer
        expose_headers=[REQUEST_ID_HEADER, "Retry-After"],
        max_age=PREFLIGHT_MAX_AGE,
    )
    if origins != "*":
        app.after_request(_varies_by_origin)
    app.after_request(_tag_with_request_id)
    app.after_request(language.announce)
    metrics.instrument(app)
    return app


def _preflight_names_the_routes_methods(response: Response) -> Response:
    # flask-cors offers every method it knows of; a preflight should offer what the path takes,
    # by every route at it (/v1/sweep has a POST and a GET).
    if request.url_rule is not None and ALLOW_METHODS in response.headers:
        adapter = current_app.url_map.bind_to_environ(request.environ)
        response.headers[ALLOW_METHODS] = ", ".join(sorted(adapter.allowed_methods()))
    return response


def _exactly(text: str) -> re.Pattern[str]:
    return re.compile(re.escape(text) + r"\Z", re.IGNORECASE)


def _varies_by_origin(response: Response) -> Response:
    # Listed origins: each response depends on the request's `Origin`, the refused one too (it
    # lacks the header that allows it), so a cache must not give one origin's answer to another.
    response.vary.add("Origin")
    return response


def _tag_with_request_id(response: Response) -> Response:
    response.headers[REQUEST_ID_HEADER] = request.request_id  # type: ignore[attr-defined]
    return response
