"""The operations of the language, each defined once: syntax, values, folding, sympy form,
derivatives, expansion into micrograd's primitives and the nodes micrograd builds for it.

The parser, the evaluator, the symbolic oracle and `/v1/operations` all read this table, so adding
an operation means adding one entry here (and, for a primitive, its method on `Value`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from service.engine import Value, finite, format_number, power, power_derivative
from service.errors import DomainError
from service.i18n import _

# Operands are `Value`s or plain numbers; `k` is the constant exponent of `**`, else None.
Apply = Callable[..., Any]


def _frozen(mapping: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(mapping)


@dataclass(frozen=True)
class Operation:
    """One operation a user can write."""

    name: str  # the node's `op` in a graph document
    # How it is written, with `a`, `b` for operands and `k` for a constant; its local
    # derivatives, as text. Either may be a `Message`: the formulas are code and stay as they
    # are, the prose around them is translated.
    syntax: str
    arity: int  # operand nodes; the constant exponent of `**` is not one
    primitive: bool  # a micrograd primitive, or derived from them
    rule: str
    form: str  # the written form, `{0}`, `{1}` the operands and `{k}` the exponent
    # How the grammar reads it: "infix" (`symbols` between operands, binding `precedence`),
    # "prefix" (a sign before its operand), "power" (infix with a constant right side), or
    # "call" (`name(x)`, and the method `x.name()`).
    grammar: str
    # Python's semantics over `Value`s and numbers: `apply(k, *operands)`; Python's own operator
    # dispatch (`2 - a` calls `a.__rsub__(2)`) builds exactly micrograd's graph.
    apply: Apply
    # The sympy form: `sympy_form(forms, k, *operands)`, `forms` being `service.symbolic`.
    sympy_form: Apply
    # d(out)/d(operand) per operand: `local_grads(k, out, *operand values)`. The operator view
    # uses it for a derived operation's one node; for a primitive it restates the engine's rule.
    local_grads: Callable[..., tuple[float, ...]]
    # Nodes micrograd adds to its graph, by which operands are constants (`c`) or not (`v`):
    # `a - b` is `a + (b * -1)`, three nodes; `2 - a` is `(a * -1) + 2`, four.
    nodes: Mapping[str, int]
    # How micrograd builds a derived operation from primitives, by shape, for the operator view:
    # `a - 2` becomes `a + -2` (Python negates the number), `2 / a` becomes `(a ** -1) * 2`.
    expansions: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    expansion: str | None = None  # the general expansion, as `/v1/operations` states it
    symbols: tuple[str, ...] = ()  # the tokens that write it (infix, prefix and power)
    precedence: int = 0  # binding power of an infix operator

    def fold(self, k: float | None, *operands: float) -> float:
        """The operation on plain numbers, as Python computes it, with the engine's checks."""
        return _FOLDS.get(self.name, _fold_on_values)(self, k, *operands)

    def label(self, k: float | None) -> str:
        """What a graph node of this operation shows."""
        if self.grammar == "power":
            return f"**{format_number(k if k is not None else 0.0)}"
        return self.symbols[0] if self.symbols else self.name

    def write(self, *operands: str, k: str = "2") -> str:
        """The operation written with these operand texts."""
        return self.form.format(*operands, k=k)


def _fold_on_values(operation: Operation, k: float | None, *operands: float) -> float:
    # A primitive computes on numbers exactly as Python does; the engine adds its checks.
    result: Value = operation.apply(k, *(Value(x) for x in operands))
    return result.data


def _fold_quotient(operation: Operation, k: float | None, a: float, b: float) -> float:
    if b == 0:
        raise DomainError(
            "division_by_zero", _("{dividend} / 0 divides by zero", dividend=format_number(a))
        )
    return finite(a / b, "quotient")


