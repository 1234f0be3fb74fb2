"""What one request may cost a worker: a time budget, a share of the workers, a response size.

Every view runs inside `bounded` (the app's `dispatch_request` calls it), so the bounds hold for
every endpoint without a view knowing about them:

- **Time.** The view's work runs under `service.budget.time_budget(REQUEST_BUDGET)`; past it the
  work stops where it is and the client gets a 503 `request-too-expensive` with `Retry-After`,
  while the worker goes on serving. gunicorn's worker `timeout` sits well above the budget.
- **A share of the workers.** A request whose body is at least `HEAVY_REQUEST_BYTES` long may take
  seconds. At most `HEAVY_REQUEST_SLOTS` of them run at once across all workers of one server
  (by default one fewer than its workers), so at least one worker is always free for the small
  requests of a lesson and for `/healthz`. A small request whose work may take seconds all the
  same (a graph drawn as SVG by Graphviz) takes a slot for that work (`heavy_work`). A request
  that finds no free slot is refused at once with a 503 `service-busy` and `Retry-After`, rather
  than waiting while holding a worker.
- **Response size.** A response body larger than `MAX_RESPONSE_BYTES` is replaced by a 422
  `response-too-large` problem, where the answer is computed from the client's input (the
  blueprint is `sized_by_input`): the service's own documents are never refused.

The slots are files locked with `flock` in a directory the gunicorn master makes (see
`gunicorn.conf.py`, which calls `join_server` in each worker it forks): the kernel releases a lock
when its process dies, so a worker killed mid-request never keeps a slot.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from flask import Flask, Response, current_app, g, request

from service.budget import time_budget
from service.i18n import _, _n
from service.kinds import Problem

EXTENSION = "autograd.costs"  # the app's `extensions` key for its `RequestCosts`
BUDGET_KIND = "request_too_expensive"
# The problems any view may answer because it runs within these bounds, whatever its work: both
# are 503s with `Retry-After`, which the spec documents on every operation (api/problems.py).
REFUSALS = ("request-too-expensive", "service-busy")
BUSY_RETRY_AFTER_S = 1  # a heavy request refused for want of a slot may try again this soon


@dataclass
class Server:
    """The gunicorn server a worker belongs to: where its slot files are and how many workers."""

    directory: str | None = None
    workers: int = 0


# Set in each worker by `join_server`; outside gunicorn (tests, the CLI) there is no server.
SERVER = Server()


def join_server(directory: str, workers: int) -> None:
    """Called in each gunicorn worker after it forks: heavy requests share `directory`'s slots."""
    SERVER.directory = directory
    SERVER.workers = workers


@dataclass
class HeavySlots:
    """Slot files locked with `flock`; each process opens its own (locks are per open file)."""

    configured: int  # HEAVY_REQUEST_SLOTS; 0: one fewer than the server's workers
    _files: list[IO[bytes]] = field(default_factory=list)
    _opened_in: tuple[int, str | None, int] | None = None  # (pid, directory, count) of `_files`

    def count(self) -> int:
        """Slots in force: none to share (no limit) outside a server of several workers."""
        if SERVER.directory is None:
            return 0
        return self.configured or max(1, SERVER.workers - 1)

    def acquire(self) -> IO[bytes] | None:
        """A locked slot; None when there is no limit. Raises `Problem` when every slot is held."""
        count = self.count()
        if not count:
            return None
        for slot in self._slots(count):
            try:
                fcntl.flock(slot, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            return slot
        raise Problem(
            "service-busy",
            _n(
                "the service is busy with {count} other large request; "
                "try again in {seconds} s or send a smaller one",
                "the service is busy with {count} other large requests; "
                "try again in {seconds} s or send a smaller one",
                count,
                seconds=BUSY_RETRY_AFTER_S,
            ),
            headers={"Retry-After": retry_after(BUSY_RETRY_AFTER_S)},
        )

    @staticmethod
    def release(slot: IO[bytes] | None) -> None:
        if slot is not None:
            fcntl.flock(slot, fcntl.LOCK_UN)

    def _slots(self, count: int) -> list[IO[bytes]]:
        key = (os.getpid(), SERVER.directory, count)
        if self._opened_in != key:  # first use in this process (a fork inherits none)
            for slot in self._files:
                slot.close()
            directory = Path(SERVER.directory or ".")
            self._files = [(directory / f"heavy-{i}").open("ab") for i in range(count)]
            self._opened_in = key
        return self._files


@dataclass
class RequestCosts:
    """The bounds on one request, read from the configuration once."""

    budget_s: float  # REQUEST_BUDGET; 0: no budget
    heavy_bytes: int  # HEAVY_REQUEST_BYTES
    max_response_bytes: int  # MAX_RESPONSE_BYTES
    slots: HeavySlots

    @contextmanager
    def heavy_slot(self) -> Iterator[None]:
        # The body is read first (it is bounded by MAX_BODY_BYTES and cached for the view): its
        # length is what the work grows with, whether it came with a Content-Length or chunked.
        if len(request.get_data(cache=True)) >= self.heavy_bytes:
            with self.heavy_work():
                yield
        else:
            yield

    @contextmanager
    def heavy_work(self) -> Iterator[None]:
        """A slot held for the block, unless the request holds one already."""
        if g.get("heavy_slot_held"):
            yield
            return
        slot = self.slots.acquire()
        g.heavy_slot_held = True
        try:
            yield
        finally:
            g.heavy_slot_held = False
            self.slots.release(slot)


def heavy_work() -> contextlib.AbstractContextManager[None]:
    """A heavy slot for work that may take seconds whatever the size of the request's body."""
    costs: RequestCosts = current_app.extensions[EXTENSION]
    return costs.heavy_work()


def bounded(app: Flask, dispatch: Callable[[], Any]) -> Any:
    """Run a view's `dispatch` within the request's bounds; see the module docstring."""
    costs: RequestCosts = app.extensions[EXTENSION]
    with costs.heavy_slot(), time_budget(costs.budget_s, BUDGET_KIND):
        result = dispatch()
    sized_by_input = getattr(app.blueprints.get(request.blueprint or ""), "sized_by_input", False)
    if sized_by_input and isinstance(result, Response) and not result.is_streamed:
        size = result.calculate_content_length() or 0
        if size > costs.max_response_bytes:
            raise Problem(
                "response-too-large",
                _(
                    "the response would be {size} bytes, more than the {maximum} this service "
                    "sends; ask for less: a smaller expression, or fewer points of a sweep",
                    size=size,
                    maximum=costs.max_response_bytes,
                ),
                limit="max_response_bytes",
                maximum=costs.max_response_bytes,
            )
    return result


def retry_after(seconds: float) -> str:
    """The `Retry-After` value for a wait of `seconds`: whole seconds, at least one."""
    return str(max(1, math.ceil(seconds)))
