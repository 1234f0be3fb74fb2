"""How every request is read: its id, and its JSON body parsed strictly, in one place."""

from __future__ import annotations

import json
import math
import re
import uuid
from functools import cached_property
from typing import Any, NoReturn

import flask_smorest
import marshmallow as ma
from flask import Request
from flask.json.provider import DefaultJSONProvider
from webargs.flaskparser import FlaskParser
from werkzeug.exceptions import ClientDisconnected, HTTPException, RequestEntityTooLarge

from service.i18n import Message, _
from service.kinds import Problem
from service.numbers import NonFiniteNumber

REQUEST_ID_HEADER = "X-Request-ID"
# Every 415 says which content codings a body may have: none (RFC 9110, Accept-Encoding).
IDENTITY_ONLY = {"Accept-Encoding": "identity"}
LANGUAGE_HEADER = "Accept-Language"
CONTENT_LANGUAGE_HEADER = "Content-Language"
# The headers every documented response carries: references to the header components the spec
# defines, by name.
RESPONSE_HEADERS = {
    REQUEST_ID_HEADER: REQUEST_ID_HEADER,
    CONTENT_LANGUAGE_HEADER: CONTENT_LANGUAGE_HEADER,
}
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_QUOTED_KEY = 64  # a duplicate key is quoted up to this many characters in the problem detail
_LONG_INTEGER = 19  # characters from which an integer is read as a float (int64 has 19 digits)


def _float(text: str) -> float | NonFiniteNumber:
    value = float(text)
    return value if math.isfinite(value) else NonFiniteNumber(text)


def _integer(text: str) -> int | float | NonFiniteNumber:
    # int() of a long digit string takes time quadratic in its length (and is refused past 4300
    # digits), so an integer of 19 digits or more is read as the float it rounds to.
    return int(text) if len(text) < _LONG_INTEGER else _float(text)


class UnreadableBody(ValueError):
    """Why a body is not a JSON document this service reads, as a sentence to translate."""

    def __init__(self, reason: Message) -> None:
        super().__init__(reason)
        self.reason = reason


# What Python's JSON reader says, in sentences a translation can carry (its line and column are
# given apart). A reason not listed is passed on as the reader wrote it.
_DECODER_REASONS = {
    "Expecting value": _("a value was expected"),
    "Expecting property name enclosed in double quotes": _("a key in double quotes was expected"),
    "Expecting ':' delimiter": _("':' was expected"),
    "Expecting ',' delimiter": _("',' was expected"),
    "Extra data": _("more text follows the JSON document"),
    "Unterminated string starting at": _("a string is never closed"),
    "Invalid control character at": _("a string holds a control character"),
    "Invalid \\escape": _("a string holds an invalid escape"),
    "Invalid \\uXXXX escape": _("a string holds an invalid escape"),
}


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Python keeps the last of two equal keys; another parser may keep the first, so the request
    # has no single meaning and is refused as malformed.
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                quoted = json.dumps(key[:_QUOTED_KEY])
                raise UnreadableBody(_("the key {key} appears twice in an object", key=quoted))
            seen.add(key)
    return document


class StrictJSONProvider(DefaultJSONProvider):
    """Flask's JSON, reading request bodies strictly: standard JSON only, one meaning per document.

    Flask parses every request body with its app's provider (`request.get_json`), so this is the
    one place a body is read; writing JSON is left to Flask.
    """

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        # JSON between systems is UTF-8 (RFC 8259); json.loads would also take UTF-16 and
        # UTF-8-encoded surrogates. A byte order mark is ignored, as the RFC allows.
        try:
            text = s.decode("utf-8-sig") if isinstance(s, bytes) else s
        except UnicodeDecodeError as error:
            byte = error.object[error.start : error.start + 1].hex()
            message = _(
                "the body is not UTF-8: the byte 0x{byte} at position {position} cannot be read",
                byte=byte,
                position=error.start,
            )
            raise UnreadableBody(message) from None
        try:
            return json.loads(
                text,
                parse_float=_float,
                parse_int=_integer,
                parse_constant=NonFiniteNumber,
                object_pairs_hook=_object,
            )
        except RecursionError:  # `[[[[...` a million deep: too deep for json's recursive parser
            raise UnreadableBody(_("the JSON document nests too deeply")) from None


