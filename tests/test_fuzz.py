"""Fuzzing: the parser and evaluator on random text and token streams, the API against its spec.

Every run is bounded: a few hundred examples by default, `FUZZ_EXAMPLES` examples per test when
that variable is set (`make fuzz` sets it to thousands). The API is checked against its spec by
the one schemathesis run below: in-process, or against a live server when `FUZZ_URL` is set
(`make fuzz` runs it so against gunicorn, through loadtest/fuzz.py).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from schemathesis.checks import CheckContext, not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from service.api.config import DEFAULTS
from service.app import create_app
from service.check import ANSWER_KINDS
from service.check import warm_up as warm_up_checking
from service.derivatives import SYMBOLIC_KINDS, Differentiator, SymbolicLimits
from service.errors import (
    BINDING_KINDS,
    DOMAIN_KINDS,
    EXPRESSION_KINDS,
    LIMIT_KINDS,
    AutogradError,
)
from service.evaluator import Evaluator
from service.formulas import warm_up as warm_up_formulas
from service.kinds import slug
from service.limits import DEFAULT_LIMITS, Limits
from service.operations import FUNCTIONS
from service.parser import parse

pytestmark = pytest.mark.slow  # thousands of examples
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))

fuzz_settings = settings(
    max_examples=EXAMPLES or 300,
    deadline=None,  # a slow example on a busy machine is no failure; a hang meets pytest-timeout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# The grammar's alphabet, and the things people paste from Python, sympy and maths.
NAMES = ["a", "b", "x", "y1", "_", "E", "pi", "Symbol", "e", "inf", "nan", *FUNCTIONS]
HOSTILE_NAMES = ["__import__", "__class__", "eval", "exec", "open", "lambda", "if", "not", "sin"]
NUMBERS = ["0", "1", "2", "0.5", ".5", "1.", "1e3", "1e-3", "2E+2", "1e300", "1e400", "9" * 40,
           "1e-320", "5e-324"]  # fmt: skip
OPERATORS = ["+", "-", "*", "/", "**", "^", "//"]
PUNCTUATION = ["(", ")", ",", " ", "\t", "\n"]
JUNK = [".", "'", '"', "[", "]", "{", "}", "=", ";", ":", "%", "@", "\\", "#", "!", "~", "$"]
# NUL, zero-width space, BOM, Cyrillic a, fullwidth e, Arabic-Indic 1, bold 1, minus sign, times,
# e acute, a lone surrogate, the last code point.
UNICODE = ["\x00", "\u200b", "\ufeff", "\u0430", "\uff45", "\u0661", "\U0001d7cf", "\u2212",
           "\u00d7", "\u00e9", "\ud800", "\U0010ffff"]  # fmt: skip

grammar_tokens = st.sampled_from(NAMES + NUMBERS + OPERATORS + PUNCTUATION)
any_tokens = st.sampled_from(
    NAMES + HOSTILE_NAMES + NUMBERS + OPERATORS + PUNCTUATION + JUNK + UNICODE
)

# Tiny limits, so that random streams reach every bound often.
SMALL = Limits(
    max_expression_length=120,
    max_depth=6,
    max_nodes=25,
    max_identifier_length=8,
    max_constant_magnitude=1e6,
    max_bindings=4,
)


KINDS = {*EXPRESSION_KINDS, *LIMIT_KINDS, *BINDING_KINDS, *DOMAIN_KINDS, *SYMBOLIC_KINDS}


def check_refusal(error: AutogradError) -> None:
    """A refusal of a kind the API has a problem type for, with a sentence to show."""
    assert error.kind in KINDS, error.kind
    assert error.message.strip()


def check_parse(text: str, limits: Limits = DEFAULT_LIMITS) -> None:
    """Parse, and evaluate what parses; only the service's own typed errors may come out."""
    note(f"text: {text!r}")
    try:
        parsed = parse(text, limits)
    except AutogradError as error:
        check_refusal(error)
        span = getattr(error, "span", None)
        if span is not None:
            assert 0 <= span[0] <= span[1] <= max(len(text), limits.max_expression_length)
    else:
        assert parsed.node_count <= limits.max_nodes
        evaluator = Evaluator(limits, cache_size=0)
        bindings = {name: 0.5 + i for i, name in enumerate(parsed.variables)}
        for granularity in ("primitive", "operator"):  # the operator view writes expansions
            try:
                document = evaluator.evaluate(text, bindings, granularity)
            except AutogradError as error:
                check_refusal(error)
            else:
                # The node count the parser checks against the limit bounds the graph built.
                assert len(document["graph"]["nodes"]) <= parsed.node_count
                assert all(math.isfinite(g) for g in document["gradients"].values())


