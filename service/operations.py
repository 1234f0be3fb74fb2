"""The operations of the expression language: how each is written, differentiated and expanded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Operation:
    """One operation a user can write, as `/v1/operations` describes it."""

    name: str  # the node's `op` in a graph document
    syntax: str  # how it is written, with `a`, `b` for operands and `k` for a constant
    arity: int
    primitive: bool  # a micrograd primitive, or derived from them
    rule: str  # its local derivatives, as text
    expansion: str | None = None  # how micrograd builds a derived operation from primitives
    # Local derivatives of a derived operation from its operands' values, for the operator view.
    local_grads: Callable[..., tuple[float, ...]] | None = None


OPERATIONS: tuple[Operation, ...] = (
    Operation("+", "a + b", 2, True, "d(a + b)/da = 1; d(a + b)/db = 1"),
    Operation("*", "a * b", 2, True, "d(a * b)/da = b; d(a * b)/db = a"),
    Operation(
        "**",
        "a ** k  (or a ^ k; k constant)",
        1,
        True,
        "d(a ** k)/da = k * a ** (k - 1); the exponent k is a constant and gets no gradient",
    ),
    Operation("exp", "exp(a)", 1, True, "d exp(a)/da = exp(a)"),
    Operation("log", "log(a)", 1, True, "d log(a)/da = 1 / a  (natural log, a > 0)"),
    Operation("relu", "relu(a)", 1, True, "d relu(a)/da = 1 if a > 0 else 0  (0 at a = 0)"),
    Operation("tanh", "tanh(a)", 1, True, "d tanh(a)/da = 1 - tanh(a) ** 2"),
    Operation("neg", "-a", 1, False, "d(-a)/da = -1", "a * -1", lambda a: (-1.0,)),
    Operation(
        "-",
        "a - b",
        2,
        False,
        "d(a - b)/da = 1; d(a - b)/db = -1",
        "a + (b * -1)",
        lambda a, b: (1.0, -1.0),
    ),
    Operation(
        "/",
        "a / b",
        2,
        False,
        "d(a / b)/da = 1 / b; d(a / b)/db = -a / b ** 2",
        "a * b ** -1",
        # `-a / b / b`, not `-a / (b * b)`: b * b underflows to 0 for |b| < 1e-162
        lambda a, b: (1.0 / b, -a / b / b),
    ),
)

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}

# The calls the grammar accepts: `name(argument)`, each a method of `Value`.
FUNCTIONS: tuple[str, ...] = ("exp", "log", "relu", "tanh")
