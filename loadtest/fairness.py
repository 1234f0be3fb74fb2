"""Fairness under expensive load: the costliest requests never starve a lesson or a health check.

    .venv/bin/python loadtest/fairness.py [--duration 30] [--workers 3]

Starts gunicorn as deployed (gunicorn.conf.py) on a free 127.0.0.1 port. 2 x workers clients
send the costliest request within the default limits (a 100 KB expression with about 10,000
divisions, `loadtest/run.py:worst_expression`) without pause, each as soon as the last one was
answered. Meanwhile one client sends lesson requests and another asks `/healthz` every 0.2 s,
each giving up after 2 s. Prints what the costly requests got and the lesson and health-check
latencies; exits non-zero when a health check fails or the lessons' 99th percentile is over 2 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from run import (
    CHEAP_P99_MS,
    CONNECTION_ERRORS,
    _free_port,
    _percentile,
    start_server,
    stop_server,
    wait_ready,
    worst_expression,
)

PROBE_TIMEOUT_S = 2.0
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
LESSON = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}


@dataclass
class Tally:
    """What each kind of client saw: (status or error, problem) counts and latencies in ms."""

    end: float
    outcomes: dict[str, Counter] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, name: str, outcome: tuple[str, str], latency_ms: float) -> None:
        with self.lock:
            self.outcomes.setdefault(name, Counter())[outcome] += 1
            self.latencies.setdefault(name, []).append(latency_ms)


def ask(port: int, method: str, path: str, body: bytes | None, timeout: float) -> tuple[str, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    try:
        connection.request(method, path, body, headers)
        response = connection.getresponse()
        payload = response.read()
    except CONNECTION_ERRORS as error:
        return type(error).__name__, ""
    finally:
        connection.close()
    problem = ""
    if response.status >= 400:
        try:
            problem = json.loads(payload).get("type", "").rsplit("/", 1)[-1]
        except ValueError:
            problem = "(not problem+json)"
    return str(response.status), problem


def loop(
    tally: Tally,
    name: str,
    port: int,
    method: str,
    path: str,
    body: bytes | None,
    timeout: float,
    pause: float,
) -> None:
    while time.monotonic() < tally.end:
        started = time.monotonic()
        outcome = ask(port, method, path, body, timeout)
        tally.record(name, outcome, (time.monotonic() - started) * 1000)
        time.sleep(pause)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=CORES + 1, help="gunicorn's default")
    parser.add_argument("--clients", type=int, help="costly clients (default: 2 x workers)")
    args = parser.parse_args(argv)
    clients = args.clients or 2 * args.workers

    worst = json.dumps({"expression": worst_expression(100_000, 20_000), "bindings": {"a": 1.5}})
    lesson = json.dumps(LESSON).encode()
    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="autograd-fairness-", suffix=".log")[1])
    server = start_server(port, args.workers, log)
    try:
        wait_ready(server, port)
        tally = Tally(time.monotonic() + args.duration)
        threads = [
            threading.Thread(
                target=loop,
                args=(tally, "worst", port, "POST", "/v1/gradients", worst.encode(), 60.0, 0.0),
            )
            for _ in range(clients)
        ]
        threads.append(
            threading.Thread(
                target=loop,
                args=(
                    tally,
                    "lesson",
                    port,
                    "POST",
                    "/v1/gradients",
                    lesson,
                    PROBE_TIMEOUT_S,
                    0.05,
                ),
            )
        )
        probe = (tally, "healthz", port, "GET", "/healthz", None, PROBE_TIMEOUT_S, 0.2)
        threads.append(threading.Thread(target=loop, args=probe))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except RuntimeError as error:
        print(f"fairness test could not run: {error}", file=sys.stderr)
        print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
        return 1
    finally:
        stop_server(server)
        log.unlink(missing_ok=True)

    print(
        f"fairness: {args.duration:.0f} s, {args.workers} gunicorn workers, {clients} clients "
        "sending the costliest request without pause, one lesson client, one health probe"
    )
    for name in ("worst", "lesson", "healthz"):
        latencies = tally.latencies.get(name, [])
        answers = ", ".join(
            f"{count} x {status}{' ' + problem if problem else ''}"
            for (status, problem), count in tally.outcomes.get(name, Counter()).most_common()
        )
        print(
            f"  {name:8} n={len(latencies):5d}  p50 {_percentile(latencies, 0.5):8.1f} ms  "
            f"p99 {_percentile(latencies, 0.99):8.1f} ms  max {max(latencies, default=0):8.1f} ms"
            f"  [{answers}]"
        )
    lesson_p99 = _percentile(tally.latencies.get("lesson", []), 0.99)
    failed_lessons = sum(n for (s, _), n in tally.outcomes.get("lesson", {}).items() if s != "200")
    failed_health = sum(n for (s, _), n in tally.outcomes.get("healthz", {}).items() if s != "200")
    ok = bool(tally.latencies.get("lesson")) and lesson_p99 <= CHEAP_P99_MS
    ok = ok and not failed_lessons and not failed_health
    print(
        f"lesson p99 {lesson_p99:.0f} ms (at most {CHEAP_P99_MS:.0f}), failed lessons "
        f"{failed_lessons}, failed health checks {failed_health} "
        f"(each given {PROBE_TIMEOUT_S:.0f} s)"
    )
    print(f"verdict: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
