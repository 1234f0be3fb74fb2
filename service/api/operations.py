"""GET /v1/operations: the operations of the language, and the limits and settings in force."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Response, current_app

from service.api import costs, language
from service.api.config import DEFAULTS, reported
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.api.schemas import OperationsSchema
from service.i18n import DEFAULT_LOCALE, localized
from service.operations import OPERATIONS

blp = Blueprint(
    "operations",
    __name__,
    url_prefix="/v1",
    description="What expressions may contain, and how large they may be.",
    sized_by_input=False,
)


def catalogue(config: Mapping[str, Any]) -> dict[str, Any]:
    """The document GET /v1/operations answers with, for an app configured with `config`; its
    prose is `Message`s, rendered in each request's language."""
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
        "limits": reported(config, "limits"),
        "settings": reported(config, "settings"),
        "cache_size": int(config["CACHE_SIZE"]),
        "cache_nodes": int(config["CACHE_NODES"]),
    }


@blp.route("/operations", methods=["GET"])
@blp.response(
    200,
    OperationsSchema,
    headers=RESPONSE_HEADERS,
    example=localized(catalogue(DEFAULTS), DEFAULT_LOCALE),
)
def operations() -> Response:
    """List the supported operations and the limits and settings in force

    Every operation an expression may use: its name (the `op` of its graph nodes), how it is
    written, its arity, whether it is a micrograd primitive or derived from primitives, its local
    derivative rule, and how a derived one is expanded. Also the limits this service enforces
    (every one a problem's `limit` can name, and the largest request body); the other settings a
    client plans its requests by: the time budget of one request, the body size from which a
    request counts as heavy, how many heavy ones a server takes at once (under gunicorn, the
    number in force: by default one fewer than its workers, and at least one), the picture rate
    and the time symbolic work may take; and how many compiled expressions (and graph nodes in
    all) each worker caches.
    """
    document = catalogue(current_app.config)
    # The slots in force, which a client plans by, rather than the configured 0 that stands for
    # "one fewer than the workers"; outside a server of several workers nothing is shared.
    in_force = current_app.extensions[costs.EXTENSION].slots.count()
    if in_force:
        document["settings"]["heavy_request_slots"] = in_force
    return language.localized_response(document)
