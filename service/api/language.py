"""The language of a response: chosen from `Accept-Language`, announced in `Content-Language`."""

from __future__ import annotations

import re
from typing import Any

from flask import Response, has_request_context, request

from service.api import json_response
from service.i18n import DEFAULT_LOCALE, Message, _, localized, negotiate


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


# The sentences marshmallow writes when a request does not fit its schema, as templates of ours
# so that they are translated like every other sentence (marshmallow formats them itself, so a
# detail is recognised by its template and rebuilt as a `Message`).
_SCHEMA_SENTENCES = (
    _("Missing data for required field."),
    _("Field may not be null."),
    _("Invalid value."),
    _("Special numeric values (nan or infinity) are not permitted."),
    _("Not a valid integer."),
    _("Not a valid number."),
    _("Number too large."),
    _("Not a valid string."),
    _("Not a valid utf-8 string."),
    _("Not a valid boolean."),
    _("Not a valid mapping type."),
    _("Not a valid list."),
    _("Invalid type."),
    _("Invalid input type."),
    _("Unknown field."),
    _("Must be one of: {choices}."),
    # validate.Range, each bound inclusive or not
    _("Must be greater than or equal to {min} and less than or equal to {max}."),
    _("Must be greater than or equal to {min} and less than {max}."),
    _("Must be greater than {min} and less than or equal to {max}."),
    _("Must be greater than {min} and less than {max}."),
    _("Must be greater than or equal to {min}."),
    _("Must be greater than {min}."),
    _("Must be less than or equal to {max}."),
    _("Must be less than {max}."),
    # validate.Length
    _("Shorter than minimum length {min}."),
    _("Longer than maximum length {max}."),
    _("Length must be between {min} and {max}."),
    _("Length must be {equal}."),
    # validate.Regexp without a message of our own
    _("String does not match expected pattern."),
)


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", template)
    # Even parts are literal text, odd parts the names of the parameters between them.
    return re.compile(
        "".join(
            re.escape(part) if i % 2 == 0 else f"(?P<{part}>.*?)" for i, part in enumerate(parts)
        )
    )


def _literal_length(template: str) -> int:
    return len(re.sub(r"\{\w+\}", "", template))


# A parameter matches any text, so "Must be greater than {min}." also matches "Must be greater
# than 0 and less than 1."; the template with the most literal text is the most specific, so it
# is tried first.
_SCHEMA_PATTERNS = tuple(
    (_pattern(template), template)
    for template in sorted(
        (message.template for message in _SCHEMA_SENTENCES), key=_literal_length, reverse=True
    )
)


def schema_sentence(text: str) -> str:
    """marshmallow's `text` as a translatable `Message` when it is one of its sentences."""
    if isinstance(text, Message):
        return text
    for pattern, template in _SCHEMA_PATTERNS:
        match = pattern.fullmatch(text)
        if match:
            return Message(template, **match.groupdict())
    return text
