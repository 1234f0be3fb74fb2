"""Every error as an RFC 9457 problem: rendering, the app's handlers, the spec's responses."""

from __future__ import annotations

import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, TypeVar

from apispec import BasePlugin
from flask import Response, current_app, request
from flask_smorest import Api, Blueprint
from werkzeug.exceptions import HTTPException

from service.api import json_response, language
from service.api.costs import REFUSALS, retry_after
from service.api.docs import served_spec
from service.api.examples import REFUSED, refusal
from service.api.logs import LOGGER
from service.api.request import (
    CONTENT_LANGUAGE_HEADER,
    LANGUAGE_HEADER,
    REQUEST_ID_HEADER,
    RESPONSE_HEADERS,
)
from service.api.schemas import ProblemSchema, bindings_property
from service.errors import AutogradError, BindingError, BudgetExceeded
from service.i18n import DEFAULT_LOCALE, LOCALES, _, _n, localized
from service.kinds import HTTP_KINDS, KINDS, Problem, core_problem, problem_body

PROBLEM_MIMETYPE = "application/problem+json"
View = TypeVar("View", bound=Callable[..., Any])

# What the web layer's own problems look like, for the spec's examples.
_SAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "malformed-json": (
        "the request body is not valid JSON at line 1, column 28: ',' was expected",
        {},
    ),
    "validation-error": (
        "/granularity: Must be one of: operator, primitive.",
        {"errors": [{"pointer": "/granularity", "detail": "Must be one of: operator, primitive."}]},
    ),
    "unsupported-media-type": (
        "the body must be JSON sent with Content-Type: application/json; this one is text/plain",
        {},
    ),
    "body-too-large": (
        "the request body is larger than the 1048576 bytes accepted",
        {"limit": "max_body_bytes", "maximum": 1048576},
    ),
    "not-found": ("nothing is at /v1/gradient; the API is described at /docs", {}),
    "method-not-allowed": ("GET is not allowed on /v1/gradients; use OPTIONS, POST", {}),
    "request-too-expensive": ("the work took longer than its time budget of 5 s", {}),
    "service-busy": (
        "the service is busy with 2 other large requests; try again in 1 s or send a smaller one",
        {},
    ),
    "response-too-large": (
        "the response would be 20000000 bytes, more than the 16777216 this service sends; "
        "ask for less: a smaller expression, or fewer points of a sweep",
        {"limit": "max_response_bytes", "maximum": 16777216},
    ),
    "internal-error": (
        "the service failed unexpectedly; the request id "
        "0b5e0c7b5f8e4f6c9d1a2b3c4d5e6f70 identifies the failure in its logs",
        {},
    ),
}


