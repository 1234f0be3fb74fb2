"""A reference micrograd written from Karpathy's description, and random expressions to run in it.

The service must build exactly the graph micrograd builds when the expression text runs as Python
with each variable a micrograd `Value`. This module is that micrograd, kept independent of
`service.engine` (closures, recursive depth-first topological sort, `_op` strings such as `**2`),
so the two can only agree by both being right. It also holds the random expressions the property
tests share, with bindings chosen so that most of them evaluate without a domain error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

Number = int | float


class Value:
    """A scalar and the graph that computed it, with micrograd's backward closures."""

    def __init__(self, data: Number, _children: tuple[Value, ...] = (), _op: str = "") -> None:
        self.data = data
        self.grad = 0.0
        self._backward: Callable[[], None] = lambda: None
        # An ordered tuple rather than micrograd's set: `a * a` keeps two edges, and the
        # depth-first order below is the same on every run.
        self._prev = tuple(_children)
        self._op = _op

    def __add__(self, other: Value | Number) -> Value:
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward() -> None:
            self.grad += out.grad
            other.grad += out.grad

        out._backward = _backward
        return out

    def __mul__(self, other: Value | Number) -> Value:
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward() -> None:
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad

        out._backward = _backward
        return out

    def __pow__(self, other: Number) -> Value:
        if not isinstance(other, int | float):
            raise TypeError("only int/float powers are supported")
        out = Value(self.data**other, (self,), f"**{other}")

        def _backward() -> None:
            self.grad += (other * self.data ** (other - 1)) * out.grad

        out._backward = _backward
        return out

    def exp(self) -> Value:
        out = Value(math.exp(self.data), (self,), "exp")

        def _backward() -> None:
            self.grad += out.data * out.grad

        out._backward = _backward
        return out

    def log(self) -> Value:
        out = Value(math.log(self.data), (self,), "log")

        def _backward() -> None:
            self.grad += (1 / self.data) * out.grad

        out._backward = _backward
        return out

    def relu(self) -> Value:
        out = Value(0 if self.data < 0 else self.data, (self,), "ReLU")

        def _backward() -> None:
            self.grad += (out.data > 0) * out.grad

        out._backward = _backward
        return out

    def tanh(self) -> Value:
        t = math.tanh(self.data)
        out = Value(t, (self,), "tanh")

        def _backward() -> None:
            self.grad += (1 - t**2) * out.grad

        out._backward = _backward
        return out

    def topological_order(self) -> list[Value]:
        topo: list[Value] = []
        visited: set[int] = set()

        def build_topo(v: Value) -> None:
            if id(v) not in visited:
                visited.add(id(v))
                for child in v._prev:
                    build_topo(child)
                topo.append(v)

        build_topo(self)
        return topo

    def backward(self) -> list[Value]:
        topo = self.topological_order()
        self.grad = 1.0
        for v in reversed(topo):
            v._backward()
        return topo

    def __pos__(self) -> Value:
        return self

    def __neg__(self) -> Value:
        return self * -1

    def __radd__(self, other: Number) -> Value:
        return self + other

    def __sub__(self, other: Value | Number) -> Value:
        return self + (-other)

    def __rsub__(self, other: Number) -> Value:
        return other + (-self)

    def __rmul__(self, other: Number) -> Value:
        return self * other

    def __truediv__(self, other: Value | Number) -> Value:
        return self * other**-1

    def __rtruediv__(self, other: Number) -> Value:
        return other * self**-1


def op_name(node: Value) -> str | None:
    """The service's name for a reference node's `_op`: micrograd writes `ReLU` and `**2`."""
    if not node._op:
        return None
    if node._op.startswith("**"):
        return "**"
    return {"ReLU": "relu"}.get(node._op, node._op)


def exponent(node: Value) -> float | None:
    """The constant exponent micrograd keeps only inside the `_op` text."""
    return float(node._op[2:]) if node._op.startswith("**") else None


