"""A compiled expression as a flat tape, run forward and backward over arrays of points with numpy.

The tape is the evaluator's primitive-granularity graph laid out once: per node an op code, its
children's indices, its constant exponent, and for leaves a constant or a variable slot. Running it
computes every node for many bindings at once (one numpy call per node, not one Python call per node
and point), with the scalar engine's conventions at every point: the same floating-point operations
in the same order, relu's derivative 0 at 0, and the same domain errors. A point whose value or
gradient is not a finite real number is reported with the engine's reason code; the others are
unaffected, so a sweep as a whole never fails because of one point.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.engine import Value

FloatArray = np.ndarray
# Work is done in chunks of points so that the tape's arrays (a row per node) stay this many
# float64 cells, about 16 MB each, however many points are asked for.
CHUNK_CELLS = 1 << 21


# Each thread keeps the arrays of its largest chunk so far (at most two of CHUNK_CELLS cells and
# a row): touching fresh memory costs a page fault per 4 KiB, which for a large sweep is a good
# part of its time, so the memory is faulted in once per worker rather than once per request.
_scratch = threading.local()


def _buffers(rows: int, columns: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Values, gradients (rows x columns) and one spare row, from the thread's retained arrays."""
    cells = rows * columns
    held = getattr(_scratch, "arrays", None)
    if held is None or held[0].size < cells or held[2].size < columns:
        size = max(cells, held[0].size if held else 0)
        width = max(columns, held[2].size if held else 0)
        held = _scratch.arrays = (np.empty(size), np.empty(size), np.empty(width))
    values, grads, row = held
    return (
        values[:cells].reshape(rows, columns),
        grads[:cells].reshape(rows, columns),
        row[:columns],
    )


def node_fields(node: Value) -> tuple[str, tuple[Value, ...], float | None]:
    """A `Value`'s op ("" for a leaf), children and constant exponent: the one place that reads
    the engine's nodes, so a change there is adapted here."""
    return node.op, tuple(node.children), node.exponent


@dataclass(frozen=True)
class Failure:
    """Why one point has no value: the engine's reason code and the node where it arose."""

    point: int
    kind: str  # one of service.errors.DOMAIN_KINDS
    node: int
    operand: float | None  # the failing operation's operand at that point, where it explains it


@dataclass
class Result:
    """A tape run over n points: the root's value and every variable's gradient, NaN where a
    point failed, and the failures in point order."""

    value: FloatArray
    gradients: dict[str, FloatArray]
    failures: list[Failure]


