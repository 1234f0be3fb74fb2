"""Smoke test of a running server (a container, usually): `python tests/docker/smoke.py [BASE_URL]`.

Standard library only, so it runs from any Python. Not a pytest module: `make test-docker` runs it
against the container that docker compose started. Exits non-zero, saying what failed, on failure.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

REQUEST_TIMEOUT_S = 10.0


@dataclass
class Reply:
    """One HTTP response: what every check looks at."""

    status: int
    content_type: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class CheckFailed(Exception):
    """A response differs from what the service promises."""


def fetch(base_url: str, path: str, payload: Any = None) -> Reply:
    """GET `path`, or POST `payload` as JSON to it; an HTTP error status is a reply, not a raise."""
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(base_url.rstrip("/") + path, data=data)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
            return _reply(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        return _reply(error.code, error.headers, error.read())


def _reply(status: int, headers: Any, body: bytes) -> Reply:
    names = {name.lower(): value for name, value in headers.items()}
    content_type = names.get("content-type", "").split(";")[0].strip()
    return Reply(status, content_type, names, body)


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def expect_status(reply: Reply, status: int, content_type: str) -> None:
    expect(
        reply.status == status and reply.content_type == content_type,
        f"expected {status} {content_type}, got {reply.status} {reply.content_type}: "
        f"{reply.body[:300]!r}",
    )


def close(actual: Any, expected: float) -> bool:
    return isinstance(actual, int | float) and math.isclose(actual, expected, abs_tol=1e-9)


def wait_until_healthy(base_url: str, deadline_s: float) -> None:
    """Poll /healthz until it answers 200, or fail once `deadline_s` seconds have passed."""
    started = time.monotonic()
    last_problem = "no answer yet"
    while time.monotonic() - started < deadline_s:
        try:
            reply = fetch(base_url, "/healthz")
            if reply.status == 200:
                return
            last_problem = f"status {reply.status}"
        except (OSError, ValueError) as error:  # refused, reset or timed out while starting
            last_problem = str(error)
        time.sleep(1)
    raise CheckFailed(f"{base_url}/healthz not healthy after {deadline_s:.0f} s ({last_problem})")


def check_health(base_url: str) -> None:
    reply = fetch(base_url, "/healthz")
    expect_status(reply, 200, "application/json")
    expect(reply.json() == {"status": "ok"}, f"unexpected health document {reply.json()!r}")


def check_lesson_example(base_url: str) -> None:
    payload = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}
    reply = fetch(base_url, "/v1/gradients", payload)
    expect_status(reply, 200, "application/json")
    document = reply.json()
    expect(close(document.get("value"), -10.0), f"value {document.get('value')!r} != -10.0")
    gradients = document.get("gradients", {})
    for name, expected in {"a": 10.0, "b": 10.0, "c": -1.0}.items():
        actual = gradients.get(name)
        expect(close(actual, expected), f"gradient of {name} is {actual!r}, not {expected}")
    expect("x-request-id" in reply.headers, "the response carries no X-Request-ID")


def check_bad_expression(base_url: str) -> None:
    reply = fetch(base_url, "/v1/gradients", {"expression": "2a", "bindings": {}})
    expect_status(reply, 422, "application/problem+json")
    problem = reply.json()
    expect(isinstance(problem, dict) and "title" in problem, f"not a problem: {problem!r}")
    expect(problem.get("status", 422) == 422, f"problem status {problem.get('status')!r}")


def check_sweep_plot(base_url: str) -> None:
    # matplotlib and its font cache are in the image: the GET form an <img> uses draws a plot.
    url = "/v1/sweep?expression=x*tanh(x)&vary=x:-3:3:50&bind=x:1"
    reply = fetch(base_url, url)
    expect_status(reply, 200, "image/svg+xml")
    expect(b"<svg" in reply.body, "the plot is not an SVG document")
    if "x-cache-status" in reply.headers:  # behind nginx (nginx/plots.conf): kept, drawn once
        again = fetch(base_url, url)
        expect(again.headers["x-cache-status"] == "HIT", f"not kept: {again.headers}")
        expect(again.body == reply.body, "the kept plot differs from the one drawn")
        expect(again.headers["x-request-id"] != reply.headers["x-request-id"], "a kept request id")


def check_graph_svg(base_url: str) -> None:
    # Graphviz is in the image: without it this is a 501 problem.
    payload = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}, "format": "svg"}
    reply = fetch(base_url, "/v1/gradients", payload)
    expect_status(reply, 200, "image/svg+xml")
    expect(b"data 2.0000" in reply.body, "the drawing has no record for a")


def check_openapi_json(base_url: str) -> None:
    reply = fetch(base_url, "/openapi.json")
    expect_status(reply, 200, "application/json")
    spec = reply.json()
    expect("openapi" in spec, "the spec has no `openapi` key")
    expect("/v1/gradients" in spec.get("paths", {}), "the spec does not describe /v1/gradients")


def check_openapi_yaml(base_url: str) -> None:
    reply = fetch(base_url, "/openapi.yaml")
    expect(reply.status == 200, f"/openapi.yaml answered {reply.status}")
    expect(b"openapi:" in reply.body, "/openapi.yaml has no `openapi:` key")


def check_docs(base_url: str) -> None:
    reply = fetch(base_url, "/docs")
    expect_status(reply, 200, "text/html")


def round_robin_check(replicas: int) -> Callable[[str], None]:
    """Behind nginx, consecutive requests are answered by each of the `replicas` in turn."""

    def check(base_url: str) -> None:
        answers = [
            fetch(base_url, "/healthz").headers.get("x-upstream") for _ in range(2 * replicas)
        ]
        expect(None not in answers, "a response carries no X-Upstream header")
        expect(len(set(answers)) == replicas, f"expected {replicas} upstreams, got {answers}")
        # A replica's name (its host name), not an address such as 172.18.0.3:8000.
        addresses = [a for a in answers if a and re.fullmatch(r"[0-9.:\[\]a-f]*:[0-9]+", a)]
        expect(not addresses, f"X-Upstream names addresses, not replicas: {addresses}")

    return check


CHECKS: dict[str, Callable[[str], None]] = {
    "GET /healthz answers ok": check_health,
    "POST /v1/gradients: (a + b) * c": check_lesson_example,
    "POST /v1/gradients: `2a` is a 422 problem": check_bad_expression,
    "GET /v1/sweep draws a plot (matplotlib in the image)": check_sweep_plot,
    "POST /v1/gradients format svg (Graphviz in the image)": check_graph_svg,
    "GET /openapi.json is the spec": check_openapi_json,
    "GET /openapi.yaml is the spec": check_openapi_yaml,
    "GET /docs is Swagger UI": check_docs,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url", nargs="?", default="http://127.0.0.1:8000")
    parser.add_argument("--wait", type=float, default=90.0, help="seconds to wait for /healthz")
    parser.add_argument(
        "--replicas", type=int, default=0, help="behind nginx: expect this many distinct upstreams"
    )
    args = parser.parse_args(argv)
    checks = dict(CHECKS)
    if args.replicas:
        checks[f"round robin over {args.replicas} replicas"] = round_robin_check(args.replicas)

    try:
        wait_until_healthy(args.base_url, args.wait)
    except CheckFailed as error:
        print(f"smoke: FAILED: {error}")
        return 1

    failures = 0
    for name, check in checks.items():
        try:
            check(args.base_url)
            print(f"smoke: ok      {name}")
        except Exception as error:  # any surprise in one check is that check's failure
            failures += 1
            print(f"smoke: FAILED  {name}: {type(error).__name__}: {error}")
    if failures:
        print(f"smoke: {failures} of {len(checks)} checks failed at {args.base_url}")
        return 1
    print(f"smoke: all {len(checks)} checks pass at {args.base_url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
