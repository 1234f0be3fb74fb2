"""The grammar as a table: what it accepts and how it reads it, what it refuses and where."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from reference_micrograd import Case, cases

from service.errors import (
    DOMAIN_KINDS,
    EXPRESSION_KINDS,
    LIMIT_KINDS,
    AutogradError,
    DomainError,
    ExpressionError,
    LimitExceeded,
)
from service.evaluator import evaluate
from service.limits import Limits
from service.parser import Node, parse


def number(x: float) -> str:
    return str(int(x)) if x.is_integer() else repr(x)


def written(node: Node) -> str:
    """The syntax tree written out: `neg(**2(a))` for `-a**2`."""
    if node.kind == "variable":
        return node.name
    if node.kind == "constant":
        return number(node.value)
    name = f"**{number(node.exponent)}" if node.op == "**" else node.op
    return f"{name}({', '.join(written(arg) for arg in node.args)})"


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("a", "a"),
        (" \ta\n", "a"),
        ("a\n+\nb\r\n", "+(a, b)"),
        ("((((a))))", "a"),
        # precedence and associativity, as in Python
        ("a + b * c", "+(a, *(b, c))"),
        ("(a + b) * c", "*(+(a, b), c)"),
        ("a - b - c", "-(-(a, b), c)"),
        ("a - b + c", "+(-(a, b), c)"),
        ("a / b / c", "/(/(a, b), c)"),
        ("a / b * c", "*(/(a, b), c)"),
        ("a - (b - c)", "-(a, -(b, c))"),
        # powers bind tighter than a sign on their left, and are right-associative
        ("-a**2", "neg(**2(a))"),
        ("-a^2", "neg(**2(a))"),
        ("(-a)**2", "**2(neg(a))"),
        ("a^2^3", "**8(a)"),
        ("a**2**3", "**8(a)"),
        ("(a^2)^3", "**3(**2(a))"),
        ("a ** -1", "**-1(a)"),
        ("a ^ -1", "**-1(a)"),
        ("a ** 3", "**3(a)"),
        ("a ** (1/2)", "**0.5(a)"),
        ("a ** -(1/2)", "**-0.5(a)"),
        ("a ** 1e-3", "**0.001(a)"),
        ("a ** 0", "**0(a)"),
        # signs
        ("- - a", "neg(neg(a))"),
        ("+a", "a"),
        ("+-+a", "neg(a)"),
        ("a+-b", "+(a, neg(b))"),
        ("a*-b", "*(a, neg(b))"),
        ("a - -2", "-(a, -2)"),
        ("-2 * a", "*(-2, a)"),
        # constants fold as Python folds them, left to right
        ("a * (1/2)", "*(a, 0.5)"),
        ("2*3*a", "*(6, a)"),
        ("a*2*3", "*(*(a, 2), 3)"),
        ("a*(2*3)", "*(a, 6)"),
        ("2 ** 10 * a", "*(1024, a)"),
        ("0.5 - 0.25 + a", "+(0.25, a)"),
        ("relu(-1) + a", "+(0, a)"),
        ("exp(1) * a", "*(2.718281828459045, a)"),
        ("log(1) + tanh(0) + a", "+(0, a)"),
        # number forms
        ("1e-3 * a", "*(0.001, a)"),
        (".5*a", "*(0.5, a)"),
        ("5.*a", "*(5, a)"),
        ("2E3*a", "*(2000, a)"),
        ("1.5e+2*a", "*(150, a)"),
        ("007 * a", "*(7, a)"),
        # calls
        ("exp(a)", "exp(a)"),
        ("log(a)", "log(a)"),
        ("relu(a)", "relu(a)"),
        ("tanh(a)", "tanh(a)"),
        ("exp (a)", "exp(a)"),
        ("exp(-a) * tanh(relu(log(a)))", "*(exp(neg(a)), tanh(relu(log(a))))"),
        # names: ASCII identifiers, sympy's special names among them
        ("E + I + S + N + pi + Symbol", "+(+(+(+(+(E, I), S), N), pi), Symbol)"),
        ("_x1 * X_2", "*(_x1, X_2)"),
        ("x" * 64, "x" * 64),
        ("a - a", "-(a, a)"),
    ],
)
def test_accepted(text: str, tree: str) -> None:
    assert written(parse(text).root) == tree


def test_variables_in_order_of_first_appearance() -> None:
    assert parse("b * a + exp(b) - c ** 2 / a").variables == ("b", "a", "c")
    assert parse("2 * 3").variables == ()


@pytest.mark.parametrize(
    ("text", "kind", "span"),
    [
        ("", "empty_expression", (0, 0)),
        ("   ", "empty_expression", (3, 3)),
        ("a +", "unexpected_end", (3, 3)),
        ("a**", "unexpected_end", (3, 3)),
        ("(", "unexpected_end", (1, 1)),
        ("(a + b", "unbalanced_parenthesis", (0, 1)),
        ("exp(a", "unbalanced_parenthesis", (3, 4)),
        ("a + b)", "unbalanced_parenthesis", (5, 6)),
        (")", "unbalanced_parenthesis", (0, 1)),
        ("()", "unexpected_token", (0, 2)),
        ("exp(-)", "unexpected_token", (5, 6)),  # not empty: a sign with no operand
        ("a +* b", "unexpected_token", (3, 4)),
        ("*a", "unexpected_token", (0, 1)),
        ("a,b", "unexpected_token", (1, 2)),
        ("1.2.3", "unexpected_token", (0, 5)),
        # a decimal comma, as Russian and Estonian write decimals: "write 0.5"
        ("a * 0,5", "unsupported_syntax", (4, 7)),
        ("exp(2,5)", "unsupported_syntax", (4, 7)),
        ("a * 1.5,5", "unexpected_token", (7, 8)),
        ("2a", "implicit_multiplication", (0, 2)),
        ("2 3", "implicit_multiplication", (0, 3)),
        ("a b", "implicit_multiplication", (0, 3)),
        ("(a)(b)", "implicit_multiplication", (2, 4)),
        ("sin(x)", "unknown_function", (0, 4)),
        ("Exp(a)", "unknown_function", (0, 4)),
        ("exp(a, b)", "wrong_arity", (0, 9)),
        ("exp()", "wrong_arity", (0, 5)),
        ("a ** b", "variable_exponent", (5, 6)),
        ("2 ** a", "variable_exponent", (5, 6)),
        ("a ^ b", "variable_exponent", (4, 5)),
        ("a ** -b", "variable_exponent", (5, 7)),
        ("a ** (b + 1)", "variable_exponent", (5, 12)),
        ("a ** 2 ** b", "variable_exponent", (10, 11)),
        ("a // b", "unsupported_syntax", (2, 4)),
        ("a % b", "unsupported_syntax", (2, 3)),
        ("a @ b", "unsupported_syntax", (2, 3)),
        ("0x10", "unsupported_syntax", (0, 4)),
        # Python that must never run: each is refused by the grammar before anything happens.
        ("__import__('os')", "unknown_function", (0, 11)),
        ("().__class__", "unexpected_token", (0, 2)),
        ("a.b", "unsupported_syntax", (1, 3)),
        ("lambda x: x", "unsupported_syntax", (0, 6)),
        # a keyword is never an input's name, even where nothing follows it
        ("a * True", "unsupported_syntax", (4, 8)),
        ("None + a", "unsupported_syntax", (0, 4)),
        ("a * not", "unsupported_syntax", (4, 7)),
        ("'a'", "unsupported_syntax", (0, 1)),
        ('"a"', "unsupported_syntax", (0, 1)),
        ("a[0]", "unsupported_syntax", (1, 2)),
        ("a < b", "unsupported_syntax", (2, 3)),
        ("a == b", "unsupported_syntax", (2, 4)),
        ("a + 1 = 2", "unsupported_syntax", (6, 7)),
        ("{a}", "unsupported_syntax", (0, 1)),
        ("print(a)", "unknown_function", (0, 6)),
        ("exp(a)(b)", "implicit_multiplication", (5, 7)),
        # look-alikes and invisible characters
        ("\u0430 + 1", "invalid_character", (0, 1)),  # Cyrillic a
        ("a + \u0663", "invalid_character", (4, 5)),  # Arabic-Indic three
        ("\uff12 * a", "invalid_character", (0, 1)),  # fullwidth two
        ("a \u2212 b", "invalid_character", (2, 3)),  # minus sign
        ("a\x00", "invalid_character", (1, 2)),
        ("a\u200b+b", "invalid_character", (1, 2)),  # zero-width space
        ("a\u00a0+ b", "invalid_character", (1, 2)),  # no-break space
        ("\u00e9", "invalid_character", (0, 1)),
        ("a + \ud800", "invalid_character", (4, 5)),  # a lone surrogate, from a JSON escape
        # numbers beyond the largest constant, written or folded
        ("9**9**9", "constant_too_large", (0, 7)),
        ("2**10000", "constant_too_large", (0, 8)),
        ("exp(a)**9**9**9", "constant_too_large", (8, 15)),
        ("1e400", "constant_too_large", (0, 5)),
        ("1" * 400, "constant_too_large", (0, 400)),
        ("1e300 * 10 * a", "constant_too_large", (0, 10)),
        ("x" * 65, "identifier_too_long", (0, 65)),
        ("(" * 5000 + "a" + ")" * 5000, "nesting_too_deep", (200, 201)),
        ("a+" * 50_000 + "a", "expression_too_long", (100_000, 100_001)),
        pytest.param("a" + "+a" * 20_000, "too_many_nodes", (0, 40_001), marks=pytest.mark.slow),
    ],
)
def test_rejected(text: str, kind: str, span: tuple[int, int]) -> None:
    with pytest.raises(ExpressionError) as raised:
        parse(text)
    error = raised.value
    assert (error.kind, error.span) == (kind, span), error.message
    assert kind in EXPRESSION_KINDS + LIMIT_KINDS
    assert isinstance(error, LimitExceeded) is (kind in LIMIT_KINDS)
    assert error.message
    assert error.as_dict()["span"] == list(span)


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("Max(0, a*b)", "relu(x)"),  # as /v1/derivatives' text writes relu
        ("max(0, a)", "relu(x)"),
        ("2 * Abs(a)", "(x**2)**0.5"),
        ("abs(a)", "(x**2)**0.5"),
        ("1.0*sign(a)", "x/(x**2)**0.5"),
        ("sqrt(a + 1)", "x**0.5"),
    ],
)
def test_a_function_written_otherwise_is_told_how_the_language_writes_it(
    text: str, written: str
) -> None:
    with pytest.raises(ExpressionError) as raised:
        parse(text)
    assert raised.value.kind == "unknown_function"
    assert f"is written {written} (the functions are exp, log, relu, tanh)" in raised.value.message


def test_messages_say_what_to_write() -> None:
    with pytest.raises(ExpressionError) as raised:
        parse("2a")
    assert "2*a" in raised.value.message
    with pytest.raises(ExpressionError) as raised:
        parse("y = x * False")
    assert raised.value.message == "False is not a number here: write 0"
    with pytest.raises(ExpressionError) as raised:
        parse("sin(x)")
    assert all(name in raised.value.message for name in ("exp", "log", "relu", "tanh"))
    with pytest.raises(ExpressionError) as raised:
        parse("x * 0,25")
    assert raised.value.message == "decimals are written with a point: 0.25"
    with pytest.raises(ExpressionError) as raised:
        parse("a + \udfff")
    assert raised.value.message.startswith("U+DFFF is half of a surrogate pair, not a character")


@pytest.mark.parametrize(
    ("text", "hint", "span"),
    [
        # a comma: a decimal, as Russian and Estonian write one, or thousands, as English does
        ("0,25", "decimals are written with a point: 0.25", (0, 4)),
        ("0,125", "decimals are written with a point: 0.125", (0, 5)),  # 0 groups nothing
        ("1,000", "without separators and with a decimal point: 1000 or 1.000", (0, 5)),
        ("x * 12,345,678", "numbers are written without separators: 12345678", (4, 14)),
        ("1,000.5", "numbers are written without separators: 1000.5", (0, 7)),
        # a space: thousands, as Russian and Estonian group them, not a product
        ("1 000", "numbers are written without separators: 1000", (0, 5)),
        ("x * 12 345.5 + 1", "numbers are written without separators: 12345.5", (4, 12)),
        ("1 000 000", "numbers are written without separators: 1000000", (0, 9)),
        ("2 2", "one number without the space, or an operator between them, as in 2*2", (0, 3)),
        ("1 000 00", "or an operator between them, as in 1*000", (0, 5)),
        ("0 000", "or an operator between them, as in 0*000", (0, 5)),
    ],
)  # fmt: skip
def test_a_separator_in_a_number_gets_the_hint_for_what_it_can_mean(
    text: str, hint: str, span: tuple[int, int]
) -> None:
    with pytest.raises(ExpressionError) as raised:
        parse(text)
    assert raised.value.message.endswith(hint)
    assert raised.value.span == span


@pytest.mark.parametrize(
    ("text", "written", "span"),
    [("x.relu() y", "x.relu()*y", (0, 10)), ("q = (a * b).exp() c", "(a * b).exp()*c", (4, 19))],
)
def test_a_method_call_beside_an_operand_is_named_whole(
    text: str, written: str, span: tuple[int, int]
) -> None:
    with pytest.raises(ExpressionError) as raised:
        parse(text)
    assert (raised.value.kind, raised.value.span) == ("implicit_multiplication", span)
    assert f"write {written} to multiply" in raised.value.message


@pytest.mark.parametrize(
    ("text", "limits", "kind", "span"),
    [
        ("a+b+c+d+e+f", Limits(max_expression_length=10), "expression_too_long", (10, 11)),
        ("((((a))))", Limits(max_depth=3), "nesting_too_deep", (3, 4)),
        ("- - - - a", Limits(max_depth=3), "nesting_too_deep", (6, 7)),
        ("exp(exp(exp(exp(a))))", Limits(max_depth=3), "nesting_too_deep", (12, 15)),
        ("a**2**2**2**2", Limits(max_depth=3), "nesting_too_deep", (10, 12)),
        ("a*b*c*d", Limits(max_nodes=5), "too_many_nodes", (0, 7)),
        ("abcd + 1", Limits(max_identifier_length=3), "identifier_too_long", (0, 4)),
        ("101 * a", Limits(max_constant_magnitude=100), "constant_too_large", (0, 3)),
        ("-101*a", Limits(max_constant_magnitude=100), "constant_too_large", (1, 4)),
        ("10 * 11 * a", Limits(max_constant_magnitude=100), "constant_too_large", (0, 7)),
    ],
)
def test_configured_limits(text: str, limits: Limits, kind: str, span: tuple[int, int]) -> None:
    with pytest.raises(LimitExceeded) as raised:
        parse(text, limits)
    assert (raised.value.kind, raised.value.span) == (kind, span)
    parse(text)  # within the default limits


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        ("a+b+c+d+e+f", Limits(max_expression_length=11)),
        ("(((a)))", Limits(max_depth=3)),
        ("a+b+c+d+e+f+g+h", Limits(max_depth=1)),  # a long flat sum does not nest
        ("a*b*c", Limits(max_nodes=5)),
        ("abc + 1", Limits(max_identifier_length=3)),
        ("100 * a - 100", Limits(max_constant_magnitude=100)),
    ],
)
def test_limits_are_inclusive(text: str, limits: Limits) -> None:
    parse(text, limits)


def test_constant_folding_fails_with_a_domain_error_and_no_node() -> None:
    with pytest.raises(DomainError) as raised:
        parse("a + log(0)")
    assert (raised.value.kind, raised.value.node, raised.value.span) == (
        "log_domain",
        None,
        (4, 10),
    )


# -- the primitive graph, as the parser counts it ------------------------------------------------


def primitive_nodes(text: str) -> list[dict]:
    bindings = dict.fromkeys(parse(text).variables, 1.5)
    return evaluate(text, bindings, "primitive")["graph"]["nodes"]


def test_a_leading_constant_product_folds_but_a_trailing_one_does_not() -> None:
    assert [n["value"] for n in primitive_nodes("2*3*a") if n["kind"] == "constant"] == [6.0]
    assert [n["value"] for n in primitive_nodes("a*2*3") if n["kind"] == "constant"] == [2.0, 3.0]


def test_sign_and_power_precedence_values() -> None:
    at = {"a": 3.0}
    assert evaluate("-a**2", at)["value"] == -9.0 == evaluate("-(a**2)", at)["value"]
    assert evaluate("a^2^3", at)["value"] == 3.0**8 == evaluate("a**8", at)["value"]


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(cases())
def test_node_count_is_the_primitive_graph_size(case: Case) -> None:
    note(repr(case))  # hypothesis shows the generated case only as `case=`
    try:  # a constant part may fold to a domain error (`2/(2-2)`): not this test's subject
        parsed = parse(case.text)
        document = evaluate(case.text, case.bindings, "primitive")
    except DomainError:
        assume(False)
        raise
    assert parsed.node_count == len(document["graph"]["nodes"])


# -- whatever the text, a typed refusal or a parse, and quickly -----------------------------------

ALPHABET = [
    *("a", "b", "x1", "_", "E", "exp", "log", "relu", "tanh", "sin", "__import__", "lambda"),
    *("0", "2", "0.5", ".5", "1.", "1e3", "1e-3", "1e400", "9" * 30),
    *("+", "-", "*", "/", "**", "^", "//", "(", ")", ",", " ", "\t", "\n"),
    *(".", "'", "[", "]", "=", "<", ";", ":", "%", "\x00", "\u200b", "\u0430", "\uff12"),
]


def parses_or_refuses(text: str) -> None:
    try:
        parse(text)
    except (ExpressionError, DomainError) as error:
        assert isinstance(error, AutogradError)
        assert error.kind in EXPRESSION_KINDS + LIMIT_KINDS + DOMAIN_KINDS
        assert error.span is not None
        assert 0 <= error.span[0] <= error.span[1] <= len(text)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=120))
def test_any_text_parses_or_is_refused(text: str) -> None:
    parses_or_refuses(text)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(ALPHABET), max_size=60))
def test_any_token_stream_parses_or_is_refused(tokens: list[str]) -> None:
    parses_or_refuses("".join(tokens))


# -- cases a mutation run found untested -------------------------------------------------------


@pytest.mark.parametrize("text", ["a ** 1", "a ** 2", "a ^ 1", "a ** 3"])
@pytest.mark.parametrize("granularity", ["operator", "primitive"])
def test_integer_powers_at_zero_succeed(text: str, granularity: str) -> None:
    document = evaluate(text, {"a": 0.0}, granularity)
    assert document["value"] == 0.0
    assert document["gradients"] == {"a": 1.0 if text.endswith("1") else 0.0}


def test_a_unary_plus_starts_the_span() -> None:
    root = parse("+a * b").root
    assert (root.op, root.span) == ("*", (0, 6))
    assert evaluate("+a * b", {"a": 2, "b": 3})["graph"]["nodes"][-1]["span"] == [0, 6]


def test_a_folded_power_exactly_at_the_constant_limit_is_accepted() -> None:
    root = parse("a * 10 ** 300").root
    assert root.args[1].value == 1e300
    assert evaluate("a * 10 ** 300", {"a": 1.0})["value"] == 1e300
    with pytest.raises(LimitExceeded):
        parse("a * 10 ** 301")


@pytest.mark.parametrize("text", ["exp\t(a)", "exp \t (a)", "exp\n(a)"])
def test_space_between_a_function_and_its_argument(text: str) -> None:
    assert written(parse(text).root) == "exp(a)"


@pytest.mark.parametrize(
    ("text", "span", "message"),
    [
        ("relu", (0, 4), "relu is a function: write relu(x)"),
        ("exp + 1", (0, 3), "exp is a function: write exp(x)"),
        ("log * a", (0, 3), "log is a function: write log(x)"),
        ("a * tanh", (4, 8), "tanh is a function: write tanh(x)"),
        ("exp x", (0, 5), "exp is a function: write exp(x)"),
        ("2 * log y", (4, 9), "log is a function: write log(y)"),
        ("Value + 1", (0, 5), "Value is a function: write Value(x)"),
    ],
)
def test_function_names_are_not_variables(text: str, span: tuple[int, int], message: str) -> None:
    with pytest.raises(ExpressionError) as raised:
        parse(text)
    assert (raised.value.kind, raised.value.span) == ("function_name", span)
    assert raised.value.message == message


@pytest.mark.parametrize(
    ("char", "ascii"),
    [
        ("\u00d7", "*"),
        ("\u00b7", "*"),
        ("\u22c5", "*"),
        ("\u00f7", "/"),
        ("\u2212", "-"),
        ("\u2013", "-"),
    ],
)
def test_operator_lookalikes_suggest_the_ascii_operator(char: str, ascii: str) -> None:
    with pytest.raises(ExpressionError) as raised:
        parse(f"a {char} b")
    assert (raised.value.kind, raised.value.span) == ("invalid_character", (2, 3))
    assert f"did you mean '{ascii}'?" in raised.value.message


def test_messages_are_translatable_templates() -> None:
    from service.i18n import Message

    with pytest.raises(ExpressionError) as raised:
        parse("exp + 1")
    message = raised.value.message
    assert isinstance(message, Message)
    assert message.template == "{name} is a function: write {name}(x)"
    assert message.params == {"name": "exp"}


def test_errors_carry_line_and_column() -> None:
    with pytest.raises(ExpressionError) as raised:
        parse("a = 1\nb = a +\n  * 2")
    error = raised.value
    assert (error.span, error.line, error.column) == ((16, 17), 3, 3)
    assert error.as_dict()["line"] == 3


def test_a_byte_order_mark_first_is_read_past() -> None:
    # An editor may save a file with one, and Python reads past it; positions still count it.
    parsed = parse("\ufeffx = Value(1.0)\ny = x * 2")
    assert (parsed.output, parsed.defaults) == ("y", {"x": 1.0})
    with pytest.raises(ExpressionError) as raised:
        parse("\ufeffa +")
    assert (raised.value.kind, raised.value.span) == ("unexpected_end", (4, 4))
    with pytest.raises(ExpressionError) as raised:
        parse("a\ufeff + b")  # anywhere else it hides in a name: refused
    assert (raised.value.kind, raised.value.span) == ("invalid_character", (1, 2))


@pytest.mark.parametrize(
    ("text", "quoted"),
    [("abcd + 1", "'abcd'"), ("abcd\nb = 2", "'abcd'"), ("x" * 40 + "+1", "'" + "x" * 16 + "'")],
)
def test_a_name_too_long_is_quoted_without_what_follows_it(text: str, quoted: str) -> None:
    with pytest.raises(LimitExceeded) as raised:
        parse(text, Limits(max_identifier_length=3))
    assert f"the name starting {quoted} is" in raised.value.message
