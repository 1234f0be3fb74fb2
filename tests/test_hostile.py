"""Hostile input through the HTTP API, grouped by threat: each is refused quickly and specifically.

Every refused case must get its own 4xx status, an `application/problem+json` body whose `type`
names the refusal and whose `detail` explains it, within a bounded time; the next lesson request
must then succeed. A canary (a `sys.audit` hook) watches every hostile request for code being run,
files being opened and modules being imported, and payloads that would leave a file behind if
executed are checked for that file. Some inputs that look hostile are plain expressions (`E`, `pi`,
`Symbol` are variable names): those must be evaluated, with the right gradients.
"""

from __future__ import annotations

import builtins
import gc
import json
import sys
import tempfile
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import LESSON, PROBLEM, check_lesson, make_app
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.api.config import DEFAULTS
from service.exercises import GENERATORS
from service.kinds import TYPE_BASE
from service.limits import DEFAULT_LIMITS
from service.operations import FUNCTIONS

MAX_BODY = DEFAULTS["MAX_BODY_BYTES"]
LIMITS = DEFAULT_LIMITS
pytestmark = pytest.mark.slow  # hundreds of requests, each followed by the lesson

# A file the payloads below try to create; it exists afterwards only if some input ran as code.
TRAP = Path(tempfile.gettempdir()) / f"autograd-canary-{time.time_ns()}"


@dataclass(frozen=True)
class Case:
    """One hostile request and the refusal it must get."""

    body: bytes | None
    kind: str  # the problem type's last segment, e.g. "unknown-function"
    status: int = 422
    path: str = "/v1/gradients"
    method: str = "POST"
    content_type: str | None = "application/json"


