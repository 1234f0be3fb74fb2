"""Gunicorn settings, tuned by PORT, AUTOGRAD_WORKERS, AUTOGRAD_LOG_LEVEL and GUNICORN_CMD_ARGS."""

from __future__ import annotations

import gc
import json
import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from typing import Any

from gunicorn.glogging import Logger


def _cores() -> int:
    # The CPUs this process may run on (a cpuset-limited container sees its own share).
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # platforms without sched_getaffinity
        return os.cpu_count() or 1


# All interfaces: inside a container the published port arrives on the container's own address.
bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"

# Evaluating and differentiating an expression is pure CPU work: more busy workers than cores only
# take turns on the same CPUs, while one spare keeps a long request from queueing every short one
# behind it. cores + 1 gives 3 on a 2-core machine; each worker costs tens of MB once it forks.
workers = int(os.environ.get("AUTOGRAD_WORKERS") or _cores() + 1)  # unset or empty: the default
worker_class = "sync"  # CPU-bound requests gain nothing from threads under the GIL

# Import the app (and sympy, the slowest import) once in the master; workers fork and share its
# pages copy-on-write, start in milliseconds and are replaced just as fast.
preload_app = True

timeout = 30  # a worker silent this long is killed and replaced: no request holds one forever
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


def pre_fork(server: Any, worker: Any) -> None:
    gc.freeze()


def post_fork(server: Any, worker: Any) -> None:
    gc.set_threshold(*GC_THRESHOLDS)


# Metrics (GET /metrics): every worker writes its samples to files in this directory, and a scrape
# adds up all of them. It must be set before the app, and so prometheus_client, is imported, and
# must start empty; the default is a fresh directory in memory (or in the writable /tmp).
def _metrics_directory() -> str:
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        shutil.rmtree(directory, ignore_errors=True)  # samples of an earlier run would be added
        os.makedirs(directory, exist_ok=True)
        return directory
    return tempfile.mkdtemp(prefix="autograd-metrics-", dir=worker_tmp_dir)


os.environ["PROMETHEUS_MULTIPROC_DIR"] = _metrics_directory()


def child_exit(server: Any, worker: Any) -> None:
    # A dead worker's gauges (cache size) stop counting; its counters stay in the totals.
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server: Any) -> None:
    shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


accesslog = "-"  # stdout, one JSON object per line
errorlog = "-"  # stderr
loglevel = (os.environ.get("AUTOGRAD_LOG_LEVEL") or "info").lower()


class JsonAccessLogger(Logger):
    """Writes each access-log line as a JSON object, so any field can hold any character safely."""

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
