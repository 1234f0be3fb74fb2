"""The proxy's own answers are problem documents: `python tests/docker/proxy_problems.py BASE_URL`.

Standard library only; `make test-docker` runs it against the compose stack after the smoke test.
Checks, through nginx: a request past the app's time budget is a 503 problem with Retry-After; a
body far over the limit is nginx's 413 problem; a request line nginx cannot read is a 400 problem
and /metrics a 404 one, in the language asked for; a burst past the per-address rate is a 429
problem with Retry-After; and, with `--server-exec "COMMAND"` (a prefix that runs a program
inside the server's container, e.g. `docker compose exec -T api`), a request whose worker is killed
under it is a 502 problem, not an HTML page. Exits non-zero, saying what failed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shlex
import socket
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

TYPE_BASE = "https://autograd-service.dev/problems/"
# The costliest request within the default limits (loadtest/run.py:worst_expression).
WORST = {
    "expression": "(" + "1 + " * 15_005 + "1) * a" + " / a" * 9_990,
    "bindings": {"a": 1.5},
}


class CheckFailed(Exception):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def request(
    host: str, port: int, method: str, path: str, body: bytes | None = None, timeout: float = 60
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    try:
        connection.request(method, path, body, headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def expect_problem(status: int, headers: dict[str, str], body: bytes, code: int, kind: str) -> dict:
    expect(status == code, f"expected {code}, got {status}: {body[:200]!r}")
    content_type = headers.get("content-type", "")
    expect(content_type == "application/problem+json", f"content type {content_type!r}")
    problem = json.loads(body)
    expect(problem.get("type") == TYPE_BASE + kind, f"type {problem.get('type')!r}, not {kind}")
    expect(problem.get("status") == code and problem.get("title"), f"not a problem: {problem}")
    return problem


def check_budget(host: str, port: int, _: str | None) -> None:
    started = time.monotonic()
    status, headers, body = request(host, port, "POST", "/v1/gradients", json.dumps(WORST).encode())
    if status == 200:  # the work fits the budget on this machine: nothing to refuse
        return
    expect_problem(status, headers, body, 503, "request-too-expensive")
    expect("retry-after" in headers, "no Retry-After on the 503")
    expect(time.monotonic() - started < 20, "the budget did not stop the work")


def check_body_too_large(host: str, port: int, _: str | None) -> None:
    # Far over nginx's client_max_body_size: refused from the Content-Length, before any body.
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/gradients HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 50000000\r\n\r\n"
        )
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    expect_problem(int(lines[0].split()[1]), headers, body, 413, "body-too-large")


def _raw_reply(host: str, port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """`request` sent as it is; the status, headers and body nginx answers before it closes."""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def check_unreadable_requests(host: str, port: int, _: str | None) -> None:
    # A request line nginx cannot read, and a path of nginx's own (/metrics): problems too.
    status, headers, body = _raw_reply(host, port, b"GARBAGE\r\n\r\n")
    expect_problem(status, headers, body, 400, "bad-request")
    status, headers, body = _raw_reply(
        host,
        port,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Language: et\r\nConnection: close\r\n\r\n",
    )
    problem = expect_problem(status, headers, body, 404, "not-found")
    expect(problem["title"] == "Ei leitud", f"the 404 is not in Estonian: {problem}")


def check_rate_limit(host: str, port: int, _: str | None) -> None:
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        for _ in range(200):  # one keep-alive connection, as fast as nginx answers
            # In the language asked for, as the app's own problems are (service/proxy.py).
            connection.request("GET", "/healthz", headers={"Accept-Language": "ru-RU,en;q=0.5"})
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                headers = {k.lower(): v for k, v in response.getheaders()}
                problem = expect_problem(response.status, headers, body, 429, "too-many-requests")
                expect(headers.get("retry-after") == "1", "no Retry-After on the 429")
                expect(headers.get("content-language") == "ru", "the 429 is not in Russian")
                expect(problem["title"] == "Слишком много запросов", f"title {problem['title']!r}")
                return
        raise CheckFailed("200 requests at once were never limited")
    finally:
        connection.close()
        time.sleep(3)  # the per-address rate refills before the next check


# Run inside the server's container: says "ready", then on a line from stdin SIGKILLs every
# worker (each child of gunicorn, its PID 1) at once. Starting it ahead of the request pays the
# seconds `docker compose exec` takes to start before the request, not while it runs.
KILLER = """
import os, signal, sys
print("ready", flush=True)
sys.stdin.readline()
workers = [int(p) for p in os.listdir("/proc") if p.isdigit()
           and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1] == "1"]
for pid in workers:
    os.kill(pid, signal.SIGKILL)
print(len(workers), flush=True)
"""
# When the kill fires after the request was sent: the request is then in its worker (nginx has
# passed on its 100 KB body) and, at about half a second of work, still far from done. Later
# tries fire sooner, in case this machine is faster.
KILL_AFTER_S = (0.2, 0.1, 0.05)


def check_dead_worker(host: str, port: int, server_exec: str | None) -> None:
    if not server_exec:
        return
    heavy = json.dumps(WORST).encode()
    for delay in KILL_AFTER_S:
        killer = subprocess.Popen(
            [*shlex.split(server_exec), "python", "-c", KILLER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert killer.stdin is not None and killer.stdout is not None
        answers: list[tuple[int, dict[str, str], bytes]] = []
        killed = ""
        try:
            started = killer.stdout.readline().strip() == "ready"
            if started:

                def send(into: list = answers) -> None:
                    into.append(request(host, port, "POST", "/v1/gradients", heavy))

                sender = threading.Thread(target=send)
                sender.start()
                time.sleep(delay)
                killer.stdin.write("kill\n")
                killer.stdin.flush()
                killed = killer.stdout.readline().strip()
                sender.join(timeout=60)
        finally:
            killer.kill()
            errors = killer.communicate(timeout=10)[1]
        expect(started, f"the killer did not start: {errors.strip()!r}")
        expect(killed.isdigit() and int(killed) > 0, f"no worker was killed ({killed!r})")
        expect(bool(answers), "no answer to the request whose worker was killed")
        if answers[0][0] != 200:
            expect_problem(*answers[0], 502, "bad-gateway")
            return
        time.sleep(2)  # the killed workers are replaced
    raise CheckFailed("the request was always answered before its worker was killed")


CHECKS = {
    "a request past its time budget is a 503 problem": check_budget,
    "nginx's own 413 is a problem": check_body_too_large,
    "a request nginx cannot read, and /metrics, are problems": check_unreadable_requests,
    "a burst past the per-address rate is a 429 problem": check_rate_limit,
    "a worker killed mid-request is a 502 problem": check_dead_worker,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    parser.add_argument("--server-exec", help="a command prefix that runs a program in the server")
    args = parser.parse_args(argv)
    url = urlsplit(args.base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    failures = 0
    for name, check in CHECKS.items():
        try:
            check(host, port, args.server_exec)
            print(f"proxy: ok      {name}")
        except Exception as error:  # any surprise in one check is that check's failure
            failures += 1
            print(f"proxy: FAILED  {name}: {type(error).__name__}: {error}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
