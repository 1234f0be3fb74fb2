"""The scalar autodiff engine: micrograd's `Value`, with every edge's local derivative kept."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from service.errors import DomainError
from service.i18n import Message, _

# What overflowed, for `finite`: whole sentences, so each translates as one.
_OVERFLOWS: dict[str, Message] = {
    "sum": _("a sum overflows the range of a 64-bit float"),
    "difference": _("a difference overflows the range of a 64-bit float"),
    "product": _("a product overflows the range of a 64-bit float"),
    "quotient": _("a quotient overflows the range of a 64-bit float"),
    "power": _("a power overflows the range of a 64-bit float"),
    "log derivative": _("the derivative of log overflows the range of a 64-bit float"),
}


def finite(x: float, what: str) -> float:
    """`x`, unless it overflowed: Python's float arithmetic saturates to inf where `**` raises.

    `what` names the result in `_OVERFLOWS`."""
    if math.isinf(x):
        raise DomainError("overflow", _OVERFLOWS[what])
    return x


def power(x: float, k: float) -> float:
    """`x ** k` as a real number, or a `DomainError` saying why it is not one."""
    if x == 0 and k < 0:
        raise DomainError(
            "division_by_zero", _("0 ** {exponent} divides by zero", exponent=format_number(k))
        )
    if x < 0 and not k.is_integer():
        raise DomainError(
            "complex_result",
            _(
                "a negative base ({base}) to a non-integer power ({exponent}) is not a real number",
                base=format_number(x),
                exponent=format_number(k),
            ),
        )
    try:
        return finite(x**k, "power")
    except OverflowError:
        message = _(
            "{base} ** {exponent} overflows", base=format_number(x), exponent=format_number(k)
        )
        raise DomainError("overflow", message) from None


def power_derivative(x: float, k: float) -> float:
    """d(x ** k)/dx: micrograd's `k * x ** (k - 1)`, except that k = 0 has derivative 0 even at
    x = 0; a `DomainError` naming the power the user wrote (not `x ** (k - 1)`) when it
    overflows."""
    if k == 0:
        return 0.0
    try:
        local = k * power(x, k - 1)
    except DomainError as error:
        if error.kind != "overflow":
            raise
        local = math.inf
    if math.isinf(local):
        message = _(
            "the derivative of {base} ** {exponent} overflows",
            base=format_number(x),
            exponent=format_number(k),
        )
        raise DomainError("overflow", message)
    return local


def infinite_power_derivative(k: float) -> Message:
    """Why `base ** k`, 0 < k < 1, has no derivative where its base is 0."""
    return _(
        "the derivative of 0 ** {exponent} is infinite: this power's base is 0 here",
        exponent=format_number(k),
    )


# Local derivatives that do not depend on the data, shared by every node that has them rather
# than allocated per node: a large graph is mostly sums, and memory is what limits its speed.
_SUM_GRADS = (1.0, 1.0)
_RELU_ON, _RELU_OFF = (1.0,), (0.0,)


class Value:
    """A scalar that remembers how it was computed, so gradients can flow back through it."""

    __slots__ = ("children", "data", "exponent", "grad", "local_grads", "op")

    def __init__(
        self,
        data: float,
        children: tuple[Value, ...] = (),
        local_grads: tuple[float, ...] = (),
        op: str = "",
        exponent: float | None = None,
    ) -> None:
        self.data = float(data)  # the forward value
        self.grad = 0.0  # d(root)/d(self), filled by backward()
        self.children = children  # operands in order; `a * a` keeps both edges
        self.local_grads = local_grads  # d(self)/d(child) per edge, fixed going forward
        self.op = op  # the operation that produced this node, "" for a leaf
        self.exponent = exponent  # the constant exponent of a `**` node, else None

    # -- primitives -------------------------------------------------------------------------

    def __add__(self, other: Value | float) -> Value:
        other = other if isinstance(other, Value) else Value(other)
        out = finite(self.data + other.data, "sum")
        return Value(out, (self, other), _SUM_GRADS, "+")

    def __mul__(self, other: Value | float) -> Value:
        other = other if isinstance(other, Value) else Value(other)
        out = finite(self.data * other.data, "product")
        return Value(out, (self, other), (other.data, self.data), "*")

    def __pow__(self, exponent: float | Value) -> Value:
        if isinstance(exponent, Value):
            raise TypeError(
                _("only constant exponents are supported: the exponent gets no gradient")
            )
        x, k = self.data, float(exponent)
        out = power(x, k)
        if x == 0 and 0 < k < 1:
            raise DomainError("non_finite", infinite_power_derivative(k))
        return Value(out, (self,), (power_derivative(x, k),), "**", k)

    def exp(self) -> Value:
        try:
            out = math.exp(self.data)
        except OverflowError:
            message = _("exp({argument}) overflows", argument=format_number(self.data))
            raise DomainError("overflow", message) from None
        return Value(out, (self,), (out,), "exp")

    def log(self) -> Value:
        x = self.data
        if x <= 0:
            message = _("log of a non-positive number ({argument})", argument=format_number(x))
            raise DomainError("log_domain", message)
        return Value(math.log(x), (self,), (finite(1.0 / x, "log derivative"),), "log")

    def relu(self) -> Value:
        x = self.data
        # micrograd: data `0 if x < 0 else x`, local derivative `x > 0`, so 0 at x = 0.
        return Value(0.0 if x < 0 else x, (self,), _RELU_ON if x > 0 else _RELU_OFF, "relu")

    def tanh(self) -> Value:
        t = math.tanh(self.data)
        return Value(t, (self,), (1.0 - t * t,), "tanh")

    # -- derived, exactly as micrograd builds them from the primitives ----------------------

    def __neg__(self) -> Value:  # -self
        return self * -1

    def __radd__(self, other: float) -> Value:  # other + self
        return self + other

    def __sub__(self, other: Value | float) -> Value:  # self - other
        return self + (-other)

    def __rsub__(self, other: float) -> Value:  # other - self
        return other + (-self)

    def __rmul__(self, other: float) -> Value:  # other * self
        return self * other

    def __truediv__(self, other: Value | float) -> Value:  # self / other
        # micrograd's `self * other**-1`; for a plain number the checked power raises a
        # DomainError where Python's `0 ** -1` would raise ZeroDivisionError
        return self * (other**-1 if isinstance(other, Value) else power(float(other), -1.0))

    def __rtruediv__(self, other: float) -> Value:  # other / self
        return other * self**-1

    # -- reverse mode -----------------------------------------------------------------------

    def topological_order(self) -> list[Value]:
        """Every node below self, children before parents, in micrograd's depth-first order."""
        order: list[Value] = []
        visited: set[Value] = {self}  # a Value hashes by identity
        # An explicit stack of (node, its children not yet visited) replaces micrograd's
        # recursion, so a chain of any depth works; children left to right keep micrograd's order.
        stack: list[tuple[Value, Iterator[Value]]] = [(self, iter(self.children))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if child not in visited:
                    visited.add(child)
                    if child.children:
                        stack.append((child, iter(child.children)))
                        break
                    order.append(child)  # a leaf: pushing and popping it would do just this
            else:
                stack.pop()
                order.append(node)
        return order

    def backward(self) -> list[Value]:
        """Fill in d(self)/d(node) for every node below self; returns the order it used."""
        # 1. topological order: a node is processed only once all its parents have sent to it
        order = self.topological_order()
        # 2. fresh gradients, so a second backward pass does not add to the first
        for node in order:
            node.grad = 0.0
        self.grad = 1.0
        # 3. chain rule, parents first: each edge adds local derivative x parent's gradient
        for node in reversed(order):
            grad = node.grad
            for child, local in zip(node.children, node.local_grads, strict=True):
                child.grad += local * grad
        return order

    def __repr__(self) -> str:
        return f"Value(data={self.data!r}, grad={self.grad!r})"


# What a primitive whose operands are finite fails by, when only its first operand is known.
_UNARY: dict[str, Callable[[float, float | None], Value]] = {
    "**": lambda x, k: Value(x) ** (k or 0.0),
    "exp": lambda x, k: Value(x).exp(),
    "log": lambda x, k: Value(x).log(),
    "tanh": lambda x, k: Value(x).tanh(),
}
_BINARY = {"+": "sum", "*": "product"}


def failure_message(op: str, x: float, k: float | None) -> Message | None:
    """The engine's sentence for the primitive `op` failing with first operand `x` (for `**`,
    to the power `k`), as the sweep's array rules find failures without the engine: a sum or a
    product by what overflowed, a function or power by running it. None when it does not fail."""
    if op in _BINARY:
        return _OVERFLOWS[_BINARY[op]]
    run = _UNARY.get(op)
    if run is None:
        return None
    try:
        run(x, k)
    except DomainError as error:
        assert isinstance(error.message, Message)  # the engine's sentences are all translatable
        return error.message
    return None


def format_number(x: float) -> str:
    """A number as a student would write it: 2 rather than 2.0."""
    return str(int(x)) if x.is_integer() and abs(x) < 1e16 else repr(x)
