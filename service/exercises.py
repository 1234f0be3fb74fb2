"""Exercises from a seed: the same seed, level and kind give the same exercise on every replica.

Generation draws only from `random.Random(key).random()`, seeded with a string built from the
generator version, the level and the seed. Python guarantees that `random()` gives the same sequence
for the same seed across versions (its `choice`, `shuffle` and `randrange` carry no such promise),
so every draw goes through `_pick`. Nothing depends on hash randomization or on the process.

`GENERATORS` name the rules below. A seed gives the same exercise under the same generator for
the whole of API v1: new templates or rules come with a new generator, which a request chooses,
never silently. Generator 1 is the first rules; generator 2 adds small programs to levels 2 and 3;
generator 3 puts relus into `derivative` exercises too, whose derivative is asked on the piece the
bindings lie on (each relu on or off as there), as /v1/check judges it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any, TypeVar

from service.check import DEFAULT_TOLERANCE, Mistakes, check
from service.engine import format_number
from service.errors import AutogradError
from service.evaluator import Evaluator
from service.i18n import Message, _, sentences

GENERATORS = (1, 2, 3)
DEFAULT_GENERATOR = 1  # a request asks for a later one: a seed's exercise never changes under it
LEVELS = (1, 2, 3)
EXERCISE_KINDS = ("gradients", "backward-pass", "derivative")
DEFAULT_LEVEL = 1
DEFAULT_KIND = "gradients"
MAX_SEED = 2**53 - 1  # the largest integer JavaScript (and any JSON reader) holds exactly
_NAMED_BEFORE_SIGN = ("dead_relu", "one_path_only")
_ATTEMPTS = 500  # templates and bindings drawn before falling back to the lesson's own exercise

# Each level's expression shapes under generator 1: {x}, {y}, {z}, {w} are variables, {p}, {q},
# {r} operators. Level 1 is the lesson's (a + b) * c and its cousins; level 2 shares nodes (a
# variable used twice, the += of the backward pass) and puts relu, subtraction and squares in;
# level 3 adds division and relu dead zones.
_FIRST_SHAPES: dict[int, tuple[str, ...]] = {
    1: (
        "({x} {p} {y}) {q} {z}",
        "{x} {p} {y} {q} {z}",
        "({x} {p} {y}) {q} ({z} {r} {w})",
        "{x} {p} ({y} {q} {z})",
    ),
    2: (
        "{x} * {x}",
        "({x} {p} {y}) * {x}",
        "{x} * {y} {p} {x}",
        "({x} {p} {y}) * ({x} {q} {z})",
        "{x} * {y} * {x}",
        "relu({x} {p} {y}) * {z}",
        "relu({x} * {y}) {p} {z}",
        "{x} ** 2 {p} {x} * {y}",
    ),
    3: (
        "relu({x} - {y}) * {z} {p} {x}",
        "({x} - {y}) / {z}",
        "{x} / {y} {p} relu({x} * {z})",
        "relu({x} * {y} - {z}) {p} {x}",
        "({x} - {y}) ** 2 / {z}",
        "{x} / ({y} {p} {z}) - {x}",
        "-({x} * {y}) {p} relu({z} - {x})",
        "({x} {p} {y}) / {z} - {y} * {z}",
        "{x} * {y} - {z} / {x}",
        "-{x} * ({y} - {z}) ** 2",
    ),
}
# Generator 2 adds small programs whose named node is used twice, as the lessons write them.
_PROGRAMS: dict[int, tuple[str, ...]] = {
    1: (),
    2: ("s = {x} {p} {y}\nout = s * {z} + s",),
    3: ("h = {x} {p} {y}\nout = h * h - {z} / h", "h = {x} * {y} - {z}\nout = relu(h) + {x} * h"),
}
_WITH_PROGRAMS = {level: shapes + _PROGRAMS[level] for level, shapes in _FIRST_SHAPES.items()}
_SHAPES: dict[int, dict[int, tuple[str, ...]]] = {
    1: _FIRST_SHAPES,
    2: _WITH_PROGRAMS,
    3: _WITH_PROGRAMS,
}
_PIECEWISE_DERIVATIVES = 3  # the first generator whose `derivative` exercises may have relus
_OPERATORS = {1: ("+", "*"), 2: ("+", "*", "-"), 3: ("+", "*", "-")}
_NAMES = (("a", "b", "c", "d"), ("x", "y", "z", "w"), ("p", "q", "r", "s"), ("u", "v", "w", "t"))
# Friendly numbers: small integers, and at levels 2 and 3 halves too.
_WHOLE = (-4, -3, -2, -1, 1, 2, 3, 4, 5)
_HALVES = (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5)
_FRIENDLY_SIZE = 200.0  # no value or gradient of an exercise is larger than this
_QUARTER = 4  # ... and every one is a multiple of 1/4

T = TypeVar("T")


def _pick(rng: random.Random, options: Sequence[T]) -> T:
    """One of `options`, drawn with `random()` only, whose sequence Python keeps stable."""
    return options[min(int(rng.random() * len(options)), len(options) - 1)]


def _friendly(x: float) -> bool:
    quarters = x * _QUARTER
    return abs(x) <= _FRIENDLY_SIZE and math.isclose(quarters, round(quarters), abs_tol=1e-9)


class _Draft:
    """One drawn expression with bindings, and whether it makes a good exercise."""

    def __init__(self, rng: random.Random, generator: int, level: int, kind: str) -> None:
        shapes = _SHAPES[generator][level]
        if kind == "derivative" and generator < _PIECEWISE_DERIVATIVES:
            shapes = tuple(shape for shape in shapes if "relu" not in shape)
        shape = _pick(rng, shapes)
        names = _pick(rng, _NAMES)
        operators = _OPERATORS[level]
        self.expression = shape.format(
            x=names[0],
            y=names[1],
            z=names[2],
            w=names[3],
            p=_pick(rng, operators),
            q=_pick(rng, operators),
            r=_pick(rng, operators),
        )
        self.level = level
        self.kind = kind
        numbers = _WHOLE + (_HALVES if level > 1 else ())
        self.values = [_pick(rng, numbers) for _ in names]
        self.names = names

    def evaluate(self, evaluator: Evaluator) -> dict[str, Any] | None:
        """The evaluation document when the draft is a good exercise, else None."""
        variables = evaluator.compile(self.expression).parsed.variables
        bindings = {name: float(self.values[self.names.index(name)]) for name in variables}
        if len(set(bindings.values())) < len(bindings):  # equal numbers hide which is which
            return None
        if self.level == 1 and not ("+" in self.expression and "*" in self.expression):
            return None  # the chain rule needs a sum feeding a product, or the other way
        try:
            document = evaluator.evaluate(self.expression, bindings)
        except AutogradError:  # a domain error: never in an exercise
            return None
        nodes = document["graph"]["nodes"]
        numbers = [n["value"] for n in nodes] + [n["grad"] for n in nodes]
        if not all(_friendly(x) for x in numbers):
            return None
        relus = [node for node in nodes if node["op"] == "relu"]
        dead = any(node["local_grads"] == [0.0] for node in relus)
        if self.level == 3 and relus and not dead:
            return None  # level 3 is where relu's dead zone is the lesson
        gradients = list(document["gradients"].values())
        if not dead and any(g == 0 for g in gradients):
            return None  # a zero gradient without a reason the learner can see
        if not any(gradients):
            return None  # something must flow back for there to be a question
        if self.kind != "derivative" and not _mistakes_tell_apart(self.expression, document):
            return None
        return document


def _mistakes_tell_apart(expression: str, document: dict[str, Any]) -> bool:
    """Whether a wrong sign, at any node, differs from what the mistakes the checker names first
    (a dead relu, one path only) would answer there, so that a flipped sign is called one."""
    mistakes = Mistakes(expression, document)
    first = [i for i, m in enumerate(mistakes.all) if m.code in _NAMED_BEFORE_SIGN]
    for node in document["graph"]["nodes"]:
        if node["kind"] == "constant" or node["grad"] == 0:
            continue
        predicted = mistakes.answers(node["id"])
        flipped = -node["grad"]
        if any(DEFAULT_TOLERANCE.accepts(predicted[i], flipped) for i in first):
            return False
    return True


def _bindings_text(bindings: dict[str, float]) -> str:
    return ", ".join(f"{name} = {format_number(value)}" for name, value in bindings.items())


def _inline(expression: str) -> str:
    """An expression, or a program on one line (its statements separated by `;`), for a
    sentence."""
    return "; ".join(line.strip() for line in expression.splitlines() if line.strip())


def _unbracketed(text: str) -> str:
    """`(y + z)` as `y + z`, for a sentence that puts it in brackets of its own; `(a) * (b)`
    as it is."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for i, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth == 0:
            return text[1:-1].strip() if i == len(text) - 1 else text
    return text


