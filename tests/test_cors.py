"""CORS: browsers on other origins may call the API, and preflights say what a route takes."""

from __future__ import annotations

import pytest
from conftest import LESSON
from flask.testing import FlaskClient

from service.api.config import ConfigurationError
from service.app import create_app


def test_cors_allows_any_origin_by_default_without_credentials(client: FlaskClient) -> None:
    response = client.post("/v1/gradients", json=LESSON, headers={"Origin": "https://lms.example"})
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert "X-Request-ID" in response.headers["Access-Control-Expose-Headers"]
    assert "Access-Control-Allow-Credentials" not in response.headers


def test_cors_preflight_is_answered_and_cached(client: FlaskClient) -> None:
    response = client.options(
        "/v1/gradients",
        headers={
            "Origin": "https://lms.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "Content-Type",
        },
    )
    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in response.headers["Access-Control-Allow-Methods"]
    assert int(response.headers["Access-Control-Max-Age"]) > 0


@pytest.mark.parametrize(
    ("path", "method", "methods"),
    [
        ("/v1/gradients", "POST", {"OPTIONS", "POST"}),
        ("/v1/graph", "POST", {"OPTIONS", "POST"}),
        ("/v1/operations", "GET", {"GET", "HEAD", "OPTIONS"}),
        ("/healthz", "GET", {"GET", "HEAD", "OPTIONS"}),
        ("/v1/check", "POST", {"OPTIONS", "POST"}),
        ("/v1/exercises", "POST", {"OPTIONS", "POST"}),
        # two routes at one path: a sweep's body, or the plot a URL asks for
        ("/v1/sweep", "GET", {"GET", "HEAD", "OPTIONS", "POST"}),
    ],
)
def test_a_preflight_offers_only_the_routes_methods(
    client: FlaskClient, path: str, method: str, methods: set[str]
) -> None:
    response = client.options(
        path, headers={"Origin": "https://lms.example", "Access-Control-Request-Method": method}
    )
    offered = {m.strip() for m in response.headers["Access-Control-Allow-Methods"].split(",")}
    assert offered == methods
    # The same methods a 405 lists in its Allow header.
    refused = client.delete(path)
    assert {m.strip() for m in refused.headers["Allow"].split(",")} == methods


def test_cors_origins_can_be_restricted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOGRAD_CORS_ORIGINS", "https://a.example, https://b.example")
    client = create_app({"TESTING": True}).test_client()
    allowed = client.get("/healthz", headers={"Origin": "https://b.example"})
    refused = client.get("/healthz", headers={"Origin": "https://evil.example"})
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://b.example"
    assert "Access-Control-Allow-Origin" not in refused.headers
    assert refused.status_code == 200  # CORS is the browser's to enforce
    # Each answer depends on the Origin, so a cache keeps one per origin, the refused one too;
    # a request without one (a script, a cache filling itself) is named no origin.
    unnamed = client.get("/healthz")
    for response in (allowed, refused, unnamed):
        assert "Origin" in response.vary
    assert "Access-Control-Allow-Origin" not in unnamed.headers


def test_listed_origins_match_as_written_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOGRAD_CORS_ORIGINS", "http://[::1]:8080,HTTPS://Lessons.example")
    client = create_app({"TESTING": True}).test_client()
    for origin in ("http://[::1]:8080", "https://lessons.example"):
        response = client.get("/healthz", headers={"Origin": origin})
        assert response.headers["Access-Control-Allow-Origin"] == origin
        assert response.headers.getlist("Vary") == ["Accept-Language, Origin"]  # said once
    for origin in ("http://[::1]:80801", "http://1", "https://lessons.example.evil"):
        response = client.get("/healthz", headers={"Origin": origin})
        assert "Access-Control-Allow-Origin" not in response.headers


@pytest.mark.parametrize(
    "origins",
    [
        "https://a.example/",
        "a.example",
        "https://a.example/lessons",
        "https://a.example, *",
        "https://(a|b).example",  # as a pattern, it would let https://a.example.evil in
        "https://*.a.example",
        "https://user@a.example",
        "https://a.example:443",  # browsers leave the scheme's own port out
        "http://a.example:99999",
        "",  # an unset variable in a compose file: no page could call
        " , ",
        "null",
    ],
)
def test_an_origin_no_browser_sends_stops_the_service_at_start_up(
    monkeypatch: pytest.MonkeyPatch, origins: str
) -> None:
    monkeypatch.setenv("AUTOGRAD_CORS_ORIGINS", origins)
    with pytest.raises(ConfigurationError, match="AUTOGRAD_CORS_ORIGINS must be"):
        create_app({"TESTING": True})
