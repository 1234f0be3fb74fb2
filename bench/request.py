"""Request path: `/v1/gradients` beside the echo floor on one gunicorn, and a request's stages."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import runpy
import statistics
from collections.abc import Callable, Iterator
from typing import Any

from bench.apps import ECHO_PATH, create_bench_app
from bench.common import Report, finite_expression, interleaved, median, once, ratio, table
from bench.server import ROOT, Load, PythonClient, Server, Wrk, find_wrk, request
from service.api.examples import LESSON_BINDINGS, LESSON_EXPRESSION
from service.engine import Value
from service.evaluator import run as run_tree
from service.parser import parse

GRADIENTS_PATH = "/v1/gradients"
CONNECTIONS = (1, 8, 32)
ROUNDS = 5  # echo and lesson runs alternate this many times at each connection count
SLIDER_SIZE = 1_000  # the expression the slider target is judged on


def _body(expression: str, bindings: dict[str, float]) -> bytes:
    return json.dumps({"expression": expression, "bindings": bindings}).encode()


def workloads() -> dict[str, tuple[str, bytes, int]]:
    """Name: (path, body, graph nodes) for each load the bench drives."""
    lesson = _body(LESSON_EXPRESSION, LESSON_BINDINGS)
    loads = {"echo": (ECHO_PATH, lesson, 0), "lesson": (GRADIENTS_PATH, lesson, 5)}
    for size, name in ((1_000, "1,000 nodes"), (10_000, "10,000 nodes")):
        text, bindings, nodes = finite_expression(size, seed=size)
        loads[name] = (GRADIENTS_PATH, _body(text, bindings), nodes)
    return loads


def run(report: Report, quick: bool = False, client: str = "auto") -> None:
    loads = workloads()
    wrk = find_wrk(install=client == "auto") if client in ("auto", "wrk") else None
    loader: Wrk | PythonClient = Wrk(wrk) if wrk else PythonClient()
    if loader.name != "wrk":
        print("\nwrk is not available: the Python client drives the load; past a few "
              "connections it measures itself as much as the server.", flush=True)  # fmt: skip
    seconds = 1.0 if quick else 2.0
    rows = []
    lesson_vs_echo = {}
    with Server() as server:
        for name, (path, body, _) in loads.items():
            status, answer = request(server.port, "POST", path, body)
            if status != 200:
                raise RuntimeError(f"{name}: {status} {answer[:300]!r}")
            # Every worker compiles the large expressions once before anything is timed.
            loader.run(server.port, path, body, 8, 1.0)
        for connections in CONNECTIONS:
            measured: dict[str, list[tuple[Load, float]]] = {name: [] for name in loads}
            for r in range(ROUNDS):
                pair = ["echo", "lesson"] if r % 2 == 0 else ["lesson", "echo"]
                for name in pair:
                    measured[name].append(_drive(server, loader, loads[name], connections, seconds))
            for name in ("1,000 nodes", "10,000 nodes"):
                big = 2 * seconds if name.startswith("10,000") else seconds
                measured[name].append(_drive(server, loader, loads[name], connections, big))
            # Echo and lesson ran side by side in each round: compare them round by round.
            per_round = [lesson.rate / echo.rate for (echo, _), (lesson, _) in
                         zip(measured["echo"], measured["lesson"], strict=True)]  # fmt: skip
            lesson_vs_echo[connections] = statistics.median(per_round)
            echo_rate = statistics.median(load.rate for load, _ in measured["echo"])
            for name, runs in measured.items():
                rate = statistics.median(load.rate for load, _ in runs)
                rows.append([
                    name, connections, rate,
                    statistics.median(load.p50 for load, _ in runs) * 1e3,
                    statistics.median(load.p99 for load, _ in runs) * 1e3,
                    statistics.median(cpu for _, cpu in runs) * 1e3,
                    rate / echo_rate,
                    sum(load.errors for load, _ in runs),
                ])  # fmt: skip
        ten_thousand = next(row for row in rows if row[0] == "10,000 nodes" and row[1] == 1)
    table(
        f"Request path: gunicorn -c gunicorn.conf.py on loopback, driven by {loader.name} "
        f"(medians of {ROUNDS} interleaved {seconds:.0f} s runs for echo and lesson)",
        ["request", "connections", "requests/s", "p50 ms", "p99 ms", "server CPU ms/request",
         "throughput / echo", "errors"],
        rows,
    )  # fmt: skip
    for connections, value in lesson_vs_echo.items():
        report.verdict(f"lesson /v1/gradients / echo throughput, {connections} connection"
                       f"{'s' if connections > 1 else ''}", value, ">=", 0.9)  # fmt: skip

    engine = _engine_seconds(loads["10,000 nodes"][1])
    end_to_end = ten_thousand[3] / 1e3
    print(f"\n10,000-node request: p50 end to end {end_to_end * 1e3:.1f} ms, server CPU "
          f"{ten_thousand[5]:.1f} ms; the engine's forward + backward on its graph "
          f"{engine * 1e3:.1f} ms (in process): server CPU / engine "
          f"{ten_thousand[5] / 1e3 / engine:.2f}.", flush=True)  # fmt: skip
    report.verdict("10,000-node request end to end (p50, 1 connection) / engine fwd + bwd",
                   ratio(end_to_end, engine), "<=", 3.0)  # fmt: skip
    # In process, the collector as a worker has it (after the app is made, as in the master).
    wsgi = _Wsgi()
    with worker_gc():
        stages(wsgi, loads)
    wsgi = _Wsgi()
    with worker_gc():
        slider(report, wsgi, loads, quick)


def _drive(
    server: Server, loader: Wrk | PythonClient, load: tuple[str, bytes, int], connections: int,
    seconds: float,
) -> tuple[Load, float]:  # fmt: skip
    path, body, _ = load
    cpu = server.cpu_seconds()
    result = loader.run(server.port, path, body, connections, seconds)
    used = server.cpu_seconds() - cpu
    return result, used / max(1, result.requests)


def _engine_seconds(body: bytes) -> float:
    """The engine alone on the request's graph: micrograd's graph built from the tree, backward."""
    document = json.loads(body)
    parsed = parse(document["expression"])
    bindings = document["bindings"]

    def run() -> Any:
        env = {name: Value(value) for name, value in bindings.items()}
        root = run_tree(parsed, env)[parsed.root]
        root.backward()
        return root

    gc.freeze()  # the engine's own cost, without traversing what the imports left
    try:
        return median(interleaved({"engine": run}, rounds=9, budget=10)["engine"])
    finally:
        gc.unfreeze()


# -- where a request's time goes --------------------------------------------------------------


@contextlib.contextmanager
def worker_gc() -> Iterator[None]:
    """The collector set up as in a gunicorn worker, by the configuration's fork hooks."""
    threshold = gc.get_threshold()
    settings = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    for hook in ("pre_fork", "post_fork"):
        if callable(settings.get(hook)):
            try:
                settings[hook](None, None)
            except AttributeError:  # a hook that needs a real arbiter or worker
                print(f"(gunicorn.conf.py's {hook} hook cannot run in process: skipped)")
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


