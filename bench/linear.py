"""Linear time: adversarial shapes at the limits, each at size n and 2n, every stage of a request.

For each shape the time of a whole request in process (parse, compile, expansions, spans, the
document and its JSON) is measured at n and at 2n, where 2n is close to the default limits, in
both granularities and for `/v1/graph`. Linear work doubles: the target is time(2n)/time(n) <= 2.3.
A program is also set beside the equivalent expression: it must cost no more per node.
"""

from __future__ import annotations

import io
import json
import tokenize
from collections.abc import Callable
from typing import Any

from bench.common import Report, interleaved, table
from service.evaluator import GRANULARITIES, Evaluator
from service.limits import DEFAULT_LIMITS
from service.parser import parse

Shape = Callable[[int], tuple[str, dict[str, float]]]
RATIO_TARGET = 2.3
SECONDS_TARGET = 1.5  # one request at the default limits, in its worst shape


def _divisions(n: int) -> tuple[str, dict[str, float]]:
    # The shape that was quadratic: each quotient's operand text is the whole chain before it.
    ones = " + ".join(["1"] * 200)
    return f"({ones}) * a" + " / a" * n, {"a": 1.0}


def _differences(n: int) -> tuple[str, dict[str, float]]:
    return "a" + " - b" * n, {"a": 1.0, "b": 0.5}


def _negations(n: int) -> tuple[str, dict[str, float]]:
    return "-a" + " - -a" * n, {"a": 1.0}


def _nested(n: int) -> tuple[str, dict[str, float]]:
    # Derived operations nested as deep as the depth limit allows, block after block.
    depth = DEFAULT_LIMITS.max_depth - 10
    block = "(" * depth + "a" + " / b)" * depth
    return " - ".join([block] * n), {"a": 1.0, "b": 1.0}


def _variables(n: int) -> tuple[str, dict[str, float]]:
    names = [f"x{i}" for i in range(n)]
    return " + ".join(names), dict.fromkeys(names, 1.0)


def _identifiers(n: int) -> tuple[str, dict[str, float]]:
    width = DEFAULT_LIMITS.max_identifier_length
    names = [f"v{i:0>{width - 1}}" for i in range(n)]
    return " / ".join(names), dict.fromkeys(names, 1.0)


def _assignments(n: int) -> tuple[str, dict[str, float]]:
    lines = ["x0 = Value(0.5)"] + [
        f"x{i} = x{i - 1} * x{i - 1} - a  # step {i}" for i in range(1, n)
    ]
    return "\n".join(lines), {"a": 0.25}


def _augmented(n: int) -> tuple[str, dict[str, float]]:
    ops = ("+=", "-=", "*=", "/=")
    lines = ["y = Value(0.5)", "c = Value(1.25)"]
    lines += [f"y {ops[i % 4]} c + {i % 7 + 1}" for i in range(n - 2)]
    return "; ".join(lines), {}


def _methods(n: int) -> tuple[str, dict[str, float]]:
    methods = ("relu", "tanh", "exp", "tanh")
    lines = ["z = Value(0.1)"]
    # bounded: every step halves z before adding at most 1
    lines += [f"z = (z * 0.5 - 2).{methods[i % 4]}() + z.relu() * 0.5" for i in range(n - 2)]
    lines.append("z.backward()")
    return "\n".join(lines), {}


def _tuples(n: int) -> tuple[str, dict[str, float]]:
    lines = ["p = Value(1.0)", "q = Value(2.0)"]
    lines += ["p, q = q / 2, p + q" for _ in range(n - 2)]
    return "\n".join(lines), {}


EXPRESSIONS: dict[str, tuple[Shape, int]] = {
    # shape: (builder, n), with 2n close to the default limits
    "chain of /": (_divisions, 4_950),
    "chain of -": (_differences, 3_300),
    "chain of unary -": (_negations, 1_950),
    "deep derived nesting": (_nested, 25),
    "many variables": (_variables, 4_950),
    "long identifiers": (_identifiers, 700),
}
PROGRAMS: dict[str, tuple[Shape, int]] = {
    "program: assignments": (_assignments, 500),
    "program: augmented assignments": (_augmented, 500),
    "program: methods and backward()": (_methods, 500),
    "program: tuple assignments": (_tuples, 500),
}


