"""The examples in the spec, computed by the core when the spec is built, so they stay true."""

from __future__ import annotations

import json
from typing import Any

from service.errors import AutogradError
from service.evaluator import Evaluator

# The lesson: d/da, d/db and d/dc of (a + b) * c at a=2, b=-3, c=10 are 10, 10 and -1.
LESSON_EXPRESSION = "(a + b) * c"
LESSON_BINDINGS = {"a": 2, "b": -3, "c": 10}
GRADIENTS_REQUEST = {"expression": LESSON_EXPRESSION, "bindings": LESSON_BINDINGS}
GRAPH_REQUEST = {"expression": LESSON_EXPRESSION}
DERIVATIVES_REQUEST = {"expression": LESSON_EXPRESSION, "bindings": LESSON_BINDINGS}

# Requests the core refuses, one of each family, shown as examples of a 422 problem.
REFUSED: dict[str, tuple[str, dict[str, float]]] = {
    "unbalanced-parenthesis": ("(a + b * c", {"a": 2, "b": -3, "c": 10}),
    "unbound-variables": (LESSON_EXPRESSION, {"a": 2, "b": -3}),
    "log-domain": ("log(a + b) * c", {"a": 2, "b": -3, "c": 10}),
}


# The lesson's shipping cost as a program: every input declared, so no bindings are needed.
SHIPPING_PROGRAM = """\
base_fee = Value(50.0)          # base delivery fee
weight = Value(3.0)             # parcel weight, kg
distance = Value(12.0)          # distance, km
discount = Value(-8.0)          # seasonal discount
weight_fee = weight * 15.0
distance_fee = distance * 2.0
raw_cost = base_fee + weight_fee + distance_fee + discount
cost = raw_cost.relu()
"""
PROGRAM_REQUEST = {"expression": SHIPPING_PROGRAM}
# A program that reads one input from the bindings, and names its output.
PROGRAM_WITH_BINDINGS_REQUEST = {
    "expression": "x = Value(2.0)\nz = x * y + 1\nq = z.relu() + z * x\nq.backward()",
    "bindings": {"y": -3.0},
}


def _plain(document: dict[str, Any]) -> dict[str, Any]:
    """The document as plain JSON values: its sentences are translatable `Message`s."""
    plain: dict[str, Any] = json.loads(json.dumps(document))
    return plain


def request_examples(lesson: dict[str, Any]) -> dict[str, Any]:
    """The named request examples of an endpoint: the lesson first, then programs."""
    examples = {
        "lesson": {"summary": "An expression", "value": lesson},
        "program": {"summary": "A program with declared inputs", "value": PROGRAM_REQUEST},
    }
    if "bindings" in lesson:
        examples["program-with-bindings"] = {
            "summary": "A program with a bound input and backward()",
            "value": PROGRAM_WITH_BINDINGS_REQUEST,
        }
    else:
        examples["program-with-output"] = {
            "summary": "A program whose output is named by the request",
            "value": {**PROGRAM_REQUEST, "output": "raw_cost"},
        }
    return examples


def program_examples(lesson: dict[str, Any], program: dict[str, Any]) -> dict[str, Any]:
    """An endpoint's request examples: the lesson's expression, then the shipping program with
    what else the endpoint asks for (`program`, whose `expression` is the program's text)."""
    return {
        "lesson": {"summary": "An expression", "value": lesson},
        "program": {
            "summary": "A program with declared inputs",
            "value": {"expression": SHIPPING_PROGRAM, **program},
        },
    }


def gradients_examples() -> dict[str, Any]:
    return {
        "lesson": {"summary": "An expression", "value": gradients_document()},
        "program": {
            "summary": "A program with declared inputs",
            "value": _plain(Evaluator().evaluate(SHIPPING_PROGRAM)),
        },
    }


def graph_examples() -> dict[str, Any]:
    return {
        "lesson": {"summary": "An expression", "value": graph_document()},
        "program": {
            "summary": "A program with declared inputs",
            "value": _plain(Evaluator().structure(SHIPPING_PROGRAM)),
        },
    }


