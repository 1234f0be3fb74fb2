"""Learners during a rolling update: `python tests/docker/rolling.py BASE_URL -- UPDATE COMMAND...`.

Standard library only, like smoke.py; `make test-docker` runs it (scripts/test-swarm.sh). CLIENTS
threads each send a lesson request (a slider move: the lesson's expression, new bindings) every
INTERVAL seconds over a kept-alive connection, as learners in a lesson do; after a few seconds the
update command runs (`docker service update --image ...`) and, once it has finished, the clients
go on a few seconds more. Every answer must be a 200 with the right value: a refused connection,
a 5xx or a wrong number is a failed request. The replicas that answered (nginx's X-Upstream) before
the update and after it must be disjoint: every replica was replaced. With --expect-rollback the
update is one that fails (a release that never becomes healthy) and is rolled back: the replicas
that answered before must answer after it, but for the one slot the failed update took, which
the rollback may fill with a fresh task of the old release. Exits non-zero otherwise.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import random
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field

LESSON = "(a + b) * c"


@dataclass
class Tally:
    """What the clients saw, by phase: before, during and after the update command."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    phase: str = "before"
    sent: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    served_by: dict[str, Counter[str]] = field(
        default_factory=lambda: {p: Counter() for p in ("before", "during", "after")}
    )
    latencies: list[float] = field(default_factory=list)

    def record(self, phase: str, upstream: str | None, latency: float, failure: str | None) -> None:
        with self.lock:
            self.sent[phase] += 1
            self.latencies.append(latency)
            if failure is not None:
                self.failures.append(f"{phase}: {failure}")
            elif upstream:
                self.served_by[phase][upstream] += 1


def client(base: str, interval: float, stop: threading.Event, tally: Tally, seed: int) -> None:
    url = urllib.parse.urlsplit(base)
    rng = random.Random(seed)
    connection: http.client.HTTPConnection | None = None
    next_at = time.monotonic() + rng.uniform(0, interval)  # learners do not move in step
    while not stop.is_set():
        stop.wait(max(0.0, next_at - time.monotonic()))
        if stop.is_set():
            break
        next_at += interval
        a, b, c = (round(rng.uniform(-5, 5), 3) for _ in range(3))
        body = json.dumps({"expression": LESSON, "bindings": {"a": a, "b": b, "c": c}})
        phase = tally.phase
        started = time.monotonic()
        failure = upstream = None
        try:
            if connection is None:
                connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
            connection.request("POST", "/v1/gradients", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            payload = response.read()
            upstream = response.getheader("X-Upstream")
            if response.status != 200:
                failure = f"{response.status} {payload[:200]!r}"
            elif not math.isclose(json.loads(payload)["value"], (a + b) * c, abs_tol=1e-9):
                failure = f"wrong value for {body}: {payload[:200]!r}"
            if response.will_close:
                connection.close()
                connection = None
        except (OSError, http.client.HTTPException) as error:
            failure = f"{type(error).__name__}: {error}"
            if connection is not None:
                connection.close()
            connection = None
        tally.record(phase, upstream, time.monotonic() - started, failure)
    if connection is not None:
        connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    parser.add_argument("command", nargs="+", help="the update, after `--`")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--replicas", type=int, default=3, help="that answer before and after")
    # One request a second each keeps 16 learners from one address under the proxy's
    # per-address rate limit (deploy/nginx/limits.conf: 20 a second).
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=6.0, help="seconds before and after")
    parser.add_argument(
        "--expect-rollback",
        action="store_true",
        help="the update must fail and be rolled back: at most the slot it took is replaced",
    )
    args = parser.parse_args()

    tally = Tally()
    stop = threading.Event()
    threads = [
        threading.Thread(target=client, args=(args.base_url, args.interval, stop, tally, n))
        for n in range(args.clients)
    ]
    for thread in threads:
        thread.start()
    time.sleep(args.settle)
    tally.phase = "during"
    started = time.monotonic()
    print(f"rolling: {args.clients} clients; running {' '.join(args.command)}", flush=True)
    update = subprocess.run(args.command, check=False)
    took = time.monotonic() - started
    tally.phase = "after"
    time.sleep(args.settle)
    stop.set()
    for thread in threads:
        thread.join()

    latencies = sorted(tally.latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0
    print(
        f"rolling: update took {took:.0f} s; requests before/during/after: "
        f"{tally.sent['before']}/{tally.sent['during']}/{tally.sent['after']}, "
        f"failed: {len(tally.failures)}, p99 {p99 * 1e3:.0f} ms"
    )
    for phase in ("before", "during", "after"):
        served = ", ".join(f"{name} ({n})" for name, n in sorted(tally.served_by[phase].items()))
        print(f"rolling: replicas that answered {phase}: {served}")
    problems = [*tally.failures[:20]]
    before, after = set(tally.served_by["before"]), set(tally.served_by["after"])
    if args.expect_rollback:
        # `docker service update` exits 0 after a rollback too: the caller asks swarm how the
        # update ended; here the learners' side is checked. The update takes one slot at a time
        # and fails on the first: rolling that slot back, swarm may start a fresh task of the
        # old release there and stop the one that served it. Every other replica must answer
        # throughout.
        if len(before - after) > 1:
            replaced = ", ".join(sorted(before - after))
            problems.append(f"replicas replaced, though the update was rolled back: {replaced}")
    else:
        if update.returncode != 0:
            problems.append(f"the update command exited with {update.returncode}")
        if before & after:
            problems.append(f"replicas not replaced: {', '.join(sorted(before & after))}")
    if not len(before) == len(after) == args.replicas:
        problems.append(
            f"{len(before)} replicas answered before the update and {len(after)} after, "
            f"not {args.replicas}"
        )
    for problem in problems:
        print(f"rolling: FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
