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

from run import server, workers_of

from service.devserver import ROOT

TEST = "tests/test_fuzz.py::test_api_conforms_to_its_spec"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=int(os.environ.get("FUZZ_EXAMPLES", 1000)))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)

    gunicorn = server(args.workers)
    try:
        gunicorn.start()
    except RuntimeError as error:
        print(f"fuzzing could not run: {error}", file=sys.stderr)
        return 1
    try:
        workers = {p.pid for p in workers_of(gunicorn.pid)}
        env = {**os.environ, "FUZZ_URL": gunicorn.url, "FUZZ_EXAMPLES": str(args.examples)}
        command = [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider"]
        status = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode  # noqa: S603
        survivors = {p.pid for p in workers_of(gunicorn.pid)}
        if survivors != workers:
            print(f"gunicorn lost workers during the run: {sorted(workers - survivors)}")
            print(gunicorn.output()[-3000:])
            status = status or 1
    finally:
        gunicorn.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
