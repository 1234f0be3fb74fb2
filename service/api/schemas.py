"""One marshmallow schema per payload: requests are loaded with them, the spec is built from all."""

from __future__ import annotations

import copy
import math
import re
from typing import Any, TypeVar

from apispec.ext.marshmallow.field_converter import FieldConverterMixin
from marshmallow import Schema, ValidationError, fields, post_load, validate, validates_schema

from service.api.config import SETTINGS, Reported
from service.check import CODES, DEFAULT_TOLERANCE, VERDICTS, Tolerance
from service.evaluator import DEFAULT_GRANULARITY, FIELDS, GRANULARITIES, describe
from service.exercises import (
    DEFAULT_GENERATOR,
    DEFAULT_KIND,
    DEFAULT_LEVEL,
    EXERCISE_KINDS,
    GENERATORS,
    LEVELS,
    MAX_SEED,
)
from service.i18n import Message, _
from service.kinds import KINDS, type_uri
from service.limits import DEFAULT_LIMITS, Limits
from service.numbers import NonFiniteNumber

_Field = TypeVar("_Field", bound="fields.Field[Any]")


def _out(field: type[_Field], description: str, *args: Any, **kwargs: Any) -> _Field:
    """A field every response carries, so the spec can say it is required."""
    return field(*args, required=True, metadata={"description": description}, **kwargs)


# A variable's name, as the parser's name token reads it.
IDENTIFIER_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$"


def request_bounds(limits: Limits) -> dict[str, dict[str, Any]]:
    """What the spec states about each request field under `limits`: by field name, or where
    one name means two things by `Schema.field`.

    The spec states the bounds; the core enforces them, with a problem naming the limit and
    where the expression exceeds it, so the schema does not refuse first with a vaguer one.
    """
    bindings = {
        "maxProperties": limits.max_bindings,
        "propertyNames": {
            "pattern": IDENTIFIER_PATTERN,
            "maxLength": limits.max_identifier_length,
        },
    }
    return {
        "expression": {"minLength": 1, "maxLength": limits.max_expression_length},
        # a longer name is no name of the program: refused as an unknown output
        "output": {"maxLength": limits.max_identifier_length},
        "bindings": bindings,
        # a sweep's explicit points, each a set of bindings; and the points along one axis
        "SweepRequest.points": {"maxItems": limits.max_sweep_points, "items": bindings},
        # a line's axis is bounded by the sweep's points, each side of a grid by its own limit
        "Axis.points": {"maximum": max(limits.max_sweep_points, limits.max_sweep_grid)},
    }


_DEFAULT_BOUNDS = request_bounds(DEFAULT_LIMITS)


class Bindings(fields.Dict):
    """Variable name to number. The spec says numbers; the core checks every value, once, and
    refuses one that is not a finite number as `invalid-binding`, naming the variable."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(keys=fields.String(), values=fields.Raw(allow_none=True), **kwargs)


def bindings_property(
    converter: FieldConverterMixin, field: fields.Field[Any], **kwargs: Any
) -> dict[str, Any]:
    """apispec attribute function: the bindings' value type and the bounds apispec cannot say."""
    if not isinstance(field, Bindings):
        return {}
    return {"additionalProperties": {"type": "number"}, **_DEFAULT_BOUNDS["bindings"]}


def _granularity() -> fields.String:
    return fields.String(
        load_default=DEFAULT_GRANULARITY,
        validate=validate.OneOf(GRANULARITIES),
        metadata={
            "description": "`operator`: one node per operator written; `primitive`: the graph "
            "micrograd builds, with derived operations (`-`, `/`, negation) expanded."
        },
    )


def expression_field() -> fields.String:
    return fields.String(
        required=True,
        metadata={
            "description": "The expression, e.g. `(a + b) * c`: numbers, variables, "
            "`+ - * / ** ^`, parentheses and exp, log, relu, tanh. See GET /v1/operations. "
            "Or a program: statements separated by newlines or `;`, such as `x = Value(2.0)`, "
            "`y = x * x + 1`, `y += x.relu()` and `y.backward()`; `#` starts a comment.",
            **_DEFAULT_BOUNDS["expression"],
        },
    )


def _drawing_format() -> fields.String:
    return fields.String(
        load_default="json",
        validate=validate.OneOf(("json", "dot", "mermaid", "svg")),
        metadata={
            "description": "`json`: the document below. The graph drawn in the style of "
            "micrograd's draw_dot, each value a record `name | data | grad` and each operation "
            "its own node: `dot` (Graphviz text), `mermaid` (for Markdown pages) or `svg` "
            "(rendered by Graphviz; a 501 problem where the server has no Graphviz)."
        },
    )


