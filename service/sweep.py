"""Sweeps: an expression's value and gradients over a line, a grid or a list of points, at once.

The expression is compiled once (the evaluator's primitive graph, from its cache) into a `Tape`,
which runs over every point in a few numpy calls per node. Each point gets exactly what the scalar
engine would give it; a point outside the domain is null in every array, with its reason code in
`errors`, and the other points are unaffected.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from service import i18n
from service.engine import Value, failure_message, format_number
from service.errors import BindingError, RequestTooLarge
from service.evaluator import (
    Compiled,
    Evaluator,
    division_by_zero,
    gradient_overflow,
    invalid_binding,
    is_finite_number,
    too_many_bindings,
    unbound,
    unknown_bindings,
    unused_warnings,
)
from service.i18n import DEFAULT_LOCALE, Message, _, translate
from service.limits import Limits
from service.parser import Lines, ParsedExpression
from service.tape import Failure, Tape


@dataclass(frozen=True)
class Axis:
    """One varied input: `points` evenly spaced values from `start` to `stop`, both included."""

    name: str
    start: float
    stop: float
    points: int

    def values(self) -> np.ndarray:
        if math.isfinite(self.stop - self.start):
            # start + i * step: a point the step lands on exactly (0 from -4 to 2 in 4 points)
            # is exact, and both ends are as given.
            return np.linspace(self.start, self.stop, self.points)
        # Ends so far apart that their difference overflows: weighted ends cannot.
        t = np.arange(self.points) / max(self.points - 1, 1)
        return self.start * (1.0 - t) + self.stop * t


# The tape of each compiled expression lives as long as the evaluator's cache keeps it.
_tapes: weakref.WeakKeyDictionary[Compiled, Tape] = weakref.WeakKeyDictionary()
_tapes_lock = threading.Lock()


def tape_of(compiled: Compiled) -> Tape:
    """The tape of a primitive-granularity compiled expression, built once."""
    with _tapes_lock:
        tape = _tapes.get(compiled)
    if tape is None:
        # NaN inputs trace the graph's shape, as the evaluator does when it compiles.
        env = {name: Value(math.nan) for name in compiled.parsed.inputs}
        root, results = compiled.build(env)
        tape = Tape.from_graph(root, env, results.values())
        with _tapes_lock:
            _tapes[compiled] = tape
    return tape


def sweep(
    evaluator: Evaluator,
    expression: str,
    bindings: Mapping[str, Any],
    vary: Sequence[Axis] | None = None,
    points: Sequence[Mapping[str, Any]] | None = None,
    output: str | None = None,
) -> dict[str, Any]:
    """Value and gradients of `expression` (or a program's `output`) along `vary` (a line, or a
    grid of two axes), or at each of `points` (merged over `bindings`, then over the program's
    declared inputs), under the evaluator's limits."""
    if (vary is None) == (points is None):
        raise ValueError("a sweep takes either `vary` or `points`")
    limits = evaluator.limits
    compiled = evaluator.compile(expression, "primitive", output)
    parsed = compiled.parsed
    _check_names(parsed, bindings, limits.max_bindings)
    _check_numbers(bindings, "bindings")
    given = {**parsed.defaults, **bindings}
    tape = tape_of(compiled)
    if vary is not None:
        shape = _check_vary(vary, parsed, given, limits)
        axes = {axis.name: axis.values() for axis in vary}
        grids = np.meshgrid(*axes.values(), indexing="ij")
        varied = {name: grid.ravel() for name, grid in zip(axes, grids, strict=True)}
    else:
        assert points is not None
        shape = (len(points),)
        varied = _check_points(points, parsed, given, limits)
        axes = varied
    count = math.prod(shape)
    _check_cells(tape.size, count, limits)
    inputs: dict[str, Any] = {name: varied.get(name, given.get(name)) for name in tape.slots}
    result = tape.run(inputs, count)
    # An input the output does not depend on (declared, never used) has gradient 0.
    unused = np.where(np.isnan(result.value), math.nan, 0.0)
    # numpy arrays, NaN at failed points: orjson writes them as JSON lists with null there, at
    # a fraction of the cost of building Python lists first.
    return {
        "expression": expression,
        "output": parsed.output,
        "axes": axes,
        "value": result.value.reshape(shape),
        "gradients": {
            name: result.gradients.get(name, unused).reshape(shape) for name in parsed.inputs
        },
        "errors": _errors(result.failures, shape, compiled),
        "warnings": unused_warnings(parsed),
    }


