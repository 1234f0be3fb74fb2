"""Engine: forward + backward per node against plain micrograd, PyTorch autograd and sympy."""

from __future__ import annotations

import gc
import time
import warnings
from collections.abc import Callable
from typing import Any

from bench import reference
from bench.common import (
    SIZES,
    Program,
    Report,
    TimeLimit,
    chain,
    inner_for,
    interleaved,
    median,
    once,
    random_dag,
    random_tree,
    ratio,
    table,
)
from service.engine import Value

SYMPY_BUDGET = 5.0  # seconds a sympy measurement may take; larger sizes are then skipped
TORCH_UP_TO = 10_000  # the PyTorch target holds up to this size; larger sizes are context


def _service(program: Program) -> Callable[[], Any]:
    leaves, forward = program.leaves, program.forward
    tanh, relu, exp = Value.tanh, Value.relu, Value.exp

    def run() -> Any:
        nodes = [Value(x) for x in leaves]
        forward(nodes, tanh, relu, exp).backward()
        return nodes  # every node, freed after the clock stops

    return run


def _micrograd(program: Program) -> Callable[[], Any]:
    leaves, forward = program.leaves, program.forward
    make = reference.Value
    tanh, relu, exp = make.tanh, make.relu, make.exp

    def run() -> Any:
        nodes = [make(x) for x in leaves]
        forward(nodes, tanh, relu, exp).backward()
        return nodes

    return run


def _torch(program: Program, torch: Any) -> Callable[[], Any]:
    leaves, forward = program.leaves, program.forward
    tensor, double = torch.tensor, torch.float64
    tanh, relu, exp = torch.tanh, torch.relu, torch.exp

    def run() -> Any:
        nodes = [tensor(x, dtype=double, requires_grad=True) for x in leaves]
        forward(nodes, tanh, relu, exp).backward()
        return nodes

    return run


def _sympy(program: Program) -> Callable[[], Any]:
    import sympy

    from service.symbolic import relu

    symbols = [sympy.Symbol(f"x{i}", real=True) for i in range(len(program.leaves))]
    at = {s: sympy.Float(x) for s, x in zip(symbols, program.leaves, strict=True)}

    def run() -> Any:
        # The symbolic route: build the expression, differentiate by each variable, evaluate.
        expression = program.forward(list(symbols), sympy.tanh, relu, sympy.exp)
        value = float(expression.xreplace(at))
        grads = [float(expression.diff(s).xreplace(at)) for s in symbols]
        return value, grads

    return run


def load_torch() -> Any:
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # not needed here
    try:
        import torch
    except ImportError:
        print(
            "\nPyTorch is not installed: its comparison is skipped "
            "(`pip install -e '.[torch]'` adds it).",
            flush=True,
        )
        return None
    torch.set_num_threads(1)  # 0-d tensors gain nothing from threads; keeps the machine quiet
    return torch


def _check(program: Program, runs: dict[str, Callable[[], Any]]) -> None:
    """Every engine computes the same value: the programs are the same graph."""
    root = runs["engine"]()[-1].data
    reference_root = runs["micrograd"]()[-1].data
    if abs(root - reference_root) > 1e-9 * max(1.0, abs(root)):
        raise AssertionError(f"{program.kind} {program.size}: {root} != {reference_root}")


def measure(kind: str, size: int, torch: Any, quick: bool) -> dict[str, float | None]:
    """Seconds for one forward + backward of each engine on one random graph of `size` nodes."""
    program = random_tree(size, seed=size) if kind == "tree" else random_dag(size, seed=size)
    runs = {"engine": _service(program), "micrograd": _micrograd(program)}
    if torch is not None and (size <= TORCH_UP_TO or not quick):
        runs["torch"] = _torch(program, torch)
    _check(program, runs)
    probe = min(once(run) for run in runs.values())
    inner = inner_for(probe)
    rounds = 5 if size >= 100_000 else 7
    samples = interleaved(runs, rounds=rounds, inner=inner, budget=30 if size >= 100_000 else 10)
    result: dict[str, float | None] = {name: median(s) for name, s in samples.items()}
    result.setdefault("torch", None)
    return result


