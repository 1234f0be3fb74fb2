"""The playground in a real browser: Debian's chromium driven by Playwright, against gunicorn.

`make test-browser` runs these; a plain `pytest` leaves them out unless PLAYGROUND_BROWSER_TESTS
is set, since they need chromium on the machine (`apt-get install chromium`).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from service.devserver import Gunicorn

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("PLAYGROUND_SCREENSHOTS") or ROOT / "docs" / "screenshots")

if not os.environ.get("PLAYGROUND_BROWSER_TESTS"):
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def base_url() -> Iterator[str]:
    """A live gunicorn serving the app on loopback, as in production."""
    with Gunicorn(env={"AUTOGRAD_WORKERS": "2"}, keep_access_log=False) as server:
        yield server.url


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail("chromium is not installed: `apt-get install chromium` (Debian) provides it")
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    # Root (as in CI) cannot use chromium's sandbox; everyone else keeps it.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=args)
        yield browser
        browser.close()


@dataclass
class Visit:
    """A browser tab on the playground, with everything it logged and every request it sent."""

    page: Any
    base_url: str
    errors: list[str] = field(default_factory=list)
    requests: list[Any] = field(default_factory=list)

    def open(self, query: str = "") -> Visit:
        self.page.goto(f"{self.base_url}/{query}")
        self.wait_for_graph()
        return self

    def wait_for_graph(self) -> None:
        self.page.wait_for_selector("#graph .node", timeout=15_000)
        self.until("document.querySelector('#result').textContent !== ''")

    def until(self, condition: str, timeout: float = 10) -> None:
        """Waits for a JavaScript condition. Playwright's wait_for_function would run it with
        eval, which the page's Content-Security-Policy (rightly) refuses."""
        deadline = time.monotonic() + timeout
        while not self.page.evaluate(condition):
            if time.monotonic() > deadline:
                raise AssertionError(f"still false after {timeout} s: {condition}")
            self.page.wait_for_timeout(50)

    def step_in_url(self) -> str | None:
        return self.page.evaluate("new URLSearchParams(location.search).get('step')")

    def card(self, title: str) -> Any:
        exact = re.compile(f"^{re.escape(title)}$")
        return self.page.locator("#graph .node").filter(
            has=self.page.locator(".card-title", has_text=exact)
        )

    def value(self, title: str) -> str:
        return self.card(title).locator(".card-value").first.text_content() or ""

    def grad(self, title: str) -> str:
        return self.card(title).locator(".card-grad").first.text_content() or ""

    def grads(self) -> dict[str, str]:
        return self.page.eval_on_selector_all(
            "#graph .node",
            """cards => Object.fromEntries(cards.map(c => [
                c.querySelector('.card-title').textContent,
                c.querySelector('.card-grad').textContent,
            ]))""",
        )

    def edge_labels(self) -> list[str]:
        return self.page.eval_on_selector_all(
            "#graph .edge-label.shown text", "labels => labels.map(l => l.textContent)"
        )

    def screenshot(self, name: str, full_page: bool = False) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / name
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def foreign_requests(self) -> list[str]:
        origin = urlsplit(self.base_url)[:2]
        return [r.url for r in self.requests if urlsplit(r.url)[:2] != origin]


@pytest.fixture
def visit(browser: Any, base_url: str, request: pytest.FixtureRequest) -> Iterator[Visit]:
    marker = request.node.get_closest_marker("viewport")
    width, height = marker.args if marker else (1280, 800)
    context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
    page = context.new_page()
    tab = Visit(page, base_url)
    page.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: tab.errors.append(f"uncaught: {e}"))
    page.on("request", lambda r: tab.requests.append(r))
    yield tab
    context.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "viewport(width, height): the browser window's size")
