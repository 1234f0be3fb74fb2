"""gunicorn on a free loopback port, as the tests, the benchmarks and the load tests start it.

It lives in the package, not beside the tests, so that `tests/`, `bench/` and `loadtest/` all
import the one launcher however they are run (pytest, `python -m bench`, `python loadtest/run.py`)
without touching `sys.path`. It needs only the standard library: the service image, which has
no test dependencies, can import it too.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

ROOT = Path(__file__).resolve().parent.parent  # the checkout: gunicorn.conf.py is read from it
APP = "service.app:create_app()"
HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """One GET on loopback: the status and the body."""
    connection = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class Gunicorn:
    """`gunicorn -c gunicorn.conf.py` on a free loopback port, stopped however the block ends.

        with Gunicorn(env={"AUTOGRAD_WORKERS": "1"}) as server:
            requests.get(f"{server.url}/healthz")

    Everything the server writes (its log and, unless `keep_access_log` is off, the access log)
    goes to one temporary file, read with `output()`. The server runs in its own process group,
    so stopping it never leaves a worker behind.
    """

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        app: str = APP,
        root: Path = ROOT,
        ready_timeout: float = 90.0,
        keep_access_log: bool = True,
    ) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.env = {**os.environ, "PORT": str(self.port), **(env or {})}
        # Bound to loopback whatever the configuration file binds; the caller's args come last.
        self.command = [
            sys.executable, "-m", "gunicorn", "--config", "gunicorn.conf.py",
            "--bind", f"{HOST}:{self.port}", *args, app,
        ]  # fmt: skip
        self.ready_timeout = ready_timeout
        # Without it, stdout (the access log) is discarded: a long run would fill the disk.
        self.keep_access_log = keep_access_log
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, "the server has not been started"
        return self.process.pid

    def __enter__(self) -> Gunicorn:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Starts the server and returns once it answers (see `ready`)."""
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(  # noqa: S603 - a fixed command line, no shell
            self.command,
            cwd=self.root,
            env=self.env,
            stdout=self._log if self.keep_access_log else subprocess.DEVNULL,
            stderr=self._log,
            start_new_session=True,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def ready(self) -> bool:
        """Whether the server serves requests: /healthz answers 200."""
        try:
            status, _ = get(self.port, "/healthz", timeout=2)
        except OSError:
            return False
        return status == 200

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"gunicorn exited with status {self.process.returncode}:\n{self.output()}"
                )
            if self.ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"gunicorn did not answer within {self.ready_timeout:.0f} s")

    def output(self) -> str:
        """All the server has written so far, its log and access log together."""
        if self._log is None or self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stop(self) -> str:
        """Stops the server gracefully (SIGTERM), else kills its group; returns its output."""
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=25)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # the group this launcher started
                process.wait(timeout=10)
        output = self.output()
        if self._log is not None:
            self._log.close()
        return output
