"""POST /v1/check and service.check: verdicts, scores, tolerance, reveal, the likely mistake named,
symbolic answers judged by equivalence, and hostile answers refused as feedback."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from conftest import at
from flask.testing import FlaskClient

from service.check import CODES, AnswerError, Tolerance, check
from service.errors import AutogradError, RequestTooLarge
from service.evaluator import Evaluator
from service.limits import Limits

EVALUATOR = Evaluator()
LESSON = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}


def feedback(expression: str, bindings: dict[str, float], answers: dict[str, Any], item: str):
    results = check(EVALUATOR, expression, bindings, answers, reveal=True)["results"]
    return next(result for result in results if result["item"] == item)


# -- numeric answers: the typical mistakes and their codes ---------------------------------------

MISTAKES = [
    # (expression, bindings, item, answer, code)
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", 10, "correct"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.c", -1, "correct"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.c", 1, "wrong_sign"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", -10, "wrong_sign"),
    ("a - b", {"a": 3, "b": 5}, "gradients.b", 1, "wrong_sign"),  # the -1 of a subtraction
    ("a * b - c", {"a": 3, "b": 5, "c": 2}, "gradients.c", 1, "wrong_sign"),
    # counted one path only: the += forgotten
    ("a * a", {"a": 3}, "gradients.a", 3, "one_path_only"),
    ("a * a", {"a": 3}, "gradients.a", 6, "correct"),
    ("a * b + a", {"a": 2, "b": 5}, "gradients.a", 5, "one_path_only"),
    ("a * b + a", {"a": 2, "b": 5}, "gradients.a", 1, "one_path_only"),
    ("(a + b) * a", {"a": 3, "b": 4}, "gradients.a", 7, "one_path_only"),
    ("(a * a) * c", {"a": 3, "c": 2}, "gradients.a", 6, "one_path_only"),  # upstream of a
    ("a * a * a", {"a": 2}, "gradients.a", 4, "one_path_only"),  # one path of three
    ("a * a * a", {"a": 2}, "gradients.a", 8, "one_path_only"),  # one path of three left out
    # multiplied by the wrong local derivative
    ("a * b", {"a": 3, "b": 4}, "gradients.a", 3, "wrong_local_derivative"),  # own value
    # d((a + b) * c)/d(a + b) taken as a + b itself
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", -1, "wrong_local_derivative"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", -10, "wrong_sign"),
    ("a / b", {"a": 3, "b": 2}, "gradients.a", 2, "wrong_local_derivative"),  # b, not 1/b
    ("a / b", {"a": 3, "b": 2}, "gradients.b", -1.5, "wrong_local_derivative"),  # -a/b
    ("a / b", {"a": 3, "b": 2}, "gradients.b", -0.25, "wrong_local_derivative"),  # -1/b**2
    ("a / b", {"a": 3, "b": 2}, "gradients.b", 0.75, "wrong_sign"),
    ("a * a", {"a": 3}, "gradients.a", 0, "incorrect"),  # not a sign flipped on one of two uses
    ("a * a", {"a": 3}, "gradients.a", -6, "wrong_sign"),
    ("a ** 3", {"a": 2}, "gradients.a", 24, "wrong_local_derivative"),  # k * a ** k
    ("a ** 3", {"a": 2}, "gradients.a", 4, "wrong_local_derivative"),  # a ** (k - 1)
    ("log(a) * 2", {"a": 4}, "gradients.a", 2, "wrong_local_derivative"),  # 1 through log
    # a gradient through relu where it is off
    ("relu(a * b) + c", {"a": 3, "b": -4, "c": 1}, "gradients.a", -4, "dead_relu"),
    ("relu(a * b) + c", {"a": 3, "b": -4, "c": 1}, "gradients.a", 7, "dead_relu"),
    ("relu(a * b) + c", {"a": 3, "b": -4, "c": 1}, "gradients.a", 0, "correct"),
    ("relu(a - b) * c", {"a": 1, "b": 4, "c": 2}, "gradients.b", -2, "dead_relu"),
    ("relu(relu(a) * 2) * 3", {"a": -1}, "gradients.a", 6, "dead_relu"),
    # close but outside tolerance
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", 10.01, "outside_tolerance"),
    ("a / b", {"a": 1, "b": 3}, "gradients.a", 0.333, "outside_tolerance"),
    ("a / b", {"a": 1, "b": 3}, "gradients.a", 0.3333333333, "correct"),
    ("a / b", {"a": 1, "b": 3}, "gradients.a", "1/3", "correct"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "value", -10.05, "outside_tolerance"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "value", 10, "wrong_sign"),
    # not a number, unparsable
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", "ten", "not_a_number"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", True, "not_a_number"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", [10], "not_a_number"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", {"x": 1}, "not_a_number"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", "1 +", "unparsable"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", "10)", "unparsable"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", "1/0", "unparsable"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", "5 * 2", "correct"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", 37, "incorrect"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", None, "unanswered"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", "", "unanswered"),  # a blank field
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "gradients.a", " \t", "unanswered"),
    # the backward pass filled in, node by node
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "nodes.2", 10, "correct"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "nodes.2", -10, "wrong_sign"),
    ("(a + b) * c", {"a": 2, "b": -3, "c": 10}, "nodes.2", -1, "wrong_local_derivative"),
]


@pytest.mark.parametrize(("expression", "bindings", "item", "answer", "code"), MISTAKES)
def test_typical_mistakes_get_their_code(
    expression: str, bindings: dict[str, float], item: str, answer: Any, code: str
) -> None:
    group, _, key = item.partition(".")
    answers: dict[str, Any] = {"value": answer} if group == "value" else {group: {key: answer}}
    result = feedback(expression, bindings, answers, item)
    assert result["feedback"]["code"] == code, result
    assert result["verdict"] == {"correct": "correct", "unanswered": "unanswered"}.get(
        code, "incorrect"
    )
    assert result["feedback"]["message"]


@pytest.mark.parametrize(
    ("answer", "position", "where"),
    [
        ("(1 + 2", (0, 1), "at character 1:"),  # the '(' never closed
        ("2*", (2, 2), "at character 3:"),  # nothing where the operand should be
        ("10)", (2, 3), "at character 3:"),
        ("1/0", (0, 3), "at characters 1 to 3:"),
    ],
)
def test_unparsable_answers_say_where_counting_from_one(
    answer: str, position: tuple[int, int], where: str
) -> None:
    """`position` is [start, end) from 0, for code; the sentence counts characters as a
    learner does, from 1, and names a single character as one."""
    result = feedback(**_lesson_answer("gradients.a", answer))
    assert result["feedback"]["code"] == "unparsable"
    assert result["feedback"]["position"] == at(*position)
    assert result["feedback"]["message"].startswith(f"The answer cannot be read {where}")


@pytest.mark.parametrize(
    ("locale", "answers", "codes"),
    [
        # Typographic characters, in any language: the minus and multiplication signs, a space
        # that does not break (pasted from a web page).
        ("en", {"value": "\u221210", "gradients": {"a": "5\u00d72", "c": "\u22121\u00a0"}}, "ccc"),
        # A decimal comma where the language writes one: Russian and Estonian learners do.
        ("ru", {"value": "\u221210,0", "gradients": {"a": "10,00"}}, "cc"),
        ("et", {"value": "-20,0/2", "derivatives": {"c": "a + b + 0,0"}}, "cc"),
        # Not in English, where `1,5` is no number: refused with the hint to write `1.5`.
        ("en", {"value": "-10,0"}, "u"),
        ("ru", {"value": "1,5,0"}, "u"),  # nor two commas in one number
    ],
)
def test_an_answer_is_read_as_the_learner_types_it(
    locale: str, answers: dict[str, Any], codes: str
) -> None:
    results = check(EVALUATOR, **LESSON, answers=answers, locale=locale)["results"]
    answered = [r["feedback"]["code"] for r in results if r["verdict"] != "unanswered"]
    assert [code[0] for code in answered] == list(codes), results
    if codes == "u":
        position = results[0]["feedback"]["position"]
        assert (position["start"], position["end"]) == ((1, 5) if locale == "en" else (0, 3))


@pytest.mark.parametrize(
    ("answer", "position", "reason"),
    [
        ("(0,5", (0, 1), "this '(' is never closed"),
        ("\u22120,5 +", (6, 6), "the expression ends after '+'"),
        # thousands grouped as Russian typography groups them
        ("1\u00a0000,5", (0, 7), "without separators: 1000.5"),
        ("12\u202f345", (0, 6), "without separators: 12345"),
        ("2 2", (0, 3), "two numbers side by side"),
    ],
)
def test_an_answer_unreadable_even_in_plain_characters_is_told_its_own_mistake(
    answer: str, position: tuple[int, int], reason: str
) -> None:
    # Not "decimals are written with a point", which a Russian learner need not do.
    results = check(EVALUATOR, **LESSON, answers={"value": answer}, locale="ru")["results"]
    assert reason in results[0]["feedback"]["message"]
    assert results[0]["feedback"]["position"] == at(*position)


@pytest.mark.parametrize(
    ("answer", "words"),
    [("ei tea", (0, 6)), (" не знаю", (1, 8)), ("I do not know ", (0, 13)), ("Ei tea.", (0, 7)),
     ("не знаю!", (0, 8)), ("I don't know", (0, 12)), ("« не знаю »", (0, 11))],
)  # fmt: skip
def test_words_for_a_number_are_told_a_number_is_asked_for(
    answer: str, words: tuple[int, int]
) -> None:
    # Not the grammar's hint for two names side by side (`write ei*tea`).
    result = feedback(**_lesson_answer("gradients.a", answer))
    assert result["feedback"] == {
        "code": "not_a_number",
        "message": "The answer must be a number, not words.",
        "position": at(*words),
    }


@pytest.mark.parametrize(
    "answer", ["Ei tea.", "не знаю", "I don't know", "no idea!", "I dont know"]
)
def test_words_for_a_derivative_are_told_an_expression_is_asked_for(answer: str) -> None:
    result = feedback(**_lesson_answer("derivatives.a", answer))
    assert result["feedback"] == {
        "code": "unparsable",
        "message": "The answer must be an expression in the variables, such as 2*a*b, not words.",
        "position": at(0, len(answer)),
    }


def test_names_side_by_side_in_a_derivative_are_told_to_multiply() -> None:
    # `c a` may be meant as c*a, in a formula of c and a: the grammar's hint, not "words".
    result = feedback(**_lesson_answer("derivatives.a", "c a"))
    assert result["feedback"]["message"].endswith("write c*a to multiply")


# An answer is one expression. Each of these would be judged by its program's output (and the
# first four found correct) if programs were read as answers: `tanh(x * w)` at x = -6, w = 1.
PROGRAM_ANSWERS = [
    # (item, answer, position, the sentence's end)
    ("value", "5; tanh(-6)", (3, 7), "a second statement starts at character 4."),
    ("value", "q = tanh(-6)", (2, 3), "leave out the assignment 'q ='."),
    ("gradients.x", "g = 1 - tanh(-6) ** 2", (2, 3), "leave out the assignment 'g ='."),
    (
        "derivatives.x",
        "w = Value(1.0)\nw*(1-tanh(x*w)**2)",
        (15, 16),
        "a second statement starts at character 16.",
    ),
    ("nodes.0", "a, b = 0, 1 - tanh(-6) ** 2", (5, 6), "leave out the assignment 'a, b ='."),
    ("value", "q = Value(-0.99)", (2, 3), "'q = Value(-0.99)' declares an input; write the number "
     "alone."),
    ("derivatives.w", "d = x\nd.backward()", (6, 7), "a second statement starts at character 7."),
    ("derivatives.w", "x * w; x", (7, 8), "a second statement starts at character 8."),
]  # fmt: skip


@pytest.mark.parametrize(("item", "answer", "position", "ending"), PROGRAM_ANSWERS)
def test_an_answer_that_is_a_program_is_unparsable_at_what_makes_it_one(
    item: str, answer: str, position: tuple[int, int], ending: str
) -> None:
    group, _, key = item.partition(".")
    answers: dict[str, Any] = {"value": answer} if group == "value" else {group: {key: answer}}
    result = feedback("tanh(x * w)", {"x": -6, "w": 1}, answers, item)
    assert result["verdict"] == "incorrect"
    assert result["feedback"]["code"] == "unparsable", result
    # Line and column too, as a problem's position: a second statement may start a line.
    line = answer.count("\n", 0, position[0]) + 1
    column = position[0] - answer.rfind("\n", 0, position[0])
    assert result["feedback"]["position"] == at(*position, line=line, column=column)
    message = result["feedback"]["message"]
    assert message == f"The answer must be one expression, not a program: {ending}"


@pytest.mark.parametrize("answer", ["tanh(-6);", "tanh(-6)\n", "\ntanh(-6)  # the value"])
def test_an_expression_ended_by_a_separator_is_still_one_expression(answer: str) -> None:
    result = feedback("tanh(x * w)", {"x": -6, "w": 1}, {"value": answer}, "value")
    assert result["verdict"] == "correct", result


def test_backward_called_in_an_answer_is_unparsable() -> None:
    result = feedback("a * a", {"a": 1.5}, {"derivatives": {"a": "a.backward()"}}, "derivatives.a")
    assert result["feedback"]["code"] == "unparsable"


def _lesson_answer(item: str, answer: Any) -> dict[str, Any]:
    group, _, key = item.partition(".")
    return {
        "expression": LESSON["expression"],
        "bindings": LESSON["bindings"],
        "answers": {group: {key: answer}},
        "item": item,
    }


def test_score_counts_only_answered_items() -> None:
    document = check(EVALUATOR, **LESSON, answers={"gradients": {"a": 10, "b": -10}})
    verdicts = {result["item"]: result["verdict"] for result in document["results"]}
    assert verdicts == {
        "value": "unanswered",
        "gradients.a": "correct",
        "gradients.b": "incorrect",
        "gradients.c": "unanswered",
    }
    assert document["score"] == 0.5
    assert check(EVALUATOR, **LESSON, answers={})["score"] == 0
    everything = {"value": -10, "gradients": {"a": 10, "b": 10, "c": -1}}
    assert check(EVALUATOR, **LESSON, answers=everything)["score"] == 1


def test_expected_appears_only_with_reveal() -> None:
    answers = {"gradients": {"a": 1}, "derivatives": {"c": "a + b"}}
    hidden = check(EVALUATOR, **LESSON, answers=answers)
    assert all("expected" not in result for result in hidden["results"])
    shown = check(EVALUATOR, **LESSON, answers=answers, reveal=True)
    expected = {result["item"]: result["expected"] for result in shown["results"]}
    assert expected["value"] == -10
    assert expected["gradients.a"] == 10
    assert expected["derivatives.c"] == "a + b"
    assert expected["derivatives.a"] == "c"


@pytest.mark.parametrize(
    ("expression", "bindings", "expected"),
    [
        ("exp(a - a + 1) * a", {"a": 2}, "exp(1)"),  # sympy's E, which would read as a variable
        ("(a**2)**0.5 * b", {"a": -2, "b": 3}, "1.0*b*(a/(a**2)**0.5)"),  # sign(a)
        (
            "((a*b)**2)**1.5",
            {"a": -1, "b": 2},  # sign(a)*Abs(a)**2.0, written a*|a|, defined at a = 0 too
            "3.0*a*((a**2)**0.5)**1.0*((b**2)**0.5)**3.0",
        ),
        ("(a**2)**1.5", {"a": 0}, "3.0*a*((a**2)**0.5)**1.0"),  # not a/|a| at a = 0
        # The power rule k*u**(k - 1)*u', not sympy's k*u**k*u'/u, undefined where u = 0.
        ("(a*b)**1.5", {"a": 0, "b": 1}, "1.5*b*(a*b)**0.5"),
        ("(-a)**1.25", {"a": 0}, "-1.25*(-a)**0.25"),
        ("(a*(2 - a))**1.5", {"a": 2}, "1.5*(a*(2 - a))**0.5*(2 - 2*a)"),
        ("log(a) * tanh(a)", {"a": 2}, "(1 - tanh(a)**2)*log(a) + tanh(a)/a"),
    ],
)
def test_a_revealed_derivative_reads_back_as_a_correct_answer(
    expression: str, bindings: dict[str, float], expected: str
) -> None:
    # `expected` is written in the answers' language, so a learner may send it back as it is.
    shown = check(EVALUATOR, expression, bindings, {"derivatives": {"a": None}}, reveal=True)
    revealed = next(r["expected"] for r in shown["results"] if r["item"] == "derivatives.a")
    assert revealed == expected
    result = feedback(expression, bindings, {"derivatives": {"a": revealed}}, "derivatives.a")
    assert result["feedback"]["code"] == "correct"


def test_the_tolerance_can_be_widened_or_narrowed() -> None:
    answers = {"gradients": {"a": 10.01}}
    wide = check(EVALUATOR, **LESSON, answers=answers, tolerance=Tolerance(relative=1e-2))
    assert wide["results"][1]["verdict"] == "correct"
    exact = {"gradients": {"a": 10 + 1e-8}}
    strict = check(EVALUATOR, **LESSON, answers=exact, tolerance=Tolerance(0, 0))
    assert strict["results"][1]["feedback"]["code"] == "outside_tolerance"
    default = check(EVALUATOR, **LESSON, answers=exact)
    assert default["results"][1]["verdict"] == "correct"  # within relative 1e-6


def test_a_wide_tolerance_loosens_numbers_but_not_formulas() -> None:
    # The tolerance is for numbers a learner rounds: a formula is equivalent or it is not.
    wide = Tolerance(relative=0.05, absolute=0.5)
    answers = {"derivatives": {"a": "1.04*b", "b": "a + 0.3"}}
    result = check(EVALUATOR, "a*b", {"a": 3, "b": 2}, answers, tolerance=wide)
    verdicts = {item["item"]: item["verdict"] for item in result["results"]}
    assert verdicts["derivatives.a"] == verdicts["derivatives.b"] == "incorrect"
    # A derivative that is a number is a number: rounded within the tolerance, it is right.
    third = check(EVALUATOR, "a/3", {"a": 3}, {"derivatives": {"a": "0.333"}}, tolerance=wide)
    assert third["results"][-1]["verdict"] == "correct"
    default = check(EVALUATOR, "a/3", {"a": 3}, {"derivatives": {"a": "0.333"}})
    assert default["results"][-1]["feedback"]["code"] == "outside_tolerance"


def test_a_formula_of_small_values_is_judged_at_their_scale() -> None:
    # The absolute part of the tolerance shrinks with the values: twice the derivative is wrong
    # however small the derivative is, and not "close" either.
    def verdict(answer: str) -> dict[str, Any]:
        result = check(EVALUATOR, "1e-12*a*b", {"a": 3, "b": 2}, {"derivatives": {"a": answer}})
        [item] = [item for item in result["results"] if item["item"] == "derivatives.a"]
        return dict(item)

    assert verdict("1e-12*b")["verdict"] == "correct"
    assert verdict("b/1e12")["verdict"] == "correct"
    assert verdict("(1 + 1e-10)*1e-12*b")["verdict"] == "correct"  # rounding's worth
    doubled = verdict("2e-12*b")
    assert doubled["verdict"] == "incorrect"
    assert doubled["feedback"]["code"] != "outside_tolerance"
    # A derivative that is 0 everywhere (an input the output does not read, a dead relu) is not
    # a tiny formula's either.
    program = "x = Value(1.0)\nu = Value(2.0)\ny = x * x"
    unused = check(EVALUATOR, program, {}, {"derivatives": {"u": "1e-10*x"}})
    assert [item["verdict"] for item in unused["results"] if item["item"] == "derivatives.u"] == [
        "incorrect"
    ]
    dead = check(EVALUATOR, "relu(a) * b", {"a": -1, "b": 2}, {"derivatives": {"b": "1e-12*b"}})
    assert dead["results"][-1]["verdict"] == "incorrect"
    # while a float form of 0 that sympy cannot prove still is 0
    rounding = check(
        EVALUATOR, "a * b - b * a", {"a": 1, "b": 2}, {"derivatives": {"a": "0.1*b - b/10"}}
    )
    assert rounding["results"][3] == {
        "item": "derivatives.a",
        "verdict": "correct",
        "feedback": {"code": "correct", "message": "Correct."},
    }


def test_the_answers_text_in_all_is_bounded_as_one_expression_is() -> None:
    # Each answer within its own bound, but together more text than one expression may have.
    evaluator = Evaluator(Limits(max_expression_length=100))
    answers = {"gradients": {"a": "1 + 1 - 1 " * 6, "b": "2 * 2 / 2 " * 6}}
    with pytest.raises(RequestTooLarge) as refused:
        check(evaluator, "a * b", {"a": 3, "b": 2}, answers)
    assert (refused.value.kind, refused.value.limit, refused.value.maximum) == (
        "check_too_expensive",
        "max_expression_length",
        100,
    )
    assert "120 characters in all" in refused.value.message
    answers["gradients"]["b"] = 2  # numbers are not text
    assert check(evaluator, "a * b", {"a": 3, "b": 2}, answers)["results"]


def test_every_code_is_documented() -> None:
    codes = {code for *_, code in MISTAKES}
    assert codes <= set(CODES)


@pytest.mark.parametrize(("answer", "code"), [(10, "wrong_sign"), (5, "incorrect")])
def test_feedback_on_the_value_speaks_of_the_forward_pass(answer: float, code: str) -> None:
    """The value is the forward pass's result: no gradient or local derivative went into it,
    so its feedback points at that pass, whatever the code."""
    result = feedback(LESSON["expression"], LESSON["bindings"], {"value": answer}, "value")
    assert result["feedback"]["code"] == code
    message = result["feedback"]["message"]
    assert "forward pass" in message
    assert not any(word in message for word in ("gradient", "way back", "local derivative"))
    # A gradient's feedback still speaks of the backward pass.
    gradient = feedback(**_lesson_answer("gradients.a", answer if code == "incorrect" else -10))
    assert gradient["feedback"]["code"] == code
    assert "forward pass" not in gradient["feedback"]["message"]


# -- symbolic answers ---------------------------------------------------------------------------

EQUIVALENT = [
    ("a * a", "a", "2*a"),
    ("a * a", "a", "a + a"),
    ("a * a", "a", "2 * a ** 1"),
    ("(a + b) * c", "c", "b + a"),
    ("(a + b) * c", "a", "c"),
    ("a * b * a", "a", "2*a*b"),
    ("a / b", "b", "-a / b^2"),
    ("a / b", "b", "-a * b ** -2"),
    ("a - b", "b", "-1"),
    ("exp(2 * a)", "a", "2 * exp(a) * exp(a)"),
    ("log(a * b)", "a", "1 / a"),
    ("tanh(a)", "a", "1 - tanh(a) ** 2"),
    ("(a + 1) ** 2", "a", "2*a + 2"),
    ("relu(a)", "a", "relu(a) / a"),  # a step, written with relu
    ("relu(a * b)", "a", "b * relu(a * b) / (a * b)"),
    ("relu(a) * b", "b", "relu(a)"),
    ("relu(a) * a", "a", "2 * relu(a)"),
    ("a ** 0.5", "a", "0.5 / a ** 0.5"),
    # A relu of the answer's own, whose other side changes nothing or lies off the piece.
    ("relu(a) * b", "b", "relu(a) + relu(a - 5) - relu(a - 5)"),
    ("a * b", "a", "b + 0 * relu(a - 3)"),
    ("relu(a) * b", "a", "b * relu(a) / a"),
    # A square root with a value but no derivative at the bindings (a = 1).
    ("a * b", "a", "b + 0 * (a - 1) ** 0.5"),
]

NOT_EQUIVALENT = [
    ("a * a", "a", "a", "one_path_only"),
    ("a * a", "a", "-2*a", "wrong_sign"),
    ("(a + b) * c", "a", "a + b", "wrong_local_derivative"),
    ("(a + b) * c", "c", "-(a + b)", "wrong_sign"),
    ("a * b * a", "a", "a*b", "one_path_only"),
    ("a - b", "b", "1", "wrong_sign"),
    # At the bindings (every variable 1) the relu is off: on that piece the derivative is 0.
    ("relu(a * b - 2)", "a", "b", "dead_relu"),
    ("a / b", "b", "a / b^2", "wrong_sign"),
    ("exp(2 * a)", "a", "exp(2*a)", "wrong_local_derivative"),
    ("a * b", "a", "a + b", "incorrect"),
    ("a * b", "a", "0.999 * b", "outside_tolerance"),
    ("(a + 1) ** 2", "a", "2*a", "incorrect"),
    ("relu(a - 2)", "a", "1", "dead_relu"),
    # Right wherever the answer's own relu is off, which every sample point may be.
    ("a * b", "a", "b + relu(a - 3)", "incorrect"),
    ("a * b", "a", "b + relu(a - 1e6)", "incorrect"),
    ("a * b", "a", "b - relu(-a - 1e6)", "incorrect"),
    ("a * b", "a", "b + relu(a * b - 100)", "incorrect"),
    ("relu(a) * b", "b", "relu(a) + relu(a - 5)", "incorrect"),
    ("relu(a + 1) * a", "a", "2*a + 1 + relu(a - 5)", "incorrect"),
]


@pytest.mark.parametrize(("expression", "name", "answer"), EQUIVALENT)
def test_equivalent_symbolic_answers_are_correct(expression: str, name: str, answer: str) -> None:
    bindings = {variable: 1.0 for variable in EVALUATOR.compile(expression).parsed.variables}
    result = feedback(expression, bindings, {"derivatives": {name: answer}}, f"derivatives.{name}")
    assert result["verdict"] == "correct", result


@pytest.mark.parametrize(("expression", "name", "answer", "code"), NOT_EQUIVALENT)
def test_non_equivalent_symbolic_answers_name_the_mistake(
    expression: str, name: str, answer: str, code: str
) -> None:
    bindings = {variable: 1.0 for variable in EVALUATOR.compile(expression).parsed.variables}
    result = feedback(expression, bindings, {"derivatives": {name: answer}}, f"derivatives.{name}")
    assert result["verdict"] == "incorrect", result
    assert result["feedback"]["code"] == code, result


def test_a_relu_of_the_answer_is_crossed_and_the_point_named() -> None:
    # At a = 1 and every sample point relu(a - 3) is off, and the answer agrees: past a = 3 it
    # does not, and the feedback says where, in round numbers.
    answers = {"derivatives": {"a": "b + relu(a - 3)"}}
    result = feedback("a * b", {"a": 1, "b": 2}, answers, "derivatives.a")
    assert result["verdict"] == "incorrect"
    assert result["feedback"]["message"] == (
        "Not correct: at a = 6, b = 2 the derivative is 2, and the formula gives 5. Look at "
        "where each relu or Heaviside of the formula turns on or off."
    )


def test_an_answer_defined_at_the_bindings_only_is_left_to_sympy() -> None:
    # b + 0 at a = 1, and not a real number anywhere else: one point cannot tell.
    answers = {"derivatives": {"a": "b + (a - 1) ** 0.5 * (1 - a) ** 0.5"}}
    result = feedback("a * b", {"a": 1, "b": 1}, answers, "derivatives.a")
    assert result["verdict"] == "incorrect"


@pytest.mark.parametrize(
    ("expression", "bindings", "name", "answer"),
    [
        # relu(a**2) is off at a = 0 only: no sample point lies on that piece, and the formulas
        # are compared whole. Constants folded in floats are no exact decimal.
        ("relu(a**2) + 0.1*a*b + 0.2*a*b", {"a": 0, "b": 1}, "a", "0.3*b"),
        ("relu(a**2) + 0.1*a*b + 0.2*a*b", {"a": 0, "b": 1}, "a", "3*b/10"),
        ("relu(a**2) + 1/3*(2*a)**3", {"a": 0}, "a", "8*a**2"),
        ("relu(a**1.5) + exp(1)*a**1.5", {"a": 0}, "a", "1.5*exp(1)*a**0.5"),
        # Real only where a = b: compared along the line through the bindings.
        ("(b-a)**1.5/3 + exp(1)*(a-b)**1.5", {"a": 1, "b": 1}, "a",
         "-0.5*(b - a)**0.5 + 1.5*exp(1)*(a - b)**0.5"),
        # 0 everywhere, written as terms that cancel: their floats leave a residue, not 0.
        ("1/(c + a) + c/(a*(c+a))", {"a": 3, "c": 2}, "c",
         "-1/(a + c)**2 - c/(a*(a + c)**2) + 1/(a*(a + c))"),
        ("(b**2)**0.5 / b", {"b": -1}, "b", "1/(b**2)**0.5 - (b**2)**0.5/b**2"),
    ],
)  # fmt: skip
def test_formulas_apart_by_rounding_alone_are_equivalent(
    expression: str, bindings: dict[str, float], name: str, answer: str
) -> None:
    result = feedback(expression, bindings, {"derivatives": {name: answer}}, f"derivatives.{name}")
    assert result["verdict"] == "correct", result
    shown = check(EVALUATOR, expression, bindings, {"derivatives": {name: None}}, reveal=True)
    revealed = next(r["expected"] for r in shown["results"] if r["item"] == f"derivatives.{name}")
    again = feedback(expression, bindings, {"derivatives": {name: revealed}}, f"derivatives.{name}")
    assert again["verdict"] == "correct", (revealed, again)


@pytest.mark.parametrize(
    "answer", ["0.3000001*b", "0.3*b + 1e-6*a", "0.3*b + relu(a - 3)", "0.3*b + relu(-a - 3)"]
)
def test_formulas_apart_by_more_than_rounding_are_not(answer: str) -> None:
    # On the narrow piece as above; an answer's own relu off at every point drawn is no proof.
    result = feedback("relu(a**2) + 0.1*a*b + 0.2*a*b", {"a": 0, "b": 1},
                      {"derivatives": {"a": answer}}, "derivatives.a")  # fmt: skip
    assert result["verdict"] == "incorrect", result


def test_a_formula_off_by_a_tiny_multiple_is_not_rounding() -> None:
    # Its largest term is 2e-12*b itself: its rounding is far below the 1e-12*b it is off by.
    result = feedback("1e-12 * a * b", {"a": 1, "b": 1}, {"derivatives": {"a": "2e-12*b"}},
                      "derivatives.a")  # fmt: skip
    assert result["verdict"] == "incorrect", result


HOSTILE_SYMBOLIC = [
    ("__import__('os').system('true')", "unparsable"),
    ("exec('1')", "unparsable"),
    ("Symbol('a')", "unparsable"),
    ("a.__class__", "unparsable"),
    ("lambda: 1", "unparsable"),
    ("a if a else b", "unparsable"),
    ("[a for a in b]", "unparsable"),
    ("a" * 2000, "unparsable"),  # longer than an answer may be
    ("(" * 60 + "a" + ")" * 60, "unparsable"),  # nested deeper than an answer may be
    ("+".join(["a"] * 600), "unparsable"),  # more nodes than an answer may have
    ("x", "unknown_variable"),
    ("sqrt(a)", "unparsable"),
    ("Heaviside(a)", "incorrect"),  # relu's derivative, read as any formula is
    ("Heaviside(a, a)", "unparsable"),
    ("1e999", "unparsable"),
    ("a ** b", "unparsable"),
    ("\u0430", "unparsable"),  # Cyrillic a
    ("exp(exp(exp(exp(exp(a)))))", "incorrect"),  # overflows at every sample point
    ("(a + 1) ** 200 - (a + 1) ** 200 + 2 * a", "correct"),  # sympy must expand or sample
    ("log(a - a)", "incorrect"),  # defined nowhere
    ("1 / (a - a)", "incorrect"),
]


@pytest.mark.parametrize(("answer", "code"), HOSTILE_SYMBOLIC)
def test_hostile_symbolic_answers_are_feedback_not_failures(answer: str, code: str) -> None:
    result = feedback("a * a", {"a": 1.5}, {"derivatives": {"a": answer}}, "derivatives.a")
    assert result["feedback"]["code"] == code, result


@pytest.mark.parametrize(
    ("answer", "reason", "position"),
    [
        ("b*(a-1)/(a-1)", "division by zero: (a-1) is 0", (0, 13)),
        ("b + 0/(a-1)", "division by zero: (a-1) is 0", (4, 11)),
        ("log(a - 1) + b", "log of a non-positive number (0)", (0, 10)),
    ],
)
def test_a_formula_undefined_at_the_bindings_is_told_why_and_where(
    answer: str, reason: str, position: tuple[int, int]
) -> None:
    # Right everywhere else, but a derivative is asked for at a = 1, where it is b = 2.
    result = feedback("a * b", {"a": 1, "b": 2}, {"derivatives": {"a": answer}}, "derivatives.a")
    assert result["verdict"] == "incorrect"
    assert result["feedback"]["message"] == (
        "Not correct: the formula cannot be computed at the bindings, where the derivative has a "
        f"value: {reason}."
    )
    assert result["feedback"]["position"] == at(*position)


@pytest.mark.parametrize(
    ("expression", "number", "code"),
    [
        ("a - b", -1, "correct"),
        ("a - b", 1, "wrong_sign"),
        ("a * 2.5 + b", 2.5, "correct"),
        ("a * 2.5 + b", -2.5, "wrong_sign"),
        ("a * a", 3, "incorrect"),  # 2a is 3 at a = 1.5 only: a constant is no derivative of it
    ],
)
def test_a_derivative_given_as_a_number_is_judged_as_its_text(
    expression: str, number: float, code: str
) -> None:
    bindings = {variable: 1.5 for variable in EVALUATOR.compile(expression).parsed.variables}
    name = "b" if expression == "a - b" else "a"
    item = f"derivatives.{name}"
    result = feedback(expression, bindings, {"derivatives": {name: number}}, item)
    assert result["feedback"]["code"] == code, result
    as_text = feedback(expression, bindings, {"derivatives": {name: repr(number)}}, item)
    assert result["feedback"] == as_text["feedback"]


def test_a_derivative_given_as_any_finite_number_is_judged_as_a_value_answer_is() -> None:
    """Past the largest constant text may write (1e300), as a `value` answer may be: a JSON
    number has no text to refuse."""
    answers = {"value": 1e305, "derivatives": {"a": 1e305}}
    results = check(EVALUATOR, "a * b", {"a": 1, "b": 2}, answers)["results"]
    codes = {result["item"]: result["feedback"]["code"] for result in results}
    assert codes["value"] == codes["derivatives.a"] == "incorrect"


@pytest.mark.parametrize(
    "number", [1e308, 1.7976931348623157e308, -1.7976931348623157e308, 10**308]
)
def test_every_finite_double_is_a_finite_answer(number: float) -> None:
    """Up to the largest double: only an integer past it (or inf, nan) is not finite."""
    answers = {"value": number, "derivatives": {"a": number}}
    results = check(EVALUATOR, "a * b", {"a": 1, "b": 2}, answers)["results"]
    codes = {result["item"]: result["feedback"]["code"] for result in results}
    assert codes["value"] == codes["derivatives.a"] == "incorrect"


def test_a_value_of_1e308_over_http_is_a_number(client: FlaskClient) -> None:
    body = {**LESSON, "answers": {"value": 1e308, "derivatives": {"a": 1e308}}}
    results = client.post("/v1/check", json=body).get_json()["results"]
    by_item = {result["item"]: result["feedback"] for result in results}
    assert by_item["value"]["code"] == by_item["derivatives.a"]["code"] == "incorrect"
    assert "infinity" not in by_item["derivatives.a"]["message"]


@pytest.mark.parametrize(
    ("answer", "what"),
    [
        (True, "true or false"),
        ([3], "a list"),
        ({"a": 3}, "an object"),
        (math.inf, "infinity or NaN"),
        (math.nan, "infinity or NaN"),
    ],
)
def test_a_derivative_that_is_neither_text_nor_a_finite_number_is_unparsable(
    answer: Any, what: str
) -> None:
    result = feedback("a * a", {"a": 1.5}, {"derivatives": {"a": answer}}, "derivatives.a")
    assert result["feedback"] == {
        "code": "unparsable",
        "message": f"The answer must be an expression written as text, or a number, not {what}.",
    }


@pytest.mark.parametrize("answer", [10**400, 2 * 10**308], ids=["10**400", "2*10**308"])
@pytest.mark.parametrize("item", ["value", "derivatives.a"])
def test_an_integer_past_a_double_is_told_so(answer: int, item: str) -> None:
    # Finite, so not "infinity or NaN": too large for the numbers the engine computes with. A
    # derivative need not be a number: one that cannot be read is unparsable.
    group, _, name = item.partition(".")
    answers = {group: {name: answer} if name else answer}
    result = feedback("a * a", {"a": 1.5}, answers, item)
    assert result["feedback"] == {
        "code": "not_a_number" if group == "value" else "unparsable",
        "message": "This number is too large: an answer can be at most about 1.8e308 in size.",
    }


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1" + "0" * 400])
@pytest.mark.parametrize("item", ["value", "derivatives.a"])
def test_a_json_number_past_a_double_is_told_so_over_http(
    client: FlaskClient, number: str, item: str
) -> None:
    # The JSON reader keeps such a number as a marker, not as a Python int, and says the same.
    group, _, name = item.partition(".")
    answer = f'{{"{name}": {number}}}' if name else number
    body = (
        f'{{"expression": "a * a", "bindings": {{"a": 1.5}}, "answers": {{"{group}": {answer}}}}}'
    )
    response = client.post("/v1/check", data=body, content_type="application/json")
    (result,) = [r for r in response.get_json()["results"] if r["item"] == item]
    assert result["feedback"]["code"] == ("not_a_number" if group == "value" else "unparsable")
    assert result["feedback"]["message"].startswith("This number is too large")


# -- over HTTP ----------------------------------------------------------------------------------


def test_check_over_http(client: FlaskClient) -> None:
    body = {
        **LESSON,
        "answers": {
            "value": -10,
            "gradients": {"a": 10, "b": -10, "c": "-1"},
            "nodes": {"2": 10},
            "derivatives": {"a": "c", "b": "a + b"},
        },
        "tolerance": {"relative": 1e-3},
        "reveal": True,
    }
    response = client.post("/v1/check", json=body)
    assert response.status_code == 200
    document = response.get_json()
    assert response.headers["Content-Language"] == "en"
    items = [result["item"] for result in document["results"]]
    assert items == [
        "value",
        "gradients.a",
        "gradients.b",
        "gradients.c",
        "nodes.0",
        "nodes.1",
        "nodes.2",
        "nodes.3",
        "nodes.4",
        "derivatives.a",
        "derivatives.b",
        "derivatives.c",
    ]
    by_item = {result["item"]: result for result in document["results"]}
    assert by_item["gradients.b"]["feedback"]["code"] == "wrong_sign"
    assert by_item["derivatives.b"]["feedback"]["code"] == "wrong_local_derivative"
    assert by_item["derivatives.c"]["verdict"] == "unanswered"
    assert document["score"] == 5 / 7
    assert by_item["nodes.4"]["expected"] == 1


def test_derivatives_given_as_json_numbers_over_http(client: FlaskClient) -> None:
    body = (
        b'{"expression": "a - b * 2", "bindings": {"a": 1, "b": 1}, '
        b'"answers": {"derivatives": {"a": 1, "b": -Infinity}}}'
    )
    response = client.post("/v1/check", data=body, content_type="application/json")
    assert response.status_code == 200
    by_item = {result["item"]: result for result in response.get_json()["results"]}
    assert by_item["derivatives.a"]["verdict"] == "correct"
    assert by_item["derivatives.b"]["feedback"]["code"] == "unparsable"
    assert "not infinity or NaN" in by_item["derivatives.b"]["feedback"]["message"]


@pytest.mark.parametrize(
    ("answers", "kind"),
    [
        ({"gradients": {"z": 1}}, "unknown-answer-items"),
        ({"derivatives": {"__class__": "1"}}, "unknown-answer-items"),
        ({"nodes": {"99": 1}}, "unknown-answer-items"),
        ({"nodes": {"-1": 1}}, "unknown-answer-items"),
        ({"nodes": {"٣": 1}}, "unknown-answer-items"),  # an Arabic-Indic digit
        ({"gradients": [1, 2]}, "validation-error"),
        ({"extra": 1}, "validation-error"),
        ("10", "validation-error"),
    ],
)
def test_malformed_answers_are_problems(client: FlaskClient, answers: Any, kind: str) -> None:
    response = client.post("/v1/check", json={**LESSON, "answers": answers})
    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["type"].endswith("/" + kind)


def test_the_items_at_fault_are_listed_in_the_problem(client: FlaskClient) -> None:
    answers = {"gradients": {"z": 1, "a": 10}, "nodes": {"99": 1, "0": 10}}
    problem = client.post("/v1/check", json={**LESSON, "answers": answers}).get_json()
    assert problem["items"] == ["gradients.z", "nodes.99"]
    answers = {"nodes": {"0": 10, "a": 10}}  # node 0 is a: answered twice
    problem = client.post("/v1/check", json={**LESSON, "answers": answers}).get_json()
    assert (problem["type"].rsplit("/", 1)[1], problem["items"]) == (
        "duplicate-answer-items",
        ["nodes.0", "nodes.a"],
    )


@pytest.mark.parametrize(
    "tolerance", [{"relative": -1}, {"absolute": "x"}, {"relative": 2}, {"other": 1}, 5]
)
def test_a_bad_tolerance_is_a_validation_problem(client: FlaskClient, tolerance: Any) -> None:
    body = {**LESSON, "answers": {}, "tolerance": tolerance}
    assert client.post("/v1/check", json=body).status_code == 422


def test_the_expression_is_checked_as_in_gradients(client: FlaskClient) -> None:
    body = {"expression": "log(a)", "bindings": {"a": -1}, "answers": {"value": 0}}
    problem = client.post("/v1/check", json=body).get_json()
    assert problem["type"].endswith("/log-domain")


# -- programs -----------------------------------------------------------------------------------

PROGRAM = "h = a * b + c\nout = relu(h) * a"


def test_a_programs_named_nodes_are_items_by_name() -> None:
    bindings = {"a": 2, "b": 3, "c": 1}  # h = 7: the relu is on
    answers = {"nodes": {"h": 2, "out": 1, "0": 13}, "gradients": {"b": 2}}
    document = check(EVALUATOR, PROGRAM, bindings, answers, reveal=True)
    results = {result["item"]: result for result in document["results"]}
    assert {"nodes.h", "nodes.out", "nodes.0"} <= results.keys()
    assert results["nodes.h"]["verdict"] == "correct"  # d(relu(h) * a)/dh = a
    assert results["nodes.out"]["verdict"] == "correct"
    assert results["nodes.0"]["expected"] == 13  # relu(h) + a * b = 7 + 2 * 3
    assert results["nodes.0"]["verdict"] == "correct"
    assert results["gradients.b"]["feedback"]["code"] == "wrong_local_derivative"  # a, not a*a


@pytest.mark.parametrize(
    ("expression", "bindings", "answers", "expected"),
    [
        # On, at the bindings: the derivative there is b, which a learner can write.
        ("relu(a * b)", {"a": 1, "b": 2}, {"a": "b", "b": "a"}, {"a": "b", "b": "a"}),
        # Off: 0 on this piece, whatever it would be where the relu is on.
        ("relu(a * b)", {"a": -1, "b": 2}, {"a": "0", "b": "0"}, {"a": "0", "b": "0"}),
        # A relu inside another's input, both on at a = 3.
        ("relu(relu(a) - 1) * a", {"a": 3}, {"a": "2*a - 1"}, {"a": "2*a - 1"}),
    ],
)
def test_a_derivative_through_relu_is_judged_on_the_bindings_piece(
    expression: str, bindings: dict[str, float], answers: dict[str, str], expected: dict[str, str]
) -> None:
    document = check(EVALUATOR, expression, bindings, {"derivatives": answers}, reveal=True)
    results = {r["item"]: r for r in document["results"] if r["item"].startswith("derivatives.")}
    assert {item.split(".")[1]: r["expected"] for item, r in results.items()} == expected
    assert all(r["verdict"] == "correct" for r in results.values()), results


@pytest.mark.parametrize(
    ("expression", "bindings", "piece", "wrong"),
    [
        # The engine's (1.1 - 0.1) + -1.0 is exactly 0: its relu is off. sympy adds the same
        # floats in another order, to 8e-17, and would put it on.
        ("relu(a - b + c) * 2", {"a": 1.1, "b": 0.1, "c": -1.0}, "0", "2"),
        # The engine's (-1.0 + 1.1) + -0.1 is 8e-17: on. sympy's sum is 0, off.
        ("relu(c + b + a) * 2", {"a": -0.1, "b": 1.1, "c": -1.0}, "2", "0"),
        # sympy writes both inputs as a - b + c, but the engine's first relu is off (0.0) and
        # its second on (8e-17): one relu's piece cannot be read off the other's.
        ("relu(a - b + c) + relu(a + c - b)", {"a": 1.1, "b": 0.1, "c": -1.0}, "1", "2"),
    ],
)
def test_a_relus_piece_is_the_one_the_engines_forward_pass_found(
    expression: str, bindings: dict[str, float], piece: str, wrong: str
) -> None:
    """The derivative is judged, and revealed, on the piece whose gradient the engine gives:
    the answer sympy's own piece would give is wrong, as a gradient and as a derivative."""
    right = {"gradients": {"a": float(piece)}, "derivatives": {"a": piece}}
    document = check(EVALUATOR, expression, bindings, right, reveal=True)
    results = {r["item"]: r for r in document["results"]}
    assert results["gradients.a"]["expected"] == float(piece)
    assert results["derivatives.a"]["expected"] == piece
    assert results["gradients.a"]["verdict"] == results["derivatives.a"]["verdict"] == "correct"
    slip = {"gradients": {"a": float(wrong)}, "derivatives": {"a": wrong}}
    results = {r["item"]: r for r in check(EVALUATOR, expression, bindings, slip)["results"]}
    assert results["gradients.a"]["verdict"] == results["derivatives.a"]["verdict"] == "incorrect"


