"""POST /v1/derivatives: each derivative three ways, reverse mode, symbolic and numeric."""

from __future__ import annotations

from typing import Any, cast

from flask import Flask, Response, current_app
from flask.blueprints import BlueprintSetupState

from service.api import evaluator, json_response, language
from service.api.config import symbolic_limits
from service.api.examples import DERIVATIVES_DOCUMENT, DERIVATIVES_REQUEST, program_examples
from service.api.problems import documents_problems
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.api.schemas import DerivativesRequestSchema, DerivativesSchema
from service.derivatives import Differentiator

EXTENSION = "autograd.derivatives"  # the app's `extensions` key for its `Differentiator`

blp = Blueprint(
    "derivatives",
    __name__,
    url_prefix="/v1",
    description="The three ways to a derivative, side by side.",
)


@blp.record_once
def _configure(state: BlueprintSetupState) -> None:
    # The app's own evaluator (its limits and cache) under the configured symbolic bounds.
    app = cast(Flask, state.app)  # typed as the sansio base; registration hands a Flask app
    with app.app_context():
        app.extensions[EXTENSION] = Differentiator(evaluator(), symbolic_limits(app.config))


def differentiator() -> Differentiator:
    return cast(Differentiator, current_app.extensions[EXTENSION])


@blp.route("/derivatives", methods=["POST"])
@blp.arguments(
    DerivativesRequestSchema(),
    examples=program_examples(DERIVATIVES_REQUEST, {"variables": ["weight", "distance"]}),
)
@blp.response(200, DerivativesSchema, example=DERIVATIVES_DOCUMENT, headers=RESPONSE_HEADERS)
@documents_problems(blp, 400, 413, 415)
def derivatives(body: dict[str, Any]) -> Response:
    """Differentiate an expression three ways: reverse mode, symbolic and numeric

    For each variable: the engine's gradient (reverse mode: one backward pass gives them all);
    sympy's derivative formula, as text and LaTeX, with its exact value at the bindings and its
    size; and the central and forward difference quotients with their step and their errors
    against the exact value. `cost` puts the three ways' work side by side, and `agree` says
    whether reverse mode matched the exact value everywhere. Symbolic work is bounded: an
    expression with more operators than the configured limit (100 by default) is a 422
    `symbolic-too-large` problem, and symbolic work that outlasts its time budget (2 s by
    default) a 422 `symbolic-too-expensive` one. `warnings` names a program's statements
    the output does not depend on, as on /v1/gradients.
    """
    return json_response(differentiator().differentiate(**body, locale=language.current()))