def gradients_document() -> dict[str, Any]:
    # The API reads every binding as a float, as the command line does.
    bindings = {name: float(value) for name, value in LESSON_BINDINGS.items()}
    return Evaluator().evaluate(LESSON_EXPRESSION, bindings)


# The lesson's derivatives three ways. Written out rather than computed when the spec is built:
# computing them needs sympy, which the service loads only when a derivative is asked for. A test
# checks that the service answers exactly this.
DERIVATIVES_DOCUMENT: dict[str, Any] = {
    "expression": "(a + b) * c",
    "output": None,
    "latex": "c \\left(a + b\\right)",
    "intermediates": [],
    "value": -10.0,
    "derivatives": [
        {
            "variable": "a",
            "reverse_mode": 10.0,
            "symbolic": {"text": "c", "latex": "c", "value": 10.0, "operations": 0},
            "numeric": {
                "h": 1.2110908904627848e-05,
                "central": 10.000000000073337,
                "forward": 10.000000000073337,
                "central_error": 7.333689211463934e-11,
                "forward_error": 7.333689211463934e-11,
            },
        },
        {
            "variable": "b",
            "reverse_mode": 10.0,
            "symbolic": {"text": "c", "latex": "c", "value": 10.0, "operations": 0},
            "numeric": {
                "h": 1.8166363357163817e-05,
                "central": 10.00000000004889,
                "forward": 10.00000000004889,
                "central_error": 4.8890669290813094e-11,
                "forward_error": 4.8890669290813094e-11,
            },
        },
        {
            "variable": "c",
            "reverse_mode": -1.0,
            "symbolic": {"text": "a + b", "latex": "a + b", "value": -1.0, "operations": 1},
            "numeric": {
                "h": 6.055454452358333e-05,
                "central": -1.0,
                "forward": -1.0,
                "central_error": 0.0,
                "forward_error": 0.0,
            },
        },
    ],
    "cost": {
        "reverse_mode": {"nodes": 5, "forward_steps": 2, "backward_steps": 4},
        "numeric": {"central_evaluations": 6, "forward_evaluations": 4},
        "symbolic": {"expression_operations": 2, "derivative_operations": 1},
    },
    "agree": True,
    "warnings": [],
}


def graph_document() -> dict[str, Any]:
    return Evaluator().structure(LESSON_EXPRESSION)


def refusal(expression: str, bindings: dict[str, float]) -> AutogradError:
    """The core's refusal of one of the `REFUSED` requests."""
    try:
        Evaluator().evaluate(expression, bindings)
    except AutogradError as error:
        return error
    raise ValueError(f"{expression!r} with {bindings} is not refused")  # pragma: no cover


# A learner's answers to the lesson's exercise: one right, one with the sign wrong, one missing.
# (Numbers only: a symbolic answer would make building the spec start up sympy's simplifier.)
CHECK_REQUEST: dict[str, Any] = {
    "expression": LESSON_EXPRESSION,
    "bindings": LESSON_BINDINGS,
    "answers": {"gradients": {"a": 10, "b": -10}},
}
EXERCISE_REQUEST: dict[str, Any] = {"seed": 42, "level": 1, "kind": "gradients"}


def check_document() -> dict[str, Any]:
    from service.check import check
    from service.i18n import DEFAULT_LOCALE, localized

    request = CHECK_REQUEST
    document = check(Evaluator(), request["expression"], LESSON_BINDINGS, request["answers"])
    localized_document: dict[str, Any] = localized(document, DEFAULT_LOCALE)
    return localized_document


def exercise_document() -> dict[str, Any]:
    from service.exercises import exercise
    from service.i18n import DEFAULT_LOCALE, localized

    document: dict[str, Any] = localized(exercise(Evaluator(), **EXERCISE_REQUEST), DEFAULT_LOCALE)
    return document