def test_a_derivative_through_a_relu_the_engine_found_off_is_a_dead_relu() -> None:
    bindings = {"a": 1.1, "b": 0.1, "c": -1.0}  # the engine's relu input is exactly 0
    answers = {"gradients": {"a": 2}, "derivatives": {"a": "2"}}
    document = check(EVALUATOR, "relu(a - b + c) * 2", bindings, answers)
    codes = {r["item"]: r["feedback"]["code"] for r in document["results"]}
    assert codes["gradients.a"] == codes["derivatives.a"] == "dead_relu"


def test_the_shipping_costs_derivatives_are_its_gradients_at_the_defaults() -> None:
    from service.api.examples import SHIPPING_PROGRAM

    answers = {"weight": "15", "distance": "2", "base_fee": "1", "discount": "1"}
    document = check(EVALUATOR, SHIPPING_PROGRAM, {}, {"derivatives": answers})
    assert document["score"] == 1


def test_a_program_with_a_dead_relu_and_a_chosen_output() -> None:
    bindings = {"a": 2, "b": -3, "c": 1}  # h = -5: the relu is off
    answers = {"nodes": {"h": 2}, "derivatives": {"b": "a ** 2"}}
    document = check(EVALUATOR, PROGRAM, bindings, answers)
    results = {result["item"]: result for result in document["results"]}
    assert results["nodes.h"]["feedback"]["code"] == "dead_relu"
    assert results["derivatives.b"]["feedback"]["code"] == "dead_relu"
    chosen = check(EVALUATOR, PROGRAM, bindings, {"gradients": {"a": -3}}, output="h")
    assert next(r for r in chosen["results"] if r["item"] == "gradients.a")["verdict"] == "correct"


