"""Sweeps: a 1,000-point line over HTTP beside one /v1/gradients request, and the tape per point
beside the scalar engine's forward and backward; then where a sweep's time goes."""

from __future__ import annotations

import gc
import json
import os
from typing import Any

from bench.common import Report, finite_expression, interleaved, median, ratio, table
from bench.server import Server
from service.api.examples import LESSON_BINDINGS, LESSON_EXPRESSION
from service.devserver import HOST
from service.engine import Value
from service.evaluator import Evaluator
from service.evaluator import run as run_tree
from service.limits import Limits
from service.parser import parse
from service.sweep import Axis, sweep, tape_of, to_json

LINE_POINTS = 1_000
BIG_POINTS = 10_000
BIG_NODES = 1_000


def _lesson_bodies() -> dict[str, tuple[bytes, dict[str, str]]]:
    bindings = dict(LESSON_BINDINGS)
    one = json.dumps({"expression": LESSON_EXPRESSION, "bindings": bindings}).encode()
    line = {
        "expression": LESSON_EXPRESSION,
        "bindings": bindings,
        "vary": [{"name": "a", "from": -5, "to": 5, "points": LINE_POINTS}],
    }
    return {
        "gradients, 1 point": (one, {}),
        f"sweep, {LINE_POINTS:,} points": (json.dumps(line).encode(), {}),
        f"sweep, {LINE_POINTS:,} points, SVG plot": (
            json.dumps(line).encode(),
            {"Accept": "image/svg+xml"},
        ),
    }


def _post(port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path}: {response.status} {data[:300]!r}")
        return data
    finally:
        connection.close()


def over_http(report: Report, quick: bool) -> None:
    """One worker on loopback, one client: the lesson's single point against its 1,000-point
    line, request after request in alternation."""
    bodies = _lesson_bodies()
    server = Server(env={"AUTOGRAD_WORKERS": "1", "AUTOGRAD_PICTURE_RATE": "1000",
                         "AUTOGRAD_PICTURE_BURST": "1000"})  # fmt: skip
    if os.environ.get("BENCH_PORT"):  # a port of the caller's choosing, else any free one
        bound = f"{HOST}:{server.port}"
        server.port = int(os.environ["BENCH_PORT"])
        server.url = f"http://{HOST}:{server.port}"
        server.env["PORT"] = str(server.port)
        server.command = [f"{HOST}:{server.port}" if a == bound else a for a in server.command]
    with server:
        paths = {name: "/v1/gradients" if name.startswith("gradients") else "/v1/sweep"
                 for name in bodies}  # fmt: skip
        for name, (body, headers) in bodies.items():
            _post(server.port, paths[name], body, headers)  # warm: compile, first plot
        variants = {
            name: (lambda n=name: _post(server.port, paths[n], *bodies[n])) for name in bodies
        }
        samples = interleaved(variants, rounds=10 if quick else 30, inner=5, budget=60)
    rows = []
    single = median(samples["gradients, 1 point"])
    for name, times in samples.items():
        rows.append([name, median(times) * 1e3, median(times) / single])
    table(
        "Over HTTP: one gunicorn worker on loopback, one client (median of interleaved requests)",
        ["request (the lesson, (a + b) * c)", "ms per request", "/ gradients, 1 point"],
        rows,
    )
    line = median(samples[f"sweep, {LINE_POINTS:,} points"])
    report.verdict(f"{LINE_POINTS:,}-point lesson sweep / one /v1/gradients request, over HTTP",
                   ratio(line, single), "<=", 3.0)  # fmt: skip


def per_point(report: Report, quick: bool) -> None:
    """A 1,000-node expression: the sweep per point against the engine's forward + backward."""
    text, bindings, nodes = finite_expression(BIG_NODES, seed=BIG_NODES)
    evaluator = Evaluator(Limits(max_nodes=200_000, max_expression_length=2_000_000))
    name = next(iter(bindings))
    axis = Axis(name, bindings[name] - 0.5, bindings[name] + 0.5, BIG_POINTS)
    compiled = evaluator.compile(text, "primitive")
    tape = tape_of(compiled)
    parsed = parse(text, evaluator.limits)
    inputs: dict[str, Any] = {**bindings, name: axis.values()}

    def engine() -> Any:
        env = {n: Value(v) for n, v in bindings.items()}
        root = run_tree(parsed, env)[parsed.root]
        root.backward()
        return root

    document = sweep(evaluator, text, bindings, vary=[axis])
    variants = {
        "scalar engine, forward + backward, 1 point": engine,
        f"sweep, {BIG_POINTS:,} points": lambda: sweep(evaluator, text, bindings, vary=[axis]),
        f"tape alone, {BIG_POINTS:,} points": lambda: tape.run(inputs, BIG_POINTS),
        "the sweep's JSON": lambda: to_json(document),
    }
    gc.freeze()  # what the imports left is not traversed by the collector while timing
    try:
        samples = interleaved(variants, rounds=3 if quick else 7, budget=60)
    finally:
        gc.unfreeze()
    scalar = median(samples["scalar engine, forward + backward, 1 point"])
    rows = []
    for variant, times in samples.items():
        points = 1 if variant.startswith("scalar") else BIG_POINTS
        per = median(times) / points
        rows.append([variant, median(times) * 1e3, per * 1e6, scalar / per])
    table(
        f"Per point: a {nodes:,}-node expression ({tape.size:,} primitive nodes, "
        f"{len(bindings)} inputs; one varied over {BIG_POINTS:,} points)",
        ["variant", "ms per call", "µs per point", "scalar / variant, per point"],
        rows,
    )
    swept = median(samples[f"sweep, {BIG_POINTS:,} points"]) / BIG_POINTS
    report.verdict(f"scalar fwd + bwd / {BIG_POINTS:,}-point sweep, per point ({nodes:,} nodes)",
                   ratio(scalar, swept), ">=", 100.0)  # fmt: skip


def run(report: Report, quick: bool = False) -> None:
    per_point(report, quick)
    over_http(report, quick)