class ApiRequest(Request):
    """Flask's request with an id for tracing, and a problem for a body that is not JSON."""

    @cached_property
    def request_id(self) -> str:
        """The client's `X-Request-ID` when it is a sane token, else a new one."""
        given = self.headers.get(REQUEST_ID_HEADER, "")
        return given if _SANE_REQUEST_ID.fullmatch(given) else uuid.uuid4().hex

    @property
    def max_content_length(self) -> int | None:
        # A body sent without a Content-Length (chunked) is read one byte past the limit: Werkzeug
        # refuses any read beyond its limit, so with the limit itself a body of exactly that many
        # bytes could not be told from a longer one and would be refused.
        limit = super().max_content_length
        if limit is not None and self.content_length is None:
            return limit + 1
        return limit

    @max_content_length.setter
    def max_content_length(self, value: int | None) -> None:
        self._max_content_length = value

    def get_data(  # type: ignore[override]
        self, cache: bool = True, as_text: bool = False, parse_form_data: bool = False
    ) -> bytes | str:
        try:
            data = super().get_data(cache, False, parse_form_data)
        except ClientDisconnected:
            message = _("the request body ended early: the connection closed before all of it came")
            raise Problem("bad-request", message) from None
        except HTTPException:  # over the limit: Werkzeug's own refusal, a 413
            raise
        except Exception:  # whatever the server raises for a body it cannot decode
            message = _("the request body could not be read: it is not encoded as its headers say")
            raise Problem("bad-request", message) from None
        # The one byte read past the limit of a chunked body (see `max_content_length`).
        if self.content_length is None:
            limit = self.max_content_length
            if limit is not None and len(data) >= limit:
                raise RequestEntityTooLarge()
        if data and self.method in ("POST", "PUT", "PATCH"):  # a body that is read as JSON
            self._refuse_encoded_body()
        return data.decode(errors="replace") if as_text else data

    def _refuse_encoded_body(self) -> None:
        """A compressed body would reach the JSON reader as bytes that are no UTF-8. It is
        refused rather than inflated: a few kilobytes of gzip can hold gigabytes."""
        header = self.headers.get("Content-Encoding", "")
        listed = (part.strip().lower() for part in header.split(","))
        codings = [coding for coding in listed if coding not in ("", "identity")]
        if codings:
            written = ", ".join(codings)
            message = _(
                "the body is sent with Content-Encoding: {coding}; send it unencoded, as plain "
                "JSON",
                coding=written if len(written) <= 40 else f"{written[:39]}…",
            )
            raise Problem("unsupported-media-type", message, headers=IDENTITY_ONLY)

    def on_json_loading_failed(self, e: ValueError | None) -> NoReturn:
        if e is None:
            if self.mimetype:
                detail = _(
                    "the body must be JSON sent with Content-Type: application/json; this one is "
                    "{mimetype}",
                    mimetype=self.mimetype,
                )
            else:
                detail = _(
                    "the body must be JSON sent with Content-Type: application/json; this one has "
                    "no Content-Type"
                )
            raise Problem("unsupported-media-type", detail, headers=IDENTITY_ONLY)
        if not self.get_data(cache=True):
            raise Problem("malformed-json", _("the request body is empty; send a JSON object"))
        if isinstance(e, json.JSONDecodeError):
            detail = _(
                "the request body is not valid JSON at line {line}, column {column}: {reason}",
                line=e.lineno,
                column=e.colno,
                reason=_DECODER_REASONS.get(e.msg, e.msg),
            )
        else:
            reason = e.reason if isinstance(e, UnreadableBody) else str(e)
            detail = _("the request body is not valid JSON: {reason}", reason=reason)
        raise Problem("malformed-json", detail)


class JsonBodyParser(FlaskParser):
    """webargs' parser, reading bodies with Flask's `get_json` (and so strictly) like every view."""

    def load_json(self, req: Request, schema: ma.Schema) -> Any:
        return req.get_json()


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's blueprint with the strict body parser.

    `sized_by_input`: its answers are computed from what the client sends, so their size is
    capped (MAX_RESPONSE_BYTES, service/api/costs.py). The service's own documents (its health,
    metrics and catalogue, like the spec and the pages) have a size the client cannot change.
    """

    ARGUMENTS_PARSER = JsonBodyParser()

    def __init__(self, *args: Any, sized_by_input: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sized_by_input = sized_by_input