class _Wsgi:
    """Calls the app as gunicorn would, without the network: the whole Flask stack in process."""

    def __init__(self) -> None:
        self.app = create_bench_app()

    def post(self, path: str, body: bytes) -> bytes:
        environ = {
            "REQUEST_METHOD": "POST", "PATH_INFO": path, "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body), "wsgi.errors": io.StringIO(),
            "CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": "application/json",
        }  # fmt: skip
        status = []
        answer = b"".join(self.app(environ, lambda s, h, e=None: status.append(s)))
        if not status[0].startswith("200"):
            raise RuntimeError(f"{path}: {status[0]} {answer[:300]!r}")
        return answer


def _stage_functions(wsgi: _Wsgi, body: bytes) -> dict[str, Callable[[], Any]]:
    """One callable per stage of a request, each doing just that stage on prepared inputs."""
    from service.api import EXTENSION, json_response
    from service.api.schemas import GradientsRequestSchema
    from service.evaluator import Compiled, _document

    app = wsgi.app
    evaluator = app.extensions[EXTENSION]
    schema = GradientsRequestSchema()
    data = app.json.loads(body)
    loaded = schema.load(data)
    expression, bindings, granularity = (
        loaded["expression"], loaded["bindings"], loaded["granularity"]
    )  # fmt: skip
    parsed = parse(expression, evaluator.limits)
    compiled = Compiled(parsed, granularity)
    env = evaluator.bind(parsed, bindings)
    root, _ = compiled.build(env)
    order = root.backward()
    document = _document(expression, compiled, order, env)

    def forward_backward() -> Any:
        root, _ = compiled.build(evaluator.bind(parsed, bindings))
        return root.backward()

    def json_out() -> Any:
        with app.app_context():
            return json_response(document)

    return {
        "JSON in": lambda: app.json.loads(body),
        "validation": lambda: schema.load(data),
        "parse (cache miss only)": lambda: parse(expression, evaluator.limits),
        "build graph shape (cache miss only)": lambda: Compiled(parsed, granularity),
        "forward + backward": forward_backward,
        "document": lambda: _document(expression, compiled, order, env),
        "JSON out": json_out,
        "whole request in process (cache hit)": lambda: wsgi.post(GRADIENTS_PATH, body),
        "echo in process (the Flask floor)": lambda: wsgi.post(ECHO_PATH, body),
    }