def test_an_input_the_output_does_not_use_has_gradient_zero() -> None:
    program = "x = Value(2.0)\nunused = Value(5.0)\ny = x * x"
    document = check(EVALUATOR, program, {}, {"gradients": {"x": 4, "unused": 1}}, reveal=True)
    results = {result["item"]: result for result in document["results"]}
    assert results["gradients.x"]["verdict"] == "correct"
    assert results["gradients.unused"]["expected"] == 0
    assert results["gradients.unused"]["verdict"] == "incorrect"
    # So is a name only a statement the output does not use reads, bound or not.
    program = "x = Value(2.0)\nt = u * 3\ny = x * x"
    for bindings in ({}, {"u": 1.0}):
        document = check(EVALUATOR, program, bindings, {"gradients": {"x": 4, "u": 0}})
        assert document["score"] == 1.0


@pytest.mark.parametrize(
    ("expression", "output", "answers", "verdicts"),
    [
        # u is declared but unused: the derivative by u is 0, and u may be written in it.
        ("x = Value(1.0)\nu = Value(2.0)\ny = x * 3", None, {"u": "u - u", "x": "3 + u - u"},
         {"u": "correct", "x": "correct"}),
        ("x = Value(1.0)\nu = Value(2.0)\ny = x * 3", None, {"u": "u", "x": "u"},
         {"u": "incorrect", "x": "incorrect"}),
        # u is read only by a statement the output does not use, and has no binding.
        ("x = Value(1.0)\nt = u * 3\ny = x * x", None, {"u": "u - u", "x": "2*x + u - u"},
         {"u": "correct", "x": "correct"}),
        # The output a of a * b does not depend on b, an input all the same.
        ("a * b", "a", {"a": "b", "b": "b - b"}, {"a": "incorrect", "b": "correct"}),
    ],
)  # fmt: skip
def test_any_input_may_appear_in_a_derivative_the_output_does_not_depend_on_it_or_not(
    expression: str, output: str | None, answers: dict[str, str], verdicts: dict[str, str]
) -> None:
    bindings = {"a": 1.5, "b": 2.0} if output else {}
    document = check(EVALUATOR, expression, bindings, {"derivatives": answers}, output=output)
    results = {r["item"]: r for r in document["results"] if r["item"].startswith("derivatives.")}
    assert {item.split(".")[1]: r["verdict"] for item, r in results.items()} == verdicts
    assert all(r["feedback"]["code"] != "unknown_variable" for r in results.values()), results