def local_grads(node: Value) -> tuple[float, ...]:
    """The factor each backward closure multiplies `out.grad` by, edge by edge."""
    x = [child.data for child in node._prev]
    op = op_name(node)
    if op == "+":
        return (1.0, 1.0)
    if op == "*":
        return (x[1], x[0])
    if op == "**":
        k = exponent(node)
        assert k is not None
        return (k * x[0] ** (k - 1),)
    if op == "exp":
        return (node.data,)
    if op == "log":
        return (1 / x[0],)
    if op == "relu":
        return (float(node.data > 0),)
    if op == "tanh":
        return (1 - node.data**2,)
    return ()


def _function(name: str, on_number: Callable[[Number], Number]) -> Callable[..., Value | Number]:
    def call(x: Value | Number) -> Value | Number:
        return getattr(x, name)() if isinstance(x, Value) else on_number(x)

    return call


FUNCTIONS: dict[str, Callable[..., Value | Number]] = {
    "exp": _function("exp", math.exp),
    "log": _function("log", math.log),
    "relu": _function("relu", lambda x: 0 if x < 0 else x),
    "tanh": _function("tanh", math.tanh),
}


def run(text: str, bindings: Mapping[str, float]) -> tuple[Value | Number, dict[str, Value]]:
    """The expression text run as Python, each variable a reference `Value`: (result, variables).

    Test-only: the text comes from the test generators, never from a user. The namespace has no
    builtins, and the outer parentheses let the text span lines as the service's grammar allows.
    """
    variables = {name: Value(float(value)) for name, value in bindings.items()}
    namespace: dict[str, object] = {"__builtins__": {}, **FUNCTIONS, **variables}
    result = eval("(" + text.replace("^", "**") + "\n)", namespace)
    return result, variables


def rounding_scale(document: dict[str, Any]) -> float:
    """The largest number an evaluation document handled.

    Two correct float evaluations of one gradient (sympy's exact one, the other granularity's)
    differ by rounding relative to this, not to the result, wherever terms cancel: `b - c` with
    b close to c, `1 - tanh(x)**2` near saturation, `x*3 - x*3`.
    """
    numbers = [1.0]
    for node in document["graph"]["nodes"]:
        numbers += [abs(node["value"]), abs(node["grad"])]
    for step in document["backward"]:
        numbers += [abs(send["contribution"]) for send in step["sends"]]
    return max(numbers)


# -- random expressions ------------------------------------------------------------------------

# Names the service and Python both read as plain variables; sympy's special names included,
# since the sympy form must treat them as symbols too.
NAMES = ("a", "b", "c", "x1", "_t", "E", "pi", "S", "N", "I", "Symbol")
# Literals in every form the grammar takes; kept small so Python's exact integers and the
# service's floats fold to the same numbers.
CONSTANTS = ("2", "3", "0.5", "1.5", ".25", "4.", "1e-3", "2E1", "10")
# No 0: micrograd's `0 * x ** -1` fails at x = 0 where the engine deliberately answers 0.
EXPONENTS = ("2", "3", "-1", "-2", "0.5", "(1/2)", "1.5", "-0.5", "(-1)", "1", "2{pow}2")
SPACES = ("", " ", " ", "  ", "\t", "\n")  # one space twice: the usual spelling
FUNCTION_NAMES = ("exp", "log", "relu", "tanh")
# What an expression's outermost operation is; a leaf first, so failures shrink towards leaves.
KINDS = ("leaf", "+", "-", "*", "/", "unary", "power", "call")

# Binding strength of what a text fragment's outermost operator is, to parenthesise as needed.
ATOM, POWER, UNARY, PRODUCT, SUM = 100, 40, 30, 20, 10


@dataclass(frozen=True)
class Case:
    """An expression text and a binding for each of its variables."""

    text: str
    bindings: dict[str, float]


