"""Capacity: lesson requests per core, memory per worker, and the replicas N learners need.

    .venv/bin/python -m bench capacity [--quick]        (or: make capacity)

The figures docs/DEPLOY.md sizes the Kubernetes pods and the HPA from. gunicorn runs as a pod
does (AUTOGRAD_WORKERS=2) pinned to one core, with the load generator on another core; the load is
slider moves on the lesson's neuron (the same expression, new bindings each time, as a learner
dragging a slider sends). Memory is read from /proc after that load (steady state) and after the
largest request the default limits admit, with the cache at its node bound (the worst a worker
can hold).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bench.common import Report, table
from bench.memory import MB, SIZE, _snapshot, server_memory
from bench.server import Load, PythonClient, Server, Wrk, find_wrk, request
from service.api.config import DEFAULTS
from service.api.examples import LESSON_BINDINGS, LESSON_EXPRESSION
from service.evaluator import SKELETONS

POD_WORKERS = 2  # per pod, as deploy/kubernetes/configmap.yaml sets AUTOGRAD_WORKERS
POD_CPU = 1.0  # cores a pod requests: the workers share one core, the spare takes a slow request
CONNECTIONS = 16
HPA_TARGET = 0.7  # the HPA's average CPU utilisation target (deploy/kubernetes/hpa.yaml)
# A learner dragging a slider: the sandbox sends one request per move, throttled to this rate,
# and this share of the learners in a lesson drags at any one moment.
SLIDER_RATE = 10.0  # requests per second while dragging
DRAGGING = 0.2
LEARNERS = (100, 1_000, 5_000, 20_000)
MIN_REPLICAS = 3  # the HPA's floor: one replica can be drained while two serve


def _lesson_body(seed: int) -> bytes:
    bindings = {name: value + seed * 1e-3 for name, value in LESSON_BINDINGS.items()}
    return json.dumps({"expression": LESSON_EXPRESSION, "bindings": bindings}).encode()


@contextmanager
def _pinned(cores: set[int]) -> Iterator[None]:
    """This process (and the load generator it starts) on `cores` for the block."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def lesson_throughput(loader: Wrk | PythonClient, seconds: float) -> tuple[Load, float, dict]:
    """Slider moves against a 2-worker gunicorn on one core: the load, CPU s/request, memory."""
    cores = sorted(os.sched_getaffinity(0))
    server_core, client_cores = {cores[0]}, set(cores[1:]) or {cores[0]}
    with Server({"AUTOGRAD_WORKERS": str(POD_WORKERS)}) as server:
        for process in (server.master(), *server.workers()):
            process.cpu_affinity(list(server_core))  # workers forked later inherit the master's
        status, answer = request(server.port, "POST", "/v1/gradients", _lesson_body(0))
        if status != 200:
            raise RuntimeError(f"the lesson failed: {status} {answer[:300]!r}")
        with _pinned(client_cores):
            loader.run(server.port, "/v1/gradients", _lesson_body(1), CONNECTIONS, 2.0)  # warm-up
            cpu = server.cpu_seconds()
            load = loader.run(server.port, "/v1/gradients", _lesson_body(2), CONNECTIONS, seconds)
            used = server.cpu_seconds() - cpu
        memory = _snapshot([server.master(), *server.workers()])
        master = memory.pop(server.master().pid)
    workers = list(memory.values())
    steady = {
        "master_pss": master["pss"],
        "master_rss": master["rss"],
        "worker_uss": max(w["uss"] for w in workers),
        "worker_pss": max(w["pss"] for w in workers),
    }
    return load, used / max(1, load.requests), steady


def _bytes_per_cached_node() -> float:
    """The most a node the cache counts can hold: a compiled program's bytes per graph node, with
    as many rendered documents as it keeps selections, each as large as the whole document's."""
    code = "import json, bench.memory as m; print(json.dumps(m._held()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    held = json.loads(out.stdout.strip().splitlines()[-1])
    return (held["compiled"] + SKELETONS * held["skeleton"]) / held["graph_nodes"]