def test_a_name_that_is_no_input_of_the_program_is_an_unknown_variable() -> None:
    # t is assigned, not an input: no derivative can be written with it.
    program = "x = Value(1.0)\nt = u * 3\ny = x * x"
    result = feedback(program, {}, {"derivatives": {"x": "2*x + t"}}, "derivatives.x")
    assert result["feedback"] == {
        "code": "unknown_variable",
        "message": "The answer uses t, which the program computes: write the derivative in its "
        "inputs (x, u).",
        "position": at(6, 7),
    }


def test_an_unknown_variable_is_pointed_at_where_the_answer_first_names_it() -> None:
    result = feedback(
        **LESSON, answers={"derivatives": {"a": "c + (q*d) + q"}}, item="derivatives.a"
    )
    assert result["feedback"] == {
        "code": "unknown_variable",
        "message": "The answer uses q, d, which are not variables of the expression.",
        "position": at(5, 6),
    }


# -- programs that reassign a name --------------------------------------------------------------

# y names two nodes: x*x (id 1), then y*3 (id 3), which y refers to once the program has run.
REASSIGNED = "x = Value(2.0)\ny = x*x\ny = y*3\ny.backward()"


def node_results(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    results = [result for result in document["results"] if result["item"].startswith("nodes.")]
    items = [result["item"] for result in results]
    assert len(items) == len(set(items)), items  # every label is one node's
    return {result["item"]: result for result in results}


@pytest.mark.parametrize(
    "program",
    [
        REASSIGNED,
        "x = Value(2.0)\nx = x*x\nx = x*x",  # the declared input's own name reassigned
        "a = x*2\nfirst = a\na = x*3\nout = a + first",
        "x = Value(1.0)\ny = x*x\ny += x\ny += 1",
        "a, b = x*2, x*3\na, b = b*a, a\nout = a + b",
    ],
)
def test_every_node_has_a_label_of_its_own(program: str) -> None:
    document = check(EVALUATOR, program, {"x": 1.5}, {"nodes": {}}, reveal=True)
    nodes = EVALUATOR.evaluate(program, {"x": 1.5})["graph"]["nodes"]
    assert len(node_results(document)) == len(nodes)


def test_a_reassigned_name_means_its_last_assignment(client: FlaskClient) -> None:
    body = {"expression": REASSIGNED, "answers": {"nodes": {"y": 3}}, "reveal": True}
    document = client.post("/v1/check", json=body).get_json()
    results = node_results(document)
    assert list(results) == ["nodes.x", "nodes.1", "nodes.2", "nodes.y"]
    # y*3 is the output: its gradient is 1, so 3 (the gradient of x*x) is judged against it.
    assert results["nodes.y"]["expected"] == 1
    assert results["nodes.y"]["verdict"] == "incorrect"
    assert results["nodes.1"]["expected"] == 3
    assert results["nodes.1"]["verdict"] == "unanswered"


def test_the_nodes_a_reassigned_name_left_behind_are_answered_by_id(client: FlaskClient) -> None:
    body = {"expression": REASSIGNED, "answers": {"nodes": {"1": 3, "3": 1}}, "reveal": True}
    document = client.post("/v1/check", json=body).get_json()
    results = node_results(document)
    # Each item is named as it was answered: node 3, which y names, answered by its id.
    assert results["nodes.1"]["verdict"] == results["nodes.3"]["verdict"] == "correct"
    assert "nodes.y" not in results
    assert document["score"] == 1
    by_name_and_id = {"expression": REASSIGNED, "answers": {"nodes": {"y": 1, "1": 3}}}
    assert client.post("/v1/check", json=by_name_and_id).get_json()["score"] == 1


def test_feedback_on_a_node_left_behind_names_nodes_by_their_text() -> None:
    # d(y*3)/d(x*x) is 3; taken as the operand's own value x*x = 4, the answer is 4 * 1.
    document = check(EVALUATOR, REASSIGNED, {}, {"nodes": {"1": 4, "3": -1}})
    results = node_results(document)
    feedback = results["nodes.1"]["feedback"]
    assert feedback["code"] == "wrong_local_derivative"
    assert "At y*3, the gradient sent to x*x" in feedback["message"]
    assert results["nodes.3"]["feedback"]["code"] == "wrong_sign"


def test_feedback_names_a_declared_input_by_its_name_not_its_declaration() -> None:
    # The gradient is 2x + 1 = 5: an answer of 4 leaves out the use of x in `+ x`, and one of
    # 6 multiplies what y sends to x by x, not 1; the sentences name the input x, not its
    # declaration `Value(2.0)`.
    program = "x = Value(2.0)\ny = x*x + x\ny.backward()"
    for answer, named in [(4, "x is used 3 times"), (6, "sent to x ")]:
        document = check(EVALUATOR, program, {}, {"gradients": {"x": answer}})
        [result] = [r for r in document["results"] if r["item"] == "gradients.x"]
        message = result["feedback"]["message"]
        assert "Value(" not in message
        assert named in message


def test_a_name_reassigned_after_a_later_node_still_means_its_last_assignment() -> None:
    # The graph's order puts the last `a` (x*3) before the first (x*2, read again as `first`):
    # the name follows the program, not the order of the nodes.
    program = "a = x*2\nfirst = a\na = x*3\nout = a*first"
    document = check(EVALUATOR, program, {"x": 1.5}, {"nodes": {"a": 3}}, reveal=True)
    results = node_results(document)
    nodes = EVALUATOR.evaluate(program, {"x": 1.5})["graph"]["nodes"]
    written = {program[slice(*node["span"])]: node["id"] for node in nodes}
    last, first = written["x*3"], written["x*2"]
    assert last < first
    assert results["nodes.a"]["expected"] == 3  # d(a*first)/da = first = x*2
    assert results["nodes.a"]["verdict"] == "correct"
    assert results[f"nodes.{first}"]["expected"] == 4.5  # = a = x*3
    assert results[f"nodes.{first}"]["verdict"] == "unanswered"


def test_a_name_rebound_to_another_nodes_value_answers_for_that_node() -> None:
    # `y = z`: y refers to z's node, here answered as y; the x*2 node y made is left behind.
    program = "z = x*x\ny = x*2\nw = y + z\ny = z\nw"
    document = check(EVALUATOR, program, {"x": 1.5}, {"nodes": {"y": 1}}, reveal=True)
    results = node_results(document)
    assert results["nodes.y"]["verdict"] == "correct"
    assert "nodes.z" not in results  # one node, one item: named as it was answered
    left_behind = [item for item, result in results.items() if result["verdict"] == "unanswered"]
    assert "nodes.2" in left_behind  # x*2, by its id


def test_an_input_whose_name_is_reassigned_is_answered_by_id() -> None:
    program = "x = Value(2.0)\nx = x*x"
    answers = {"nodes": {"0": 4, "x": 1}, "gradients": {"x": 4}}
    document = check(EVALUATOR, program, {}, answers, reveal=True)
    assert {result["item"]: result["verdict"] for result in document["results"]} == {
        "value": "unanswered",
        "gradients.x": "correct",
        "nodes.0": "correct",
        "nodes.x": "correct",
    }


@pytest.mark.parametrize(
    ("program", "nodes", "twice"),
    [
        ("x = Value(2.0)\ny = x * 3", {"2": 1, "y": 1}, ["nodes.2", "nodes.y"]),
        ("x = Value(2.0)\ny = x * 3", {"x": 3, "0": 3}, ["nodes.x", "nodes.0"]),
    ],
)
def test_a_node_answered_twice_is_refused_not_guessed(
    program: str, nodes: dict[str, float], twice: list[str]
) -> None:
    with pytest.raises(AnswerError) as refused:
        check(EVALUATOR, program, {}, {"nodes": nodes})
    assert refused.value.items == twice
    assert "answer the same node" in refused.value.message


def test_a_formula_too_deep_for_sympy_is_refused_as_too_expensive_to_check() -> None:
    lines = ["x = Value(0.5)", "a0 = x", *(f"a{i} = a{i - 1} * x + 1" for i in range(1, 60))]
    # An answer is judged at the sample points, without sympy; revealing the derivative needs it.
    judged = check(EVALUATOR, "\n".join(lines), {}, {"derivatives": {"x": "1"}})
    assert judged["results"][-1]["verdict"] == "incorrect"
    with pytest.raises(AutogradError) as refused:
        check(EVALUATOR, "\n".join(lines), {}, {"derivatives": {"x": "1"}}, reveal=True)
    assert refused.value.kind == "check_too_expensive"
    assert "nests too deeply" in refused.value.message


def test_a_name_whose_last_assignment_the_output_does_not_use_is_no_item() -> None:
    # y ends as x*3, which w does not use: the x*2 the name first meant is answered by its id.
    program = "y = x*2\nw = y + 1\ny = x*3\nw"
    document = check(EVALUATOR, program, {"x": 1.5}, {"nodes": {"2": 1}}, reveal=True)
    results = node_results(document)
    assert "nodes.y" not in results
    assert results["nodes.2"]["verdict"] == "correct"
    with pytest.raises(AnswerError) as refused:
        check(EVALUATOR, program, {"x": 1.5}, {"nodes": {"y": 1}})
    assert refused.value.items == ["nodes.y"]


@pytest.mark.slow
def test_a_formula_too_large_to_reveal_is_refused_within_the_symbolic_budget() -> None:
    # Each line uses x twice: the derivative written out doubles with every line. Revealing it
    # runs into the symbolic budget of /v1/derivatives (2 s), a 422, well before the request's.
    from conftest import make_app

    program = "x = Value(0.1)\n" + "\n".join(["x = (x + 1) * (x - 1)"] * 11)
    body = {"expression": program, "answers": {"derivatives": {"x": "2*x"}}, "reveal": True}
    response = make_app().test_client().post("/v1/check", json=body)
    assert response.status_code == 422
    assert response.get_json()["type"].endswith("/check-too-expensive")


def test_feedback_names_a_value_the_program_named_once_by_its_name() -> None:
    # micrograd's sanity check: q is used twice, and its gradient is 1 + x = -3; an answer of 1
    # counts the path through h + q only.
    program = (
        "x = Value(-4.0)\nz = 2 * x + 2 + x\nq = z.relu() + z * x\nh = (z * z).relu()\n"
        "y = h + q + q * x\ny.backward()"
    )
    result = check(EVALUATOR, program, {}, {"nodes": {"q": 1.0}})
    [item] = [r for r in result["results"] if r["item"] == "nodes.q"]
    assert item["feedback"]["code"] == "one_path_only"
    assert item["feedback"]["message"].startswith("q is used 2 times")


def test_every_node_of_a_large_program_answered_is_checked_within_the_budget(
    client: FlaskClient,
) -> None:
    # 2,998 nodes, past the size at which slips are diagnosed: each answer is judged without a
    # pass over the graph of its own (999 such passes outlasted the 5 s request budget).
    lines = ["x = Value(1.0)", "a1 = x * 1.0001 + x"]
    lines += [f"a{i} = a{i - 1} * 1.0001 + x" for i in range(2, 1000)]
    answers = {"nodes": {f"a{i}": 1.0 for i in range(1, 1000)}}
    response = client.post("/v1/check", json={"expression": "\n".join(lines), "answers": answers})
    assert response.status_code == 200
    results = response.get_json()["results"]
    assert sum(result["verdict"] == "correct" for result in results) == 1  # the output's own 1
    assert len([r for r in results if r["verdict"] != "unanswered"]) == 999


def test_a_name_the_program_computes_is_no_input_of_a_derivative() -> None:
    program = "h = u + v\nout = h * h - w / h"
    answers = {"derivatives": {"u": "2*h + w/h**2", "w": "-1/q"}}
    result = check(EVALUATOR, program, {"u": 1, "v": 2, "w": 3}, answers)
    feedback = {item["item"]: item["feedback"] for item in result["results"]}
    assert feedback["derivatives.u"]["code"] == "unknown_variable"
    assert feedback["derivatives.u"]["message"] == (
        "The answer uses h, which the program computes: write the derivative in its inputs "
        "(u, v, w)."
    )
    assert "not a variable of the expression" in feedback["derivatives.w"]["message"]


def test_a_revealed_derivative_writes_floats_as_python_does() -> None:
    result = check(EVALUATOR, "0.1*a*b", {"a": 1, "b": 2}, {"derivatives": {}}, reveal=True)
    expected = {item["item"]: item.get("expected") for item in result["results"]}
    assert (expected["derivatives.a"], expected["derivatives.b"]) == ("0.1*b", "0.1*a")


def test_answers_are_judged_at_the_points_without_sympy(monkeypatch: pytest.MonkeyPatch) -> None:
    # Sympy's simplification takes up to a second on a wrong answer: the points decide instead,
    # so two of a neuron's ordinary slips no longer exhaust the request's symbolic budget.
    def no_sympy(*args: Any) -> bool:
        raise AssertionError("sympy was asked")

    monkeypatch.setattr("service.check._Symbolic.simplifies_to_zero", no_sympy)
    bindings = {"w1": 0.5, "x1": 2, "w2": -1, "x2": 1, "b": 0.5}
    slips = {
        "w1": "x1*(1-(w1*x1 + w2*x2 + b)**2)",  # tanh's 1 - t² taken of its argument
        "w2": "x2*(1-(w1*x1 + w2*x2 + b)**2)",
        "b": "1 - tanh(w1*x1 + w2*x2 + b)**2",
    }
    result = check(EVALUATOR, "tanh(w1*x1 + w2*x2 + b)", bindings, {"derivatives": slips})
    verdicts = {item["item"]: item["verdict"] for item in result["results"]}
    assert verdicts["derivatives.w1"] == verdicts["derivatives.w2"] == "incorrect"
    assert verdicts["derivatives.b"] == "correct"


@pytest.mark.parametrize("answer", ["b*(a-1)/(a-1)", "b*log(a-2)/log(a-2)", "-exp(log(-b))"])
def test_an_answer_undefined_at_the_bindings_is_not_the_derivative_there(answer: str) -> None:
    result = check(EVALUATOR, "a * b", {"a": 1, "b": 2}, {"derivatives": {"a": answer}})
    assert result["results"][3]["verdict"] == "incorrect"


@pytest.mark.parametrize(
    ("answer", "construct"),
    [("Value(2)", "Value"), ("a += 1", "+="), ("a.backward()", ".backward"), ("print(1)", "print"),
     ("return 1", "return"), ("a.data", ".data")],
)  # fmt: skip
def test_a_program_construct_in_an_answer_is_named_as_one(answer: str, construct: str) -> None:
    # The parser's own advice is for programs ("declares an input on a line of its own"): an
    # answer is told to be one expression.
    result = check(EVALUATOR, "a * b", {"a": 1, "b": 2}, {"value": answer})
    feedback = result["results"][0]["feedback"]
    assert feedback["code"] == "unparsable"
    assert feedback["message"] == (
        "The answer must be one expression, not a program: write the number or formula alone, "
        f"without '{construct}'."
    )


def test_a_variable_exponent_in_an_answer_is_told_how_to_write_it() -> None:
    answers = {"derivatives": {"a": "b*a**(b-1)", "b": "log(a)*exp(b*log(a))"}}
    result = check(EVALUATOR, "exp(b*log(a))", {"a": 2, "b": 3}, answers)
    feedback = {item["item"]: item["feedback"] for item in result["results"]}
    assert "write x ** y as exp(y * log(x))" in feedback["derivatives.a"]["message"]
    assert "gradient" not in feedback["derivatives.a"]["message"]
    assert feedback["derivatives.b"]["code"] == "correct"


@pytest.mark.parametrize(
    ("expression", "bindings", "answer"),
    [("x**2", {"x": 3}, "2*x + relu(x - 2.6)"), ("x**2", {"x": 10}, "2*x + relu(x - 3)"),
     ("a*b", {"a": 100, "b": 100}, "b + relu(a - 50)")],
)  # fmt: skip
def test_an_answer_wrong_only_near_the_bindings_is_wrong(
    expression: str, bindings: dict[str, float], answer: str
) -> None:
    # The sample points lie between 0.2 and 2.5 in size; the bindings are judged too, being where
    # the learner was asked.
    name = next(iter(bindings))
    result = check(EVALUATOR, expression, bindings, {"derivatives": {name: answer}})
    [item] = [item for item in result["results"] if item["item"] == f"derivatives.{name}"]
    assert item["verdict"] == "incorrect"


@pytest.mark.parametrize("tolerance", [{"absolute": "1"}, {"relative": "0.5"}, {"absolute": True}])
def test_a_tolerance_is_a_number_not_its_text(
    client: FlaskClient, tolerance: dict[str, Any]
) -> None:
    body = {
        "expression": "a",
        "bindings": {"a": 1},
        "answers": {"value": 1.5},
        "tolerance": tolerance,
    }
    response = client.post("/v1/check", json=body)
    assert response.status_code == 422
    (sent,) = tolerance.values()
    # Named as the client wrote it, as a binding's value is: `"1"`, `true`, not Python's types.
    assert f"must be a finite number, not {json.dumps(sent)}" in response.get_json()["detail"]


# -- what the feedback says, item by item ---------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "bindings", "answer", "expected"),
    [
        # the -1 of `- p` taken as +1: 4 answered 6, a different magnitude
        ("p * q - p", {"p": -3, "q": 5}, 6, "At p * q - p, the gradient sent to p has the wrong"),
        ("a * c - a", {"a": 2, "c": 4}, 5, "At a * c - a, the gradient sent to a has the wrong"),
        # the whole answer's sign: the magnitude is right
        ("p * q - p", {"p": -3, "q": 5}, -4, "The magnitude is right but the sign is wrong"),
    ],
)
def test_a_sign_slip_on_one_edge_is_told_from_the_whole_answers_sign(
    expression: str, bindings: dict[str, float], answer: float, expected: str
) -> None:
    name = next(iter(bindings))
    result = feedback(expression, bindings, {"gradients": {name: answer}}, f"gradients.{name}")
    assert result["feedback"]["code"] == "wrong_sign"
    assert result["feedback"]["message"].startswith(expected)


