"""The deployment files, read without Docker: compose, nginx's limits and its problem pages."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from service import proxy
from service.i18n import DEFAULT_LOCALE, LOCALES, negotiate
from service.kinds import KINDS, PROXY_KINDS, type_uri

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
NGINX = (ROOT / "deploy" / "nginx.conf").read_text()
LIMITS = (ROOT / "deploy" / "nginx" / "limits.conf").read_text()
ERRORS = (ROOT / "deploy" / "nginx" / "errors.conf").read_text()


def _directives(text: str) -> dict[str, str]:
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return {d.split()[0]: d.rstrip(";") for d in lines if d.endswith(";")}


def test_the_default_stack_serves_through_nginx_and_hides_gunicorn() -> None:
    default = {name for name, service in SERVICES.items() if not service.get("profiles")}
    assert default == {"api", "proxy"}
    assert "ports" not in SERVICES["api"]
    assert "ports" not in SERVICES["api-replica"]
    assert SERVICES["proxy"]["ports"] == ["${AUTOGRAD_HTTP_PORT:-8000}:8080"]
    assert SERVICES["proxy-scale"]["ports"] == ["${AUTOGRAD_SCALE_HTTP_PORT:-8080}:8080"]
    # gunicorn's networks are internal: nothing outside the compose project reaches it.
    for name in ("api", "api-replica"):
        for network in SERVICES[name]["networks"]:
            assert COMPOSE["networks"][network]["internal"] is True


def test_each_image_is_built_once() -> None:
    builders = {name for name, service in SERVICES.items() if "build" in service}
    assert builders == {"api", "proxy"}
    assert SERVICES["api-replica"]["image"] == SERVICES["api"]["image"]
    assert SERVICES["proxy-scale"]["image"] == SERVICES["proxy"]["image"]
    for name in ("api-replica", "proxy-scale"):
        assert SERVICES[name]["pull_policy"] == "never"


def test_the_scale_proxy_reaches_only_the_replicas() -> None:
    # Both proxies ask for `api`: on the scale network that name means the replicas.
    assert "server api:8000" in NGINX
    assert SERVICES["api-replica"]["networks"]["scale"]["aliases"] == ["api"]
    assert "scale" in SERVICES["proxy-scale"]["networks"]
    assert "backend" not in SERVICES["proxy-scale"]["networks"]
    assert "scale" not in SERVICES["proxy"]["networks"]


def test_one_documented_command_stops_everything() -> None:
    command = "docker compose --profile scale down"
    assert command in (ROOT / "docker-compose.yml").read_text()
    assert command in (ROOT / "README.md").read_text()


def test_nginx_includes_the_limits_and_the_problem_pages() -> None:
    assert "include /etc/nginx/autograd/limits.conf;" in NGINX
    assert "include /etc/nginx/autograd/errors.conf;" in NGINX
    assert "COPY nginx/ /etc/nginx/autograd/" in (ROOT / "deploy" / "nginx.Dockerfile").read_text()


def test_the_limits_bound_slow_and_greedy_clients() -> None:
    directives = _directives(LIMITS)
    for name in ("client_header_timeout", "client_body_timeout", "send_timeout"):
        seconds = int(re.fullmatch(rf"{name} (\d+)s", directives[name]).group(1))
        assert 0 < seconds <= 10
    assert directives["limit_conn"].startswith("limit_conn autograd_connections ")
    assert directives["limit_req"].startswith("limit_req zone=autograd_requests ")
    assert "$binary_remote_addr" in directives["limit_conn_zone"]
    assert "$binary_remote_addr" in directives["limit_req_zone"]
    assert directives["limit_conn_status"].endswith(" 429")
    assert directives["limit_req_status"].endswith(" 429")
    assert directives["proxy_request_buffering"].endswith(" on")
    assert directives["proxy_buffering"].endswith(" on")


def test_nginx_passes_the_apps_own_problems_through() -> None:
    # Intercepting would replace the app's 413, 500 and 503 problems with nginx's pages.
    assert "proxy_intercept_errors on" not in NGINX + LIMITS + ERRORS


def test_nginx_waits_longer_than_gunicorn() -> None:
    read_timeout = int(re.search(r"proxy_read_timeout (\d+)s;", NGINX).group(1))
    assert read_timeout > 30  # gunicorn's worker timeout at the default budget


PAGES = re.findall(r"return (\d+) '(\{.*\})';", ERRORS)


def _nginx_string(quoted: str) -> str:
    """A single-quoted nginx string's text: nginx reads `\\\\` and `\\'` as escapes."""
    return re.sub(r"\\(.)", r"\1", quoted)


@pytest.mark.parametrize(
    "status", [400, 404, 405, 408, 413, 414, 429, 500, 501, 502, 503, 504, 505]
)
def test_nginx_answers_its_own_errors_with_problems(status: int) -> None:
    # An internal location, not a named one: nginx can hand a request whose request line it
    # could not read only to a URI.
    target = re.search(rf"^error_page {status} (?:=\d+ )?(/[\w/-]+);", ERRORS, re.M).group(1)
    block = re.search(rf"location = {target} \{{(.*?)\n\}}", ERRORS, re.DOTALL).group(1)
    assert "internal;" in block
    assert "default_type application/problem+json;" in block
    assert "add_header Content-Language $problem_language always;" in block
    # English is set first, as the default; each other language where its `if` returns.
    default, *others = re.findall(r"set \$problem_language (\w+);", block)
    answers = re.findall(r"return (\d+) '((?:[^'\\]|\\.)*)';", block)
    assert sorted([default, *others]) == sorted(LOCALES)
    details = {}
    for locale, (code, quoted) in zip([*others, default], answers, strict=True):
        problem = json.loads(_nginx_string(quoted).replace("$request_id", "0" * 32))
        kind = problem["type"].rsplit("/", 1)[1]
        assert problem["type"] == type_uri(kind)
        expected_status, title = {**KINDS, **PROXY_KINDS}[kind]
        assert (int(code), problem["title"]) == (expected_status, title.translate(locale))
        assert problem["status"] == int(code)
        details[locale] = problem["detail"]
    assert all(details.values()) and len(set(details.values())) == len(LOCALES)  # translated
    if status in (429, 502, 503, 504):
        assert re.search(r"add_header Retry-After \d+ always;", block)


def test_the_proxys_pages_are_rendered_from_the_catalogues() -> None:
    # `python -m service.proxy deploy/nginx/errors.conf` (make translations) writes the file.
    assert proxy.render() == ERRORS


@pytest.mark.parametrize(
    "header",
    [
        "", "ru", "RU", "ru-RU", "ru_RU", "ru;q=0.8", "et-EE,et;q=0.9", "en-US,en;q=0.9,ru;q=0.8",
        "ru-RU,ru;q=0.9,en-US;q=0.8", "de-DE, et;q=0.5", "fr, de", "*", "rue", "etc, ru", "  ru ",
        "de,fr,it,et", "fi, ET-ee", "en, et", "x-ru, ru", "ru;q=0, et", "et;q=0.0,ru",
        "en;q=0, ru", "x, ru;q=0", "ru;q=0.5, et", "ru; q = 0 , et",
    ],
)  # fmt: skip
def test_the_proxy_picks_the_language_the_app_would(header: str) -> None:
    # Clients list languages in order of preference: the first the service speaks is chosen,
    # passing over any the client refuses (q=0).
    items = [item.split(";") for item in header.split(",")]
    refused = [any(re.fullmatch(r"\s*q\s*=\s*0(\.0*)?\s*", p) for p in rest) for _, *rest in items]
    tags = [tag.strip() for (tag, *_), no in zip(items, refused, strict=True) if not no]
    expected = negotiate(tag for tag in tags if tag)
    matched = [locale for locale in LOCALES if re.search(proxy.first_spoken(locale), header, re.I)]
    assert (matched[0] if matched and matched[0] != DEFAULT_LOCALE else DEFAULT_LOCALE) == expected
    assert len(matched) <= 1


def test_every_proxy_kind_has_a_page() -> None:
    kinds = {json.loads(d.replace("$request_id", ""))["type"] for _, d in PAGES}
    assert {type_uri(kind) for kind in PROXY_KINDS} <= kinds


# A request to each endpoint, in a language of its own (ru writes decimal commas).
RUNTIME_REQUESTS = [
    ("/v1/gradients", {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}),
    ("/v1/graph", {"expression": "y = Value(2.0)\nz = y * y"}),
    ("/v1/derivatives", {"expression": "relu(a * b)", "bindings": {"a": 2, "b": 3}}),
    ("/v1/sweep", {"expression": "x * x",
                   "vary": [{"name": "x", "from": -1, "to": 1, "points": 5}]}),
    ("/v1/check", {"expression": "a * b", "bindings": {"a": 0.5, "b": 2},
                   "answers": {"value": "1,0", "derivatives": {"a": "b"}}}),
    ("/v1/exercises", {"seed": 7, "level": 2}),
]  # fmt: skip


def test_the_service_answers_without_the_packages_only_tests_use() -> None:
    """The image installs the runtime dependencies alone: nothing the app's POST endpoints do
    may import a package of the `test` extra (Babel compiles the catalogues at build time)."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [
        re.split(r"[<>=~!\[; ]", requirement)[0]
        for requirement in extra["optional-dependencies"]["test"]
    ]
    modules = [name.lower().replace("-", "_") for name in names] + ["xdist"]
    script = f"""
import sys
for name in {modules!r}:
    sys.modules[name] = None  # importing it fails, as in the image
from service.app import create_app
client = create_app().test_client()
for path, body in {RUNTIME_REQUESTS!r}:
    response = client.post(path, json=body, headers={{"Accept-Language": "ru"}})
    assert response.status_code == 200, (path, response.get_json())
    if path == "/v1/check":  # the value 1,0 as a Russian learner writes it
        assert response.get_json()["results"][0]["verdict"] == "correct"
"""
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=120)
