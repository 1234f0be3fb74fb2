"""What every benchmark shares: random graphs and expressions, interleaved timing, verdicts."""

from __future__ import annotations

import gc
import math
import random
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The lesson example: micrograd's one-neuron example, `tanh(x1*w1 + x2*w2 + b)`.
LESSON_EXPRESSION = "tanh(x1*w1 + x2*w2 + b)"
LESSON_BINDINGS = {"x1": 2.0, "x2": 0.0, "w1": -3.0, "w2": 1.0, "b": 6.8813735870195432}

SIZES = (10, 100, 1_000, 10_000, 100_000)


# -- verdicts ---------------------------------------------------------------------------------


@dataclass
class Verdict:
    """One measured ratio and the performance target it is held to (docs/PERFORMANCE.md)."""

    name: str
    value: float | None  # None: could not be measured in this run
    relation: str  # "<=" or ">=", or "report" for a figure shown for information, not bounded
    bound: float
    note: str = ""

    @property
    def status(self) -> str:
        if self.relation == "report":
            return "INFO"
        if self.value is None:
            return "SKIP"
        met = self.value <= self.bound if self.relation == "<=" else self.value >= self.bound
        return "PASS" if met else "MISS"


@dataclass
class Report:
    """The verdicts and tables a benchmark produced, in the order they were measured."""

    verdicts: list[Verdict] = field(default_factory=list)

    def verdict(
        self, name: str, value: float | None, relation: str, bound: float, note: str = ""
    ) -> None:
        self.verdicts.append(Verdict(name, value, relation, bound, note))


TABLES: list[str] = []  # every table printed in this run, for `--markdown`


