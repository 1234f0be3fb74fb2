"""Evaluate an expression with bindings into the JSON-ready document: graph, forward, backward.

An expression is compiled once per granularity and kept in a bounded LRU cache: the syntax tree and
the shape of its graph (ids, labels, spans, edges) do not depend on the bindings. Each evaluation
then only builds the `Value` graph, runs backward and writes the numbers into that shape.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from service.engine import Value, format_number
from service.errors import BindingError, DomainError
from service.limits import DEFAULT_LIMITS, Limits
from service.operations import BY_NAME
from service.parser import Node, ParsedExpression, apply_operation, parse

GRANULARITIES = ("operator", "primitive")
DEFAULT_GRANULARITY = "operator"

# Expansion of each derived operation by which operands are constants, as micrograd builds it:
# `a - 2` becomes `a + -2` (Python negates the number), `2 / a` becomes `(a ** -1) * 2`.
_EXPANSIONS = {
    ("neg", "v"): "{0} * -1",
    ("-", "vv"): "{0} + ({1} * -1)",
    ("-", "vc"): "{0} + {neg1}",
    ("-", "cv"): "({1} * -1) + {0}",
    ("/", "vv"): "{0} * {1} ** -1",
    ("/", "vc"): "{0} * {inv1}",
    ("/", "cv"): "({1} ** -1) * {0}",
}
_OPERAND_TEXT = 40  # longer operands are shortened in an expansion, so it stays readable


class Compiled:
    """An expression compiled for one granularity: its tree and the shape of its graph."""

    def __init__(self, parsed: ParsedExpression, granularity: str) -> None:
        self.parsed = parsed
        self.granularity = granularity
        self.node_of: dict[Node, int] = {}
        # Run once with every variable NaN: NaN flows through every operation without raising,
        # so this traces the graph's shape without depending on any binding.
        nan = {name: Value(math.nan) for name in parsed.variables}
        root, results = self.build(nan)
        order = root.topological_order()
        sources = (
            _primitive_sources(parsed, results)
            if granularity == "primitive"
            else _operator_sources(parsed, results)
        )
        position = {id(node): i for i, node in enumerate(order)}
        # Each node's document with its numbers left blank: evaluating copies it and fills them in.
        # A leaf the engine made for a number inside an operation is traced to the whole
        # expression only if nothing closer claimed it.
        self.templates = tuple(
            self.template(i, node, sources.get(id(node), parsed.root), position, nan)
            for i, node in enumerate(order)
        )
        self.children = tuple(tuple(template["children"]) for template in self.templates)
        self.root = position[id(root)]
        # Where each syntax-tree node's result sits in the graph, to name it in a domain error.
        self.node_of = {
            source: position[id(result)]
            for source, result in results.items()
            if isinstance(result, Value)
        }

    def build(self, env: dict[str, Value]) -> tuple[Value, dict[Node, Value | float]]:
        """The graph's root for these variable values, and every tree node's result.

        A `DomainError` names the graph node of the operation that failed.
        """
        if self.granularity == "primitive":
            results = self.parsed.evaluate(env, self.node_of.get)
            return _as_value(results[self.parsed.root]), results
        # The operator view: every constant is a leaf where it is written, so a primitive
        # operator is the engine's own node with its operands in the order written.
        results = self.parsed.evaluate(env, self.node_of.get, apply=_operator_node, constant=Value)
        return results[self.parsed.root], results

    def template(
        self, index: int, node: Value, source: Node, position: dict[int, int], env: dict
    ) -> dict[str, Any]:
        """What a graph node is, whatever the bindings: its document with the numbers blank."""
        op, exponent, expansion = node._op or None, node.exponent, None
        if op is None:
            variable = source.kind == "variable" and env.get(source.name) is node
            kind, label = (
                ("variable", source.name) if variable else ("constant", format_number(node.data))
            )
        else:
            kind = "operation"
            label = f"**{format_number(exponent)}" if op == "**" else ("-" if op == "neg" else op)
            if not BY_NAME[op].primitive:
                expansion = _expansion(self.parsed.text, source)
        return {
            "id": index,
            "kind": kind,
            "op": op,
            "label": label,
            "value": None,
            "grad": None,
            "children": [position[id(child)] for child in node._children],
            "local_grads": None,
            "exponent": exponent,
            "derived": expansion is not None,
            "expansion": expansion,
            "span": list(source.span),
        }


def _as_value(result: Value | float) -> Value:
    return result if isinstance(result, Value) else Value(result)


def _primitive_sources(parsed: ParsedExpression, results: dict[Node, Value | float]) -> dict:
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
            sources[id(node)] = constants.get(node.data, source) if not node._children else source
            stack.extend(node._children)
    return sources


def _operator_sources(parsed: ParsedExpression, results: dict[Node, Value]) -> dict[int, Node]:
    """Which syntax-tree node each operator-view node stands for; a variable, where it first
    appears (the post-order runs left to right)."""
    sources: dict[int, Node] = {}
    for source in parsed.postorder():
        sources.setdefault(id(results[source]), source)
    return sources


def _operator_node(op: str, exponent: float | None, *operands: Value) -> Value:
    """One operator as written: a primitive is the engine's node; a derived operator is one node
    valued by micrograd's primitives underneath, with its composite local derivatives."""
    result = apply_operation(op, exponent, *operands)
    assert isinstance(result, Value)
    operation = BY_NAME[op]
    if operation.local_grads is None:
        return result
    local_grads = operation.local_grads(*(operand.data for operand in operands))
    return Value(result.data, operands, local_grads, op)


