"""The sympy form of a parsed expression, built from its syntax tree: the symbolic oracle."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sympy

from service.operations import BY_NAME

if TYPE_CHECKING:
    from service.parser import Node, ParsedExpression


class relu(sympy.Function):  # named as the language writes it
    """max(x, 0), whose derivative is Heaviside(x, 0): 0 at x = 0, as micrograd's relu."""

    @classmethod
    def eval(cls, x: sympy.Expr) -> sympy.Expr | None:
        if x.is_number and x.is_real:
            return sympy.Max(x, 0)
        return None

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        return sympy.Heaviside(self.args[0], 0)

    def _eval_rewrite_as_Piecewise(self, x: sympy.Expr, **kwargs: object) -> sympy.Expr:
        return sympy.Piecewise((0, x < 0), (x, True))


class _Power(sympy.Function):
    """f**k for a constant k, differentiated by the power rule k*f**(k - 1)*f', as the engine's
    local derivative is: sympy writes f**k*k*f'/f, which is undefined where f = 0 though the
    engine's gradient there is 0 (for k > 1)."""

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        base, exponent = self.args
        return exponent * sympy.Pow(base, exponent - 1)


def derivative(expression: sympy.Expr, name: str) -> sympy.Expr:
    """The derivative of `expression` by the variable `name`, each power by the power rule."""

    def powered(power: sympy.Expr) -> bool:
        return bool(power.is_Pow and not power.exp.is_Integer and not power.base.is_Symbol)

    ruled = expression.replace(powered, lambda power: _Power(power.base, power.exp))
    derived = sympy.diff(ruled, sympy.Symbol(name, real=True)).replace(_Power, sympy.Pow)
    return derived.replace(lambda term: term.is_Mul, _unsigned)


def _unsigned(product: sympy.Expr) -> sympy.Expr:
    """`sign(u)*|u|**n` (n >= 1), the derivative of |u|**(n + 1) that sympy makes of
    `(u**2)**k`, as `u*|u|**(n - 1)`: the same number, and defined at u = 0 as the engine's
    gradient is, where sign(u) written as u/|u| is not."""
    factors = list(product.args)
    for sign in [factor for factor in factors if isinstance(factor, sympy.sign)]:
        u = sign.args[0]
        for index, factor in enumerate(factors):
            base, n = factor.as_base_exp()
            if base == sympy.Abs(u) and n.is_number and n >= 1:
                factors[index] = sympy.Abs(u) ** (n - 1)
                factors.remove(sign)
                factors.append(u)
                break
    return sympy.Mul(*factors)


def number(value: float) -> sympy.Expr:
    """An exact integer where the float is one, so `a * 2` stays `2*a`, not `2.0*a`."""
    if value.is_integer() and abs(value) < 2**53:
        return sympy.Integer(int(value))
    return sympy.Float(value, 17)


# The functions the operation table's sympy forms call, by the language's names.
exp, log, tanh = sympy.exp, sympy.log, sympy.tanh


def heaviside(x: sympy.Expr) -> sympy.Expr:
    """relu's derivative, as an answer writes it: 0 at x = 0, the engine's convention."""
    return sympy.Heaviside(x, 0)


def from_tree(
    postorder: list[Node],
    root: Node,
    relu: Callable[[Node, sympy.Expr], sympy.Expr] | None = None,
) -> sympy.Expr:
    """Build the expression bottom-up, one tree node at a time (no recursion, no text).

    `relu(node, operand)`, when given, builds each relu node in place of sympy's `relu`: by its
    own tree node, since one sympy term may stand for relus the engine found on and off."""
    forms = sys.modules[__name__]
    built: dict[Node, sympy.Expr] = {}
    for node in postorder:
        if node.kind == "variable":
            built[node] = sympy.Symbol(node.name, real=True)
        elif node.kind == "constant":
            built[node] = number(node.value)
        elif node.op == "relu" and relu is not None:
            built[node] = relu(node, built[node.args[0]])
        else:
            operands = [built[arg] for arg in node.args]
            built[node] = BY_NAME[node.op].sympy_form(forms, node.exponent, *operands)
    return built[root]


def engine_piece(
    parsed: ParsedExpression, node_of: Mapping[Node, int], nodes: Sequence[dict[str, Any]]
) -> sympy.Expr:
    """The output on the piece an evaluation lies on: `parsed.sympy` itself when the output has
    no relu (one piece, the whole function); else built as `from_tree` builds it, but with
    each relu as the engine's forward pass left it, its input where the relu's local derivative
    (in the evaluated graph `nodes`, at `node_of[node]`) is 1 and 0 where it is 0 (at the kink
    too, as micrograd's relu). Its derivative is the piece's, with no Heaviside left to decide.

    The engine decides, not sympy: the two may add the same floats in different orders, or sympy
    exactly where the engine rounded, and land on opposite sides of 0 (`relu(w*x + b)` at 0.1,
    10, -1 is off for the engine, whose sum is exactly 0.0, and on for the exact sum, 5.6e-17).
    Each relu is decided by its own tree node: replacing sympy's relu terms afterwards could
    not, since one term (`relu(a - b + c)`) may stand for relus the engine found on and off."""

    order = parsed.postorder()
    if not any(node.op == "relu" for node in order):
        return parsed.sympy

    def piece(node: Node, operand: sympy.Expr) -> sympy.Expr:
        on = nodes[node_of[node]]["local_grads"][0] > 0
        return operand if on else sympy.Integer(0)

    return from_tree(order, parsed.root, relu=piece)
