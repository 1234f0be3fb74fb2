"""The tape of `service.tape`, run for one point in plain floats: the request path's engine.

`Tape.from_graph` lays a compiled program's primitive graph out once as op codes, child indices,
exponents, constants and variable slots. Running it here fills three lists (every node's value,
gradient and local derivatives) with no `Value` objects and no walk of the syntax tree, doing the
very floating-point operations `Value` does, in the same order, so every number is the engine's to
the last bit (tests/test_scalar.py proves it node for node). `Value` stays the readable contract:
where a point is not a finite real number, the run gives up and the caller runs the engine, which
says why and where.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from service.engine import power
from service.errors import DomainError
from service.tape import Tape

# Op codes, in order of how common they are in a graph: the forward loop tests them in this order.
_ADD, _MUL, _TANH, _POW, _RELU, _EXP, _LOG = range(7)
_CODES = {"+": _ADD, "*": _MUL, "tanh": _TANH, "**": _POW, "relu": _RELU, "exp": _EXP, "log": _LOG}
# The engine's shared local derivatives (service/engine.py), equal tuples here.
_SUM_GRADS = (1.0, 1.0)
_RELU_ON, _RELU_OFF = (1.0,), (0.0,)

Run = tuple[list[float], list[float], list[tuple[float, ...]]]


class ScalarTape:
    """A tape prepared for scalar runs: its steps as tuples of plain ints and floats."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.size = tape.size
        self.root = tape.root
        self.slots = tuple(tape.slots.items())
        initial = [0.0] * tape.size
        for i, number in tape.constants.items():
            initial[i] = number
        self.initial = initial
        self.children = tape.children
        # (node, op code, first operand, second operand or -1, exponent or 0.0) per operation
        self.steps = tuple(
            (
                i,
                _CODES[op],
                tape.children[i][0],
                tape.children[i][1] if len(tape.children[i]) > 1 else -1,
                tape.exponents[i] or 0.0,
            )
            for i, op in enumerate(tape.ops)
            if op
        )
        # Backward visits only operations, parents first: a leaf sends nothing.
        self.sends = tuple((i, tape.children[i]) for i, _, _, _, _ in reversed(self.steps))

    def run(self, inputs: Mapping[str, float]) -> Run | None:
        """Every node's value, gradient and local derivatives for these inputs; None where the
        engine would raise (or might: a sum that overflows only on the way to the check)."""
        forward = self.forward(inputs)
        if forward is None:
            return None
        values, locals_ = forward
        return values, backward(self.sends, locals_, self.size, self.root), locals_

    def forward(
        self, inputs: Mapping[str, float]
    ) -> tuple[list[float], list[tuple[float, ...]]] | None:
        """Every node's value and local derivatives, or None: see `run`."""
        values = self.initial.copy()
        for name, i in self.slots:
            values[i] = inputs[name]
        locals_: list[tuple[float, ...]] = [()] * self.size
        tanh, exp, log, isfinite = math.tanh, math.exp, math.log, math.isfinite
        try:
            for i, code, a, b, k in self.steps:
                x = values[a]
                if code == _ADD:
                    values[i] = x + values[b]
                    locals_[i] = _SUM_GRADS
                elif code == _MUL:
                    y = values[b]
                    values[i] = x * y
                    locals_[i] = (y, x)
                elif code == _TANH:
                    t = values[i] = tanh(x)
                    locals_[i] = (1.0 - t * t,)
                elif code == _POW:
                    if x == 0 and 0 < k < 1:
                        return None
                    values[i] = power(x, k)
                    local = k * power(x, k - 1) if k != 0 else 0.0
                    if not isfinite(local):
                        return None
                    locals_[i] = (local,)
                elif code == _RELU:
                    values[i] = 0.0 if x < 0 else x
                    locals_[i] = _RELU_ON if x > 0 else _RELU_OFF
                elif code == _EXP:
                    out = values[i] = exp(x)
                    locals_[i] = (out,)
                else:  # _LOG
                    if x <= 0:
                        return None
                    values[i] = log(x)
                    local = 1.0 / x
                    if not isfinite(local):
                        return None
                    locals_[i] = (local,)
        except (DomainError, OverflowError):
            return None
        # The engine refuses an infinite sum, product or power where it arises; one sum finds
        # any (infinities survive a sum, and nothing here makes a NaN from finite operands).
        if not isfinite(sum(values)):
            return None
        return values, locals_


def backward(
    sends: tuple[tuple[int, tuple[int, ...]], ...],
    locals_: list[tuple[float, ...]],
    size: int,
    root: int,
) -> list[float]:
    """`Value.backward` over lists: `sends` are the operations, parents first, with their
    children; each edge adds local derivative x parent's gradient, in the engine's order."""
    grads = [0.0] * size
    grads[root] = 1.0
    for i, children in sends:
        grad = grads[i]
        for child, local in zip(children, locals_[i], strict=True):
            grads[child] += local * grad
    return grads


class OperatorTape:
    """The operator view run on its program's primitive tape.

    An operator node's value is a primitive node's value (or a constant); its local derivatives
    come from the operation table's rule, from its operands' values, as the engine and
    `_operator_node` in service/evaluator.py compute them (constants where its operands are).
    Then backward runs over the operator graph's own edges.
    """

    def __init__(
        self,
        primitive: ScalarTape,
        sources: tuple[int | float, ...],
        kinds: tuple[Callable[..., tuple[float, ...]] | tuple[float, ...], ...],
        exponents: tuple[float | None, ...],
        children: tuple[tuple[int, ...], ...],
        root: int,
    ) -> None:
        self.primitive = primitive
        # per node: the primitive node it takes its value from (an int), or its constant value
        self.sources = sources
        # per node: its constant local derivatives (a tuple), or its operation's rule (a function)
        self.kinds = kinds
        self.exponents = exponents
        self.children = children
        self.size = len(sources)
        self.root = root
        self.sends = tuple((i, children[i]) for i in range(self.size - 1, -1, -1) if children[i])

    def run(self, inputs: Mapping[str, float]) -> Run | None:
        forward = self.primitive.forward(inputs)
        if forward is None:
            return None
        primitive_values = forward[0]
        values = [
            primitive_values[source] if type(source) is int else source for source in self.sources
        ]
        locals_: list[tuple[float, ...]] = []
        append = locals_.append
        try:
            for i, kind in enumerate(self.kinds):
                if type(kind) is tuple:
                    append(kind)
                else:
                    operands = [values[c] for c in self.children[i]]
                    append(tuple(kind(self.exponents[i], values[i], *operands)))  # type: ignore[operator]
        except (ArithmeticError, DomainError):
            return None
        return values, backward(self.sends, locals_, self.size, self.root), locals_