def _expansion(text: str, source: Node) -> str:
    shape = "".join("c" if arg.is_constant else "v" for arg in source.args)
    operands = [_operand_text(text, arg) for arg in source.args]
    constants = {}
    if shape == "vc":
        c = source.args[1].value
        constants = {"neg1": format_number(-c), "inv1": format_number(c**-1) if c else "inf"}
    return _EXPANSIONS[source.op, shape].format(*operands, **constants)


def _operand_text(text: str, arg: Node) -> str:
    if arg.kind == "constant":
        return format_number(arg.value)
    written = " ".join(text[arg.span[0] : arg.span[1]].split())
    if len(written) > _OPERAND_TEXT:
        half = _OPERAND_TEXT // 2
        written = f"{written[:half]}…{written[-half:]}"
    atomic = arg.kind == "variable" or (written.startswith("(") and written.endswith(")"))
    return written if atomic else f"({written})"


class Evaluator:
    """Parses, compiles and evaluates expressions under one set of limits, with a bounded cache."""

    def __init__(
        self, limits: Limits = DEFAULT_LIMITS, cache_size: int = 256, cache_nodes: int = 60_000
    ) -> None:
        self.limits = limits
        # A compiled expression holds about a kilobyte per graph node, so the cache is bounded by
        # entries and by their nodes together: a few pasted 20,000-node expressions must not pin
        # hundreds of megabytes in every worker.
        self.cache_size = cache_size
        self.cache_nodes = cache_nodes
        self._cache: OrderedDict[tuple[str, str], Compiled] = OrderedDict()
        self._cached_nodes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def compile(self, expression: str, granularity: str = DEFAULT_GRANULARITY) -> Compiled:
        """The compiled expression, from the LRU cache when it was seen recently."""
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {GRANULARITIES}, not {granularity!r}")
        key = (expression, granularity)
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return compiled
            self.misses += 1
        compiled = Compiled(parse(expression, self.limits), granularity)
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

    def structure(self, expression: str, granularity: str = DEFAULT_GRANULARITY) -> dict[str, Any]:
        """The graph without numbers, and the variables to bind: for laying out the graph."""
        compiled = self.compile(expression, granularity)
        nodes = [_shape_document(template) for template in compiled.templates]
        return {
            "expression": expression,
            "granularity": granularity,
            "variables": list(compiled.parsed.variables),
            "graph": {"root": compiled.root, "nodes": nodes},
            "forward": list(range(len(nodes))),
        }

    def evaluate(
        self,
        expression: str,
        bindings: Mapping[str, float],
        granularity: str = DEFAULT_GRANULARITY,
    ) -> dict[str, Any]:
        """Value, gradients, graph, forward order and backward schedule for these bindings."""
        compiled = self.compile(expression, granularity)
        env = self.bind(compiled.parsed, bindings)
        root, _ = compiled.build(env)
        order = root.backward()
        return _document(expression, compiled, order, env)

    def bind(self, parsed: ParsedExpression, bindings: Mapping[str, float]) -> dict[str, Value]:
        """A `Value` for every variable, or a `BindingError` naming what is wrong."""
        if len(bindings) > self.limits.max_bindings:
            raise BindingError(
                "too_many_bindings",
                f"{len(bindings)} bindings; at most {self.limits.max_bindings} are accepted",
                [],
            )
        missing = [name for name in parsed.variables if name not in bindings]
        known = parsed.variable_set
        unknown = sorted(name for name in bindings if name not in known)
        if missing:
            also = (
                f" (the bindings name {', '.join(unknown)}, which the expression does not use)"
                if unknown
                else ""
            )
            raise BindingError(
                "unbound_variables", f"no value given for {', '.join(missing)}{also}", missing
            )
        if unknown:
            raise BindingError(
                "unknown_variables",
                f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in the "
                "expression; remove the binding or check the spelling",
                unknown,
            )
        env = {}
        for name in parsed.variables:
            value = bindings[name]
            if not _is_finite_number(value):
                raise BindingError(
                    "invalid_binding",
                    f"{name} must be bound to a finite number, not {_describe(value)}",
                    [name],
                )
            env[name] = Value(value)
        return env