_FOLDS: dict[str, Callable[..., float]] = {
    "**": lambda operation, k, a: power(a, k),
    "/": _fold_quotient,
    "-": lambda operation, k, a, b: finite(a - b, "difference"),
    "neg": lambda operation, k, a: -a,
    "Heaviside": lambda operation, k, a: operation.apply(k, a),  # on numbers only
}


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "+", "a + b", 2, True, "d(a + b)/da = 1; d(a + b)/db = 1",
        form="{0} + {1}", grammar="infix", symbols=("+",), precedence=10,
        apply=lambda k, a, b: a + b,
        sympy_form=lambda s, k, a, b: a + b,
        local_grads=lambda k, out, a, b: (1.0, 1.0),
        nodes=_frozen({"vv": 1, "vc": 2, "cv": 2}),
    ),
    Operation(
        "*", "a * b", 2, True, "d(a * b)/da = b; d(a * b)/db = a",
        form="{0} * {1}", grammar="infix", symbols=("*",), precedence=20,
        apply=lambda k, a, b: a * b,
        sympy_form=lambda s, k, a, b: a * b,
        local_grads=lambda k, out, a, b: (b, a),
        nodes=_frozen({"vv": 1, "vc": 2, "cv": 2}),
    ),
    Operation(
        "**", _("{power}  (or {caret}; k constant)", power="a ** k", caret="a ^ k"), 1, True,
        _("{rule}; the exponent k is a constant and gets no gradient",
          rule="d(a ** k)/da = k * a ** (k - 1)"),
        form="{0} ** {k}", grammar="power", symbols=("**", "^"), precedence=40,
        apply=lambda k, a: a**k,
        sympy_form=lambda s, k, a: a ** s.number(k),
        local_grads=lambda k, out, a: (power_derivative(a, k),),
        nodes=_frozen({"v": 1}),
    ),
    Operation(
        "exp", "exp(a)", 1, True, "d exp(a)/da = exp(a)",
        form="exp({0})", grammar="call",
        apply=lambda k, a: a.exp(),
        sympy_form=lambda s, k, a: s.exp(a),
        local_grads=lambda k, out, a: (out,),
        nodes=_frozen({"v": 1}),
    ),
    Operation(
        "log", "log(a)", 1, True,
        _("{rule}  (natural log, {domain})", rule="d log(a)/da = 1 / a", domain="a > 0"),
        form="log({0})", grammar="call",
        apply=lambda k, a: a.log(),
        sympy_form=lambda s, k, a: s.log(a),
        local_grads=lambda k, out, a: (1.0 / a,),
        nodes=_frozen({"v": 1}),
    ),
    Operation(
        "relu", "relu(a)", 1, True,
        _("{rule}  (0 at {kink})", rule="d relu(a)/da = 1 if a > 0 else 0", kink="a = 0"),
        form="relu({0})", grammar="call",
        apply=lambda k, a: a.relu(),
        sympy_form=lambda s, k, a: s.relu(a),
        local_grads=lambda k, out, a: (1.0 if a > 0 else 0.0,),
        nodes=_frozen({"v": 1}),
    ),
    Operation(
        "tanh", "tanh(a)", 1, True, "d tanh(a)/da = 1 - tanh(a) ** 2",
        form="tanh({0})", grammar="call",
        apply=lambda k, a: a.tanh(),
        sympy_form=lambda s, k, a: s.tanh(a),
        local_grads=lambda k, out, a: (1.0 - out * out,),
        nodes=_frozen({"v": 1}),
    ),
    Operation(
        "neg", "-a", 1, False, "d(-a)/da = -1",
        form="-{0}", grammar="prefix", symbols=("-",),
        apply=lambda k, a: -a,
        sympy_form=lambda s, k, a: -a,
        local_grads=lambda k, out, a: (-1.0,),
        nodes=_frozen({"v": 2}),
        expansions=_frozen({"v": "{0} * -1"}),
        expansion="a * -1",
    ),
    Operation(
        "-", "a - b", 2, False, "d(a - b)/da = 1; d(a - b)/db = -1",
        form="{0} - {1}", grammar="infix", symbols=("-",), precedence=10,
        apply=lambda k, a, b: a - b,
        sympy_form=lambda s, k, a, b: a - b,
        local_grads=lambda k, out, a, b: (1.0, -1.0),
        nodes=_frozen({"vv": 3, "vc": 2, "cv": 4}),
        expansions=_frozen(
            {"vv": "{0} + ({1} * -1)", "vc": "{0} + {neg1}", "cv": "({1} * -1) + {0}"}
        ),
        expansion="a + (b * -1)",
    ),
    Operation(
        "/", "a / b", 2, False, "d(a / b)/da = 1 / b; d(a / b)/db = -a / b ** 2",
        form="{0} / {1}", grammar="infix", symbols=("/",), precedence=20,
        apply=lambda k, a, b: a / b,
        sympy_form=lambda s, k, a, b: a / b,
        # `-a / b / b`, not `-a / (b * b)`: b * b underflows to 0 for |b| < 1e-162
        local_grads=lambda k, out, a, b: (1.0 / b, -a / b / b),
        nodes=_frozen({"vv": 2, "vc": 2, "cv": 3}),
        expansions=_frozen(
            {"vv": "{0} * {1} ** -1", "vc": "{0} * {inv1}", "cv": "({1} ** -1) * {0}"}
        ),
        expansion="a * b ** -1",
    ),
)  # fmt: skip

# What an answer to /v1/check may write besides the language: relu's derivative, the step sympy
# writes `Heaviside(x, 0)`. It is no operation of `Value`, so no expression or program has it.
ANSWER_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "Heaviside", "Heaviside(a)  (or Heaviside(a, 0))", 1, False,
        "Heaviside(a) = 1 if a > 0 else 0",
        form="Heaviside({0}, 0)", grammar="call",
        apply=lambda k, a: 1.0 if a > 0 else 0.0,
        sympy_form=lambda s, k, a: s.heaviside(a),
        local_grads=lambda k, out, a: (0.0,),
        nodes=_frozen({"v": 1}),
    ),
)  # fmt: skip

BY_NAME: dict[str, Operation] = {op.name: op for op in (*OPERATIONS, *ANSWER_OPERATIONS)}

# The calls the grammar accepts: `name(argument)`, each a method of `Value`.
FUNCTIONS: tuple[str, ...] = tuple(op.name for op in OPERATIONS if op.grammar == "call")
ANSWER_FUNCTIONS: tuple[str, ...] = tuple(op.name for op in ANSWER_OPERATIONS)

# Infix tokens, each with its binding power and operation: `**` binds tighter than a sign on
# its left (`-a**2` is `-(a**2)`), a sign tighter than `*` and `/`, those tighter than `+`, `-`.
INFIX: dict[str, Operation] = {
    symbol: op for op in OPERATIONS if op.grammar in ("infix", "power") for symbol in op.symbols
}
PREFIX: dict[str, Operation] = {
    symbol: op for op in OPERATIONS if op.grammar == "prefix" for symbol in op.symbols
}
PREFIX_PRECEDENCE = 30


def apply(op: str, k: float | None, *operands: Value | float) -> Value | float:
    """One operation on Values or plain numbers, with Python's semantics for both."""
    result: Value | float = BY_NAME[op].apply(k, *operands)
    return result


def shape(constants: tuple[bool, ...]) -> str:
    """The shape key of `nodes` and `expansions`: `c` for a constant operand, `v` otherwise."""
    return "".join("c" if constant else "v" for constant in constants)