@fuzz_settings
@given(st.text(max_size=200))
def test_random_text(text: str) -> None:
    check_parse(text)


@fuzz_settings
@given(st.text(alphabet=st.characters(codec="ascii"), max_size=200))
def test_random_ascii(text: str) -> None:
    check_parse(text)


@fuzz_settings
@given(st.lists(grammar_tokens, max_size=60))
def test_grammar_token_streams(tokens: list[str]) -> None:
    check_parse("".join(tokens))


@fuzz_settings
@given(st.lists(any_tokens, max_size=60))
def test_hostile_token_streams(tokens: list[str]) -> None:
    check_parse(" ".join(tokens))


@fuzz_settings
@given(st.lists(grammar_tokens, max_size=80))
def test_token_streams_under_small_limits(tokens: list[str]) -> None:
    check_parse("".join(tokens), SMALL)


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> str:
    """A well-formed expression of the language, so the fuzzing also reaches evaluation."""
    if depth > 4 or draw(st.booleans()):
        return draw(st.sampled_from(["a", "b", "c", "2", "0.5", "1e-3", "0", "-1", "1e300"]))
    shape = draw(st.sampled_from(["binary", "call", "neg", "power", "paren"]))
    inner = draw(expressions(depth + 1))
    if shape == "binary":
        op = draw(st.sampled_from(["+", "-", "*", "/"]))
        return f"{inner} {op} {draw(expressions(depth + 1))}"
    if shape == "call":
        return f"{draw(st.sampled_from(FUNCTIONS))}({inner})"
    if shape == "neg":
        return f"-{inner}"
    if shape == "power":
        exponent = draw(st.sampled_from(["2", "3", "-1", "0.5", "0", "1e3", "-2.5"]))
        return f"({inner}) ** {exponent}"
    return f"({inner})"


@fuzz_settings
@given(expressions())
def test_well_formed_expressions(text: str) -> None:
    check_parse(text)


@fuzz_settings
@given(expressions(), st.sampled_from([0.0, -0.0, 1e-320, -1.5, 1e308, -1e308, 710.0]))
def test_extreme_bindings(text: str, value: float) -> None:
    """Every variable at an extreme: overflow and domain edges are typed errors, never a crash."""
    note(f"text: {text!r}, every variable: {value!r}")
    try:
        parsed = parse(text)
        Evaluator(cache_size=0).evaluate(text, dict.fromkeys(parsed.variables, value))
    except AutogradError as error:
        check_refusal(error)


SYMBOLIC_BUDGET = 0.5  # seconds of symbolic work per call, so the fuzzing stays quick


