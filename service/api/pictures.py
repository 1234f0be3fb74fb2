"""Pictures over HTTP: a document answered as JSON or drawn, and the per-worker picture rate."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from flask import Flask, Response, current_app

from service import pictures
from service.api import costs, evaluator, json_response, language
from service.api.config import picture_rate
from service.api.problems import problem_response
from service.errors import AutogradError
from service.i18n import _
from service.kinds import problem_body

EXTENSION = "autograd.pictures"  # the app's `extensions` key for its picture `TokenBucket`
GRAPH_FORMATS = ("json", *pictures.GRAPH_FORMATS)  # what `format` may ask /v1/graph and gradients


class TokenBucket:
    """At most `burst` pictures at once, refilled at `rate` per second: a worker's own limit, so
    plots (tens of milliseconds of CPU each) cannot crowd out the JSON requests it serves."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.updated = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> float:
        """0 when a picture may be rendered now (and counts it), else the seconds to wait."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
            if self.tokens >= 1:
                self.tokens -= 1
                return 0.0
            return (1 - self.tokens) / self.rate

    def refund(self) -> None:
        """Give back the token of a picture refused before any drawing began."""
        with self.lock:
            self.tokens = min(self.burst, self.tokens + 1)


def init_app(app: Flask) -> None:
    """The app's picture rate; the fonts are loaded here, so a preloading gunicorn master
    has matplotlib ready before it forks its workers."""
    app.extensions[EXTENSION] = TokenBucket(*picture_rate(app.config))
    pictures.warm_up()


def over_rate() -> Response | None:
    """A 429 problem when this worker has rendered its share of pictures, else None."""
    bucket = current_app.extensions[EXTENSION]
    wait = bucket.take()
    if not wait:
        return None
    rate = bucket.rate
    seconds = max(1, math.ceil(wait))  # Retry-After counts whole seconds; the sentence agrees
    detail = _(
        "this worker has drawn its share of pictures ({rate} per second); try again in {seconds} s",
        rate=format(rate, "g"),
        seconds=seconds,
    )
    headers = {"Retry-After": str(seconds)}
    return problem_response(problem_body("too-many-pictures", detail), headers)


# Refusals of a picture before any drawing began: they cost the worker nothing to count.
_REFUSED_BEFORE_DRAWING = ("graph_too_large_to_draw", "plot_out_of_range", "graphviz_unavailable")


@contextmanager
def _counted_if_drawn() -> Iterator[None]:
    """Within the picture rate (the caller took a token): given back if the picture is refused
    before it is drawn, so a class's requests for a too-large graph leave its plots alone."""
    try:
        yield
    except AutogradError as error:
        if error.kind in _REFUSED_BEFORE_DRAWING:
            current_app.extensions[EXTENSION].refund()
        raise


def document_or_drawing(document: dict[str, Any], kind: str) -> Response:
    """The document as JSON, or its graph drawn as `dot`, `mermaid` or `svg`."""
    if kind == "json":
        return json_response(document)
    mimetype = pictures.GRAPH_FORMATS[kind]
    if kind != "svg":  # dot and mermaid are text, written in one pass: no picture, no slot
        return Response(pictures.draw(document, kind, evaluator().limits), mimetype=mimetype)
    # Graphviz may take seconds on a graph of a few hundred nodes, however short the request.
    with costs.heavy_work():
        if (refused := over_rate()) is not None:
            return refused
        with _counted_if_drawn():
            body = pictures.draw(document, kind, evaluator().limits)
    return Response(body, mimetype=mimetype)


def plot_response(
    sweep: dict[str, Any],
    bindings: Mapping[str, float],
    marked: Mapping[str, Any] | None,
    image: str,
    explicit: bool,
    title: str,
) -> Response:
    """The sweep plotted as SVG or PNG, titled `title`, in the request's language, within the
    picture rate."""
    if (refused := over_rate()) is not None:
        return refused
    with _counted_if_drawn():
        body = pictures.plot(sweep, bindings, marked, image, explicit, title, language.current())
    return Response(body, mimetype=pictures.PLOT_FORMATS[image])


def drawing_content(example: Mapping[str, Any]) -> dict[str, Any]:
    """What each drawn format is, for the spec's 200 responses: the text formats with the
    graph of the `example` document, drawn as the endpoint draws it."""
    return {
        "text/vnd.graphviz": {"schema": {"type": "string"}, "example": pictures.dot(example)},
        "text/vnd.mermaid": {"schema": {"type": "string"}, "example": pictures.mermaid(example)},
        "image/svg+xml": {"schema": {"type": "string"}},
    }


PLOT_CONTENT = {
    "image/svg+xml": {"schema": {"type": "string"}},
    "image/png": {"schema": {"type": "string", "format": "binary"}},
}
