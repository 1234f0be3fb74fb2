"""The table of problem kinds: every refusal the API answers with, its HTTP status and title."""

from __future__ import annotations

TYPE_BASE = "https://autograd-service.dev/problems/"

# Keyed by the kind as it appears in the problem `type` URI: the core's kind with dashes.
KINDS: dict[str, tuple[int, str]] = {
    # The expression is not one of our language (core: EXPRESSION_KINDS).
    "empty-expression": (422, "Empty expression"),
    "unexpected-token": (422, "Unexpected token"),
    "unexpected-end": (422, "Unexpected end of expression"),
    "unbalanced-parenthesis": (422, "Unbalanced parenthesis"),
    "unknown-function": (422, "Unknown function"),
    "wrong-arity": (422, "Wrong number of arguments"),
    "variable-exponent": (422, "Variable exponent"),
    "implicit-multiplication": (422, "Implicit multiplication"),
    "invalid-character": (422, "Invalid character"),
    "unsupported-syntax": (422, "Unsupported syntax"),
    # Well formed, but larger than the configured limits (core: LIMIT_KINDS).
    "expression-too-long": (422, "Expression too long"),
    "nesting-too-deep": (422, "Expression nested too deeply"),
    "too-many-nodes": (422, "Too many graph nodes"),
    "identifier-too-long": (422, "Identifier too long"),
    "constant-too-large": (422, "Constant too large"),
    # The bindings do not fit the expression (core: BINDING_KINDS).
    "unbound-variables": (422, "Unbound variables"),
    "unknown-variables": (422, "Unknown variables"),
    "invalid-binding": (422, "Invalid binding"),
    "too-many-bindings": (422, "Too many bindings"),
    # A value or gradient is not a finite real number (core: DOMAIN_KINDS).
    "log-domain": (422, "Logarithm of a non-positive number"),
    "division-by-zero": (422, "Division by zero"),
    "complex-result": (422, "Complex result"),
    "overflow": (422, "Overflow"),
    "non-finite": (422, "Non-finite gradient"),
    # The request itself, before the core sees it.
    "malformed-json": (400, "Malformed JSON"),
    "bad-request": (400, "Bad request"),
    "validation-error": (422, "Invalid request"),
    "unsupported-media-type": (415, "Unsupported media type"),
    "body-too-large": (413, "Request body too large"),
    "not-found": (404, "Not found"),
    "method-not-allowed": (405, "Method not allowed"),
    "internal-error": (500, "Internal server error"),
    # What one request may cost (service/api/costs.py).
    "request-too-expensive": (503, "Request too expensive"),
    "service-busy": (503, "Service busy"),
    "response-too-large": (422, "Response too large"),
}

# Answered by the proxy in front of the service (deploy/nginx/errors.conf), never by the app itself;
# the proxy's 400, 413, 500 and 503 use the app's kinds above.
PROXY_KINDS: dict[str, tuple[int, str]] = {
    "request-timeout": (408, "Request timeout"),
    "too-many-requests": (429, "Too many requests"),
    "bad-gateway": (502, "Bad gateway"),
    "gateway-timeout": (504, "Gateway timeout"),
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
