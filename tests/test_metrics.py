"""GET /metrics: what the operator's scraper reads, in-process and from every gunicorn worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from conftest import LESSON, PROBLEM, make_app
from flask import Flask, Response
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from service.api.metrics import BUDGET_PROBLEM
from service.devserver import Gunicorn
from service.kinds import TYPE_BASE

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape, keyed by its name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(scrape: Samples, name: str, **labels: str) -> float:
    return scrape.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def app() -> Flask:
    app = make_app()

    # Stands in for any view stopped by its time budget: the problem it is answered with.
    def too_expensive() -> Response:
        body = f'{{"type": "{TYPE_BASE}{BUDGET_PROBLEM}", "title": "t", "status": 503}}'
        return Response(body, status=503, mimetype=PROBLEM)

    app.add_url_rule("/test/too-expensive", "too_expensive", too_expensive)
    return app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def scrape(client: FlaskClient) -> Samples:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/plain; version=1.0.0; charset=utf-8"
    return samples(response.get_data(as_text=True))


def test_requests_latency_cache_and_refusals_are_counted(client: FlaskClient) -> None:
    before = scrape(client)
    for _ in range(3):
        assert client.post("/v1/gradients", json=LESSON).status_code == 200
    assert client.post("/v1/gradients", json={"expression": "a +", "bindings": {}}).status_code
    assert client.get("/no/such/page").status_code == 404
    assert client.get("/test/too-expensive").status_code == 503
    assert client.delete("/v1/gradients").status_code == 405
    assert client.open("/v1/gradients", method="BREW").status_code == 405
    assert client.get("/v1//gradients").status_code == 404  # no route: slashes are not merged
    after = scrape(client)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    route = {"endpoint": "/v1/gradients"}
    assert grew("autograd_requests_total", **route, method="POST", status="200") == 3
    assert grew("autograd_requests_total", **route, method="POST", status="422") == 1
    # A path no route matches is one series, whatever the path: scrapers are not flooded.
    assert grew("autograd_requests_total", endpoint="unmatched", method="GET", status="404") == 2
    # A method a route does not allow is counted on the route; a method HTTP has not, as "other".
    assert grew("autograd_requests_total", **route, method="DELETE", status="405") == 1
    assert grew("autograd_requests_total", **route, method="other", status="405") == 1
    assert grew("autograd_request_duration_seconds_count", **route) == 6
    assert grew("autograd_request_duration_seconds_bucket", **route, le="+Inf") == 6
    assert grew("autograd_request_duration_seconds_sum", **route) > 0
    # The same lesson three times: compiled once, then found in the cache twice.
    assert grew("autograd_cache_misses_total") >= 1
    assert grew("autograd_cache_hits_total") >= 2
    assert value(after, "autograd_cache_entries") >= 1
    assert grew("autograd_refusals_total", problem="unexpected-end") == 1
    assert grew("autograd_refusals_total", problem="not-found") == 2
    assert grew("autograd_refusals_total", problem=BUDGET_PROBLEM) == 1
    assert grew("autograd_budget_timeouts_total") == 1


def test_metrics_refuses_other_methods_as_a_problem(client: FlaskClient) -> None:
    response = client.post("/metrics", json=LESSON)
    assert response.status_code == 405
    assert response.mimetype == PROBLEM
    assert response.get_json()["type"] == TYPE_BASE + "method-not-allowed"


# -- every gunicorn worker counts --------------------------------------------------------------


WORKERS = 3


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    # gunicorn.conf.py gives each server a fresh PROMETHEUS_MULTIPROC_DIR of its own.
    with Gunicorn(env={"AUTOGRAD_WORKERS": str(WORKERS)}) as server:
        server.wait_for_workers(WORKERS)
        yield server.url


@pytest.mark.slow
def test_every_worker_counts_in_each_scrape(server: str) -> None:
    sent = 60
    with requests.Session() as session:
        for i in range(sent):
            body = {"expression": f"a * {i % 7} + b", "bindings": {"a": 1, "b": 2}}
            assert session.post(f"{server}/v1/gradients", json=body, timeout=10).ok
    # Sync workers close each connection, so the requests and the scrapes land on different
    # workers; every scrape must still see all the requests.
    totals = set()
    for _ in range(6):
        scrape = samples(requests.get(f"{server}/metrics", timeout=10).text)
        key = {"endpoint": "/v1/gradients", "method": "POST", "status": "200"}
        totals.add(value(scrape, "autograd_requests_total", **key))
        compiled = value(scrape, "autograd_cache_hits_total") + value(
            scrape, "autograd_cache_misses_total"
        )
        assert compiled == sent
    assert totals == {sent}