class Pattern(validate.Regexp):
    """A regular expression a field's whole value must match, refused with a translatable
    sentence of ours. (The spec states the pattern, so it is a Regexp to apispec.)

    marshmallow's Regexp formats its message (for `{input}` and `{regex}`), which would turn a
    `Message` into plain English text, and it matches with `re.match`, whose `$` also matches
    before a trailing newline: `"y\\n"` would pass as a name.
    """

    def __init__(self, regex: str, error: Message) -> None:
        super().__init__(regex, error=error)
        self.message = error
        self.pattern = re.compile(regex)

    def __call__(self, value: str) -> str:  # type: ignore[override]  # only text fields
        if self.pattern.fullmatch(value) is None:
            raise ValidationError(self.message)
        return value


def output_name() -> fields.String:
    """The request field naming a program's output, in a body or a query alike."""
    return fields.String(
        load_default=None,
        allow_none=True,
        validate=Pattern(
            IDENTIFIER_PATTERN,
            _("must be a name: a letter or _, then letters, digits or _"),
        ),
        metadata={
            "description": "For a program: the name whose value is the output. By default, "
            "the name `name.backward()` is called on, else the last statement.",
            **_DEFAULT_BOUNDS["output"],
        },
    )


_FIELD_NAME = "|".join(re.escape(name) for name in FIELDS)
FIELDS_PATTERN = rf"^ *({_FIELD_NAME}) *(, *({_FIELD_NAME}) *)*$"


def _fields() -> fields.String:
    return fields.String(
        data_key="fields",
        load_default=None,
        allow_none=True,
        validate=Pattern(
            FIELDS_PATTERN,
            _(
                "a comma-separated list of parts of the response, each one of {parts}",
                parts=", ".join(FIELDS),
            ),
        ),
        metadata={
            "description": "Only these parts of the response, for a client that already holds "
            "the graph's shape (from POST /v1/graph), e.g. `value,gradients` for a slider. A "
            "top-level name keeps that key; `nodes.value`, `nodes.grad` and the like add "
            "`nodes`, an object of columns: each a list with that key of every node, in node "
            "order. Keys keep the response's own order whatever the order asked. Left out or "
            "null: the whole response. For `format` json only: a drawing is always whole."
        },
    )


class GradientsRequestSchema(Schema):
    expression = expression_field()
    bindings = Bindings(
        load_default=dict,
        metadata={
            "description": "A finite number for every input of the expression, and no other "
            "name: a name the expression does not use is an `unknown-variables` problem. An input "
            "a program declares with `Value(number)` takes that number unless bound here; "
            "`bindings` may be left out when every input is declared."
        },
    )
    granularity = _granularity()
    format = _drawing_format()
    output = output_name()
    # `fields` in the body; not the attribute's name, which is marshmallow's own
    selection = _fields()


class GraphRequestSchema(Schema):
    expression = expression_field()
    granularity = _granularity()
    output = output_name()
    format = _drawing_format()