def at_bindings(
    evaluator: Evaluator,
    expression: str,
    bindings: Mapping[str, float],
    output: str | None = None,
) -> tuple[dict[str, float], dict[str, Any] | None]:
    """The point a plot marks: the bindings, a program's declared inputs at their defaults
    unless bound; and the value and gradients there (value None where that point fails), or None
    when the point does not give every input."""
    compiled = evaluator.compile(expression, "primitive", output)
    given = {**compiled.parsed.defaults, **bindings}
    if any(name not in given for name in compiled.parsed.variables):
        return given, None
    tape = tape_of(compiled)
    result = tape.run({name: given[name] for name in tape.slots}, 1)
    if result.failures:
        return given, {"value": None, "gradients": {}}
    # every input, as the sweep has them: 0 for an input the output does not use
    gradients = {
        name: float(result.gradients[name][0]) if name in result.gradients else 0.0
        for name in compiled.parsed.inputs
    }
    return given, {"value": float(result.value[0]), "gradients": gradients}


def caption(evaluator: Evaluator, expression: str, output: str | None = None) -> str:
    """What a sweep is of, on one line for a plot's title: a program's output by its name, else
    the output's own text (a plain expression's whole text) without comments."""
    parsed = evaluator.compile(expression, "primitive", output).parsed
    if parsed.output is not None:
        return parsed.output
    start, end = parsed.root.span
    text = re.sub(r"#[^\n]*", "", parsed.text[start:end])  # the language has no strings
    return " ".join(text.replace("\\", " ").split())  # a backslash only continues a line


def localized(document: dict[str, Any], locale: str) -> dict[str, Any]:
    """The sweep `document` with its errors' and warnings' messages in `locale`; its arrays as
    they are."""
    if locale == DEFAULT_LOCALE or not (document["errors"] or document["warnings"]):
        return document
    # Many points fail for the same reason: each distinct sentence is translated once.
    translated: dict[Message, str] = {}
    errors = []
    for error in document["errors"]:
        message = error["message"]
        if message not in translated:
            translated[message] = translate(message, locale)
        errors.append({**error, "message": translated[message]})
    return {**document, "errors": errors, "warnings": i18n.localized(document["warnings"], locale)}


def _check_names(parsed: ParsedExpression, bindings: Mapping[str, Any], max_bindings: int) -> None:
    if len(bindings) > max_bindings:
        raise too_many_bindings(len(bindings), max_bindings)
    unknown = sorted(name for name in bindings if name not in parsed.input_set)
    if unknown:
        raise unknown_bindings(unknown, parsed)


def to_json(document: dict[str, Any]) -> bytes:
    """A sweep document as JSON: its arrays as lists, null at every failed point."""
    return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)


def _check_numbers(bindings: Mapping[str, Any], where: str, location: str = "/bindings") -> None:
    """Every value a finite number (never a boolean), else `invalid_binding` for the first that
    is not; `where` says in words which object of the request they are in, `location` as a JSON
    pointer."""
    for name, value in bindings.items():
        if not is_finite_number(value):
            raise invalid_binding(name, value, where, location)


def _check_vary(
    vary: Sequence[Axis], parsed: ParsedExpression, given: Mapping[str, Any], limits: Limits
) -> tuple[int, ...]:
    names = [axis.name for axis in vary]
    if not 1 <= len(vary) <= 2 or len(set(names)) != len(names):
        message = _("vary one input (a line) or two different inputs (a grid)")
        raise BindingError("invalid_binding", message, names, location=None)
    unknown = [name for name in names if name not in parsed.input_set]
    if unknown:
        raise unknown_bindings(unknown, parsed, varied=True)
    missing = [name for name in parsed.variables if name not in given and name not in names]
    if missing:
        raise unbound(parsed, missing, [])
    for axis in vary:
        if not (math.isfinite(axis.start) and math.isfinite(axis.stop)) or axis.points < 1:
            message = _(
                "{name} must vary between two finite numbers over at least one point",
                name=axis.name,
            )
            raise BindingError("invalid_binding", message, [axis.name], location=None)
    shape = tuple(axis.points for axis in vary)
    if len(shape) == 2 and max(shape) > limits.max_sweep_grid:
        message = _(
            "a grid of {rows} x {columns} points; each side has at most {maximum}",
            rows=_count_text(shape[0]),
            columns=_count_text(shape[1]),
            maximum=limits.max_sweep_grid,
        )
        raise RequestTooLarge("grid_too_large", message, "max_sweep_grid", limits.max_sweep_grid)
    if len(shape) == 1 and shape[0] > limits.max_sweep_points:
        raise _too_many_points(shape[0], limits)
    return shape