_NUMBERS = ("value", "grad", "local_grads")


def _shape_document(template: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in template.items() if key not in _NUMBERS}


def _document(
    expression: str, compiled: Compiled, order: list[Value], env: dict[str, Value]
) -> dict[str, Any]:
    templates = compiled.templates
    if len(order) != len(templates):  # pragma: no cover - the shape is binding-independent
        raise AssertionError("the graph changed shape between compilation and evaluation")
    # Copying a node's template and filling in three numbers is the cheapest way to a fresh
    # document; the lists inside (children, span) are shared between documents and never mutated.
    nodes = []
    for template, node in zip(templates, order, strict=True):
        document = template.copy()
        document["value"] = node.data
        document["grad"] = node.grad
        document["local_grads"] = list(node._local_grads)
        nodes.append(document)
    # The backward schedule narrates the engine's pass: same order, same sums, step by step.
    running = [0.0] * len(order)
    backward = []
    for i in range(len(order) - 1, -1, -1):
        node = order[i]
        grad = node.grad
        sends = []
        for child, local in zip(compiled.children[i], node._local_grads, strict=True):
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
    # Every local derivative and gradient passes through a send into some running sum, so a
    # non-finite one (an overflow on the way back) leaves a sum non-finite: one check finds it.
    if not all(map(math.isfinite, running)):
        raise _non_finite(nodes)
    root = order[compiled.root]
    return {
        "expression": expression,
        "granularity": compiled.granularity,
        "value": root.data,
        "gradients": {name: env[name].grad for name in compiled.parsed.variables},
        "graph": {"root": compiled.root, "nodes": nodes},
        "forward": list(range(len(order))),
        "backward": backward,
    }


def _non_finite(nodes: list[dict[str, Any]]) -> DomainError:
    """The first node, from the root down, whose gradient or local derivative is not finite."""
    for node in reversed(nodes):
        numbers = [node["grad"], *node["local_grads"]]
        numbers += [g * node["grad"] for g in node["local_grads"]]
        if not all(math.isfinite(x) for x in numbers):
            return DomainError(
                "non_finite",
                f"the gradient at '{node['label']}' is not a finite number (it overflows)",
                node["id"],
                tuple(node["span"]),
            )
    # Only a running sum overflowed: name the node it was summing into.
    node = max(nodes, key=lambda n: abs(n["grad"]))
    return DomainError(
        "non_finite",
        "a gradient overflows the range of a 64-bit float",
        node["id"],
        tuple(node["span"]),
    )


_default = Evaluator()


def evaluate(
    expression: str, bindings: Mapping[str, float], granularity: str = DEFAULT_GRANULARITY
) -> dict[str, Any]:
    """Evaluate with the default limits and a shared cache: see `Evaluator.evaluate`."""
    return _default.evaluate(expression, bindings, granularity)


def _is_finite_number(value: object) -> bool:
    """True for an int or float that is a finite double; never for a bool."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond the range of a double
        return False


def _describe(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and not _is_finite_number(value):
        return "an integer beyond the range of a 64-bit float"
    shown = repr(value)
    return shown if len(shown) <= 40 else f"{shown[:37]}..."
