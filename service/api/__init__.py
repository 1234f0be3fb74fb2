"""The HTTP API around the core: validate a request, make one call, serialize the result."""

from __future__ import annotations

import json
from typing import Any

import orjson
from flask import Response, current_app

from service.evaluator import Evaluator

EXTENSION = "autograd"  # the app's `extensions` key for its configured `Evaluator`


def evaluator() -> Evaluator:
    """The evaluator of the app handling this request: its limits and cache come from config."""
    configured: Evaluator = current_app.extensions[EXTENSION]
    return configured


def json_response(document: Any, status: int = 200, mimetype: str = "application/json") -> Response:
    """A response with `document` serialized by orjson, many times faster than dumping through a
    schema; orjson also writes NaN and infinities as null, so every body is valid JSON."""
    try:
        body = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)  # sweeps are arrays
    except orjson.JSONEncodeError:
        # orjson refuses lone surrogates, which a client can send as `"\ud800"` in a binding's
        # name and get back in a problem; the standard library escapes them (`\udc00`, which
        # JSON's grammar allows), written as compactly as orjson writes.
        body = json.dumps(document, separators=(",", ":")).encode()
    return Response(body, status=status, mimetype=mimetype)
