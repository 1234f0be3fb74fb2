"""The language of a response: chosen from `Accept-Language`, announced in `Content-Language`."""

from __future__ import annotations

from typing import Any

from flask import Response, has_request_context, request

from service.api import json_response
from service.i18n import DEFAULT_LOCALE, localized, negotiate


def current() -> str:
    """The language this request is answered in: `en`, `ru` or `et` (English by default, and
    outside a request, where the spec's examples are built)."""
    if not has_request_context():
        return DEFAULT_LOCALE
    # Werkzeug lists the client's languages best first (by q-value); the first we speak wins.
    return negotiate(tag for tag, quality in request.accept_languages if quality > 0)


def localized_response(document: Any) -> Response:
    """A JSON response with every translatable sentence in the request's language."""
    return json_response(localized(document, current()))


def announce(response: Response) -> Response:
    """Every response says which language its sentences are in; caches keep one per language."""
    response.headers["Content-Language"] = current()
    response.vary.add("Accept-Language")
    return response
