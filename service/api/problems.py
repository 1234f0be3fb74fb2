"""Every error as an RFC 9457 problem: rendering, the app's handlers, the spec's responses."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any, TypeVar

from flask import Response, current_app, request
from flask_smorest import Api, Blueprint
from werkzeug.exceptions import HTTPException

from service.api import json_response
from service.api.costs import retry_after
from service.api.examples import REFUSED, refusal
from service.api.kinds import HTTP_KINDS, KINDS, Problem, slug, type_uri
from service.api.logs import LOGGER
from service.api.request import REQUEST_ID_HEADER, RESPONSE_HEADERS
from service.api.schemas import ProblemSchema
from service.errors import (
    AutogradError,
    BindingError,
    BudgetExceeded,
    DomainError,
    ExpressionError,
    LimitExceeded,
)

PROBLEM_MIMETYPE = "application/problem+json"
View = TypeVar("View", bound=Callable[..., Any])

# What the web layer's own problems look like, for the spec's examples.
_SAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "malformed-json": (
        "the request body is not valid JSON: Expecting ',' delimiter: line 1 column 28 (char 27)",
        {},
    ),
    "validation-error": (
        "/bindings/a: a must be bound to a finite number, not NaN",
        {
            "errors": [
                {"pointer": "/bindings/a", "detail": "a must be bound to a finite number, not NaN"}
            ]
        },
    ),
    "unsupported-media-type": (
        "the body must be JSON sent with Content-Type: application/json; this one is text/plain",
        {},
    ),
    "body-too-large": ("the request body is larger than the 1048576 bytes accepted", {}),
    "not-found": ("nothing is at /v1/gradient; the API is described at /docs", {}),
    "method-not-allowed": ("GET is not allowed on /v1/gradients; use OPTIONS, POST", {}),
    "request-too-expensive": ("the work took longer than its time budget of 5 s", {}),
    "service-busy": (
        "the service is busy with 2 other large requests; try again in 1 s or send a smaller one",
        {},
    ),
    "response-too-large": (
        "the response would be 20000000 bytes, more than the 16777216 this service sends; "
        "send a smaller expression",
        {"limit": "max_response_bytes", "maximum": 16777216},
    ),
    "internal-error": (
        "the service failed unexpectedly; the request id "
        "0b5e0c7b5f8e4f6c9d1a2b3c4d5e6f70 identifies the failure in its logs",
        {},
    ),
}


def problem_body(kind: str, detail: str, **extensions: Any) -> dict[str, Any]:
    status, title = KINDS[kind]
    return {
        "type": type_uri(kind),
        "title": title,
        "status": status,
        "detail": detail,
        **extensions,
    }


def problem_response(body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    response = json_response(body, body["status"], PROBLEM_MIMETYPE)
    response.headers.update(headers or {})
    return response


def core_problem(error: AutogradError) -> dict[str, Any]:
    """The problem for a refusal by the core, with every detail it knows about the fault."""
    extensions: dict[str, Any] = {}
    span = error.span if isinstance(error, ExpressionError | DomainError) else None
    if span is not None:
        extensions["position"] = {"start": span[0], "end": span[1]}
    if isinstance(error, LimitExceeded):
        extensions.update(limit=error.limit, maximum=error.maximum)
    if isinstance(error, BindingError):
        extensions["variables"] = list(error.variables)
    if isinstance(error, DomainError):
        extensions["node"] = error.node
    return problem_body(slug(error.kind), error.message, **extensions)


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
            problem_body(kind, f"nothing is at {request.path}; the API is described at /docs")
        )
    if kind == "method-not-allowed":
        allowed = ", ".join(sorted(getattr(error, "valid_methods", None) or ()))
        detail = f"{request.method} is not allowed on {request.path}; use {allowed}"
        return problem_response(problem_body(kind, detail), {"Allow": allowed})
    if kind == "body-too-large":
        limit = current_app.config["MAX_CONTENT_LENGTH"]
        return problem_response(
            problem_body(kind, f"the request body is larger than the {limit} bytes accepted")
        )
    messages = (getattr(error, "data", None) or {}).get("messages")
    if kind == "validation-error" and messages:
        errors = [e for location in messages.values() for e in _pointers(location, "")]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        detail = f"{errors[0]['pointer'] or '/'}: {errors[0]['detail']}{more}"
        return problem_response(problem_body(kind, detail, errors=errors))
    return problem_response(problem_body(kind, error.description or HTTPStatus(code).phrase))


def _pointers(messages: Any, pointer: str) -> list[dict[str, str]]:
    """marshmallow's nested error messages as a flat list of RFC 6901 pointers."""
    if isinstance(messages, str):
        return [{"pointer": pointer, "detail": messages}]
    if isinstance(messages, list):
        return [e for message in messages for e in _pointers(message, pointer)]
    errors = []
    for key, nested in messages.items():
        # `_schema` holds errors about the object itself rather than one of its members.
        escaped = str(key).replace("~", "~0").replace("/", "~1")
        errors += _pointers(nested, pointer if key == "_schema" else f"{pointer}/{escaped}")
    return errors


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
            f"the service failed unexpectedly; the request id {request_id} identifies the failure "
            "in its logs",
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
    return {kind: {"summary": body["title"], "value": body} for kind, body in samples.items()}


class ProblemApi(Api):
    """flask-smorest's `Api`, answering and documenting every error as a problem."""

    ERROR_SCHEMA = ProblemSchema

    def handle_http_exception(self, error: HTTPException) -> Response:  # type: ignore[override]
        return http_problem(error)

    def _register_error_handlers(self) -> None:
        super()._register_error_handlers()  # every HTTPException, to `handle_http_exception`
        self._app.register_error_handler(
            Problem,
            lambda e: problem_response(problem_body(e.kind, e.detail, **e.extensions), e.headers),
        )
        self._app.register_error_handler(BudgetExceeded, budget_problem)
        self._app.register_error_handler(AutogradError, lambda e: problem_response(core_problem(e)))
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
        if status == HTTPStatus.SERVICE_UNAVAILABLE:
            headers["Retry-After"] = {
                "description": "Seconds after which the request may be sent again.",
                "schema": {"type": "integer"},
            }
        content: dict[str, Any] = {"schema": ProblemSchema}
        if examples := _examples(status):
            content["examples"] = examples
        return {
            "description": status.phrase,
            "headers": headers,
            "content": {PROBLEM_MIMETYPE: content},
        }


def documents_problems(blp: Blueprint, *statuses: int) -> Callable[[View], View]:
    """Documents the problems a view can answer with, besides the 422 of its arguments."""
    # One `doc` naming the registered responses, rather than an `alt_response` per status: each
    # of those would wrap the view once more, at a cost on every request.
    return blp.doc(responses={str(status): HTTPStatus(status).name for status in statuses})
