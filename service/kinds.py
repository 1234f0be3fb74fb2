"""The table of problem kinds, and each refusal as an RFC 9457 problem document.

Every refusal the API answers with, its HTTP status and title; the command line prints the same
documents, so this module imports nothing of the web framework.
"""

from __future__ import annotations

from typing import Any

from service.errors import (
    AnswerError,
    AutogradError,
    BindingError,
    DomainError,
    LimitExceeded,
    Located,
    RequestTooLarge,
)
from service.i18n import Message, _

TYPE_BASE = "https://autograd-service.dev/problems/"

# Keyed by the kind as it appears in the problem `type` URI: the core's kind with dashes.
KINDS: dict[str, tuple[int, Message]] = {
    # The expression is not one of our language (core: EXPRESSION_KINDS).
    "empty-expression": (422, _("Empty expression")),
    "unexpected-token": (422, _("Unexpected token")),
    "unexpected-end": (422, _("Unexpected end of expression")),
    "unbalanced-parenthesis": (422, _("Unbalanced parenthesis")),
    "unknown-function": (422, _("Unknown function")),
    "wrong-arity": (422, _("Wrong number of arguments")),
    "variable-exponent": (422, _("Variable exponent")),
    "implicit-multiplication": (422, _("Implicit multiplication")),
    "invalid-character": (422, _("Invalid character")),
    "unsupported-syntax": (422, _("Unsupported syntax")),
    "function-name": (422, _("Function name used as a variable")),
    "used-before-assignment": (422, _("Name used before assignment")),
    # Well formed, but larger than the configured limits (core: LIMIT_KINDS).
    "expression-too-long": (422, _("Expression too long")),
    "nesting-too-deep": (422, _("Expression nested too deeply")),
    "too-many-nodes": (422, _("Too many graph nodes")),
    "identifier-too-long": (422, _("Identifier too long")),
    "constant-too-large": (422, _("Constant too large")),
    "too-many-statements": (422, _("Too many statements")),
    # The bindings do not fit the expression (core: BINDING_KINDS).
    "unbound-variables": (422, _("Unbound variables")),
    "unknown-variables": (422, _("Unknown variables")),
    "invalid-binding": (422, _("Invalid binding")),
    "too-many-bindings": (422, _("Too many bindings")),
    "unknown-output": (422, _("Unknown output")),
    # A value or gradient is not a finite real number (core: DOMAIN_KINDS).
    "log-domain": (422, _("Logarithm of a non-positive number")),
    "division-by-zero": (422, _("Division by zero")),
    "complex-result": (422, _("Complex result")),
    "overflow": (422, _("Overflow")),
    "non-finite": (422, _("Non-finite gradient")),
    # Answers sent to /v1/check that the expression has no item for, that answer one node twice,
    # or too costly to judge.
    "unknown-answer-items": (422, _("Unknown answer items")),
    "duplicate-answer-items": (422, _("One node answered twice")),
    "check-too-expensive": (422, _("Answers too expensive to check")),
    # A sweep or a drawing larger than configured (core: SIZE_KINDS).
    "too-many-points": (422, _("Too many sweep points")),
    "grid-too-large": (422, _("Sweep grid too large")),
    "sweep-too-large": (422, _("Sweep too large")),
    "graph-too-large-to-draw": (422, _("Graph too large to draw")),
    # Pictures: Graphviz missing or too slow, numbers past a plot's axes (core: PICTURE_KINDS),
    # plots over their rate.
    "graphviz-unavailable": (501, _("Graphviz not installed")),
    "drawing-too-slow": (503, _("Drawing took too long")),
    "plot-out-of-range": (422, _("Numbers too large to plot")),
    "too-many-pictures": (429, _("Too many pictures")),
    # Symbolic differentiation past its bounds (core: service.derivatives).
    "symbolic-too-large": (422, _("Too large for symbolic differentiation")),
    "symbolic-too-expensive": (422, _("Symbolic differentiation took too long")),
    # The request itself, before the core sees it.
    "malformed-json": (400, _("Malformed JSON")),
    "bad-request": (400, _("Bad request")),
    "validation-error": (422, _("Invalid request")),
    "unsupported-media-type": (415, _("Unsupported media type")),
    "body-too-large": (413, _("Request body too large")),
    "not-found": (404, _("Not found")),
    "method-not-allowed": (405, _("Method not allowed")),
    "internal-error": (500, _("Internal server error")),
    # What one request may cost (service/api/costs.py).
    "request-too-expensive": (503, _("Request too expensive")),
    "service-busy": (503, _("Service busy")),
    # A client too slow to send its request, answered by the server in front of the app
    # (gunicorn.conf.py, deploy/nginx/errors.conf): the app itself is given whole requests.
    "request-timeout": (408, _("Request timeout")),
    "response-too-large": (422, _("Response too large")),
}

# Answered by the proxy in front of the service (deploy/nginx/errors.conf), never by the app itself;
# the proxy's 400, 408, 413, 500 and 503 use the kinds above.
PROXY_KINDS: dict[str, tuple[int, Message]] = {
    "too-many-requests": (429, _("Too many requests")),
    "bad-gateway": (502, _("Bad gateway")),
    "gateway-timeout": (504, _("Gateway timeout")),
}

# The kind of each HTTP error Flask, Werkzeug or webargs raise; other statuses are `about:blank`.
HTTP_KINDS: dict[int, str] = {
    400: "bad-request",
    404: "not-found",
    405: "method-not-allowed",
    413: "body-too-large",
    415: "unsupported-media-type",
    422: "validation-error",
    500: "internal-error",
}


def slug(kind: str) -> str:
    """The table's name for a core kind: `unbound_variables` is `unbound-variables`."""
    return kind.replace("_", "-")


def type_uri(kind: str) -> str:
    return TYPE_BASE + kind


class Problem(Exception):
    """A refusal by the web layer itself, rendered as a problem of `kind` from the table."""

    def __init__(
        self, kind: str, detail: str, *, headers: dict[str, str] | None = None, **extensions: object
    ) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.headers = headers or {}  # such as `Retry-After` on a 503
        self.extensions = extensions


def problem_body(kind: str, detail: str, **extensions: Any) -> dict[str, Any]:
    """The problem document of `kind` from the table, with its `detail` and any extensions."""
    status, title = KINDS[kind]
    return {
        "type": type_uri(kind),
        "title": title,
        "status": status,
        "detail": detail,
        **extensions,
    }


def core_problem(error: AutogradError) -> dict[str, Any]:
    """The problem for a refusal by the core, with every detail it knows about the fault."""
    extensions: dict[str, Any] = {}
    span = error.span if isinstance(error, Located) else None
    if span is not None:
        extensions["position"] = {"start": span[0], "end": span[1]}
        line, column = getattr(error, "line", None), getattr(error, "column", None)
        if line is not None:
            extensions["position"].update(line=line, column=column)
    if isinstance(error, LimitExceeded | RequestTooLarge | BindingError) and error.limit:
        extensions.update(limit=error.limit, maximum=error.maximum)
    if isinstance(error, BindingError):
        extensions["variables"] = list(error.variables)
    if isinstance(error, DomainError):
        extensions["node"] = error.node
    if isinstance(error, AnswerError):
        extensions["items"] = list(error.items)
    return problem_body(slug(error.kind), error.message, **extensions)
