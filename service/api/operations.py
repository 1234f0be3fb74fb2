"""GET /v1/operations: the operations of the language and the limits in force."""

from __future__ import annotations

from typing import Any

from flask import Response, current_app

from service.api import evaluator, json_response
from service.api.config import DEFAULTS
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.api.schemas import OperationsSchema
from service.limits import DEFAULT_LIMITS, Limits
from service.operations import OPERATIONS

blp = Blueprint(
    "operations",
    __name__,
    url_prefix="/v1",
    description="What expressions may contain, and how large they may be.",
)


def catalogue(
    limits: Limits, max_body_bytes: int, cache_size: int, cache_nodes: int
) -> dict[str, Any]:
    return {
        "operations": [
            {
                "name": op.name,
                "syntax": op.syntax,
                "arity": op.arity,
                "primitive": op.primitive,
                "rule": op.rule,
                "expansion": op.expansion,
            }
            for op in OPERATIONS
        ],
        "limits": {**limits.as_dict(), "max_body_bytes": max_body_bytes},
        "cache_size": cache_size,
        "cache_nodes": cache_nodes,
    }


@blp.route("/operations", methods=["GET"])
@blp.response(
    200,
    OperationsSchema,
    headers=RESPONSE_HEADERS,
    example=catalogue(
        DEFAULT_LIMITS, DEFAULTS["MAX_BODY_BYTES"], DEFAULTS["CACHE_SIZE"], DEFAULTS["CACHE_NODES"]
    ),
)
def operations() -> Response:
    """List the supported operations and the limits in force

    Every operation an expression may use: its name (the `op` of its graph nodes), how it is
    written, its arity, whether it is a micrograd primitive or derived from primitives, its local
    derivative rule, and how a derived one is expanded. Also the limits this service enforces,
    including the largest request body, and how many compiled expressions (and graph nodes in
    all) each worker caches.
    """
    ev = evaluator()
    return json_response(
        catalogue(
            ev.limits, current_app.config["MAX_CONTENT_LENGTH"], ev.cache_size, ev.cache_nodes
        )
    )
