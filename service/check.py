"""Checking a learner's answers against the graph: a verdict per item and the likely mistake.

A number is judged against the engine's own forward and backward pass, within a tolerance. A
symbolic derivative is parsed by our grammar (never evaluated as code), then judged by sympy: the
difference with the true derivative is simplified, and where that cannot decide, both are compared
at random points, as CAS graders do.

An incorrect answer is compared with the answers each typical mistake would produce, computed from
the graph rather than listed per exercise. The gradient at a target node is a sum over paths of
products of local derivatives, so one slip changes it in a way the graph predicts:

- a local derivative `l` on the edge parent -> child replaced by a wrong `w` (the operand's own
  value, the node's value, 1, the other operand, `-l`, a relu taken as on) moves the target's
  gradient by `(w - l) * grad(parent) * d(child)/d(target)`;
- a node whose gradient kept only one incoming contribution (the `+=` of the backward pass
  forgotten) moves it by `(contribution - grad(node)) * d(node)/d(target)`.

`d(x)/d(target)` is one forward-mode sweep from the target, so every candidate costs O(1) once the
sweep is done. A symbolic answer is matched the same way at every sample point, and where one of
its own relus keeps one state at all of them, at points past that relu's kink too.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from functools import cache, cached_property
from itertools import islice
from typing import TYPE_CHECKING, Any

from service.budget import time_budget
from service.derivatives import DEFAULT_SYMBOLIC_LIMITS
from service.engine import format_number
from service.errors import (
    AnswerError,
    AutogradError,
    BudgetExceeded,
    DomainError,
    ExpressionError,
    RequestTooLarge,
    Span,
    line_column,
)
from service.evaluator import Compiled, Evaluator, run
from service.i18n import DEFAULT_LOCALE, Message, _, _n, writes_decimal_comma
from service.limits import Limits
from service.numbers import NonFiniteNumber
from service.operations import ANSWER_FUNCTIONS, BY_NAME
from service.parser import OPERATOR_LOOKALIKES, Node, ParsedExpression, parse, postorder

if TYPE_CHECKING:  # sympy is imported only when a symbolic answer is judged
    import sympy

VERDICTS = ("correct", "incorrect", "unanswered")
CODES = (
    "correct",
    "unanswered",
    "wrong_sign",
    "one_path_only",
    "wrong_local_derivative",
    "dead_relu",
    "outside_tolerance",
    "not_a_number",
    "unparsable",
    "unknown_variable",
    "incorrect",
)
# When an answer fits several mistakes, the most specific one is named.
_PRIORITY = ("dead_relu", "one_path_only", "wrong_sign", "wrong_local_derivative")

# A learner's answer is a short formula: these bounds keep hostile ones cheap to refuse. It is one
# expression, so the parser stops where a second statement starts (see `_parse_answer`).
ANSWER_LIMITS = Limits(
    max_expression_length=1000,
    max_depth=50,
    max_nodes=500,
    max_identifier_length=64,
    max_statements=1,
)
SECOND_STATEMENT = "too_many_statements"  # the parser's refusal of a statement past the limit
DIAGNOSIS_NODES = 300  # mistakes are looked for in graphs up to this size; beyond, right or wrong
SIMPLIFY_SECONDS = 1.0  # sympy's simplification of one difference; past it, points decide
SAMPLE_POINTS = 6  # points at which a symbolic answer must agree
SAMPLE_TRIES = 40  # points drawn at most, since some fall outside the expression's domain
# An answer's relu that keeps one state at every sample point is crossed along its inputs (each,
# then all at once), from
# the bindings and the first sample points, in steps of 1, 2 and 5 times a power of ten from 0.01
# to 5e9 (a kink at a = 3 or at a = 1e6 alike, and the point named in round numbers), with at
# most KINK_POINTS points past it per direction and KINK_TRIES in all, found in at most KINK_RUNS
# runs of the answer (a long one with many inputs costs no more).
KINK_BASES = 3
KINK_STEPS = tuple(m * 10.0**e for e in range(-2, 10) for m in (1, 2, 5))
KINK_POINTS = 3
KINK_TRIES = 40
KINK_RUNS = 1000
_KINKED = ("relu", "Heaviside")  # an answer's operations with a kink where their input is 0
SIMPLIFY_KIND = "simplification_too_slow"  # an inner budget: its overrun falls back to points
CHECK_KIND = "check_too_expensive"
# The refusals of answers that no schema can foresee: items the expression lacks, symbolic work
# past its budget (the HTTP layer maps each to a problem type).
ANSWER_KINDS = ("unknown_answer_items", "duplicate_answer_items", CHECK_KIND)
UNUSED = -1  # the target of an input the output does not depend on: it has no node


@dataclass(frozen=True)
class Tolerance:
    """How far a number may be from the expected one: `absolute + relative * |expected|`."""

    relative: float = 1e-6
    absolute: float = 1e-9

    def accepts(self, answer: float, expected: float) -> bool:
        return abs(answer - expected) <= self.absolute + self.relative * abs(expected)

    def within(self, expected: list[float]) -> Tolerance:
        """This tolerance for a formula whose expected values are `expected`: the absolute part
        shrinks with values smaller than 1, so `2e-12*b` is not taken for `1e-12*b` (a number
        the learner types is judged as written, with the request's tolerance)."""
        scale = max(map(abs, expected), default=0.0)
        if scale >= 1.0:
            return self
        # A derivative that is 0 at every point leaves only rounding's residue, far below 1e-9
        # for inputs of the sample points' size: `1e-10*x` is not 0.
        return Tolerance(self.relative, self.absolute * (scale or ZERO_SCALE))


DEFAULT_TOLERANCE = Tolerance()
# A formula is right or wrong, however wide the request's tolerance for numbers: its values at
# the sample points must agree as two ways of computing one number do, up to rounding.
EQUIVALENT = Tolerance(relative=1e-8, absolute=1e-9)
ZERO_SCALE = 1e-3  # the absolute part's share kept for a formula whose values are all 0
# What a formula's floats may be off by, as a share of its largest term: cancelling terms of size
# M leave about 1e-16 M each, and 1e-12 M allows for thousands of them.
ROUNDING = 1e-12
# "Close": off by at most 1% (or 0.01), as a rounded or slightly miscomputed answer is.
CLOSE = Tolerance(relative=1e-2, absolute=1e-2)


class CheckTooExpensive(BudgetExceeded):
    """The symbolic work of checking derivatives ran out of its time, and was stopped."""

    def __init__(self, seconds: float) -> None:
        message = _(
            "checking the derivatives symbolically took longer than the {seconds} s it may take: "
            "the expression's derivative formulas grow too large; leave out the answers' "
            "derivatives to have the value, gradients and nodes checked",
            seconds=format(seconds, "g"),
        )
        super().__init__(CHECK_KIND, seconds, message)


# -- what a mistake would have answered --------------------------------------------------------


@dataclass(frozen=True)
class Mistake:
    """One slip the graph predicts: it moves the gradient of a target node by
    `shift * d(at)/d(target)`; the flipped sign (`at` None) answers minus the gradient."""

    code: str
    shift: float
    at: int | None
    node: int | None = None  # the node the feedback names
    operand: int | None = None  # and the operand, for a wrong local derivative or sign
    count: int = 0  # how many contributions the node receives, for one path only
    left_out: bool = False  # one path only: every contribution but one counted, not only one


_AUGMENTED_STATEMENT = re.compile(r"([A-Za-z_]\w*) ?([-+*/])= ?(.+)")


def _node_text(expression: str, node: dict[str, Any], nodes: list[dict[str, Any]]) -> str:
    """How the learner knows a node: an input by its name (a program's declaration writes it
    before `Value(2.0)`), a value the program named by that name unless several nodes carry it
    (a reassigned name), else its text in the expression (`s + a` for the statement `s += a`),
    shortened when long."""
    if node["kind"] == "variable":
        return str(node["label"])
    name = node.get("name")
    if name and sum(other.get("name") == name for other in nodes) == 1:
        return str(name)
    start, end = node["span"]
    text = " ".join(expression[start:end].split()) or node["label"]
    augmented = _AUGMENTED_STATEMENT.fullmatch(text)
    if augmented:  # `s += a` is the statement: the node is s + a, from the s before it
        name, operator, operand = augmented.groups()
        operand = operand if re.fullmatch(r"[\w.]+", operand) else f"({operand})"
        text = f"{name} {operator} {operand}"
    return text if len(text) <= 40 else f"{text[:19]}…{text[-19:]}"


def _wrong_locals(nodes: list[dict[str, Any]], node: dict[str, Any], k: int) -> list[float]:
    """The wrong local derivatives a learner plausibly uses on edge `k` of `node`. Always the
    same list for the same graph, whatever the numbers."""
    child = nodes[node["children"][k]]
    x = child["value"]
    wrong = [
        x,  # d(a * b)/da taken as a: the operand's own value
        node["value"],  # the node's own value: d log(a)/da taken as log(a)
        1.0,  # the gradient passed through without the local derivative
    ]
    if len(node["children"]) == 2:  # the other operand, e.g. b / a for d(a / b)/da
        wrong.append(nodes[node["children"][1 - k]]["value"])
    if node["op"] == "**" and node["exponent"] is not None:
        exponent = node["exponent"]
        wrong.append(_safe(lambda: exponent * x**exponent))  # the exponent not lowered
        wrong.append(_safe(lambda: x ** (exponent - 1)))  # the factor k forgotten
    if node["op"] == "/" and k == 1:  # d(a / b)/db = -a / b**2, the power rule on b**-1
        numerator = nodes[node["children"][0]]["value"]
        wrong.append(_safe(lambda: -numerator / x))  # the exponent not lowered
        wrong.append(_safe(lambda: -1.0 / (x * x)))  # the numerator left out
    if node["op"] == "tanh":
        wrong.append(1.0 - x * x)  # 1 - a**2 rather than 1 - tanh(a)**2
    return wrong


def _safe(compute: Callable[[], float]) -> float:
    try:
        value = compute()
    except (OverflowError, ZeroDivisionError, ValueError):
        return math.nan
    return value if isinstance(value, float) and math.isfinite(value) else math.nan


class Mistakes:
    """Every slip one evaluated graph predicts, found once and then applied to any target node.

    The list's order depends only on the graph's shape, so the same slip has the same index at
    every sample point of a symbolic answer; it runs from the most specific code to the least.
    """

    def __init__(self, expression: str, document: dict[str, Any]) -> None:
        self.expression = expression
        self.value = document["value"]
        self.nodes = nodes = document["graph"]["nodes"]
        found = [Mistake("wrong_sign", 0.0, None)]
        if len(nodes) <= DIAGNOSIS_NODES:
            found += self._slips()
        self.all = sorted(found, key=lambda mistake: _PRIORITY.index(mistake.code))
        self._moves = [(mistake.shift, mistake.at) for mistake in self.all]
        # Only the flipped sign (a graph too large to diagnose) needs no gradients toward nodes.
        self._flips_only = all(at is None for _shift, at in self._moves)

    def _slips(self) -> list[Mistake]:
        nodes = self.nodes
        found: list[Mistake] = []
        incoming: dict[int, list[float]] = {}
        for node in nodes:
            parent_grad, parent = node["grad"], node["id"]
            for k, (child, local) in enumerate(
                zip(node["children"], node["local_grads"], strict=True)
            ):
                incoming.setdefault(child, []).append(local * parent_grad)
                if node["op"] == "relu":  # taken as on: local derivative 1
                    found.append(Mistake("dead_relu", (1.0 - local) * parent_grad, child, parent))
                    continue
                found.append(Mistake("wrong_sign", -2 * local * parent_grad, child, parent, child))
                found += [
                    Mistake(
                        "wrong_local_derivative", (w - local) * parent_grad, child, parent, child
                    )
                    for w in _wrong_locals(nodes, node, k)
                ]
        for node, contributions in sorted(incoming.items()):
            count = len(contributions)
            if count > 1:
                total = nodes[node]["grad"]
                found += [
                    Mistake("one_path_only", c - total, node, node, count=count)
                    for c in contributions
                ]
            if count > 2:  # `a * a * a` answered 2a·a, one use of three forgotten
                found += [
                    Mistake("one_path_only", -c, node, node, count=count, left_out=True)
                    for c in contributions
                ]
        return found

    def answers(self, target: int | None) -> list[float]:
        """What each slip would answer for the gradient of node `target` (None: the value)."""
        if target is None:
            return [-self.value if m.at is None else math.nan for m in self.all]
        if target == UNUSED:  # no path reaches it: no slip can give it a gradient
            return [math.nan] * len(self.all)
        nodes = self.nodes
        grad = nodes[target]["grad"]
        if self._flips_only:
            return [-grad] * len(self._moves)
        # d(node)/d(target) for every node: forward mode from the target (children come first).
        tangent = [0.0] * len(nodes)
        tangent[target] = 1.0
        for node in nodes[target + 1 :]:
            tangent[node["id"]] = sum(
                local * tangent[child]
                for child, local in zip(node["children"], node["local_grads"], strict=True)
            )
        return [-grad if at is None else grad + shift * tangent[at] for shift, at in self._moves]

    def message(self, index: int) -> Message:
        mistake = self.all[index]
        about: dict[str, Any] = {"count": mistake.count, "left_out": mistake.left_out}
        for role in ("node", "operand"):
            at = getattr(mistake, role)
            if at is not None:
                about[role] = _node_text(self.expression, self.nodes[at], self.nodes)
        return _mistake_message(mistake.code, about)


def _dead_relu_on_path(expression: str, document: dict[str, Any], target: int) -> str | None:
    """A relu that is off and would otherwise pass gradient down to `target`, as text."""
    nodes = document["graph"]["nodes"]
    if len(nodes) > DIAGNOSIS_NODES:
        return None
    below = {target}  # nodes from which `target` can be reached going down
    for node in nodes[target + 1 :]:
        if any(child in below for child in node["children"]):
            below.add(node["id"])
    for node in nodes:
        if node["op"] == "relu" and node["id"] in below and node["local_grads"] == [0.0]:
            return _node_text(expression, node, nodes)
    return None


# -- feedback ----------------------------------------------------------------------------------


def _mistake_message(code: str, about: Mapping[str, Any]) -> Message:
    if code == "wrong_sign" and "node" in about:  # one edge's local derivative, its sign flipped
        return _(
            "At {node}, the gradient sent to {operand} has the wrong sign: the local derivative "
            "there is negative where this answer has it positive, or the other way round (the -1 "
            "of a subtraction, a negative operand).",
            node=about["node"],
            operand=about["operand"],
        )
    if code == "wrong_sign":  # the whole answer's sign
        return _(
            "The magnitude is right but the sign is wrong: look for a negative local derivative "
            "in the backward pass, such as the -1 of a subtraction or a negative operand."
        )
    if code == "one_path_only" and about.get("left_out"):
        return _n(
            "{node} is used {count} time, and the contributions from every use add up "
            "(the += of the backward pass); this answer leaves one of them out.",
            "{node} is used {count} times, and the contributions from every use add up "
            "(the += of the backward pass); this answer leaves one of them out.",
            about["count"],
            node=about["node"],
        )
    if code == "one_path_only":
        return _n(
            "{node} is used {count} time, and the contributions from every use add up "
            "(the += of the backward pass); this answer counts only one of them.",
            "{node} is used {count} times, and the contributions from every use add up "
            "(the += of the backward pass); this answer counts only one of them.",
            about["count"],
            node=about["node"],
        )
    if code == "wrong_local_derivative":
        return _(
            "At {node}, the gradient sent to {operand} was multiplied by the wrong local "
            "derivative: it must be multiplied by the derivative of {node} with respect to "
            "{operand}, worked out at the current values.",
            node=about["node"],
            operand=about["operand"],
        )
    if code == "dead_relu":
        return _(
            "At {node} the relu is off: at these values its input is not positive, so its local "
            "derivative is 0 and no gradient passes through it.",
            node=about["node"],
        )
    raise ValueError(code)


def _feedback(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"code": code, "message": message, **extra}


def _correct() -> dict[str, Any]:
    return _feedback("correct", _("Correct."))


def _incorrect(forward: bool = False) -> dict[str, Any]:
    if forward:
        return _feedback(
            "incorrect",
            _(
                "Not correct. Go through the forward pass again: work out each node's value "
                "from its children's values, in order, up to the output."
            ),
        )
    return _feedback(
        "incorrect",
        _(
            "Not correct. Go back through the graph edge by edge: incoming gradient × local "
            "derivative = contribution, and the contributions reaching a node add up."
        ),
    )


def _wrong_sign_forward() -> dict[str, Any]:
    return _feedback(
        "wrong_sign",
        _(
            "The magnitude is right but the sign is wrong: look for a sign slip in the forward "
            "pass, such as a subtraction taken the wrong way round or the minus sign of a "
            "negative value dropped."
        ),
    )


def _close(tolerance: Tolerance) -> dict[str, Any]:
    relative, absolute = format(tolerance.relative, "g"), format(tolerance.absolute, "g")
    return _feedback(
        "outside_tolerance",
        _(
            "Close, but outside the tolerance (relative {relative}, absolute {absolute}): "
            "round less, or recompute with more digits.",
            relative=relative,
            absolute=absolute,
        ),
    )


def _close_formula() -> dict[str, Any]:
    return _feedback(
        "outside_tolerance",
        _(
            "Close, but not the derivative: its values differ slightly from the derivative's, "
            "as they do when a constant is rounded or a small one added; write constants "
            "exactly (1/3, not 0.333)."
        ),
    )


def judge(
    answers: list[float],
    expected: list[float],
    predicted: list[list[float]],
    mistakes: Mistakes,
    tolerance: Tolerance,
    forward: bool = False,
    close: Tolerance = CLOSE,
    formula: bool = False,
) -> dict[str, Any]:
    """The feedback for an answer given at one or more points: correct, the slip every point
    agrees on, close, or plainly incorrect. `predicted[j]` are the slips' answers at point j.

    `forward`: the answer is the output's value, which the forward pass computes, so its
    feedback speaks of that pass rather than of gradients (its only slip is the flipped sign).
    `formula`: the answer is a formula, judged at sample points: no tolerance is its to meet.
    """
    points = range(len(answers))
    if all(tolerance.accepts(answers[j], expected[j]) for j in points):
        return _correct()
    # The slips that fit at the first point, then those that fit at every point. An answer of 0
    # is none of them: a slip that comes to 0 (one of two equal contributions with its sign
    # flipped, in `a*a`) would name a mistake the learner shows no sign of.
    accepts, first = tolerance.accepts, answers[0]
    fitting = [i for i, value in enumerate(predicted[0]) if accepts(first, value)]
    if all(answer == 0 for answer in answers):
        fitting = []
    for i in fitting:
        if not all(accepts(answers[j], predicted[j][i]) for j in points):
            continue
        # A slip that gives the right answer everywhere is no mistake at all.
        if not all(accepts(predicted[j][i], expected[j]) for j in points):
            if forward:
                return _wrong_sign_forward()
            return _feedback(mistakes.all[i].code, mistakes.message(i))
    if all(close.accepts(answers[j], expected[j]) for j in points):
        return _close_formula() if formula else _close(tolerance)
    return _incorrect(forward)


# -- reading answers ---------------------------------------------------------------------------


class Unreadable(Exception):
    """An answer that is not a number or expression we can judge: its feedback is ready."""

    def __init__(self, feedback: dict[str, Any]) -> None:
        super().__init__(feedback["message"])
        self.feedback = feedback


def _unparsable(error: AutogradError, text: str) -> Unreadable:
    span = getattr(error, "span", None)
    if span is None:
        return Unreadable(
            _feedback(
                "unparsable",
                _("The answer cannot be read: {reason}", reason=error.message),
            )
        )
    start, end = span
    # The sentence counts characters from 1, as its reader does; `position` stays [start, end).
    if end - start <= 1:  # one character, or the empty place where something is missing
        message = _(
            "The answer cannot be read at character {position}: {reason}",
            position=start + 1,
            reason=error.message,
        )
    else:
        message = _(
            "The answer cannot be read at characters {start} to {end}: {reason}",
            start=start + 1,
            end=end,
            reason=error.message,
        )
    return _unreadable_at(message, span, text)


def _unreadable_at(message: Message, span: Span, text: str) -> Unreadable:
    """Unparsable, with the sentence given, at `span` of the answer's `text`."""
    return Unreadable(_feedback("unparsable", message, position=_position(span, text)))


def _position(span: Span, text: str) -> dict[str, int]:
    """Where `span` is in an answer's `text`: its characters, and the line and column where they
    start, as a problem's position has them."""
    line, column = line_column(text, span[0])
    return {"start": span[0], "end": span[1], "line": line, "column": column}


# What only a program writes (a declaration, print, return, an attribute of a Value, an
# assignment): in an answer the parser's advice for programs would not help.
_PROGRAM_ONLY = re.compile(
    r"\b(?:Value|print|return|import|from|def|class|for|while|if|lambda|assert|del|with)\b"
    r"|\.\s*(?:data|grad|backward|label)\b|[-+*/]=|(?<![<>=!])=(?!=)"
)


# sympy's derivative of relu, as /v1/derivatives writes it (`b*Heaviside(a*b, 0)`), spelt
# otherwise: an answer takes it as sympy spells it.
_HEAVISIDE = re.compile(r"(?i:heaviside)\s*\(")


def _heaviside(span: Span, text: str) -> Unreadable:
    return _unreadable_at(
        _(
            "relu's derivative is written Heaviside(x), with a capital H: 1 where x > 0 and 0 "
            "elsewhere. It is not needed either: at the bindings each relu is on (local "
            "derivative 1) or off (0), and the derivative may be written as it is there."
        ),
        span,
        text,
    )


def _program_construct(found: re.Match[str]) -> Unreadable:
    return _unreadable_at(
        _(
            "The answer must be one expression, not a program: write the number or formula "
            "alone, without '{construct}'.",
            construct=" ".join(found.group().split()),
        ),
        found.span(),
        found.string,
    )


def _second_statement(span: Span, text: str) -> Unreadable:
    return _unreadable_at(
        _(
            "The answer must be one expression, not a program: a second statement starts at "
            "character {position}.",
            position=span[0] + 1,
        ),
        span,
        text,
    )


def _assignment(parsed: ParsedExpression) -> Unreadable:
    """An answer of one statement that assigns (`q = tanh(-6)`) or declares (`q = Value(1)`),
    pointed at by its `=`: an expression has none, so the last one before the assigned value
    is the statement's own (a tuple's `a, b = 1, 2` too, whose value is `2`)."""
    text = parsed.text
    equals = text.rfind("=", 0, parsed.root.span[0])
    line = text.rfind("\n", 0, equals) + 1
    target = " ".join(text[line : equals + 1].split())  # `q =`, `a, b =`
    span = (equals, equals + 1)
    if parsed.defaults:
        declaration = " ".join(text[line : parsed.root.span[1]].split())
        return _unreadable_at(
            _(
                "The answer must be one expression, not a program: '{declaration}' declares an "
                "input; write the number alone.",
                declaration=_shorten(declaration),
            ),
            span,
            text,
        )
    return _unreadable_at(
        _(
            "The answer must be one expression, not a program: leave out the assignment "
            "'{target}'.",
            target=_shorten(target),
        ),
        span,
        text,
    )


def _not_a_number(what: Message, position: dict[str, int] | None = None) -> Unreadable:
    """`position`: where the text is that is not a number; a JSON value has no characters."""
    where = {} if position is None else {"position": position}
    message = _("The answer must be a number, not {what}.", what=what)
    return Unreadable(_feedback("not_a_number", message, **where))


def _out_of_range(answer: Any, code: str = "not_a_number") -> Unreadable | None:
    """The feedback on a number too large for a double (10**400, or `1e400` as the JSON reader
    keeps it): finite, but no number the engine computes with. None for any other answer."""
    if isinstance(answer, NonFiniteNumber):
        if not answer.overflows:  # NaN or Infinity
            return None
    elif (
        not isinstance(answer, int) or isinstance(answer, bool) or _json_number(answer) != math.inf
    ):
        return None
    return Unreadable(
        _feedback(
            code, _("This number is too large: an answer can be at most about 1.8e308 in size.")
        )
    )


def _json_kind(value: Any) -> Message:
    if isinstance(value, bool):
        return _("true or false")
    if isinstance(value, dict):
        return _("an object")
    if isinstance(value, list):
        return _("a list")
    return _("infinity or NaN")


def _json_number(answer: Any) -> float | None:
    """A JSON number given as an answer, as a double: every finite double is one, up to
    1.7976931348623157e308; an integer past a double's range (10**400) is infinite. None for
    any other answer, `true` too, though Python's bool is an int."""
    if not isinstance(answer, int | float) or isinstance(answer, bool):
        return None
    try:
        return float(answer)
    except OverflowError:  # only an int can be too large for a double
        return math.inf


# Punctuation around words, in the scripts a learner writes (not `;`, which ends a statement).
_PUNCTUATION = ".,:!?\N{HORIZONTAL ELLIPSIS}\"'«»„“”‘’¡¿()"


def _stripped(text: str) -> Span:
    """Where `text` is, without the spaces around it."""
    return len(text) - len(text.lstrip()), len(text.rstrip())


def _words(text: str, inputs: Collection[str] | None = None) -> bool:
    """Whether `text` is words, in any script: letters and spaces alone, perhaps punctuated
    (`Ei tea.`, `don't`), more than one letter (`π`, `½`, `x²` and a look-alike letter get the
    grammar's own hints). In a formula in the variables `inputs`, ASCII names of them side by
    side (`c a`) are no words: the grammar's hint is to multiply them; another name (`I dont
    know`), a sentence's marks or another script make them words."""
    words = [word for word in (part.strip(_PUNCTUATION) for part in text.split()) if word]
    letters = [
        word.replace("'", "").replace("\N{RIGHT SINGLE QUOTATION MARK}", "") for word in words
    ]
    if not all(word.isalpha() for word in letters) or sum(map(len, letters)) <= 1:
        return False
    if inputs is None or not text.isascii() or any(mark in text for mark in ".!?'\""):
        return True
    return not all(word in inputs for word in words)


def read_number(answer: Any) -> float:
    """A numeric answer: a JSON number, or text of a constant in our grammar (`-1/2`, `2**3`)."""
    if (too_large := _out_of_range(answer)) is not None:
        raise too_large
    number = _json_number(answer)
    if number is not None:
        if math.isfinite(number):
            return number
        raise _not_a_number(_json_kind(math.inf))
    if not isinstance(answer, str):
        raise _not_a_number(_json_kind(answer))
    try:
        parsed = _parse_answer(answer)
    except Unreadable:
        # `ei tea`, `не знаю`: words, about which the grammar's hints (`write ei*tea`) would
        # mislead; one word the grammar reads is a variable, and is told so below.
        if _words(answer):
            raise _not_a_number(_("words"), _position(_stripped(answer), answer)) from None
        raise
    if parsed.variables:
        message = _n(
            "The answer must be a number, but it contains the variable {names}.",
            "The answer must be a number, but it contains the variables {names}.",
            len(parsed.variables),
            names=", ".join(parsed.variables),
        )
        if parsed.variables == ("E",):  # sympy's e, as /v1/derivatives' text writes it
            message = _(
                "The answer must be a number, but it contains the variable E: write e as exp(1)."
            )
        first = parsed.first_use(parsed.variable_set)  # where the answer names one first
        where = {} if first is None else {"position": _position(first, answer)}
        raise Unreadable(_feedback("not_a_number", message, **where))
    return parsed.root.value


def read_expression(answer: Any, inputs: Collection[str] = ()) -> ParsedExpression:
    """A symbolic answer: text in our grammar, or a JSON number for a constant derivative, read
    as `read_number` reads one."""
    if isinstance(answer, str):
        try:
            return _parse_answer(answer, formula=True)
        except Unreadable:
            if _words(answer, inputs):  # `Ei tea.`, `не знаю`, `I dont know`
                message = _(
                    "The answer must be an expression in the variables, such as 2*a*b, not words."
                )
                raise Unreadable(
                    _feedback("unparsable", message, position=_position(_stripped(answer), answer))
                ) from None
            raise
    number = _json_number(answer)
    if number is None or not math.isfinite(number):
        if (too_large := _out_of_range(answer, "unparsable")) is not None:
            raise too_large
        what = _json_kind(math.inf if number is not None else answer)
        raise Unreadable(
            _feedback(
                "unparsable",
                _(
                    "The answer must be an expression written as text, or a number, not {what}.",
                    what=what,
                ),
            )
        )
    # What the parser makes of the number's text, made without it: a JSON number has no
    # characters a refusal could point at, and is taken at any size, as a `value` answer is.
    text = repr(number)
    return ParsedExpression(text, Node("constant", (0, len(text)), value=number), (), 1)


def _parse_answer(text: str, formula: bool = False) -> ParsedExpression:
    """One expression: a refusal of the grammar, or of a program (its statements, assignments
    and declarations), is the answer's feedback. `formula`: a derivative is asked for, not a
    number."""
    try:
        parsed = parse(text, ANSWER_LIMITS, functions=ANSWER_FUNCTIONS if formula else ())
    except BudgetExceeded:  # the request's time is up: not the answer's fault
        raise
    except ExpressionError as error:
        if error.kind == SECOND_STATEMENT:  # ANSWER_LIMITS allows one statement
            raise _second_statement(error.span, text) from None
        program = _PROGRAM_ONLY.search(text)
        if program is not None:  # the parser's advice would be for a program: not the learner's
            raise _program_construct(program) from None
        if formula and error.kind == "unknown_function" and _HEAVISIDE.match(text, error.span[0]):
            raise _heaviside(error.span, text) from None
        if error.kind == "variable_exponent":  # the parser's reason is the engine's gradients
            message = _(
                "the answers' language has constant exponents only: write x ** y as exp(y * log(x))"
            )
            error = ExpressionError(error.kind, message, error.span)
        raise _unparsable(error, text) from None
    except AutogradError as error:  # a constant part out of domain
        raise _unparsable(error, text) from None
    # One statement, but a program's: `q = tanh(-6)` would be judged by its value. (`y.backward()`
    # is a second statement, or, alone, refused by the parser: nothing assigned y.)
    if parsed.assigned or parsed.defaults:
        raise _assignment(parsed)
    return parsed


# -- the check ---------------------------------------------------------------------------------


@dataclass
class _Item:
    item: str
    expected: Any
    answer: Any = None
    feedback: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        code = self.feedback["code"]
        return code if code in ("correct", "unanswered") else "incorrect"


def check(
    evaluator: Evaluator,
    expression: str,
    bindings: Mapping[str, float] | None,
    answers: Mapping[str, Any],
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    reveal: bool = False,
    output: str | None = None,
    symbolic_seconds: float = DEFAULT_SYMBOLIC_LIMITS.seconds,
    locale: str = DEFAULT_LOCALE,
) -> dict[str, Any]:
    """Every item answered or expected, with its verdict and feedback, and the score.

    `expression` may be a program; `output` then names its output, as for /v1/gradients. All
    symbolic work (derivatives, their revealed formulas, judging symbolic answers) shares
    `symbolic_seconds`, the budget /v1/derivatives has. `locale` is the learner's language,
    whose decimal separator the answers may use.
    """
    _refuse_long_answers(answers, evaluator.limits.max_expression_length)
    answers = _normalized(answers, locale)
    document = evaluator.evaluate(expression, bindings, output=output)
    nodes = document["graph"]["nodes"]
    variables = list(document["gradients"])
    # An input the output does not use has a gradient (0) but no node: UNUSED stands for it.
    variable_node = {node["label"]: node["id"] for node in nodes if node["kind"] == "variable"}
    compiled = evaluator.compile(expression, output=output)  # what evaluate compiled, if cached
    named = compiled.named
    # A node is answered by its id, an input's name or a name the program assigns (its last
    # assignment), and its item is named as it was answered.
    node_key = {str(node["id"]): node["id"] for node in nodes} | variable_node | named
    _refuse_unknown(answers, variables, node_key)
    node_label = _node_labels(nodes, named)
    node_answers = answers.get("nodes") or {}
    # Named as answered; a node answered by one key and left blank by another, by the first.
    for key in sorted(node_answers, key=lambda key: not _unanswered(node_answers[key])):
        node_label[node_key[key]] = key

    items: list[_Item] = []
    mistakes = Mistakes(expression, document)
    value = _Item("value", document["value"], answers.get("value"))
    _judge_number(value, expression, document, mistakes, None, tolerance)
    items.append(value)
    given = answers.get("gradients") or {}
    for name in variables:
        item = _Item(f"gradients.{name}", document["gradients"][name], given.get(name))
        target = variable_node.get(name, UNUSED)
        _judge_number(item, expression, document, mistakes, target, tolerance)
        items.append(item)
    if answers.get("nodes") is not None:
        given = {node_key[key]: a for key, a in node_answers.items() if not _unanswered(a)}
        for node in nodes:
            item = _Item(f"nodes.{node_label[node['id']]}", node["grad"], given.get(node["id"]))
            _judge_number(item, expression, document, mistakes, node["id"], tolerance)
            items.append(item)
    if answers.get("derivatives") is not None:
        given = answers["derivatives"]
        warm_up()
        try:
            with time_budget(symbolic_seconds, CHECK_KIND):
                symbolic = _Symbolic(
                    evaluator,
                    expression,
                    compiled,
                    bindings,
                    output,
                    variable_node,
                    tolerance,
                    document,
                )
                for name in variables:
                    item = _Item(f"derivatives.{name}", None, given.get(name))
                    symbolic.judge(item, name, reveal)
                    items.append(item)
        except BudgetExceeded as overrun:
            if overrun.kind != CHECK_KIND:
                raise  # an enclosing budget (the whole request's) ran out: that one is reported
            raise CheckTooExpensive(overrun.seconds) from None
        except RecursionError:
            # sympy recurses over the formula: one nested deeply enough exhausts the stack.
            message = _("the expression nests too deeply to check derivatives symbolically")
            raise AutogradError(CHECK_KIND, message) from None

    answered = [item for item in items if item.verdict != "unanswered"]
    correct = sum(item.verdict == "correct" for item in answered)
    results = []
    for item in items:
        result = {"item": item.item, "verdict": item.verdict, "feedback": item.feedback}
        if reveal:
            result["expected"] = item.expected
        results.append(result)
    return {"score": correct / len(answered) if answered else 0.0, "results": results}


def _node_labels(nodes: list[dict[str, Any]], named: Mapping[str, int]) -> list[str]:
    """Each node's item label: its name while the program's last assignment to that name still
    refers to it, else its id. A reassigned name leaves several nodes carrying it, and a name
    must label one node only: the one it means, as an answer given by that name does."""
    labels = [str(node["id"]) for node in nodes]
    for name, at in named.items():
        if nodes[at]["name"] == name:  # not `b` of `b = a`, which names a node made for `a`
            labels[at] = name
    return labels


@cache
def warm_up() -> None:
    """Let sympy import and generate what its simplification loads on first use, once per
    process and outside any time budget: a budget that interrupted an import half-way would
    leave the module to be imported again, and again, by every later request."""
    import sympy
    import sympy.physics.units

    from service.symbolic import relu

    a, b = sympy.symbols("a b", real=True)
    # Small expressions take simplify through every function of the language (relu is a
    # Piecewise), powers and quotients, which is what loads its code; one large expression would
    # load no more and spend seconds simplifying itself.
    for expression in (
        sympy.exp(a) * sympy.tanh(b),
        (a + 1) ** 2 / (a + 1),
        relu(a) * sympy.log(b) + a**0.5,
    ):
        sympy.simplify(expression)


def _crossings(
    answer: ParsedExpression, hidden: Mapping[Node, bool], bases: list[dict[str, float]]
) -> Iterator[dict[str, float] | None]:
    """Points along each input of the `hidden` relus' arguments (each with the state it kept at
    every sample point), and along all of them at once, from each base outwards both ways in
    KINK_STEPS: a point where one of them has the other state, at most KINK_POINTS per way, else
    None (one run of the answer). All at once reaches a kink across a narrow piece: on the piece
    0 < a - b < 0.1, `relu(a + b - 10)` turns on only where a and b grow together."""
    inputs = list(
        dict.fromkeys(
            node.name for kink in hidden for node in postorder(kink) if node.kind == "variable"
        )
    )
    moves = [[variable] for variable in inputs] + ([inputs] if len(inputs) > 1 else [])
    for base in bases:
        for move in moves:
            for direction in (1.0, -1.0):
                crossed = 0
                for step in KINK_STEPS:
                    point = {**base, **{v: base[v] + direction * step for v in move}}
                    try:
                        values = _values_of(answer, point)
                    except DomainError:
                        yield None
                        continue
                    if all((values[kink] > 0) == on for kink, on in hidden.items()):
                        yield None
                        continue
                    yield point
                    crossed += 1
                    if crossed == KINK_POINTS:
                        break


def _forward_only(op: str, k: float | None, *operands: float) -> float:
    """An operation's value alone, without the local derivatives a `Value` takes too: an answer
    is a formula to compute, and `b + 0 * (a - 2) ** 0.5` has a value at a = 2, though its
    square root has no derivative there."""
    return BY_NAME[op].fold(k, *operands)


def _values_of(answer: ParsedExpression, point: Mapping[str, float]) -> dict[Node, float]:
    """Every tree node's value at `point`, or the `DomainError` of the first that has none."""
    return run(answer, {v: point[v] for v in answer.variables}, operation=_forward_only)


def _random_point(rng: random.Random, inputs: Iterable[str], attempt: int) -> dict[str, float]:
    """A sample point, the `attempt`-th of SAMPLE_TRIES: each input in 0.2 to 2.5, of either
    sign in the first half of the tries and positive later, for log and powers."""
    negative = attempt < SAMPLE_TRIES // 2
    return {
        name: round(rng.uniform(0.2, 2.5), 6) * (rng.choice((-1, 1)) if negative else 1)
        for name in inputs
    }


def _value_of(
    answer: ParsedExpression, point: Mapping[str, float], expected: float | None = None
) -> float | None:
    """The answer's value at `point`; None where it is not defined or not finite.

    Given the `expected` value of a formula, that value itself where the two differ by no more
    than the rounding of the answer's own terms: terms of size M that cancel, computed in
    floats, leave about 1e-16 M (`1/(a*(a + c)) - 1/(a + c)**2 - c/(a*(a + c)**2)` is 0
    everywhere), which no tolerance scaled by a derivative's value of 0 allows."""
    try:
        values = _values_of(answer, point)
    except DomainError:
        return None
    number = float(values[answer.root])
    if not math.isfinite(number):
        return None
    if expected is not None and answer.variables:
        terms = max((abs(v) for node, v in values.items() if node.kind == "operation"), default=0)
        if abs(number - expected) <= ROUNDING * terms:
            return expected
    return number


def _undefined_at_bindings(
    answer: ParsedExpression, bindings: Mapping[str, float]
) -> dict[str, Any]:
    """Feedback on a formula that cannot be computed at the bindings, where the derivative has a
    value: why, and where in the answer, as the engine says for an expression."""
    try:
        _values_of(answer, bindings)
        reason: str = _("its value is not a finite number")
        span = (0, len(answer.text))
    except DomainError as error:
        reason, span = error.message, error.span or (0, len(answer.text))
    return _feedback(
        "incorrect",
        _(
            "Not correct: the formula cannot be computed at the bindings, where the derivative "
            "has a value: {reason}.",
            reason=reason,
        ),
        position=_position(span, answer.text),
    )


def _refuse_long_answers(answers: Mapping[str, Any], maximum: int) -> None:
    """Answers written as text are read as expressions are: in all, no more text than one
    expression may have, so a body full of them costs no more to read than the longest one."""
    texts = [answers.get("value")] + [
        answer for group in ("gradients", "nodes", "derivatives")
        for answer in (answers.get(group) or {}).values()
    ]  # fmt: skip
    written = sum(len(text) for text in texts if isinstance(text, str))
    if written > maximum:
        message = _n(
            "the answers written as text are {count} character in all; at most {maximum} are "
            "checked in one request",
            "the answers written as text are {count} characters in all; at most {maximum} are "
            "checked in one request",
            written,
            maximum=maximum,
        )
        raise RequestTooLarge(CHECK_KIND, message, "max_expression_length", maximum)


def _refuse_unknown(
    answers: Mapping[str, Any], variables: list[str], node_key: Mapping[str, int]
) -> None:
    known = set(variables)
    unknown = [
        f"{group}.{name}"
        for group in ("gradients", "derivatives")
        for name in (answers.get(group) or {})
        if name not in known
    ]
    nodeless = [key for key in (answers.get("nodes") or {}) if key not in node_key]
    unknown += [f"nodes.{key}" for key in nodeless]
    if nodeless and len(nodeless) == len(unknown) and known.issuperset(nodeless):
        # inputs of the program the output does not read: no node, and a gradient of 0
        raise AnswerError(
            _n(
                "{names} is an input the output does not use, so it has no node in the graph; "
                "its gradient (0) is the item gradients.{first}",
                "{names} are inputs the output does not use, so they have no nodes in the graph; "
                "their gradients (0) are the items gradients.{first} and so on",
                len(nodeless),
                names=", ".join(nodeless),
                first=nodeless[0],
            ),
            unknown,
        )
    if unknown:
        shown = ", ".join(_shorten(item) for item in unknown[:5])
        shown += ", …" if len(unknown) > 5 else ""
        raise AnswerError(
            _n(
                "{items} is not an item of this expression: gradients and derivatives are "
                "named by its inputs, nodes by their ids in the graph or their names",
                "{items} are not items of this expression: gradients and derivatives are "
                "named by its inputs, nodes by their ids in the graph or their names",
                len(unknown),
                items=shown,
            ),
            unknown,
        )
    # One node answered twice, by its id and by its name, or by two names (`b = a`): which
    # answer to judge would be a guess.
    keys_of: dict[int, list[str]] = {}
    for key, answer in (answers.get("nodes") or {}).items():
        if not _unanswered(answer):  # a blank or null answer answers nothing
            keys_of.setdefault(node_key[key], []).append(f"nodes.{key}")
    twice = [keys for keys in keys_of.values() if len(keys) > 1]
    if twice:
        raise AnswerError(
            _(
                "{items} answer the same node; give one answer for each node",
                items=", ".join(twice[0]),
            ),
            [key for keys in twice for key in keys],
            "duplicate_answer_items",
        )


# What learners type for the grammar's characters, from the lessons' typography or a word
# processor: the minus sign, the multiplication sign, a space that does not break. An answer is
# arithmetic, not code, so each may stand for the one character it looks like (the expression
# language refuses them, with a hint).
_TYPOGRAPHIC = str.maketrans(OPERATOR_LOOKALIKES)
# Spaces that do not break, and thin spaces: between digits they group thousands (`1 000,5`), as
# a space does, which the grammar refuses with the number to write instead.
_SPACES = re.compile(r"[\u00a0\u2009\u202f]")
# A decimal comma (`0,5`), in a language that writes one: one comma between two runs of digits.
_DECIMAL_COMMA = re.compile(r"(?<![0-9.,])([0-9]+),([0-9]+)(?![0-9.,])")
# An opening bracket with the name it calls, if any; a closing one; a comma.
_BRACKET_OR_COMMA = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)?\s*\(|\)|,")


