"""Spec-driven fuzzing of a live server: the schemathesis run of the tests, against gunicorn.

    .venv/bin/python loadtest/fuzz.py [--examples 1000] [--workers 2]

Starts gunicorn on loopback as `make load` does, runs the one schemathesis test
(`tests/test_fuzz.py::test_api_conforms_to_its_spec`: valid and invalid requests for every
operation, every response as `openapi.yaml` documents it) with `FUZZ_URL` pointing at the server,
then checks that no worker died on the way. Exits with pytest's status, or 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from run import server

from service.devserver import ROOT

TEST = "tests/test_fuzz.py::test_api_conforms_to_its_spec"


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
    args = parser.parse_args(argv)

    gunicorn = server(args.workers)
    try:
        gunicorn.start()
        # Every worker, once all have forked: one still to come would look like a replacement.
        workers = gunicorn.wait_for_workers(args.workers)
    except RuntimeError as error:
        print(f"fuzzing could not run: {error}", file=sys.stderr)
        gunicorn.stop()
        return 1
    try:
        env = {**os.environ, "FUZZ_URL": gunicorn.url, "FUZZ_EXAMPLES": str(args.examples)}
        command = [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider"]
        status = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode  # noqa: S603
        survivors = gunicorn.workers()
        exit_status = gunicorn.process.poll() if gunicorn.process is not None else None
        if exit_status is not None or survivors != workers:
            print(worker_changes(workers, survivors, exit_status))
            print(gunicorn.output()[-3000:])
            status = status or 1
    finally:
        gunicorn.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
