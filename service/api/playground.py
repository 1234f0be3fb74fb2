"""The playground page at / and /playground: a reference client built only on the public API."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, send_from_directory

PAGE_FOLDER = Path(__file__).resolve().parent.parent / "playground"
ASSETS = "/playground/static"

# The page and its modules come from this service only: no inline script or style, no other host.
# The same policy is what the browser tests hold the page to.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'self'"
)

blp = Blueprint("playground", __name__, static_folder=str(PAGE_FOLDER), static_url_path=ASSETS)


@blp.route("/")
@blp.route("/playground")
def page() -> Response:
    return send_from_directory(PAGE_FOLDER, "index.html", max_age=0)


@blp.route("/favicon.ico")
def favicon() -> Response:
    # Browsers ask for it on every page of the service (the docs too): the playground's icon.
    return send_from_directory(PAGE_FOLDER, "favicon.svg", mimetype="image/svg+xml")


@blp.after_request
def _protect(response: Response) -> Response:
    # The page and each of its modules and stylesheets: the policy above, and never sniffed.
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