def _normalized(answers: Mapping[str, Any], locale: str) -> dict[str, Any]:
    """The answers, each text the grammar refuses as typed read in plain characters: typographic
    signs as ASCII, and decimal commas as points where `locale` writes decimals with a comma (in
    English, `1,000` could be a thousand). Each stands for one character, so a refusal of the
    plain text (`(0,5` never closes its bracket) points at the characters the learner typed."""
    decimal_comma = writes_decimal_comma(locale)

    def read(answer: Any) -> Any:
        if not isinstance(answer, str):
            return answer
        plain = _SPACES.sub(" ", answer.translate(_TYPOGRAPHIC))
        if decimal_comma:
            plain = _DECIMAL_COMMA.sub(_decimal_point(plain), plain)
        return plain if plain != answer and not _readable(answer) else answer

    return {
        group: {key: read(answer) for key, answer in given.items()}
        if isinstance(given, Mapping)
        else read(given)
        for group, given in answers.items()
    }


def _decimal_point(text: str) -> Callable[[re.Match[str]], str]:
    """What each decimal comma of `text` becomes: a point, but where it separates the arguments
    of a call of two (`Heaviside(a-1,0)`), the comma it is."""
    separating: set[int] = set()
    opened: list[bool] = []  # for each open bracket: whether it is a call of two arguments
    for match in _BRACKET_OR_COMMA.finditer(text):
        if match[0] == ",":
            if opened and opened[-1]:
                separating.add(match.start())
        elif match[0] == ")":
            if opened:
                opened.pop()
        else:
            opened.append(match[1] in ANSWER_FUNCTIONS)
    return lambda found: found[0] if found.start(2) - 1 in separating else f"{found[1]}.{found[2]}"