class FiniteNumber(fields.Float):
    """A JSON number that is a finite double; never a string, a boolean or null."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            # NaN, 1e400 and that it overflows a float, or `"2"`: as a binding's value is shown
            raise ValidationError(_("must be a finite number, not {shown}", shown=describe(value)))
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise ValidationError(_("must be a finite number"))
        return number


class WholeNumber(fields.Integer):
    """A JSON number with no fractional part, as JSON Schema's `integer` is: 7 or 7.0, never
    "7", true or 7.5 (marshmallow's Integer would refuse 7.0, or else take "7" and cut 7.5)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, NonFiniteNumber):  # NaN, or 1e400 and that it overflows a float
            raise ValidationError(_("must be a whole number, not {shown}", shown=describe(value)))
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not whole:
            raise self.make_error("invalid", input=value)
        return int(value)


class AxisSchema(Schema):
    name = fields.String(
        required=True,
        validate=Pattern(
            IDENTIFIER_PATTERN, _("must be a name: a letter or _, then letters, digits or _")
        ),
        metadata={"description": "The variable to vary."},
    )
    start = FiniteNumber(
        required=True, data_key="from", metadata={"description": "Its first value."}
    )
    stop = FiniteNumber(required=True, data_key="to", metadata={"description": "Its last value."})
    points = WholeNumber(
        required=True,
        validate=validate.Range(min=1),
        metadata={
            "description": "How many evenly spaced values, both ends included (on each side of "
            "a grid, at most `max_sweep_grid`).",
            **_DEFAULT_BOUNDS["Axis.points"],
        },
    )


class SweepRequestSchema(Schema):
    expression = expression_field()
    bindings = Bindings(
        load_default=dict,
        metadata={
            "description": "A finite number for every variable that is not varied. A binding of a "
            "varied variable is marked on a plot."
        },
    )
    output = output_name()
    vary = fields.List(
        fields.Nested(AxisSchema),
        validate=validate.Length(min=1, max=2),
        metadata={
            "description": "One variable (a line) or two (a grid, whose rows follow the first)."
        },
    )
    points = fields.List(
        Bindings(),
        validate=validate.Length(min=1),
        metadata={
            "description": "Explicit binding sets instead of `vary`, merged over bindings.",
            "maxItems": _DEFAULT_BOUNDS["SweepRequest.points"]["maxItems"],
        },
    )

    @validates_schema
    def one_way(self, data: dict[str, Any], **kwargs: Any) -> None:
        # The spec says it too, with `oneOf` (see `service.api.sweep.document`).
        if ("vary" in data) == ("points" in data):
            raise ValidationError(_("give either vary or points"), "_schema")


def _span() -> Any:
    return _out(
        fields.List,
        "`[start, end)`: the characters of the expression this node was written as.",
        fields.Integer(),
        validate=validate.Length(equal=2),
    )


class NodeShapeSchema(Schema):
    id = _out(fields.Integer, "The node's index in `graph.nodes`, which is a forward order.")
    kind = _out(
        fields.String,
        "What the node is.",
        validate=validate.OneOf(("variable", "constant", "operation")),
    )
    op = _out(
        fields.String, "The operation (see GET /v1/operations); null for leaves.", allow_none=True
    )
    label = _out(fields.String, "What to print in the node: a name, a number or an operator.")
    name = _out(
        fields.String,
        "For a program: the name the assignment or declaration that produced this node gave "
        "it, like the label in micrograd's draw_dot; else null.",
        allow_none=True,
    )
    children = _out(fields.List, "Operand node ids, in the order written.", fields.Integer())
    exponent = _out(
        fields.Float, "The constant exponent of a `**` node, else null.", allow_none=True
    )
    derived = _out(fields.Boolean, "Whether the operation is built from micrograd primitives.")
    expansion = _out(
        fields.String, "How micrograd builds a derived operation, else null.", allow_none=True
    )
    span = _span()


class NodeSchema(NodeShapeSchema):
    value = _out(fields.Float, "The forward value.")
    grad = _out(fields.Float, "d(root)/d(node): the gradient backward accumulated here.")
    local_grads = _out(
        fields.List, "d(node)/d(child) for each child, in `children` order.", fields.Float()
    )


class SendSchema(Schema):
    to = _out(fields.Integer, "The child receiving gradient.")
    local_grad = _out(fields.Float, "d(node)/d(child).")
    contribution = _out(fields.Float, "local_grad * the sending node's grad.")
    grad_after = _out(fields.Float, "The child's grad once this contribution is added.")


class BackwardStepSchema(Schema):
    node = _out(fields.Integer, "The node sending gradient to its children.")
    grad = _out(fields.Float, "Its gradient, complete by the time it is sent.")
    sends = _out(fields.List, "One send per child edge.", fields.Nested(SendSchema))


class GraphSchema(Schema):
    root = _out(fields.Integer, "The id of the node holding the expression's value.")
    nodes = _out(
        fields.List, "Every node, in forward (topological) order.", fields.Nested(NodeSchema)
    )


class GraphShapeSchema(Schema):
    root = _out(fields.Integer, "The id of the node holding the expression's value.")
    nodes = _out(
        fields.List, "Every node, in forward (topological) order.", fields.Nested(NodeShapeSchema)
    )


class WarningSchema(Schema):
    kind = _out(fields.String, "`unused`: the output does not depend on this statement.")
    name = _out(
        fields.String,
        "The name assigned; null for an expression written as a statement, which is computed "
        "and dropped.",
        allow_none=True,
    )
    message = _out(fields.String, "The warning, in a sentence.")
    span = _span()
    line = _out(fields.Integer, "The 1-based line of the statement.")
    column = _out(fields.Integer, "The 1-based column of the statement.")
    position = _out(
        fields.Nested,
        "The statement's `span`, `line` and `column` together, as a problem's `position`.",
        lambda: PositionSchema(),
    )


class InputSchema(Schema):
    name = _out(fields.String, "The input's name.")
    default = _out(
        fields.Float,
        "The value a program declared with `Value(number)`, else null.",
        allow_none=True,
    )


def _program_output() -> fields.String:
    return _out(
        fields.String,
        "The output's name: the request's `output`, the name `backward()` was called on, or "
        "the target of the last assignment, or a name written alone as the last statement of a "
        "program of several; null for any other bare expression, and for a plain expression.",
        allow_none=True,
    )


def _warnings() -> fields.List[Any]:
    return _out(
        fields.List,
        "Statements the output does not depend on (assignments, and expressions written as "
        "statements, whose values are dropped): they add no nodes and are not computed, so "
        "`k = x.log()` at x = -3 is no error when the output does not use k (arithmetic on "
        "numbers alone is folded where it is written, and `1 / 0` is refused there).",
        fields.Nested(WarningSchema),
    )


class EvaluationSchema(Schema):
    expression = _out(fields.String, "The expression, as sent.")
    granularity = _out(
        fields.String, "The granularity of the graph.", validate=validate.OneOf(GRANULARITIES)
    )
    value = _out(fields.Float, "The expression's value.")
    gradients = _out(
        fields.Dict,
        "d(output)/d(input) for every input; 0 for a program's inputs the output does not use.",
        keys=fields.String(),
        values=fields.Float(),
    )
    output = _program_output()
    graph = _out(fields.Nested, "The computation graph with its numbers.", GraphSchema)
    forward = _out(
        fields.List, "Node ids in the order the forward pass computes them.", fields.Integer()
    )
    backward = _out(
        fields.List,
        "The backward pass step by step, root first.",
        fields.Nested(BackwardStepSchema),
    )
    warnings = _warnings()


def _optional(field: fields.Field[Any]) -> Any:
    optional = copy.copy(field)
    optional.required = False
    return optional


# The node columns of a selection: for each node key asked for, that key of every node, in order.
NodeColumnsSchema = Schema.from_dict(
    {
        name: fields.List(
            _optional(field),
            metadata={"description": f"Every node's `{name}`: {field.metadata['description']}"},
        )
        for name, field in NodeSchema().fields.items()
    },
    name="NodeColumnsSchema",
)
# The response to a request with `fields`: the keys of an evaluation asked for, and `nodes`.
SelectedEvaluationSchema = Schema.from_dict(
    {
        **{name: _optional(field) for name, field in EvaluationSchema().fields.items()},
        "nodes": fields.Nested(
            NodeColumnsSchema,
            metadata={"description": "The node columns asked for (`nodes.value` and the like)."},
        ),
    },
    name="SelectedEvaluationSchema",
)


class StructureSchema(Schema):
    expression = _out(fields.String, "The expression, as sent.")
    granularity = _out(
        fields.String, "The granularity of the graph.", validate=validate.OneOf(GRANULARITIES)
    )
    variables = _out(
        fields.List,
        "The inputs the output reads, in order of first use: each is bound by `bindings`, or "
        "takes the default a program declared for it (see `inputs`).",
        fields.String(),
    )
    inputs = _out(
        fields.List,
        "Every input with its declared default (null if it has none): the output's inputs in "
        "order of first use, then the program's other inputs (declared, or read only by "
        "statements the output does not use) in the order the program first mentions them.",
        fields.Nested(InputSchema),
    )
    output = _program_output()
    graph = _out(fields.Nested, "The computation graph's structure.", GraphShapeSchema)
    forward = _out(fields.List, "Node ids in forward order.", fields.Integer())
    warnings = _warnings()


class OperationSchema(Schema):
    name = _out(fields.String, "The `op` of its graph nodes.")
    syntax = _out(fields.String, "How it is written.")
    arity = _out(fields.Integer, "How many operand nodes it takes.")
    primitive = _out(fields.Boolean, "A micrograd primitive, or derived from primitives.")
    rule = _out(fields.String, "Its local derivatives, as text.")
    expansion = _out(
        fields.String,
        "How micrograd builds a derived operation; null for primitives.",
        allow_none=True,
    )


def _reported(where: Reported, name: str) -> type[Schema]:
    """One field per setting GET /v1/operations reports `where`, described by its meaning."""
    return Schema.from_dict(
        {
            setting.name.lower(): _out(
                fields.Float if isinstance(setting.default, float) else fields.Integer,
                str(setting.meaning),
            )
            for setting in SETTINGS.values()
            if setting.reported == where
        },
        name=name,
    )


LimitsSchema = _reported("limits", "Limits")
SettingsSchema = _reported("settings", "Settings")


class OperationsSchema(Schema):
    operations = _out(
        fields.List, "Every operation of the language.", fields.Nested(OperationSchema)
    )
    limits = _out(
        fields.Nested,
        "The limits in force: every bound a problem's `limit` can name, and the largest request "
        "body.",
        LimitsSchema,
    )
    settings = _out(
        fields.Nested,
        "The other settings in force that a client plans its requests by: the time budget of "
        "one request, when a request counts as heavy, the picture rate, symbolic work's time.",
        SettingsSchema,
    )
    cache_size = _out(fields.Integer, str(SETTINGS["CACHE_SIZE"].meaning))
    cache_nodes = _out(fields.Integer, str(SETTINGS["CACHE_NODES"].meaning))


class HealthSchema(Schema):
    status = _out(
        fields.String, "Always `ok` when the service answers.", validate=validate.OneOf(("ok",))
    )


def _problem(field: type[fields.Field[Any]], description: str, *args: Any, **kwargs: Any) -> Any:
    return field(*args, metadata={"description": description}, **kwargs)


class PositionSchema(Schema):
    start = _out(
        fields.Integer,
        "Index of the first character at fault, counting characters as Unicode code points.",
    )
    end = _out(fields.Integer, "Index one past the last character at fault.")
    line = _problem(fields.Integer, "The 1-based line of the first character at fault.")
    column = _problem(fields.Integer, "The 1-based column of the first character at fault.")


class PointerSchema(Schema):
    pointer = _out(
        fields.String,
        "JSON pointer (RFC 6901) to the part of the body at fault; empty for the whole body.",
    )
    detail = _out(fields.String, "What is wrong with it.")


class ProblemSchema(Schema):
    """An RFC 9457 problem: `type` identifies the kind; the other members depend on it."""

    type = _out(
        fields.String,
        "Identifies the kind of problem.",
        validate=validate.OneOf([*map(type_uri, KINDS), "about:blank"]),
    )
    title = _out(fields.String, "The kind, in words: the same for every problem of a type.")
    status = _out(fields.Integer, "The HTTP status code.")
    detail = _out(fields.String, "What went wrong this time, in a sentence for a student.")
    position = _problem(
        fields.Nested,
        "Expression and limit problems, domain problems whose place is known, and an unbound "
        "input (its first use): where in the expression.",
        PositionSchema,
    )
    variables = _problem(fields.List, "Binding problems: the variables at fault.", fields.String())
    items = _problem(
        fields.List,
        "Answer-item problems of /v1/check: the items of `answers` at fault, named as results "
        "name items (`gradients.z`, `nodes.99`).",
        fields.String(),
    )
    node = _problem(
        fields.Integer,
        "Domain problems: the graph node whose value or gradient "
        "is not a finite real number; null for a constant part of the expression.",
        allow_none=True,
    )
    limit = _problem(fields.String, "Limit problems: the limit exceeded (see GET /v1/operations).")
    maximum = _problem(fields.Float, "Limit problems: the limit's value.")
    errors = _problem(
        fields.List,
        "Validation and invalid-binding problems: each part of the body at fault.",
        fields.Nested(PointerSchema),
    )


# A line or points: numbers, null where a point failed; a grid: rows of them.
SWEEP_ARRAY = {
    "type": "array",
    "items": {"type": ["number", "null", "array"], "items": {"type": ["number", "null"]}},
}


def _sweep_array(description: str) -> fields.Raw:
    """Numbers in a sweep's shape: a list, or a list of rows; null at a failed point."""
    return fields.Raw(
        required=True,
        metadata={"description": description, **SWEEP_ARRAY},
    )


class SweepErrorSchema(Schema):
    index = _out(fields.Raw, "The failed point: its index, or `[i, j]` in a grid.")
    kind = _out(
        fields.String, "The reason, as the core's domain error kind.", validate=validate.OneOf(
            ("log_domain", "division_by_zero", "complex_result", "overflow", "non_finite")
        )
    )  # fmt: skip
    message = _out(fields.String, "Why, in a sentence for a student.")
    node = _out(fields.Integer, "The primitive graph node where it failed.")
    position = _out(fields.Nested, "Where in the expression.", PositionSchema)


class SweepSchema(Schema):
    expression = _out(fields.String, "The expression, as sent.")
    output = _program_output()
    axes = _out(
        fields.Dict,
        "The values of each varied variable (for `points`: of each variable they set; null at "
        "a point that does not set an input the output does not use, which needs no value).",
        keys=fields.String(),
        values=fields.List(fields.Float(allow_none=True)),
    )
    value = _sweep_array(
        "The value at every point: a list, or for a grid a list of rows where `value[i][j]` is "
        "at the i-th value of the first varied name and the j-th of the second; null where the "
        "point failed."
    )
    gradients = _out(
        fields.Dict,
        "For every variable, its gradient in the same shape as `value`.",
        keys=fields.String(),
        values=fields.Raw(metadata=SWEEP_ARRAY),
    )
    errors = _out(
        fields.List,
        "One entry per point outside the domain, in point order.",
        fields.Nested(SweepErrorSchema),
    )
    warnings = _warnings()


# -- POST /v1/derivatives -----------------------------------------------------------------------


class DerivativesRequestSchema(Schema):
    expression = expression_field()
    bindings = Bindings(
        load_default=dict,
        metadata={
            "description": "A finite number for every input, as for POST /v1/gradients: a "
            "program's declared inputs take their `Value(number)` unless bound here."
        },
    )
    output = output_name()
    variables = fields.List(
        fields.String(
            validate=Pattern(
                IDENTIFIER_PATTERN,
                _("must be a name: a letter or _, then letters, digits or _"),
            )
        ),
        load_default=None,
        validate=validate.Length(min=1),
        metadata={
            "description": "The inputs to differentiate by; all of them when left out. The "
            "derivatives come in the order the inputs are first used, then a program's other "
            "inputs, which its output does not use (derivative 0)."
        },
    )
    h = FiniteNumber(
        load_default=None,
        validate=validate.Range(min=0, min_inclusive=False),
        metadata={
            "exclusiveMinimum": 0,
            "description": "The step of the difference quotients, the same for every variable. "
            "When left out, each variable gets cbrt(machine epsilon) * max(1, |x|), about "
            "6e-6 * max(1, |x|): the step that balances a central difference's truncation "
            "error against its rounding error.",
        },
    )


class SymbolicDerivativeSchema(Schema):
    text = _out(
        fields.String,
        "d(expression)/d(variable) in sympy's syntax, e.g. `c*Heaviside(a*b, 0)`, simplified "
        "when that is quick and makes it shorter. Heaviside(x, 0) is relu's derivative: 1 for "
        "x > 0, else 0.",
    )
    latex = _out(
        fields.String, "The same formula as LaTeX; relu's derivative as a cases expression."
    )
    value = _out(
        fields.Float,
        "The formula evaluated exactly at the bindings (taken as exact binary fractions), then "
        "rounded to a float; null where the exact derivative is not a finite real number.",
        allow_none=True,
    )
    operations = _out(fields.Integer, "The formula's size: sympy's `count_ops`.")


class NumericDerivativeSchema(Schema):
    h = _out(fields.Float, "The step used.")
    central = _out(
        fields.Float,
        "(f(x + h) - f(x - h)) / 2h; null where f is undefined at a step, or where h is below "
        "x's precision (x + h rounds to x).",
        allow_none=True,
    )
    forward = _out(
        fields.Float,
        "(f(x + h) - f(x)) / h; null where f is undefined at x + h, or where h is below x's "
        "precision.",
        allow_none=True,
    )
    central_error = _out(
        fields.Float, "|central - symbolic value|; null if either is null.", allow_none=True
    )
    forward_error = _out(
        fields.Float, "|forward - symbolic value|; null if either is null.", allow_none=True
    )


class DerivativeSchema(Schema):
    variable = _out(fields.String, "The variable differentiated by.")
    reverse_mode = _out(
        fields.Float, "The engine's gradient, as POST /v1/gradients gives it: one backward pass."
    )
    symbolic = _out(fields.Nested, "sympy's exact derivative.", SymbolicDerivativeSchema)
    numeric = _out(fields.Nested, "Difference quotients.", NumericDerivativeSchema)


class ReverseModeCostSchema(Schema):
    nodes = _out(fields.Integer, "Nodes of the graph, built once.")
    forward_steps = _out(fields.Integer, "Operations computed by the forward pass.")
    backward_steps = _out(
        fields.Integer,
        "Local derivative times gradient, one per edge, in the one backward pass that gives "
        "every derivative at once.",
    )


class NumericCostSchema(Schema):
    central_evaluations = _out(
        fields.Integer, "Evaluations of the whole expression: 2 per variable."
    )
    forward_evaluations = _out(
        fields.Integer, "Evaluations for forward differences: 1 per variable, plus f(x)."
    )


class SymbolicCostSchema(Schema):
    expression_operations = _out(fields.Integer, "The expression's own size (`count_ops`).")
    derivative_operations = _out(
        fields.Integer, "The derivative formulas' size, all together (`count_ops`)."
    )


class DerivativesCostSchema(Schema):
    reverse_mode = _out(fields.Nested, "Work of reverse mode.", ReverseModeCostSchema)
    numeric = _out(fields.Nested, "Work of the difference quotients.", NumericCostSchema)
    symbolic = _out(fields.Nested, "Size of the symbolic formulas.", SymbolicCostSchema)


class IntermediateSchema(Schema):
    name = _out(fields.String, "The name a statement of the program gave it.")
    latex = _out(fields.String, "Its value as LaTeX, written in the inputs.")


class DerivativesSchema(Schema):
    expression = _out(fields.String, "The expression, as sent.")
    output = _program_output()
    latex = _out(fields.String, "The output as LaTeX, written in the inputs.")
    intermediates = _out(
        fields.List,
        "For a program: each named value the output is computed from, in the order computed, "
        "as LaTeX written in the inputs; empty for an expression.",
        fields.Nested(IntermediateSchema),
    )
    value = _out(fields.Float, "The expression's value.")
    derivatives = _out(
        fields.List,
        "One item per input, in the order of first use, then a program's inputs the output "
        "does not use.",
        fields.Nested(DerivativeSchema),
    )
    cost = _out(fields.Nested, "The three ways' work, as numbers.", DerivativesCostSchema)
    agree = _out(
        fields.Boolean,
        "Whether reverse mode and the exact value agree for every variable: within 1e-9 "
        "relative, or 1e-12 of the largest number the graph handled (rounding where terms "
        "cancel).",
    )
    warnings = _warnings()


# -- checking answers (POST /v1/check) and exercises (POST /v1/exercises) --------------------

_ANSWER = (
    "A number (JSON number, or text of a constant such as `-1/2`: one expression, not a "
    "program); null or absent: unanswered."
)


def _answers(description: str) -> fields.Dict:
    return fields.Dict(
        keys=fields.String(),
        values=fields.Raw(allow_none=True),
        allow_none=True,
        metadata={"description": description},
    )


class StrictBoolean(fields.Boolean):
    """JSON true or false only: marshmallow's Boolean also takes "yes", 1 or "off"."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


def _strict_boolean(description: str) -> fields.Boolean:
    return StrictBoolean(load_default=False, metadata={"description": description})


class AnswersSchema(Schema):
    value = fields.Raw(allow_none=True, metadata={"description": f"The output's value. {_ANSWER}"})
    gradients = _answers(
        f"Variable name to the gradient of the output with respect to it. {_ANSWER}"
    )
    nodes = _answers(
        "Node id (as in `graph.nodes` of the operator view), an input's name, or a name the "
        "program assigns, to the gradient that reaches the node: the backward pass filled in. "
        "Each node is answered once. A name the program assigns means the node "
        "it refers to once the program has run, that is its last assignment, as in Python; a "
        f"node an earlier assignment gave the same name is answered by its id. {_ANSWER}"
    )
    derivatives = _answers(
        "Variable name to the derivative of the output with respect to it, as one expression "
        "in our language (e.g. `2*a*b`; not a program: no assignments, declarations or second "
        "statement), or a JSON number for a constant derivative; judged by mathematical "
        "equivalence."
    )


class ToleranceSchema(Schema):
    relative = FiniteNumber(
        load_default=DEFAULT_TOLERANCE.relative,
        validate=validate.Range(min=0, max=1),
        metadata={"description": "Allowed error relative to |expected|."},
    )
    absolute = FiniteNumber(
        load_default=DEFAULT_TOLERANCE.absolute,
        validate=validate.Range(min=0, max=1e300),
        metadata={"description": "Allowed absolute error, added to the relative one."},
    )

    @post_load
    def tolerance(self, data: dict[str, float], **kwargs: Any) -> Tolerance:
        return Tolerance(**data)


class CheckRequestSchema(Schema):
    expression = expression_field()
    bindings = Bindings(
        load_default=dict,
        metadata={
            "description": "A finite number for every input of the expression, as for "
            "/v1/gradients (a program's declared inputs may be left out)."
        },
    )
    output = output_name()
    answers = fields.Nested(
        AnswersSchema, required=True, metadata={"description": "The learner's answers."}
    )
    tolerance = fields.Nested(
        ToleranceSchema,
        load_default=lambda: DEFAULT_TOLERANCE,
        metadata={
            "description": "A number is correct within absolute + relative * |expected| "
            "(default relative 1e-6, absolute 1e-9)."
        },
    )
    reveal = _strict_boolean("Include each item's `expected` answer in the results.")


class FeedbackSchema(Schema):
    code = _out(fields.String, "The likely mistake, or `correct`.", validate=validate.OneOf(CODES))
    message = _out(fields.String, "A sentence for the learner, in the response's language.")
    position = _problem(
        fields.Nested,
        "Where in the answer text: the fault of an unparsable answer, the first variable (or "
        "the words) of a `not_a_number` one, the first unknown name of an `unknown_variable` "
        "one, the part of a formula that cannot be computed at the bindings. A JSON value that "
        "is no text has none.",
        PositionSchema,
    )


class CheckItemSchema(Schema):
    item = _out(
        fields.String,
        "What was answered: `value`, `gradients.a`, `nodes.7`, `nodes.raw_cost`, "
        "`derivatives.a`. A node answered is named as the answers name it; one not answered by "
        "its `name` when that name still refers to it once the program has run, else by its id "
        "(as a node left behind by reassigning its name is), so every item's label is its own.",
    )
    verdict = _out(fields.String, "The verdict.", validate=validate.OneOf(VERDICTS))
    feedback = _out(fields.Nested, "What to tell the learner.", FeedbackSchema)
    expected = _problem(
        fields.Raw,
        "Only with `reveal: true`: the right answer: a number, or the derivative as an answer "
        "writes it (`exp(1)` for e, `(a**2)**0.5` for |a|), which may be sent back as it is.",
    )


class CheckResultSchema(Schema):
    score = _out(
        fields.Float,
        "Correct answers / answered items (0 when nothing is answered).",
        validate=validate.Range(min=0, max=1),
    )
    results = _out(
        fields.List,
        "Every item: the value, each variable's gradient, and each node or derivative when "
        "`nodes` or `derivatives` was sent.",
        fields.Nested(CheckItemSchema),
    )


class ExerciseRequestSchema(Schema):
    seed = WholeNumber(
        required=True,
        validate=validate.Range(min=0, max=MAX_SEED),
        metadata={"description": "Any whole number; the same seed gives the same exercise."},
    )
    level = WholeNumber(
        load_default=DEFAULT_LEVEL,
        validate=validate.OneOf(LEVELS),
        metadata={
            "description": "1: `(a + b) * c` and its cousins; 2: shared nodes and relu; "
            "3: derived operations (`-`, `/`), powers and relu dead zones."
        },
    )
    kind = fields.String(
        load_default=DEFAULT_KIND,
        validate=validate.OneOf(EXERCISE_KINDS),
        metadata={
            "description": "`gradients`: predict every variable's gradient; `backward-pass`: "
            "the gradient reaching every node; `derivative`: write each derivative symbolically."
        },
    )
    reveal = _strict_boolean("Include the right `answers`.")
    generator = WholeNumber(
        load_default=DEFAULT_GENERATOR,
        validate=validate.OneOf(GENERATORS),
        metadata={
            "description": "The exercise rules: 1, the first (the default, so a seed's exercise "
            "never changes); 2, which adds small programs (`s = a * b` then `out = s * c + "
            "s`) to levels 2 and 3; or 3, which also puts relus into `derivative` exercises, "
            "asked on the piece the bindings lie on. Under each, a seed gives the same exercise "
            "for all of API v1."
        },
    )


class QuestionSchema(Schema):
    item = _out(fields.String, "The item this question is, as /v1/check names it.")
    prompt = _out(fields.String, "The question, in the response's language.")


class ExerciseSchema(Schema):
    seed = _out(fields.Integer, "The seed asked for.")
    level = _out(fields.Integer, "The level asked for.")
    kind = _out(fields.String, "The kind asked for.", validate=validate.OneOf(EXERCISE_KINDS))
    generator = _out(
        fields.Integer,
        "The exercise rules asked for; a seed gives the same exercise under the same rules.",
    )
    expression = _out(fields.String, "The expression to show (send it to /v1/check as is).")
    bindings = _out(
        fields.Dict,
        "The variables' values (send them to /v1/check as is).",
        keys=fields.String(),
        values=fields.Float(),
    )
    instructions = _out(fields.String, "What to do, in the response's language.")
    questions = _out(fields.List, "The questions, one per item.", fields.Nested(QuestionSchema))
    answer_template = _out(
        fields.Dict,
        "The `answers` object /v1/check expects, every answer null: fill it in.",
        keys=fields.String(),
        values=fields.Dict(keys=fields.String(), values=fields.Raw(allow_none=True)),
    )
    graph = _problem(
        fields.Nested,
        "`backward-pass` exercises: the graph whose node ids the questions use.",
        GraphShapeSchema,
    )
    answers = _problem(
        fields.Dict,
        "Only with `reveal: true`: the right answers, in the shape of `answer_template`.",
        keys=fields.String(),
        values=fields.Dict(keys=fields.String(), values=fields.Raw()),
    )
