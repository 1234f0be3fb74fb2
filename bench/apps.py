"""The service with one more route, `/bench/echo`: the floor a request through this stack costs.

    gunicorn -c gunicorn.conf.py 'bench.apps:create_bench_app()'

The echo route lives on the service's own app, so it passes through the same middleware, reads
its body with the same strict JSON parser and answers through the same serializer as
`/v1/gradients`; it does no work of its own. It is never part of the public API or its spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, request

from service.api import json_response
from service.app import create_app

ECHO_PATH = "/bench/echo"


def create_bench_app(config: Mapping[str, Any] | None = None) -> Flask:
    app = create_app(config)
    app.add_url_rule(ECHO_PATH, "bench_echo", _echo, methods=["POST"])
    return app


def _echo() -> Response:
    return json_response(request.get_json())
