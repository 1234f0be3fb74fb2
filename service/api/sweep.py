"""POST /v1/sweep: value and gradients over a line, a grid or explicit points, as JSON or a plot;
GET /v1/sweep: the same plot from a URL, for `<img src>`."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson
from apispec import APISpec
from flask import Response, request
from marshmallow import (
    RAISE,
    Schema,
    ValidationError,
    fields,
    post_load,
    pre_load,
    validate,
)

from service import sweep as sweeps
from service.api import evaluator, json_response, language
from service.api.examples import program_examples
from service.api.pictures import PLOT_CONTENT, plot_response
from service.api.problems import documents_problems
from service.api.request import RESPONSE_HEADERS, Blueprint
from service.api.schemas import SweepRequestSchema, SweepSchema, expression_field, output_name
from service.errors import BindingError, ExpressionError, LimitExceeded
from service.evaluator import Evaluator
from service.i18n import Message, _
from service.kinds import Problem

blp = Blueprint(
    "sweep",
    __name__,
    url_prefix="/v1",
    description="An expression over many points at once: sliders, plots and surfaces.",
)

LINE_BINDINGS = {"x1": 2, "x2": 0, "w1": -3, "w2": 1, "b": 6.8813735870195432}
LINE_REQUEST: dict[str, Any] = {
    "expression": "tanh(x1*w1 + x2*w2 + b)",
    "bindings": LINE_BINDINGS,
    "vary": [{"name": "x1", "from": -1, "to": 3, "points": 5}],
}
ACCEPTED = ("application/json", "image/svg+xml", "image/png")
IMAGES = {"image/svg+xml": "svg", "image/png": "png"}


def _example() -> dict[str, Any]:
    """The line request's answer, computed by the core when the spec is built."""
    document = sweeps.sweep(
        Evaluator(), str(LINE_REQUEST["expression"]), LINE_BINDINGS, [sweeps.Axis("x1", -1, 3, 5)]
    )
    answer: dict[str, Any] = orjson.loads(sweeps.to_json(document))
    return answer


LINE_DOCUMENT = _example()


def document(spec: APISpec) -> None:
    """What the request schema's fields cannot say in the spec: `vary` or `points`, not both."""
    spec.components.schemas["SweepRequest"]["oneOf"] = [
        {"required": ["vary"]},
        {"required": ["points"]},
    ]


def run(body: dict[str, Any]) -> dict[str, Any]:
    """The core's sweep for a validated request, under this app's limits."""
    vary = [sweeps.Axis(**axis) for axis in body["vary"]] if "vary" in body else None
    return sweeps.sweep(
        evaluator(), body["expression"], body["bindings"], vary, body.get("points"), body["output"]
    )


def respond(document: dict[str, Any], body: dict[str, Any], image: str | None) -> Response:
    """JSON, or the plot in `image` format with the request's own bindings marked."""
    if image is None:
        return json_response(sweeps.localized(document, language.current()))
    expression, output = body["expression"], body["output"]
    at, marked = sweeps.at_bindings(evaluator(), expression, body["bindings"], output)
    title = sweeps.caption(evaluator(), expression, output)
    return plot_response(document, at, marked, image, "points" in body, title)


@blp.route("/sweep", methods=["POST"])
@blp.arguments(
    SweepRequestSchema(),
    examples=program_examples(
        LINE_REQUEST, {"vary": [{"name": "weight", "from": 0, "to": 10, "points": 5}]}
    ),
)
@blp.response(200, SweepSchema, example=LINE_DOCUMENT, headers=RESPONSE_HEADERS)
@blp.doc(responses={200: {"content": PLOT_CONTENT}})
@documents_problems(blp, 400, 413, 415, 429)
def sweep(body: dict[str, Any]) -> Response:
    """Evaluate an expression over a line, a grid or explicit points

    `vary` with one entry is a line; with two, a grid whose rows follow the first name, so
    `value[i][j]` is at the i-th value of the first and the j-th of the second. `points` gives
    explicit binding sets, each merged over `bindings`. Every point gets exactly the value and
    gradients the scalar engine would; a point outside the domain is null in every array, with its
    reason in `errors`, and the sweep still succeeds. Points, grid sides and graph nodes x points
    are limited (see the problem types). With `Accept: image/svg+xml` or `image/png` the answer is
    a plot: f and its derivative along a line, contours of f with gradient arrows over a grid,
    the request's own bindings marked; plots have their own rate per worker (429 past it).
    """
    image = IMAGES.get(request.accept_mimetypes.best_match(ACCEPTED, "application/json"))
    response = respond(run(body), body, image)
    response.vary.add("Accept")  # JSON or a picture, as the request accepts
    return response


