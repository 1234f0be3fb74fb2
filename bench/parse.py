"""Parse: expression text to syntax tree, `Value` graph and sympy form, beside sympy's own parser.

`sympy.parse_expr` runs the text through Python's tokenizer and `eval`, so it is unsafe on
untrusted input and is never used by the service; it is here only as a speed reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.common import (
    Report,
    TimeLimit,
    finite_expression,
    inner_for,
    interleaved,
    median,
    once,
    ratio,
    table,
)
from service.evaluator import Evaluator
from service.parser import parse

SIZES = (10, 100, 1_000, 10_000)
CALL_LIMIT = 2.0  # seconds one call may take; a slower variant is shown as n/a


def _variants(text: str) -> dict[str, Callable[[], Any]]:
    import sympy

    uncached = Evaluator(cache_size=0)
    return {
        "parse": lambda: parse(text),
        # What a cache miss costs a request: the tree, and the graph's shape traced once.
        "parse + graph": lambda: uncached.compile(text),
        "parse + sympy": lambda: parse(text).sympy,
        "sympy.parse_expr": lambda: sympy.parse_expr(text, evaluate=False),
    }


def run(report: Report, quick: bool = False) -> None:
    rows = []
    for size in SIZES:
        text, _, nodes = finite_expression(size, seed=size)
        variants = _variants(text)
        probes = {}
        for name, variant in list(variants.items()):
            try:
                with TimeLimit(CALL_LIMIT):
                    probes[name] = once(variant)
            except (TimeoutError, RecursionError):
                del variants[name]  # its column says n/a: too slow at this size
        samples = interleaved(
            variants, rounds=5, inner=inner_for(min(probes.values()), 0.05), budget=20
        )
        result = {name: median(s) for name, s in samples.items()}
        reference = result.get("sympy.parse_expr")
        rows.append([
            nodes, len(text),
            per_node(result["parse"], nodes),
            per_node(result["parse + graph"], nodes),
            per_node(result.get("parse + sympy"), nodes),
            per_node(reference, nodes),
            ratio(result["parse + graph"], reference),
            ratio(result.get("parse + sympy"), reference),
        ])  # fmt: skip
    table(
        "Parse: microseconds per graph node (median of interleaved runs); the last two columns "
        "are time / sympy.parse_expr(evaluate=False)",
        ["nodes", "characters", "parse", "parse + graph", "parse + sympy", "sympy.parse_expr",
         "graph / parse_expr", "sympy / parse_expr"],
        rows,
    )  # fmt: skip


def per_node(seconds: float | None, nodes: int) -> float | None:
    return None if seconds is None else seconds / nodes * 1e6