def _json(document: Any) -> bytes:
    text = json.dumps(document, ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate: UTF-8 cannot carry one, a JSON escape can
        return json.dumps(document).encode()


def gradients(expression: Any, kind: str, bindings: Any = None, **extra: Any) -> Case:
    return Case(_json({"expression": expression, "bindings": bindings or {}, **extra}), kind)


def derivatives(expression: Any, kind: str, bindings: Any = None, **extra: Any) -> Case:
    body = _json({"expression": expression, "bindings": bindings or {}, **extra})
    return Case(body, kind, path="/v1/derivatives")


def graph(expression: Any, kind: str, **extra: Any) -> Case:
    return Case(_json({"expression": expression, **extra}), kind, path="/v1/graph")


def both(prefix: str, expression: str, kind: str) -> list[Any]:
    """The same expression refused by both endpoints that parse expressions."""
    return [
        pytest.param(gradients(expression, kind), id=f"{prefix}-gradients"),
        pytest.param(graph(expression, kind), id=f"{prefix}-graph"),
    ]


def raw(body: bytes | str | None, kind: str, status: int, **fields: Any) -> Case:
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    return Case(data, kind, status, **fields)


# -- code injection -------------------------------------------------------------------------

DUNDERS = [
    "__import__", "__class__", "__bases__", "__base__", "__mro__", "__subclasses__", "__globals__",
    "__builtins__", "__dict__", "__code__", "__closure__", "__getattribute__", "__getattr__",
    "__setattr__", "__reduce__", "__reduce_ex__", "__init__", "__new__", "__call__", "__del__",
    "__getitem__", "__loader__", "__spec__", "__file__", "__name__", "__self__", "__func__",
    "__module__", "__qualname__", "__init_subclass__", "__class_getitem__", "__enter__",
]  # fmt: skip
BUILTIN_NAMES = sorted(n for n in dir(builtins) if n.isidentifier() and n not in FUNCTIONS)
SYMPY_NAMES = [
    "Symbol", "symbols", "Dummy", "Wild", "Function", "Lambda", "Integer", "Rational", "Float",
    "Number", "S", "N", "sympify", "simplify", "parse_expr", "lambdify", "Matrix", "Array",
    "Piecewise", "Heaviside", "Max", "Min", "Abs", "sqrt", "sin", "cos", "tan", "atan2", "sinh",
    "cosh", "log10", "ln", "diff", "integrate", "limit", "series", "solve", "evalf", "Eq",
    "Derivative", "Integral", "Sum", "Product", "Add", "Mul", "Pow", "srepr", "pprint", "latex",
    "preview", "init_printing", "var",
]  # fmt: skip

# Python that must not be read as Python: each refusal, with the kind of problem it gets.
PYTHON_SYNTAX = {
    "attribute": ("a.real", "unsupported-syntax"),
    "dunder-attribute": ("a.__class__.__mro__", "unsupported-syntax"),
    "function-attribute": ("exp.__globals__", "function-name"),
    "call-result-attribute": ("exp(a).__class__", "unsupported-syntax"),
    "empty-tuple-escape": ("().__class__.__bases__[0].__subclasses__()", "unexpected-token"),
    "subscript": ("a[0]", "unsupported-syntax"),
    "list": ("[a, a]", "unsupported-syntax"),
    "comprehension": ("[x for x in a]", "unsupported-syntax"),
    "set": ("{a}", "unsupported-syntax"),
    "dict": ("{'a': a}", "unsupported-syntax"),
    "single-quoted-string": ("'os'", "unsupported-syntax"),
    "double-quoted-string": ('"os"', "unsupported-syntax"),
    "f-string": ("f'{a}'", "unsupported-syntax"),
    "bytes": ("b'a'", "unsupported-syntax"),
    "lambda-colon": ("lambda: a", "unsupported-syntax"),
    "lambda-argument": ("lambda x: x", "unsupported-syntax"),
    "walrus": ("(a := 1)", "unsupported-syntax"),
    "assignment-to-call": ("exp(a) = 1", "unsupported-syntax"),
    "assignment-to-function": ("exp = a", "function-name"),
    "augmented-assignment-unassigned": ("a += 1", "used-before-assignment"),
    "read-before-assignment": ("b = a * 2\na = b", "used-before-assignment"),
    "statements-with-import": ("a; import os", "unsupported-syntax"),
    "print": ("print(a)", "unknown-function"),
    "data-attribute": ("a.data", "unsupported-syntax"),
    "grad-attribute": ("a = Value(1.0)\na.grad", "unsupported-syntax"),
    "def": ("def f(x): return x", "unsupported-syntax"),
    "for": ("for i in a: a", "unsupported-syntax"),
    "if-statement": ("if a: a", "unsupported-syntax"),
    "value-call-inside": ("b = 2 * Value(a)", "unsupported-syntax"),
    "import": ("import os", "unsupported-syntax"),
    "from-import": ("from os import system", "unsupported-syntax"),
    "not": ("not a", "unsupported-syntax"),
    "true": ("2 * True + a", "unsupported-syntax"),
    "none": ("a + None", "unsupported-syntax"),
    "keyword-alone": ("a * yield", "unsupported-syntax"),
    "and": ("a and a", "unsupported-syntax"),
    "or": ("a or a", "unsupported-syntax"),
    "is": ("a is a", "unsupported-syntax"),
    "in": ("a in a", "unsupported-syntax"),
    "conditional": ("a if a else a", "unsupported-syntax"),
    "comparison": ("a == a", "unsupported-syntax"),
    "less-than": ("a < a", "unsupported-syntax"),
    "shift": ("a << 1", "unsupported-syntax"),
    "bitwise-and": ("a & a", "unsupported-syntax"),
    "bitwise-or": ("a | a", "unsupported-syntax"),
    "invert": ("~a", "unsupported-syntax"),
    "remainder": ("a % 2", "unsupported-syntax"),
    "floor-division": ("a // 2", "unsupported-syntax"),
    "matmul": ("a @ a", "unsupported-syntax"),
    "star": ("*a", "unexpected-token"),
    "double-star": ("**a", "unexpected-token"),
    "trailing-comma": ("a,", "unexpected-token"),
    "backslash": ("a \\ + a", "unsupported-syntax"),  # one that does not end a line
    "backtick": ("`a`", "unsupported-syntax"),
    "dollar": ("$a", "unsupported-syntax"),
    "question": ("a ? a : a", "unsupported-syntax"),
    "bang": ("!a", "unsupported-syntax"),
    "hex": ("0x10", "unsupported-syntax"),
    "octal": ("0o17", "unsupported-syntax"),
    "binary": ("0b11", "unsupported-syntax"),
    "digit-separator": ("1_000", "unsupported-syntax"),
    "complex": ("1j", "implicit-multiplication"),
    "call-of-call": ("exp(a)(a)", "implicit-multiplication"),
    "keyword-call": ("exp(x=a)", "unsupported-syntax"),
    "two-arguments": ("exp(a, a)", "wrong-arity"),
    "no-argument": ("exp()", "wrong-arity"),
    "os-system": ("os.system('id')", "unsupported-syntax"),
    "dunder-import-chain": ("__import__('os').system('id')", "unknown-function"),
    "open-file": (f"open('{TRAP}', 'w')", "unknown-function"),
    "exec-import": (f"exec('import pathlib; pathlib.Path(\"{TRAP}\").touch()')",
                    "unknown-function"),
    "eval": ("eval('1')", "unknown-function"),
    "compile": ("compile('1', '', 'eval')", "unknown-function"),
    "getattr": ("getattr(a, '__class__')", "unknown-function"),
    "globals": ("globals()", "unknown-function"),
    "breakpoint": ("breakpoint()", "unknown-function"),
    "sympy-symbol": ("Symbol('x')", "unknown-function"),
    "sympy-sympify": (f"sympify(\"__import__('pathlib').Path('{TRAP}').touch()\")",
                      "unknown-function"),
    "sympy-singleton": ("S.Infinity", "unsupported-syntax"),
    "sympy-variable-exponent": ("x**y", "variable-exponent"),
    "euler-variable-exponent": ("E**a", "variable-exponent"),
    "caret-variable-exponent": ("2^a", "variable-exponent"),
}  # fmt: skip

# Calls of names that are no function of the language: Python's dunders and builtins, sympy's
# API. Each is refused as an unknown function, by both endpoints that parse expressions.
UNKNOWN_FUNCTIONS = sorted({*DUNDERS, *BUILTIN_NAMES, *SYMPY_NAMES} - set(FUNCTIONS))

INJECTION = [
    *(
        pytest.param(gradients(f"a.{name}", "unsupported-syntax"), id=f"dunder-attribute-{name}")
        for name in DUNDERS
    ),
    *(
        p
        for name, (text, kind) in PYTHON_SYNTAX.items()
        for p in both(f"python-{name}", text, kind)
    ),
]


# -- resource exhaustion --------------------------------------------------------------------

DEPTH = LIMITS.max_depth
LONG = LIMITS.max_expression_length
NODES = LIMITS.max_nodes
NAME = LIMITS.max_identifier_length


def _sum(terms: int, name: str = "a") -> str:
    return "+".join([name] * terms)


def _bindings_body(count: int) -> bytes:
    return _json({"expression": "a", "bindings": {f"v{i}": 1 for i in range(count)} | {"a": 1}})


def _nested_json(depth: int, opener: str = "[", closer: str = "]") -> bytes:
    value = opener * depth + closer * depth
    return f'{{"expression": "a", "bindings": {{"a": {value}}}}}'.encode()


RESOURCE_EXPRESSIONS = {
    "constant-1e400": ("1e400 * a", "constant-too-large"),
    "constant-1e301": ("1e301 * a", "constant-too-large"),
    "constant-negative-1e400": ("-1e400 * a", "constant-too-large"),
    "constant-float-max": ("1.7976931348623157e308 * a", "constant-too-large"),
    "constant-400-digits": ("9" * 400 + " * a", "constant-too-large"),
    "constant-10000-digits": ("1" * 10_000 + " * a", "constant-too-large"),
    "constant-huge-exponent": ("1e99999999999999999999 * a", "constant-too-large"),
    "power-tower-constant": ("9**9**9", "constant-too-large"),
    "power-tower-twos": ("2**2**2**2**2**2", "constant-too-large"),
    "power-tower-exponent": ("a ** 2**2**2**2**2", "constant-too-large"),
    "power-10-400": ("10**400 * a", "constant-too-large"),
    "power-squared": ("(10**200)**2 * a", "constant-too-large"),
    "product-of-constants": ("1e300 * 10 * a", "constant-too-large"),
    "product-overflow": ("1e300 * 1e300 * a", "overflow"),
    "exp-overflow": ("exp(1000) * a", "overflow"),
    "exp-tower": ("exp(exp(exp(10))) * a", "overflow"),
    "exponent-1e301": ("a ** 1e301", "constant-too-large"),
    "parentheses-201": ("(" * (DEPTH + 1) + "a" + ")" * (DEPTH + 1), "nesting-too-deep"),
    "parentheses-5000": ("(" * 5000 + "a" + ")" * 5000, "nesting-too-deep"),
    "parentheses-unclosed": ("(" * 49_000 + "a", "nesting-too-deep"),
    "parentheses-only-closing": (")" * 50_000, "unbalanced-parenthesis"),
    "unary-minus-201": ("-" * (DEPTH + 1) + "a", "nesting-too-deep"),
    "unary-minus-99999": ("-" * (LONG - 1) + "a", "nesting-too-deep"),
    "unary-plus-99999": ("+" * (LONG - 1) + "a", "nesting-too-deep"),
    "alternating-signs": ("-+" * 5000 + "a", "nesting-too-deep"),
    "calls-201": ("tanh(" * (DEPTH + 1) + "a" + ")" * (DEPTH + 1), "nesting-too-deep"),
    "calls-10000": ("exp(" * 10_000 + "a" + ")" * 10_000, "nesting-too-deep"),
    "calls-mixed": ("log(-(" * 150 + "a" + "))" * 150, "nesting-too-deep"),
    "power-chain-right": ("a" + "**1" * (DEPTH + 1), "nesting-too-deep"),
    "expression-100001": ("a" + " " * LONG, "expression-too-long"),
    "expression-900000": ("a+" * 450_000 + "a", "expression-too-long"),
    "nodes-sum": (_sum(NODES + 1), "too-many-nodes"),
    "nodes-product": ("*".join(["a"] * (NODES + 1)), "too-many-nodes"),
    "nodes-differences": ("-".join(["a"] * (NODES // 2)), "too-many-nodes"),
    "nodes-distinct-variables": ("+".join(f"v{i}" for i in range(NODES // 2 + 1)),
                                 "too-many-nodes"),
    "identifier-65": ("a" * (NAME + 1), "identifier-too-long"),
    "identifier-99999": ("a" * (LONG - 1), "identifier-too-long"),
    "dunder-identifier-long": ("_" * (NAME + 1), "identifier-too-long"),
}  # fmt: skip

RESOURCE = [
    *(
        p
        for name, (text, kind) in RESOURCE_EXPRESSIONS.items()
        for p in both(f"resource-{name}", text, kind)
    ),
    pytest.param(raw(_bindings_body(LIMITS.max_bindings), "too-many-bindings", 422),
                 id="bindings-over-limit"),
    pytest.param(raw(_bindings_body(60_000), "too-many-bindings", 422), id="bindings-60000"),
    pytest.param(raw(_json({"expression": "a" * (MAX_BODY + 1)}), "body-too-large", 413),
                 id="body-over-limit"),
    pytest.param(raw(b"[" + b"0," * (2 * MAX_BODY) + b"0]", "body-too-large", 413),
                 id="body-4-mib"),
    pytest.param(raw(_nested_json(100_000), "malformed-json", 400), id="json-nested-arrays"),
    pytest.param(raw(_nested_json(100_000, '{"a":', "}"), "malformed-json", 400),
                 id="json-nested-objects"),
    pytest.param(raw(_nested_json(500), "invalid-binding", 422), id="json-nested-500"),
    pytest.param(raw(b"[" + b"0," * 200_000 + b"0]", "validation-error", 422),
                 id="json-wide-array"),
    pytest.param(raw(_json({"expression": "a", "bindings": {"a" * 500_000: 1}}),
                     "unbound-variables", 422), id="binding-name-500k"),
]  # fmt: skip


# -- symbolic blow-ups ----------------------------------------------------------------------

# Expressions within every limit of the engine whose derivative formulas sympy cannot finish in
# its time budget (each takes 10 s to minutes unbounded), and ones past the symbolic node limit.
SYMBOLIC_NODES = DEFAULTS["MAX_SYMBOLIC_NODES"]
_PRODUCT = "*".join(f"v{i}" for i in range(SYMBOLIC_NODES))
SYMBOLIC_EXPRESSIONS = {
    "tanh-nest-99": ("tanh(" * 99 + "a" + ")" * 99, {"a": 0.5}, "symbolic-too-expensive"),
    "exp-tanh-nest": ("exp(tanh(" * 49 + "a" + "))" * 49, {"a": 0.5}, "symbolic-too-expensive"),
    "tanh-of-sums": ("tanh(" * 33 + "a" + "+b)*c" * 33, {"a": 0.1, "b": 0.2, "c": 0.3},
                     "symbolic-too-expensive"),
    "product-of-100-variables": (_PRODUCT, {f"v{i}": 1.01 for i in range(SYMBOLIC_NODES)},
                                 "symbolic-too-expensive"),
    # Exact powers of binary fractions: 0.5 ** 9e15 has quadrillions of digits.
    "huge-integer-power": ("a ** 9e15", {"a": 0.5}, "symbolic-too-expensive"),
    "binomial-power": ("(a + b) ** 100000 * c", {"a": 0.3, "b": 0.7, "c": 1.0},
                       "symbolic-too-expensive"),
    # A program whose every statement uses the previous value three times: a DAG of 90
    # operators whose formula, written out, doubles with every line.
    "program-doubling-dag": ("x0 = tanh(a)\n" + "\n".join(
        f"x{i} = tanh(x{i - 1} * x{i - 1} + x{i - 1})" for i in range(1, 30)), {"a": 0.3},
        "symbolic-too-expensive"),
    "product-of-101-variables": (_PRODUCT + "*w*x", {f"v{i}": 1.0 for i in range(SYMBOLIC_NODES)}
                                 | {"w": 1.0, "x": 1.0}, "symbolic-too-large"),
    "exp-nest-101": ("exp(" * 101 + "a" + ")" * 101, {"a": -1e3}, "symbolic-too-large"),
    "power-tower-101": ("(" * 101 + "a" + "**1.5)" * 101, {"a": 1.0}, "symbolic-too-large"),
    "sum-101": ("+".join(["a"] * 102), {"a": 1.0}, "symbolic-too-large"),
    "engine-limit-first": (_sum(NODES + 1), {"a": 1.0}, "too-many-nodes"),
}  # fmt: skip

SYMBOLIC = [
    *(
        pytest.param(derivatives(text, kind, bindings), id=f"symbolic-{name}")
        for name, (text, bindings, kind) in SYMBOLIC_EXPRESSIONS.items()
    ),
    pytest.param(derivatives("a", "unknown-variables", {"a": 1}, variables=["__import__"]),
                 id="symbolic-variable-dunder"),
    pytest.param(derivatives("a", "validation-error", {"a": 1}, variables="a"),
                 id="symbolic-variables-string"),
    pytest.param(derivatives("a", "validation-error", {"a": 1}, variables=[1]),
                 id="symbolic-variables-number"),
    pytest.param(derivatives("a", "validation-error", {"a": 1}, h="1e-3"), id="symbolic-h-string"),
    pytest.param(derivatives("a", "validation-error", {"a": 1}, h=0), id="symbolic-h-zero"),
    pytest.param(derivatives("a", "validation-error", {"a": 1}, h=True), id="symbolic-h-boolean"),
    pytest.param(raw(b'{"expression": "a", "bindings": {"a": 1}, "h": 1e400}', "validation-error",
                     422, path="/v1/derivatives"), id="symbolic-h-overflowing"),
    pytest.param(raw(b'{"expression": "a", "bindings": {"a": 1}, "h": NaN}', "validation-error",
                     422, path="/v1/derivatives"), id="symbolic-h-nan"),
    pytest.param(derivatives("sympify(a)", "unknown-function", {"a": 1}),
                 id="symbolic-sympify-call"),
    pytest.param(derivatives("Heaviside(a, 0)", "unknown-function", {"a": 1}),
                 id="symbolic-heaviside-call"),
]  # fmt: skip


# -- numeric edge cases ---------------------------------------------------------------------


def _bound(expression: str, **bindings: Any) -> bytes:
    return _json({"expression": expression, "bindings": bindings})


def _bound_raw(expression: str, value: str) -> bytes:
    """A body whose binding is spelled exactly as given, e.g. `NaN` or a 400-digit integer."""
    return f'{{"expression": {json.dumps(expression)}, "bindings": {{"a": {value}}}}}'.encode()


NUMERIC_RAW = {
    "nan": "NaN",
    "infinity": "Infinity",
    "negative-infinity": "-Infinity",
    "1e400": "1e400",
    "negative-1e400": "-1e400",
    "400-digit-integer": "9" * 400,
    "5000-digit-integer": "7" * 5000,
    "string": '"1"',
    "string-nan": '"nan"',
    "true": "true",
    "null": "null",
    "array": "[1]",
    "object": '{"real": 1}',
}
NUMERIC_DOMAIN = {
    "log-zero": ("log(a)", 0, "log-domain"),
    "log-negative-zero": ("log(a)", -0.0, "log-domain"),
    "log-negative": ("log(a)", -1, "log-domain"),
    "log-tiny-negative": ("log(a)", -5e-324, "log-domain"),
    "log-constant-zero": ("log(0) * a", 1, "log-domain"),
    "divide-by-zero-binding": ("1 / a", 0, "division-by-zero"),
    "divide-by-negative-zero": ("1 / a", -0.0, "division-by-zero"),
    "divide-by-constant-zero": ("a / 0", 1, "division-by-zero"),
    "divide-by-folded-zero": ("a / (1 - 1)", 1, "division-by-zero"),
    "constant-division-by-zero": ("a + 1 / 0", 1, "division-by-zero"),
    "negative-power-of-zero": ("a ** -1", 0, "division-by-zero"),
    "negative-power-of-constant-zero": ("a + 0 ** -1", 1, "division-by-zero"),
    "root-of-negative": ("a ** 0.5", -1, "complex-result"),
    "cube-root-of-negative-constant": ("a * (-8) ** (1 / 3)", 1, "complex-result"),
    "sqrt-at-zero": ("a ** 0.5", 0, "non-finite"),
    "sqrt-at-negative-zero": ("a ** 0.5", -0.0, "non-finite"),
    "exp-overflow": ("exp(a)", 710, "overflow"),
    "product-overflow": ("a * a", 1e200, "overflow"),
    "sum-overflow": ("a + a", 1e308, "overflow"),
    "power-overflow": ("a ** 3", 1e103, "overflow"),
    "reciprocal-of-subnormal": ("1 / a", 5e-324, "overflow"),
    "forward-overflow-in-square": ("(a * 1e300) ** 2", 1, "overflow"),
    "gradient-overflow": ("log(a) * 1e300", 1e-10, "non-finite"),
    "log-of-subnormal": ("log(a)", 5e-324, "overflow"),
}

NUMERIC = [
    *(
        pytest.param(raw(_bound_raw("a", value), "invalid-binding", 422), id=f"binding-{name}")
        for name, value in NUMERIC_RAW.items()
    ),
    *(
        pytest.param(raw(_bound(text, a=value), kind, 422), id=f"domain-{name}")
        for name, (text, value, kind) in NUMERIC_DOMAIN.items()
    ),
    pytest.param(raw(_json({"expression": 1, "bindings": {}}), "validation-error", 422),
                 id="expression-number"),
    pytest.param(raw(_json({"expression": None, "bindings": {}}), "validation-error", 422),
                 id="expression-null"),
    pytest.param(raw(_json({"expression": ["a"], "bindings": {}}), "validation-error", 422),
                 id="expression-array"),
    pytest.param(raw(_json({"expression": {"a": 1}, "bindings": {}}), "validation-error", 422),
                 id="expression-object"),
    pytest.param(raw(_json({"expression": "a", "bindings": [1]}), "validation-error", 422),
                 id="bindings-array"),
    pytest.param(raw(_json({"expression": "a", "bindings": "a=1"}), "validation-error", 422),
                 id="bindings-string"),
    pytest.param(raw(_json({"expression": "a", "bindings": None}), "validation-error", 422),
                 id="bindings-null"),
    pytest.param(raw(_json({**LESSON, "granularity": "bytecode"}), "validation-error", 422),
                 id="granularity-unknown"),
    pytest.param(raw(_json({**LESSON, "granularity": 1}), "validation-error", 422),
                 id="granularity-number"),
]  # fmt: skip


# -- encoding tricks ------------------------------------------------------------------------

INVISIBLE = {
    "nul": "\x00", "escape": "\x1b[2J", "bell": "\x07", "vertical-tab": "\x0b",
    "form-feed": "\x0c", "delete": "\x7f", "next-line": "\x85", "no-break-space": "\xa0",
    "soft-hyphen": "\xad", "zero-width-space": "\u200b", "zero-width-non-joiner": "\u200c",
    "zero-width-joiner": "\u200d", "left-to-right-mark": "\u200e", "line-separator": "\u2028",
    "right-to-left-override": "\u202e", "word-joiner": "\u2060", "invisible-times": "\u2062",
    "ideographic-space": "\u3000", "byte-order-mark": "\ufeff", "lone-high-surrogate": "\ud800",
    "lone-low-surrogate": "\udfff", "private-use": "\ue000", "noncharacter": "\uffff",
    "tag-character": "\U000e0041",
}  # fmt: skip
# Letters that look like ASCII: Cyrillic, Greek, fullwidth, mathematical, script and ligatures.
LOOKALIKES = (
    "\u0430\u0435\u043e\u0440\u0441\u0445\u0443\u0456\u0410\u0412\u0415\u041a\u041c\u041d"
    "\u041e\u0420\u0421\u0422\u0425\u03b1\u03bf\u03bd\u0391\u0392\u0395\u039f\u212f\u210e"
    "\u2113\ufb01\u0131\u1d00\u0251\u0261"
    + "".join(chr(0xFF41 + i) for i in range(26))  # fullwidth a-z
    + "".join(chr(0x1D41A + i) for i in range(0, 26, 5))  # mathematical bold a, f, k, p, u, z
)
# The digit one of the first 60 scripts Unicode gives digits to, then signs that read as numbers:
# circled one, superscript one, one half, roman twelve, one fifth.
NON_ASCII_DIGITS = [
    *sorted(
        {chr(c) for c in range(0x80, 0x1FBFA) if unicodedata.digit(chr(c), None) == 1}
        - {chr(c) for c in range(0x2460, 0x24FF)}  # circled and parenthesized: one is enough
    )[:60],
    *"\u2460\u00b9\u00bd\u216b\u2155",
]
OPERATOR_LOOKALIKES = {
    "minus-sign": "a \u2212 a", "multiplication-sign": "a \u00d7 a", "division-sign": "a \u00f7 a",
    "dot-operator": "a \u22c5 a", "fullwidth-plus": "a \uff0b a", "fullwidth-parenthesis":
    "\uff08a\uff09", "superscript-two": "a\u00b2", "en-dash": "a \u2013 a",
    "asterisk-operator": "a \u2217 a", "fraction-slash": "a \u2044 a", "combining-acute":
    "a\u0301", "decomposed-e-acute": "e\u0301 + a",
}  # fmt: skip


def _hex(text: str) -> str:
    return "-".join(f"{ord(c):04x}" for c in text)


ENCODING = [
    *(
        pytest.param(gradients(f"a{char}+ a", "invalid-character"), id=f"invisible-{name}")
        for name, char in INVISIBLE.items()
    ),
    *(
        pytest.param(gradients(f"2 * {char}", "invalid-character"), id=f"lookalike-{_hex(char)}")
        for char in LOOKALIKES
    ),
    *(
        pytest.param(gradients(f"a * {char}", "invalid-character"), id=f"digit-{_hex(char)}")
        for char in NON_ASCII_DIGITS
    ),
    *(
        pytest.param(gradients(text, "invalid-character"), id=f"operator-{name}")
        for name, text in OPERATOR_LOOKALIKES.items()
    ),
    pytest.param(gradients("\U0001f600" * LONG, "invalid-character"), id="emoji-100000"),
    pytest.param(gradients("\U0001f600" * (LONG + 1), "expression-too-long"), id="emoji-100001"),
    pytest.param(gradients("\u0435xp(a)", "invalid-character"), id="cyrillic-function-name"),
    pytest.param(raw(b'{"expression": "a\xff", "bindings": {}}', "malformed-json", 400),
                 id="utf8-invalid-byte"),
    pytest.param(raw(b'{"expression": "\xc0\xaf", "bindings": {}}', "malformed-json", 400),
                 id="utf8-overlong"),
    pytest.param(raw(b'{"expression": "\xed\xa0\x80", "bindings": {}}', "malformed-json", 400),
                 id="utf8-encoded-surrogate"),
    pytest.param(raw(b'{"expression": "\xe2\x82", "bindings": {}}', "malformed-json", 400),
                 id="utf8-truncated"),
    pytest.param(raw(b'{"expression": "a", "bindings": {"a": 1}}\x00', "malformed-json", 400),
                 id="trailing-nul-byte"),
    pytest.param(raw(b'{"expression": "a\x00", "bindings": {}}', "malformed-json", 400),
                 id="raw-control-in-string"),
    pytest.param(raw('{"expression": "a", "bindings": {"a": 1, "\ud800": 2}}',
                     "malformed-json", 400), id="surrogate-bytes-in-key"),
    pytest.param(raw(_json({"expression": "a", "bindings": {"a": 1, "\ud800": 2}}),
                     "unknown-variables", 422), id="escaped-surrogate-binding-name"),
    pytest.param(raw(_json({"expression": "a", "bindings": {"\ud800": 2}}),
                     "unbound-variables", 422), id="escaped-surrogate-only-binding"),
    pytest.param(raw(_json({"expression": "a", "bindings": {"a": "\ud800"}}),
                     "invalid-binding", 422), id="escaped-surrogate-binding-value"),
    pytest.param(raw(_json({**LESSON, "\ud800": 1}), "validation-error", 422),
                 id="escaped-surrogate-unknown-field"),
    pytest.param(raw(_json({"expression": "a", "bindings": {"\u0430": 1}}),
                     "unbound-variables", 422), id="lookalike-binding-name"),
    pytest.param(raw(_json({"expression": "a", "bindings": {"a": 1, "a\u200b": 1}}),
                     "unknown-variables", 422), id="zero-width-binding-name"),
]  # fmt: skip


# -- malformed protocol ---------------------------------------------------------------------

LESSON_BODY = _json(LESSON)
MALFORMED_JSON = {
    "empty": b"",
    "whitespace": b"   \n",
    "truncated": b'{"expression": "a",',
    "trailing-comma": b'{"expression": "a", "bindings": {"a": 1},}',
    "single-quotes": b"{'expression': 'a', 'bindings': {'a': 1}}",
    "comment": b'{"expression": "a", // a comment\n "bindings": {"a": 1}}',
    "trailing-garbage": LESSON_BODY + b"x",
    "two-documents": LESSON_BODY + LESSON_BODY,
    "undefined": b'{"expression": "a", "bindings": {"a": undefined}}',
    "hex-number": b'{"expression": "a", "bindings": {"a": 0x10}}',
    "leading-zero": b'{"expression": "a", "bindings": {"a": 01}}',
    "leading-plus": b'{"expression": "a", "bindings": {"a": +1}}',
    "bare-fraction": b'{"expression": "a", "bindings": {"a": .5}}',
    "python-literal": b'{"expression": "a", "bindings": {"a": True}}',
    "duplicate-expression": b'{"expression": "a", "expression": "__import__", "bindings": {}}',
    "duplicate-binding": b'{"expression": "a", "bindings": {"a": 1, "a": 2}}',
    "duplicate-granularity": b'{"expression": "a", "bindings": {"a": 1}, '
    b'"granularity": "operator", "granularity": "primitive"}',
}
NOT_AN_OBJECT = {
    "array": b"[]",
    "string": b'"(a + b) * c"',
    "number": b"1",
    "null": b"null",
    "true": b"true",
    "array-of-lesson": b"[" + LESSON_BODY + b"]",
}
WRONG_CONTENT_TYPES = {
    "text-plain": "text/plain",
    "form": "application/x-www-form-urlencoded",
    "multipart": "multipart/form-data; boundary=x",
    "xml": "application/xml",
    "javascript": "application/javascript",
    "octet-stream": "application/octet-stream",
    "json-typo": "application/jsn",
    "none": None,
}

PROTOCOL = [
    *(
        pytest.param(raw(body, "malformed-json", 400), id=f"json-{name}")
        for name, body in MALFORMED_JSON.items()
    ),
    *(
        pytest.param(raw(body, "validation-error", 422), id=f"not-an-object-{name}")
        for name, body in NOT_AN_OBJECT.items()
    ),
    *(
        pytest.param(raw(LESSON_BODY, "unsupported-media-type", 415, content_type=mime),
                     id=f"content-type-{name}")
        for name, mime in WRONG_CONTENT_TYPES.items()
    ),
    pytest.param(raw(_json({**LESSON, "eval": "__import__('os')"}), "validation-error", 422),
                 id="unknown-field-eval"),
    pytest.param(raw(_json({**LESSON, "__class__": {}}), "validation-error", 422),
                 id="unknown-field-dunder"),
    pytest.param(raw(_json({**LESSON, "limits": {"max_nodes": 10**9}}), "validation-error",
                     422), id="unknown-field-limits"),
    pytest.param(raw(_json({"expression": "a"}), "unbound-variables", 422),
                 id="missing-bindings"),
    pytest.param(raw(_json({"bindings": {"a": 1}}), "validation-error", 422),
                 id="missing-expression"),
    pytest.param(raw(b"{}", "validation-error", 422), id="empty-object"),
    pytest.param(raw(_json({"expression": "a", "bindings": {}}), "validation-error", 422,
                     path="/v1/graph"), id="graph-unknown-field-bindings"),
    pytest.param(raw(None, "method-not-allowed", 405, method="GET", content_type=None),
                 id="get-gradients"),
    *(
        pytest.param(raw(LESSON_BODY, "method-not-allowed", 405, method=method),
                     id=f"{method.lower()}-gradients")
        for method in ("PUT", "PATCH", "DELETE")
    ),
    pytest.param(raw(LESSON_BODY, "method-not-allowed", 405, path="/v1/operations"),
                 id="post-operations"),
    pytest.param(raw(LESSON_BODY, "method-not-allowed", 405, path="/metrics"),
                 id="post-metrics"),
    *(
        pytest.param(raw(LESSON_BODY, "not-found", 404, path=path), id=f"path-{name}")
        for name, path in {
            "traversal": "/v1/../../etc/passwd",
            "encoded-traversal": "/v1/%2e%2e/%2e%2e/etc/passwd",
            "trailing": "/v1/gradients/x",
            "version": "/v2/gradients",
            "dunder": "/__class__",
            "static": "/static/../app.py",
            "nul": "/v1/gradients%00",
        }.items()
    ),
]  # fmt: skip


# -- accepted: looks hostile, is a plain expression -------------------------------------------

# `2 * NAME + 1` at NAME = 3 is 7, with gradient 2: each of these is just a variable's name.
# (Python's keywords are not: `True`, `None` and `not` are refused where an operand should be.)
VARIABLE_NAMES = [
    "E", "pi", "I", "oo", "zoo", "nan", "inf", "Symbol", "Function", "Integer", "S", "N",
    "sympify", "print", "eval", "exec", "open", "os", "sys",
    "__import__", "__class__", "__builtins__", "_", "self", "lambda_", "a" * NAME,
]  # fmt: skip


@dataclass(frozen=True)
class Accepted:
    """A request that must succeed, with the value and gradients it must give."""

    body: dict[str, Any] | bytes  # bytes: a body spelled exactly so, e.g. a 300-digit integer
    value: float
    gradients: dict[str, float]


def _near_limit_sum() -> Accepted:
    # `a + a + ... + a` of n terms: n - 1 nodes for the sums plus one for `a`.
    terms = NODES
    return Accepted(
        {"expression": _sum(terms), "bindings": {"a": 0.5}}, terms * 0.5, {"a": float(terms)}
    )


ACCEPTED = [
    *(
        pytest.param(Accepted({"expression": f"2 * {name} + 1", "bindings": {name: 3}}, 7.0,
                              {name: 2.0}), id=f"variable-{name[:16]}")
        for name in VARIABLE_NAMES
    ),
    pytest.param(Accepted({"expression": "a * a", "bindings": {"a": -0.0}}, 0.0, {"a": -0.0}),
                 id="negative-zero"),
    pytest.param(Accepted({"expression": "a * 2", "bindings": {"a": 5e-324}}, 1e-323,
                          {"a": 2.0}), id="subnormal"),
    pytest.param(Accepted({"expression": "exp(a)", "bindings": {"a": 709}}, 8.218407461554972e307,
                          {"a": 8.218407461554972e307}), id="exp-at-edge"),
    pytest.param(Accepted({"expression": "1e300 * a", "bindings": {"a": 1}}, 1e300,
                          {"a": 1e300}), id="constant-at-limit"),
    pytest.param(Accepted({"expression": "1e-400 + a", "bindings": {"a": 1}}, 1.0, {"a": 1.0}),
                 id="constant-underflows-to-zero"),
    # The subtraction's expansion writes its constant negated: its reciprocal, which has no float,
    # is never needed.
    pytest.param(Accepted({"expression": "a - 1e-320", "bindings": {"a": 1}}, 1.0, {"a": 1.0}),
                 id="subnormal-subtracted"),
    pytest.param(Accepted({"expression": "x = Value(1.0)\ny = x - 2*1e-320\ny.backward()"},
                          1.0, {"x": 1.0}), id="subnormal-subtracted-in-a-program"),
    pytest.param(Accepted(_bound_raw("a", "1" * 300), float("1" * 300), {"a": 1.0}),
                 id="300-digit-binding"),
    pytest.param(Accepted({"expression": "relu(a)", "bindings": {"a": -0.0}}, 0.0, {"a": 0.0}),
                 id="relu-at-negative-zero"),
    pytest.param(Accepted({"expression": "tanh(a)", "bindings": {"a": 1e300}}, 1.0, {"a": 0.0}),
                 id="tanh-saturated"),
    pytest.param(Accepted({"expression": "a ** 0", "bindings": {"a": 0}}, 1.0, {"a": 0.0}),
                 id="zero-to-the-zero"),
    pytest.param(Accepted({"expression": "(" * DEPTH + "a" + ")" * DEPTH,
                           "bindings": {"a": 2}}, 2.0, {"a": 1.0}), id="depth-at-limit"),
    pytest.param(Accepted({"expression": "a" + " " * (LONG - 1), "bindings": {"a": 2}}, 2.0,
                          {"a": 1.0}), id="length-at-limit"),
    pytest.param(Accepted({"expression": "+".join(f"v{i}" for i in range(NODES // 2)),
                           "bindings": {f"v{i}": 1 for i in range(NODES // 2)}},
                          NODES // 2, {f"v{i}": 1.0 for i in range(NODES // 2)}),
                 id="bindings-many-variables"),
    pytest.param(_near_limit_sum(), id="nodes-at-limit"),
]  # fmt: skip


# -- the canary -----------------------------------------------------------------------------

# Audit events that mean something ran, opened, spawned or connected.
WATCHED = {
    "exec", "compile", "open", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
    "os.forkpty", "os.kill", "os.killpg", "subprocess.Popen", "os.remove", "os.rmdir",
    "os.rename", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.symlink", "os.link",
    "os.listdir", "os.scandir", "os.chdir", "os.putenv", "os.unsetenv", "shutil.rmtree",
    "shutil.copyfile", "shutil.move", "socket.connect", "socket.bind", "socket.getaddrinfo",
    "ctypes.dlopen", "ctypes.dlsym", "pickle.find_class", "marshal.loads", "builtins.input",
    "code.__new__", "function.__new__", "import", "urllib.Request", "webbrowser.open",
}  # fmt: skip


class Canary:
    """Records watched audit events raised while armed, on the thread that armed it."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.armed_thread: int | None = None

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.armed_thread != threading.get_ident() or event not in WATCHED:
            return
        if event == "import" and args[0] in sys.modules:
            return
        self.events.append((event, repr(args)[:200]))

    @contextmanager
    def watching(self) -> Iterator[list[tuple[str, str]]]:
        self.events = []
        self.armed_thread = threading.get_ident()
        # A time budget's alarm can land in a garbage-collector callback (the test runner's
        # own, here), where Python ignores the exception and reports it: the report reads and
        # parses source lines to print them. That is the interpreter, not the input, at work.
        report = sys.unraisablehook
        sys.unraisablehook = self.unwatched(report)
        try:
            yield self.events
        finally:
            self.armed_thread = None
            sys.unraisablehook = report

    def unwatched(self, report: Callable[[Any], None]) -> Callable[[Any], None]:
        def hook(unraisable: Any) -> None:
            armed, self.armed_thread = self.armed_thread, None
            try:
                report(unraisable)
            finally:
                self.armed_thread = armed

        return hook


CANARY = Canary()
sys.addaudithook(CANARY.hook)  # a hook cannot be removed; unarmed, it returns at once


# -- the checks -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def app() -> Flask:
    # The default limits, whatever AUTOGRAD_* variables are set; and not in testing mode, so an
    # exception becomes the 500 a client would get rather than an error in the test.
    app = make_app(testing=False)
    client = app.test_client()
    # Every path once before the canary watches: lazy imports on first use are not the input's.
    check_lesson(client)
    assert client.post("/v1/graph", json={"expression": "a"}).status_code == 200
    # sympy loads on the first derivative; then once cut short by its budget.
    for expression, bindings in (
        ("relu(a * b) / c + tanh(log(a)) ** 2", {"a": 0.5, "b": 2, "c": 3}),
        ("a ** 9e15", {"a": 0.5}),
    ):
        assert client.post(
            "/v1/derivatives", json={"expression": expression, "bindings": bindings}
        ).status_code in (200, 422)
    for case in (
        gradients("a +", "unexpected-end"),
        gradients("log(a)", "log-domain", {"a": 0}),
        gradients("a", "unbound-variables"),
        raw(b"{", "malformed-json", 400),
        raw(b"{}", "validation-error", 422),
        raw(b"1" * (MAX_BODY + 1), "body-too-large", 413),
        raw(b"{}", "unsupported-media-type", 415, content_type="text/plain"),
        raw(None, "not-found", 404, path="/nowhere"),
        raw(None, "method-not-allowed", 405, method="GET", content_type=None),
    ):
        send(client, case)
    client.get("/v1/operations")
    return app


def send(client: FlaskClient, case: Case) -> Any:
    headers = {"Content-Type": case.content_type} if case.content_type else {}
    return client.open(case.path, method=case.method, data=case.body, headers=headers)


def check_refused(client: FlaskClient, case: Case) -> None:
    with CANARY.watching() as events:
        response = send(client, case)
        body = response.get_data()
    # A failure of the service first: its traceback being logged would alarm the canary too.
    assert response.status_code < 500, body[:500]
    assert events == [], f"the canary saw {events}"
    assert not TRAP.exists(), f"an input created {TRAP}"
    assert response.status_code == case.status, body[:500]
    assert response.mimetype == PROBLEM, response.mimetype
    problem = json.loads(body)
    assert problem["type"] == TYPE_BASE + case.kind, problem
    assert problem["status"] == case.status
    assert isinstance(problem["detail"], str) and problem["detail"].strip()
    assert problem["title"]
    check_lesson(client)  # and the service still answers a normal request, correctly


# -- sweeps and pictures --------------------------------------------------------------------


def sweep(kind: str, status: int = 422, **body: Any) -> Case:
    return Case(_json(body), kind, status, path="/v1/sweep")


def plot_url(query: str, kind: str, status: int = 422) -> Case:
    return Case(None, kind, status, path=f"/v1/sweep?{query}", method="GET", content_type=None)


def _axis(name: str = "x", start: Any = 0, stop: Any = 1, points: Any = 5) -> dict[str, Any]:
    return {"name": name, "from": start, "to": stop, "points": points}


_WIDE = "x" + " + x" * 1_500  # 1,501 graph nodes: at 10,000 points, past the nodes x points limit

SWEEP = [
    pytest.param(sweep("validation-error", expression="x"), id="sweep-neither-vary-nor-points"),
    pytest.param(sweep("validation-error", expression="x", vary=[_axis()], points=[{"x": 1}]),
                 id="sweep-both-vary-and-points"),
    pytest.param(sweep("validation-error", expression="x*y*z", vary=[_axis("x"), _axis("y"),
                 _axis("z")]), id="sweep-three-axes"),
    pytest.param(sweep("invalid-binding", expression="x", vary=[_axis(), _axis()]),
                 id="sweep-same-axis-twice"),
    pytest.param(sweep("validation-error", expression="x", vary=[]), id="sweep-no-axes"),
    pytest.param(sweep("validation-error", expression="x", points=[]), id="sweep-no-points"),
    *(pytest.param(sweep("validation-error", expression="x", vary=[_axis(points=p)]),
                   id=f"sweep-points-{p!r}") for p in (0, -1, 1.5, "10", True, None, [5])),
    *(pytest.param(raw(b'{"expression": "x", "vary": [{"name": "x", "from": %s, "to": 1, '
                       b'"points": 3}]}' % v, "validation-error", 422, path="/v1/sweep"),
                   id=f"sweep-from-{v.decode()}") for v in (b"NaN", b"Infinity", b"1e400",
                                                             b'"0"', b"null")),
    pytest.param(sweep("too-many-points", expression="x", vary=[_axis(points=10**17)]),
                 id="sweep-points-1e17"),
    pytest.param(sweep("too-many-points", expression="x", vary=[_axis(points=10_001)]),
                 id="sweep-points-over-limit"),
    pytest.param(sweep("too-many-points", expression="x", points=[{"x": 1}] * 10_001),
                 id="sweep-explicit-points-over-limit"),
    pytest.param(sweep("grid-too-large", expression="x*y", vary=[_axis("x", points=201),
                 _axis("y", points=2)]), id="sweep-grid-over-limit"),
    pytest.param(sweep("sweep-too-large", expression=_WIDE, vary=[_axis(points=10_000)]),
                 id="sweep-nodes-times-points"),
    pytest.param(sweep("unknown-variables", expression="x", vary=[_axis("__class__")]),
                 id="sweep-vary-dunder"),
    pytest.param(sweep("unbound-variables", expression="x * y", vary=[_axis("x")]),
                 id="sweep-unbound"),
    pytest.param(sweep("unknown-variables", expression="x", bindings={"os": 1},
                       vary=[_axis()]), id="sweep-unknown-binding"),
    pytest.param(sweep("invalid-binding", expression="x", points=[{"x": "1"}]),
                 id="sweep-point-string"),
    pytest.param(sweep("validation-error", expression="x", points=[[1]]), id="sweep-point-list"),
    pytest.param(sweep("unbound-variables", expression="x * y", bindings={"y": 1},
                       points=[{"y": 2}]), id="sweep-point-unbound"),
    pytest.param(sweep("unknown-function", expression="__import__('os').system('touch "
                       f"{TRAP}')", vary=[_axis()]), id="sweep-injection"),
    pytest.param(sweep("validation-error", expression=["x"], vary=[_axis()]),
                 id="sweep-expression-list"),
    *(pytest.param(Case(_json({"expression": "a", "bindings": {"a": 1}, "format": f}),
                        "validation-error"), id=f"gradients-format-{f[:12]}")
      for f in ("exe", "svg; rm -rf /", "../../etc/passwd", "SVG", "png", "")),
    *(pytest.param(Case(_json({"expression": "a", "format": f}), "validation-error",
                        path="/v1/graph"), id=f"graph-format-{str(f)[:12]}")
      for f in ("pdf", "dot -Tpng", None)),
    pytest.param(plot_url("expression=x", "validation-error"), id="plot-no-vary"),
    pytest.param(plot_url("vary=x:0:1:3", "validation-error"), id="plot-no-expression"),
    pytest.param(plot_url("expression=x&vary=x:0:1", "validation-error"), id="plot-short-axis"),
    pytest.param(plot_url("expression=x&vary=x:a:b:c", "validation-error"), id="plot-bad-axis"),
    pytest.param(plot_url("expression=x&vary=x:nan:1:3", "validation-error"), id="plot-nan-axis"),
    pytest.param(plot_url("expression=x&vary=x:0:1:99999999999", "too-many-points"),
                 id="plot-points-over-limit"),
    pytest.param(plot_url("expression=x*y&vary=x:0:1:3&bind=y:inf", "validation-error"),
                 id="plot-infinite-binding"),
    pytest.param(plot_url("expression=x*y&vary=x:0:1:3&bind=y", "validation-error"),
                 id="plot-binding-without-number"),
    pytest.param(plot_url("expression=x*y&vary=x:0:1:3&bind=y:1_0", "validation-error"),
                 id="plot-binding-underscore"),
    pytest.param(plot_url("expression=x&vary=x:0:1:0", "validation-error"),
                 id="plot-zero-points"),
    pytest.param(plot_url("expression=x&vary=x:0:1:3&format=gif", "validation-error"),
                 id="plot-gif"),
    pytest.param(plot_url("expression=exec(x)&vary=x:0:1:3", "unknown-function"),
                 id="plot-injection"),
    pytest.param(plot_url("expression=x&vary=x:0:1:3&bogus=1", "validation-error"),
                 id="plot-unknown-parameter"),
    pytest.param(plot_url("expression=x&vary=x:0:1:3&__class__=1", "validation-error"),
                 id="plot-dunder-parameter"),
    pytest.param(plot_url("expression=x&vary=x:0:1:3&output=__import__('os')",
                          "validation-error"), id="plot-output-not-a-name"),
    pytest.param(plot_url("expression=x&vary=x:0:1:3&output=__class__", "unknown-output"),
                 id="plot-output-dunder"),
    # A parameter of one value given twice has no single meaning, as a key twice in a body.
    pytest.param(plot_url("expression=x&vary=x:0:1:3&format=json&format=svg",
                          "validation-error"), id="plot-format-twice"),
    pytest.param(plot_url("expression=x&expression=exp(x)&vary=x:0:1:3", "validation-error"),
                 id="plot-expression-twice"),
    pytest.param(plot_url("expression=x&vary=x:0:1:3&output=x&output=y", "validation-error"),
                 id="plot-output-twice"),
    # So has a name bound twice: neither binding is read as the one meant.
    pytest.param(plot_url("expression=x*y&vary=x:0:1:3&bind=y:1&bind=y:2", "invalid-binding"),
                 id="plot-binding-twice"),
    pytest.param(plot_url("expression=x*y&vary=x:0:1:3&bind=y:1&bind=x:0&bind=x:1",
                          "invalid-binding"), id="plot-varied-binding-twice"),
    pytest.param(plot_url("expression=x*y&vary=x:0:1:3&" + "&".join(["bind=y:1"] * 5000),
                          "invalid-binding"), id="plot-binding-5000-times"),
]  # fmt: skip


@pytest.mark.parametrize("case", SWEEP)
def test_sweeps_and_pictures(client: FlaskClient, case: Case) -> None:
    check_refused(client, case)


@pytest.mark.parametrize("case", INJECTION)
def test_code_injection(client: FlaskClient, case: Case) -> None:
    check_refused(client, case)


@settings(
    max_examples=len(UNKNOWN_FUNCTIONS),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    name=st.sampled_from(UNKNOWN_FUNCTIONS),
    argument=st.sampled_from(["a", "'x'", "", "a, a", "()"]),
    endpoint=st.sampled_from([gradients, graph]),
)
def test_a_call_of_an_unknown_function_is_refused(
    client: FlaskClient, name: str, argument: str, endpoint: Any
) -> None:
    check_refused(client, endpoint(f"{name}({argument})", "unknown-function"))


@pytest.mark.parametrize("case", RESOURCE)
def test_resource_exhaustion(client: FlaskClient, case: Case) -> None:
    check_refused(client, case)


@pytest.mark.parametrize("case", SYMBOLIC)
def test_symbolic_blow_ups(client: FlaskClient, case: Case) -> None:
    """Stopped by the node limit at once, or by the time budget where sympy is; then the
    service answers the next request, symbolic ones included."""
    check_refused(client, case)
    lesson = client.post("/v1/derivatives", json=LESSON)
    assert lesson.status_code == 200
    assert lesson.get_json()["agree"] is True


@pytest.mark.parametrize("case", NUMERIC)
def test_numeric_edges(client: FlaskClient, case: Case) -> None:
    check_refused(client, case)


@pytest.mark.parametrize("case", ENCODING)
def test_encoding_tricks(client: FlaskClient, case: Case) -> None:
    check_refused(client, case)


@pytest.mark.parametrize("case", PROTOCOL)
def test_malformed_protocol(client: FlaskClient, case: Case) -> None:
    check_refused(client, case)


@pytest.mark.parametrize("case", ACCEPTED)
def test_accepted(client: FlaskClient, case: Accepted) -> None:
    with CANARY.watching() as events:
        if isinstance(case.body, bytes):
            response = client.post("/v1/gradients", data=case.body, content_type="application/json")
        else:
            response = client.post("/v1/gradients", json=case.body)
    assert response.status_code == 200, response.get_data()[:500]
    assert events == [], f"the canary saw {events}"
    document = response.get_json()
    assert document["value"] == pytest.approx(case.value, rel=1e-12)
    assert document["gradients"] == pytest.approx(case.gradients, rel=1e-12)
    check_lesson(client)


def test_hostile_request_id_is_replaced(client: FlaskClient) -> None:
    """A request id that could forge log lines or headers is not echoed."""
    for hostile in ("<script>", "a" * 129, "../../etc/passwd", "\u0430", "a b", "%0d%0a"):
        response = client.post("/v1/gradients", json=LESSON, headers={"X-Request-ID": hostile})
        assert response.status_code == 200
        assert response.headers["X-Request-ID"] != hostile
        assert "Set-Cookie" not in response.headers


def test_canary_sees_what_it_watches(tmp_path: Path) -> None:
    """The canary is not blind: it records a file opened and code compiled while it is armed."""
    with CANARY.watching() as events:
        (tmp_path / "probe").write_text("x")
        exec(compile("1 + 1", "<probe>", "eval"))
    assert {"open", "compile", "exec"} <= {event for event, _ in events}


def test_canary_leaves_the_report_of_an_ignored_exception_alone(tmp_path: Path) -> None:
    """Python reporting an exception raised where it cannot propagate (a `__del__`, as when a
    budget's alarm lands in a collector callback) is not the input at work; what follows is."""

    class Failing:
        def __del__(self) -> None:
            raise RuntimeError("ignored")

    reported: list[Any] = []

    def report(unraisable: Any) -> None:  # reads a file, as Python's own report does
        reported.append(unraisable.exc_value)
        Path(__file__).read_bytes()

    previous, sys.unraisablehook = sys.unraisablehook, report
    try:
        with CANARY.watching() as events:
            Failing()  # freed at once: its error goes to the hook
            (tmp_path / "probe").write_text("x")
    finally:
        sys.unraisablehook = previous
    assert [str(error) for error in reported] == ["ignored"]
    assert [event for event, _ in events] == ["open"]  # the probe's, not the report's


def test_limits_are_configurable_and_reported() -> None:
    """Each limit can be lowered in the configuration; the lower bound is enforced and reported."""
    small = {"MAX_EXPRESSION_LENGTH": 50, "MAX_DEPTH": 3, "MAX_NODES": 10,
             "MAX_IDENTIFIER_LENGTH": 4, "MAX_CONSTANT_MAGNITUDE": 1000.0, "MAX_BINDINGS": 2,
             "MAX_STATEMENTS": 3, "MAX_BODY_BYTES": 2000}  # fmt: skip
    client = make_app(testing=False, **small).test_client()
    limits = client.get("/v1/operations").get_json()["limits"]
    assert {name.lower(): value for name, value in small.items()}.items() <= limits.items()
    for case in (
        gradients("a" * 51, "expression-too-long"),
        gradients("((((a))))", "nesting-too-deep"),
        gradients(_sum(11), "too-many-nodes"),
        gradients("abcde", "identifier-too-long"),
        gradients("1001 * a", "constant-too-large"),
        gradients("a = x; b = a; c = b; d = c", "too-many-statements"),
        raw(_json({"expression": "a", "bindings": {"a": 1, "b": 2, "c": 3}}),
            "too-many-bindings", 422),
        raw(_json({"expression": "a" * 2000, "bindings": {}}), "body-too-large", 413),
    ):  # fmt: skip
        response = send(client, case)
        assert response.status_code == case.status
        assert response.get_json()["type"] == TYPE_BASE + case.kind
    lesson = {"expression": "a * b", "bindings": {"a": 2, "b": 3}}
    assert client.post("/v1/gradients", json=lesson).get_json()["gradients"] == {"a": 3, "b": 2}


def test_large_expressions_do_not_pile_up_in_memory() -> None:
    """Distinct expressions at the node limit, one after another, leave memory where it was.

    Each compiled graph of that size takes tens of MB; a cache bounded only by its number of
    entries would keep hundreds of them in every worker.
    """
    # The cache may keep one expression of this size at a time; the bound is a setting.
    client = make_app(testing=False, CACHE_NODES=NODES).test_client()
    process = psutil.Process()

    def send_large(i: int) -> None:
        expression = _sum(NODES - 2) + f" + {i}"
        assert client.post("/v1/graph", json={"expression": expression}).status_code == 200

    send_large(0)  # warm: the allocator's pools grow to one request's size
    gc.collect()
    before = process.memory_info().rss
    for i in range(1, 4):
        send_large(i)
    gc.collect()
    grown = (process.memory_info().rss - before) / 2**20
    assert grown < 40, f"{grown:.0f} MiB kept after three more large expressions"


# -- answers to /v1/check and requests for exercises ----------------------------------------
# A learner's answer is client text too. A hostile answer is not a refusal of the request: the
# item gets `unparsable` (or another feedback code) and the rest is checked, with the canary
# watching as for expressions; the answers' own structure, when wrong, is a problem.

CHECKED = {"expression": "a * b", "bindings": {"a": 3, "b": 4}}


def checked(answers: Any, kind: str, status: int = 422, **extra: Any) -> Case:
    return Case(_json({**CHECKED, "answers": answers, **extra}), kind, status, path="/v1/check")


def exercise_request(body: Any, kind: str = "validation-error") -> Case:
    return Case(_json(body), kind, path="/v1/exercises")


ANSWER_PAYLOADS = [
    *(text for text, _kind in PYTHON_SYNTAX.values()),
    *(f"{name}(a)" for name in DUNDERS),
    *(f"{name}('x')" for name in SYMPY_NAMES),
    "(" * 5000 + "a" + ")" * 5000,
    "a" + "**2" * 100,
    "9**9**9",
    "1" * 10_000,
    "a" * 5000,
    "+".join(["a"] * 5000),
    "exp(" * 40 + "a" + ")" * 40,
    "\x00a",
    "\ud800",
    "\u0430 * b",
    # Programs, not expressions: each was judged by its output, and found right for some item of
    # `a * b` at a = 3, b = 4 (value 12, gradient of a 4, derivative by a `b`).
    "12; 4",
    "q = 12",
    "g = b",
    "b = Value(4.0)\nb",
    "d = b\nd.backward()",
    "q, g = 12, 4",
    "4;" * 499 + "4",  # 500 statements within an answer's 1000 characters
]

CHECK_PROBLEMS = [
    # The expression is refused as /v1/gradients refuses it, whatever the answers.
    *(
        pytest.param(
            Case(_json({"expression": text, "bindings": {}, "answers": {}}), kind,
                 path="/v1/check"),
            id=f"check-expression-{name}",
        )
        for name, (text, kind) in [*PYTHON_SYNTAX.items()][:20]
    ),
    pytest.param(checked({"gradients": {"__class__": 1}}, "unknown-answer-items"),
                 id="check-unknown-gradient"),
    pytest.param(checked({"nodes": {"1e9": 1}}, "unknown-answer-items"), id="check-node-float"),
    pytest.param(checked({"nodes": {"9" * 5000: 1}}, "unknown-answer-items"),
                 id="check-node-huge"),
    pytest.param(checked({"nodes": {"\u0661": 1}}, "unknown-answer-items"),
                 id="check-node-arabic-digit"),
    pytest.param(checked({"derivatives": {"a" * 100_000: "1"}}, "unknown-answer-items"),
                 id="check-derivative-name-100k"),
    pytest.param(checked([1, 2], "validation-error"), id="check-answers-array"),
    pytest.param(checked({"gradients": "a"}, "validation-error"), id="check-gradients-string"),
    pytest.param(checked({"eval": 1}, "validation-error"), id="check-answers-unknown-key"),
    pytest.param(checked({}, "validation-error", tolerance={"relative": -1}),
                 id="check-negative-tolerance"),
    pytest.param(
        Case(b'{"expression": "a", "bindings": {"a": 1}, "answers": {}, '
             b'"tolerance": {"absolute": NaN}}', "validation-error",
             path="/v1/check"),
        id="check-tolerance-nan",
    ),
    pytest.param(checked({}, "validation-error", reveal="true"), id="check-reveal-string"),
    pytest.param(exercise_request({"seed": 2**64}), id="exercise-seed-2-64"),
    pytest.param(exercise_request({"seed": -1}), id="exercise-seed-negative"),
    pytest.param(exercise_request({"seed": 1e300}), id="exercise-seed-float"),
    pytest.param(exercise_request({"seed": "__import__('os')"}), id="exercise-seed-string"),
    pytest.param(exercise_request({"seed": 1, "level": 10**6}), id="exercise-level-huge"),
    pytest.param(exercise_request({"seed": 1, "kind": "__class__"}), id="exercise-kind-dunder"),
    pytest.param(
        exercise_request({"seed": 1, "generator": max(GENERATORS) + 1}),
        id="exercise-generator-past",
    ),
    pytest.param(exercise_request({"seed": 1, "generator": 0}), id="exercise-generator-0"),
    pytest.param(exercise_request({"seed": 1, "generator": "2"}), id="exercise-generator-string"),
    pytest.param(exercise_request({"seed": 1, "generator": True}), id="exercise-generator-true"),
    pytest.param(exercise_request({"seed": 1, "generator": 1.5}), id="exercise-generator-half"),
    pytest.param(exercise_request({"seed": 1, "generator": 2**64}), id="exercise-generator-huge"),
    pytest.param(exercise_request([1]), id="exercise-array"),
]  # fmt: skip


@pytest.mark.parametrize("case", CHECK_PROBLEMS)
def test_check_and_exercise_problems(client: FlaskClient, case: Case) -> None:
    check_refused(client, case)


@pytest.mark.parametrize("payload", ANSWER_PAYLOADS, ids=lambda p: repr(p)[:40])
def test_hostile_answers_are_feedback(client: FlaskClient, payload: str) -> None:
    body = _json(
        {
            **CHECKED,
            "answers": {
                "value": payload,
                "gradients": {"a": payload, "b": 3},
                "nodes": {"0": payload},
                "derivatives": {"a": payload, "b": "a"},
            },
        }
    )
    # sympy imports parts of itself on first use of a simplification path: the first request
    # may do that; the same request again must run, open and import nothing.
    first = client.post("/v1/check", data=body, content_type="application/json")
    assert first.status_code == 200, first.get_data()[:500]
    with CANARY.watching() as events:
        response = client.post("/v1/check", data=body, content_type="application/json")
    assert response.get_data() == first.get_data()
    assert events == [], f"the canary saw {events}"
    assert not TRAP.exists(), f"an input created {TRAP}"
    results = {r["item"]: r for r in response.get_json()["results"]}
    for item in ("value", "gradients.a", "nodes.0", "derivatives.a"):
        assert results[item]["verdict"] == "incorrect", results[item]
        assert results[item]["feedback"]["message"]
    assert results["gradients.b"]["verdict"] == "correct"
    assert results["derivatives.b"]["verdict"] == "correct"
    check_lesson(client)
