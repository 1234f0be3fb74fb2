"""gunicorn as deployed (gunicorn.conf.py): budgets, heavy-request slots, error pages and logs."""

from __future__ import annotations

import json
import os
import runpy
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "loadtest"))

import run  # noqa: E402 - the one gunicorn launcher of the load test, the fuzzing and these tests

CONFIG = ROOT / "gunicorn.conf.py"
LESSON = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}
BODY_LIMIT = 4096
# The costliest request within the default limits: seconds of work, whatever the machine.
WORST = {"expression": run.worst_expression(100_000, 20_000), "bindings": {"a": 1.5}}

pytestmark = pytest.mark.slow


def heavy(divisions: int) -> dict:
    """The most work per byte in the operator view: a long chain of divisions."""
    return {"expression": "(1 + 1 + 1) * a" + " / a" * divisions, "bindings": {"a": 1.5}}


class Server:
    def __init__(self, process: subprocess.Popen, url: str, log: Path) -> None:
        self.process, self.url, self.log = process, url, log

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()


def start(tmp_path: Path, workers: int, *extra: str, **env: str) -> Server:
    port = run._free_port()
    log = tmp_path / f"gunicorn-{port}.log"
    process = run.start_server(port, workers, log, extra, env)
    try:
        run.wait_ready(process, port, timeout=30)
    except RuntimeError:
        process.kill()
        pytest.fail(log.read_text()[-2000:])
    return Server(process, f"http://127.0.0.1:{port}", log)


def stop(server: Server) -> None:
    server.process.terminate()
    server.process.wait(timeout=30)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator:
    servers: list[Server] = []

    def launch(workers: int, *extra: str, **env: str) -> Server:
        servers.append(start(tmp_path, workers, *extra, **env))
        return servers[-1]

    yield launch
    for server in servers:
        stop(server)


def _is_problem(response: requests.Response, status: int, kind: str) -> None:
    assert response.status_code == status, response.text[:300]
    assert response.headers["Content-Type"] == "application/problem+json"
    assert response.json()["type"].endswith(f"/problems/{kind}")


def test_the_worker_timeout_sits_above_the_request_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    for budget, at_least in (("5", 30), ("20", 41), ("", 30)):
        monkeypatch.setenv("AUTOGRAD_REQUEST_BUDGET", budget)
        settings = runpy.run_path(str(CONFIG))
        assert settings["timeout"] >= at_least
        assert settings["timeout"] > 2 * float(budget or 5)


def test_past_the_budget_a_503_and_the_worker_goes_on(serve) -> None:
    server = serve(1, AUTOGRAD_REQUEST_BUDGET="0.5")
    started = time.monotonic()
    response = requests.post(f"{server.url}/v1/gradients", json=heavy(9000), timeout=30)
    _is_problem(response, 503, "request-too-expensive")
    assert response.headers["Retry-After"] == "1"
    assert time.monotonic() - started < 5
    # The same single worker answers next, with no restart in its log.
    assert (
        requests.post(f"{server.url}/v1/gradients", json=LESSON, timeout=5).json()["value"] == -10
    )
    assert sum("Booting worker" in line for line in server.lines()) == 1


def test_a_worker_killed_at_its_timeout_answers_a_problem_not_html(serve) -> None:
    # A request that holds its worker past gunicorn's timeout, whatever the app's speed: its body
    # never finishes arriving. The master aborts the worker, which answers before it exits.
    server = serve(1, "--timeout", "1")
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(
            b"POST /v1/gradients HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    head, _, body = reply.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 503"), reply[:300]
    assert "Content-Type: application/problem+json" in head
    assert "Retry-After: " in head
    assert json.loads(body)["type"].endswith("/problems/request-too-expensive")
    assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_gunicorn_own_bad_request_is_a_problem(serve) -> None:
    server = serve(1)
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.sendall(b"GET / HTTP/9.9\r\nHost: x\r\n\r\n")
        reply = connection.recv(65536).decode()
    head, body = reply.split("\r\n\r\n", 1)
    assert head.startswith("HTTP/1.1 400")
    assert "Content-Type: application/problem+json" in head
    assert json.loads(body)["type"].endswith("/problems/bad-request")


def test_every_log_line_is_json(serve) -> None:
    server = serve(2)
    requests.get(f"{server.url}/healthz", timeout=5)
    stop(server)
    lines = [line for line in server.lines() if line.strip()]
    records = [json.loads(line) for line in lines]  # gunicorn's own lines included
    assert any(
        r.get("logger") == "gunicorn.error" and "Booting worker" in r["message"] for r in records
    )
    assert all({"time", "level", "message"} <= r.keys() for r in records)


def test_responses_name_the_host_that_served_them(serve) -> None:
    server = serve(1)
    assert (
        requests.get(f"{server.url}/healthz", timeout=5).headers["X-Served-By"]
        == socket.gethostname()
    )


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_of_exactly_the_limit_is_accepted(serve, chunked: bool) -> None:
    server = serve(1, AUTOGRAD_MAX_BODY_BYTES=str(BODY_LIMIT))
    body = json.dumps(LESSON).encode()
    exact = body + b" " * (BODY_LIMIT - len(body))
    for size, status in ((BODY_LIMIT, 200), (BODY_LIMIT + 1, 413)):
        data = (exact + b" ")[:size]
        sent = iter([data[: size // 2], data[size // 2 :]]) if chunked else data
        response = requests.post(
            f"{server.url}/v1/gradients",
            data=sent,
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert response.status_code == status, (size, response.text[:200])


def test_heavy_requests_leave_a_worker_for_lessons(serve) -> None:
    # Two workers: one slot for heavy requests, so a second heavy request at once is turned away
    # at once while lessons and health checks are answered.
    server = serve(2, AUTOGRAD_REQUEST_BUDGET="3")
    first: list[requests.Response] = []
    runner = threading.Thread(
        target=lambda: first.append(
            requests.post(f"{server.url}/v1/gradients", json=WORST, timeout=30)
        )
    )
    runner.start()
    time.sleep(0.3)
    second = requests.post(f"{server.url}/v1/gradients", json=heavy(9000), timeout=30)
    _is_problem(second, 503, "service-busy")
    lesson = requests.post(f"{server.url}/v1/gradients", json=LESSON, timeout=5)
    assert lesson.status_code == 200
    assert requests.get(f"{server.url}/healthz", timeout=5).status_code == 200
    runner.join(timeout=60)
    assert first[0].status_code in (200, 503)
    assert (
        first[0].json()["type"].endswith("request-too-expensive")
        if first[0].status_code == 503
        else True
    )


@pytest.mark.parametrize(("host", "bound"), [(None, "127.0.0.1"), ("0.0.0.0", "0.0.0.0")])
def test_make_serve_binds_loopback_unless_told(host: str | None, bound: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HOST", "MAKEFLAGS")}
    if host:
        env["HOST"] = host
    plan = subprocess.run(
        ["make", "-n", "serve", "PORT=8311"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"--bind '{bound}:8311'" in plan
    assert "is for one machine" in plan