@st.composite
def cases(draw: st.DrawFn, max_depth: int = 4) -> Case:
    """A random expression over one to three variables, rendered with random spacing.

    `log` and non-integer powers get arguments that are positive by construction (`exp(e)`,
    `e**2 + c`, `relu(e) + c`), so few examples end in a domain error; callers `assume` those away.
    """
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    used: dict[str, None] = {}

    def gap() -> str:
        return draw(st.sampled_from(SPACES))

    def wrap(fragment: tuple[str, int], needed: int) -> str:
        text, strength = fragment
        if strength < needed or draw(st.integers(0, 7)) == 0:
            return f"({gap()}{text}{gap()})"
        return text

    def leaf() -> tuple[str, int]:
        if draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(CONSTANTS)), ATOM
        name = draw(st.sampled_from(names))
        used[name] = None
        return name, ATOM

    def positive(depth: int) -> tuple[str, int]:
        form = draw(st.integers(0, 2))
        inner = expression(depth)
        if form == 0:
            return f"exp{gap()}({inner[0]})", ATOM
        if form == 1:
            return f"{wrap(inner, ATOM)}{gap()}**{gap()}2 + {draw(st.sampled_from(CONSTANTS))}", SUM
        return f"relu({inner[0]}){gap()}+{gap()}{draw(st.sampled_from(CONSTANTS))}", SUM

    def expression(depth: int) -> tuple[str, int]:
        kind = draw(st.sampled_from(KINDS)) if depth > 0 else "leaf"
        if kind == "leaf":
            return leaf()
        if kind in ("+", "-", "*", "/"):
            strength = SUM if kind in "+-" else PRODUCT
            left = wrap(expression(depth - 1), strength)
            right = wrap(expression(depth - 1), strength + 1)  # left-associative
            return f"{left}{gap()}{kind}{gap()}{right}", strength
        if kind == "unary":
            sign = draw(st.sampled_from("--+"))
            return f"{sign}{gap()}{wrap(expression(depth - 1), UNARY)}", UNARY
        if kind == "power":
            power = draw(st.sampled_from(("**", "^")))
            k = draw(st.sampled_from(EXPONENTS)).format(pow=power)
            integral = k.lstrip("(-").rstrip(")") in ("1", "2", "3", "2**2", "2^2")
            base = expression(depth - 1) if integral else positive(depth - 1)
            # A power's base binds tighter than the power: `(a**2)**3` keeps its parentheses.
            return f"{wrap(base, ATOM)}{gap()}{power}{gap()}{k}", POWER
        name = draw(st.sampled_from(FUNCTION_NAMES))
        argument = positive(depth - 1) if name == "log" else expression(depth - 1)
        return f"{name}{draw(st.sampled_from(('', '', ' ')))}({gap()}{argument[0]}{gap()})", ATOM

    text = gap() + expression(max_depth)[0] + gap()
    if not used:  # at least one variable, so there is a gradient to check
        name = names[0]
        used[name] = None
        text = f"{text} * {name}"
    magnitude = st.floats(min_value=0.1, max_value=2.5, allow_nan=False, allow_infinity=False)
    sign = st.sampled_from((1.0, -1.0))
    return Case(text, {name: draw(sign) * draw(magnitude) for name in used})


# -- programs ----------------------------------------------------------------------------------


def run_program(
    text: str, bindings: Mapping[str, float], output: str | None = None
) -> tuple[Any, list[Value], dict[str, Value]]:
    """A program run as Python with micrograd's `Value`: (output, declared inputs, bound inputs).

    Test-only: the text comes from the tests, never from a user. `name.backward()` runs
    micrograd's backward as written and names the output; otherwise `output` names it and its
    backward runs here. Declared inputs (`Value(number)`) are listed in the order made.
    """
    called: list[Value] = []
    declared: list[Value] = []
    original = Value.backward

    def backward(self: Value) -> list[Value]:
        called.append(self)
        return original(self)

    def declare(data: Number) -> Value:
        declared.append(Value(data))
        return declared[-1]

    variables = {name: Value(float(value)) for name, value in bindings.items()}
    namespace: dict[str, object] = {"__builtins__": {}, "Value": declare, **FUNCTIONS, **variables}
    Value.backward = backward  # type: ignore[method-assign]
    try:
        exec(text, namespace)
    finally:
        Value.backward = original  # type: ignore[method-assign]
    if output is not None:
        result = namespace[output]
        if isinstance(result, Value):
            result.backward()
    else:
        (result,) = called
    return result, declared, variables


@dataclass(frozen=True)
class ProgramCase:
    """A program text, bindings for its undeclared inputs, and the name of its output."""

    text: str
    bindings: dict[str, float]
    output: str


