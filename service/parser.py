"""Our own grammar for untrusted expression text: tokens, an operator-precedence parser, folding.

Nothing here evaluates user text as code. The parser is iterative (an explicit operator stack, as in
Dijkstra's shunting-yard), so no input can exhaust Python's recursion limit, and every bound in
`Limits` is checked while reading, before any graph is built.
"""

from __future__ import annotations

import keyword
import math
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from service.engine import Value, finite, format_number, power
from service.errors import DomainError, ExpressionError, LimitExceeded, Span
from service.limits import DEFAULT_LIMITS, Limits
from service.operations import FUNCTIONS

if TYPE_CHECKING:
    import sympy

# -- the syntax tree ------------------------------------------------------------------------


class Node:
    """One node of the syntax tree: a variable, a constant, or an operation on `args`."""

    __slots__ = ("args", "exponent", "kind", "name", "op", "span", "value")

    def __init__(
        self,
        kind: str,
        span: Span,
        *,
        op: str = "",
        args: tuple[Node, ...] = (),
        name: str = "",
        value: float = 0.0,
        exponent: float | None = None,
    ) -> None:
        self.kind = kind  # "variable", "constant" or "operation"
        self.span = span  # [start, end) in the source text
        self.op = op  # for operations: a name in service.operations.BY_NAME
        self.args = args  # operands in the order written (the exponent of `**` is not one)
        self.name = name  # for variables
        self.value = value  # for constants: the folded value
        self.exponent = exponent  # for `**`: the constant exponent

    @property
    def is_constant(self) -> bool:
        return self.kind == "constant"

    def __repr__(self) -> str:
        if self.kind == "variable":
            return self.name
        if self.kind == "constant":
            return repr(self.value)
        return f"{self.op}{list(self.args)}"