def _node_question(node: dict[str, Any], expression: str) -> Message:
    """The question about one node of a backward pass: a program's named operation by its
    name, an input by its own (not by a declaration's `Value(2.0)`)."""
    if node["kind"] == "variable":
        return _("What gradient reaches node {id} ({text})?", id=node["id"], text=node["label"])
    text = _unbracketed(expression[node["span"][0] : node["span"][1]])
    if node["name"]:
        return _("What gradient reaches {name} (node {id}: {text})?", name=node["name"],
                 id=node["id"], text=text)  # fmt: skip
    return _("What gradient reaches node {id} ({text})?", id=node["id"], text=text)


def exercise(
    evaluator: Evaluator,
    seed: int,
    level: int = DEFAULT_LEVEL,
    kind: str = DEFAULT_KIND,
    reveal: bool = False,
    generator: int = DEFAULT_GENERATOR,
) -> dict[str, Any]:
    """The exercise of `seed` at `level` of `kind` under the rules of `generator`: what to show,
    what to ask, how to check it."""
    if (
        level not in LEVELS
        or kind not in EXERCISE_KINDS
        or generator not in GENERATORS
        or not 0 <= seed <= MAX_SEED
    ):
        raise ValueError(f"no exercise for seed={seed}, level={level}, kind={kind!r}")
    # A string seed is hashed with SHA-512 by `random`, the same in every process.
    rng = random.Random(f"autograd-exercise/{generator}/{level}/{seed}")  # noqa: S311
    document = None
    for _attempt in range(_ATTEMPTS):
        draft = _Draft(rng, generator, level, kind)
        document = draft.evaluate(evaluator)
        if document is not None:
            break
    if document is None:  # pragma: no cover - every level's shapes succeed within a few draws
        document = evaluator.evaluate("(a + b) * c", {"a": 2.0, "b": -3.0, "c": 10.0})
    expression = document["expression"]
    bindings = {
        name: node["value"]
        for name in document["gradients"]
        for node in document["graph"]["nodes"]
        if node["kind"] == "variable" and node["label"] == name
    }
    shown, inline = _bindings_text(bindings), _inline(expression)
    result: dict[str, Any] = {
        "seed": seed,
        "level": level,
        "kind": kind,
        "generator": generator,
        "expression": expression,
        "bindings": bindings,
    }
    output = document["output"]  # a program's output has a name: the sentences use it
    if kind == "gradients":
        result["instructions"] = (
            _(
                "Predict the gradient of {expression} with respect to each variable at "
                "{bindings} before you press Backward, using the chain rule; then check.",
                expression=inline,
                bindings=shown,
            )
            if output is None
            else _(
                "Predict the gradient of {output}, computed by the program {expression}, with "
                "respect to each input at {bindings} before you press Backward, using the chain "
                "rule; then check.",
                output=output,
                expression=inline,
                bindings=shown,
            )
        )
        questions = [
            (
                "gradients",
                name,
                _("What is the gradient of the output with respect to {name}?", name=name),
                grad,
            )
            for name, grad in document["gradients"].items()
        ]
    elif kind == "backward-pass":
        result["instructions"] = (
            _(
                "Fill in the backward pass of {expression} at {bindings}: the gradient that "
                "reaches each node. The output's own gradient is 1; each edge carries incoming "
                "gradient × local derivative, and the contributions reaching a node add up.",
                expression=inline,
                bindings=shown,
            )
            if output is None
            else _(
                "Fill in the backward pass of the program {expression} at {bindings}, from its "
                "output {output}: the gradient that reaches each node. The output's own gradient "
                "is 1; each edge carries incoming gradient × local derivative, and the "
                "contributions reaching a node add up.",
                output=output,
                expression=inline,
                bindings=shown,
            )
        )
        graph = document["graph"]
        result["graph"] = evaluator.structure(expression)["graph"]
        questions = [
            (
                "nodes",
                node["name"] or str(node["id"]),  # a program's named node by its name
                _node_question(node, expression),
                node["grad"],
            )
            for node in reversed(graph["nodes"])
            if node["id"] != graph["root"] and node["kind"] != "constant"
        ]
    else:
        result["instructions"] = (
            _(
                "Write the derivative of {expression} with respect to each variable, as an "
                "expression in the variables (for example 2 * a * b). The values {bindings} are "
                "only the point where your answer is checked.",
                expression=inline,
                bindings=shown,
            )
            if output is None
            else _(
                "Write the derivative of {output}, computed by the program {expression}, with "
                "respect to each input, as an expression in the inputs {inputs} (for example "
                "2 * a * b). The values {bindings} are only the point where your answer is "
                "checked.",
                output=output,
                expression=inline,
                inputs=", ".join(bindings),
                bindings=shown,
            )
        )
        if any(node["op"] == "relu" for node in document["graph"]["nodes"]):
            # The derivative is piecewise, and asked for on one piece, as /v1/check judges it.
            result["instructions"] = sentences(
                result["instructions"],
                _(
                    "Where a relu is on (its input positive) its local derivative is 1, elsewhere "
                    "0: write the derivative with each relu as it is at {bindings}.",
                    bindings=shown,
                ),
            )
        questions = [
            (
                "derivatives",
                name,
                _("What is the derivative of the output with respect to {name}?", name=name),
                None,
            )
            for name in document["gradients"]
        ]
    result["questions"] = [
        {"item": f"{group}.{key}", "prompt": prompt} for group, key, prompt, _value in questions
    ]
    template: dict[str, dict[str, Any]] = {}
    for group, key, _prompt, _value in questions:
        template.setdefault(group, {})[key] = None
    result["answer_template"] = template
    if reveal:
        result["answers"] = _solution(evaluator, expression, bindings, questions)
    return result


def _solution(
    evaluator: Evaluator,
    expression: str,
    bindings: dict[str, float],
    questions: list[tuple[str, str, Message, Any]],
) -> dict[str, dict[str, Any]]:
    """The right answers, in the shape `answers` of /v1/check takes: a derivative as /v1/check
    reveals it, on the bindings' piece, in the answers' language."""
    solution: dict[str, dict[str, Any]] = {}
    for group, key, _prompt, value in questions:
        solution.setdefault(group, {})[key] = value
    if "derivatives" in solution:
        shown = check(evaluator, expression, bindings, {"derivatives": solution["derivatives"]},
                      reveal=True)  # fmt: skip
        for item in shown["results"]:
            group, _dot, key = item["item"].partition(".")
            if group == "derivatives":
                solution[group][key] = item["expected"]
    return solution
