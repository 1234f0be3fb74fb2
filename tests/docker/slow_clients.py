"""Slow clients cannot starve the workers: `python tests/docker/slow_clients.py BASE_URL`.

Standard library only; `make test-docker` runs it against the compose stack (nginx in front of
gunicorn). For `--duration` seconds it keeps `--connections` slow connections open against the
server, reopening each one the server closes:

- most send their request headers one byte a second and never finish them;
- some send complete headers of a POST, then its body one byte a second;
- a few ask for a large response and read it one kilobyte a second.

Meanwhile it sends a lesson request every 0.1 s and a health check every 0.5 s, each given 5 s.
Exits non-zero, saying why, unless every lesson and health check succeeds (lessons with the right
value). Only the slow POSTs and slow readers count against nginx's per-address connection limit
(20), which the lessons from the same address share; the rest wait in nginx's header timeout.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

LESSON = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}
# A graph of about 2,000 nodes: a response of a few hundred KB to read slowly.
LARGE = {"expression": " + ".join(f"x{i % 50} * {i}" for i in range(1000))}


@dataclass
class Tally:
    end: float
    opened: Counter = field(default_factory=Counter)  # slow connections opened, by kind
    closed_by_server: Counter = field(default_factory=Counter)
    probes: dict[str, list[tuple[float, str]]] = field(default_factory=dict)  # (ms, outcome)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, counter: Counter, kind: str) -> None:
        with self.lock:
            counter[kind] += 1

    def probe(self, name: str, ms: float, outcome: str) -> None:
        with self.lock:
            self.probes.setdefault(name, []).append((ms, outcome))


def slow_connection(host: str, port: int, kind: str, tally: Tally) -> None:
    """Keeps one slow connection of `kind` open until the end, reopening it when closed."""
    while time.monotonic() < tally.end:
        try:
            with socket.create_connection((host, port), timeout=5) as sock:
                tally.count(tally.opened, kind)
                _dribble(sock, host, kind, tally)
        except OSError:
            tally.count(tally.closed_by_server, kind)
            time.sleep(0.2)


def _dribble(sock: socket.socket, host: str, kind: str, tally: Tally) -> None:
    if kind == "slow-headers":
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n".encode())
        head = b"X-Slow: " + b"a" * 1000
    elif kind == "slow-body":
        sock.sendall(
            f"POST /v1/gradients HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n".encode()
        )
        head = json.dumps(LESSON).encode().ljust(1000)
    else:  # slow-reader
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = json.dumps(LARGE).encode()
        sock.sendall(
            f"POST /v1/graph HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        while time.monotonic() < tally.end:
            if not sock.recv(1024):
                return  # all read, or closed: a new one
            time.sleep(1)
        return
    for byte in head:
        if time.monotonic() >= tally.end:
            return
        sock.sendall(bytes([byte]))
        time.sleep(1)


def probe(
    base_url: str, name: str, path: str, payload: dict | None, pause: float, tally: Tally
) -> None:
    while time.monotonic() < tally.end:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(base_url + path, data=data)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                document = json.loads(response.read())
                outcome = str(response.status)
                if name == "lesson" and document.get("value") != -10:
                    outcome = f"wrong value {document.get('value')!r}"
        except urllib.error.HTTPError as error:
            outcome = f"{error.code} {error.read()[:120]!r}"
        except OSError as error:
            outcome = type(error).__name__
        tally.probe(name, (time.monotonic() - started) * 1000, outcome)
        time.sleep(pause)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--duration", type=float, default=25.0)
    args = parser.parse_args(argv)
    url = urlsplit(args.base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80

    readers, posts = 5, 10
    kinds = ["slow-reader"] * readers + ["slow-body"] * posts
    kinds += ["slow-headers"] * (args.connections - len(kinds))
    tally = Tally(time.monotonic() + args.duration)
    threads = [
        threading.Thread(target=slow_connection, args=(host, port, kind, tally), daemon=True)
        for kind in kinds
    ]
    base = args.base_url.rstrip("/")
    threads.append(
        threading.Thread(target=probe, args=(base, "lesson", "/v1/gradients", LESSON, 0.1, tally))
    )
    threads.append(
        threading.Thread(target=probe, args=(base, "healthz", "/healthz", None, 0.5, tally))
    )
    for thread in threads:
        thread.start()
    time.sleep(args.duration)
    for thread in threads[-2:]:
        thread.join()

    print(
        f"slow clients: {args.connections} slow connections for {args.duration:.0f} s "
        f"({', '.join(f'{n} {k}' for k, n in Counter(kinds).items())}); opened "
        f"{sum(tally.opened.values())} in all, the server closed {dict(tally.closed_by_server)}"
    )
    ok = True
    for name, results in tally.probes.items():
        latencies = sorted(ms for ms, _ in results)
        failures = Counter(outcome for _, outcome in results if outcome != "200")
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        print(
            f"  {name:8} n={len(results)}  p50 {latencies[len(latencies) // 2]:.1f} ms  "
            f"p99 {p99:.1f} ms  max {latencies[-1]:.1f} ms  failures {dict(failures)}"
        )
        ok = ok and bool(results) and not failures
    ok = ok and {"lesson", "healthz"} <= tally.probes.keys()
    print(f"slow clients: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