class ParsedExpression:
    """A parsed expression: its syntax tree, its variables, and the sympy form on demand."""

    def __init__(self, text: str, root: Node, variables: tuple[str, ...], node_count: int) -> None:
        self.text = text
        self.root = root
        self.variables = variables  # in order of first appearance
        self.node_count = node_count  # nodes in the primitive graph micrograd would build

    def postorder(self) -> list[Node]:
        """Every tree node, operands before the operation that uses them, left to right."""
        return self._postorder

    @cached_property
    def _postorder(self) -> list[Node]:
        order: list[Node] = []
        stack: list[tuple[Node, bool]] = [(self.root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded or not node.args:
                order.append(node)
            else:
                stack.append((node, True))
                stack.extend((arg, False) for arg in reversed(node.args))
        return order

    def evaluate(
        self,
        env: dict[str, Value],
        locate: Callable[[Node], int | None] | None = None,
        *,
        apply: Callable[..., Value | float] | None = None,
        constant: Callable[[float], Value | float] = float,
    ) -> dict[Node, Any]:
        """Run the tree as Python would run the text, with `env` giving each variable's `Value`.

        Python's own operator dispatch (`2 - a` calls `a.__rsub__(2)`) builds exactly micrograd's
        graph. Returns every tree node's result: a `Value`, or a float for a folded constant.
        `apply(op, exponent, *operands)` and `constant(value)` replace how an operation and a
        constant are made, for another view of the same tree. A `DomainError` carries the
        failing operation's span, and its graph node from `locate`.
        """
        apply = apply or apply_operation
        results: dict[Node, Any] = {}
        for node in self.postorder():
            if node.kind == "variable":
                results[node] = env[node.name]
            elif node.kind == "constant":
                results[node] = constant(node.value)
            else:
                try:
                    results[node] = apply(node.op, node.exponent, *(results[a] for a in node.args))
                except DomainError as error:
                    if (
                        node.op == "/"
                        and error.kind == "division_by_zero"
                        and (not node.args[1].is_constant)
                    ):
                        divisor = " ".join(self.text[slice(*node.args[1].span)].split())
                        error = DomainError(error.kind, f"division by zero: {divisor} is 0")
                    raise error.located(locate(node) if locate else None, node.span) from None
        return results

    @cached_property
    def variable_set(self) -> frozenset[str]:
        """The variables, for membership tests in time independent of their number."""
        return frozenset(self.variables)

    @cached_property
    def sympy(self) -> sympy.Expr:
        """The same expression in sympy, built from the tree (never from text)."""
        from service import symbolic

        return symbolic.from_tree(self.postorder(), self.root)


def apply_operation(op: str, exponent: float | None, *operands: Value | float) -> Value | float:
    """One operation on Values or plain numbers, with Python's semantics for both."""
    if op == "+":
        return operands[0] + operands[1]
    if op == "*":
        return operands[0] * operands[1]
    if op == "-":
        return operands[0] - operands[1]
    if op == "/":
        return operands[0] / operands[1]
    if op == "neg":
        return -operands[0]
    if op == "**":
        return operands[0] ** exponent
    return getattr(operands[0], op)()


def _fold(op: str, exponent: float | None, *args: float) -> float:
    """A constant operation computed as Python computes it on numbers, with the engine's checks."""
    if op == "**":
        assert exponent is not None
        return power(args[0], exponent)
    if op == "/":
        if args[1] == 0:
            raise DomainError("division_by_zero", f"{format_number(args[0])} / 0 divides by zero")
        return finite(args[0] / args[1], "a quotient")
    if op == "-":
        return finite(args[0] - args[1], "a difference")
    if op == "neg":
        return -args[0]
    # The primitives compute on numbers exactly as Python does; the engine adds its checks.
    result = apply_operation(op, exponent, *(Value(arg) for arg in args))
    assert isinstance(result, Value)
    return result.data


# -- tokens ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "number", "name", "op", "(", ")", ",", "end"
    text: str
    start: int
    end: int

    @property
    def span(self) -> Span:
        return (self.start, self.end)


_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\n]+)
  | (?P<number>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|[-+*/^])
  | (?P<paren>[(),])
    """,
    re.VERBOSE | re.ASCII,
)

# Characters people reach for from Python or maths, with what to tell them.
_UNSUPPORTED = {
    "'": "strings are not part of the expression language",
    '"': "strings are not part of the expression language",
    ".": "attribute access is not part of the expression language",
    "[": "subscripts and lists are not part of the expression language",
    "]": "subscripts and lists are not part of the expression language",
    "{": "braces are not part of the expression language",
    "}": "braces are not part of the expression language",
    "<": "comparisons are not part of the expression language",
    ">": "comparisons are not part of the expression language",
    "=": "comparisons and assignments are not part of the expression language",
    "!": "comparisons are not part of the expression language",
    "%": "the remainder operator % is not supported",
    "@": "matrix multiplication @ is not supported: every value is a scalar",
    "&": "bitwise operators are not supported",
    "|": "bitwise operators are not supported",
    "~": "bitwise operators are not supported",
    ":": "':' is not part of the expression language (no lambdas, slices or annotations)",
    ";": "one expression only: ';' is not part of the language",
    "#": "comments are not part of the expression language",
    "\\": "backslashes are not part of the expression language",
    "`": "backquotes are not part of the expression language",
    "$": "'$' is not part of the expression language",
    "?": "'?' is not part of the expression language",
}


def _tokens(text: str, limits: Limits) -> Iterator[Token]:
    """The tokens of `text`, lazily, so the first error reported is the first in the text."""
    pos, length = 0, len(text)
    while pos < length:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise _bad_character(text, pos)
        kind, end = match.lastgroup, match.end()
        if kind == "name" and end - pos > limits.max_identifier_length:
            raise LimitExceeded(
                "identifier_too_long",
                f"the name starting '{text[pos : pos + 16]}' is {end - pos} characters long; "
                f"names have at most {limits.max_identifier_length}",
                (pos, end),
                "max_identifier_length",
                limits.max_identifier_length,
            )
        if kind == "op" and text.startswith("//", pos):
            raise ExpressionError(
                "unsupported_syntax", "floor division // is not supported; use /", (pos, pos + 2)
            )
        if kind != "space":
            yield Token(
                "op" if kind == "op" else (match.group() if kind == "paren" else kind),
                match.group(),
                pos,
                end,
            )
        pos = end
    yield Token("end", "", length, length)


def _bad_character(text: str, pos: int) -> ExpressionError:
    char = text[pos]
    if char in _UNSUPPORTED:
        return ExpressionError("unsupported_syntax", _UNSUPPORTED[char], (pos, pos + 1))
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    described = f"{code} {name}".strip()
    ascii_twin = unicodedata.normalize("NFKC", char)
    if not ascii_twin.isascii() or not ascii_twin.strip():
        ascii_twin = _LOOKALIKES.get(char, "")
    if char.isdigit() or char.isalpha():
        hint = f"; did you mean '{ascii_twin}'?" if ascii_twin.isascii() and ascii_twin else ""
        message = (
            f"'{char}' ({described}) is not allowed: expressions use ASCII letters and digits{hint}"
        )
    elif not char.isprintable() or char.isspace():
        message = f"the invisible character {described or code} is not allowed in an expression"
    else:
        message = f"'{char}' ({described}) is not part of the expression language"
    return ExpressionError("invalid_character", message, (pos, pos + 1))


# Letters that look like ASCII but are not, and that NFKC does not map: the usual homoglyphs.
_LOOKALIKES = {
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y", "і": "i",  # Cyrillic
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
    "С": "C", "Т": "T", "Х": "X",
    "α": "a", "ο": "o", "ν": "v", "Α": "A", "Β": "B", "Ε": "E", "Ο": "O",  # Greek
    "−": "-", "×": "*", "÷": "/",
}  # fmt: skip


# -- the parser -----------------------------------------------------------------------------

# Binding power of each operator: `**` binds tighter than a sign on its left (`-a**2` is
# `-(a**2)`), a sign tighter than `*` and `/`, those tighter than `+` and `-`; as in Python.
_BINARY = {"+": (10, "+"), "-": (10, "-"), "*": (20, "*"), "/": (20, "/"), "**": (40, "**"),
           "^": (40, "**")}  # fmt: skip
_PREFIX = 30
_RIGHT_ASSOCIATIVE = {"**"}

# Nodes each operation adds to micrograd's graph, by which operands are constants (`c`) or not
# (`v`): `a - b` is `a + (b * -1)`, three nodes; `2 - a` is `(a * -1) + 2`, four. The parser counts
# with this table so the node limit is enforced before any graph exists.
_PRIMITIVE_NODES = {
    ("+", "vv"): 1, ("+", "vc"): 2, ("+", "cv"): 2,
    ("*", "vv"): 1, ("*", "vc"): 2, ("*", "cv"): 2,
    ("-", "vv"): 3, ("-", "vc"): 2, ("-", "cv"): 4,
    ("/", "vv"): 2, ("/", "vc"): 2, ("/", "cv"): 3,
    ("neg", "v"): 2, ("**", "v"): 1,
    ("exp", "v"): 1, ("log", "v"): 1, ("relu", "v"): 1, ("tanh", "v"): 1,
}  # fmt: skip


class _Pending:
    """An entry of the operator stack: an operator waiting for operands, or an open bracket."""

    __slots__ = ("arguments", "kind", "op", "opening", "power", "start", "token")

    def __init__(self, kind: str, op: str, power: int, token: Token) -> None:
        self.kind = kind  # "binary", "prefix", "paren" or "call"
        self.op = op
        self.power = power
        self.token = token
        self.start = token.start
        self.arguments = 0  # for calls: arguments completed so far
        self.opening = token.span  # where the bracket opened, for "never closed"


class _Parser:
    def __init__(self, text: str, limits: Limits) -> None:
        self.text = text
        self.limits = limits
        self.operands: list[Node] = []
        self.pending: list[_Pending] = []
        self.variables: dict[str, None] = {}
        self.node_count = 0
        self.skip_paren = False

    def parse(self) -> ParsedExpression:
        expect_operand = True
        previous: Token | None = None
        for token in _tokens(self.text, self.limits):
            if self.skip_paren:
                self.skip_paren = False
                previous = token
                continue
            if expect_operand:
                expect_operand = self.operand_position(token, previous)
            else:
                expect_operand = self.operator_position(token, previous)
            if token.kind == "end":
                break
            previous = token
        root = self.operands.pop()
        if not self.variables and root.kind != "constant":  # pragma: no cover - folding invariant
            raise AssertionError("an expression without variables must fold to a constant")
        return ParsedExpression(self.text, root, tuple(self.variables), max(self.node_count, 1))

    # A token where an operand must start: a number, a name, a call, '(' or a sign.
    def operand_position(self, token: Token, previous: Token | None) -> bool:
        if token.kind == "number":
            self.operands.append(self.constant(token))
            return False
        if token.kind == "name":
            self.name(token)
            opened_call = self.pending and self.pending[-1].token is token
            return bool(opened_call)
        if token.kind == "(":
            self.push(_Pending("paren", "(", 0, token))
            return True
        if token.kind == "op" and token.text in "+-":
            self.push(_Pending("prefix", "neg" if token.text == "-" else "pos", _PREFIX, token))
            return True
        if token.kind == "end":
            if previous is None:
                raise ExpressionError("empty_expression", "the expression is empty", token.span)
            raise ExpressionError(
                "unexpected_end",
                f"the expression ends after '{previous.text}', where an operand was expected",
                token.span,
            )
        if token.kind == ")" and previous is not None and previous.kind == "(":
            opener = self.pending[-1]
            if opener.kind == "call":
                span = (opener.start, token.end)
                message = f"{opener.op}() takes exactly one argument (0 given)"
                raise ExpressionError("wrong_arity", message, span)
            raise ExpressionError(
                "unexpected_token", "empty parentheses: '()'", (previous.start, token.end)
            )
        if token.kind == ")" and not any(p.kind in ("paren", "call") for p in self.pending):
            raise ExpressionError("unbalanced_parenthesis", "')' has no matching '('", token.span)
        after = f" after '{previous.text}'" if previous is not None else " at the start"
        raise ExpressionError(
            "unexpected_token",
            f"unexpected '{token.text}'{after}: expected a number, a variable, a function call "
            "or '('",
            token.span,
        )

    def name(self, token: Token) -> None:
        # A name directly followed by '(' is a call; peek at the source to know which.
        after = _skip_space(self.text, token.end)
        if after < len(self.text) and self.text[after] == "(":
            if token.text not in FUNCTIONS:
                raise ExpressionError(
                    "unknown_function",
                    f"'{token.text}' is not a supported function; the functions are "
                    f"{', '.join(FUNCTIONS)}"
                    + (
                        f" (if {token.text} is a variable, write {token.text}*(...) to multiply)"
                        if token.text.isidentifier() and not keyword.iskeyword(token.text)
                        else ""
                    ),
                    (token.start, after + 1),
                )
            call = _Pending("call", token.text, 0, token)
            call.opening = (after, after + 1)
            self.push(call)
            self.skip_paren = True  # the '(' just seen belongs to the call
            return
        if token.text not in self.variables:
            self.variables[token.text] = None
            self.node_count += 1
        self.operands.append(Node("variable", token.span, name=token.text))

    # A token after a complete operand: a binary operator, ')', ',' or the end.
    def operator_position(self, token: Token, previous: Token | None) -> bool:
        if token.kind == "op":
            power, op = _BINARY[token.text]
            right = op in _RIGHT_ASSOCIATIVE
            while (
                self.pending
                and self.pending[-1].kind in ("binary", "prefix")
                and (
                    self.pending[-1].power > power
                    or (self.pending[-1].power == power and not right)
                )
            ):
                self.reduce()
            self.push(_Pending("binary", op, power, token))
            return True
        if token.kind in (")", ",", "end"):
            while self.pending and self.pending[-1].kind in ("binary", "prefix"):
                self.reduce()
            if token.kind == "end":
                if self.pending:
                    opener = self.pending[-1]
                    raise ExpressionError(
                        "unbalanced_parenthesis", "this '(' is never closed", opener.opening
                    )
                return False
            if not self.pending:
                if token.kind == ",":
                    raise ExpressionError(
                        "unexpected_token",
                        "',' separates arguments, but there is no call here",
                        token.span,
                    )
                raise ExpressionError(
                    "unbalanced_parenthesis", "')' has no matching '('", token.span
                )
            opener = self.pending[-1]
            if token.kind == ",":
                if opener.kind != "call":
                    raise ExpressionError(
                        "unexpected_token",
                        "',' separates arguments, but there is no call here",
                        token.span,
                    )
                opener.arguments += 1
                return True
            self.pending.pop()
            if opener.kind == "call":
                self.finish_call(opener, token)
            else:
                # The span grows to take in the parentheses, so errors point at what was written.
                self.operands[-1].span = (opener.start, token.end)
            return False
        if token.kind in ("number", "name", "("):
            raise self.juxtaposition(token, previous)
        raise ExpressionError(  # pragma: no cover - every token kind is handled above
            "unexpected_token", f"unexpected '{token.text}'", token.span
        )

    def juxtaposition(self, token: Token, previous: Token | None) -> ExpressionError:
        """Two operands with no operator between them: say what was probably meant."""
        assert previous is not None
        left, right = previous.text, token.text
        span = (previous.start, token.end)
        touching = previous.end == token.start
        if previous.kind == "number" and touching:
            if token.kind == "number":  # `1.5.2`
                return ExpressionError("unexpected_token", f"'{left}{right}' is not a number", span)
            if left == "0" and right[0] in "xXoObB":
                return ExpressionError(
                    "unsupported_syntax",
                    "hexadecimal, octal and binary numbers are not supported",
                    span,
                )
            if right[0] == "_":
                return ExpressionError(
                    "unsupported_syntax", "digit separators (_) are not supported in numbers", span
                )
            if right[0] in "eE" and "e" not in left.lower():
                return ExpressionError(
                    "implicit_multiplication",
                    f"'{left}{right}' is not a number: an exponent needs digits, like {left}e3; "
                    f"to multiply, write {left}*{right}",
                    span,
                )
        for word in (left, right):  # `lambda x`, `a if b else c`, `a and b`
            if keyword.iskeyword(word):
                return ExpressionError(
                    "unsupported_syntax",
                    f"Python's '{word}' is not part of the expression language",
                    span,
                )
        if token.kind == "(":
            right = "(...)"
        if previous.kind == "number":
            return ExpressionError(
                "implicit_multiplication",
                f"implicit multiplication is not supported: write {left}*{right}",
                span,
            )
        if previous.kind == ")":
            left = "(...)"
        return ExpressionError(
            "implicit_multiplication",
            f"two operands side by side: write {left}*{right} to multiply",
            span,
        )

    def finish_call(self, opener: _Pending, closer: Token) -> None:
        # `arguments` counts the commas seen; one more argument ends at ')'.
        count = opener.arguments + 1
        span = (opener.start, closer.end)
        if count != 1:
            raise ExpressionError(
                "wrong_arity",
                f"{opener.op}() takes exactly one argument ({count} given)",
                span,
            )
        self.apply(opener.op, 1, span)

    def push(self, entry: _Pending) -> None:
        self.pending.append(entry)
        if len(self.pending) > self.limits.max_depth:
            raise LimitExceeded(
                "nesting_too_deep",
                f"the expression nests deeper than {self.limits.max_depth} levels",
                entry.token.span,
                "max_depth",
                self.limits.max_depth,
            )

    def reduce(self) -> None:
        entry = self.pending.pop()
        if entry.kind == "prefix":
            operand = self.operands[-1]
            if entry.op == "pos":  # unary plus changes nothing and adds no node
                operand.span = (entry.start, operand.span[1])
                return
            self.apply("neg", 1, (entry.start, operand.span[1]))
            return
        left, right = self.operands[-2], self.operands[-1]
        span = (left.span[0], right.span[1])
        if entry.op == "**":
            if not right.is_constant:
                raise ExpressionError(
                    "variable_exponent",
                    "the exponent must be a constant: this engine's `**` differentiates only the "
                    "base, so a variable exponent would silently get a zero gradient"
                    + ("" if left.is_constant else "; write exp(log(base) * exponent) instead"),
                    right.span,
                )
            self.operands.pop()
            self.apply("**", 1, span, exponent=right.value)
            return
        self.apply(entry.op, 2, span)

    def apply(self, op: str, arity: int, span: Span, exponent: float | None = None) -> None:
        args = tuple(self.operands[-arity:])
        del self.operands[-arity:]
        if all(arg.is_constant for arg in args):
            node = Node("operation", span, op=op, args=args, exponent=exponent)
            self.operands.append(Node("constant", span, value=self.fold(node)))
            return
        shape = "".join("c" if arg.is_constant else "v" for arg in args)
        self.node_count += _PRIMITIVE_NODES[op, shape]
        if self.node_count > self.limits.max_nodes:
            raise LimitExceeded(
                "too_many_nodes",
                f"the expression would build more than {self.limits.max_nodes} graph nodes",
                span,
                "max_nodes",
                self.limits.max_nodes,
            )
        self.operands.append(Node("operation", span, op=op, args=args, exponent=exponent))

    def constant(self, token: Token) -> Node:
        value = float(token.text)
        self.check_magnitude(value, token.span, f"the number {token.text}")
        return Node("constant", token.span, value=value)

    def fold(self, node: Node) -> float:
        """A constant subexpression's value, computed once as Python would, within bounds."""
        if node.op == "**":
            base = node.args[0].value
            assert node.exponent is not None
            # log10 of the result, known before computing it: `9 ** 9 ** 9` is refused at once.
            if base != 0 and node.exponent * math.log10(abs(base)) > math.log10(
                self.limits.max_constant_magnitude
            ):
                self.check_magnitude(math.inf, node.span, "this power")
        try:
            value = _fold(node.op, node.exponent, *(arg.value for arg in node.args))
        except DomainError as error:
            raise error.located(None, node.span) from None
        self.check_magnitude(value, node.span, "this constant")
        return value

    def check_magnitude(self, value: float, span: Span, what: str) -> None:
        bound = self.limits.max_constant_magnitude
        if not abs(value) <= bound:
            raise LimitExceeded(
                "constant_too_large",
                f"{what} is larger in magnitude than the largest constant allowed ({bound:g})",
                span,
                "max_constant_magnitude",
                bound,
            )


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def parse(text: str, limits: Limits = DEFAULT_LIMITS) -> ParsedExpression:
    """Parse untrusted `text` into a syntax tree, or raise an `ExpressionError` saying where."""
    if len(text) > limits.max_expression_length:
        raise LimitExceeded(
            "expression_too_long",
            f"the expression is {len(text)} characters long; the limit is "
            f"{limits.max_expression_length}",
            (limits.max_expression_length, len(text)),
            "max_expression_length",
            limits.max_expression_length,
        )
    return _Parser(text, limits).parse()
