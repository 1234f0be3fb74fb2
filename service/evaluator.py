"""Evaluate a program with bindings into the JSON-ready document: graph, forward, backward.

A program is compiled once per granularity and output, and kept in a bounded LRU cache: the syntax
tree and the shape of its graph (ids, labels, spans, edges) do not depend on the bindings. Each
evaluation then only builds the `Value` graph, runs backward and writes the numbers into that shape.
Every stage is linear in the size of the program.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from typing import Any

import orjson

from service.engine import Value, format_number
from service.errors import BindingError, DomainError
from service.i18n import DEFAULT_LOCALE, Message, _, _n, localized
from service.limits import DEFAULT_LIMITS, Limits
from service.operations import BY_NAME, apply, shape
from service.parser import Lines, Node, ParsedExpression, parse
from service.scalar import OperatorTape, ScalarTape
from service.tape import Tape

GRANULARITIES = ("operator", "primitive")
DEFAULT_GRANULARITY = "operator"

_APPLIERS = {name: operation.apply for name, operation in BY_NAME.items()}
_OPERAND_TEXT = 40  # longer operands are shortened in an expansion, so it stays readable
Apply = Callable[..., Value | float]


def run(
    parsed: ParsedExpression,
    env: Mapping[str, Value | float],
    locate: Callable[[Node], int | None] | None = None,
    *,
    operation: Apply = apply,
    constant: Callable[[float], Value | float] = float,
) -> dict[Node, Any]:
    """Run the tree as Python would run the program, with `env` giving each input's `Value`
    (or number, for `operation`s on plain numbers).

    Python's own operator dispatch (`2 - a` calls `a.__rsub__(2)`) builds exactly micrograd's
    graph, and a shared tree node is run once, so its `Value` is shared as in Python. Returns
    every tree node's result: a `Value`, or a float for a folded constant. `operation(op, k,
    *operands)` and `constant(value)` replace how an operation and a constant are made, for
    another view of the same tree. A `DomainError` carries the failing operation's span, and
    its graph node from `locate`.
    """
    results: dict[Node, Any] = {}
    # The table's own functions, looked up once per node rather than through `apply`.
    appliers = _APPLIERS if operation is apply else None
    for node in parsed.postorder():
        if node.kind == "variable":
            results[node] = env[node.name]
        elif node.kind == "constant":
            results[node] = constant(node.value)
        else:
            try:
                operands = [results[a] for a in node.args]
                if appliers is not None:
                    results[node] = appliers[node.op](node.exponent, *operands)
                else:
                    results[node] = operation(node.op, node.exponent, *operands)
            except DomainError as error:
                if error.kind == "division_by_zero" and node.op == "/":
                    error = DomainError(error.kind, division_by_zero(parsed, node))
                raise error.located(locate(node) if locate else None, node.span) from None
    return results


def division_by_zero(parsed: ParsedExpression, node: Node) -> Message:
    """`a / (b - c)` failing: "division by zero: b - c is 0", the divisor as it is written;
    `a / 0`: "division by zero". Said of the `/` written, not of the power micrograd makes of
    it (`a * b**-1`)."""
    divisor = node.args[-1]
    if divisor.is_constant:
        return _("division by zero")
    written = _Source.of(parsed).operand(node, divisor, bare=True)
    return _("division by zero: {divisor} is 0", divisor=written)


class Compiled:
    """A program compiled for one granularity: its tree and the shape of its graph."""

    def __init__(self, parsed: ParsedExpression, granularity: str) -> None:
        self.parsed = parsed
        self.granularity = granularity
        self.node_of: dict[Node, int] = {}
        self._skeletons: dict[tuple[tuple[str, ...], str], _Skeleton] = {}
        # Run once with every input NaN: NaN flows through every operation without raising,
        # so this traces the graph's shape without depending on any binding.
        nan = {name: Value(math.nan) for name in parsed.inputs}
        root, results = self.build(nan)
        order = root.topological_order()
        sources = (
            _primitive_sources(parsed, results)
            if granularity == "primitive"
            else _operator_sources(parsed, results)
        )
        position = {id(node): i for i, node in enumerate(order)}
        names = {
            id(result): source.assigned
            for source, result in results.items()
            if source.assigned is not None and isinstance(result, Value)
        }
        # Each node's document with its numbers left blank: evaluating copies it and fills them in.
        # A leaf the engine made for a number inside an operation is traced to the whole
        # program's output only if nothing closer claimed it.
        self.templates = tuple(
            _template(
                i,
                node,
                sources.get(id(node), parsed.root),
                [position[id(child)] for child in node.children],
                nan,
                names.get(id(node)),
                parsed,
            )
            for i, node in enumerate(order)
        )
        self.children = tuple(tuple(template["children"]) for template in self.templates)
        self.root = position[id(root)]
        # Each input's graph node, or None for one the output does not depend on.
        self.input_nodes = tuple(position.get(id(nan[name])) for name in parsed.inputs)
        # The primitive graph as a tape: what a request runs (see service/scalar.py). The
        # operator view's derived nodes are not primitives: it runs on the engine.
        self.tape: ScalarTape | OperatorTape | None = (
            ScalarTape(Tape.from_graph(root, nan))
            if granularity == "primitive"
            else _operator_tape(parsed, order, results)
        )
        # Where each syntax-tree node's result sits in the graph, to name it in a domain error.
        self.node_of = {
            source: position[id(result)]
            for source, result in results.items()
            if isinstance(result, Value)
        }

    @cached_property
    def named(self) -> dict[str, int]:
        """The graph node each name refers to once the program has run, for names whose node
        the output uses: a reassigned name leaves several nodes carrying it, and means the last.
        Only /v1/check asks, so a compile does not work it out."""
        node_of = self.node_of
        return {name: node_of[node] for name, node in self.parsed.bound.items() if node in node_of}

    def skeleton(self, expression: str, selection: tuple[str, ...], locale: str) -> _Skeleton:
        """The document's bytes around its numbers for this selection, made on first use.

        The expression is part of the cache key, so it is the same for every call. Only the
        warnings are sentences: without any, one skeleton serves every language."""
        key = (selection, locale if self.parsed.unused else DEFAULT_LOCALE)
        skeletons = self._skeletons
        skeleton = skeletons.get(key)
        if skeleton is None:
            if len(skeletons) >= SKELETONS:  # a bounded few selections per program
                skeletons.clear()
            skeleton = skeletons[key] = _Skeleton(expression, self, *key)
        return skeleton

    def build(self, env: Mapping[str, Value]) -> tuple[Value, dict[Node, Value | float]]:
        """The graph's root for these input values, and every tree node's result.

        A `DomainError` names the graph node of the operation that failed.
        """
        if self.granularity == "primitive":
            results = run(self.parsed, env, self.node_of.get)
            return _as_value(results[self.parsed.root]), results
        # The operator view: every constant is a leaf where it is written, so a primitive
        # operator is the engine's own node with its operands in the order written.
        results = run(self.parsed, env, self.node_of.get, operation=_operator_node, constant=Value)
        return results[self.parsed.root], results


def _operator_tape(
    parsed: ParsedExpression, order: list[Value], results: dict[Node, Any]
) -> OperatorTape | None:
    """The operator view laid over its program's primitive tape; None where a node cannot be
    traced to the primitive graph (the engine then runs the view itself)."""
    try:
        return _trace_operators(parsed, order, results)
    except KeyError:  # pragma: no cover - a node the primitive graph does not have
        return None


def _trace_operators(
    parsed: ParsedExpression, order: list[Value], results: dict[Node, Any]
) -> OperatorTape | None:
    nan = {name: Value(math.nan) for name in parsed.inputs}
    primitive_results = run(parsed, nan)
    primitive_root = _as_value(primitive_results[parsed.root])
    primitive = ScalarTape(Tape.from_graph(primitive_root, nan))
    index = {id(node): i for i, node in enumerate(primitive_root.topological_order())}
    source_of: dict[int, Node] = {}
    for source in parsed.postorder():
        source_of.setdefault(id(results[source]), source)
    position = {id(node): i for i, node in enumerate(order)}
    sources: list[int | float] = []
    kinds: list[Any] = []
    for node in order:
        traced = source_of.get(id(node))
        constant = not math.isnan(node.data)
        if constant:
            sources.append(node.data)
        elif traced is None or not isinstance(primitive_results.get(traced), Value):
            return None
        elif traced.kind == "variable":
            sources.append(index[id(nan[traced.name])])
        else:
            sources.append(index[id(primitive_results[traced])])
        if not node.children:
            kinds.append(())
        elif not any(math.isnan(child.data) for child in node.children):  # constant operands
            kinds.append(tuple(node.local_grads))
        else:  # the table's rule, as `_operator_node` and the engine compute it
            kinds.append(BY_NAME[node.op].local_grads)
    return OperatorTape(
        primitive,
        tuple(sources),
        tuple(kinds),
        tuple(node.exponent for node in order),
        tuple(tuple(position[id(c)] for c in node.children) for node in order),
        position[id(order[-1])],
    )


def _template(
    index: int,
    node: Value,
    source: Node,
    children: list[int],
    env: Mapping[str, Value],
    name: str | None,
    parsed: ParsedExpression,
) -> dict[str, Any]:
    """What a graph node is, whatever the bindings: its document with the numbers blank."""
    op, exponent, expansion = node.op or None, node.exponent, None
    if op is None:
        variable = source.kind == "variable" and env.get(source.name) is node
        kind, label = (
            ("variable", source.name) if variable else ("constant", format_number(node.data))
        )
    else:
        kind = "operation"
        operation = BY_NAME[op]
        label = operation.label(exponent)
        if not operation.primitive:  # the text is laid out for expansions only when one is needed
            expansion = _Source.of(parsed).expansion(source)
    return {
        "id": index,
        "kind": kind,
        "op": op,
        "label": label,
        "name": name,
        "value": None,
        "grad": None,
        "children": children,
        "local_grads": None,
        "exponent": exponent,
        "derived": expansion is not None,
        "expansion": expansion,
        "span": list(source.span),
    }


def _as_value(result: Value | float) -> Value:
    return result if isinstance(result, Value) else Value(result)


def _primitive_sources(
    parsed: ParsedExpression, results: dict[Node, Value | float]
) -> dict[int, Node]:
    """Which syntax-tree node made each primitive node: `a - b` makes `b * -1`, `-1` and `+`."""
    sources: dict[int, Node] = {}
    for source in parsed.postorder():
        result = results[source]
        if not isinstance(result, Value):  # a folded constant: no node of its own
            continue
        constants = {arg.value: arg for arg in source.args if arg.is_constant}
        stack = [result]
        while stack:
            node = stack.pop()
            if id(node) in sources:
                continue
            # A constant leaf points at the number written, when it is that number.
            sources[id(node)] = constants.get(node.data, source) if not node.children else source
            stack.extend(node.children)
    return sources


def _operator_sources(
    parsed: ParsedExpression, results: dict[Node, Value | float]
) -> dict[int, Node]:
    """Which syntax-tree node each operator-view node stands for; a variable, where it first
    appears (the post-order runs left to right)."""
    sources: dict[int, Node] = {}
    for source in parsed.postorder():
        sources.setdefault(id(results[source]), source)
    return sources


def _operator_node(op: str, exponent: float | None, *operands: Value) -> Value:
    """One operator as written: a primitive is the engine's node; a derived operator is one node
    valued by micrograd's primitives underneath, with its composite local derivatives."""
    operation = BY_NAME[op]
    result: Value = operation.apply(exponent, *operands)
    if operation.primitive:
        return result
    values = [operand.data for operand in operands]
    return Value(result.data, operands, operation.local_grads(exponent, result.data, *values), op)


# Whitespace and comments, which an expansion shows as one space.
_GAPS = re.compile(r"(?:[ \t\r\n]|#[^\n]*)+")


class _Source:
    """The program text with each gap of space and comments collapsed to one space, and where
    each position of the text lands in it: an operand's text in time independent of its length."""

    def __init__(self, text: str) -> None:
        self.collapsed = _GAPS.sub(" ", text)
        self.gap_ends: list[int] = []
        self.removed: list[int] = []  # characters removed up to and including each gap
        removed = 0
        for gap in _GAPS.finditer(text):
            removed += gap.end() - gap.start() - 1
            self.gap_ends.append(gap.end())
            self.removed.append(removed)

    @staticmethod
    def of(parsed: ParsedExpression) -> _Source:
        source = parsed.__dict__.get("_source")
        if source is None:
            source = parsed.__dict__["_source"] = _Source(parsed.text)
        return source

    def where(self, position: int) -> int:
        gaps = bisect.bisect_right(self.gap_ends, position)
        return position - (self.removed[gaps - 1] if gaps else 0)

    def operand(self, user: Node, arg: Node, *, bare: bool = False) -> str:
        """How `arg` is written where `user` uses it, shortened, parenthesised unless `bare`."""
        if arg.kind == "constant":
            return format_number(arg.value)
        if arg.kind == "variable":
            return arg.name
        if arg.assigned and not (user.span[0] <= arg.span[0] and arg.span[1] <= user.span[1]):
            return arg.assigned  # a named value from an earlier statement
        start, end = self.where(arg.span[0]), self.where(arg.span[1])
        text = self.collapsed
        if end - start > _OPERAND_TEXT:
            half = _OPERAND_TEXT // 2
            written = f"{text[start : start + half]}…{text[end - half : end]}"
        else:
            written = text[start:end]
        atomic = bare or (text[start] == "(" and text[end - 1] == ")")
        return written if atomic else f"({written})"

    def expansion(self, source: Node) -> str:
        """How micrograd builds this derived operation, with its operands as written."""
        form = shape(tuple(arg.is_constant for arg in source.args))
        operands = [self.operand(source, arg) for arg in source.args]
        constants = {}
        if form == "vc":
            c = source.args[1].value
            constants = {"neg1": format_number(-c), "inv1": _reciprocal(c)}
        return BY_NAME[source.op].expansions[form].format(*operands, **constants)


def _reciprocal(c: float) -> str:
    """The constant micrograd makes of `x / c`, `c ** -1`, as an expansion writes it: "inf" where
    no float is it (c is 0, or below the reciprocal of the largest float, as 1e-320 is)."""
    try:
        return format_number(c**-1)
    except (ZeroDivisionError, OverflowError):
        return "inf"


class Evaluator:
    """Parses, compiles and evaluates programs under one set of limits, with a bounded cache."""

    def __init__(
        self, limits: Limits = DEFAULT_LIMITS, cache_size: int = 256, cache_nodes: int = 60_000
    ) -> None:
        self.limits = limits
        # A compiled program holds about 1.8 KB per graph node, and up to 0.66 KB more for each
        # selection of fields it keeps rendered (`SKELETONS`), so the cache is bounded by entries
        # and by their nodes together: a few pasted 20,000-node programs must not pin hundreds of
        # megabytes in every worker (docs/DEPLOY.md sizes a pod from the bound).
        self.cache_size = cache_size
        self.cache_nodes = cache_nodes
        self._cache: OrderedDict[tuple[str, str, str | None], Compiled] = OrderedDict()
        self._cached_nodes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def compile(
        self, expression: str, granularity: str = DEFAULT_GRANULARITY, output: str | None = None
    ) -> Compiled:
        """The compiled program, from the LRU cache when it was seen recently."""
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {GRANULARITIES}, not {granularity!r}")
        key = (expression, granularity, output)
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return compiled
            self.misses += 1
        try:
            with _no_cycle_collection():
                compiled = Compiled(parse(expression, self.limits, output), granularity)
        except DomainError as error:  # a constant divisor of 0, whatever the bindings
            raise error.at(expression) from None
        size = len(compiled.templates)
        if self.cache_size > 0 and size <= self.cache_nodes:
            with self._lock:
                if key not in self._cache:
                    self._cache[key] = compiled
                    self._cached_nodes += size
                while len(self._cache) > self.cache_size or self._cached_nodes > self.cache_nodes:
                    _, evicted = self._cache.popitem(last=False)
                    self._cached_nodes -= len(evicted.templates)
        return compiled

    def cache_info(self) -> dict[str, int]:
        with self._lock:
            return {
                "max_entries": self.cache_size,
                "max_nodes": self.cache_nodes,
                "entries": len(self._cache),
                "nodes": self._cached_nodes,
                "hits": self.hits,
                "misses": self.misses,
            }

    def structure(
        self,
        expression: str,
        granularity: str = DEFAULT_GRANULARITY,
        output: str | None = None,
        locale: str = DEFAULT_LOCALE,
    ) -> dict[str, Any]:
        """The graph without numbers, and the inputs to bind: for laying out the graph. Its
        warnings are in `locale`."""
        with _no_cycle_collection():  # one region for the request: see `_no_cycle_collection`
            compiled = self.compile(expression, granularity, output)
            nodes = [_shape_document(template) for template in compiled.templates]
        parsed = compiled.parsed
        return {
            "expression": expression,
            "granularity": granularity,
            "variables": list(parsed.variables),
            "inputs": [
                {"name": name, "default": parsed.defaults.get(name)} for name in parsed.inputs
            ],
            "output": parsed.output,
            "graph": {"root": compiled.root, "nodes": nodes},
            "forward": list(range(len(nodes))),
            "warnings": localized(unused_warnings(parsed), locale),
        }

    def evaluate(
        self,
        expression: str,
        bindings: Mapping[str, float] | None = None,
        granularity: str = DEFAULT_GRANULARITY,
        output: str | None = None,
        locale: str = DEFAULT_LOCALE,
    ) -> dict[str, Any]:
        """Value, gradients, graph, forward order and backward schedule for these bindings; the
        warnings in `locale`."""
        with _no_cycle_collection():
            compiled = self.compile(expression, granularity, output)
            env = self.bind(compiled.parsed, bindings or {})
            evaluation = _evaluation(expression, compiled, env)
            return _document(expression, compiled, evaluation, locale)

    def render(
        self,
        expression: str,
        bindings: Mapping[str, float] | None = None,
        granularity: str = DEFAULT_GRANULARITY,
        output: str | None = None,
        fields: str | None = None,
        locale: str = DEFAULT_LOCALE,
    ) -> bytes:
        """`evaluate`'s document as JSON bytes, or only the parts `fields` names (see `select`).

        The whole document's bytes are exactly `orjson.dumps(evaluate(...))`; a selection keeps
        the document's keys in its order and adds `nodes`, the node columns asked for."""
        selection = select(fields)
        with _no_cycle_collection():
            compiled = self.compile(expression, granularity, output)
            env = self.bind(compiled.parsed, bindings or {})
            skeleton = compiled.skeleton(expression, selection, locale)
            return skeleton.render(_evaluation(expression, compiled, env))

    def bind(self, parsed: ParsedExpression, bindings: Mapping[str, float]) -> dict[str, Value]:
        """A `Value` for every input: its binding, else its declared default; or a
        `BindingError` naming what is wrong."""
        if len(bindings) > self.limits.max_bindings:
            raise too_many_bindings(len(bindings), self.limits.max_bindings)
        defaults = parsed.defaults
        missing = [n for n in parsed.variables if n not in bindings and n not in defaults]
        unknown = sorted(n for n in bindings if n not in parsed.input_set)
        if missing:
            raise unbound(parsed, missing, unknown)
        if unknown:
            raise unknown_bindings(unknown, parsed)
        env = {}
        for name in parsed.inputs:
            # An input the output does not use needs no value: unbound, it stands at 0.
            value = bindings.get(name, defaults.get(name, 0.0))
            if not is_finite_number(value):
                raise invalid_binding(name, value)
            env[name] = Value(value)
        return env


def invalid_binding(
    name: str, value: object, where: str | None = None, location: str = "/bindings"
) -> BindingError:
    """The refusal of `value` for `name`; `where` names the object of the request it is in, in
    words, when it is not the request's bindings, and `location` as a JSON pointer."""
    if where is None:
        message = _(
            "{name} must be bound to a finite number, not {value}",
            name=name,
            value=describe(value),
        )
    else:
        message = _(
            "{name} must be bound to a finite number in {where}, not {value}",
            name=name,
            where=where,
            value=describe(value),
        )
    return BindingError("invalid_binding", message, [name], location)


def too_many_bindings(count: int, maximum: int) -> BindingError:
    return BindingError(
        "too_many_bindings",
        _("{count} bindings; the limit is {maximum}", count=count, maximum=maximum),
        [],
        limit="max_bindings",
        maximum=maximum,
    )


def _written(names: list[str]) -> str:
    """Bindings' names for a sentence. A binding's name may be any text: one that is not a
    name (`""`, `"a b"`) is quoted, so that the sentence shows it."""
    return ", ".join(name if name.isidentifier() else repr(name) for name in names)


def unbound(
    parsed: ParsedExpression, missing: list[str], unknown: list[str], point: int | None = None
) -> BindingError:
    """No value for the inputs `missing` (at a sweep's `point`, when other points give them):
    placed at the first one's first use in the text."""
    if point is not None:
        message = _n(
            "no value given for {names} in points[{index}]",
            "no values given for {names} in points[{index}]",
            len(missing),
            names=", ".join(missing),
            index=point,
        )
    elif unknown:
        message = _(
            "no value given for {missing} (the bindings name {unknown}, which the expression "
            "does not use)",
            missing=", ".join(missing),
            unknown=_written(unknown),
        )
    else:
        message = _("no value given for {missing}", missing=", ".join(missing))
    span = parsed.first_use(frozenset(missing))  # the first in the text of them all
    return BindingError("unbound_variables", message, missing, span=span).at(parsed.text)


def unknown_bindings(
    unknown: list[str], parsed: ParsedExpression, varied: bool = False
) -> BindingError:
    """Bindings of names that are not inputs: ones the program assigns, or not in it at all;
    `varied`: the names are a sweep's `vary`, not bindings."""
    computed = [name for name in unknown if name in parsed.assigned]
    named = computed or unknown  # a value the program computes is said first
    about = {"names": _written(named), "inputs": ", ".join(parsed.inputs)}
    if varied and computed:
        message = _(
            "vary names {names}, which the program computes; vary its inputs ({inputs})", **about
        )
    elif varied:
        message = _n(
            "vary names {names}, which is not an input of the expression; vary one of its inputs "
            "({inputs})",
            "vary names {names}, which are not inputs of the expression; vary its inputs "
            "({inputs})",
            len(named),
            **about,
        )
    elif computed:
        message = _n(
            "{names} is assigned by the program, so it takes no value: give values to its inputs "
            "({inputs})",
            "{names} are assigned by the program, so they take no values: give values to its "
            "inputs ({inputs})",
            len(named),
            **about,
        )
    elif len(unknown) == 1:
        message = _(
            "{name} is not in the expression; remove the binding or check the spelling",
            name=about["names"],
        )
    else:
        message = _(
            "{names} are not in the expression; remove the bindings or check the spelling",
            names=about["names"],
        )
    return BindingError("unknown_variables", message, unknown)


def unused_warnings(parsed: ParsedExpression) -> list[dict[str, Any]]:
    """A warning for each statement the output does not depend on; its message a `Message`,
    rendered in a request's language by `service.i18n.localized`."""
    warnings: list[dict[str, Any]] = []
    if not parsed.unused:
        return warnings
    lines = Lines(parsed.text)
    for name, span in parsed.unused:
        line, column = lines(span[0])
        warnings.append(
            {
                "kind": "unused",
                "name": name,
                "message": _(
                    "{name} is assigned on line {line}, but the output does not depend on it",
                    name=name,
                    line=line,
                )
                if name is not None
                else _(
                    "the expression on line {line} is computed and dropped: the output does not "
                    "depend on it; assign it to a name the output reads, or remove it",
                    line=line,
                ),
                "span": list(span),
                "line": line,
                "column": column,
                # as a problem's and a sweep error's, so one reader shows all three
                "position": {"start": span[0], "end": span[1], "line": line, "column": column},
            }
        )
    return warnings


_NUMBERS = ("value", "grad", "local_grads")


def _shape_document(template: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in template.items() if key not in _NUMBERS}


def _node_documents(
    templates: tuple[dict[str, Any], ...], evaluation: _Evaluation
) -> list[dict[str, Any]]:
    """Each node's template with its numbers filled in."""
    # Copying a node's template and filling in three numbers is the cheapest way to a fresh
    # document; the lists inside (children, span) are shared between documents and never mutated.
    nodes = []
    for template, value, grad, local_grads in zip(
        templates, evaluation.values, evaluation.grads, evaluation.locals, strict=True
    ):
        document = template.copy()
        document["value"] = value
        document["grad"] = grad
        document["local_grads"] = list(local_grads)
        nodes.append(document)
    return nodes


def _schedule(
    children: tuple[tuple[int, ...], ...], evaluation: _Evaluation
) -> list[dict[str, Any]]:
    """The backward pass narrated: same order, same sums, step by step."""
    running = [0.0] * len(children)
    backward = []
    for i in range(len(children) - 1, -1, -1):
        grad = evaluation.grads[i]
        sends = []
        for child, local in zip(children[i], evaluation.locals[i], strict=True):
            contribution = local * grad
            after = running[child] = running[child] + contribution
            sends.append(
                {
                    "to": child,
                    "local_grad": local,
                    "contribution": contribution,
                    "grad_after": after,
                }
            )
        backward.append({"node": i, "grad": grad, "sends": sends})
    return backward


def _document(
    expression: str, compiled: Compiled, evaluation: _Evaluation, locale: str
) -> dict[str, Any]:
    nodes = _node_documents(compiled.templates, evaluation)
    parsed = compiled.parsed
    return {
        "expression": expression,
        "granularity": compiled.granularity,
        "value": evaluation.values[compiled.root],
        "gradients": dict(zip(parsed.inputs, evaluation.input_grads, strict=True)),
        "output": parsed.output,
        "graph": {"root": compiled.root, "nodes": nodes},
        "forward": list(range(len(nodes))),
        "backward": _schedule(compiled.children, evaluation),
        "warnings": localized(unused_warnings(parsed), locale),
    }


def gradient_overflow(label: str) -> Message:
    return _("the gradient at '{label}' is not a finite number (it overflows)", label=label)


def _non_finite(nodes: list[dict[str, Any]]) -> DomainError:
    """The first node, from the root down, whose gradient or local derivative is not finite."""
    for node in reversed(nodes):
        numbers = [node["grad"], *node["local_grads"]]
        numbers += [g * node["grad"] for g in node["local_grads"]]
        if not all(math.isfinite(x) for x in numbers):
            return DomainError(
                "non_finite",
                gradient_overflow(node["label"]),
                node["id"],
                tuple(node["span"]),
            )
    # Only a running sum overflowed: name the node it was summing into.
    node = max(nodes, key=lambda n: abs(n["grad"]))
    return DomainError(
        "non_finite",
        _("a gradient overflows the range of a 64-bit float"),
        node["id"],
        tuple(node["span"]),
    )


# -- the document as bytes -------------------------------------------------------------------

# The parts of a document a client may ask for by `fields`: its top-level keys, and columns of
# the graph's nodes (`nodes.value` is every node's value, in node order).
DOCUMENT_FIELDS = (
    "expression", "granularity", "value", "gradients", "output", "graph", "forward", "backward",
    "warnings",
)  # fmt: skip
_NODE_KEYS = (
    "id", "kind", "op", "label", "name", "value", "grad", "children", "local_grads", "exponent",
    "derived", "expansion", "span",
)  # fmt: skip
NODE_FIELDS = tuple(f"nodes.{key}" for key in _NODE_KEYS)
FIELDS = DOCUMENT_FIELDS + NODE_FIELDS
_SLOT = "\x00"  # stands for a number in a rendered skeleton; never in a document's own text


def select(fields: str | None) -> tuple[str, ...]:
    """The parts a `fields` list names, in the document's order; all of it for None.

    Raises ValueError naming the first unknown part."""
    if fields is None:
        return DOCUMENT_FIELDS
    names = {name.strip() for name in fields.split(",")}
    for name in names:
        if name not in FIELDS:
            raise ValueError(name)
    return tuple(name for name in FIELDS if name in names)


class _Skeleton:
    """A document's bytes for one selection of fields, with a gap wherever a number goes.

    The graph's shape, labels, expansions and warnings do not depend on the bindings, so they are
    serialized once per compiled program; a request serializes only its numbers (one `orjson`
    call on a flat list) and splices them into the gaps, giving the very bytes the whole
    document would have serialized to."""

    def __init__(
        self, expression: str, compiled: Compiled, selection: tuple[str, ...], locale: str
    ) -> None:
        self.expression = expression
        self.compiled = compiled
        self.selection = selection
        self.locale = locale
        templates = compiled.templates
        slot = _SLOT
        full: dict[str, Any] = {
            "expression": expression,
            "granularity": compiled.granularity,
            "value": slot,
            "gradients": dict.fromkeys(compiled.parsed.inputs, slot),
            "output": compiled.parsed.output,
            "graph": {
                "root": compiled.root,
                "nodes": [
                    {
                        **template,
                        "value": slot,
                        "grad": slot,
                        "local_grads": [slot] * len(template["children"]),
                    }
                    for template in templates
                ],
            },
            "forward": list(range(len(templates))),
            "backward": [
                {
                    "node": i,
                    "grad": slot,
                    "sends": [
                        {"to": c, "local_grad": slot, "contribution": slot, "grad_after": slot}
                        for c in compiled.children[i]
                    ],
                }
                for i in range(len(templates) - 1, -1, -1)
            ],
            "warnings": localized(unused_warnings(compiled.parsed), locale),
        }
        document = {key: full[key] for key in selection if key in full}
        columns = [name.split(".", 1)[1] for name in selection if name.startswith("nodes.")]
        if columns:
            nodes = full["graph"]["nodes"]
            document["nodes"] = {key: [node[key] for node in nodes] for key in columns}
        marker = orjson.dumps(slot)
        self.fragments: list[bytes] | None = orjson.dumps(document).split(marker)
        edges = sum(map(len, compiled.children))
        counts = {
            "value": 1,
            "gradients": len(compiled.parsed.inputs),
            "graph": 2 * len(templates) + edges,
            "backward": len(templates) + 3 * edges,
            "nodes.value": len(templates),
            "nodes.grad": len(templates),
            "nodes.local_grads": edges,
        }
        expected = sum(counts.get(name, 0) for name in selection)
        if len(self.fragments) != expected + 1:  # pragma: no cover - a NUL in the text itself
            self.fragments = None

    def render(self, evaluation: _Evaluation) -> bytes:
        numbers: list[float] = []
        for name in self.selection:
            part = _NUMBERS_OF.get(name)
            if part is not None:
                part(evaluation, numbers)
        fragments = self.fragments
        if fragments is None:  # pragma: no cover - see __init__
            whole = _document(self.expression, self.compiled, evaluation, self.locale)
            return orjson.dumps(_selected(whole, self.selection))
        if not numbers:
            return fragments[0]
        pieces: list[bytes | None] = [None] * (2 * len(numbers) + 1)
        pieces[::2] = fragments
        pieces[1::2] = orjson.dumps(numbers)[1:-1].split(b",")
        return b"".join(pieces)  # type: ignore[arg-type]


def _selected(document: dict[str, Any], selection: tuple[str, ...]) -> dict[str, Any]:
    """The parts of a whole document a selection names, as `_Skeleton` lays them out."""
    selected = {key: document[key] for key in selection if key in document}
    columns = [name.split(".", 1)[1] for name in selection if name.startswith("nodes.")]
    if columns:
        nodes = document["graph"]["nodes"]
        selected["nodes"] = {key: [node[key] for node in nodes] for key in columns}
    return selected


class _Evaluation:
    """One evaluation's numbers, node by node in forward order, and the inputs' gradients."""

    def __init__(
        self,
        values: list[float],
        grads: list[float],
        locals_: list[tuple[float, ...]],
        input_grads: list[float],
        compiled: Compiled,
    ) -> None:
        self.root = compiled.root
        self.children = compiled.children
        self.values = values
        self.grads = grads
        self.locals = locals_
        self.input_grads = input_grads


def _evaluation(expression: str, compiled: Compiled, env: dict[str, Value]) -> _Evaluation:
    """The numbers of an evaluation: from the program's tape, or where a number is not finite
    (or the program has no tape), from the engine, which raises the error that says why."""
    inputs = compiled.parsed.inputs
    tape = compiled.tape
    run = tape.run({name: env[name].data for name in inputs}) if tape is not None else None
    if run is not None:
        values, grads, locals_ = run
        input_grads = [grads[i] if i is not None else 0.0 for i in compiled.input_nodes]
    else:
        try:
            root, _ = compiled.build(env)
        except DomainError as error:
            raise error.at(expression) from None
        order = root.backward()
        values = [node.data for node in order]
        grads = [node.grad for node in order]
        locals_ = [node.local_grads for node in order]
        input_grads = [env[name].grad for name in inputs]
    evaluation = _Evaluation(values, grads, locals_, input_grads, compiled)
    # Every local derivative and gradient is summed into some node's gradient, and an infinity
    # survives a sum: a gradient overflowing on the way back leaves one of them non-finite.
    if not all(map(math.isfinite, grads)):
        overflow = _non_finite(_node_documents(compiled.templates, evaluation))
        raise overflow.at(expression) from None
    return evaluation


def _value_numbers(evaluation: _Evaluation, out: list[float]) -> None:
    out.append(evaluation.values[evaluation.root])


def _gradient_numbers(evaluation: _Evaluation, out: list[float]) -> None:
    out += evaluation.input_grads


def _graph_numbers(evaluation: _Evaluation, out: list[float]) -> None:
    append, extend = out.append, out.extend
    for value, grad, local_grads in zip(
        evaluation.values, evaluation.grads, evaluation.locals, strict=True
    ):
        append(value)
        append(grad)
        extend(local_grads)


def _backward_numbers(evaluation: _Evaluation, out: list[float]) -> None:
    # The schedule of `_schedule`: every send's local derivative, contribution and running sum.
    children, grads, locals_ = evaluation.children, evaluation.grads, evaluation.locals
    running = [0.0] * len(grads)
    append, extend = out.append, out.extend
    for i in range(len(grads) - 1, -1, -1):
        grad = grads[i]
        append(grad)
        for child, local in zip(children[i], locals_[i], strict=True):
            contribution = local * grad
            after = running[child] = running[child] + contribution
            extend((local, contribution, after))


def _local_numbers(evaluation: _Evaluation, out: list[float]) -> None:
    for local_grads in evaluation.locals:
        out.extend(local_grads)


_NUMBERS_OF: dict[str, Callable[[_Evaluation, list[float]], None]] = {
    "value": _value_numbers,
    "gradients": _gradient_numbers,
    "graph": _graph_numbers,
    "backward": _backward_numbers,
    "nodes.value": lambda evaluation, out: out.extend(evaluation.values),
    "nodes.grad": lambda evaluation, out: out.extend(evaluation.grads),
    "nodes.local_grads": _local_numbers,
}
# Selections of fields a compiled program keeps rendered: the whole document's fragments take
# about half a kilobyte per graph node, a slider's `value,gradients` a few bytes.
SKELETONS = 4


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Without the cycle collector: parsing, compiling and evaluating allocate several objects
    per graph node (tree nodes, `Value`s, tuples, documents), none of them in a cycle, and free
    them by reference counting. A collection triggered on the way would only traverse them, and
    all that is alive besides, for nothing; and as a large program's young objects outgrow each
    generation's threshold the collector's passes over them add up to more than linear time.

    A request is one such region, so the next collection after it goes once over what the
    request kept (the compiled program when it is cached, the document), not once per stage.
    Regions nest: only the outermost turns the collector back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_default = Evaluator()


def evaluate(
    expression: str,
    bindings: Mapping[str, float] | None = None,
    granularity: str = DEFAULT_GRANULARITY,
    output: str | None = None,
) -> dict[str, Any]:
    """Evaluate with the default limits and a shared cache: see `Evaluator.evaluate`."""
    return _default.evaluate(expression, bindings, granularity, output)


def is_finite_number(value: object) -> bool:
    """True for an int or float that is a finite double; never for a bool."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond the range of a double
        return False


def describe(value: object) -> str:
    """A value a request sent where a number belongs, as the client wrote it, shortened."""
    if isinstance(value, int) and not isinstance(value, bool) and not is_finite_number(value):
        return _("an integer beyond the range of a 64-bit float")
    try:  # as the client wrote it: `true`, `null`, `"2"`, not Python's `True`, `None`, `'2'`
        shown = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # NaN, Infinity, or an object JSON cannot hold
        shown = repr(value)
    if isinstance(shown, Message):  # a sentence of its own (a number JSON spells too large)
        return shown
    return shown if len(shown) <= 40 else f"{shown[:37]}..."
