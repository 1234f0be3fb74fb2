"""GET /metrics: requests, latencies, cache use and refusals in Prometheus' text format.

Under gunicorn every worker is a process of its own, so the metrics are kept in prometheus_client's
multiprocess mode: each worker writes its samples to files in `PROMETHEUS_MULTIPROC_DIR` (set by
gunicorn.conf.py) and a scrape, whichever worker answers it, adds up the files of all of them.
Without that variable (tests, a plain `flask run`) the process's own registry is served.

The route is for the operator's scraper on the service's own port: the nginx in front and the
Kubernetes Ingress do not route it (see docs/DEPLOY.md).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import orjson
from flask import Flask, Response, current_app, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from service.api import EXTENSION
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.kinds import TYPE_BASE

PATH = "/metrics"
PROBLEM_MIMETYPE = "application/problem+json"
# The problem a request that ran past its time budget is answered with.
BUDGET_PROBLEM = "request-too-expensive"
UNMATCHED = "unmatched"  # the endpoint label of a request no route matched (404): one series
# The method label: HTTP's own methods, and one series for any other token a client sends.
_METHODS = frozenset(
    ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT")
)
OTHER_METHOD = "other"

# Seconds: a lesson takes about a millisecond, a 10,000-node graph a few hundred; gunicorn kills
# a worker at 30.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

REQUESTS = Counter(
    "autograd_requests", "HTTP requests answered, by route, method and status.",
    ["endpoint", "method", "status"],
)  # fmt: skip
LATENCY = Histogram(
    "autograd_request_duration_seconds",
    "Time from the request reaching the app to its response, by route.",
    ["endpoint"],
    buckets=LATENCY_BUCKETS,
)
REFUSALS = Counter(
    "autograd_refusals", "Requests answered with a problem, by its type.", ["problem"]
)
BUDGET_TIMEOUTS = Counter(
    "autograd_budget_timeouts", f"Requests stopped by their time budget ({BUDGET_PROBLEM})."
)
CACHE_HITS = Counter("autograd_cache_hits", "Expressions found compiled in a worker's cache.")
CACHE_MISSES = Counter("autograd_cache_misses", "Expressions a worker had to parse and compile.")
# Summed over the live workers; gunicorn.conf.py's `child_exit` drops a dead worker's share.
CACHE_ENTRIES = Gauge(
    "autograd_cache_entries", "Compiled expressions held, all workers together.",
    multiprocess_mode="livesum",
)  # fmt: skip
CACHE_NODES = Gauge(
    "autograd_cache_nodes", "Graph nodes of the cached expressions, all workers together.",
    multiprocess_mode="livesum",
)  # fmt: skip

_EXAMPLE = """\
# HELP autograd_requests_total HTTP requests answered, by route, method and status.
# TYPE autograd_requests_total counter
autograd_requests_total{endpoint="/v1/gradients",method="POST",status="200"} 1042.0
autograd_requests_total{endpoint="/v1/gradients",method="POST",status="422"} 17.0
"""

blp = Blueprint(
    "metrics", __name__, description="Metrics for the operator's scraper.", sized_by_input=False
)


@blp.route(PATH, methods=["GET"])
@blp.doc(
    responses={
        "200": {
            "description": "The metrics in Prometheus' text exposition format.",
            "headers": RESPONSE_HEADERS,
            "content": {"text/plain": {"schema": {"type": "string"}, "example": _EXAMPLE}},
        }
    }
)
def metrics() -> Response:
    """Read the service's metrics

    Requests by route and status, latency histograms, cache hits and misses, refusals by problem
    type and time-budget stops, added up over every worker of this instance.
    """
    # The full header value, as given: as a `mimetype` Werkzeug would add its own charset again.
    return Response(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)


# prometheus_client chose how to keep values when it was imported, just above: read them back the
# same way, whatever the environment says later.
_MULTIPROCESS_DIRECTORY = os.environ.get("PROMETHEUS_MULTIPROC_DIR")


def _registry() -> CollectorRegistry:
    if _MULTIPROCESS_DIRECTORY is None:
        return REGISTRY
    registry = CollectorRegistry()
    # prometheus_client leaves the collector's constructor unannotated.
    multiprocess.MultiProcessCollector(registry, path=_MULTIPROCESS_DIRECTORY)  # type: ignore[no-untyped-call]
    return registry


def instrument(app: Flask) -> None:
    """Counts and times every request `app` answers."""
    app.before_request(_start_timer)
    app.after_request(_record)
    # This process's cache counters when last read: each request adds what changed since.
    app.extensions[f"{EXTENSION}.metrics"] = {"hits": 0, "misses": 0}


_CACHE_LOCK = threading.Lock()  # threaded workers: two requests must not count one increase twice


def _start_timer() -> None:
    g.metrics_started = time.perf_counter()


def _endpoint() -> str:
    """The route's rule, also for a method it does not allow (a 405); UNMATCHED for no route."""
    if request.url_rule is not None:
        return str(request.url_rule.rule)
    refused = request.routing_exception
    if isinstance(refused, MethodNotAllowed) and refused.valid_methods:
        adapter = current_app.create_url_adapter(request)
        assert adapter is not None  # there is a request
        try:
            method = next(iter(refused.valid_methods))
            rule, _arguments = adapter.match(method=method, return_rule=True)
        except HTTPException:  # the route would redirect the path, not answer it
            return UNMATCHED
        return str(rule.rule)
    return UNMATCHED


def _record(response: Response) -> Response:
    started = g.pop("metrics_started", None)
    endpoint = _endpoint()
    method = request.method if request.method in _METHODS else OTHER_METHOD
    REQUESTS.labels(endpoint, method, str(response.status_code)).inc()
    if started is not None:
        LATENCY.labels(endpoint).observe(time.perf_counter() - started)
    if response.mimetype == PROBLEM_MIMETYPE:
        problem = _problem_type(response)
        REFUSALS.labels(problem).inc()
        if problem == BUDGET_PROBLEM:
            BUDGET_TIMEOUTS.inc()
    _record_cache()
    return response


def _problem_type(response: Response) -> str:
    # Problems are small documents the app has just written; reading the type back here keeps
    # the counting out of every place a problem is made.
    try:
        document: Any = orjson.loads(response.get_data())
        problem = str(document.get("type", "about:blank"))
    except (orjson.JSONDecodeError, AttributeError):
        return "about:blank"
    return problem.removeprefix(TYPE_BASE)


def _record_cache() -> None:
    evaluator = current_app.extensions.get(EXTENSION)
    if evaluator is None:
        return
    seen = current_app.extensions[f"{EXTENSION}.metrics"]
    with _CACHE_LOCK:
        info = evaluator.cache_info()
        # The cache counts since the worker started; the counters take the increase.
        CACHE_HITS.inc(max(0, info["hits"] - seen["hits"]))
        CACHE_MISSES.inc(max(0, info["misses"] - seen["misses"]))
        seen["hits"], seen["misses"] = info["hits"], info["misses"]
    CACHE_ENTRIES.set(info["entries"])
    CACHE_NODES.set(info["nodes"])