def stages(wsgi: _Wsgi, loads: dict[str, tuple[str, bytes, int]]) -> None:
    columns = {}
    for name in ("lesson", "1,000 nodes", "10,000 nodes"):
        body = loads[name][1]
        wsgi.post(GRADIENTS_PATH, body)
        try:
            functions = _stage_functions(wsgi, body)
        except (ImportError, AttributeError, TypeError, ValueError) as error:
            print(f"\nStage breakdown unavailable ({error!r}): the evaluator's internals changed.")
            return
        probe = min(once(f) for f in functions.values())
        inner = max(1, min(2000, round(0.01 / max(probe, 1e-7))))
        samples = interleaved(functions, rounds=5, inner=inner, budget=15)
        columns[name] = {stage: median(s) for stage, s in samples.items()}
    hit_stages = ("JSON in", "validation", "forward + backward", "document", "JSON out")
    for measured in columns.values():
        whole = measured["whole request in process (cache hit)"]
        # What no stage accounts for: Flask and flask-smorest, freeing the graph and document.
        measured["rest: framework, freeing"] = whole - sum(measured[s] for s in hit_stages)
    order = [*hit_stages, "rest: framework, freeing", "whole request in process (cache hit)",
             "parse (cache miss only)", "build graph shape (cache miss only)",
             "echo in process (the Flask floor)"]  # fmt: skip
    rows = []
    for stage in order:
        row: list[Any] = [stage]
        for measured in columns.values():
            seconds = measured[stage]
            row += [
                seconds * 1e6,
                f"{seconds / measured['whole request in process (cache hit)']:.0%}",
            ]
        rows.append(row)
    headers = ["stage"]
    for name in columns:
        headers += [f"{name} µs", "of request"]
    table(
        "Where a /v1/gradients request's time goes, in process with a worker's GC settings "
        "(median µs per call; the cache-miss rows are what a first request adds)",
        headers,
        rows,
    )


# -- the slider: the same expression again with new bindings -----------------------------------


def slider(
    report: Report, wsgi: _Wsgi, loads: dict[str, tuple[str, bytes, int]], quick: bool
) -> None:
    """First request for an expression (a cache miss) against the same one with new bindings."""
    from service.api import EXTENSION

    rows = []
    verdict = None
    evaluator = wsgi.app.extensions[EXTENSION]
    for name, (_, body, _) in loads.items():
        if name == "echo":
            continue
        document = json.loads(body)
        count = 20 if name == "lesson" else 3 if name.startswith("10,000") or quick else 6
        firsts, repeats = [], []
        misses = evaluator.cache_info()["misses"]
        for k in range(count):
            # Leading spaces make a text the cache has not seen, for the very same graph.
            expression = " " * (k + 1) + document["expression"]
            bindings = document["bindings"]
            first = _body(expression, bindings)
            firsts.append(once(lambda first=first: wsgi.post(GRADIENTS_PATH, first)))
            again = []
            for step in range(1, 6):  # the slider moves: every binding changes a little
                moved = {name: value + 0.01 * step for name, value in bindings.items()}
                body = _body(expression, moved)
                again.append(once(lambda body=body: wsgi.post(GRADIENTS_PATH, body)))
            repeats.append(median(again))
        if evaluator.cache_info()["misses"] - misses != count:
            print(f"\nslider, {name}: the first requests were not all cache misses")
        speedup = median(firsts) / median(repeats)
        if name == f"{SLIDER_SIZE:,} nodes":
            verdict = speedup
        rows.append([name, count, median(firsts) * 1e3, median(repeats) * 1e3, speedup])
    info = evaluator.cache_info()
    table(
        "Slider: the first request for an expression against the same expression with new "
        f"bindings, in process (cache: {info})",
        ["expression", "expressions", "first ms", "repeat ms", "first / repeat"],
        rows,
    )
    report.verdict(f"slider: first request / repeat with new bindings, {SLIDER_SIZE:,} nodes",
                   verdict, ">=", 2.0)  # fmt: skip
