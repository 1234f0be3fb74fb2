"""The real server: gunicorn started as in production (gunicorn.conf.py), spoken to over HTTP:
the app through it, the request budget and heavy-request slots, its own error answers and logs."""

from __future__ import annotations

import json
import os
import re
import runpy
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest
import requests
from conftest import LESSON, LESSON_GRADIENTS, LESSON_VALUE

from service.devserver import HOST, ROOT, Gunicorn

sys.path.insert(0, str(ROOT / "loadtest"))

import run  # the load test's server: gunicorn as deployed, without recycling

pytestmark = pytest.mark.slow  # each module starts server processes
BODY_LIMIT = 2048


@pytest.fixture(scope="module")
def server() -> Iterator[Gunicorn]:
    env = {"AUTOGRAD_WORKERS": "1", "AUTOGRAD_MAX_BODY_BYTES": str(BODY_LIMIT)}
    with Gunicorn(env=env) as server:
        yield server


def test_the_lesson_over_http(server: Gunicorn) -> None:
    url = server.url
    response = requests.post(
        f"{url}/v1/gradients", json=LESSON, headers={"X-Request-ID": "lesson-1"}, timeout=5
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["X-Request-ID"] == "lesson-1"
    document = response.json()
    assert document["value"] == LESSON_VALUE
    assert document["gradients"] == LESSON_GRADIENTS
    assert [step["node"] for step in document["backward"]] == [4, 3, 2, 1, 0]


def test_problems_over_http(server: Gunicorn) -> None:
    url = server.url
    json_type = {"Content-Type": "application/json"}
    cases = [
        (
            requests.post(
                f"{url}/v1/gradients",
                data=b'{"expression": "a", "bindings": {"a": NaN}}',
                headers=json_type,
                timeout=5,
            ),
            422,
            "invalid-binding",
        ),
        (
            requests.post(
                f"{url}/v1/graph", data=b'{"expression": "a",', headers=json_type, timeout=5
            ),
            400,
            "malformed-json",
        ),
        (requests.post(f"{url}/v1/graph", data=b"{}", timeout=5), 415, "unsupported-media-type"),
        (
            requests.post(
                f"{url}/v1/graph", data=b" " * (2 * BODY_LIMIT), headers=json_type, timeout=5
            ),
            413,
            "body-too-large",
        ),
        # Without a Content-Length the limit holds too: the body is cut off as it is read.
        (
            requests.post(
                f"{url}/v1/graph", data=iter([b" " * BODY_LIMIT] * 2), headers=json_type, timeout=5
            ),
            413,
            "body-too-large",
        ),
        (
            requests.post(f"{url}/v1/graph", json={"expression": "a ^ b"}, timeout=5),
            422,
            "variable-exponent",
        ),
        (requests.get(f"{url}/nowhere", timeout=5), 404, "not-found"),
        (requests.delete(f"{url}/healthz", timeout=5), 405, "method-not-allowed"),
    ]
    for response, status, kind in cases:
        assert response.status_code == status, response.text
        assert response.headers["Content-Type"] == "application/problem+json"
        assert response.json()["type"].endswith(f"/problems/{kind}")
        assert response.headers["X-Request-ID"]


def test_docs_and_spec_over_http(server: Gunicorn) -> None:
    url = server.url
    page = requests.get(f"{url}/docs", timeout=5)
    assert page.status_code == 200
    assert requests.get(f"{url}/docs/", timeout=5).url == f"{url}/docs"
    script = requests.get(f"{url}/docs/static/swagger-ui-bundle.js", timeout=5)
    assert script.status_code == 200
    assert len(script.content) > 100_000
    for _ in range(3):  # the same spec on every request to the worker
        assert requests.get(f"{url}/openapi.yaml", timeout=5).text.startswith("openapi: 3.1.0")
        assert requests.get(f"{url}/openapi.json", timeout=5).json()["paths"]


def test_responses_name_the_host_that_served_them(server: Gunicorn) -> None:
    response = requests.get(f"{server.url}/healthz", timeout=5)
    assert response.headers["X-Served-By"] == socket.gethostname()


def test_a_body_of_exactly_the_limit_is_accepted_over_http(server: Gunicorn) -> None:
    body = json.dumps(LESSON).encode()
    exact = body + b" " * (BODY_LIMIT - len(body))
    for chunked in (False, True):
        for size, status in ((BODY_LIMIT, 200), (BODY_LIMIT + 1, 413)):
            data = (exact + b" ")[:size]
            sent = iter([data[: size // 2], data[size // 2 :]]) if chunked else data
            response = requests.post(
                f"{server.url}/v1/gradients",
                data=sent,
                headers={"Content-Type": "application/json"},
                timeout=10,
            )
            assert response.status_code == status, (chunked, size, response.text[:200])


def test_access_log_lines_carry_the_request_id(server: Gunicorn) -> None:
    requests.get(f"{server.url}/healthz", headers={"X-Request-ID": "logged-7"}, timeout=5)
    output = server.stop()  # the module's last test: stop the server to read all it wrote
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any(record.get("request_id") == "logged-7" for record in records)


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("AUTOGRAD_MAX_DEPTH", "abc", "AUTOGRAD_MAX_DEPTH must be a positive whole number"),
        ("AUTOGRAD_MAX_DEPHT", "5", "did you mean AUTOGRAD_MAX_DEPTH?"),
        ("AUTOGRAD_WORKERS", "abc", "must be a whole number from 1 to 256, not abc"),
        ("AUTOGRAD_WORKERS", "0", "AUTOGRAD_WORKERS must be a whole number from 1 to 256, not 0"),
        ("AUTOGRAD_WORKERS", "1000000", "from 1 to 256, not 1000000"),
        ("AUTOGRAD_WORKERS", "9" * 5000, "from 1 to 256, not 9999999999999999…"),
    ],
)
def test_a_bad_setting_stops_the_server_with_one_line(variable: str, value: str, said: str) -> None:
    with pytest.raises(RuntimeError) as failed:
        Gunicorn(env={"AUTOGRAD_WORKERS": "1", variable: value}).start()
    head, _, output = str(failed.value).partition("\n")
    assert head == "gunicorn exited with status 1:"
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith(f"Error: {variable}")
    assert said in lines[0]


# -- gunicorn as deployed, one server per test: budgets, heavy-request slots, error pages, logs --

# The costliest request within the default limits: seconds of work, whatever the machine.
WORST = {"expression": run.worst_expression(100_000, 20_000), "bindings": {"a": 1.5}}
# Heavy by its size (20 KB), whatever the work: spaces cost the parser next to nothing.
HEAVY = {"expression": "a" + " " * 20_000, "bindings": {"a": 1}}


@pytest.fixture
def serve() -> Iterator[Callable[..., Gunicorn]]:
    """Starts gunicorn with `workers` workers, extra gunicorn flags and `AUTOGRAD_*` settings."""
    servers: list[Gunicorn] = []

    def launch(workers: int, *args: str, **env: str) -> Gunicorn:
        server = run.server(workers, args, env)
        server.start()
        servers.append(server)
        server.wait_for_workers(workers)
        return server

    yield launch
    for server in servers:
        server.stop()


def _is_problem(response: requests.Response, status: int, kind: str) -> None:
    assert response.status_code == status, response.text[:300]
    assert response.headers["Content-Type"] == "application/problem+json"
    assert response.json()["type"].endswith(f"/problems/{kind}")


def _raw(server: Gunicorn, request: bytes, timeout: float) -> tuple[str, str]:
    """`request` sent as it is; the head and body of all that comes back until the server closes."""
    with socket.create_connection((HOST, server.port), timeout=timeout) as connection:
        connection.sendall(request)
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    head, _, body = reply.decode().partition("\r\n\r\n")
    return head, body


def test_the_workers_are_listed_once_every_one_has_forked() -> None:
    # gunicorn answers as soon as its first worker does; the others may still be forking.
    with run.server(3) as server:
        pids = server.wait_for_workers(3)
        assert len(pids) == 3
        assert server.workers() == pids  # none was still to come


def test_the_worker_timeout_sits_above_the_request_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    for budget, at_least in (("5", 30), ("20", 41), ("", 30)):
        monkeypatch.setenv("AUTOGRAD_REQUEST_BUDGET", budget)
        settings = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
        assert settings["timeout"] >= at_least
        assert settings["timeout"] > 2 * float(budget or 5)


def test_past_the_budget_a_503_and_the_worker_goes_on(serve: Callable[..., Gunicorn]) -> None:
    server = serve(1, AUTOGRAD_REQUEST_BUDGET="0.2")
    response = requests.post(f"{server.url}/v1/gradients", json=WORST, timeout=30)
    _is_problem(response, 503, "request-too-expensive")
    assert response.headers["Retry-After"] == "1"
    # The same single worker answers next, with no restart in its log.
    lesson = requests.post(f"{server.url}/v1/gradients", json=LESSON, timeout=5)
    assert lesson.json()["value"] == LESSON_VALUE
    assert server.output().count("Booting worker") == 1


@pytest.mark.parametrize(
    "request_sent",
    [
        # the line and headers still arriving
        b"POST /v1/gradients HTTP/1.1\r\nHost: x\r\nContent-Type: appl",
        # the body never finishing, while the app reads it
        b"POST /v1/gradients HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{",
    ],
    ids=["headers", "body"],
)
def test_a_worker_killed_waiting_for_a_slow_client_answers_a_timeout_problem(
    serve: Callable[..., Gunicorn], request_sent: bytes
) -> None:
    # A client too slow to send its request holds its worker past gunicorn's timeout; the master
    # aborts the worker, which answers before it exits: the request did not arrive, no work was
    # too expensive.
    server = serve(1, "--timeout", "1")
    head, body = _raw(server, request_sent, timeout=30)
    assert head.startswith("HTTP/1.1 408 Request Timeout"), head
    assert "Content-Type: application/problem+json" in head
    # A browser page may read it, and the id to quote is there, as on the app's own answers.
    assert "Access-Control-Allow-Origin: *" in head
    assert re.search(r"^X-Request-ID: [0-9a-f]{32}\r$", head, re.M), head
    problem = json.loads(body)
    assert problem["type"].endswith("/problems/request-timeout")
    assert problem["detail"] == "the request did not arrive in time; send it again, all at once"
    assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_a_worker_killed_at_work_answers_that_the_work_took_too_long(
    serve: Callable[..., Gunicorn],
) -> None:
    # Symbolic work with budgets far above gunicorn's timeout: the master aborts the worker while
    # it computes, which answers the request's cost, not the html page gunicorn would.
    server = serve(
        1, "--timeout", "1", AUTOGRAD_REQUEST_BUDGET="60", AUTOGRAD_SYMBOLIC_SECONDS="50"
    )
    body = {"expression": "a ** 1000000", "bindings": {"a": 0.999}}
    response = requests.post(f"{server.url}/v1/derivatives", json=body, timeout=60)
    _is_problem(response, 503, "request-too-expensive")
    assert "Retry-After" in response.headers
    assert requests.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_gunicorns_own_bad_request_is_a_problem(serve: Callable[..., Gunicorn]) -> None:
    server = serve(1)
    head, body = _raw(server, b"GET / HTTP/9.9\r\nHost: x\r\n\r\n", timeout=5)
    assert head.startswith("HTTP/1.1 400")
    assert "Content-Type: application/problem+json" in head
    assert "X-Request-ID: " in head
    assert json.loads(body)["type"].endswith("/problems/bad-request")


def test_a_malformed_chunked_body_is_a_bad_request(serve: Callable[..., Gunicorn]) -> None:
    server = serve(1)
    # A chunk size that is not hexadecimal; a chunk without the line end after its data.
    for chunks in (b"zz\r\n{}\r\n0\r\n\r\n", b"2\r\n{}XX0\r\n\r\n"):
        for request_line in (b"POST /v1/gradients", b"GET /healthz"):
            head, body = _raw(
                server,
                request_line + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunks,
                timeout=5,
            )
            assert head.startswith("HTTP/1.1 400"), head
            problem = json.loads(body)
            assert problem["type"].endswith("/problems/bad-request")
            assert problem["detail"].startswith("the request body could not be read")


def test_every_log_line_is_json() -> None:
    with Gunicorn(env={"AUTOGRAD_WORKERS": "2"}) as server:
        requests.get(f"{server.url}/healthz", timeout=5)
        output = server.stop()
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    assert any(
        r.get("logger") == "gunicorn.error" and "Booting worker" in r["message"] for r in records
    )
    assert any(r.get("path") == "/healthz" for r in records)  # the access log's line
    for record in records:
        assert "time" in record
        assert {"level", "message"} <= record.keys() or {"method", "status"} <= record.keys()


def test_heavy_requests_leave_a_worker_for_lessons(serve: Callable[..., Gunicorn]) -> None:
    # Two workers: one slot for heavy requests. While the costliest request holds it, another
    # heavy one is turned away at once, and lessons and health checks are answered.
    server = serve(2, AUTOGRAD_REQUEST_BUDGET="60")
    first: list[requests.Response] = []

    def costliest() -> None:
        # Sent again while one of the cheap heavy requests below happens to hold the slot.
        while not first or first[-1].status_code == 503:
            first.append(requests.post(f"{server.url}/v1/gradients", json=WORST, timeout=60))

    runner = threading.Thread(target=costliest)
    runner.start()
    try:
        # Until the first holds its slot, a heavy request is admitted; it costs next to nothing.
        refused = None
        while refused is None and runner.is_alive():
            response = requests.post(f"{server.url}/v1/gradients", json=HEAVY, timeout=30)
            if response.status_code != 200:
                refused = response
        assert refused is not None, "the costliest request ended before another was refused"
        _is_problem(refused, 503, "service-busy")
        assert refused.headers["Retry-After"] == "1"
        lesson = requests.post(f"{server.url}/v1/gradients", json=LESSON, timeout=5)
        assert lesson.json()["value"] == LESSON_VALUE
        assert requests.get(f"{server.url}/healthz", timeout=5).status_code == 200
    finally:
        runner.join(timeout=60)
    assert first[-1].status_code == 200


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