class Tape:
    """A graph as flat arrays: op codes, child indices, exponents, constants, variable slots."""

    def __init__(
        self,
        ops: tuple[str, ...],
        children: tuple[tuple[int, ...], ...],
        exponents: tuple[float | None, ...],
        constants: Mapping[int, float],
        slots: Mapping[str, int],
        root: int,
        checks: tuple[int, ...] | None = None,
    ) -> None:
        self.ops = ops  # per node, in forward (topological) order: "" for a leaf, else the op
        self.children = children  # operand node indices, in the engine's order
        self.exponents = exponents  # the constant exponent of a `**` node, else None
        self.constants = dict(constants)  # constant leaf index -> its number
        self.slots = dict(slots)  # variable name -> its leaf's index
        self.root = root
        self.size = len(ops)
        # the order a point's operations are checked in: the order the engine computes them
        self.checks = checks if checks is not None else tuple(range(self.size))

    @classmethod
    def from_graph(
        cls, root: Value, variables: Mapping[str, Value], built: Iterable[object] = ()
    ) -> Tape:
        """The tape of the graph below `root`, in the engine's own topological order, so that
        backward adds gradients in exactly the order `Value.backward` does. `built` lists the
        results in the order they were computed, when that may differ from the topological
        order (a shared value used later, in a program): a point's failure is then reported at
        the operation the engine would have stopped at first."""
        order = root.topological_order()
        index = {id(node): i for i, node in enumerate(order)}
        fields = [node_fields(node) for node in order]
        names = {id(value): name for name, value in variables.items()}
        rank = _build_ranks([v for v in (*built, root) if isinstance(v, Value)])
        return cls(
            ops=tuple(op for op, _, _ in fields),
            children=tuple(tuple(index[id(c)] for c in children) for _, children, _ in fields),
            exponents=tuple(exponent for _, _, exponent in fields),
            constants={
                i: node.data
                for i, node in enumerate(order)
                if not fields[i][0] and id(node) not in names
            },
            slots={names[id(node)]: i for i, node in enumerate(order) if id(node) in names},
            root=index[id(root)],
            checks=tuple(sorted(range(len(order)), key=lambda i: rank.get(id(order[i]), i))),
        )

    def chunk_points(self) -> int:
        """How many points one chunk holds, so that a row per node stays within CHUNK_CELLS."""
        return max(1, CHUNK_CELLS // self.size)

    def run(self, inputs: Mapping[str, float | FloatArray], points: int) -> Result:
        """Value and gradients at `points` points; each variable is one number or an array of
        one number per point."""
        value = np.empty(points)  # every element is written, by a chunk or as a failure
        gradients = {name: np.empty(points) for name in self.slots}
        failures: list[Failure] = []
        step = min(points, self.chunk_points())
        buffers = _buffers(self.size, step)
        with np.errstate(all="ignore"):  # non-finite results are found and classified below
            for start in range(0, points, step):
                stop = min(points, start + step)
                chunk = {
                    name: x if np.ndim(x) == 0 else np.asarray(x, dtype=float)[start:stop]
                    for name, x in inputs.items()
                }
                values, grads, scratch = (buffer[..., : stop - start] for buffer in buffers)
                self._run_chunk(chunk, start, values, grads, scratch, value, gradients, failures)
        return Result(value, gradients, failures)

    def _run_chunk(
        self,
        inputs: Mapping[str, Any],
        start: int,
        values: FloatArray,
        grads: FloatArray,
        scratch: FloatArray,
        value: FloatArray,
        gradients: dict[str, FloatArray],
        failures: list[Failure],
    ) -> None:
        width = values.shape[1]
        for i, number in self.constants.items():
            values[i] = number
        for name, i in self.slots.items():
            values[i] = inputs[name]
        locals_ = self._forward(values)
        failed = self._forward_failures(values, locals_)
        self._backward(values, locals_, grads, scratch)
        failed |= self._backward_failures(values, locals_, grads, failed)
        value[start : start + width] = values[self.root]
        for name, i in self.slots.items():
            gradients[name][start : start + width] = grads[i]
        for column, (kind, node, operand) in sorted(failed.items()):
            failures.append(Failure(start + column, kind, node, operand))
            value[start + column] = math.nan
            for name in self.slots:
                gradients[name][start + column] = math.nan

    # -- forward ---------------------------------------------------------------------------

    def _forward(self, values: FloatArray) -> dict[int, FloatArray]:
        """Fill every node's row; returns the local derivatives that depend on the data and may
        fail (those of `**` and log), which backward reuses."""
        locals_: dict[int, FloatArray] = {}
        for i, op in enumerate(self.ops):
            if op:
                FORWARD[op](self, i, values, locals_)
        return locals_

    def _forward_failures(
        self, values: FloatArray, locals_: dict[int, FloatArray]
    ) -> dict[int, tuple[str, int, float | None]]:
        """The first failing node of each point that has one, classified as the engine would."""
        # Non-finite numbers survive a sum, so one reduction finds every column worth a look;
        # a sum that merely overflows is a false alarm, settled by the exact walk below.
        total = values.sum(axis=0)
        for row in locals_.values():
            total += row
        suspects = np.flatnonzero(~np.isfinite(total))
        if suspects.size == 0:
            return {}
        sub = values[:, suspects]
        alive = np.ones(suspects.size, dtype=bool)
        failed: dict[int, tuple[str, int, float | None]] = {}
        for i in self.checks:
            op = self.ops[i]
            if not op or not alive.any():
                continue
            x = sub[self.children[i][0]]
            local = locals_[i][suspects] if i in locals_ else None
            for kind, where in _classify(op, self.exponents[i], x, sub[i], local):
                hit = np.flatnonzero(where & alive)
                for column in hit:
                    failed[int(suspects[column])] = (kind, i, float(x[column]))
                alive[hit] = False
        return failed

    # -- backward --------------------------------------------------------------------------

    def _backward(
        self,
        values: FloatArray,
        locals_: dict[int, FloatArray],
        grads: FloatArray,
        scratch: FloatArray,
    ) -> None:
        """Fill `grads` with d(root)/d(node) for every node: reversed order, each edge adding
        local x grad, as in `Value.backward`, so every point sums the same terms in order."""
        grads.fill(0.0)
        grads[self.root] = 1.0
        for i in range(self.size - 1, -1, -1):
            op = self.ops[i]
            if not op:
                continue
            grad = grads[i]
            locals_of_i = self._local_grads(i, values, locals_)
            for child, local in zip(self.children[i], locals_of_i, strict=True):
                # `child.grad += local * grad`; a sum's local derivative is 1.0, so 1.0 * grad
                # is grad itself and the multiplication is skipped.
                if local is None:
                    np.add(grads[child], grad, out=grads[child])
                else:
                    np.multiply(local, grad, out=scratch)
                    np.add(grads[child], scratch, out=grads[child])

    def _local_grads(
        self, i: int, values: FloatArray, locals_: dict[int, FloatArray]
    ) -> tuple[FloatArray | None, ...]:
        op, children = self.ops[i], self.children[i]
        if op == "+":
            return (None, None)
        if op == "*":
            return (values[children[1]], values[children[0]])
        if op in ("**", "log"):
            return (locals_[i],)
        if op == "exp":
            return (values[i],)
        if op == "relu":
            return ((values[children[0]] > 0).astype(float),)
        if op == "tanh":
            t = values[i]
            return (1.0 - t * t,)
        raise ValueError(f"the tape has no backward rule for {op!r}")  # pragma: no cover

    def _backward_failures(
        self,
        values: FloatArray,
        locals_: dict[int, FloatArray],
        grads: FloatArray,
        failed: dict[int, tuple[str, int, float | None]],
    ) -> dict[int, tuple[str, int, float | None]]:
        """Points whose forward pass was fine but a gradient is not finite: `non_finite`, at the
        first node from the root down whose gradient or whose sends to its children overflow."""
        suspects = np.flatnonzero(~np.isfinite(grads.sum(axis=0)))
        suspects = np.array([c for c in suspects if int(c) not in failed], dtype=int)
        if suspects.size == 0:
            return {}
        found: dict[int, tuple[str, int, float | None]] = {}
        alive = np.ones(suspects.size, dtype=bool)
        for i in range(self.size - 1, -1, -1):
            grad = grads[i, suspects]
            bad = ~np.isfinite(grad)
            if self.ops[i]:
                for local in self._local_grads(i, values, locals_):
                    if local is not None:
                        bad |= ~np.isfinite(local[suspects] * grad)
            hit = np.flatnonzero(bad & alive)
            for column in hit:
                found[int(suspects[column])] = ("non_finite", i, None)
            alive[hit] = False
        return found


def _build_ranks(built: list[Value]) -> dict[int, int]:
    """Each node's place in the order the engine created it: the results in the order they were
    computed, each one's new nodes children first (an operation makes its operands' nodes, as in
    `a / b = a * b ** -1`, before its own)."""
    rank: dict[int, int] = {}
    for top in built:
        if id(top) in rank:
            continue
        stack = [(top, iter(node_fields(top)[1]))]
        while stack:
            node, children = stack[-1]
            for child in children:
                if id(child) not in rank:
                    stack.append((child, iter(node_fields(child)[1])))
                    break
            else:
                stack.pop()
                rank.setdefault(id(node), len(rank))
    return rank


# -- the operations, over rows of points -----------------------------------------------------


def _add(tape: Tape, i: int, values: FloatArray, locals_: dict[int, FloatArray]) -> None:
    a, b = tape.children[i]
    np.add(values[a], values[b], out=values[i])


def _multiply(tape: Tape, i: int, values: FloatArray, locals_: dict[int, FloatArray]) -> None:
    a, b = tape.children[i]
    np.multiply(values[a], values[b], out=values[i])


def power(x: FloatArray, k: float) -> FloatArray:
    """`x ** k` elementwise as C's pow computes it, like Python's float power. numpy computes a
    scalar exponent 2, 0.5 or -1 as a square, root or reciprocal, which can differ in the last
    bit; an exponent array makes it call pow for every element."""
    result: FloatArray = np.power(x, np.full_like(x, k))
    return result


def _power(tape: Tape, i: int, values: FloatArray, locals_: dict[int, FloatArray]) -> None:
    x = values[tape.children[i][0]]
    k = tape.exponents[i]
    assert k is not None
    values[i] = power(x, k)
    # the engine's `k * x ** (k - 1)`, with k = 0 having derivative 0 even at x = 0
    locals_[i] = k * power(x, k - 1) if k != 0 else np.zeros_like(x)


def _exp(tape: Tape, i: int, values: FloatArray, locals_: dict[int, FloatArray]) -> None:
    np.exp(values[tape.children[i][0]], out=values[i])


def _log(tape: Tape, i: int, values: FloatArray, locals_: dict[int, FloatArray]) -> None:
    x = values[tape.children[i][0]]
    np.log(x, out=values[i])
    locals_[i] = 1.0 / x


def _relu(tape: Tape, i: int, values: FloatArray, locals_: dict[int, FloatArray]) -> None:
    x = values[tape.children[i][0]]
    # micrograd's `0 if x < 0 else x`: -0.0 stays -0.0, as in the engine
    np.copyto(values[i], x)
    values[i][x < 0] = 0.0


def tanh(x: FloatArray) -> FloatArray:
    """tanh elementwise exactly as the C library's (fdlibm's) algorithm computes it from expm1,
    so each point matches `math.tanh` to the last bit, which numpy's own tanh does not.

    For |x| >= 1 it is 1 - 2 / (expm1(2|x|) + 2), else -t / (t + 2) with t = expm1(-2|x|); the
    sign is x's. fdlibm's special cases (|x| < 2**-55 and |x| >= 22) give the same bits as these
    formulas, so they need no branch of their own.
    """
    a = np.abs(x)
    small = a < 1.0
    t = np.multiply(a, 2.0, out=a)
    np.negative(t, out=t, where=small)
    np.expm1(t, out=t)
    d = t + 2.0
    z = np.divide(-2.0, d)
    z += 1.0  # 1 + (-2 / d) is 1 - 2 / d, bit for bit
    np.negative(t, out=t, where=small)
    np.divide(t, d, out=z, where=small)
    result: FloatArray = np.copysign(z, x, out=z)
    return result


def _tanh(tape: Tape, i: int, values: FloatArray, locals_: dict[int, FloatArray]) -> None:
    values[i] = tanh(values[tape.children[i][0]])


FORWARD: dict[str, Callable[[Tape, int, FloatArray, dict[int, FloatArray]], None]] = {
    "+": _add,
    "*": _multiply,
    "**": _power,
    "exp": _exp,
    "log": _log,
    "relu": _relu,
    "tanh": _tanh,
}


def _classify(
    op: str, k: float | None, x: FloatArray, out: FloatArray, local: FloatArray | None
) -> list[tuple[str, FloatArray]]:
    """Which points fail at this node and why, in the order the engine checks (its operands are
    finite: a point stops at its first failure)."""
    overflow = ~np.isfinite(out)
    if op == "**":
        assert k is not None and local is not None
        return [
            ("division_by_zero", (x == 0) & (k < 0)),
            ("complex_result", (x < 0) & (not float(k).is_integer())),
            ("overflow", overflow),
            ("non_finite", (x == 0) & (0 < k < 1)),
            ("overflow", ~np.isfinite(local)),
        ]
    if op == "log":
        assert local is not None
        return [("log_domain", x <= 0), ("overflow", ~np.isfinite(local))]
    return [("overflow", overflow)]
