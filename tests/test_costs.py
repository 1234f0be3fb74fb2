"""What one request may cost: the time budget, the heavy-request slots and the response size cap."""

from __future__ import annotations

import fcntl
import io
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import COSTLY, LESSON, LESSON_VALUE, make_app, needs_dot

from service.api import costs
from service.api.config import DEFAULTS, SETTINGS
from service.app import create_app
from service.budget import time_budget
from service.errors import BudgetExceeded
from service.kinds import KINDS

# Heavy by its size (20 KB), whatever the work: spaces cost the parser next to nothing.
HEAVY = {"expression": "a" + " " * 20_000, "bindings": {"a": 1}}


def _problem(response, status: int, kind: str) -> dict:
    assert response.status_code == status, response.data[:300]
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["type"].endswith(f"/problems/{kind}")
    assert body["status"] == status
    assert (status, body["title"]) == KINDS[kind]
    return body


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A server of three workers, as gunicorn.conf.py makes it: two slots for heavy requests."""
    monkeypatch.setattr(costs, "SERVER", costs.Server())
    costs.join_server(str(tmp_path), 3)
    yield tmp_path


def _hold(directory: Path, slot: int) -> object:
    handle = (directory / f"heavy-{slot}").open("ab")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def test_the_budget_is_a_setting_of_five_seconds() -> None:
    assert DEFAULTS["REQUEST_BUDGET"] == 5
    assert "REQUEST_BUDGET" in SETTINGS


def test_the_budget_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOGRAD_REQUEST_BUDGET", "2.5")
    assert create_app().extensions[costs.EXTENSION].budget_s == 2.5


@pytest.mark.parametrize("value", [-1, "soon", True])
def test_a_bad_budget_stops_the_app(value: object) -> None:
    with pytest.raises(ValueError, match="AUTOGRAD_REQUEST_BUDGET"):
        create_app({"REQUEST_BUDGET": value})


@pytest.mark.parametrize("path", ["/v1/gradients", "/v1/graph"])
def test_work_past_the_budget_is_a_503_and_the_app_goes_on(path: str) -> None:
    app = make_app(REQUEST_BUDGET=0.02)
    client = app.test_client()
    response = client.post(
        path, json=COSTLY if path.endswith("gradients") else {"expression": COSTLY["expression"]}
    )
    body = _problem(response, 503, "request-too-expensive")
    assert "0.02 s" in body["detail"]
    assert response.headers["Retry-After"] == "1"
    assert response.headers["X-Request-ID"]
    assert client.post("/v1/gradients", json=LESSON).get_json()["value"] == LESSON_VALUE


def test_retry_after_is_whole_seconds() -> None:
    assert [costs.retry_after(s) for s in (0.05, 1, 2.5, 5)] == ["1", "1", "3", "5"]


def test_a_budget_of_zero_turns_it_off() -> None:
    app = make_app(REQUEST_BUDGET=0)
    assert app.test_client().post("/v1/gradients", json=LESSON).status_code == 200


def test_without_a_server_every_heavy_request_is_admitted() -> None:
    client = make_app().test_client()
    assert client.post("/v1/gradients", json=HEAVY).status_code == 200


@pytest.mark.parametrize(
    ("language", "detail"),
    [
        ("en", "the service is busy with 1 other large request;"),
        ("ru", "сервис уже обрабатывает 1 другой большой запрос;"),
        ("et", "teenus on hõivatud 1 teise suure päringuga;"),
    ],
)
def test_one_busy_slot_is_told_in_the_singular(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, language: str, detail: str
) -> None:
    """Two workers, one slot for heavy requests: the busy sentence counts one request."""
    monkeypatch.setattr(costs, "SERVER", costs.Server())
    costs.join_server(str(tmp_path), 2)
    held = _hold(tmp_path, 0)
    response = (
        make_app()
        .test_client()
        .post("/v1/gradients", json=HEAVY, headers={"Accept-Language": language})
    )
    assert response.status_code == 503
    assert response.get_json()["detail"].startswith(detail)
    held.close()


def test_heavy_requests_wait_for_no_slot_but_are_refused(server: Path) -> None:
    client = make_app().test_client()
    held = [_hold(server, 0), _hold(server, 1)]  # two other workers serve heavy requests
    response = client.post("/v1/gradients", json=HEAVY)
    body = _problem(response, 503, "service-busy")
    assert "2 other large requests" in body["detail"]
    assert response.headers["Retry-After"] == "1"
    # The small requests of a lesson and the health check are never held back.
    assert client.post("/v1/gradients", json=LESSON).status_code == 200
    assert client.get("/healthz").status_code == 200
    held.pop().close()  # one slot frees up
    assert client.post("/v1/gradients", json=HEAVY).status_code == 200
    # The slot is given back after the request: it can be taken again.
    assert client.post("/v1/gradients", json=HEAVY).status_code == 200


@needs_dot
def test_a_small_request_drawn_as_svg_takes_a_slot(server: Path) -> None:
    """Graphviz may take seconds on a graph of a few hundred nodes, however short its text."""
    client = make_app().test_client()
    drawn = {**LESSON, "format": "svg"}
    held = [_hold(server, 0), _hold(server, 1)]
    _problem(client.post("/v1/gradients", json=drawn), 503, "service-busy")
    graph = {"expression": LESSON["expression"], "format": "svg"}
    _problem(client.post("/v1/graph", json=graph), 503, "service-busy")
    # The same request answered as JSON, dot or mermaid draws nothing: it needs no slot.
    for kind in ("json", "dot", "mermaid"):
        assert client.post("/v1/gradients", json={**LESSON, "format": kind}).status_code == 200
    held.pop().close()
    response = client.post("/v1/gradients", json=drawn)
    assert response.status_code == 200
    assert response.mimetype == "image/svg+xml"


@needs_dot
def test_a_heavy_request_drawn_as_svg_takes_one_slot(server: Path) -> None:
    held = _hold(server, 0)  # one of the two slots: the request's own body takes the other
    response = make_app().test_client().post("/v1/gradients", json={**HEAVY, "format": "svg"})
    assert response.status_code == 200
    held.close()


def test_a_chunked_heavy_body_counts_as_heavy(server: Path) -> None:
    client = make_app(HEAVY_REQUEST_BYTES=64).test_client()
    held = [_hold(server, 0), _hold(server, 1)]
    body = b'{"expression": "a + b + a + b + a + b + a", "bindings": {"a": 1, "b": 2}}'
    response = client.post(
        "/v1/gradients",
        input_stream=io.BytesIO(body),
        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},  # as gunicorn says of chunked bodies
    )
    _problem(response, 503, "service-busy")
    del held


def test_a_slot_is_freed_when_its_worker_dies(server: Path) -> None:
    client = make_app().test_client()
    _keep = _hold(server, 0)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'ab');"
            "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)",
            str(server / "heavy-1"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout.readline().strip() == "locked"
        assert client.post("/v1/gradients", json=HEAVY).status_code == 503
        worker.kill()  # SIGKILL: no code of its own runs, the kernel drops the lock
        worker.wait(timeout=10)
        assert client.post("/v1/gradients", json=HEAVY).status_code == 200
    finally:
        worker.kill()
        worker.wait(timeout=10)


def test_an_explicit_slot_count_overrides_the_workers(server: Path) -> None:
    client = make_app(HEAVY_REQUEST_SLOTS=3).test_client()
    held = [_hold(server, 0), _hold(server, 1)]
    assert client.post("/v1/gradients", json=HEAVY).status_code == 200
    del held


def test_the_operations_report_the_slots_in_force(server: Path) -> None:
    def reported(**config: object) -> object:
        document = make_app(**config).test_client().get("/v1/operations").get_json()
        return document["settings"]["heavy_request_slots"]

    assert reported() == 2  # one fewer than the server's three workers
    assert reported(HEAVY_REQUEST_SLOTS=5) == 5


def test_without_a_server_the_operations_report_the_setting() -> None:
    document = make_app().test_client().get("/v1/operations").get_json()
    assert document["settings"]["heavy_request_slots"] == 0


def test_a_response_over_the_cap_is_refused() -> None:
    client = make_app(MAX_RESPONSE_BYTES=500).test_client()
    response = client.post("/v1/gradients", json=LESSON)
    body = _problem(response, 422, "response-too-large")
    assert body["limit"] == "max_response_bytes"
    assert body["maximum"] == 500
    assert client.get("/healthz").status_code == 200  # small responses are untouched


@pytest.mark.parametrize("path", ["/openapi.json", "/openapi.yaml", "/docs", "/metrics",
                                  "/v1/operations", "/healthz", "/playground"])  # fmt: skip
def test_the_services_own_documents_are_never_capped(path: str) -> None:
    # Their size does not follow the client's input: a cap far below them leaves them whole.
    client = make_app(MAX_RESPONSE_BYTES=10).test_client()
    client.post("/v1/gradients", json=LESSON)  # /metrics has something to report
    response = client.get(path)
    assert response.status_code == 200, response.get_data()[:300]
    assert len(response.data) > 10


@pytest.mark.slow
def test_the_default_response_cap_holds_the_largest_response() -> None:
    # The largest response at the default limits (docs/SECURITY.md): a product at the node limit,
    # every value and gradient a 17-digit float. The default cap never refuses it.
    client = make_app(REQUEST_BUDGET=0).test_client()
    product = {"expression": "*".join(["a"] * 19_990), "bindings": {"a": 0.9999999999999999}}
    response = client.post("/v1/gradients", json=product)
    assert response.status_code == 200
    assert 10_000_000 < len(response.data) < DEFAULTS["MAX_RESPONSE_BYTES"]


class _SlowFinalizer:
    """Its `__del__` outlives a short budget, so the budget's exception is raised inside it,
    where Python only prints it: the one place an exception is always lost."""

    def __del__(self) -> None:
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_lost_budget_exception_is_raised_again() -> None:
    started = time.monotonic()
    with pytest.raises(BudgetExceeded), time_budget(0.1):
        _SlowFinalizer()  # dropped at once; the alarm fires in its `__del__`
        while time.monotonic() - started < 5:  # ends without an exception unless one comes
            pass


def test_a_swallowed_budget_exception_is_raised_again() -> None:
    started = time.monotonic()
    with pytest.raises(BudgetExceeded), time_budget(0.1):
        try:
            while time.monotonic() - started < 0.4:
                pass
        except BudgetExceeded:
            pass  # as a broad `except` in library code would
        while time.monotonic() - started < 5:  # ends without an exception unless one comes
            pass


@pytest.mark.slow
def test_a_timer_set_before_the_budget_is_put_back() -> None:
    fired: list[float] = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        started = time.monotonic()
        with time_budget(2):
            time.sleep(0.1)
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0.2  # about 0.4 s left
        time.sleep(1)
        assert len(fired) == 1
        assert 0.4 < fired[0] - started < 0.9
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
