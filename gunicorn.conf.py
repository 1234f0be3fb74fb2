"""Gunicorn settings, tuned by PORT, AUTOGRAD_WORKERS, AUTOGRAD_LOG_LEVEL and GUNICORN_CMD_ARGS.

Sync workers serve one connection each from start to end: never expose them to the internet
directly. A client that sends or reads slowly holds a worker for as long as it likes; a buffering
proxy in front (deploy/nginx.conf, the default `docker compose up`) takes that wait instead.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any, cast

from gunicorn import util
from gunicorn.glogging import Logger

from service.api import costs
from service.api.config import DEFAULTS, ConfigurationError, cors_origins, read_variable
from service.api.logs import JsonFormatter
from service.api.request import REQUEST_ID_HEADER
from service.i18n import _
from service.kinds import HTTP_KINDS, problem_body


def _cores() -> int:
    # The CPUs this process may run on (a cpuset-limited container sees its own share).
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # platforms without sched_getaffinity
        return os.cpu_count() or 1


# All interfaces: inside a container the published port arrives on the container's own address.
bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"

MAX_WORKERS = 256  # far past any machine's useful count: a typo, not a plan, beyond it


def _workers() -> int:
    written = os.environ.get("AUTOGRAD_WORKERS", "").strip()
    if not written:  # unset or empty: the default
        return _cores() + 1
    digits = written.isascii() and written.isdecimal() and len(written.lstrip("0")) <= 3
    if not digits or not 1 <= int(written) <= MAX_WORKERS:
        # One line, as the app says a wrong setting: gunicorn lets SystemExit through as it is,
        # while any other error here is a traceback under "Failed to read config file".
        shown = written if len(written) <= 24 else written[:16] + "…"
        raise SystemExit(
            f"Error: AUTOGRAD_WORKERS must be a whole number from 1 to {MAX_WORKERS}, not {shown}"
        )
    return int(written)


# Evaluating and differentiating an expression is pure CPU work: more busy workers than cores only
# take turns on the same CPUs, while one spare keeps a long request from queueing every short one
# behind it. cores + 1 gives 3 on a 2-core machine; each worker costs tens of MB once it forks.
workers = _workers()
worker_class = "sync"  # CPU-bound requests gain nothing from threads under the GIL

# Import the app (Flask, marshmallow, apispec, numpy, matplotlib) once in the master, and sympy in
# `when_ready`; workers fork and share its pages copy-on-write, start in milliseconds and are
# replaced just as fast.
preload_app = True


def _request_budget() -> float:
    # The app refuses a bad value itself, naming the variable; here it only sets the timeout.
    try:
        return max(0.0, float(os.environ.get("AUTOGRAD_REQUEST_BUDGET") or 5))
    except ValueError:
        return 5.0


# A worker silent this long is killed and replaced: no request holds one forever. The app stops
# any view at its time budget (AUTOGRAD_REQUEST_BUDGET, 5 s) with a 503, so this is only reached
# by work that cannot be interrupted; it sits well above the budget, whatever that is set to.
timeout = max(30, math.ceil(2 * _request_budget()) + 10)
graceful_timeout = 20  # on SIGTERM, in-flight requests get this long to finish
# Seconds an idle keep-alive connection is held. Sync workers close after every response (a proxy
# in front keeps the client connections); this applies once GUNICORN_CMD_ARGS picks another class.
keepalive = 5

# Recycle each worker after this many requests, staggered so they do not all restart together:
# whatever a worker's heap grows to (sympy caches, fragmentation) stays bounded.
max_requests = 2000
max_requests_jitter = 200

# The heartbeat file lives in memory: on a container's overlay filesystem writes to it can stall.
_SHARED_MEMORY = "/dev/shm"  # noqa: S108 - gunicorn makes its file there with mkstemp
worker_tmp_dir = _SHARED_MEMORY if os.path.isdir(_SHARED_MEMORY) else None

# No runtime control socket: the container's own signals stop and restart the server, and the
# unprivileged user has no home directory to put the socket in. Older gunicorns ignore the name.
control_socket_disable = True


# Garbage collection. A request allocates one short-lived object per graph node and frees them all
# by reference counting (graphs have no cycles), but the cycle collector still runs every 700
# allocations and, in full collections, walks every object the process holds (sympy's included).
# Freezing what the preloaded app imported takes it out of every collection, and keeps those pages
# shared with the master instead of being touched (and copied) by each worker's collector; a larger
# first-generation threshold lets a large request run without hundreds of collections.
GC_THRESHOLDS = (50_000, 20, 10)


def on_starting(server: Any) -> None:
    # The heavy-request slots of this server: files its workers lock (service/api/costs.py).
    server.autograd_slots = tempfile.mkdtemp(prefix="autograd-slots-", dir=worker_tmp_dir)


def on_exit(server: Any) -> None:
    shutil.rmtree(getattr(server, "autograd_slots", ""), ignore_errors=True)
    shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


def when_ready(server: Any) -> None:
    # Symbolic work (POST /v1/derivatives, symbolic answers to POST /v1/check) needs sympy, whose
    # import and first simplification take seconds: paid once here, before the first fork, rather
    # than by each worker's first such request, inside its time budget.
    from service import check, formulas

    formulas.warm_up()
    check.warm_up()


def pre_fork(server: Any, worker: Any) -> None:
    gc.freeze()


def post_fork(server: Any, worker: Any) -> None:
    gc.set_threshold(*GC_THRESHOLDS)
    costs.join_server(server.autograd_slots, server.num_workers)


# Which replica answered, by its host name (a container's id), for a proxy's `X-Upstream`.
SERVED_BY_HEADER = ("X-Served-By", socket.gethostname())


def post_worker_init(worker: Any) -> None:
    app = worker.wsgi

    def served_by(environ: dict[str, Any], start_response: Any) -> Any:
        def start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            return start_response(status, [*headers, SERVED_BY_HEADER], *exc_info)

        environ["wsgi.input"] = _ClientBody(environ["wsgi.input"])
        return app(environ, start)

    worker.wsgi = served_by


# Whether the worker waits on its client: for the request's line and headers (until gunicorn has
# read them and calls `pre_request`), or for its body, while the app reads it. A worker stopped at
# its timeout meanwhile had a client too slow to send its request (408), not too much work (503).
_AWAITING = True


def pre_request(worker: Any, req: Any) -> None:
    global _AWAITING
    _AWAITING = False


def post_request(worker: Any, req: Any, environ: dict[str, Any], resp: Any) -> None:
    global _AWAITING
    if not _ABORTED:  # gunicorn calls this on its way to answering an aborted request
        _AWAITING = True  # the next request's line and headers


class _ClientBody:
    """A request's body as the app reads it, the worker marked as waiting on its client while
    each read waits for bytes to arrive."""

    def __init__(self, body: Any) -> None:
        self.body = body

    def _awaited(self, read: Callable[..., Any], *args: Any) -> Any:
        global _AWAITING
        _AWAITING = True
        data = read(*args)  # a worker aborted here leaves `_AWAITING` set for its answer
        _AWAITING = False
        return data

    def read(self, *args: Any) -> bytes:
        return cast(bytes, self._awaited(self.body.read, *args))

    def readline(self, *args: Any) -> bytes:
        return cast(bytes, self._awaited(self.body.readline, *args))

    def readlines(self, *args: Any) -> list[bytes]:
        return cast(list[bytes], self._awaited(self.body.readlines, *args))

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")

    def __getattr__(self, name: str) -> Any:  # anything else the body has, as it is
        return getattr(self.body, name)


# Gunicorn's own error answers (a request line it cannot parse, a worker stopped at its timeout)
# are problem documents like the app's, never an HTML page. A worker stopped at its timeout
# (SIGABRT from the master) answers a 408 when it was waiting for its client (`_AWAITING`), else
# the request's cost, as the app answers a request past its budget.
_ABORTED = False


def worker_abort(worker: Any) -> None:
    global _ABORTED
    _ABORTED = True


def _any_origin() -> bool:
    """Whether browser pages of any origin may call, read as the app reads the variable (JSON,
    else text); the app refused a bad value at start-up."""
    written = os.environ.get("AUTOGRAD_CORS_ORIGINS", DEFAULTS["CORS_ORIGINS"])
    try:
        return cors_origins({"CORS_ORIGINS": read_variable(written)}) == "*"
    except ConfigurationError:
        return False


def _write_problem(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    if _ABORTED:
        kind: str | None = "request-timeout" if _AWAITING else "request-too-expensive"
    else:
        kind = HTTP_KINDS.get(status_int)
    headers = ""
    body: dict[str, Any]
    if kind == "request-timeout":
        late = _("the request did not arrive in time; send it again, all at once")
        body = problem_body(kind, late)
    elif kind == "request-too-expensive":
        headers = f"Retry-After: {costs.retry_after(_request_budget())}\r\n"
        body = problem_body(kind, _("the work took longer than the server allows one request"))
    elif kind is not None:
        body = problem_body(kind, mesg or _("the server could not complete the request"))
    else:
        body = {"type": "about:blank", "title": reason, "status": status_int, "detail": mesg}
    status_int = body["status"]
    payload = json.dumps(body).encode()
    reason = HTTPStatus(status_int).phrase if kind is not None else reason
    # As the app's answers: an id to quote (the request's own is not known here), and readable by
    # a browser page of any origin when any may call (with a list, the origin is not known here).
    headers += f"{REQUEST_ID_HEADER}: {uuid.uuid4().hex}\r\n"
    if _any_origin():
        headers += (
            "Access-Control-Allow-Origin: *\r\n"
            f"Access-Control-Expose-Headers: Retry-After, {REQUEST_ID_HEADER}\r\n"
        )
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/problem+json\r\n{headers}"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + payload)


util.write_error = _write_problem


# Metrics (GET /metrics): every worker writes its samples to files in PROMETHEUS_MULTIPROC_DIR and
# a scrape adds up all of them. It must be set before the app, and so prometheus_client, is
# imported (nothing imported above loads it; service.api.metrics does, when the app is preloaded),
# and must start empty. Each server makes its own, in memory, named after its master's pid: an
# inherited value is replaced, so two servers never share (or delete) each other's samples.
def _metrics_directory() -> str:
    directory = os.path.join(
        worker_tmp_dir or tempfile.gettempdir(), f"autograd-metrics-{os.getpid()}"
    )
    shutil.rmtree(directory, ignore_errors=True)  # a dead server's, whose pid this one reuses
    os.makedirs(directory)
    return directory


os.environ["PROMETHEUS_MULTIPROC_DIR"] = _metrics_directory()


def child_exit(server: Any, worker: Any) -> None:
    # A dead worker's gauges (cache size) stop counting; its counters stay in the totals.
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


accesslog = "-"  # stdout, one JSON object per line
errorlog = "-"  # stderr
loglevel = (os.environ.get("AUTOGRAD_LOG_LEVEL") or "info").lower()


class _ProcessJsonFormatter(JsonFormatter):
    """The service's JSON log line, with the process id gunicorn's own lines are about."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps({**json.loads(super().format(record)), "pid": record.process})


