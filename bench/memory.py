"""Memory: a worker's peak and unique memory on a 10,000-node request; bytes per node held."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from typing import Any

import psutil

from bench.common import Report, finite_expression, table
from bench.server import Server, request

SIZE = 10_000
MB = 1024 * 1024


def _peak_rss(process: psutil.Process) -> int:
    """VmHWM: the most resident memory the process has had, in bytes."""
    with open(f"/proc/{process.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _snapshot(processes: list[psutil.Process]) -> dict[int, dict[str, int]]:
    taken = {}
    for process in processes:
        try:
            full = process.memory_full_info()
            taken[process.pid] = {"rss": full.rss, "uss": full.uss, "pss": full.pss,
                                  "peak": _peak_rss(process)}  # fmt: skip
        except (psutil.NoSuchProcess, FileNotFoundError):
            continue
    return taken


def server_memory() -> list[list[Any]]:
    """One worker, so that every request lands on it: its memory before and after."""
    text, bindings, nodes = finite_expression(SIZE, seed=SIZE)
    body = json.dumps({"expression": text, "bindings": bindings}).encode()
    with Server({"AUTOGRAD_WORKERS": "1"}) as server:
        master = _snapshot([server.master()])[server.master().pid]
        worker = server.workers()[0]
        idle = _snapshot([worker])[worker.pid]
        request(server.port, "POST", "/v1/gradients", body)
        first = _snapshot([worker])[worker.pid]
        for _ in range(4):
            status, _ = request(server.port, "POST", "/v1/gradients", body)
            assert status == 200, status
        after = _snapshot([worker])[worker.pid]
    rows = [
        ["master (preloaded app)", master["rss"] / MB, master["uss"] / MB, master["pss"] / MB,
         master["peak"] / MB],
        ["worker, idle", idle["rss"] / MB, idle["uss"] / MB, idle["pss"] / MB, idle["peak"] / MB],
        [f"worker after one {nodes:,}-node request", first["rss"] / MB, first["uss"] / MB,
         first["pss"] / MB, first["peak"] / MB],
        ["worker after five", after["rss"] / MB, after["uss"] / MB, after["pss"] / MB,
         after["peak"] / MB],
    ]  # fmt: skip
    table(
        "Worker memory (MiB) serving a 10,000-node /v1/gradients request: resident, unique "
        "(USS: what the worker alone holds), proportional (PSS), peak resident (VmHWM)",
        ["process", "RSS", "USS", "PSS", "peak RSS"],
        rows,
    )
    return rows


def _held() -> dict[str, Any]:
    """Run in a fresh interpreter: bytes per graph node the cache holds and a request allocates."""
    from service.evaluator import Evaluator

    text, bindings, nodes = finite_expression(SIZE, seed=SIZE)
    evaluator = Evaluator(cache_size=4)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    evaluator.compile(text)
    gc.collect()
    compiled = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    document = evaluator.evaluate(text, bindings)
    during = tracemalloc.get_traced_memory()[1] - before
    kept = tracemalloc.get_traced_memory()[0] - before
    graph_nodes = len(document["graph"]["nodes"])
    del document
    # A request for bytes (what the API serves) keeps the document's rendered skeleton with the
    # compiled program, one per selection of fields (a bounded few): the whole document's here.
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    evaluator.render(text, bindings)
    gc.collect()
    skeleton = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return {"nodes": nodes, "graph_nodes": graph_nodes,
            "compiled": compiled, "peak": during, "document": kept, "skeleton": skeleton,
            "sympy_loaded": "sympy" in sys.modules}  # fmt: skip


def _app_imports_sympy() -> bool:
    from bench.apps import create_bench_app

    create_bench_app()
    return "sympy" in sys.modules


def run(report: Report, quick: bool = False) -> None:
    rows = server_memory()
    idle, after = rows[1][2], rows[2][2]
    report.verdict(
        "worker unique memory (USS, MiB) after a 10,000-node request",
        after,
        "report",
        0,
        f"idle {idle:.1f} MiB; the app is preloaded",
    )
    code = ("import json, bench.memory as m; "
            "print(json.dumps({**m._held(), 'app_sympy': m._app_imports_sympy()}))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    held = json.loads(out.stdout.strip().splitlines()[-1])
    nodes = held["nodes"]
    table(
        f"Bytes per graph node for a {nodes:,}-node expression (tracemalloc, fresh interpreter)",
        ["what", "bytes", "bytes per node"],
        [
            ["held by the cache: one compiled expression", held["compiled"],
             held["compiled"] / nodes],
            ["peak allocated while evaluating it", held["peak"], held["peak"] / nodes],
            ["the response document (before JSON)", held["document"], held["document"] / nodes],
            ["the whole document's skeleton, kept with the compiled expression", held["skeleton"],
             held["skeleton"] / nodes],
        ],
    )  # fmt: skip
    print(
        f"sympy imported by the app: {held['app_sympy']} (so preloading pays for "
        f"{'sympy and ' if held['app_sympy'] else ''}Flask, marshmallow and apispec once)"
    )