def test_a_reassigned_names_node_is_named_by_what_it_computes() -> None:
    # s += a makes s + a from the s before it: neither `s` (two nodes carry it) nor `s += a`
    program = "s = a * b\ns += a\nout = s * c + s"
    # node 3 is s + a, used twice: its gradient c + 1 = 5 answered 1, one use counted only
    document = check(EVALUATOR, program, {"a": 2, "b": 3, "c": 4}, {"nodes": {"3": 1}})
    [result] = [r for r in document["results"] if r["item"] == "nodes.3"]
    assert result["feedback"]["message"].startswith("s + a is used 2 times"), result


@pytest.mark.parametrize(
    ("answer", "says"), [(4, "counts only one of them"), (8, "leaves one of them out")]
)
def test_one_path_only_says_whether_one_use_or_all_but_one_were_counted(
    answer: float, says: str
) -> None:
    result = feedback("a * a * a", {"a": 2}, {"gradients": {"a": answer}}, "gradients.a")
    assert result["feedback"]["message"] == (
        f"a is used 3 times, and the contributions from every use add up (the += of the "
        f"backward pass); this answer {says}."
    )


@pytest.mark.parametrize(
    ("answer", "names", "first"),
    [("a + b", "the variables a, b", (0, 1)), ("2 * (a)", "the variable a", (5, 6))],
)
def test_a_number_asked_for_names_its_variables_and_where(
    answer: str, names: str, first: tuple[int, int]
) -> None:
    result = feedback("a * b", {"a": 1, "b": 2}, {"value": answer}, "value")
    assert result["feedback"] == {
        "code": "not_a_number",
        "message": f"The answer must be a number, but it contains {names}.",
        "position": at(*first),
    }


