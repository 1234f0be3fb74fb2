"""The real server: gunicorn started as in production, spoken to over HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "gunicorn.conf.py"
LESSON = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}
BODY_LIMIT = 2048


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, subprocess.Popen]]:
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "AUTOGRAD_WORKERS": "1",
        "AUTOGRAD_MAX_BODY_BYTES": str(BODY_LIMIT),
    }
    # The deployment's settings when they exist (they bind 0.0.0.0:$PORT), else the bare minimum.
    flags = (
        ["-c", str(CONFIG)]
        if CONFIG.exists()
        else ["--bind", f"127.0.0.1:{port}", "--workers", "1"]
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", *flags, "service.app:create_app()"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while True:
            if process.poll() is not None:
                pytest.fail(f"gunicorn exited: {process.communicate()[1][-2000:]}")
            try:
                if requests.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_the_lesson_over_http(server: tuple[str, subprocess.Popen]) -> None:
    url, _ = server
    response = requests.post(
        f"{url}/v1/gradients", json=LESSON, headers={"X-Request-ID": "lesson-1"}, timeout=5
    )
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["X-Request-ID"] == "lesson-1"
    document = response.json()
    assert document["value"] == -10
    assert document["gradients"] == {"a": 10, "b": 10, "c": -1}
    assert [step["node"] for step in document["backward"]] == [4, 3, 2, 1, 0]


def test_problems_over_http(server: tuple[str, subprocess.Popen]) -> None:
    url, _ = server
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
            "validation-error",
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


def test_docs_and_spec_over_http(server: tuple[str, subprocess.Popen]) -> None:
    url, _ = server
    page = requests.get(f"{url}/docs", timeout=5)
    assert page.status_code == 200
    script = requests.get(f"{url}/docs/static/swagger-ui-bundle.js", timeout=5)
    assert script.status_code == 200
    assert len(script.content) > 100_000
    assert requests.get(f"{url}/openapi.yaml", timeout=5).text.startswith("openapi: 3.0.3")


def test_access_log_lines_carry_the_request_id(server: tuple[str, subprocess.Popen]) -> None:
    if not CONFIG.exists():
        pytest.skip("the access log format comes with gunicorn.conf.py")
    url, process = server
    requests.get(f"{url}/healthz", headers={"X-Request-ID": "logged-7"}, timeout=5)
    process.terminate()  # the module's last test: stop the server to read all it wrote
    out, _ = process.communicate(timeout=20)
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert any(record.get("request_id") == "logged-7" for record in records)
