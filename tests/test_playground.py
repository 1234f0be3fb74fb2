"""The playground page as files: served at / and /playground, every asset from the service itself.

What the page does is tested in a real browser (tests/browser, `make test-browser`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from service.api.examples import SHIPPING_PROGRAM
from service.api.playground import PAGE_FOLDER
from service.app import create_app

MODULES = sorted((PAGE_FOLDER / "js").glob("*.js"))
# Text in the page's files that would make the browser ask another host.
ELSEWHERE = re.compile(r"""(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}""", re.IGNORECASE)
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


@pytest.fixture
def client() -> FlaskClient:
    return create_app().test_client()


@pytest.mark.parametrize("path", ["/", "/playground"])
def test_the_page_is_served_with_a_same_origin_policy(client: FlaskClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    policy = response.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self';" in policy  # no inline script, no eval
    assert "style-src 'self';" in policy  # no inline style
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert b'<script type="module" src="/playground/static/js/main.js">' in response.data


def test_every_asset_the_page_names_is_served(client: FlaskClient) -> None:
    html = client.get("/").get_data(as_text=True)
    assets = re.findall(r'(?:src|href)="(/[^"]+)"', html)
    assert {"/playground/static/playground.css", "/playground/static/js/main.js"} <= set(assets)
    for asset in assets:
        if asset == "/docs":
            continue
        response = client.get(asset)
        assert response.status_code == 200, asset
        assert response.headers["Content-Security-Policy"]


def test_every_module_import_resolves_to_a_served_module(client: FlaskClient) -> None:
    assert len(MODULES) >= 6
    for module in MODULES:
        source = module.read_text()
        for target in re.findall(r'from "(\./[^"]+)"', source):
            path = (module.parent / target).resolve()
            assert path.exists(), f"{module.name} imports {target}"
            served = client.get(f"/playground/static/js/{path.name}")
            assert served.status_code == 200
            assert served.mimetype == "text/javascript"


@pytest.mark.parametrize(
    "path", [*MODULES, PAGE_FOLDER / "index.html", PAGE_FOLDER / "playground.css"], ids=str
)
def test_no_file_of_the_page_reaches_for_another_host(path: Path) -> None:
    text = path.read_text().replace(SVG_NAMESPACE, "")
    assert ELSEWHERE.findall(text) == []
    assert "eval(" not in text and "new Function" not in text and "innerHTML" not in text


def test_every_page_string_is_written_in_each_language() -> None:
    source = (PAGE_FOLDER / "js" / "i18n.js").read_text()
    blocks = re.findall(r"^  (en|ru|et): \{\n(.*?)^  \},", source, flags=re.MULTILINE | re.DOTALL)
    keys = {lang: re.findall(r"^    (\w+):", body, flags=re.MULTILINE) for lang, body in blocks}
    assert set(keys) == {"en", "ru", "et"}
    assert keys["ru"] == keys["en"]
    assert keys["et"] == keys["en"]
    html = (PAGE_FOLDER / "index.html").read_text()
    used = set(re.findall(r'data-i18n(?:-label)?="(\w+)"', html))
    assert used <= set(keys["en"])


def test_the_shipping_preset_is_the_programs_example() -> None:
    # The page is a client of the public API and keeps its own presets; the lesson's shipping
    # program is the one the spec and the README show, character for character.
    state = (PAGE_FOLDER / "js" / "state.js").read_text()
    preset = re.search(r"const SHIPPING = `([^`]*)`", state)
    assert preset is not None
    assert preset[1] == SHIPPING_PROGRAM.rstrip("\n")


def test_the_icon_browsers_ask_for_is_the_playgrounds(client: FlaskClient) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response.mimetype == "image/svg+xml"
    assert response.data == (PAGE_FOLDER / "favicon.svg").read_bytes()
