"""Spec-driven fuzzing of a live server: schemathesis against gunicorn on loopback.

    .venv/bin/python loadtest/fuzz.py [--examples 1000] [--workers 2]

Starts gunicorn as `make load` does, runs the schemathesis command line against it with
`openapi.yaml` (valid and invalid requests for every operation: no 5xx, every response as the
spec documents it, every request the spec forbids refused, each answered within a second), then
checks that no worker died on the way. Exits with schemathesis's status, or 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from run import (
    ROOT,
    _free_port,
    _workers,
    start_server,
    stop_server,
    wait_for_workers,
    wait_ready,
)

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_headers_conformance,response_schema_conformance,negative_data_rejection,"
    "unsupported_method,allow_header_conformance"
)


def worker_changes(before: set[int], after: set[int], exit_status: int | None) -> str:
    """What happened to the server's workers during the run, in one sentence."""
    if exit_status is not None:
        return f"gunicorn exited during the run with status {exit_status}"
    return (
        f"gunicorn lost workers during the run: {sorted(before - after)} died, "
        f"{sorted(after - before)} replaced them"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=int(os.environ.get("FUZZ_EXAMPLES", 1000)))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, help="to replay a run")
    args = parser.parse_args(argv)

    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="autograd-fuzz-", suffix=".log")[1])
    server = start_server(port, args.workers, log)
    status = 1
    try:
        wait_ready(server, port)
        workers = wait_for_workers(server, args.workers)
        command = [
            str(SCHEMATHESIS),
            "run",
            str(ROOT / "openapi.yaml"),
            "--url",
            f"http://127.0.0.1:{port}",
            "--checks",
            CHECKS,
            "--max-examples",
            str(args.examples),
            "--max-response-time",
            "1",
            "--workers",
            "2",
            "--generation-database",
            "none",
        ]
        if args.seed is not None:
            command += ["--seed", str(args.seed)]
        # Run from a scratch directory: schemathesis keeps a cache of crashes where it runs.
        with tempfile.TemporaryDirectory(prefix="autograd-fuzz-") as scratch:
            status = subprocess.run(command, cwd=scratch, check=False).returncode  # noqa: S603
        survivors = {p.pid for p in _workers(server.pid)}
        if server.poll() is not None or survivors != workers:
            print(worker_changes(workers, survivors, server.poll()))
            print(log.read_text(errors="replace")[-3000:])
            status = status or 1
    except RuntimeError as error:
        print(f"fuzzing could not run: {error}", file=sys.stderr)
        print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
    finally:
        stop_server(server)
        log.unlink(missing_ok=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