class JsonAccessLogger(Logger):
    """Writes gunicorn's own log lines and each access-log line as JSON objects, so any field can
    hold any character safely and one parser reads every line the server writes."""

    def _set_handler(self, log: Any, output: Any, fmt: Any, stream: Any = None) -> None:
        if log is self.error_log:
            fmt = _ProcessJsonFormatter()
        super()._set_handler(log, output, fmt, stream)

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: timedelta) -> None:
        if not self.access_log_enabled:
            return
        try:
            self.access_log.info(json.dumps(_access_record(resp, req, environ, request_time)))
        except Exception:
            self.exception("could not write the access log line")


def _header(headers: Any, name: str) -> str | None:
    # Gunicorn hands headers over as (name, value) pairs; request names arrive upper-cased.
    for key, value in headers or ():
        if key.lower() == name:
            return value
    return None


def _access_record(
    resp: Any, req: Any, environ: dict[str, Any], request_time: timedelta
) -> dict[str, Any]:
    status = resp.status.split(None, 1)[0] if isinstance(resp.status, str) else resp.status
    request_headers = getattr(req, "headers", None)
    record = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "method": environ.get("REQUEST_METHOD"),
        "path": environ.get("PATH_INFO"),
        "query": environ.get("QUERY_STRING") or None,
        "status": int(status),
        "duration_ms": round(request_time.total_seconds() * 1000, 3),
        "bytes": getattr(resp, "sent", None),
        # The app answers with the id it was given or made; the client's one is the fallback.
        "request_id": _header(resp.headers, "x-request-id")
        or _header(request_headers, "x-request-id"),
        "remote_addr": environ.get("REMOTE_ADDR"),
        "forwarded_for": _header(request_headers, "x-forwarded-for"),
        "user_agent": environ.get("HTTP_USER_AGENT"),
    }
    return {key: value for key, value in record.items() if value is not None}


logger_class = JsonAccessLogger