def measure_sympy(kind: str, size: int, limit: float) -> float | None:
    """Seconds for sympy's route on the same graph, or None past `limit` seconds."""
    program = random_tree(size, seed=size) if kind == "tree" else random_dag(size, seed=size)
    run = _sympy(program)
    try:
        with TimeLimit(limit):
            return min(once(run) for _ in range(3 if size <= 10 else 1))
    except (TimeoutError, RecursionError):
        return None


def run(report: Report, quick: bool = False) -> None:
    torch = load_torch()
    gc.freeze()  # what the imports left is not the engines' to traverse
    try:
        _run(report, torch, quick)
    finally:
        gc.unfreeze()


def _run(report: Report, torch: Any, quick: bool) -> None:
    sizes = SIZES if not quick else SIZES[:-1]
    per_node_rows = []
    worst_micrograd = 0.0
    torch_factor: float | None = None
    scaling = {}
    for kind in ("tree", "DAG"):
        seconds = {}
        sympy_on = True  # until one size takes longer than its budget
        for size in sizes:
            result = measure(kind, size, torch, quick)
            seconds[size] = result["engine"]
            symbolic = measure_sympy(kind, size, SYMPY_BUDGET) if sympy_on else None
            sympy_on = symbolic is not None
            vs_micrograd = ratio(result["engine"], result["micrograd"])
            vs_torch = ratio(result["torch"], result["engine"])
            worst_micrograd = max(worst_micrograd, vs_micrograd or 0.0)
            if vs_torch is not None and size <= TORCH_UP_TO:
                torch_factor = vs_torch if torch_factor is None else min(torch_factor, vs_torch)
            per_node_rows.append([
                kind, size,
                result["engine"] / size * 1e6,
                result["micrograd"] / size * 1e6,
                None if result["torch"] is None else result["torch"] / size * 1e6,
                None if symbolic is None else symbolic / size * 1e6,
                vs_micrograd, vs_torch, ratio(symbolic, result["engine"]),
            ])  # fmt: skip
        if 100_000 in seconds:
            scaling[kind] = seconds[100_000] / seconds[10_000]
    table(
        "Engine: forward + backward, microseconds per node (median of interleaved runs)",
        ["graph", "nodes", "engine", "micrograd", "torch", "sympy", "engine/micrograd",
         "torch/engine", "sympy/engine"],
        per_node_rows,
    )  # fmt: skip
    depth_row = _chain(torch)
    report.verdict("engine / plain micrograd per node, worst of trees and DAGs 10..100k",
                   worst_micrograd or None, "<=", 1.0)  # fmt: skip
    report.verdict("engine / plain micrograd per node, chain of depth 100,000",
                   depth_row, "<=", 1.0)  # fmt: skip
    report.verdict(
        "PyTorch 0-d autograd / engine, worst up to 10,000 nodes",
        torch_factor,
        ">=",
        5.0,
        "" if torch is not None else "PyTorch not installed",
    )
    for kind in ("tree", "DAG"):
        report.verdict(
            f"engine time(100,000) / time(10,000), random {kind}",
            scaling.get(kind),
            "<=",
            15.0,
            "" if kind in scaling else "100,000 nodes not run",
        )


def _chain(torch: Any) -> float | None:
    """A chain of depth 100,000: each engine must get through it without recursion."""
    depth = 100_000
    program = chain(depth)
    runs = {"engine": _service(program), "micrograd": _micrograd(program)}
    if torch is not None:
        runs["torch"] = _torch(program, torch)
    started = time.perf_counter()
    samples = interleaved(runs, rounds=5, budget=25)
    result = {name: median(s) for name, s in samples.items()}
    table(
        f"Chain of depth {depth:,} (x <- tanh(x*w + b)): microseconds per node "
        f"({time.perf_counter() - started:.0f} s)",
        ["engine", "micrograd", "torch", "engine/micrograd", "torch/engine"],
        [[
            result["engine"] / depth * 1e6,
            result["micrograd"] / depth * 1e6,
            result["torch"] / depth * 1e6 if "torch" in result else None,
            ratio(result["engine"], result["micrograd"]),
            ratio(result.get("torch"), result["engine"]),
        ]],
    )  # fmt: skip
    return ratio(result["engine"], result["micrograd"])