@settings(
    max_examples=EXAMPLES or 100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(expressions(), st.sampled_from([0.0, -0.0, 0.5, -1.5, 1e-320, 1e308, 710.0]))
def test_derivatives_of_well_formed_expressions(text: str, value: float) -> None:
    """Three ways to every derivative, or a typed refusal; never a crash."""
    note(f"text: {text!r}, every variable: {value!r}")
    differentiator = Differentiator(
        Evaluator(cache_size=0), SymbolicLimits(max_nodes=25, seconds=SYMBOLIC_BUDGET)
    )
    try:
        parsed = parse(text)
        document = differentiator.differentiate(text, dict.fromkeys(parsed.variables, value))
    except AutogradError as error:
        check_refusal(error)
    else:
        assert [item["variable"] for item in document["derivatives"]] == list(parsed.variables)
        assert isinstance(document["agree"], bool)
        for item in document["derivatives"]:
            assert math.isfinite(item["reverse_mode"])
            numbers = [item["symbolic"]["value"], *item["numeric"].values()]
            assert all(x is None or math.isfinite(x) for x in numbers)


# -- the API against its spec ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "openapi.yaml"
API_EXAMPLES = EXAMPLES or 100  # per operation, valid and invalid requests together
LIVE_URL = os.environ.get("FUZZ_URL")  # a running server to send the requests to instead

# The checked-in spec; without FUZZ_URL the requests go to the app through its WSGI interface:
# no server, no sockets.
api = schemathesis.openapi.from_path(SPEC)
if not LIVE_URL:
    api.app = create_app(DEFAULTS)
    # As gunicorn's master does before forking: sympy's first import and simplification take
    # seconds, which would otherwise be charged to the first symbolic request's time budget.
    warm_up_formulas()
    warm_up_checking()
# Invalid data may also be refused as a body too large (413) before its content is read: a string
# past `maxLength`, JSON-escaped, can be larger than the body limit.
negative = api.config.checks.negative_data_rejection
negative.expected_statuses = [*negative.expected_statuses, "413"]

# What a schema cannot say: the expression's grammar and meaning, whether the bindings name
# exactly its variables, and whether answers name items of the expression. A request the spec
# allows may be refused for those reasons only.
CORE_KINDS = {
    slug(kind)
    for kind in (*EXPRESSION_KINDS, *LIMIT_KINDS, *BINDING_KINDS, *DOMAIN_KINDS, *ANSWER_KINDS)
}


@schemathesis.check
def valid_data_is_refused_by_the_core_only(
    ctx: CheckContext, response: Any, case: schemathesis.Case
) -> bool | None:
    """schemathesis's positive-data check, where a refusal by the core counts as accepted.

    Random text in `expression` is rarely an expression, and random `bindings` rarely name its
    variables (`unknown-variables`): the core refuses those with a problem saying where. A
    refusal of the request itself (`validation-error`, `malformed-json`, a 413 or a 415) means
    the spec allowed what the service does not.
    """
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return None
    if response.status_code < 400:
        return None
    kind = response.json().get("type", "").rsplit("/", 1)[-1]
    if response.status_code != 422 or kind not in CORE_KINDS:
        raise AssertionError(
            f"a request the spec allows was refused with {response.status_code} {kind}: "
            f"{response.text[:300]}"
        )
    return None


# No 5xx; every status, content type, header and body as the spec documents it; a request the
# spec allows is refused only by the core; a request the spec does not allow is refused, an
# undocumented method with a 405 and its Allow header.
API_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    valid_data_is_refused_by_the_core_only,
    negative_data_rejection,
    unsupported_method,
    allow_header_conformance,
]


@api.parametrize()
@settings(
    max_examples=API_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_api_conforms_to_its_spec(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=API_CHECKS, base_url=LIVE_URL)


# -- sweeps -------------------------------------------------------------------------------------

EDGES = [0.0, -0.0, 1e-320, -1.5, 1e308, -1e308, 710.0, 0.5]


@fuzz_settings
@given(expressions(), st.sampled_from(EDGES), st.sampled_from(EDGES), st.integers(1, 30))
def test_sweeps_over_extremes(text: str, start: float, stop: float, count: int) -> None:
    """A sweep over extreme ranges answers every point or names its domain error; only typed
    refusals of the whole request come out."""
    from service.sweep import Axis, sweep

    note(f"text: {text!r}, from {start!r} to {stop!r} over {count}")
    try:
        parsed = parse(text)
        if not parsed.variables:
            return
        first, *others = parsed.variables
        bindings = dict.fromkeys(others, 0.5)
        document = sweep(Evaluator(cache_size=0), text, bindings, [Axis(first, start, stop, count)])
    except AutogradError as error:
        check_refusal(error)
    else:
        failed = {e["index"] for e in document["errors"]}
        assert all(e["kind"] in DOMAIN_KINDS for e in document["errors"])
        for i, value in enumerate(document["value"].tolist()):
            assert math.isfinite(value) != (i in failed)


# -- answers to /v1/check -------------------------------------------------------------------

CHECK_EVALUATOR = Evaluator()
answer_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=60),
    st.lists(any_tokens, max_size=30).map("".join),
    st.lists(grammar_tokens, max_size=30).map("".join),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@fuzz_settings
@given(value=answer_values, gradient=answer_values, node=answer_values, derivative=answer_values)
def test_random_answers_get_feedback(value, gradient, node, derivative) -> None:
    """Whatever a learner types, every item gets a verdict and a sentence, never an error."""
    from service.check import CODES, check

    answers = {
        "value": value,
        "gradients": {"a": gradient},
        "nodes": {"1": node},
        "derivatives": {"b": derivative},
    }
    document = check(CHECK_EVALUATOR, "a * b + a", {"a": 2.0, "b": -3.0}, answers)
    assert 0 <= document["score"] <= 1
    for result in document["results"]:
        assert result["verdict"] in ("correct", "incorrect", "unanswered")
        assert result["feedback"]["code"] in CODES
        assert result["feedback"]["message"]