def _readable(text: str) -> bool:
    """Whether the grammar reads `text` as an answer's expression."""
    try:
        parse(text, ANSWER_LIMITS)
    except BudgetExceeded:  # the request's time is up: not the answer's fault
        raise
    except AutogradError:
        return False
    return True


def _unanswered(answer: Any) -> bool:
    """No answer: null, or text that is blank (a form's empty field)."""
    return answer is None or (isinstance(answer, str) and not answer.strip())


def _shorten(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:39]}…"


def _judge_number(
    item: _Item,
    expression: str,
    document: dict[str, Any],
    mistakes: Mistakes,
    target: int | None,
    tolerance: Tolerance,
) -> None:
    if _unanswered(item.answer):
        item.feedback = _feedback("unanswered", _("Not answered."))
        return
    try:
        answer = read_number(item.answer)
    except Unreadable as unreadable:
        item.feedback = unreadable.feedback
        return
    expected = item.expected
    predicted = mistakes.answers(target)
    forward = target is None  # the value
    item.feedback = judge([answer], [expected], [predicted], mistakes, tolerance, forward)
    if target not in (None, UNUSED) and item.feedback["code"] == "incorrect" and expected == 0:
        relu = _dead_relu_on_path(expression, document, target)
        if relu is not None:
            item.feedback = _feedback("dead_relu", _mistake_message("dead_relu", {"node": relu}))


