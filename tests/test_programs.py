"""Programs: named, shared and rebound values; micrograd's own tests pasted as they are."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
import sympy
from hypothesis import assume, given, note, settings
from reference_micrograd import (
    ProgramCase,
    Value,
    exponent,
    local_grads,
    op_name,
    programs,
    rounding_scale,
    run_program,
)

from service.api.examples import SHIPPING_PROGRAM as SHIPPING
from service.errors import (
    BindingError,
    DomainError,
    ExpressionError,
    LimitExceeded,
)
from service.evaluator import GRANULARITIES, Evaluator
from service.limits import Limits
from service.parser import parse

evaluator = Evaluator()

# micrograd's test/test_engine.py, each body as written without its import, torch and assert lines.
SANITY_CHECK = """
x = Value(-4.0)
z = 2 * x + 2 + x
q = z.relu() + z * x
h = (z * z).relu()
y = h + q + q * x
y.backward()
xmg, ymg = x, y
"""

MORE_OPS = """
a = Value(-4.0)
b = Value(2.0)
c = a + b
d = a * b + b**3
c += c + 1
c += 1 + c + (-a)
d += d * 2 + (b + a).relu()
d += 3 * d + (b - a).relu()
e = c - d
f = e**2
g = f / 2.0
g += 10.0 / f
g.backward()
amg, bmg, gmg = a, b, g
"""


def assert_micrograds_graph(document: dict[str, Any], text: str, bindings: dict, output=None):
    """The primitive document is the graph micrograd builds running the program, node for node."""
    result, declared, variables = run_program(text, bindings, output)
    topo = result.topological_order()
    position = {id(node): i for i, node in enumerate(topo)}
    names = {id(value): name for name, value in variables.items()}
    inputs = {id(value) for value in declared} | set(names)
    nodes = document["graph"]["nodes"]
    assert len(nodes) == len(topo)
    assert document["graph"]["root"] == len(topo) - 1
    assert document["value"] == result.data
    for node, reference in zip(nodes, topo, strict=True):
        where = f"node {node['id']} of {text!r}"
        assert node["children"] == [position[id(child)] for child in reference._prev], where
        assert node["op"] == op_name(reference), where
        assert node["exponent"] == exponent(reference), where
        assert node["value"] == float(reference.data), where
        assert node["grad"] == pytest.approx(reference.grad, rel=1e-9, abs=1e-300), where
        assert node["local_grads"] == pytest.approx(local_grads(reference), rel=1e-9), where
        if id(reference) in inputs:
            assert node["kind"] == "variable", where
            if id(reference) in names:
                assert node["label"] == names[id(reference)], where
        elif not reference._prev:
            assert node["kind"] == "constant", where
    return result, declared


def test_micrograds_sanity_check() -> None:
    document = evaluator.evaluate(SANITY_CHECK, {}, "primitive")
    assert document["value"] == -20.0
    assert document["gradients"] == {"x": 46.0}
    assert len(document["graph"]["nodes"]) == 14
    assert document["output"] == "y"
    assert_micrograds_graph(document, SANITY_CHECK, {})
    named = {n["name"] for n in document["graph"]["nodes"] if n["name"]}
    assert named == {"x", "z", "q", "h", "y"}


def test_micrograds_more_ops() -> None:
    document = evaluator.evaluate(MORE_OPS, {}, "primitive")
    assert document["value"] == pytest.approx(24.70408163265306, rel=1e-15)
    assert document["gradients"]["a"] == pytest.approx(138.83381924198252, rel=1e-12)
    assert document["gradients"]["b"] == pytest.approx(645.5772594752186, rel=1e-12)
    assert len(document["graph"]["nodes"]) == 39
    assert document["output"] == "g"
    assert_micrograds_graph(document, MORE_OPS, {})


def test_the_lessons_shipping_cost() -> None:
    document = evaluator.evaluate(SHIPPING, {}, "primitive")
    assert document["value"] == 111.0
    assert document["gradients"] == {
        "base_fee": 1.0,
        "weight": 15.0,
        "distance": 2.0,
        "discount": 1.0,
    }
    assert len(document["graph"]["nodes"]) == 12
    assert document["output"] == "cost"
    assert document["warnings"] == []
    assert_micrograds_graph(document, SHIPPING, {}, "cost")
    named = [n["name"] for n in document["graph"]["nodes"] if n["name"]]
    assert sorted(named) == sorted(
        ["base_fee", "weight", "distance", "discount", "weight_fee", "distance_fee", "raw_cost",
         "cost"]
    )  # fmt: skip
    operator = evaluator.evaluate(SHIPPING, {})
    assert operator["value"] == 111.0
    by_name = {n["name"]: n for n in operator["graph"]["nodes"] if n["name"]}
    assert by_name["weight_fee"]["label"] == "*"
    assert by_name["weight"]["kind"] == "variable"


def test_bindings_override_declared_defaults() -> None:
    document = evaluator.evaluate(SHIPPING, {"weight": 1.0})
    assert document["value"] == 50.0 + 15.0 + 24.0 - 8.0
    structure = evaluator.structure(SHIPPING)
    assert structure["inputs"] == [
        {"name": "base_fee", "default": 50.0},
        {"name": "weight", "default": 3.0},
        {"name": "distance", "default": 12.0},
        {"name": "discount", "default": -8.0},
    ]
    assert structure["output"] == "cost"


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(programs())
def test_programs_build_micrograds_graph(case: ProgramCase) -> None:
    note(case.text)
    try:
        document = evaluator.evaluate(case.text, case.bindings, "primitive", case.output)
    except DomainError:
        assume(False)
        raise
    try:
        result, _, _ = run_program(case.text, case.bindings, case.output)
    except (ArithmeticError, ValueError, AttributeError, TypeError):
        # Python fails where the service folds: `(0.25).tanh()` is a method of `Value` only
        assume(False)
        raise
    assume(isinstance(result, Value))
    assert_micrograds_graph(document, case.text, case.bindings, case.output)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(programs(max_statements=5))
def test_program_gradients_match_sympy_and_finite_differences(case: ProgramCase) -> None:
    note(case.text)
    try:
        views = {
            g: evaluator.evaluate(case.text, case.bindings, g, case.output) for g in GRANULARITIES
        }
    except DomainError:
        assume(False)
        raise
    parsed = parse(case.text, output=case.output)
    assume(parsed.root.kind != "constant")
    document = views["operator"]
    nodes = document["graph"]["nodes"]
    size = max(rounding_scale(view) for view in views.values())
    kinks = [nodes[n["children"][0]]["value"] for n in nodes if n["op"] == "relu"]
    assume(not any(abs(v) < 1e-6 * size for v in kinks))
    values = {**{n: v for n, v in parsed.defaults.items()}, **case.bindings}
    at = {sympy.Symbol(n, real=True): sympy.Rational(v) for n, v in values.items()}
    for name in parsed.variables:
        exact = sympy.diff(parsed.sympy, sympy.Symbol(name, real=True)).subs(at).evalf(30)
        assume(exact.is_finite and exact.is_real)
        for granularity, view in views.items():
            grad = view["gradients"][name]
            assert abs(grad - float(exact)) <= 1e-9 * abs(float(exact)) + 1e-11 * size, (
                granularity,
                name,
            )
        # central differences, on the same program with that input moved
        h = 1e-6 * max(1.0, abs(values[name]))
        shifted = []
        for step in (h, -h):
            moved = {**values, name: values[name] + step}
            shifted.append(evaluator.evaluate(case.text, moved, "operator", case.output)["value"])
        estimate = (shifted[0] - shifted[1]) / (2 * h)
        grad = document["gradients"][name]
        assert abs(estimate - grad) <= 1e-4 * max(1.0, abs(grad)) + 1e-6 * size


def assert_spans_are_sources(text: str, output: str | None = None) -> None:
    """Every span lies in the text, start before end; a tree node's span is its source: the
    statement `name op= ...` that made it, an input's `Value(...)`, or an expression that parses
    on its own to the same variable, operation or constant."""
    parsed = parse(text, output=output)
    for node in parsed.postorder():
        start, end = node.span
        assert 0 <= start <= end <= len(text), (node, node.span)
        written = text[start:end]
        if re.match(r"[A-Za-z_]\w* [-+*/]= ", written):
            assert node.kind != "variable", (node, written)
        elif written.startswith("Value("):
            assert node.kind == "variable" and node.name in parsed.defaults, (node, written)
        else:
            alone = parse(written).root
            if node.kind == "variable":
                assert (alone.kind, alone.name) == ("variable", node.name), (node, written)
            elif node.kind == "constant":  # a name bound to a constant folds too: `t0 * 1`
                assert not alone.is_constant or alone.value == node.value, (node, written)
            else:
                assert alone.op == node.op, (node, written)
    for granularity in GRANULARITIES:
        document = evaluator.structure(text, granularity, output)
        for graph_node in document["graph"]["nodes"]:
            start, end = graph_node["span"]
            assert 0 <= start <= end <= len(text), (granularity, graph_node)


@pytest.mark.parametrize("text", [SANITY_CHECK, MORE_OPS, SHIPPING])
def test_micrograds_programs_have_spans_that_are_their_sources(text: str) -> None:
    # `2 * x` once had the span [20, 15]: its right operand's span, from `x = Value(-4.0)`
    assert_spans_are_sources(text)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(programs())
def test_every_span_of_a_program_is_its_source(case: ProgramCase) -> None:
    note(case.text)
    try:
        assert_spans_are_sources(case.text, case.output)
    except DomainError:
        assume(False)


def test_sharing_sums_gradients_over_every_use() -> None:
    program = "z = a * b\ny = z + z * z"
    document = evaluator.evaluate(program, {"a": 2, "b": 3}, "primitive")
    # y = z + z^2, dy/dz = 1 + 2z = 13; dy/da = 13 * b
    assert document["gradients"] == {"a": 39.0, "b": 26.0}
    assert len(document["graph"]["nodes"]) == 5  # a, b, z, z*z and +: z is built once
    inline = evaluator.evaluate("a * b + a * b * (a * b)", {"a": 2, "b": 3}, "primitive")
    assert len(inline["graph"]["nodes"]) == 7


def test_reassignment_rebinds_and_augmented_assignment_is_pythons() -> None:
    program = "c = a\nc += c + 1\nc = c * 2"
    document = evaluator.evaluate(program, {"a": 3}, "primitive")
    # c1 = a + (a + 1) = 7; c2 = 14; dc2/da = 4
    assert document["value"] == 14.0
    assert document["gradients"] == {"a": 4.0}


def test_names_on_nodes_in_both_granularities() -> None:
    program = "d = a - b\ne = d / a"
    for granularity in GRANULARITIES:
        nodes = evaluator.evaluate(program, {"a": 2, "b": 1}, granularity)["graph"]["nodes"]
        named = {n["name"]: n for n in nodes if n["name"] is not None}
        assert set(named) == {"d", "e"}
        assert named["e"]["id"] == len(nodes) - 1
        assert named["d"]["value"] == 1.0


def test_a_constant_name_stays_a_plain_number() -> None:
    program = "k = 2 * 3\ny = a * k + k"
    parsed = parse(program)
    assert parsed.variables == ("a",)
    nodes = evaluator.evaluate(program, {"a": 1}, "primitive")["graph"]["nodes"]
    # each use of k is its own leaf, as Python makes one for each use of a number
    assert [n["value"] for n in nodes if n["kind"] == "constant"] == [6.0, 6.0]
    assert all(n["name"] is None for n in nodes if n["kind"] == "constant")


def test_unused_statements_add_no_nodes_and_are_warned_about() -> None:
    program = "t = a * 100\nu = t + 1\ny = a * 2"
    document = evaluator.evaluate(program, {"a": 1})
    assert len(document["graph"]["nodes"]) == 3
    assert [(w["kind"], w["name"], w["line"]) for w in document["warnings"]] == [
        ("unused", "t", 1),
        ("unused", "u", 2),
    ]
    # where, as a problem's `position` says it
    assert document["warnings"][1]["position"] == {"start": 12, "end": 21, "line": 2, "column": 1}
    assert document["warnings"][1]["span"] == [12, 21]


@pytest.mark.parametrize(
    ("program", "unused"),
    [
        # A name bound to a number is used through the names that read it, though each use
        # of it is a leaf of its own.
        ("k = 2.0; k2 = k * 3; y = a * k2 + k2", []),
        ("k = 2.0; k += 1; y = a * k", []),
        ("p, q = 1, 2\nr = p * q * a", []),
        # A tuple assignment's values are read one by one: q is not read by the output.
        ("p, q = a, a * 2\nr = p * 2", ["q"]),
        # An alias of a value the output's graph holds names nothing the output could use, as
        # `xmg, ymg = x, y` at the end of micrograd's tests: not warned about.
        ("x = a * 2; y = x; z = x + 1", []),
        ("y = a * 2\ny.backward()\nymg, amg = y, a", []),
        ("x = a * 2; x = x * 3; z = a", ["x", "x"]),
    ],
)
def test_an_assignment_is_unused_when_the_output_reads_it_by_no_name(
    program: str, unused: list[str]
) -> None:
    document = evaluator.evaluate(program, {"a": 2})
    assert [w["name"] for w in document["warnings"]] == unused


@pytest.mark.parametrize("bindings", [{}, {"u": 5.0}])
def test_every_input_is_among_the_gradients_whether_the_output_uses_it_or_not(
    bindings: dict[str, float],
) -> None:
    # u is read only by a statement the output does not use, and v is declared and never read:
    # both are inputs of the program (as micrograd would give each leaf a grad of 0), in the
    # order the program first mentions them. u needs no value; bound, it must be a number.
    program = "w = Value(1.0)\nt = u * 2\nv = Value(4.0)\ny = w * 3"
    document = evaluator.evaluate(program, bindings)
    assert document["gradients"] == {"w": 3.0, "u": 0.0, "v": 0.0}
    inputs = evaluator.structure(program)["inputs"]
    assert inputs == [
        {"name": "w", "default": 1.0},
        {"name": "u", "default": None},
        {"name": "v", "default": 4.0},
    ]
    with pytest.raises(BindingError) as raised:
        evaluator.evaluate(program, {"u": math.inf})
    assert raised.value.kind == "invalid_binding"


def test_the_output_field_names_the_output() -> None:
    program = "t = a * 3\ny = t + 1"
    assert evaluator.evaluate(program, {"a": 1}, output="t")["value"] == 3.0
    assert evaluator.evaluate(program, {"a": 1}, output="y")["value"] == 4.0
    assert evaluator.evaluate(program, {"a": 1}, output="a")["value"] == 1.0
    # A plain expression's output may be one of its inputs: the graph is that input's alone.
    document = evaluator.evaluate("a * 2", {"a": 1}, output="a")
    assert (document["value"], document["output"], len(document["graph"]["nodes"])) == (1, "a", 1)
    assert evaluator.structure(program, output="t")["output"] == "t"
    with pytest.raises(BindingError) as raised:
        evaluator.evaluate(program, {"a": 1}, output="nope")
    assert raised.value.kind == "unknown_output"


def test_backward_names_the_output_before_the_last_statement() -> None:
    program = "y = a * 2\ny.backward()\nz = y * 10"
    document = evaluator.evaluate(program, {"a": 1})
    assert (document["value"], document["output"]) == (2.0, "y")
    assert [w["name"] for w in document["warnings"]] == ["z"]


def test_an_expression_written_as_a_statement_and_dropped_is_warned_about() -> None:
    # Python computes `a * 3` and drops it; the output, b, does not depend on it.
    program = "a = Value(2.0)\na * 3\nb = a + 1\nb * 0.5; a"
    document = evaluator.evaluate(program, output="b")
    assert document["value"] == 3.0
    assert [(w["kind"], w["name"], w["span"]) for w in document["warnings"]] == [
        ("unused", None, [15, 20]),
        ("unused", None, [31, 38]),
    ]
    assert "the expression on line 2 is computed and dropped" in document["warnings"][0]["message"]
    # The output's own statement, or one its graph holds, is not dropped.
    assert evaluator.evaluate("a = Value(2.0)\nb = a + 1\nb\nb * 3")["warnings"] == []
    assert evaluator.evaluate("y = a * 2\na\ny", {"a": 1})["warnings"] == []


def test_a_name_alone_on_the_last_line_names_the_output() -> None:
    document = evaluator.evaluate("y = a * 2\nz = y + 1\ny", {"a": 1})
    assert (document["value"], document["output"]) == (2.0, "y")
    assert [w["name"] for w in document["warnings"]] == ["z"]
    # An expression of names is not a name: the output has none.
    assert evaluator.evaluate("y = a * 2\n(y)", {"a": 1})["output"] is None
    assert evaluator.evaluate("a", {"a": 1})["output"] is None  # a plain expression
    # An input is named too, as `output` would name it, whether or not the program read it.
    document = evaluator.evaluate("y = a * 2\na", {"a": 3})
    assert (document["value"], document["output"]) == (3.0, "a")
    assert [w["name"] for w in document["warnings"]] == ["y"]
    assert evaluator.evaluate("y = 2\nb", {"b": 3})["output"] == "b"
    assert evaluator.evaluate("# the input\na", {"a": 3})["output"] is None  # one statement


@pytest.mark.parametrize(
    ("program", "after", "at"),
    [
        ("x = Value(1.0)\ny = x *\nz = 3", "*", 22),
        ("x = Value(1.0)\ny = x *  # then\r\nz = 3", "*", 22),
        ("x = Value(1.0)\ny = x +\n\n# next\nz += 3", "+", 22),
        ("x = Value(1.0)\ny =\nz = 3", "=", 18),
        ("y = a -\ny.backward()", "-", 7),
        ("y = a -\np, q = 1, 2", "-", 7),
    ],
)
def test_a_line_ending_in_an_operator_before_the_next_statement_is_refused_where_it_ends(
    program: str, after: str, at: int
) -> None:
    with pytest.raises(ExpressionError) as raised:
        parse(program)
    assert (raised.value.kind, raised.value.span) == ("unexpected_end", (at, at))
    assert f"the line ends after '{after}'" in str(raised.value.message)
    # Followed by more of the expression, the line goes on, as it always has.
    assert parse("y = a *\n  2\ny").output == "y"
    assert parse("p, q = a *\n  b, a").inputs == ("a", "b")


def test_statements_comments_and_blank_lines() -> None:
    program = "# a comment\n\n  \na = Value(2.0); b = a * a  # square\n\nb\n"
    document = evaluator.evaluate(program)
    assert document["value"] == 4.0
    assert document["gradients"] == {"a": 4.0}


@pytest.mark.parametrize(
    "expression",
    ["a\n+\nb", "(a +\n b)", "a +\n b", "exp\n(a) * b", "a\n  - b", "a * (\n  b\n)"],
)
def test_an_expression_over_several_lines_is_one_statement(expression: str) -> None:
    parsed = parse(expression)
    assert parsed.statements == 1
    assert set(parsed.variables) == {"a", "b"}


@pytest.mark.parametrize(
    ("program", "value", "output"),
    [
        # As in Python, a line that starts with a sign is a statement of its own: the output.
        ("x = Value(3.0)\ny = x * 2\n-x", -3.0, None),
        ("x = Value(3.0)\n\n# then\n+x", 3.0, None),
        ("x = Value(3.0)\n-x", -3.0, None),
        # indented as the statement before it (a body pasted from a function): still one
        ("    x = Value(3.0)\n    y = x * 2\n    -y", -6.0, None),
        # A line that starts with an operator no statement can start with goes on with the last.
        ("x = Value(3.0)\ny = x\n  * 2", 6.0, "y"),
    ],
)
def test_a_line_that_starts_with_a_sign_starts_a_statement_in_a_program(
    program: str, value: float, output: str | None
) -> None:
    document = evaluator.evaluate(program)
    assert (document["value"], document["output"]) == (value, output)


def test_bindings_may_be_omitted_only_when_every_input_is_declared() -> None:
    assert evaluator.evaluate("x = Value(2.0)\ny = x * z", {"z": 3})["value"] == 6.0
    with pytest.raises(BindingError) as raised:
        evaluator.evaluate("x = Value(2.0)\ny = x * z")
    assert raised.value.variables == ["z"]
    # a binding for a declared input the output does not use is allowed
    assert evaluator.evaluate("x = Value(2.0)\nw = Value(1.0)\ny = x * 2", {"w": 5})["value"] == 4.0


# -- refusals -------------------------------------------------------------------------------------

REFUSED = [
    ("from micrograd.engine import Value\nx = Value(1.0)", "unsupported_syntax", (0, 34),
     "remove the import line: Value is built in"),
    ("import torch", "unsupported_syntax", (0, 12), "remove the import line"),
    ("import \\\n  torch\ny = a", "unsupported_syntax", (0, 16), "remove the import line"),
    ("x = Value(1.0)\nprint(x)", "unknown_function", (15, 21),
     "the response already carries every value and gradient"),
    ("x = Value(1.0)\ny = x.data", "unsupported_syntax", (20, 25), "already carries"),
    ("x = Value(1.0)\ny = x * 2\nx.grad", "unsupported_syntax", (26, 31), "already carries"),
    ("def f(x):\n  return x", "unsupported_syntax", (0, 9), "without its def line"),
    ("for i in a: a", "unsupported_syntax", (0, 13), "loops"),
    ("if a > 0: a", "unsupported_syntax", (0, 11), "conditions"),
    ("f = lambda x: x", "unsupported_syntax", (4, 10), "lambda"),
    ("x = a.foo()", "unsupported_syntax", (5, 9), "methods are relu(), exp(), log() and tanh()"),
    ("x = a.relu(2)", "wrong_arity", (5, 13), "no arguments"),
    ("x = math.exp(2)", "unsupported_syntax", (4, 15), "write exp(...), which is built in"),
    ("x = np.tanh(a) * 2", "unsupported_syntax", (4, 14), "write tanh(...)"),
    ("x = sum(a)", "unknown_function", (4, 8), "not a supported function"),
    ("y = x * 2\nx = Value(1.0)", "used_before_assignment", (4, 5),
     "before the statement on line 2"),
    ("y += 1", "used_before_assignment", (0, 1), "no earlier statement assigns"),
    ("x = x + 1", "used_before_assignment", (4, 5), "before the statement on line 1"),
    ("exp = a * 2", "function_name", (0, 3), "exp is a function"),
    ("relu = Value(1.0)", "function_name", (0, 4), "relu is a function"),
    ("Value = 2", "function_name", (0, 5), "Value is a function"),
    ("x = Value(a)", "unsupported_syntax", (10, 11), "Value() takes a number"),
    ("a = Value(2.0, label='a')", "unsupported_syntax", (13, 24), "the name it is assigned to"),
    # micrograd's own parameters, as its Value(data, _children, _op) writes them
    ("a = Value(2.0, (), '')", "unsupported_syntax", (13, 21), "Value() takes only the number"),
    ("a = Value(2.0, 'a')", "unsupported_syntax", (13, 18), "Value() takes only the number"),
    ("a = Value(1.0)\nc = Value(3.0, (a, a), '*')", "unsupported_syntax", (28, 41),
     "Value() takes only the number"),
    ("a = Value(2.0,\n label='a')", "unsupported_syntax", (13, 25), "Value() takes only"),
    ("a = Value(2.0, label=')')", "unsupported_syntax", (13, 24), "Value() takes only"),
    ("a = Value(data=2.0)", "unsupported_syntax", (10, 15), "write the number alone"),
    ("e = a * b; e.label = 'e'", "unsupported_syntax", (12, 18), "the name a value is assigned"),
    ("y = a\n@decorator\ndef f(): pass", "unsupported_syntax", (6, 16), "decorators"),
    ("\ufeff@decorator\ndef f(): pass", "unsupported_syntax", (1, 11), "decorators"),
    ("y = (a\n@ b)", "unsupported_syntax", (7, 8), "matrix multiplication"),
    ("y = a \\\n@ b", "unsupported_syntax", (8, 9), "matrix multiplication"),
    ("x = Value(1.0) * 2", "unsupported_syntax", (4, 14), "on a line of its own"),
    ("y = a * Value(2.0)", "unsupported_syntax", (8, 14), "on a line of its own"),
    ("x = Value(1.0)\nx = Value(2.0)", "unsupported_syntax", (19, 29), "already declared"),
    ("y = a\n(a + b).backward()", "unsupported_syntax", (13, 24), "line of its own"),
    ("y = a\ny.backward()\ny.backward()", "unsupported_syntax", (19, 31), "already called"),
    ("a, b = 1", "unsupported_syntax", (0, 8), "2 names are assigned"),
    ("a, b = 1, 2, 3", "unsupported_syntax", (0, 12), "2 names are assigned"),
    ("a, = b,", "unsupported_syntax", (1, 2), "one name is assigned without a comma: a = value"),
    ("a = 1, 2", "unexpected_token", (5, 6), "no call here"),
    ("a, b = (1, 2)", "unsupported_syntax", (9, 10), "not a tuple"),
    ("(a, b) = 1, 2", "unsupported_syntax", (2, 3), "not a tuple"),
    ("a + b = 2", "unsupported_syntax", (6, 7), "only a name can be assigned"),
    ("x **= 2", "unsupported_syntax", (2, 5), "write x = x ** k"),
    ("x = (a +\ny = 2", "unbalanced_parenthesis", (4, 5), "never closed"),
    ("x = (a + b; y = 2", "unbalanced_parenthesis", (4, 5), "never closed"),
    ("y = exp(a;)", "unexpected_token", (9, 10), "a bracket is still open here"),
    # a keyword is refused where it stands, among tuple targets or after an operand
    ("a, if b = 1, 2", "unsupported_syntax", (3, 5), "'if'"),
    ("y = x.relu() if x else 1", "unsupported_syntax", (13, 15), "'if'"),
    ("a, b.c = 1, 2", "unsupported_syntax", (4, 5), "only names separated by commas"),
    ("a, *b = 1, 2", "unsupported_syntax", (3, 4), "only names separated by commas"),
    ("a, b += 1, 2", "unsupported_syntax", (5, 7), "+= assigns one name at a time"),
    ("a, exp(b=1)", "unexpected_token", (1, 2), "no call here"),  # a keyword argument's `=`
    ("True.backward()", "unsupported_syntax", (0, 4), "True is not a number here"),
    ("exp.backward()", "function_name", (0, 3), "exp is a function"),
    ("y = a\ny.backward(1)", "unsupported_syntax", (7, 19), "backward() takes no arguments"),
    ("y = a.relu(", "unbalanced_parenthesis", (10, 11), "never closed"),
    ("print a", "unsupported_syntax", (0, 5), "print is not needed"),
    ("y = a²", "invalid_character", (5, 6), "write a power as x ** 2"),
    ("y = a \\ # more\n+ 1", "unsupported_syntax", (6, 7), "nothing may follow a backslash"),
    ("y = a \\", "unsupported_syntax", (6, 7), "the text ends here"),
    # indented more than the line above and starting with a sign: Python's `unexpected indent`
    ("w = Value(0.5)\nloss = w * 2\n    - 1\nloss.backward()", "unsupported_syntax", (32, 33),
     "put it in brackets"),
    ("y = a; z = y\n  + 1", "unsupported_syntax", (15, 16), "starts a statement of its own"),
    # a bracket left open, then the next statement: never closed, as Python says
    ("y = (a * 2\nz = y + 1", "unbalanced_parenthesis", (4, 5), "never closed"),
    ("y = exp(a\nz = y", "unbalanced_parenthesis", (7, 8), "never closed"),
    ("y = a.tanh(\nz = y", "unbalanced_parenthesis", (10, 11), "never closed"),
    ("y = (a * 2\n  b)", "implicit_multiplication", (9, 14), "write 2*b"),
    ("x = Value(1.0)\nb = exp(\nout = b", "unbalanced_parenthesis", (22, 23), "never closed"),
    ("b = Value(\nout = x", "unbalanced_parenthesis", (9, 10), "never closed"),
    ("b = x.tanh(x\nout = b\nout.backward()", "unbalanced_parenthesis", (10, 11), "never closed"),
    ("y = exp(", "unexpected_end", (8, 8), "ends after 'exp('"),
    # a line ends a tuple's values after a comma, as in Python
    ("a, b = 1,\n2\nout = a * b", "unsupported_syntax", (0, 9), "2 names are assigned"),
    ("a, b = x,\n  - x", "unsupported_syntax", (0, 9), "2 names are assigned"),
    # a name bound to constants only is a plain number, as in Python: it has no methods
    ("k = 3\nk.backward()", "unsupported_syntax", (6, 18), "k is a plain number"),
    ("k = 2 * 3\ny = k.relu() * x", "unsupported_syntax", (14, 22), "write relu(k)"),
    ("y = (2).exp() * x", "unsupported_syntax", (4, 13), "write exp(2)"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "kind", "span", "says"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused(text: str, kind: str, span: tuple[int, int], says: str | None) -> None:
    with pytest.raises(ExpressionError) as raised:
        parse(text)
    error = raised.value
    assert (error.kind, error.span) == (kind, span), error.message
    if says is not None:
        assert says in error.message
    assert error.line == text.count("\n", 0, span[0]) + 1
    assert error.column == span[0] - (text.rfind("\n", 0, span[0]) + 1) + 1


@pytest.mark.parametrize(
    "program",
    [
        "p, q, = a, 2\nr = p * q",
        "p, q = a, 2,\nr = p * q",
        "p, q, = a * 2, a,  # trailing\nr = p * q",
        # inputs declared together, as Python allows
        "p, q = Value(1.5), Value(-2.0)\nr = p * q * a",
        "p, q = Value(1.5), a * 2\nr = p * q",
        # a trailing comma in a call, as Python allows
        "p = Value(1.5,)\nr = exp(p * a,) * p",
        "p, q = 1, 2\\\n  + a\nr = p * q",
    ],
)
def test_a_tuple_assignment_is_pythons(program: str) -> None:
    document = evaluator.evaluate(program, {"a": 3.0}, "primitive")
    assert_micrograds_graph(document, program, {"a": 3.0}, "r")


@pytest.mark.parametrize(
    "program",
    ["y = a * 2\ny.backward(\n)", "y = a * 2\ny.backward(  # the output\n)"],
)
def test_backward_may_be_written_over_lines(program: str) -> None:
    assert evaluator.evaluate(program, {"a": 3})["output"] == "y"


def test_backward_from_an_input_makes_the_input_the_output() -> None:
    # micrograd's `x.backward()` on a leaf: its grad is 1, as the request field `output` gives
    program = "y = x * 2\nx.backward()"
    document = evaluator.evaluate(program, {"x": 3})
    named = evaluator.evaluate("y = x * 2", {"x": 3}, output="x")
    assert document["graph"] == named["graph"]
    assert (document["value"], document["gradients"], document["output"]) == (3.0, {"x": 1.0}, "x")
    assert [w["name"] for w in document["warnings"]] == ["y"]


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        # Python's integers are exact: these fold as Python folds them, not as floats would.
        ("x * ((10**17 + 1) - 10**17)", 2.0),
        ("x * (3**40 - 3**40 + 1)", 2.0),
        ("x * (-(10**17) + 10**17 + 1)", 2.0),
        ("x ** (10**17 + 1 - 10**17)", 2.0),
        ("x * (-1)**(2**53 + 1)", -2.0),  # an exponent past a double's integers, kept exact
        # ... and `/` and non-integer numbers give floats, as in Python.
        ("x * ((10**17 + 1) / 10**17)", 2.0),
        ("x * ((1e17 + 1) - 1e17)", 0.0),
        ("x * ((10**17.0 + 1) - 10**17)", 0.0),  # a float exponent makes a float power
        ("x * (2**(4/2) * 10**17 + 1 - 4*10**17)", 0.0),
        # int / int is rounded once from the exact quotient, as Python's is
        ("x * (10508965330920255989 / 870)", 2 * 1.207927049531064e16),
        # leading zeros: the value is small, whatever the text's length
        ("x * (" + "0" * 4400 + "1)", 2.0),
    ],
)
def test_integer_constants_fold_exactly(expression: str, value: float) -> None:
    assert evaluator.evaluate(expression, {"x": 2}, "primitive")["value"] == value


def test_the_statement_limit() -> None:
    program = "\n".join(f"x{i} = a * {i}" for i in range(6))
    with pytest.raises(LimitExceeded) as raised:
        parse(program, Limits(max_statements=5))
    assert (raised.value.kind, raised.value.limit, raised.value.line) == (
        "too_many_statements",
        "max_statements",
        6,
    )
    parse(program, Limits(max_statements=6))


def test_the_node_limit_applies_to_the_whole_graph() -> None:
    # Each statement is small; together they pass the limit.
    program = "\n".join(["t = a"] + ["t = t * t + a"] * 20)
    with pytest.raises(LimitExceeded) as raised:
        parse(program, Limits(max_nodes=30))
    assert raised.value.kind == "too_many_nodes"
    assert parse(program).node_count == 41


def test_the_node_limit_counts_only_the_outputs_graph() -> None:
    # A statement the output does not depend on adds no nodes, however large it is.
    large = " + ".join(["a * b"] * 20)
    program = f"u = {large}\ny = a * b"
    parsed = parse(program, Limits(max_nodes=10))
    assert (parsed.node_count, [name for name, _ in parsed.unused]) == (3, ["u"])
    with pytest.raises(LimitExceeded) as raised:
        parse(program, Limits(max_nodes=10), output="u")
    # Pointed at where the output's graph passes the limit: the inputs and a product are 3 nodes,
    # each further term 2 more (its product and the sum), so the fifth term's sum makes 11.
    assert raised.value.span == (4, 4 + len(" + ".join(["a * b"] * 5)))


def test_the_node_limit_is_passed_where_the_program_read_from_the_top_passes_it() -> None:
    # The output reads b first, but a's statement comes first: the limit is passed at z * w.
    with pytest.raises(LimitExceeded) as raised:
        parse("a = x * y\nb = z * w\nout = b + a", Limits(max_nodes=5))
    assert (raised.value.span, raised.value.line) == ((14, 19), 2)


# -- the command line -----------------------------------------------------------------------------


def test_the_command_line_reads_a_program_from_a_file(tmp_path, capsys) -> None:
    import json

    from service.cli import main

    program = tmp_path / "shipping.py"
    program.write_text(SHIPPING)
    assert main(["eval", "-f", str(program), "weight=1", "--indent", "0"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["value"] == 81.0
    assert document["output"] == "cost"
    assert main(["eval", "-f", str(program), "--output", "raw_cost", "--granularity",
                 "primitive"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["value"] == 111.0


def test_the_command_line_reads_standard_input(monkeypatch, capsys) -> None:
    import io
    import json

    from service.cli import main

    def stdin(data: bytes) -> io.TextIOWrapper:
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")

    monkeypatch.setattr("sys.stdin", stdin(SANITY_CHECK.encode()))
    assert main(["eval", "-f", "-"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["value"], document["gradients"]) == (-20.0, {"x": 46.0})
    monkeypatch.setattr("sys.stdin", stdin(b"x = Value(1.0)\ny = x.data\n"))
    assert main(["eval", "-f", "-"]) == 2
    _, err = capsys.readouterr()
    assert "y = x.data" in err and "^^^^^" in err
    # A byte-order mark is not part of the program; bytes that are not UTF-8 are a usage error.
    monkeypatch.setattr("sys.stdin", stdin(b"\xef\xbb\xbfx = Value(1.0)\ny = x * 2\n"))
    assert main(["eval", "-f", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == 2.0
    monkeypatch.setattr("sys.stdin", stdin(b"x = Value(1.0)\ny = x * 2 \xff\n"))
    with pytest.raises(SystemExit) as raised:
        main(["eval", "-f", "-"])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "standard input is not UTF-8 text: byte 0xff at byte 25" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("inside", ["\n", "  # nothing to pass\n", "\n\n  "])
def test_a_methods_empty_brackets_may_hold_newlines_and_comments(inside: str) -> None:
    program = f"x = Value(2.0)\ny = x.exp({inside})"
    assert evaluator.evaluate(program)["value"] == evaluator.evaluate("exp(2.0)")["value"]


@pytest.mark.parametrize("indent", ["    ", "\t"])
def test_an_indented_body_pasted_from_a_function(indent: str) -> None:
    import textwrap

    document = evaluator.evaluate(textwrap.indent(SANITY_CHECK, indent), {}, "primitive")
    assert (document["value"], len(document["graph"]["nodes"])) == (-20.0, 14)


# -- over HTTP ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    from service.app import create_app

    return create_app({"TESTING": True}).test_client()


def test_a_program_over_http(client) -> None:
    response = client.post("/v1/gradients", json={"expression": SHIPPING})
    assert response.status_code == 200, response.get_data()
    document = response.get_json()
    assert (document["value"], document["output"]) == (111.0, "cost")
    assert document["gradients"]["weight"] == 15.0
    response = client.post(
        "/v1/gradients",
        json={"expression": SHIPPING, "bindings": {"weight": 1}, "output": "raw_cost",
              "granularity": "primitive"},
    )  # fmt: skip
    assert response.get_json()["value"] == 81.0
    graph = client.post("/v1/graph", json={"expression": SHIPPING}).get_json()
    assert graph["inputs"][1] == {"name": "weight", "default": 3.0}
    assert {n["name"] for n in graph["graph"]["nodes"]} >= {"cost", "raw_cost", "weight_fee"}


def test_a_program_refusal_over_http_gives_line_and_column(client) -> None:
    response = client.post("/v1/graph", json={"expression": "x = Value(1.0)\ny = x.grad"})
    assert response.status_code == 422
    problem = response.get_json()
    assert problem["type"].endswith("/unsupported-syntax")
    assert problem["position"] == {"start": 20, "end": 25, "line": 2, "column": 6}
    response = client.post("/v1/gradients", json={"expression": "y = a", "output": "z"})
    assert response.get_json()["type"].endswith("/unknown-output")


@pytest.mark.parametrize(
    ("language", "says"),
    [
        ("en", "u is assigned on line 1, but the output does not depend on it"),
        ("ru", "u присваивается в строке 1, но выход от него не зависит"),
        ("et", "u omistatakse real 1, aga väljund sellest ei sõltu"),
    ],
)
@pytest.mark.parametrize(
    "request_",
    [
        ("/v1/gradients", {}),
        ("/v1/gradients", {"fields": "value,warnings"}),
        ("/v1/gradients", {"granularity": "primitive"}),
        ("/v1/graph", {}),
        ("/v1/derivatives", {}),
        ("/v1/sweep", {"vary": [{"name": "a", "from": 0, "to": 1, "points": 2}]}),
    ],
    ids=["gradients", "selected", "primitive", "graph", "derivatives", "sweep"],
)
def test_warnings_speak_the_requests_language(
    client, request_: tuple[str, dict], language: str, says: str
) -> None:
    path, extra = request_
    body = {"expression": "a = Value(1.0); u = Value(2.0); b = a * 3", **extra}
    # Twice: the second answer comes from the cache, which keeps a document per language.
    for _ in range(2):
        response = client.post(path, json=body, headers={"Accept-Language": language})
        assert [w["message"] for w in response.get_json()["warnings"]] == [says]


@pytest.mark.parametrize(
    ("path", "body", "names"),
    [
        ("/v1/gradients", {"bindings": {"raw_cost": 3}}, ["raw_cost"]),
        ("/v1/gradients", {"bindings": {"raw_cost": 3, "cost": 1, "nope": 2}},
         ["cost", "raw_cost"]),
        ("/v1/sweep", {"points": [{"weight_fee": 1}]}, ["weight_fee"]),
    ],
)  # fmt: skip
def test_a_binding_of_an_assigned_name_says_the_program_computes_it(
    client, path: str, body: dict[str, Any], names: list[str]
) -> None:
    response = client.post(path, json={"expression": SHIPPING, **body})
    problem = response.get_json()
    assert response.status_code == 422
    assert problem["type"].endswith("/unknown-variables")
    assert problem["detail"].startswith(", ".join(names) + (" is" if len(names) == 1 else " are"))
    assert "assigned by the program" in problem["detail"]
    russian = client.post(path, json={"expression": SHIPPING, **body},
                          headers={"Accept-Language": "ru"}).get_json()  # fmt: skip
    assert "вычисляет сама программа" in russian["detail"]


def test_varying_an_assigned_name_says_the_program_computes_it(client) -> None:
    vary = [{"name": "raw_cost", "from": 0, "to": 1, "points": 3}]
    response = client.post("/v1/sweep", json={"expression": SHIPPING, "vary": vary})
    problem = response.get_json()
    assert problem["type"].endswith("/unknown-variables")
    assert problem["detail"] == (
        "vary names raw_cost, which the program computes; vary its inputs "
        "(base_fee, weight, distance, discount)"
    )


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_backslash_that_ends_a_line_continues_it(newline: str) -> None:
    program = f"a = Value(2.0)\nb = a * \\{newline}    3 + \\{newline}a"
    document = evaluator.evaluate(program, {}, "primitive")
    assert (document["value"], document["output"]) == (8.0, "b")
    assert document["graph"]["nodes"][-1]["span"] == [19, len(program)]
    with pytest.raises(ExpressionError, match="backslashes"):
        evaluator.evaluate("a = Value(2.0)\nb = a \\ 3")


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_every_line_end_python_reads_ends_a_statement(end: str) -> None:
    program = end.join(["a = Value(1.0)", "u = Value(2.0)  # not used", "", "b = a * 2"])
    document = evaluator.evaluate(program)
    assert (document["value"], document["output"]) == (2.0, "b")
    assert [(w["name"], w["line"], w["column"]) for w in document["warnings"]] == [("u", 2, 1)]
    with pytest.raises(ExpressionError) as refused:
        evaluator.evaluate(program + end + "c = b.data")
    assert (refused.value.line, refused.value.column) == (5, 6)
