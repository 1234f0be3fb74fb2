"""The request path in process: a request against the engine, the tape against micrograd, scaling.

Every figure is measured with the collector set up as in a gunicorn worker (gunicorn.conf.py's
fork hooks: the imports frozen, a first-generation threshold of 50,000), each compared pair
interleaved in one run:

- a whole `/v1/gradients` request through the Flask app (cache hit), the whole document and
  `fields=value,gradients`, in both granularities, against the engine alone on the same graph
  (the `Value` graph built from the syntax tree, and backward);
- the request path's engine (the primitive program's tape, run for the request's bindings)
  against the same graph as a straight-line micrograd program;
- both at 10,000 and 100,000 nodes (limits raised), for time(100,000) / time(10,000).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bench import reference
from bench.common import Program, Report, finite_expression, interleaved, median, ratio, table
from bench.request import GRADIENTS_PATH, _Wsgi, worker_gc
from service.engine import Value
from service.evaluator import GRANULARITIES
from service.evaluator import run as run_tree
from service.parser import ParsedExpression

SIZES = (10_000, 100_000)
# Limits and cache raised so that a 100,000-node expression is accepted and stays compiled.
RAISED = {
    "MAX_NODES": 250_000, "MAX_EXPRESSION_LENGTH": 3_000_000, "MAX_BODY_BYTES": 20_000_000,
    "MAX_BINDINGS": 20_000, "CACHE_NODES": 1_000_000,
}  # fmt: skip
SLIDER_FIELDS = "value,gradients"


def _engine(parsed: ParsedExpression, bindings: dict[str, float]) -> Callable[[], Any]:
    """The engine alone: the `Value` graph built from the syntax tree, then backward."""

    def run() -> Any:
        env = {name: Value(value) for name, value in bindings.items()}
        root = run_tree(parsed, env)[parsed.root]
        root.backward()
        return root

    return run


def _straight_line(tape: Any) -> Program:
    """The primitive graph as a straight-line micrograd program: leaves first, one line a node."""
    leaves = [i for i, op in enumerate(tape.ops) if not op]
    position = {node: k for k, node in enumerate(leaves)}
    values = {i: x for i, x in tape.constants.items()}
    lines = []
    for i, op in enumerate(tape.ops):
        if not op:
            continue
        position[i] = len(position)
        operands = [f"n[{position[c]}]" for c in tape.children[i]]
        if op in ("+", "*"):
            lines.append(f"a({operands[0]} {op} {operands[1]})")
        elif op == "**":
            lines.append(f"a({operands[0]} ** {tape.exponents[i]!r})")
        else:
            call = {"tanh": "T", "relu": "R", "exp": "E"}[op]
            lines.append(f"a({call}({operands[0]}))")
    if max(position, key=position.__getitem__) != tape.root:  # pragma: no cover
        raise AssertionError("the root is not the program's last node")
    return Program("request graph", [values.get(i, 0.0) for i in leaves], lines)


def _micrograd(program: Program, tape: Any, bindings: dict[str, float]) -> Callable[[], Any]:
    leaves = list(program.leaves)
    leaf_index = [i for i, op in enumerate(tape.ops) if not op]
    where = {i: k for k, i in enumerate(leaf_index)}
    for name, i in tape.slots.items():
        leaves[where[i]] = float(bindings[name])
    make, forward = reference.Value, program.forward
    tanh, relu, exp = make.tanh, make.relu, make.exp

    def run() -> Any:
        nodes = [make(x) for x in leaves]
        forward(nodes, tanh, relu, exp).backward()
        return nodes

    return run


def _body(text: str, bindings: dict[str, float], granularity: str, fields: str | None) -> bytes:
    document: dict[str, Any] = {
        "expression": text,
        "bindings": bindings,
        "granularity": granularity,
    }
    if fields:
        document["fields"] = fields
    return json.dumps(document).encode()


def measure(size: int, wsgi: _Wsgi) -> dict[str, float]:
    text, bindings, nodes = finite_expression(size, seed=size)
    evaluator = wsgi.app.extensions["autograd"]
    compiled = evaluator.compile(text, "primitive")
    tape = compiled.tape
    inputs = {name: float(value) for name, value in bindings.items()}
    runs: dict[str, Callable[[], Any]] = {
        "engine": _engine(compiled.parsed, bindings),
        "tape": lambda: tape.run(inputs),
        "micrograd": _micrograd(_straight_line(tape.tape), tape.tape, bindings),
    }
    for granularity in GRANULARITIES:
        for fields in (None, SLIDER_FIELDS):
            body = _body(text, bindings, granularity, fields)
            wsgi.post(GRADIENTS_PATH, body)  # compiled and cached before the clock runs
            name = f"request {granularity}" + (f" fields={fields}" if fields else "")
            runs[name] = lambda body=body: wsgi.post(GRADIENTS_PATH, body)
    check = runs["micrograd"]()[-1].data
    run = tape.run(inputs)
    if run is None or run[0][tape.root] != check:
        raise AssertionError(f"{size} nodes: the tape and micrograd disagree")
    rounds = 5 if size >= 100_000 else 9
    samples = interleaved(runs, rounds=rounds, budget=60 if size >= 100_000 else 30)
    result = {name: median(s) for name, s in samples.items()}
    result["nodes"] = nodes
    return result


def run(report: Report, quick: bool = False) -> None:
    sizes = SIZES[:1] if quick else SIZES
    measured = {}
    with worker_gc():
        from bench.apps import create_bench_app

        wsgi = _Wsgi()
        wsgi.app = create_bench_app(RAISED)
        for size in sizes:
            measured[size] = measure(size, wsgi)
    names = [name for name in measured[sizes[0]] if name != "nodes"]
    rows = []
    for size, result in measured.items():
        for name in names:
            rows.append([
                size, result["nodes"], name, result[name] * 1e3,
                result[name] / result["nodes"] * 1e6, ratio(result[name], result["engine"]),
            ])  # fmt: skip
    table(
        "Request path in process, a worker's GC settings (median ms of interleaved runs)",
        ["size", "nodes", "what", "ms", "µs per node", "/ engine"],
        rows,
    )
    ten = measured[SIZES[0]]
    for granularity in GRANULARITIES:
        report.verdict(f"10,000-node request in process / engine, {granularity}",
                       ratio(ten[f"request {granularity}"], ten["engine"]), "<=", 2.0)  # fmt: skip
    for granularity in GRANULARITIES:
        name = f"request {granularity} fields={SLIDER_FIELDS}"
        report.verdict(f"10,000-node request, fields={SLIDER_FIELDS} / engine, {granularity}",
                       ratio(ten[name], ten["engine"]), "<=", 1.4)  # fmt: skip
    report.verdict("engine on the request path (tape) / straight-line micrograd, 10,000 nodes",
                   ratio(ten["tape"], ten["micrograd"]), "<=", 1.3)  # fmt: skip
    big = measured.get(SIZES[1])
    for name, label in (("tape", "engine on the request path (tape)"),
                        ("request primitive", "request in process, primitive")):  # fmt: skip
        report.verdict(
            f"{label}: time(100,000) / time(10,000)",
            ratio(big[name], ten[name]) if big else None,
            "<=",
            15.0,
            "" if big else "100,000 nodes not run",
        )