@pytest.mark.parametrize(
    ("expression", "bindings", "answer"),
    [
        ("relu(a * b) * c", {"a": 1, "b": 2, "c": 3}, "c*b*Heaviside(a*b)"),
        (
            "relu(a * b) * c",
            {"a": 1, "b": 2, "c": 3},
            "b*c*Heaviside(a*b, 0)",
        ),  # as sympy writes it
        ("relu(a * b) * c", {"a": -1, "b": 2, "c": 3}, "c*b*Heaviside(a*b)"),  # off: 0 here
        ("relu(a)", {"a": 2}, "Heaviside(a)"),
        ("a * b", {"a": 1, "b": 2}, "b + 0*Heaviside(a - 3)"),
    ],
)
def test_relus_derivative_may_be_written_as_heaviside(
    expression: str, bindings: dict[str, float], answer: str
) -> None:
    result = feedback(expression, bindings, {"derivatives": {"a": answer}}, "derivatives.a")
    assert result["feedback"]["code"] == "correct", result


@pytest.mark.parametrize(
    ("expression", "answer", "point"),
    [
        # a step of the answer's own, crossed as its relus are
        ("a * b", "b*Heaviside(3 - a)", "a = 3, b = 2"),
        ("relu(a) * b", "b*Heaviside(a) + Heaviside(a - 100)", "a = 101, b = 2"),
    ],
)
def test_an_answers_heaviside_is_crossed_as_its_relus_are(
    expression: str, answer: str, point: str
) -> None:
    result = feedback(expression, {"a": 1, "b": 2}, {"derivatives": {"a": answer}}, "derivatives.a")
    assert result["feedback"]["code"] == "incorrect"
    assert f"at {point} the derivative is" in result["feedback"]["message"]