def replicas(learners: int, per_pod: float) -> int:
    return max(MIN_REPLICAS, math.ceil(learners * DRAGGING * SLIDER_RATE / per_pod))


def run(report: Report, quick: bool = False, client: str = "auto") -> None:
    wrk = find_wrk(install=client == "auto") if client in ("auto", "wrk") else None
    loader: Wrk | PythonClient = Wrk(wrk) if wrk else PythonClient()
    seconds = 8.0 if quick else 20.0
    load, cpu_per_request, steady = lesson_throughput(loader, seconds)
    # What one whole core serves: the requests per CPU-second the server used. The pinned core's
    # own rate is shown too, but on a shared machine it also measures the neighbours' load.
    per_core = 1 / cpu_per_request
    busy = ", ".join(f"{n:.1f}" for n in os.getloadavg())
    table(
        f"Lesson requests (slider moves on `{LESSON_EXPRESSION}`): gunicorn with "
        f"{POD_WORKERS} workers pinned to one core, {CONNECTIONS} connections from {loader.name} "
        f"on another, {seconds:.0f} s (load average {busy})",
        ["requests per CPU-second", "requests/s on the pinned core", "p50 ms", "p99 ms", "errors"],
        [[per_core, load.rate, load.p50 * 1e3, load.p99 * 1e3, load.errors]],
    )

    rows = server_memory()  # one worker, a 10,000-node request: its peak
    idle_rss, peak_rss = rows[1][1], rows[3][4]
    per_node = _bytes_per_cached_node()
    cache_bound = DEFAULTS["CACHE_NODES"] * per_node / MB
    worst_worker = steady["worker_uss"] / MB + cache_bound + (peak_rss - idle_rss)
    request_mib = steady["master_pss"] / MB + POD_WORKERS * steady["worker_pss"] / MB
    limit_mib = steady["master_rss"] / MB + POD_WORKERS * worst_worker
    table(
        "Memory of a pod's gunicorn (MiB): after the lesson load, and the worst a worker can hold",
        ["what", "MiB"],
        [
            ["master, proportional share (PSS) after the load", steady["master_pss"] / MB],
            ["worker, unique (USS) after the load", steady["worker_uss"] / MB],
            ["worker, proportional share (PSS) after the load", steady["worker_pss"] / MB],
            [f"cache at its bound: {DEFAULTS['CACHE_NODES']:,} nodes x {per_node:,.0f} bytes "
             f"(compiled, and {SKELETONS} whole documents rendered)", cache_bound],
            [f"transient peak of a {SIZE:,}-node request (peak RSS - idle RSS)",
             peak_rss - idle_rss],
            ["worst worker: USS + full cache + one largest request", worst_worker],
            [f"pod steady state: master PSS + {POD_WORKERS} x worker PSS", request_mib],
            [f"pod worst case: master RSS + {POD_WORKERS} x worst worker", limit_mib],
        ],
    )  # fmt: skip

    per_pod = per_core * POD_CPU * HPA_TARGET
    table(
        f"Replicas for N concurrent learners: {DRAGGING:.0%} of them dragging a slider at "
        f"{SLIDER_RATE:g} requests/s, each pod ({POD_CPU:g} core) held at the HPA's "
        f"{HPA_TARGET:.0%} CPU target = {per_pod:,.0f} requests/s",
        ["learners", "requests/s", "replicas"],
        [[n, n * DRAGGING * SLIDER_RATE, replicas(n, per_pod)] for n in LEARNERS],
    )
    report.verdict("lesson requests per CPU-second (2 workers)", per_core, "report", 0)
    report.verdict("pod memory, steady (MiB)", request_mib, "report", 0)
    report.verdict("pod memory, worst case (MiB)", limit_mib, "report", 0)
