"""`python -m bench`: run every benchmark, then print each target's ratio beside it."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from bench import common

PARTS = ("engine", "parse", "linear", "request", "path", "memory", "sweep", "capacity")


def _context() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if "model name" in line)
    except (OSError, StopIteration):
        pass
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "not installed"
    try:
        wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
        wrk = wrk.split()[1] if wrk else "not installed"
    except (OSError, IndexError):
        wrk = "not installed"
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {cpu}, {len(os.sched_getaffinity(0))} cores; "
        f"Python {platform.python_version()}; torch {torch_version}; wrk {wrk}"
    )


def summary(report: common.Report, seconds: float) -> str:
    rows = [
        [v.name, None if v.value is None else round(v.value, 2),
         "report" if v.relation == "report" else f"{v.relation} {v.bound:g}",
         v.status if not v.note else f"{v.status} ({v.note})"]
        for v in report.verdicts
    ]  # fmt: skip
    return common.table(
        f"Summary: every target, measured side by side in this run ({seconds / 60:.1f} min)",
        ["ratio", "measured", "target", "verdict"],
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help=f"any of {', '.join(PARTS)} (default: all)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter runs")
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto",
                        help="load generator: wrk (installed from Debian if missing and root) "
                        "or the Python client")  # fmt: skip
    parser.add_argument("--markdown", type=Path, help="also write every table to this file")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown part {', '.join(sorted(unknown))}; the parts are {', '.join(PARTS)}")
    parts = args.parts or PARTS
    started = time.perf_counter()
    context = _context()
    print(f"autograd-service benchmarks: {context}", flush=True)
    report = common.Report()
    for part in parts:
        print(f"\n## {part}", flush=True)
        if part == "engine":
            from bench import engine

            engine.run(report, args.quick)
        elif part == "parse":
            from bench import parse

            parse.run(report, args.quick)
        elif part == "linear":
            from bench import linear

            linear.run(report, args.quick)
        elif part == "path":
            from bench import path

            path.run(report, args.quick)
        elif part == "request":
            from bench import request

            request.run(report, args.quick, args.client)
        elif part == "sweep":
            from bench import sweep

            sweep.run(report, args.quick)
        elif part == "capacity":
            from bench import capacity

            capacity.run(report, args.quick, args.client)
        else:
            from bench import memory

            memory.run(report, args.quick)
    summary(report, time.perf_counter() - started)
    if args.markdown:
        body = "\n\n".join(common.TABLES)
        args.markdown.write_text(f"Run: {context}\n{body}\n")
    missed = any(v.status == "MISS" for v in report.verdicts)
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