def test_an_answers_relu_across_a_narrow_piece_is_crossed_along_its_inputs_at_once() -> None:
    # The piece is 0 < a - b < 0.1: a step along a or b alone leaves it before a + b reaches 10.
    wedge = "a*b * relu(a - b)/(a - b) * relu(b - a + 0.1)/(b - a + 0.1)"
    bindings = {"a": 1.05, "b": 1.0}
    wrong = feedback(
        wedge, bindings, {"derivatives": {"a": "b + relu(a + b - 10)"}}, "derivatives.a"
    )
    assert wrong["feedback"]["code"] == "incorrect"
    assert wrong["feedback"]["message"].startswith("Not correct: at a = 6.05, b = 6 the derivative")
    right = feedback(wedge, bindings, {"derivatives": {"a": "b"}}, "derivatives.a")
    assert right["feedback"]["code"] == "correct"


@pytest.mark.parametrize("second", ["0.5", "1e-400", "a", "1 - 1"])  # 1e-400 is 0.0 as a double
def test_heaviside_takes_only_relus_value_at_zero_as_its_second_argument(second: str) -> None:
    answer = f"b*Heaviside(a*b, {second})"
    result = feedback("relu(a * b)", {"a": 2, "b": 5}, {"derivatives": {"a": answer}},
                      "derivatives.a")  # fmt: skip
    assert result["feedback"]["code"] == "unparsable"
    assert "write Heaviside(x) or Heaviside(x, 0)" in result["feedback"]["message"]
    assert result["feedback"]["position"] == at(17, 17 + len(second))


