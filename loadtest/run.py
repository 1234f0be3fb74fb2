"""Load and fault test: gunicorn on loopback, concurrent clients, one worker killed mid-run.

    .venv/bin/python loadtest/run.py [--duration 35] [--clients 16] [--workers 2]

Starts gunicorn on a free 127.0.0.1 port, runs client threads for a fixed time sending a mix of
valid lessons, invalid requests, bodies just over the size limit and expressions near the node
limit, SIGKILLs one worker halfway, samples the server's memory every second and prints a report.
Exits non-zero on any unexpected error, a worker that is not replaced, or memory that keeps growing.

Worker recycling (`max_requests`) is turned off for the run: recycling would hide a leak by
restarting the workers, and the point is to see that memory stays flat without it.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = Path(sys.executable).parent / "gunicorn"

KILL_WINDOW = 2.0  # seconds after the kill in which a dropped connection is the killed worker's
WARMUP = 5.0  # seconds before the memory baseline: imports, first compilations, allocator pools
MEMORY_GROWTH = 1.5  # the last 10 s may use at most this times the memory of seconds 5-10
# While the costliest requests run, the small ones must stay quick: a lesson's 99th percentile and
# every health check (a load balancer's probe gives up after about 2 s) stay under this.
CHEAP_P99_MS = 2000.0
CONNECTION_ERRORS = (ConnectionError, http.client.HTTPException, TimeoutError, OSError)


# -- the requests ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request to send, with the status (and problem type) the service must answer."""

    name: str
    method: str
    path: str
    body: bytes | None
    status: int
    problem: str | None = None  # last segment of the expected problem `type`
    value: float | None = None  # the expression's value a 200 must carry
    # Other answers that are right too: a heavy request may be refused for its cost (503).
    alternatives: tuple[tuple[int, str], ...] = ()


# A request too costly to serve now is refused with a 503 of one of these problem types.
REFUSED_FOR_COST = ((503, "service-busy"), (503, "request-too-expensive"))