def _relu_states(document: dict[str, Any]) -> tuple[bool, ...]:
    """Which relus of an evaluated graph are on: together, the piece of a piecewise function
    its point lies on."""
    return tuple(node["local_grads"][0] > 0 for node in document["graph"]["nodes"]
                 if node["op"] == "relu")  # fmt: skip


def _text(expression: sympy.Expr) -> str:
    """A sympy expression as text a learner can read (`2*a`, `a*b + 1`, `0.1*b`) and send back
    as an answer."""
    from service import formulas

    return formulas.answer_text(expression)


class _Symbolic:
    """Symbolic derivatives of one expression: sympy's derivative, and sample points where the
    engine's gradients (exact derivatives) are compared with the answer's values.

    With relus the expression is piecewise, and its derivative is judged on the piece the
    bindings lie on, which a learner can write: `b` for d relu(a*b)/da where a*b > 0 (sympy's
    `b*Heaviside(a*b, 0)` is right too, and revealed as `b`). Every sample point lies on that
    piece.
    The piece is the engine's: which relus its forward pass found on, not what sympy makes of
    their inputs, since the two may add the same floats in different orders and land on
    opposite sides of 0 (`relu(a - b + c)` at a = 1.1, b = 0.1, c = -1 is off for the engine,
    whose 0.0 is exact, and on for sympy, whose sum is 8e-17).
    """

    def __init__(
        self,
        evaluator: Evaluator,
        expression: str,
        compiled: Compiled,
        bindings: Mapping[str, float] | None,
        output: str | None,
        variable_node: dict[str, int],
        tolerance: Tolerance,
        document: dict[str, Any],
    ) -> None:
        self.evaluator = evaluator
        self.expression = expression
        self.output = output
        self.compiled = compiled
        self.parsed = parsed = compiled.parsed
        self.variable_node = variable_node
        self.tolerance = tolerance
        self.points: list[tuple[dict[str, float], dict[str, Any], Mistakes]] | None = None
        # The bindings' point, and the piece it lies on. Every input is in the point, those the
        # output does not use too (after the others): an answer may use them, as the
        # derivative by one of them (0) may be written `u - u`.
        self.nodes = nodes = document["graph"]["nodes"]
        bound = evaluator.bind(parsed, bindings or {})
        used = [node["label"] for node in nodes if node["kind"] == "variable"]
        self.at = {name: bound[name].data for name in dict.fromkeys([*used, *parsed.inputs])}
        self.piece = _relu_states(document)
        self.document = document

    def sample(self) -> list[tuple[dict[str, float], dict[str, Any], Mistakes]]:
        """The bindings themselves, where the learner was asked, then up to SAMPLE_POINTS
        points where the expression and its gradients are finite, the same on every run:
        grading must not depend on luck."""
        if self.points is None:
            rng = random.Random(0)  # noqa: S311 - reproducible points, not secrets
            self.points = [(self.at, self.document, Mistakes(self.expression, self.document))]
            for attempt in range(2 * SAMPLE_TRIES):
                if attempt < SAMPLE_TRIES:
                    point = _random_point(rng, self.parsed.inputs, attempt)
                else:  # the bindings' piece is small: points around the bindings
                    point = {
                        name: round(x * rng.uniform(0.75, 1.25) + rng.uniform(-0.05, 0.05), 6)
                        for name, x in self.at.items()
                    }
                document = self.on_piece_at(point)
                if document is None:
                    continue
                self.points.append((point, document, Mistakes(self.expression, document)))
                if len(self.points) == 1 + SAMPLE_POINTS:
                    break
        return self.points

    def on_piece_at(self, point: Mapping[str, float]) -> dict[str, Any] | None:
        """The expression evaluated at `point`, if it is defined there and on the bindings'
        piece; else None."""
        try:
            document = self.evaluator.evaluate(self.expression, point, output=self.output)
        except DomainError:
            return None
        return document if _relu_states(document) == self.piece else None

    @cached_property
    def on_piece(self) -> sympy.Expr:
        """The output on the bindings' piece, each relu as the engine's forward pass left it
        (see `symbolic.engine_piece`)."""
        from service import symbolic

        return symbolic.engine_piece(self.parsed, self.compiled.node_of, self.nodes)

    def derivative(self, name: str) -> sympy.Expr:
        """The derivative on the bindings' piece."""
        from service import symbolic

        return symbolic.derivative(self.on_piece, name)

    def judge(self, item: _Item, name: str, reveal: bool) -> None:
        if reveal:
            item.expected = _text(self.derivative(name))
        if _unanswered(item.answer):
            item.feedback = _feedback("unanswered", _("Not answered."))
            return
        try:
            answer = read_expression(item.answer, self.parsed.input_set)
        except Unreadable as unreadable:
            item.feedback = unreadable.feedback
            return
        # Any input of the program may appear, those the output does not use too (its
        # derivative by one of them is 0, which `u - u` writes as well as `0`).
        strangers = [v for v in answer.variables if v not in self.parsed.input_set]
        computed = [name for name in strangers if name in self.parsed.assigned]
        first = answer.first_use(computed or strangers)  # where the answer names one first
        where = {} if first is None else {"position": _position(first, answer.text)}
        if computed:  # `2*h` where the program computes h = u + v
            item.feedback = _feedback(
                "unknown_variable",
                _(
                    "The answer uses {names}, which the program computes: write the derivative "
                    "in its inputs ({inputs}).",
                    names=", ".join(computed),
                    inputs=", ".join(self.parsed.inputs),
                ),
                **where,
            )
            return
        if strangers == ["E"]:  # sympy's e, as /v1/derivatives' text writes it
            message = _(
                "The answer uses E, which is not a variable of the expression: write e as exp(1)."
            )
            item.feedback = _feedback("unknown_variable", message, **where)
            return
        if strangers:
            item.feedback = _feedback(
                "unknown_variable",
                _n(
                    "The answer uses {names}, which is not a variable of the expression.",
                    "The answer uses {names}, which are not variables of the expression.",
                    len(strangers),
                    names=", ".join(strangers),
                ),
                **where,
            )
            return
        # The sample points decide, a wrong answer as cheaply as a right one; sympy only where
        # the bindings' piece has no sample point (a relu's piece narrower than any).
        judged = self.at_points(answer, name)
        if judged is None:
            judged = _correct() if self.simplifies_to_zero(answer, name) else _incorrect()
        elif judged["code"] == "correct":
            judged = self.across_answer_kinks(answer, name) or judged
        item.feedback = judged

    def across_answer_kinks(self, answer: ParsedExpression, name: str) -> dict[str, Any] | None:
        """Feedback on an answer that agrees at the sample points but not past a kink of its
        own; None when none is found.

        The sample points lie on the expression's piece, and an answer's own relu may keep one
        state at all of them: `b + relu(a - 3)` for d(a * b)/da agrees wherever a < 3. Along
        each input of such a relu, from the bindings and from sample points, outwards in steps
        growing to 5e9, the relu's other side is looked for on the expression's piece, where
        the answer must still give the engine's gradient. A relu whose other side is not on the
        piece (`relu(a)` where the expression's piece is a > 1) changes nothing there."""
        kinks = [node.args[0] for node in answer.postorder() if node.op in _KINKED]
        if not kinks:
            return None
        samples = self.sample()
        seen: dict[Node, set[bool]] = {kink: set() for kink in kinks}
        for point, _document, _mistakes in samples:
            with suppress(DomainError):
                values = _values_of(answer, point)
                for kink in kinks:
                    seen[kink].add(values[kink] > 0)
        hidden = {kink: states.pop() for kink, states in seen.items() if len(states) == 1}
        if not hidden:
            return None
        bases = [point for point, _document, _mistakes in samples[:KINK_BASES]]
        crossings = _crossings(answer, hidden, bases)
        tried = 0
        for crossing in islice(crossings, KINK_RUNS):
            if crossing is None:
                continue
            mismatch = self.disagrees_at(answer, name, crossing)
            if mismatch is not None:
                return mismatch
            tried += 1
            if tried == KINK_TRIES:
                break
        return None

    def disagrees_at(
        self, answer: ParsedExpression, name: str, point: dict[str, float]
    ) -> dict[str, Any] | None:
        """Feedback naming `point` when it lies on the expression's piece and the answer is
        not the derivative there; None otherwise."""
        document = self.on_piece_at(point)
        if document is None:
            return None
        expected = document["gradients"][name]
        number = _value_of(answer, point, expected)
        if number is None or EQUIVALENT.within([expected]).accepts(number, expected):
            return None
        return _feedback(
            "incorrect",
            _(
                "Not correct: at {point} the derivative is {expected}, and the formula gives "
                "{value}. Look at where each relu or Heaviside of the formula turns on or off.",
                point=", ".join(f"{v} = {format_number(x)}" for v, x in point.items()),
                expected=format_number(expected),
                value=format_number(number),
            ),
        )

    def simplifies_to_zero(self, answer: ParsedExpression, name: str) -> bool:
        """Whether sympy proves the answer equal to the derivative, or finds the two formulas
        apart by rounding alone; False when it cannot tell."""
        import sympy

        try:
            with time_budget(SIMPLIFY_SECONDS, SIMPLIFY_KIND):
                derivative = self.derivative(name)
                difference = sympy.simplify(answer.sympy - derivative)
                if difference == 0:
                    return True
                # An answer's own relu could be on at every point drawn, and wrong elsewhere.
                kinked = any(node.op in _KINKED for node in answer.postorder())
                return not kinked and self.agree_as_formulas(answer.sympy, derivative)
        except BudgetExceeded as exceeded:
            if exceeded.kind != SIMPLIFY_KIND:
                raise
            return False

    def agree_as_formulas(self, answer: sympy.Expr, derivative: sympy.Expr) -> bool:
        """Whether the two formulas, with no kink, have the same exact values (up to EQUIVALENT)
        at points drawn as the sample points are, though off the bindings' piece: its formula
        holds there too. Constants folded in floats (0.1 + 0.2, 1/3*8, 1.5*exp(1)) are no exact
        decimal, and sympy proves no equality between them and the decimal or exp(1) an answer
        writes."""
        import sympy

        from service.formulas import exact_value

        rng = random.Random(0)  # noqa: S311 - reproducible points, not secrets
        agreed = 0
        for attempt in range(2 * SAMPLE_TRIES):
            if attempt < SAMPLE_TRIES:
                point = _random_point(rng, self.parsed.inputs, attempt)
            else:  # a formula real only on a line through the bindings (`(a-b)**1.5` at a = b)
                shift, scale = round(rng.uniform(-1, 1), 6), round(rng.uniform(0.5, 1.5), 6)
                point = {
                    name: x + shift if attempt % 2 else x * scale for name, x in self.at.items()
                }
            at = {sympy.Symbol(name, real=True): sympy.Rational(x) for name, x in point.items()}
            expected, given = exact_value(derivative, at), exact_value(answer, at)
            if expected is None or given is None:
                continue
            if not EQUIVALENT.within([expected]).accepts(given, expected):
                return False
            agreed += 1
            if agreed == SAMPLE_POINTS:
                break
        return agreed > 1

    def at_points(self, answer: ParsedExpression, name: str) -> dict[str, Any] | None:
        """The answer judged at the bindings and the sample points; None when no sample point
        lies on the bindings' piece, where one point cannot tell a formula from another."""
        samples = self.sample()
        if len(samples) == 1:
            return None
        values, expected, predicted = [], [], []
        target = self.variable_node.get(name, UNUSED)
        for index, (point, document, analysis) in enumerate(samples):
            number = _value_of(answer, point, document["gradients"][name])
            if number is None:
                if index == 0:  # the bindings: `b*(a-1)/(a-1)` at a = 1 is no derivative there
                    return _undefined_at_bindings(answer, point)
                continue
            values.append(number)
            expected.append(document["gradients"][name])
            predicted.append(analysis.answers(target))
        if len(values) == 1:  # defined at the bindings only: one point cannot tell either
            return None
        mistakes = samples[0][2]  # the bindings', where every answer here is defined
        # A number (`0.333` for 1/3) is judged as numbers are; a formula by its equivalence.
        if not answer.variables:
            judged = judge(values, expected, predicted, mistakes, self.tolerance)
            # Right at the bindings only: the value, whatever slip it may also look like (a
            # derivative of 1 there is what a gradient passed through unchanged gives).
            at_bindings = self.tolerance.accepts(values[0], expected[0])
            if judged["code"] != "correct" and at_bindings:
                return _feedback(
                    "incorrect",
                    _(
                        "This is the derivative's value at the bindings, not the derivative: "
                        "write it as an expression in the variables, such as 2 * a * b."
                    ),
                )
            return judged
        tolerance, close = EQUIVALENT.within(expected), CLOSE.within(expected)
        return judge(values, expected, predicted, mistakes, tolerance, close=close, formula=True)
