"""POST /v1/graph: the structure of an expression's graph, without numbers, for laying it out."""

from __future__ import annotations

from typing import Any

from flask import Response

from service.api import evaluator, language
from service.api.examples import GRAPH_REQUEST, graph_document, graph_examples, request_examples
from service.api.pictures import document_or_drawing, drawing_content
from service.api.problems import documents_problems
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.api.schemas import GraphRequestSchema, StructureSchema

blp = Blueprint(
    "graph",
    __name__,
    url_prefix="/v1",
    description="The shape of an expression's graph, while it is being typed.",
)


@blp.route("/graph", methods=["POST"])
@blp.arguments(GraphRequestSchema(), examples=request_examples(GRAPH_REQUEST))
@blp.response(200, StructureSchema, examples=graph_examples(), headers=RESPONSE_HEADERS)
@blp.doc(responses={200: {"content": drawing_content(graph_document())}})
@documents_problems(blp, 400, 413, 415, 429, 501)
def graph(body: dict[str, Any]) -> Response:
    """Parse an expression into its graph's structure

    Returns the graph an evaluation would build (nodes, edges, labels and where each node is
    written in the expression) and the variables to bind, without any numbers, so a front end
    can lay out the graph while the user types. A syntax error is a 422 problem whose
    `position` gives the characters to underline.
    """
    return document_or_drawing(
        evaluator().structure(
            body["expression"], body["granularity"], body["output"], language.current()
        ),
        body["format"],
    )
