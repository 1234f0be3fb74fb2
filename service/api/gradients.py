"""POST /v1/gradients: an expression's value, gradients, graph and backward schedule."""

from __future__ import annotations

from typing import Any

from flask import Response

from service.api import evaluator, language
from service.api.examples import (
    GRADIENTS_REQUEST,
    gradients_document,
    gradients_examples,
    request_examples,
)
from service.api.pictures import document_or_drawing, drawing_content
from service.api.problems import documents_problems
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.api.schemas import (
    EvaluationSchema,
    GradientsRequestSchema,
    SelectedEvaluationSchema,
)

blp = Blueprint(
    "gradients",
    __name__,
    url_prefix="/v1",
    description="Forward and backward passes through an expression's graph.",
)


@blp.route("/gradients", methods=["POST"])
# Schema instances, not classes: webargs would build a new schema for every request.
@blp.arguments(GradientsRequestSchema(), examples=request_examples(GRADIENTS_REQUEST))
# The whole evaluation, or the parts `fields` asks for.
@blp.response(
    200,
    {"anyOf": [EvaluationSchema, SelectedEvaluationSchema]},
    examples=gradients_examples(),
    headers=RESPONSE_HEADERS,
)
@blp.doc(responses={200: {"content": drawing_content(gradients_document())}})
@documents_problems(blp, 400, 413, 415, 429, 501)
def gradients(body: dict[str, Any]) -> Response:
    """Evaluate an expression and backpropagate through it

    Returns the expression's value, the gradient of the value with respect to every variable,
    the computation graph (every node with its value, gradient and local derivatives), the
    forward order, and the backward pass step by step: which node sends how much gradient to
    which child, and the child's gradient after each addition. With `(a + b) * c` at a=2, b=-3,
    c=10 the value is -10 and the gradients are a=10, b=10, c=-1. An expression the language
    does not accept, bindings that do not fit it, or a value that is not a finite real number is
    a 422 problem saying where. With `fields`, only the parts named are returned.
    """
    source = (body["expression"], body["bindings"], body["granularity"], body["output"])
    locale = language.current()
    if body["format"] == "json":  # the bytes straight from the evaluator, as sent most often
        document = evaluator().render(*source, body["selection"], locale)
        return Response(document, mimetype="application/json")
    return document_or_drawing(evaluator().evaluate(*source, locale), body["format"])