def _count_text(count: int) -> str:
    """A count as a message shows it: `1e+30` for a count sent as 1e30, not the 31 digits of
    the double it became."""
    return str(count) if count < 10**9 else format_number(float(count))


def _too_many_points(count: int, limits: Limits) -> RequestTooLarge:
    maximum = limits.max_sweep_points
    message = _(
        "{count} points; a sweep has at most {maximum}", count=_count_text(count), maximum=maximum
    )
    return RequestTooLarge("too_many_points", message, "max_sweep_points", maximum)


def _check_points(
    points: Sequence[Mapping[str, Any]],
    parsed: ParsedExpression,
    given: Mapping[str, Any],
    limits: Limits,
) -> dict[str, np.ndarray]:
    """One array per input that some point sets, each point falling back to `given`."""
    if len(points) > limits.max_sweep_points:
        raise _too_many_points(len(points), limits)
    named = {name for point in points for name in point}
    for index, point in enumerate(points):
        _check_names(parsed, point, limits.max_bindings)
        _check_numbers(point, f"points[{index}]", f"/points/{index}")
    # The inputs no point and no binding gives, all of them named at once.
    missing = [n for n in parsed.variables if n not in named and n not in given]
    if missing:
        raise unbound(parsed, missing, [])
    # Then the first point that lacks an input some other point gives, with all it lacks.
    for index, point in enumerate(points):
        lacking = [n for n in parsed.variables if n not in point and n not in given]
        if lacking:
            raise unbound(parsed, lacking, [], point=index)
    columns: dict[str, np.ndarray] = {}
    for name in parsed.inputs:
        if name not in named:
            continue
        # An input the output does not use needs no value: where no point gives one, NaN.
        fallback = given.get(name, math.nan)
        columns[name] = np.array([point.get(name, fallback) for point in points], dtype=float)
    return columns


def _check_cells(nodes: int, count: int, limits: Limits) -> None:
    if nodes * count > limits.max_sweep_cells:
        message = _(
            "{nodes} graph nodes at {count} points is {cells} node evaluations; "
            "a sweep does at most {maximum}",
            nodes=nodes,
            count=count,
            cells=nodes * count,
            maximum=limits.max_sweep_cells,
        )
        raise RequestTooLarge("sweep_too_large", message, "max_sweep_cells", limits.max_sweep_cells)


def _errors(
    failures: list[Failure], shape: tuple[int, ...], compiled: Compiled
) -> list[dict[str, Any]]:
    """Each failed point: where it is in the sweep, why, and where in the text (with the line
    and column, as a problem's `position` has them)."""
    if not failures:  # the common case: nothing below is needed
        return []
    lines = Lines(compiled.parsed.text)
    # A division: micrograd's `a * b**-1` fails at `b**-1`, where the engine names the `/`
    # written (its node is the product's) and, dividing by 0, its divisor.
    divisions = {node.span: node for node in compiled.node_of if node.op == "/"}
    errors = []
    for failure in failures:
        index: int | list[int] = (
            failure.point if len(shape) == 1 else list(divmod(failure.point, shape[1]))
        )
        template = compiled.templates[failure.node]
        node, message = failure.node, _message(failure, template)
        division = divisions.get(tuple(template["span"]))
        if division is not None and failure.kind != "non_finite":  # not a gradient's, found later
            node = compiled.node_of[division]
            if failure.kind == "division_by_zero":
                message = division_by_zero(compiled.parsed, division)
        start, end = template["span"]
        line, column = lines(start)
        position = {"start": start, "end": end, "line": line, "column": column}
        errors.append(
            {
                "index": index,
                "kind": failure.kind,
                "message": message,
                "node": node,
                "position": position,
            }
        )
    return errors


def _message(failure: Failure, node: Mapping[str, Any]) -> Message:
    """What the engine says at such a point: the failing node's operation run on its operand."""
    if failure.operand is not None:
        said = failure_message(node["op"], failure.operand, node["exponent"])
        if said is not None:
            return said
    return gradient_overflow(node["label"])
