"""Time budgets: bound how long one piece of work may run, and stop it where it is when it overruns.

A budget is an interval timer (`signal.setitimer`): its signal raises `BudgetExceeded` in the
middle of whatever Python is doing, a loop of ours or a sympy call alike, so no work needs to check
the clock itself. Budgets nest: an inner budget (the symbolic work inside a request) never outlives
the outer one (the request), and the one whose deadline passes first is the one reported.

Signals reach only the main thread, which is where a sync gunicorn worker, the CLI and a test run
their work. Elsewhere (a thread of a threaded server) a budget cannot interrupt anything; it is
then not enforced, and says so through `enforced()`.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from service.errors import BudgetExceeded

_REPEAT_S = 0.5  # an overrun budget's alarm repeats this often until its block has ended

# The budgets in force, outermost first: (deadline on the monotonic clock, kind, seconds).
_active: list[tuple[float, str, float]] = []


def enforced() -> bool:
    """Whether a budget can interrupt work here: only in the main thread, where signals arrive."""
    return threading.current_thread() is threading.main_thread()


@contextmanager
def time_budget(seconds: float, kind: str = "request_too_expensive") -> Iterator[None]:
    """Run the block for at most `seconds` (and never past an enclosing budget), else raise
    `BudgetExceeded(kind)` wherever the block is when the time runs out."""
    if seconds <= 0 or not enforced():
        yield
        return
    now = time.monotonic()
    deadline = now + seconds
    previous = signal.getsignal(signal.SIGALRM) if not _active else None
    # A timer someone else set (a test runner's timeout, say) is put back when the outermost
    # budget ends, with the time it had left; until then it waits.
    foreign = signal.getitimer(signal.ITIMER_REAL) if not _active else (0.0, 0.0)
    if previous is not None:
        signal.signal(signal.SIGALRM, _on_alarm)
    _active.append((deadline, kind, seconds))
    try:
        _arm(now)
        yield
    finally:
        _active.pop()
        if _active:
            _arm(time.monotonic())
        else:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous or signal.SIG_DFL)
            if foreign[0] > 0:
                left = foreign[0] - (time.monotonic() - now)
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), foreign[1])


def _arm(now: float) -> None:
    """Set the timer for the nearest deadline in force; one already passed fires at once."""
    nearest = min(deadline for deadline, _, _ in _active)
    signal.setitimer(signal.ITIMER_REAL, max(nearest - now, 1e-6))


def _on_alarm(signum: int, frame: object) -> None:
    now = time.monotonic()
    expired = [(deadline, kind, seconds) for deadline, kind, seconds in _active if deadline <= now]
    if not expired:  # a stale alarm from a budget that has just ended: re-arm for the rest
        if _active:
            _arm(now)
        return
    # The innermost budget whose time is up is the one that was overrun.
    _, kind, seconds = expired[-1]
    # The exception can be lost: raised inside a `__del__` or a garbage-collector callback it is
    # only printed, and a broad `except` in library code may swallow it. So the alarm repeats
    # until the exception has unwound to the `finally` above, which stops or re-arms the timer.
    signal.setitimer(signal.ITIMER_REAL, _REPEAT_S)
    raise BudgetExceeded(kind, seconds)
