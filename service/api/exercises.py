"""POST /v1/exercises: a reproducible exercise from a seed, ready to show and to check."""

from __future__ import annotations

from typing import Any

from flask import Response

from service.api import evaluator
from service.api.examples import EXERCISE_REQUEST, exercise_document
from service.api.language import localized_response
from service.api.problems import documents_problems
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.api.schemas import ExerciseRequestSchema, ExerciseSchema
from service.exercises import exercise

blp = Blueprint(
    "exercises",
    __name__,
    url_prefix="/v1",
    description="Exercises generated from a seed, the same on every replica.",
)


@blp.route("/exercises", methods=["POST"])
@blp.arguments(ExerciseRequestSchema(), example=EXERCISE_REQUEST)
@blp.response(200, ExerciseSchema, example=exercise_document(), headers=RESPONSE_HEADERS)
@documents_problems(blp, 400, 413, 415)
def exercises(body: dict[str, Any]) -> Response:
    """Generate an exercise from a seed

    The same `seed`, `level`, `kind` and `generator` give the same exercise on every replica and
    in every release of API v1 (`generator` names the rules: 1 by default, 2 adds small
    programs, 3 relus in `derivative` exercises). The exercise has an expression, friendly
    bindings (small integers or halves), instructions and questions in the language
    `Accept-Language` asks for, and the `answer_template` that /v1/check expects. The right
    `answers` are included only with `reveal: true`.
    """
    return localized_response(
        exercise(
            evaluator(),
            body["seed"],
            body["level"],
            body["kind"],
            body["reveal"],
            body["generator"],
        )
    )