# The GET form's parameters, as the spec states them and as they are read: nothing else parses.
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# At most 20 digits and a two-digit exponent: every number the pattern allows is a finite double.
_NUMBER = r"[-+]?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:[eE][-+]?[0-9]{1,2})?"
AXIS_PATTERN = f"^({_NAME}):({_NUMBER}):({_NUMBER}):([1-9][0-9]{{0,17}})$"
BINDING_PATTERN = f"^({_NAME}):({_NUMBER})$"


# A query string reads `+` as a space: said wherever one may have been meant.
_PLUS_IS_A_SPACE = _("in a URL a + stands for a space: write + as %2B")


class _Text(fields.Field):  # type: ignore[type-arg]
    """A query parameter in a fixed form, read by `pattern`'s groups."""

    def __init__(self, pattern: str, example: str, form: Message, **kwargs: Any) -> None:
        metadata = {"type": "string", "pattern": pattern, "example": example}
        super().__init__(metadata={**metadata, **kwargs.pop("metadata", {})}, **kwargs)
        self.regex = re.compile(pattern)
        self.example = example
        self.form = form  # what the parts may be, said when a value is not of the form

    def _deserialize(self, value: Any, attr: Any, data: Any, **kwargs: Any) -> Any:
        # the whole value: `match` would let a trailing newline through the pattern's `$`
        match = self.regex.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            shown = repr(value) if isinstance(value, str) else type(value).__name__
            if isinstance(value, str) and " " in value:  # `y:+2` in the URL: its + read as a space
                raise ValidationError(
                    _(
                        "expected the form {example}, not {value} ({hint})",
                        example=self.example,
                        value=shown,
                        hint=_PLUS_IS_A_SPACE,
                    )
                )
            raise ValidationError(
                _(
                    "expected the form {example}, not {value} ({form})",
                    example=self.example,
                    value=shown,
                    form=self.form,
                )
            )
        return self.read(*match.groups())

    def read(self, *groups: str) -> Any:
        raise NotImplementedError


class _AxisText(_Text):
    """`name:from:to:points`, as a URL can carry it: `x:-3:3:200`."""

    def __init__(self, **kwargs: Any) -> None:
        form = _(
            "from and to are numbers of at most 20 digits on each side of the point and an "
            "exponent of at most 2 digits; points is a whole number from 1"
        )
        super().__init__(AXIS_PATTERN, "x:-3:3:200", form, **kwargs)

    def read(self, *groups: str) -> dict[str, Any]:
        name, start, stop, points = groups
        return {"name": name, "from": float(start), "to": float(stop), "points": int(points)}


class _BindingText(_Text):
    """`name:number`, as a URL can carry it: `a:2`."""

    def __init__(self, **kwargs: Any) -> None:
        form = _(
            "a number has at most 20 digits on each side of its point and an exponent of at "
            "most 2 digits"
        )
        super().__init__(BINDING_PATTERN, "a:2", form, **kwargs)

    def read(self, *groups: str) -> tuple[str, float]:
        return groups[0], float(groups[1])