def _requests(text: str, bindings: dict[str, float]) -> dict[str, Callable[[], Any]]:
    """A whole request in process for each granularity and for the graph, cache off."""
    evaluator = Evaluator(cache_size=0)

    def gradients(granularity: str) -> Callable[[], Any]:
        return lambda: json.dumps(evaluator.evaluate(text, bindings, granularity))

    variants = {g: gradients(g) for g in GRANULARITIES}
    variants["graph"] = lambda: json.dumps(evaluator.structure(text))
    return variants


def _measure(shape: Shape, n: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Fastest seconds of each request variant at n and at 2n.

    The fastest of interleaved samples, as `timeit` advises: on a shared machine other work only
    ever adds time, so the minimum is the estimate least disturbed by it.
    """
    small, large = shape(n), shape(2 * n)
    variants = {}
    for size, (text, bindings) in (("n", small), ("2n", large)):
        for name, run in _requests(text, bindings).items():
            variants[f"{name}@{size}"] = run
    samples = interleaved(variants, rounds=rounds)
    names = [name for name in variants if name.endswith("@n")]
    return {name[:-2]: (min(samples[name]), min(samples[name[:-2] + "@2n"])) for name in names}


def run(report: Report, quick: bool = False) -> None:
    # The fastest of more rounds is less disturbed by other work: with 7, a shape at about 2.1
    # read anywhere from 2.0 to 2.4 from run to run on a busy machine; with 15, 2.0 to 2.25.
    rounds = 3 if quick else 15
    scale = 4 if quick else 1
    rows = []
    worst_seconds = 0.0
    for shape_name, (shape, n) in {**EXPRESSIONS, **PROGRAMS}.items():
        n = max(2, n // scale)
        text, _ = shape(2 * n)
        times = _measure(shape, n, rounds)
        ratios = {name: large / small for name, (small, large) in times.items()}
        worst = max(ratios.values())
        largest = max(large for _, large in times.values())
        if not quick:
            worst_seconds = max(worst_seconds, largest)
        rows.append([shape_name, len(text), *(ratios[name] for name in times), largest])
        report.verdict(f"time(2n)/time(n), {shape_name}", worst, "<=", RATIO_TARGET)
    table(
        "Linear time: time(2n)/time(n) of a whole request in process, per granularity and for "
        "/v1/graph (cache off, fastest of interleaved runs), and the slowest request at 2n in "
        "seconds",
        ["shape", "characters at 2n", *GRANULARITIES, "graph", "seconds at 2n"],
        rows,
    )
    if not quick:
        report.verdict(
            "seconds for one request at the default limits, worst shape",
            worst_seconds,
            "<=",
            SECONDS_TARGET,
        )
    _program_beside_expression(report, rounds)


def _sum_program(steps: int, terms: int) -> str:
    """`a * a + b * a + ... + b * a + b` (`steps` products) as a program, `terms` products of it
    per statement: `t0 = a * a`, `t1 = t0 + b * a + b * a`, ..., and `+ b` last."""
    lines = ["t0 = a * a"]
    for first in range(1, steps, terms):
        products = min(terms, steps - first)
        lines.append(f"t{len(lines)} = t{len(lines) - 1}" + " + b * a" * products)
    lines.append(f"t{len(lines)} = t{len(lines) - 1} + b")
    return "\n".join(lines)


def _tokens(text: str) -> int:
    """The tokens of `text` as Python reads it (names, numbers, operators, line ends): the bench's
    own count of how much there is to read, independent of the parser it measures."""
    skipped = {tokenize.ENCODING, tokenize.ENDMARKER, tokenize.NL, tokenize.COMMENT}
    readline = io.StringIO(text).readline
    return sum(token.type not in skipped for token in tokenize.generate_tokens(readline))


def _program_beside_expression(report: Report, rounds: int) -> None:
    """The same graph written as a program and as one expression: cost per node side by side.

    The whole request, what follows the parse (compile, evaluate, document), the parse per token
    of text, and a request the cache answers (the same text again with other bindings, as a
    slider sends it): a program's statements and names are more text to read than the
    expression, and nothing else.
    """
    n = 2_000
    # `a * a + b * a + ... + b * a + b` parses as the sum ((a * a + b * a) + b * a) ... + b: a
    # program writes that sum a few terms per statement, so both build one graph, node for node.
    steps = n // 2 - 1
    expression = "a" + " * a + b" * steps
    programs = {terms: _sum_program(steps, terms) for terms in (1, 4)}
    bindings = {"a": 0.5, "b": 0.25}
    slid = {"a": 0.75, "b": -0.5}  # what the cache is asked for: the text again, other bindings
    limits = DEFAULT_LIMITS
    evaluator = Evaluator(limits, cache_size=0)
    cached = Evaluator(limits)

    def graph(text: str) -> list[tuple[str, list[int]]]:
        nodes = evaluator.structure(text, "primitive")["graph"]["nodes"]
        return [(node["op"], node["children"]) for node in nodes]

    expected = graph(expression)
    for program in programs.values():
        assert graph(program) == expected, "the program and the expression build different graphs"
    nodes = len(expected)
    texts = {"expression": expression} | {f"program/{t}": p for t, p in programs.items()}
    variants: dict[str, Callable[[], Any]] = {}
    for name, text in texts.items():
        variants[name] = lambda text=text: evaluator.evaluate(text, bindings, "primitive")
        variants[f"{name} parse"] = lambda text=text: parse(text, limits)
        cached.evaluate(text, bindings, "primitive")  # in the cache from here on
        variants[f"{name} cached"] = lambda text=text: cached.evaluate(text, slid, "primitive")
    # Three times the rounds: each is short, and the fastest of more is the least disturbed.
    samples = interleaved(variants, rounds=3 * rounds)
    fastest = {name: min(times) for name, times in samples.items()}
    whole = {name: fastest[name] / nodes * 1e6 for name in texts}
    after = {name: whole[name] - fastest[f"{name} parse"] / nodes * 1e6 for name in texts}
    tokens = {name: _tokens(text) for name, text in texts.items()}
    per_token = {name: fastest[f"{name} parse"] / tokens[name] for name in texts}
    hit = {name: fastest[f"{name} cached"] for name in texts}
    rows = [
        [terms, program.count("\n") + 1, len(program), tokens[name], whole["expression"],
         whole[name], whole[name] / whole["expression"], after[name] / after["expression"],
         per_token[name] / per_token["expression"], hit[name] / hit["expression"]]
        for terms, program in programs.items()
        for name in [f"program/{terms}"]
    ]  # fmt: skip
    table(
        f"A program beside the equivalent expression ({len(expression):,} characters, "
        f"{tokens['expression']:,} tokens, {nodes:,} nodes): microseconds per graph node of a "
        "whole request in process (primitive granularity, cache off, fastest of interleaved "
        "runs); the program's cost over the expression's for the whole request, after the "
        "parse, for the parse per token of text, and for a request the cache answers",
        ["products per statement", "statements", "characters", "tokens", "expression",
         "program", "program / expression", "after the parse", "parse per token",
         "cache hit"],
        rows,
    )  # fmt: skip
    report.verdict(
        "program / equivalent expression, cost per node (a product per statement)",
        whole["program/1"] / whole["expression"],
        "<=",
        1.1,
    )
    report.verdict(
        "program / equivalent expression, parse per token (a product per statement)",
        per_token["program/1"] / per_token["expression"],
        "<=",
        1.1,
    )
    report.verdict(
        "program / equivalent expression, cache hit per node (a product per statement)",
        hit["program/1"] / hit["expression"],
        "<=",
        1.1,
    )
