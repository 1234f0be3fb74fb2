"""GET /healthz: whether the service answers, for load balancers and container health checks."""

from __future__ import annotations

from flask import Response

from service.api import json_response
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.api.schemas import HealthSchema

blp = Blueprint("health", __name__, description="Liveness of the service.", sized_by_input=False)


@blp.route("/healthz", methods=["GET"])
@blp.response(200, HealthSchema, example={"status": "ok"}, headers=RESPONSE_HEADERS)
def health() -> Response:
    """Check that the service answers

    Always `{"status": "ok"}`: the service keeps no state that could make it unhealthy.
    """
    return json_response({"status": "ok"})
