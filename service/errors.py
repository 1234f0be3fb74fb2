"""Every way an expression, its bindings or its evaluation can be refused, as typed exceptions."""

from __future__ import annotations

import re
from typing import Any, Self

from service.i18n import _

Span = tuple[int, int]


class AutogradError(Exception):
    """A refusal a client can act on: a machine-readable `kind` and a sentence for a student."""

    kind: str = "error"

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message}


_LONE_CARRIAGE_RETURN = re.compile(r"\r(?!\n)")


def line_feeds(text: str) -> str:
    """`text` with each lone carriage return (an old Mac line end, which Python reads as a line
    break) made a line feed: one character for another, so every position stays where it is."""
    return _LONE_CARRIAGE_RETURN.sub("\n", text) if "\r" in text else text


def line_column(text: str, position: int) -> tuple[int, int]:
    """The 1-based line and column of a character position in `text`."""
    text = line_feeds(text)
    return text.count("\n", 0, position) + 1, position - (text.rfind("\n", 0, position) + 1) + 1


class Located:
    """A refusal with a place in the text: its span, and the line and column where it starts."""

    span: Span | None
    line: int | None = None
    column: int | None = None

    def at(self, text: str) -> Self:
        """This error with the line and column of its span in `text` filled in."""
        if self.span is not None:
            self.line, self.column = line_column(text, self.span[0])
        return self

    def position(self) -> dict[str, Any]:
        return {"line": self.line, "column": self.column}


class ExpressionError(Located, AutogradError):
    """The text is not an expression of our language; `span` is the `[start, end)` at fault."""

    span: Span  # always known here, unlike on every `Located`

    def __init__(self, kind: str, message: str, span: Span) -> None:
        super().__init__(kind, message)
        self.span = span

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "span": list(self.span), **self.position()}


class LimitExceeded(ExpressionError):
    """The expression is well formed but larger than this service is configured to take."""

    def __init__(self, kind: str, message: str, span: Span, limit: str, maximum: float) -> None:
        super().__init__(kind, message, span)
        self.limit = limit
        self.maximum = maximum

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "limit": self.limit, "maximum": self.maximum}


class BindingError(Located, AutogradError):
    """The bindings do not fit the expression: unbound or unknown names, or non-numbers. An
    unbound input has a place in the text, its first use as `span`; the others have none."""

    def __init__(
        self,
        kind: str,
        message: str,
        variables: list[str],
        location: str | None = "/bindings",
        span: Span | None = None,
        limit: str | None = None,
        maximum: float | None = None,
    ) -> None:
        super().__init__(kind, message)
        self.variables = variables
        self.span = span
        # Too many bindings: the limit passed, named as /v1/operations names it, and its value,
        # as a `LimitExceeded` has them.
        self.limit = limit
        self.maximum = maximum
        # Over HTTP, the object of the request body whose keys the names are, as a JSON pointer;
        # None where they are not keys (a sweep's varied inputs).
        self.location = location

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "variables": list(self.variables)}


class AnswerError(AutogradError):
    """The answers to /v1/check name items the expression does not have, or one node twice: a
    fault of the client, not the learner. `items` are the answers' items at fault."""

    def __init__(self, message: str, items: list[str], kind: str = "unknown_answer_items") -> None:
        super().__init__(kind, message)
        self.items = items

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "items": list(self.items)}


class DomainError(Located, AutogradError, ArithmeticError):
    """A value or gradient that is not a finite real number.

    The engine raises it without knowing where in the text it is; the evaluator then fills in the
    graph `node` (None when a constant subexpression failed while folding) and the source `span`.
    """

    def __init__(
        self, kind: str, message: str, node: int | None = None, span: Span | None = None
    ) -> None:
        super().__init__(kind, message)
        self.node = node
        self.span = span

    def located(self, node: int | None, span: Span) -> DomainError:
        return DomainError(self.kind, self.message, node, span)

    def as_dict(self) -> dict[str, Any]:
        located = {"node": self.node, "span": list(self.span) if self.span else None}
        return {**super().as_dict(), **located, **self.position()}


class RequestTooLarge(AutogradError):
    """A sweep or a drawing asks for more work than this service is configured to do."""

    def __init__(self, kind: str, message: str, limit: str, maximum: float) -> None:
        super().__init__(kind, message)
        self.limit = limit
        self.maximum = maximum

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "limit": self.limit, "maximum": self.maximum}


class BudgetExceeded(AutogradError):
    """The work ran past its time budget and was stopped (see `service.budget`)."""

    def __init__(self, kind: str, seconds: float, message: str | None = None) -> None:
        """`message` says what the work was, where its kind has a sentence of its own."""
        if message is None:
            message = _(
                "the work took longer than its time budget of {seconds} s",
                seconds=format(seconds, "g"),
            )
        super().__init__(kind, message)
        self.seconds = seconds

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "budget_seconds": self.seconds}


# Every kind, with the class that raises it: the HTTP layer maps each to a problem type and status.
EXPRESSION_KINDS = (
    "empty_expression",
    "unexpected_token",
    "unexpected_end",
    "unbalanced_parenthesis",
    "unknown_function",
    "wrong_arity",
    "variable_exponent",
    "implicit_multiplication",
    "invalid_character",
    "unsupported_syntax",
    "function_name",
    "used_before_assignment",
)
LIMIT_KINDS = (
    "expression_too_long",
    "nesting_too_deep",
    "too_many_nodes",
    "identifier_too_long",
    "constant_too_large",
    "too_many_statements",
)
BINDING_KINDS = (
    "unbound_variables",
    "unknown_variables",
    "invalid_binding",
    "too_many_bindings",
    "unknown_output",
)
DOMAIN_KINDS = ("log_domain", "division_by_zero", "complex_result", "overflow", "non_finite")
SIZE_KINDS = ("too_many_points", "grid_too_large", "sweep_too_large", "graph_too_large_to_draw")
PICTURE_KINDS = ("graphviz_unavailable", "drawing_too_slow", "plot_out_of_range")
