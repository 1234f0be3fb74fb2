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

import _weakrefset
import contextlib
import gc
import signal
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from service.errors import BudgetExceeded

# The budgets in force, outermost first: (deadline on the monotonic clock, kind, seconds).
_active: list[tuple[float, str, float]] = []

# An exception raised where Python ignores exceptions (a `__del__`, a weakref or gc callback, all
# of which can be running when the signal arrives) is lost, and the work would go on unbounded:
# until a block's `finally` replaces it, the alarm fires again this many seconds later. Inside a
# gc callback or the standard library's weakref callbacks, which the handler can recognise, it is
# not raised at all, only left to the retry.
_RETRY = 0.05
# The budgets (by `id` of their `_active` entry) whose overrun has been raised or left to the
# retry: one whose block then ends as if nothing happened, before the alarm comes again, lost it,
# and raises it there.
_raised: set[int] = set()


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
    # An alarm someone else set (a test runner's watchdog) is put back, less the time spent.
    pending = signal.getitimer(signal.ITIMER_REAL)[0] if not _active else 0.0
    if previous is not None:
        signal.signal(signal.SIGALRM, _on_alarm)
    entry = (deadline, kind, seconds)
    _active.append(entry)
    try:
        _arm(now)
        yield
    finally:
        _active.pop()
        lost = id(entry) in _raised  # its overrun raised, and lost if no exception ends it
        _raised.discard(id(entry))
        if _active:
            _arm(time.monotonic())
        else:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous or signal.SIG_DFL)
            if pending:
                left = pending - (time.monotonic() - now)
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6))
    if lost:
        raise BudgetExceeded(kind, seconds)


def _arm(now: float) -> None:
    """Set the timer for the nearest deadline in force; one already passed fires at once."""
    nearest = min(deadline for deadline, _, _ in _active)
    signal.setitimer(signal.ITIMER_REAL, max(nearest - now, 1e-6))


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    now = time.monotonic()
    expired = [entry for entry in _active if entry[0] <= now]  # `_raised` keys these by id
    if not expired:  # a stale alarm from a budget that has just ended: re-arm for the rest
        if _active:
            _arm(now)
        return
    signal.setitimer(signal.ITIMER_REAL, _RETRY)
    if frame is not None and frame.f_code in _BOOKKEEPING:
        return  # a block is ending; if it is not the overrun one, the retry raises
    # The innermost budget whose time is up is the one that was overrun.
    overrun = expired[-1]
    _raised.add(id(overrun))
    if frame is not None and (_in_gc_callback(frame) or _in_weakref_callback(frame)):
        return  # raised here it would be lost, and reported: the retry or the block's end raises it
    _, kind, seconds = overrun
    raise BudgetExceeded(kind, seconds)


def _in_gc_callback(frame: FrameType) -> bool:
    """Whether `frame` runs inside a gc callback (a profiler's, a test tool's), where Python
    ignores and reports what is raised."""
    callbacks = {getattr(getattr(cb, "__func__", cb), "__code__", None) for cb in gc.callbacks}
    callbacks.discard(None)
    caller: FrameType | None = frame
    while callbacks and caller is not None:
        if caller.f_code in callbacks:
            return True
        caller = caller.f_back
    return False


def _in_weakref_callback(frame: FrameType) -> bool:
    """Whether `frame` is the standard library's weakref bookkeeping (`WeakKeyDictionary`'s and
    `WeakSet`'s callbacks, which run when an object dies), where Python ignores and reports what
    is raised."""
    return frame.f_code.co_filename in _WEAKREF_MODULES


_WEAKREF_MODULES = frozenset({weakref.__file__, _weakrefset.__file__})

# Where the alarm does not raise: the budget's own bookkeeping (entering and leaving a block), so
# a block that is ending always finishes its `finally`.
_BOOKKEEPING = frozenset(
    {
        time_budget.__wrapped__.__code__,  # type: ignore[attr-defined]
        _arm.__code__,
        contextlib._GeneratorContextManager.__enter__.__code__,
        contextlib._GeneratorContextManager.__exit__.__code__,
    }
)
