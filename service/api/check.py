"""POST /v1/check: judge a learner's answers about an expression, with feedback on each."""

from __future__ import annotations

from typing import Any

from flask import Response, current_app

from service.api import evaluator, language
from service.api.config import symbolic_limits
from service.api.examples import CHECK_REQUEST, check_document, program_examples
from service.api.language import localized_response
from service.api.problems import documents_problems
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.api.schemas import CheckRequestSchema, CheckResultSchema
from service.check import check

blp = Blueprint(
    "check",
    __name__,
    url_prefix="/v1",
    description="Checking a learner's answers, with feedback naming the likely mistake.",
)


@blp.route("/check", methods=["POST"])
@blp.arguments(
    CheckRequestSchema(),
    examples=program_examples(
        CHECK_REQUEST,
        {"answers": {"gradients": {"weight": 15, "distance": 2}, "nodes": {"raw_cost": 1}}},
    ),
)
@blp.response(200, CheckResultSchema, example=check_document(), headers=RESPONSE_HEADERS)
@documents_problems(blp, 400, 413, 415)
def check_answers(body: dict[str, Any]) -> Response:
    """Check a learner's answers

    `answers` may hold the output's `value`, `gradients` by variable, `nodes` by graph node id
    or by name (the gradient reaching it) and `derivatives` by variable (expression text, or a
    number for a constant, judged by mathematical equivalence). Each answer is one expression:
    a program (a second statement, an assignment, a declaration) is `unparsable`. A name a
    program reassigns means its last assignment, as in Python: the nodes its earlier
    assignments made are answered, and listed, by their ids.
    Every item gets a verdict (`correct`, `incorrect`, `unanswered`) and feedback: a code naming
    the likely mistake (`wrong_sign`, `one_path_only`, `wrong_local_derivative`, `dead_relu`,
    `outside_tolerance`, `not_a_number`, `unparsable`, ...) and a sentence in the language
    `Accept-Language` asks for (en, ru, et). `score` is the fraction of answered items that are
    correct; `expected` is included only with `reveal`.
    """
    return localized_response(
        check(
            evaluator(),
            body["expression"],
            body["bindings"],
            body["answers"],
            body["tolerance"],
            body["reveal"],
            body["output"],
            symbolic_limits(current_app.config).seconds,
            language.current(),
        )
    )