def worst_expression(max_length: int, max_nodes: int) -> str:
    """The costliest expression within the limits: a chain of divisions as long as the node limit
    allows (each `/ a` adds two nodes), padded to the length limit with a constant sum that folds
    to one leaf. Every derived node's operands span most of the text."""
    tail = " / a" * (max_nodes // 2 - 10)
    head = "1) * a"
    ones = max(0, (max_length - len(tail) - len(head) - 1) // 4)
    return "(" + "1 + " * ones + head + tail


def _json(document: Any) -> bytes:
    return json.dumps(document).encode()


class Mix:
    """The requests the clients send, with weights; numbers vary so caches keep meeting new keys."""

    def __init__(self, max_body: int, max_nodes: int, max_length: int = 100_000) -> None:
        # Built once: the large bodies would cost the clients more CPU than the server otherwise.
        # `a+a+...+a` builds one node per `+` (and one for `a`): close to the node limit. Each
        # request adds a different constant, as students' expressions differ: a cache holding
        # every large expression it saw shows up in the memory samples.
        self.large = "+".join(["a"] * max(2, int(max_nodes * 0.9)))
        # A body one byte over the limit, still well-formed JSON.
        padding = max_body - len(_json({"expression": "", "bindings": {}})) + 1
        self.oversize = _json({"expression": " " * padding, "bindings": {}})
        assert len(self.oversize) == max_body + 1
        # Room for the distinct constant each request appends (`+123456789`).
        self.worst = worst_expression(max_length - 11, max_nodes)
        self.weights = {
            "lesson": 30,
            "neuron": 20,
            "graph": 10,
            "operations": 5,
            "healthz": 5,
            "bad-syntax": 10,
            "domain-error": 8,
            "unknown-field": 5,
            "malformed-json": 3,
            "oversize": 2,
            "max-nodes": 1,
            "worst": 1,
            "worst-graph": 1,
        }

    def draw(self, rng: random.Random) -> Request:
        name = rng.choices(list(self.weights), weights=list(self.weights.values()))[0]
        return self.make(name, rng)

    def make(self, name: str, rng: random.Random) -> Request:
        x, w, b = (round(rng.uniform(-3, 3), 6) for _ in range(3))
        neuron = f"tanh({w} * x + {b})"
        lesson = {"expression": "(a + b) * c", "bindings": {"a": x, "b": w, "c": b}}
        post = "POST"
        if name == "lesson":  # its answer is checked: no response is mixed up with another's
            return Request(name, post, "/v1/gradients", _json(lesson), 200, value=(x + w) * b)
        if name == "neuron":
            body = {"expression": neuron, "bindings": {"x": x}, "granularity": "primitive"}
            return Request(name, post, "/v1/gradients", _json(body), 200)
        if name == "graph":
            return Request(name, post, "/v1/graph", _json({"expression": neuron}), 200)
        if name == "operations":
            return Request(name, "GET", "/v1/operations", None, 200)
        if name == "healthz":
            return Request(name, "GET", "/healthz", None, 200)
        if name == "bad-syntax":
            body = {"expression": f"a + * {x}", "bindings": {"a": 1}}
            return Request(name, post, "/v1/gradients", _json(body), 422, "unexpected-token")
        if name == "domain-error":
            body = {"expression": "log(a)", "bindings": {"a": -abs(x)}}
            return Request(name, post, "/v1/gradients", _json(body), 422, "log-domain")
        if name == "unknown-field":
            body = {**lesson, "eval": "__import__('os')"}
            return Request(name, post, "/v1/gradients", _json(body), 422, "validation-error")
        if name == "malformed-json":
            body = b'{"expression": "a",'
            return Request(name, post, "/v1/gradients", body, 400, "malformed-json")
        if name == "oversize":
            return Request(name, post, "/v1/gradients", self.oversize, 413, "body-too-large")
        costly = REFUSED_FOR_COST
        if name == "worst":
            body = {"expression": f"{self.worst}+{rng.randrange(10**9)}", "bindings": {"a": 1.5}}
            return Request(name, post, "/v1/gradients", _json(body), 200, alternatives=costly)
        if name == "worst-graph":
            body = {"expression": f"{self.worst}+{rng.randrange(10**9)}"}
            return Request(name, post, "/v1/graph", _json(body), 200, alternatives=costly)
        body = {"expression": f"{self.large}+{rng.randrange(10**9)}", "bindings": {"a": x}}
        return Request(name, post, "/v1/gradients", _json(body), 200, alternatives=costly)


# -- the server -----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(
    port: int,
    workers: int,
    log: Path,
    extra: tuple[str, ...] = (),
    environment: dict[str, str] | None = None,
) -> subprocess.Popen:
    """gunicorn as deployed, on 127.0.0.1:`port`; its error log to `log`. `extra` gunicorn flags
    and `environment` variables change one setting or another for a test."""
    env = {**os.environ, **(environment or {}), "PORT": str(port), "AUTOGRAD_WORKERS": str(workers)}
    command = [
        str(GUNICORN),
        "--config",
        str(ROOT / "gunicorn.conf.py"),
        "--bind",
        f"127.0.0.1:{port}",  # loopback only, whatever the config file binds
        "--workers",
        str(workers),
        "--max-requests",
        "0",  # no recycling: see the module docstring
        "--access-logfile",
        os.devnull,
        *extra,
        "service.app:create_app()",
    ]
    with log.open("wb") as errors:
        return subprocess.Popen(  # noqa: S603 - a fixed command line, no shell
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors
        )


def wait_ready(server: subprocess.Popen, port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited with status {server.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return
        except CONNECTION_ERRORS:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"gunicorn did not answer /healthz within {timeout:.0f} s")


def wait_for_workers(server: subprocess.Popen, count: int, timeout: float = 30.0) -> set[int]:
    """The pids of the server's workers once all `count` have forked. The master answers
    /healthz as soon as its first worker does, while the others may still be forking."""
    deadline = time.monotonic() + timeout
    while True:
        pids = {p.pid for p in _workers(server.pid)}
        if len(pids) >= count:
            return pids
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"gunicorn has {len(pids)} of {count} workers after {timeout:.0f} s")
        time.sleep(0.05)


def stop_server(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        return
    children = _workers(server.pid)
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=5)
    for child in children:  # a worker the master could not reap
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


def _workers(master_pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(master_pid).children()
    except psutil.NoSuchProcess:
        return []


# -- the run --------------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    started: float  # seconds since the run began
    latency: float
    status: int | None  # None: the connection failed
    problem: str | None = None
    error: str | None = None  # the exception's type when the connection failed
    unexpected: str | None = None  # why this outcome counts against the run


@dataclass
class Sample:
    """The server's memory at one moment, in MiB."""

    t: float  # seconds since the run began
    rss: float  # resident set of the master and workers (shared pages counted once per process)
    uss: float  # pages no other process shares: what each process really adds
    workers: dict[int, float]  # pid: USS of each worker


@dataclass
class Run:
    port: int
    duration: float
    start: float = field(default_factory=time.monotonic)
    outcomes: list[Outcome] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    kill_at: float | None = None  # seconds since start when the worker was killed
    killed_pid: int | None = None
    replaced_after: float | None = None  # seconds from the kill to a new worker
    memory: list[Sample] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.start

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)


def client(run: Run, seed: int, mix: Mix) -> None:
    rng = random.Random(seed)  # noqa: S311 - a reproducible mix, not a secret
    connection = http.client.HTTPConnection("127.0.0.1", run.port, timeout=30)
    while run.now() < run.duration:
        request = mix.draw(rng)
        headers = {"Content-Type": "application/json"} if request.body is not None else {}
        started = run.now()
        try:
            connection.request(request.method, request.path, request.body, headers)
            response = connection.getresponse()
            payload = response.read()
        except CONNECTION_ERRORS as error:
            failed = run.now()
            kind = type(error).__name__
            outcome = Outcome(request.name, started, failed - started, None, error=kind)
            kill = run.kill_at
            if kill is None or not kill <= failed <= kill + KILL_WINDOW:
                outcome.unexpected = f"{type(error).__name__}: {error}"
            run.record(outcome)
            connection.close()  # and reconnect on the next request
            continue
        outcome = Outcome(request.name, started, run.now() - started, response.status)
        if response.status >= 400:
            try:
                outcome.problem = json.loads(payload).get("type", "").rsplit("/", 1)[-1]
            except (ValueError, AttributeError):
                outcome.problem = "(not problem+json)"
        if (response.status, outcome.problem) in request.alternatives:
            pass
        elif response.status != request.status:
            outcome.unexpected = f"status {response.status}, expected {request.status}"
        elif request.problem and outcome.problem != request.problem:
            outcome.unexpected = f"problem {outcome.problem}, expected {request.problem}"
        elif request.value is not None:
            value = json.loads(payload)["value"]
            if not math.isclose(value, request.value, rel_tol=1e-9, abs_tol=1e-12):
                outcome.unexpected = f"value {value}, expected {request.value}"
        run.record(outcome)
        if response.getheader("Connection", "").lower() == "close":
            connection.close()
    connection.close()


def warm_up(port: int, mix: Mix, workers: int) -> None:
    """Before the clock starts, the largest requests one at a time (so none is refused for want of
    a slot), a few per worker: each worker's allocator grows its pools to their size now, and the
    memory baseline (seconds 5-10) starts from there. Under load most large requests are refused
    as too costly, so the first one a worker serves could otherwise come at any time."""
    rng = random.Random(0)  # noqa: S311 - not a secret
    for name in ("max-nodes",) * (workers + 1) + ("worst", "worst-graph"):
        request = mix.make(name, rng)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            connection.request(
                request.method, request.path, request.body, {"Content-Type": "application/json"}
            )
            connection.getresponse().read()
        except CONNECTION_ERRORS:
            pass
        finally:
            connection.close()


def sample_memory(run: Run, master_pid: int) -> None:
    """Every second: RSS and USS (pages no other process shares) of the master and workers."""
    while run.now() < run.duration:
        sample = Sample(run.now(), 0.0, 0.0, {})
        master = psutil.Process(master_pid)
        for process in [master, *_workers(master_pid)]:
            try:
                info = process.memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            sample.rss += info.rss / 2**20
            sample.uss += info.uss / 2**20
            if process.pid != master_pid:
                sample.workers[process.pid] = info.uss / 2**20
        run.memory.append(sample)
        time.sleep(max(0.0, 1.0 - (run.now() % 1.0)))


def kill_a_worker(run: Run, master_pid: int, at: float, workers: int) -> None:
    time.sleep(max(0.0, at - run.now()))
    before = {p.pid for p in _workers(master_pid)}
    if not before:
        return
    victim = min(before)
    run.kill_at = run.now()
    run.killed_pid = victim
    os.kill(victim, signal.SIGKILL)
    while run.now() < run.duration:
        current = {p.pid for p in _workers(master_pid)}
        if victim not in current and len(current) >= workers and current - before:
            run.replaced_after = run.now() - run.kill_at
            return
        time.sleep(0.05)


# -- the report -----------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _sparkline(values: list[float]) -> str:
    bars = "▁▂▃▄▅▆▇█"
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(bars[int((v - low) / span * (len(bars) - 1))] for v in values)


def _growth(series: list[tuple[float, float]], end: float) -> tuple[float, float] | None:
    """Mean of seconds 5-10 and of the last 10 s of a (t, MiB) series, if it spans both."""
    if end < WARMUP + 15:  # no late window apart from the early one
        return None
    early = [m for t, m in series if WARMUP <= t < WARMUP + 5]
    late = [m for t, m in series if t >= end - 10]
    if not early or not late:
        return None
    return statistics.mean(early), statistics.mean(late)


def memory_verdict(samples: list[Sample]) -> list[tuple[str, float, float, bool]]:
    """Seconds 5-10 against the last 10 s, for the server and for each worker that saw both.

    Warm-up (imports, the first large request, allocator pools) is over after 5 s; from then on
    a bounded process levels off, while one that keeps what it served grows with every request.
    USS counts only a process's own pages, not the copy-on-write pages the workers share with the
    preloading master. A worker started mid-run (the killed one's replacement) is judged in the
    server's total only, where its fresh start can only lower the figure: hence each surviving
    worker is judged on its own as well.
    """
    if not samples:
        return []
    end = samples[-1].t
    verdicts = []
    series = {"server": [(s.t, s.uss) for s in samples]}
    for pid in sorted({pid for s in samples for pid in s.workers}):
        series[f"worker {pid}"] = [(s.t, s.workers[pid]) for s in samples if pid in s.workers]
    for name, points in series.items():
        means = _growth(points, end)
        if means is not None:
            early, late = means
            verdicts.append((name, early, late, late <= MEMORY_GROWTH * early))
    return verdicts


def report(run: Run, clients: int, workers: int) -> bool:
    outcomes = run.outcomes
    elapsed = max(run.duration, 1e-9)
    unexpected = [o for o in outcomes if o.unexpected]
    expected_drops = [o for o in outcomes if o.status is None and not o.unexpected]
    print(f"load test: {run.duration:.0f} s, {clients} clients, {workers} gunicorn workers")
    print(f"requests: {len(outcomes)}  ({len(outcomes) / elapsed:.0f}/s)")
    print("\nresponses by request kind, status and problem type:")
    by_kind = Counter(
        (o.name, o.status if o.status is not None else o.error, o.problem or "") for o in outcomes
    )
    for (name, status, problem), count in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {count:7d}  {name:15} {status!s:22} {problem}")
    latencies = [o.latency * 1000 for o in outcomes if o.status is not None]
    print(
        "\nlatency (ms): p50 {:.1f}  p90 {:.1f}  p99 {:.1f}  max {:.1f}".format(
            *(_percentile(latencies, q) for q in (0.5, 0.9, 0.99)), max(latencies, default=0)
        )
    )
    for name in ("lesson", "healthz", "max-nodes", "worst", "worst-graph", "oversize"):
        subset = [o.latency * 1000 for o in outcomes if o.name == name and o.status is not None]
        if subset:
            print(
                f"  {name:10} p50 {_percentile(subset, 0.5):.1f}  p99 "
                f"{_percentile(subset, 0.99):.1f}  max {max(subset):.1f}"
            )

    print("\nworker kill:")
    if run.kill_at is None:
        print("  no worker was killed")
    else:
        replaced = (
            f"replaced after {run.replaced_after:.2f} s"
            if run.replaced_after is not None
            else "NOT replaced"
        )
        print(f"  SIGKILL to pid {run.killed_pid} at t={run.kill_at:.1f} s; {replaced}")
        dropped = len(expected_drops)
        print(f"  dropped connections within {KILL_WINDOW:.0f} s of the kill: {dropped}")

    print("\nserver memory (master + workers, MiB), one sample per second:")
    samples = run.memory
    if samples:
        uss = [s.uss for s in samples]
        print(f"  USS {_sparkline(uss)}")
        for sample in samples[:: max(1, len(samples) // 8)]:
            workers = " ".join(f"{pid}:{m:.0f}" for pid, m in sorted(sample.workers.items()))
            print(
                f"  t={sample.t:5.1f} s  RSS {sample.rss:7.1f}  USS {sample.uss:7.1f}  "
                f"worker USS {workers}"
            )
        print(f"  USS first {uss[0]:.1f}  last {uss[-1]:.1f}  max {max(uss):.1f}")
    verdicts = memory_verdict(samples)
    print(f"  mean USS, seconds {WARMUP:.0f}-{WARMUP + 5:.0f} against the last 10 s:")
    for name, early, late, flat in verdicts:
        verdict = "flat" if flat else f"GROWING beyond {MEMORY_GROWTH}x"
        print(f"    {name:14} {early:7.1f} -> {late:7.1f}  {verdict}")
    if not verdicts:
        print(f"    the run is too short to judge: it must last longer than {WARMUP + 15:.0f} s")
    flat = bool(verdicts) and all(ok for *_, ok in verdicts)

    print(f"\nsmall requests among the costliest (p99 at most {CHEAP_P99_MS:.0f} ms):")
    cheap_ok = True
    for name in ("lesson", "healthz"):
        subset = [o.latency * 1000 for o in outcomes if o.name == name and o.status is not None]
        p99 = _percentile(subset, 0.99)
        fine = bool(subset) and p99 <= CHEAP_P99_MS
        cheap_ok = cheap_ok and fine
        print(f"  {name:10} n={len(subset)}  p99 {p99:.1f} ms  {'ok' if fine else 'TOO SLOW'}")
    failed_health = [o for o in outcomes if o.name == "healthz" and o.status != 200]
    print(f"  failed health checks: {len(failed_health)}")
    cheap_ok = cheap_ok and not failed_health

    print(f"\nunexpected errors: {len(unexpected)}")
    for reason, count in Counter(f"{o.name}: {o.unexpected}" for o in unexpected).most_common(10):
        print(f"  {count:5d}  {reason}")
    ok = (
        bool(outcomes)
        and not unexpected
        and cheap_ok
        and flat
        and run.kill_at is not None
        and run.replaced_after is not None
    )
    print(f"\nverdict: {'PASS' if ok else 'FAIL'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration", type=float, default=float(os.environ.get("LOAD_DURATION", 35))
    )
    parser.add_argument("--clients", type=int, default=int(os.environ.get("LOAD_CLIENTS", 16)))
    parser.add_argument("--workers", type=int, default=int(os.environ.get("LOAD_WORKERS", 2)))
    parser.add_argument("--kill-at", type=float, help="seconds into the run (default: halfway)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    max_body = int(os.environ.get("AUTOGRAD_MAX_BODY_BYTES", 1 << 20))
    max_nodes = int(os.environ.get("AUTOGRAD_MAX_NODES", 20_000))
    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="autograd-load-", suffix=".log")[1])
    server = start_server(port, args.workers, log)
    try:
        wait_ready(server, port)
        mix = Mix(max_body, max_nodes)
        warm_up(port, mix, args.workers)
        run = Run(port, args.duration)
        threads = [
            threading.Thread(target=client, args=(run, args.seed + i, mix))
            for i in range(args.clients)
        ]
        threads.append(threading.Thread(target=sample_memory, args=(run, server.pid)))
        kill_at = args.kill_at if args.kill_at is not None else args.duration / 2
        threads.append(
            threading.Thread(target=kill_a_worker, args=(run, server.pid, kill_at, args.workers))
        )
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ok = report(run, args.clients, args.workers)
        if server.poll() is not None:
            print(f"gunicorn exited during the run (status {server.returncode})")
            ok = False
    except RuntimeError as error:
        print(f"load test could not run: {error}", file=sys.stderr)
        print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
        ok = False
    finally:
        stop_server(server)
    log.unlink(missing_ok=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
