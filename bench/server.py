"""gunicorn on a free loopback port with the project's configuration, and load generators for it."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from service.devserver import ROOT, Gunicorn

APP = "bench.apps:create_bench_app()"


class Server(Gunicorn):
    """gunicorn serving the bench app, ready once every worker runs; it counts the CPU it uses.

    The access log stays on (it is part of every request's cost) but goes nowhere.
    """

    def __init__(self, env: dict[str, str] | None = None, root: Path = ROOT) -> None:
        # `root`: the checkout whose service, bench app and gunicorn.conf.py run.
        super().__init__(env=env, app=APP, root=root, keep_access_log=False)

    def ready(self) -> bool:
        return super().ready() and len(self.workers()) >= self.expected_workers()

    def expected_workers(self) -> int:
        configured = self.env.get("AUTOGRAD_WORKERS")
        return int(configured) if configured else len(os.sched_getaffinity(0)) + 1

    def master(self) -> psutil.Process:
        return psutil.Process(self.pid)

    def workers(self) -> list[psutil.Process]:
        try:
            return self.master().children()
        except psutil.NoSuchProcess:
            return []

    def cpu_seconds(self) -> float:
        """CPU time used so far by the master and all its workers, user and system.

        Workers are recycled every couple of thousand requests (`max_requests`); a reaped
        worker's time is counted in the master's children times, so none is lost.
        """
        master = self.master().cpu_times()
        total = master.user + master.system + master.children_user + master.children_system
        for worker in self.workers():
            try:
                times = worker.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total


def request(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


# -- load generators --------------------------------------------------------------------------


@dataclass
class Load:
    """What one load run measured."""

    requests: int
    seconds: float
    p50: float  # seconds
    p99: float
    errors: int  # non-2xx answers and socket errors

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


def find_wrk(install: bool) -> str | None:
    """wrk's path; with `install`, try Debian's package first when running as root."""
    found = shutil.which("wrk")
    if found or not install or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    print("wrk is not installed: trying `apt-get install wrk` ...", flush=True)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
             "env": {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}}  # fmt: skip
    install_wrk = ["apt-get", "install", "-y", "-q", "wrk"]
    for steps in ([install_wrk], [["apt-get", "update", "-q"], install_wrk]):
        try:
            if all(subprocess.run(step, timeout=180, **quiet).returncode == 0 for step in steps):
                break
        except (OSError, subprocess.TimeoutExpired):
            pass
    return shutil.which("wrk")


_WRK_SCRIPT = """
local file = io.open("{body}", "rb")
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"
"""
_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


class Wrk:
    name = "wrk"

    def __init__(self, path: str) -> None:
        self.path = path
        self.folder = tempfile.TemporaryDirectory(prefix="bench-wrk-")

    def run(self, port: int, path: str, body: bytes, connections: int, seconds: float) -> Load:
        folder = Path(self.folder.name)
        body_file = folder / f"body-{abs(hash(body))}.json"
        if not body_file.exists():
            body_file.write_bytes(body)
        script = folder / f"{body_file.stem}.lua"
        script.write_text(_WRK_SCRIPT.format(body=body_file))
        command = [self.path, "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s",
                   "--timeout", "30s", "--latency", "-s", str(script),
                   f"http://127.0.0.1:{port}{path}"]  # fmt: skip
        out = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60).stdout
        return _parse_wrk(out)


def _parse_wrk(out: str) -> Load:
    def duration(label: str) -> float:
        match = re.search(rf"^\s*{label}\s+([\d.]+)(us|ms|s|m)\s*$", out, re.MULTILINE)
        return float(match.group(1)) * _UNIT[match.group(2)] if match else float("nan")

    done = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", out)
    if done is None:
        raise RuntimeError(f"could not read wrk's output:\n{out}")
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors += int(non_2xx.group(1)) if non_2xx else 0
    seconds = float(done.group(2)) * _UNIT[done.group(3)]
    return Load(int(done.group(1)), seconds, duration("50%"), duration("99%"), errors)


class PythonClient:
    """Threads each sending one request after another: the fallback when wrk is unavailable.

    Python clients share one interpreter lock, so past a few connections this measures the
    client as much as the server; wrk is preferred.
    """

    name = "python"

    def run(self, port: int, path: str, body: bytes, connections: int, seconds: float) -> Load:
        latencies: list[float] = []
        errors = [0]
        lock = threading.Lock()
        stop_at = time.perf_counter() + seconds
        headers = {"Content-Type": "application/json"}

        def client() -> None:
            mine, failed = [], 0
            connection: Any = None
            while time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                try:
                    if connection is None:
                        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    connection.request("POST", path, body=body, headers=headers)
                    response = connection.getresponse()
                    response.read()
                    if response.status != 200:
                        failed += 1
                    if response.will_close:
                        connection.close()
                        connection = None
                except OSError:
                    failed += 1
                    connection = None
                    continue
                mine.append(time.perf_counter() - t0)
            with lock:
                latencies.extend(mine)
                errors[0] += failed

        started = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(connections)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        latencies.sort()
        if not latencies:
            return Load(0, elapsed, float("nan"), float("nan"), errors[0])
        p50 = latencies[len(latencies) // 2]
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        return Load(len(latencies), elapsed, p50, p99, errors[0])