def table(title: str, headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table, printed as it is returned, so a run's output pastes into the docs."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    lines = [f"\n{title}\n"]
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    text = "\n".join(lines)
    print(text, flush=True)
    TABLES.append(text)
    return text


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 1e5:
            return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
        return f"{value:.2e}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


# -- timing -----------------------------------------------------------------------------------


def interleaved(
    variants: dict[str, Callable[[], Any]],
    rounds: int,
    inner: int = 1,
    budget: float | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each variant, timed in alternation so noise hits every one alike.

    Each round takes one sample of every variant (`inner` calls), starting with a different
    variant each round. Each call is timed on its own and what it returns is freed after its
    clock stops, so freeing a graph is not counted and no sample grows the heap; the collector
    runs between samples. `budget` (seconds) ends the run early, after three rounds at least.
    """
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    clock = time.perf_counter
    started = clock()
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run = variants[name]
            gc.collect()
            elapsed = 0.0
            for _ in range(inner):
                t0 = clock()
                kept = run()
                elapsed += clock() - t0
                del kept
            samples[name].append(elapsed / inner)
        if budget is not None and r >= 2 and clock() - started > budget:
            break
    gc.collect()
    return samples


class TimeLimit:
    """Raises `TimeoutError` in the main thread after `seconds`, for pure-Python work."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        def expire(signum: int, frame: Any) -> None:
            raise TimeoutError(f"over {self.seconds} s")

        self.previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.previous)


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def inner_for(seconds_per_call: float, target: float = 0.02) -> int:
    """How many calls make one sample of about `target` seconds."""
    return max(1, min(100_000, round(target / max(seconds_per_call, 1e-9))))


def once(run: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    kept = run()
    elapsed = time.perf_counter() - t0
    del kept
    return elapsed


# -- random graphs as straight-line programs --------------------------------------------------


@dataclass
class Program:
    """A computation graph as straight-line code over a list `n` of nodes, leaves first.

    The same program runs on every engine: a leaf becomes that engine's scalar, and the calls
    `T` (tanh), `R` (relu) and `E` (exp) are bound to that engine's functions.
    """

    kind: str
    leaves: list[float]
    lines: list[str]  # one statement per operation node
    forward: Callable[..., Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # One generated function, so the loop that drives the engine costs next to nothing and
        # each engine is timed on its own arithmetic.
        source = "def forward(n, T, R, E):\n    a = n.append\n"
        source += "".join(f"    {line}\n" for line in self.lines)
        source += "    return n[-1]\n"
        namespace: dict[str, Any] = {}
        exec(compile(source, f"<{self.kind} of {self.size} nodes>", "exec"), namespace)
        self.forward = namespace["forward"]

    @property
    def size(self) -> int:
        return len(self.leaves) + len(self.lines)


def _unary(rng: random.Random, x: float) -> tuple[str, float]:
    """A unary operation that keeps the value finite and modest, and its result."""
    roll = rng.random()
    if roll < 0.15 and x < 3:
        return "E({})", math.exp(x)
    if roll < 0.3 and abs(x) < 30:
        return "{} ** 2", x * x
    if roll < 0.45:
        return "R({})", max(x, 0.0)
    return "T({})", math.tanh(x)


def _binary(rng: random.Random, x: float, y: float) -> tuple[str, float]:
    if rng.random() < 0.5 and abs(x * y) < 1e4:
        return "{} * {}", x * y
    return "{} + {}", x + y


def random_tree(size: int, seed: int = 0) -> Program:
    """A random tree: every node is an operand exactly once; a quarter of the nodes are unary."""
    rng = random.Random(seed)
    unary = size // 4
    leaves = max(1, (size - unary + 1) // 2)
    unary = size - leaves - (leaves - 1)
    values = [rng.uniform(-1, 1) for _ in range(leaves)]
    pool = list(range(leaves))  # the roots of the subtrees built so far
    steps = ["u"] * unary + ["b"] * (leaves - 1)
    rng.shuffle(steps)
    lines = []
    for step in steps:
        if step == "u" or len(pool) < 2:
            k = rng.randrange(len(pool))
            template, value = _unary(rng, values[pool[k]])
            lines.append("a(" + template.format(f"n[{pool[k]}]") + ")")
        else:
            i = pool.pop(rng.randrange(len(pool)))
            k = rng.randrange(len(pool))
            template, value = _binary(rng, values[i], values[pool[k]])
            lines.append("a(" + template.format(f"n[{i}]", f"n[{pool[k]}]") + ")")
        values.append(value)
        pool[k] = len(values) - 1
    if len(pool) != 1:  # pragma: no cover - the step counts guarantee one root
        raise AssertionError("the tree has more than one root")
    return Program("tree", values[:leaves], lines)


def random_dag(size: int, seed: int = 0) -> Program:
    """A random DAG: every node feeds at least one later node, many feed several."""
    rng = random.Random(seed)
    leaves = max(2, size // 10)
    values = [rng.uniform(-1, 1) for _ in range(leaves)]
    unused = dict.fromkeys(range(leaves))  # nodes nothing reads yet, oldest first
    lines = []
    # Each operation reads the oldest unread node, so all of them reach the root, and a binary
    # one also reads a random earlier node, which is what makes the graph share.
    while len(values) + len(unused) - 1 < size:
        i = next(iter(unused))
        del unused[i]
        if rng.random() < 0.3:
            template, value = _unary(rng, values[i])
            lines.append("a(" + template.format(f"n[{i}]") + ")")
        else:
            j = rng.randrange(len(values))
            unused.pop(j, None)
            template, value = _binary(rng, values[i], values[j])
            lines.append("a(" + template.format(f"n[{i}]", f"n[{j}]") + ")")
        values.append(value)
        unused[len(values) - 1] = None
    while len(unused) > 1:  # join what is left into one root
        i = next(iter(unused))
        del unused[i]
        j = next(iter(unused))
        del unused[j]
        lines.append(f"a(n[{i}] + n[{j}])")
        values.append(values[i] + values[j])
        unused[len(values) - 1] = None
    return Program("DAG", values[:leaves], lines)


def chain(depth: int) -> Program:
    """A chain `x <- tanh(x * w + b)`, one node deep per operation: no recursion survives it."""
    lines = []
    previous = 0
    while 3 + len(lines) < depth:
        node = 3 + len(lines)
        step = len(lines) % 3
        if step == 0:
            lines.append(f"a(n[{previous}] * n[1])")
        elif step == 1:
            lines.append(f"a(n[{previous}] + n[2])")
        else:
            lines.append(f"a(T(n[{previous}]))")
        previous = node
    return Program("chain", [0.5, 0.9, 0.1], lines)


# -- random expression text -------------------------------------------------------------------

# Operators as written, with their weight and the primitive nodes each adds (as the parser
# counts them): `a - b` is `a + (b * -1)`, three nodes; a constant operand adds its own leaf.
_WRITTEN_BINARY = (("{} + {}", 0.5, 1), ("{} * {}", 0.38, 1), ("{} - {}", 0.12, 3))
# Exp and the square only of a tanh, so that values stay finite.
_WRITTEN_UNARY = (("tanh({})", 0.4, 1), ("relu({})", 0.15, 1), ("exp(tanh({}))", 0.12, 2),
                  ("tanh({})**2", 0.12, 2), ("2*{}", 0.11, 2), ("{}/2", 0.1, 2))  # fmt: skip
_JOIN_COST = sum(weight * cost for _, weight, cost in _WRITTEN_BINARY)
_UNARY_COST = sum(weight * cost for _, weight, cost in _WRITTEN_UNARY)


def random_expression(size: int, seed: int = 0) -> tuple[str, dict[str, float]]:
    """Expression text of about `size` primitive graph nodes, and bindings for its variables.

    Subexpressions are joined in balanced rounds, so the nesting stays near log2(size) and far
    inside the parser's depth limit however large the expression.
    """
    rng = random.Random(seed)
    variables = max(2, min(1_000, size // 8))
    names = [f"x{i}" for i in range(variables)]
    budget = size - variables
    leaves = max(variables, int(budget / 1.9))  # two thirds of the nodes for the joins
    pool = names + [rng.choice(names) for _ in range(leaves - variables)]
    rng.shuffle(pool)
    spent = 0
    while True:
        # Wrap pool items in unary operations, spreading what the joins will not need over this
        # round's items and every later round's (about twice as many as this round has).
        joins_left = len(pool) - 1
        slots_left = 2 * len(pool) - 1
        for k in range(len(pool)):
            for _ in range(3):
                spare = budget - spent - _JOIN_COST * joins_left
                if spare <= 0 or rng.random() >= spare / (_UNARY_COST * slots_left):
                    break
                template, cost = _pick(rng, _WRITTEN_UNARY)
                if spent + cost + joins_left > budget:
                    break
                pool[k] = template.format(pool[k])
                spent += cost
            slots_left -= 1
        if len(pool) == 1:
            break
        joined = []
        for k in range(0, len(pool) - 1, 2):
            template, cost = _pick(rng, _WRITTEN_BINARY)
            joined.append("(" + template.format(pool[k], pool[k + 1]) + ")")
            spent += cost
        if len(pool) % 2:
            joined.append(pool[-1])
        pool = joined
    text = pool[0]
    while spent < budget:  # the last few nodes wrap the whole
        text = f"tanh({text})"
        spent += 1
    bindings = {name: round(rng.uniform(-1, 1), 3) for name in names}
    return text, bindings


def _pick(rng: random.Random, choices: tuple[tuple[str, float, int], ...]) -> tuple[str, int]:
    roll = rng.random()
    for template, weight, cost in choices:
        roll -= weight
        if roll < 0:
            return template, cost
    return choices[-1][0], choices[-1][2]


def finite_expression(size: int, seed: int = 0) -> tuple[str, dict[str, float], int]:
    """A random expression whose value and gradients are finite, and its graph's node count."""
    from service.errors import DomainError
    from service.evaluator import Evaluator
    from service.limits import Limits

    evaluator = Evaluator(Limits(max_nodes=200_000, max_expression_length=2_000_000), 0)
    for attempt in range(100):
        text, bindings = random_expression(size, seed + 1000 * attempt)
        try:
            evaluator.evaluate(text, bindings)
        except DomainError:
            continue
        return text, bindings, evaluator.compile(text).parsed.node_count
    raise RuntimeError(f"no finite expression of {size} nodes in 100 seeds")