@st.composite
def programs(draw: st.DrawFn, max_statements: int = 8) -> ProgramCase:
    """A random program: declared and bound inputs, then assignments that share, rebind and
    augment names, then `out = ...` over what was built.

    Values stay moderate (tanh and relu bound them, divisors are `x ** 2 + c`), so few examples
    end in a domain error; callers `assume` those away.
    """
    lines: list[str] = []
    bound: list[str] = []  # names a statement may read
    assigned: list[str] = []  # names the program assigns: only these may be rebound
    bindings: dict[str, float] = {}
    magnitude = st.floats(min_value=0.1, max_value=2.0, allow_nan=False, allow_infinity=False)
    for name in draw(st.lists(st.sampled_from(("a", "b", "x", "w")), min_size=1, unique=True)):
        value = draw(st.sampled_from((1.0, -1.0))) * draw(magnitude)
        if draw(st.booleans()):
            lines.append(f"{name} = Value({value!r})")
            assigned.append(name)
        else:
            bindings[name] = value
        bound.append(name)

    numbers: set[str] = set()  # names bound to numbers alone: plain numbers, with no methods

    def leaf() -> str:
        if draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(CONSTANTS))
        return draw(st.sampled_from(bound))

    def plain(text: str) -> bool:
        """Whether `text` computes on numbers alone, as Python's int and float do."""
        names = re.findall(r"\b[a-z]\w*\b", text)
        return all(name in numbers or name in FUNCTION_NAMES for name in names)

    def expression(depth: int) -> str:
        kind = draw(st.sampled_from(("leaf", "+", "-", "*", "/", "neg", "method", "call", "pow")))
        if depth == 0 or kind == "leaf":
            return leaf()
        left, right = expression(depth - 1), expression(depth - 1)
        if kind in ("+", "-", "*"):
            return f"({left} {kind} {right})"
        if kind == "/":
            return f"({left} / ({right} ** 2 + 0.5))"
        if kind == "neg":
            return f"(-{left})"
        if kind == "pow":
            return f"({left}) ** {draw(st.sampled_from(('2', '3', '-1')))}"
        function = draw(st.sampled_from(("tanh", "relu", "exp")))
        if plain(left):  # a number has no methods: the function forms
            argument = f"tanh({left})" if function == "exp" else f"({left})"
            return f"{function}({argument})"
        argument = f"({left}).tanh()" if function == "exp" else f"({left})"
        if kind == "method":
            return f"{argument}.{function}()"
        return f"{function}({argument})"

    for i in range(draw(st.integers(1, max_statements))):
        form = draw(st.sampled_from(("new", "new", "rebind", "augment", "alias")))
        right = expression(draw(st.integers(0, 2)))
        if form == "new" or not assigned:
            target = f"t{i}"
            lines.append(f"{target} = {right}")
            bound.append(target)
            assigned.append(target)
        elif form == "rebind":
            target = draw(st.sampled_from(assigned))
            lines.append(f"{target} = {right}")
        elif form == "augment":
            target = draw(st.sampled_from(assigned))
            operator = draw(st.sampled_from(("+=", "-=", "*=", "/=")))
            divisor = f"({right}) ** 2 + 1" if operator == "/=" else right
            lines.append(f"{target} {operator} {divisor}")
            right = f"{target} + {right}"  # plain only if both are
        else:
            target = f"t{i}"
            right = draw(st.sampled_from(bound))
            lines.append(f"{target} = {right}")
            bound.append(target)
            assigned.append(target)
        (numbers.add if plain(right) else numbers.discard)(target)
    uses = draw(st.lists(st.sampled_from(bound), min_size=1, max_size=4))
    lines.append("out = " + " + ".join(f"{name} * {k + 1}" for k, name in enumerate(uses)))
    separator = draw(st.sampled_from(("\n", "\n", "; ", "\n\n# note\n")))
    text = separator.join(lines)
    # only the inputs the program reads: a binding for a name it never mentions is refused
    read = {name: value for name, value in bindings.items() if re.search(rf"\b{name}\b", text)}
    return ProgramCase(text, read, "out")