def problem_response(body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    """The problem as a response, its title and details in the language the request asked for."""
    response = json_response(localized(body, language.current()), body["status"], PROBLEM_MIMETYPE)
    response.headers.update(headers or {})
    return response


def core_refusal(error: AutogradError) -> Response:
    """The core's refusal as a problem; a binding that is not a number is pointed at as well."""
    body = core_problem(error)
    if isinstance(error, BindingError) and error.kind == "invalid_binding" and error.location:
        # Over HTTP the value sits in the body (its `bindings`, or a sweep's `points`): point
        # at it as a validation does.
        body["errors"] = [
            {"pointer": f"{error.location}/{_escaped(name)}", "detail": error.message}
            for name in error.variables
        ]
    return problem_response(body)


def budget_problem(error: BudgetExceeded) -> Response:
    """Work stopped by its time budget; a 503 (the request's own budget) says when to retry."""
    body = core_problem(error)
    retry = {"Retry-After": retry_after(error.seconds)} if body["status"] == 503 else None
    return problem_response(body, retry)


def http_problem(error: HTTPException) -> Response:
    """The problem for an HTTP error raised by Flask, Werkzeug or webargs."""
    code = error.code or 500
    kind = HTTP_KINDS.get(code)
    if kind is None:  # a status without a kind of its own: RFC 9457's generic type
        body = {
            "type": "about:blank",
            "title": HTTPStatus(code).phrase,
            "status": code,
            "detail": error.description or HTTPStatus(code).description,
        }
        return problem_response(body)
    if kind == "internal-error":
        return unexpected(error.original_exception or error)  # type: ignore[attr-defined]
    if kind == "not-found":
        return problem_response(
            problem_body(
                kind,
                _("nothing is at {path}; the API is described at /docs", path=request.path),
            )
        )
    if kind == "method-not-allowed":
        allowed = ", ".join(sorted(getattr(error, "valid_methods", None) or ()))
        refusal = _(
            "{method} is not allowed on {path}; use {allowed}",
            method=request.method,
            path=request.path,
            allowed=allowed,
        )
        return problem_response(problem_body(kind, refusal), {"Allow": allowed})
    if kind == "body-too-large":
        limit = current_app.config["MAX_CONTENT_LENGTH"]
        detail = _("the request body is larger than the {limit} bytes accepted", limit=limit)
        return problem_response(problem_body(kind, detail, limit="max_body_bytes", maximum=limit))
    messages = (getattr(error, "data", None) or {}).get("messages")
    if kind == "validation-error" and messages:
        errors = [e for location in messages.values() for e in _pointers(location, "")]
        # the body as a whole (not an object) has the empty pointer: named in words
        pointer, first = errors[0]["pointer"] or _("the request body"), errors[0]["detail"]
        detail = (
            _n(
                "{pointer}: {detail} (and {count} more)",
                "{pointer}: {detail} (and {count} more)",
                len(errors) - 1,
                pointer=pointer,
                detail=first,
            )
            if len(errors) > 1
            else _("{pointer}: {detail}", pointer=pointer, detail=first)
        )
        return problem_response(problem_body(kind, detail, errors=errors))
    return problem_response(problem_body(kind, error.description or HTTPStatus(code).phrase))


def _pointers(messages: Any, pointer: str) -> list[dict[str, str]]:
    """marshmallow's nested error messages as a flat list of RFC 6901 pointers."""
    if isinstance(messages, str):
        return [{"pointer": pointer, "detail": language.schema_sentence(messages)}]
    if isinstance(messages, list):
        return [e for message in messages for e in _pointers(message, pointer)]
    errors = []
    for key, nested in messages.items():
        # `_schema` holds errors about the object itself rather than one of its members.
        errors += _pointers(nested, pointer if key == "_schema" else f"{pointer}/{_escaped(key)}")
    return errors


def _escaped(key: object) -> str:
    """A member name as one reference token of a JSON pointer (RFC 6901)."""
    return str(key).replace("~", "~0").replace("/", "~1")


def unexpected(error: BaseException) -> Response:
    """A generic problem for a failure of the service itself, logged with the request id."""
    request_id = request.request_id  # type: ignore[attr-defined]
    LOGGER.error(
        "unhandled %s while serving %s %s",
        type(error).__name__,
        request.method,
        request.path,
        exc_info=error,
        extra={"request_id": request_id, "method": request.method, "path": request.path},
    )
    return problem_response(
        problem_body(
            "internal-error",
            _(
                "the service failed unexpectedly; the request id {request_id} identifies the "
                "failure in its logs",
                request_id=request_id,
            ),
        )
    )


def _examples(status: int) -> dict[str, Any]:
    samples = {
        kind: problem_body(kind, detail, **extensions)
        for kind, (detail, extensions) in _SAMPLES.items()
        if KINDS[kind][0] == status
    }
    if status == HTTPStatus.UNPROCESSABLE_ENTITY:
        samples.update({kind: core_problem(refusal(*sample)) for kind, sample in REFUSED.items()})
    # The spec is written in English, the source language, with plain strings for YAML.
    english = localized(samples, DEFAULT_LOCALE)
    return {kind: {"summary": body["title"], "value": body} for kind, body in english.items()}


# What a status means wherever it is answered, when its phrase alone would not say.
_DESCRIPTIONS = {
    HTTPStatus.SERVICE_UNAVAILABLE: (
        "Not now: the request ran past its time budget (`request-too-expensive`), or it is heavy "
        "(a large body, or a graph drawn as SVG) and every slot for heavy requests is taken "
        "(`service-busy`); a graph drawn as SVG may also take Graphviz too long "
        "(`drawing-too-slow`). `Retry-After` says when to send it "
        "again."
    ),
}


class BoundedOperations(BasePlugin):
    """Documents on every operation the problems of the request's bounds: the app runs every
    view within them (`Service.dispatch_request`, service/api/costs.py), so none may omit them."""

    def operation_helper(
        self, path: str | None = None, operations: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        for status in sorted({KINDS[kind][0] for kind in REFUSALS}):
            for operation in (operations or {}).values():
                operation.setdefault("responses", {})[str(status)] = HTTPStatus(status).name
        # Every operation answers in the language asked for (service/api/language.py).
        for operation in (operations or {}).values():
            operation.setdefault("parameters", []).append(LANGUAGE_HEADER)


class ProblemApi(Api):
    """flask-smorest's `Api`, answering and documenting every error as a problem."""

    ERROR_SCHEMA = ProblemSchema

    def _init_spec(self, *args: Any, **kwargs: Any) -> None:
        plugins = [*(kwargs.pop("extra_plugins", None) or ()), BoundedOperations()]
        super()._init_spec(*args, extra_plugins=plugins, **kwargs)
        self.ma_plugin.converter.add_attribute_function(bindings_property)

    def _openapi_json(self) -> Response:
        # flask-smorest would serve the spec as built; this one states the limits in force.
        return Response(json.dumps(served_spec(current_app), indent=2), mimetype="application/json")

    def handle_http_exception(self, error: HTTPException) -> Response:
        return http_problem(error)

    def _register_error_handlers(self) -> None:
        super()._register_error_handlers()  # every HTTPException, to `handle_http_exception`
        self._app.register_error_handler(
            Problem,
            lambda e: problem_response(problem_body(e.kind, e.detail, **e.extensions), e.headers),
        )
        self._app.register_error_handler(BudgetExceeded, budget_problem)
        self._app.register_error_handler(AutogradError, core_refusal)
        self._app.register_error_handler(Exception, unexpected)

    def _register_pagination_header(self) -> None:
        pass  # no resource is paginated: leave flask-smorest's pagination schema out of the spec

    def _register_responses(self) -> None:
        # flask-smorest documents its errors as application/json with its own schema; ours are
        # problems, so this replaces its lazily registered responses with problem responses.
        self.spec.components.header(
            REQUEST_ID_HEADER,
            {
                "description": "The client's X-Request-ID if it was a token of at most 128 "
                "characters from [A-Za-z0-9._-], else one made for the request; the logs carry it.",
                "schema": {"type": "string"},
            },
        )
        self.spec.components.header(
            CONTENT_LANGUAGE_HEADER,
            {
                "description": "The language of the response's sentences (`en`, `ru` or `et`).",
                "schema": {"type": "string", "enum": list(LOCALES)},
            },
        )
        self.spec.components.parameter(
            LANGUAGE_HEADER,
            "header",
            {
                "description": "The languages the client reads, best first (RFC 9110): the "
                "sentences of the response (problems' titles and details, feedback, warnings, "
                "plots) are in the first of English, Russian and Estonian it names, else English.",
                "required": False,
                "schema": {"type": "string"},
            },
        )
        for status in (s for s in HTTPStatus if s >= HTTPStatus.BAD_REQUEST):
            self.spec.components.response(status.name, self._problem_response(status), lazy=True)
        default = self._problem_response(HTTPStatus.INTERNAL_SERVER_ERROR)
        default["description"] = "Any other problem, such as a failure of the service (500)"
        self.spec.components.response(self.DEFAULT_ERROR_RESPONSE_NAME, default, lazy=True)

    def _problem_response(self, status: HTTPStatus) -> dict[str, Any]:
        headers: dict[str, Any] = dict(RESPONSE_HEADERS)
        if status == HTTPStatus.METHOD_NOT_ALLOWED:
            headers["Allow"] = {
                "description": "The methods the resource accepts.",
                "schema": {"type": "string"},
            }
        if status == HTTPStatus.UNSUPPORTED_MEDIA_TYPE:
            headers["Accept-Encoding"] = {
                "description": "The content codings a body may have: `identity`, none.",
                "schema": {"type": "string"},
            }
        if status == HTTPStatus.SERVICE_UNAVAILABLE:
            headers["Retry-After"] = {
                "description": "Seconds after which the request may be sent again.",
                "schema": {"type": "integer"},
            }
        content: dict[str, Any] = {"schema": ProblemSchema}
        if examples := _examples(status):
            content["examples"] = examples
        return {
            "description": _DESCRIPTIONS.get(status, status.phrase),
            "headers": headers,
            "content": {PROBLEM_MIMETYPE: content},
        }


def documents_problems(blp: Blueprint, *statuses: int) -> Callable[[View], View]:
    """Documents the problems a view can answer with, besides the 422 of its arguments and the
    503 of the request's bounds, which every operation documents (`BoundedOperations`)."""
    # One `doc` naming the registered responses, rather than an `alt_response` per status: each
    # of those would wrap the view once more, at a cost on every request.
    document: Callable[[View], View] = blp.doc(
        responses={str(status): HTTPStatus(status).name for status in statuses}
    )
    return document