class PlotQuerySchema(Schema):
    expression = expression_field()
    vary = fields.List(
        _AxisText(),
        required=True,
        validate=validate.Length(min=1, max=2),
        metadata={"description": "`name:from:to:points`, once for a line, twice for a grid."},
    )
    bind = fields.List(
        _BindingText(),
        load_default=list,
        metadata={
            "description": "`name:number` for each variable that is not varied; binding a "
            "varied variable too marks that point on the plot. Each name is bound at most once."
        },
    )
    output = output_name()
    format = fields.String(
        load_default="svg", validate=validate.OneOf(("svg", "png", "json")),
        metadata={"description": "The plot's image format, or `json` for the sweep itself."},
    )  # fmt: skip

    @pre_load
    def once_each(self, query: Any, **kwargs: Any) -> Any:
        """A parameter of one value given twice (`format=json&format=svg`) has no single
        meaning, as a key given twice in a JSON body has none: refused, not read as its first."""
        getlist = getattr(query, "getlist", None)  # the query string's MultiDict, via webargs
        if getlist is not None:
            repeated = {
                name: [_("given more than once; give it once")]
                for name, field in self.fields.items()
                if not isinstance(field, fields.List) and len(getlist(name)) > 1
            }
            if repeated:
                raise ValidationError(repeated)
        return query

    @post_load
    def as_body(self, query: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The POST body the query stands for, validated by the same schema."""
        # A name bound twice (`bind=y:1&bind=y:2`) has no single value: refused as the core
        # refuses bindings that do not fit (a JSON body cannot give a key twice), not read as its
        # last binding. The spec cannot say it: each `bind` is a valid item on its own.
        counts = Counter(name for name, _value in query["bind"])
        twice = [name for name, count in counts.items() if count > 1]
        if twice:
            raise BindingError(
                "invalid_binding",
                _("{name} is bound more than once; bind it once", name=twice[0]),
                twice,
                location=None,
            )
        bindings = dict(query["bind"])
        body = {
            "expression": query["expression"],
            "bindings": bindings,
            "vary": query["vary"],
            "output": query["output"],
        }
        return {**_SWEEP_REQUEST.load(body), "format": query["format"]}


def _with_url_hint(error: ExpressionError) -> ExpressionError:
    """The refusal, with a hint where the URL wrote `+` as it is: a query string reads it as a
    space, so `x+y` arrives as `x y` (two operands side by side)."""
    sent = (pair.partition(b"=") for pair in request.query_string.split(b"&"))
    plus = any(name == b"expression" and b"+" in value for name, _, value in sent)
    if not plus or isinstance(error, LimitExceeded):
        return error
    message = _("{detail} ({hint})", detail=error.message, hint=_PLUS_IS_A_SPACE)
    hinted = ExpressionError(error.kind, message, error.span)
    hinted.line, hinted.column = error.line, error.column
    return hinted


_SWEEP_REQUEST = SweepRequestSchema()
PLOT_CACHE_SECONDS = 86_400  # how long a plot from a URL may be kept


@blp.route("/sweep", methods=["GET"])
# webargs lets unknown query parameters through by default; a misspelt `outptu=y` must be
# refused, as an unknown field of a body is, not plotted as if it were absent.
@blp.arguments(PlotQuerySchema(), location="query", unknown=RAISE)
@blp.response(200, SweepSchema, example=LINE_DOCUMENT, headers=RESPONSE_HEADERS)
@blp.doc(
    responses={
        200: {"content": PLOT_CONTENT},
        304: {"description": "The copy the client holds (its `If-None-Match`) is current."},
    }
)
@documents_problems(blp, 400, 429)
def plot(body: dict[str, Any]) -> Response:
    """Plot a sweep from a URL, for `<img src>`

    The same sweep as POST /v1/sweep with `vary`, as query parameters:
    `/v1/sweep?expression=x*tanh(x)&vary=x:-3:3:200&format=svg`; a grid repeats `vary`,
    `bind=a:2` binds a variable that is not varied (repeat it for more) and `output=y` names a
    program's output, as the body's `output` does. A binding of a varied variable is marked on the
    plot. `format=json` answers with the sweep's JSON document instead. Any other parameter, and
    a parameter of one value given twice, is refused as a validation error. The URL and the
    language decide the answer, so it may be cached for a day (`Cache-Control`, `ETag`). A URL is
    as long as the server's request line allows (gunicorn: 4,094 bytes, escapes included; past it
    a 414 from gunicorn itself): a longer expression goes by POST /v1/sweep.
    """
    try:  # %-escapes that are no UTF-8 stay as they are written: refused, not read as `%`
        unquote_to_bytes(request.query_string.replace(b"+", b" ")).decode()
    except UnicodeDecodeError as error:
        message = _("the URL's query is not UTF-8 once its percent escapes are decoded")
        raise Problem("bad-request", message) from error
    try:
        document = run(body)
    except ExpressionError as error:
        raise _with_url_hint(error) from None
    response = respond(document, body, None if body["format"] == "json" else body["format"])
    # The URL and the language decide the answer, byte for byte: browsers and a cache in front
    # keep it, so a page that a whole class opens draws its plot once, not once per learner.
    if response.status_code != 200:  # a refusal (too many pictures just now) is not kept
        return response
    response.cache_control.public = True
    response.cache_control.max_age = PLOT_CACHE_SECONDS
    response.add_etag()
    response.make_conditional(request)  # a 304, without the body, for a copy still current
    return response