ZEROS = ["b*Heaviside(a*b-1,0)", "b*Heaviside(a*b, 0.0)", "b*Heaviside(a*b, -0)",
         "b*Heaviside(1*a*b - 1,0e3)"]  # fmt: skip


@pytest.mark.parametrize("answer", ZEROS)
def test_heaviside_at_zero_may_be_written_as_any_zero(answer: str) -> None:
    # `-1,0` is the end of one argument and the next, not a decimal comma.
    result = feedback("relu(a * b - 1)", {"a": 2, "b": 5}, {"derivatives": {"a": answer}},
                      "derivatives.a")  # fmt: skip
    assert result["feedback"]["code"] == "correct", result


@pytest.mark.parametrize(
    ("answer", "code"),
    [("b*Heaviside(a-1,0)", "correct"), ("1,0*b*Heaviside((a-1)*1,0)", "correct"),
     ("b*Heaviside(a-1,5)", "unparsable"), ("b*Heaviside(a-1,1e-400)", "unparsable")],
)  # fmt: skip
def test_a_comma_between_heavisides_arguments_is_no_decimal_comma(answer: str, code: str) -> None:
    # In Russian `1,5` is 1.5, but not where a comma separates Heaviside's two arguments: else
    # `a-1,5` would silently become a - 1.5.
    answers = {"derivatives": {"a": answer}}
    results = check(EVALUATOR, "relu(a - 1) * b", {"a": 2, "b": 3}, answers, locale="ru")
    (result,) = [r for r in results["results"] if r["item"] == "derivatives.a"]
    assert result["feedback"]["code"] == code, result


@pytest.mark.parametrize("answer", ["b*Heaviside()", "b*Heaviside(a*b,0,0)", "b*Heaviside(a,0,5)"])
def test_heaviside_says_how_many_arguments_it_takes(answer: str) -> None:
    result = feedback("relu(a * b)", {"a": 2, "b": 5}, {"derivatives": {"a": answer}},
                      "derivatives.a")  # fmt: skip
    assert result["feedback"]["code"] == "unparsable"
    assert (
        "Heaviside() takes one argument, or two: Heaviside(x) or Heaviside(x, 0)"
        in (result["feedback"]["message"])
    )
    assert result["feedback"]["position"] == at(2, len(answer))


@pytest.mark.parametrize("answer", ["b*heaviside(a*b)", "b * HEAVISIDE(a * b, 0)"])
def test_heaviside_spelt_otherwise_says_how_it_is_written(answer: str) -> None:
    result = feedback("relu(a * b)", {"a": 2, "b": 5}, {"derivatives": {"a": answer}},
                      "derivatives.a")  # fmt: skip
    assert result["feedback"]["code"] == "unparsable"
    assert result["feedback"]["message"].startswith("relu's derivative is written Heaviside(x)")
    assert result["feedback"]["position"]["start"] == answer.lower().index("eaviside") - 1


@pytest.mark.parametrize("item", ["value", "gradients.a"])
def test_sympys_e_in_a_number_is_told_how_an_answer_writes_it(item: str) -> None:
    group, _, name = item.partition(".")
    answers = {group: {name: "2*E"} if name else "2*E"}
    result = feedback(LESSON["expression"], LESSON["bindings"], answers, item)
    assert result["feedback"] == {
        "code": "not_a_number",
        "message": "The answer must be a number, but it contains the variable E: write e as "
        "exp(1).",
        "position": at(2, 3),
    }


def test_sympys_e_is_told_how_an_answer_writes_it() -> None:
    answer = "b*E"  # e as sympy writes it
    result = feedback("exp(1) * b", {"b": 2}, {"derivatives": {"b": answer}}, "derivatives.b")
    assert result["feedback"]["code"] == "unknown_variable"
    assert result["feedback"]["message"].endswith("write e as exp(1).")
    assert result["feedback"]["position"] == at(2, 3)


def test_heaviside_is_no_function_of_expressions(client: FlaskClient) -> None:
    # Value has no such method: only an answer writes it.
    response = client.post(
        "/v1/gradients", json={"expression": "Heaviside(a)", "bindings": {"a": 1}}
    )
    assert response.status_code == 422
    assert response.get_json()["type"].endswith("/unknown-function")


def test_an_input_is_answered_by_its_name_and_its_item_named_so(client: FlaskClient) -> None:
    body = {**LESSON, "answers": {"nodes": {"a": 10, "2": 10}}}
    document = client.post("/v1/check", json=body).get_json()
    verdicts = {result["item"]: result["verdict"] for result in document["results"]}
    assert verdicts["nodes.a"] == verdicts["nodes.2"] == "correct"
    assert "nodes.0" not in verdicts  # a is node 0: one item, named as it was answered
    assert document["score"] == 1


def test_a_formula_close_to_the_derivative_is_not_told_to_round_less() -> None:
    result = feedback("a * a", {"a": 3}, {"derivatives": {"a": "2*a + 0.0000001"}}, "derivatives.a")
    assert result["feedback"]["code"] == "outside_tolerance"
    assert result["feedback"]["message"].startswith("Close, but not the derivative")
    assert "round less" not in result["feedback"]["message"]


@pytest.mark.parametrize(
    ("expression", "bindings", "value"),
    [
        ("a * a", {"a": 3}, 6),
        # 1 there, as a gradient passed through unchanged would be: still the value
        ("a * b", {"a": 2, "b": 1}, 1),
        ("a * b + a", {"a": 2, "b": -2}, -1),
    ],
)
def test_the_derivatives_value_where_its_formula_is_asked_for(
    expression: str, bindings: dict[str, float], value: float
) -> None:
    answers = {"derivatives": {"a": value}}
    result = feedback(expression, bindings, answers, "derivatives.a")
    assert result["verdict"] == "incorrect"
    assert result["feedback"]["message"].startswith("This is the derivative's value at")
    # a constant derivative is a number, and right
    right = feedback("a * 6", {"a": 3}, {"derivatives": {"a": "6"}}, "derivatives.a")
    assert right["verdict"] == "correct"


def test_an_input_the_output_does_not_use_has_no_node_to_answer() -> None:
    program = "a = Value(1.0)\nb = Value(2.0)\nu = Value(3.0)\nout = a*b"
    with pytest.raises(AnswerError) as refused:
        check(EVALUATOR, program, {}, {"nodes": {"u": 0}})
    assert refused.value.message.startswith("u is an input the output does not use")
    assert "gradients.u" in refused.value.message


def test_heaviside_where_a_number_is_asked_is_unparsable_as_any_function() -> None:
    result = feedback("a * b", {"a": 1, "b": 2}, {"value": "Heaviside(1)*2"}, "value")
    assert result["feedback"]["code"] == "unparsable"
    assert "Heaviside is not needed" not in result["feedback"]["message"]


@pytest.mark.parametrize("blank", [None, ""])
def test_a_blank_answer_beside_a_real_one_for_the_same_node_answers_nothing(
    blank: str | None,
) -> None:
    document = check(EVALUATOR, "a * b", {"a": 1, "b": 2}, {"nodes": {"0": blank, "a": 2}})
    results = node_results(document)
    assert results["nodes.a"]["verdict"] == "correct"
    assert "nodes.0" not in results
