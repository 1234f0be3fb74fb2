"""Time budgets: work is stopped where it is, nested budgets report the right one, and an
exception Python swallows (in a `__del__`, a gc callback) does not let the work run on."""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import time
import weakref
from collections.abc import Iterator
from types import FrameType

import pytest

from service import budget
from service.budget import time_budget
from service.errors import BudgetExceeded

GIVE_UP = 10.0  # seconds a spin runs when no budget stops it: the test then fails, not hangs


def spin(seconds: float = GIVE_UP) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.fixture(autouse=True)
def check_clean() -> Iterator[None]:
    """After each test: no budget left in force, its handler gone, and no alarm of its own."""
    pending = signal.getitimer(signal.ITIMER_REAL)[0]
    yield
    assert budget._active == []
    assert signal.getsignal(signal.SIGALRM) is not budget._on_alarm
    if not pending:
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_work_is_stopped_where_it_is() -> None:
    with pytest.raises(BudgetExceeded) as stopped, time_budget(0.05, "spinning"):
        spin()
    assert stopped.value.kind == "spinning"
    assert stopped.value.seconds == 0.05


def test_work_within_the_budget_is_left_alone() -> None:
    with time_budget(5, "roomy"):
        spin(0.01)


def test_the_inner_budget_is_reported_when_it_runs_out_first() -> None:
    with (
        pytest.raises(BudgetExceeded) as stopped,
        time_budget(5, "outer"),
        time_budget(0.05, "inner"),
    ):
        spin()
    assert stopped.value.kind == "inner"


def test_the_outer_budget_is_reported_when_it_runs_out_first() -> None:
    with (
        pytest.raises(BudgetExceeded) as stopped,
        time_budget(0.05, "outer"),
        time_budget(5, "inner"),
    ):
        spin()
    assert stopped.value.kind == "outer"


@pytest.mark.slow
def test_an_inner_overrun_caught_leaves_the_outer_budget_in_force() -> None:
    with pytest.raises(BudgetExceeded) as stopped, time_budget(0.3, "outer"):
        with pytest.raises(BudgetExceeded), time_budget(0.05, "inner"):
            spin()
        spin()
    assert stopped.value.kind == "outer"


def test_a_swallowed_overrun_is_raised_again() -> None:
    with pytest.raises(BudgetExceeded) as stopped, time_budget(0.05, "swallowed"):
        with contextlib.suppress(BudgetExceeded):  # as Python does with one from a `__del__`
            spin()
        spin()
    assert stopped.value.kind == "swallowed"


def test_a_swallowed_overrun_is_raised_when_the_block_ends_before_the_alarm_comes_again() -> None:
    # The overrun is swallowed, as Python does with one raised in a gc callback, and the block
    # ends well within the alarm's retry: the work overran all the same.
    with (
        pytest.raises(BudgetExceeded) as stopped,
        time_budget(0.05, "swallowed"),
        contextlib.suppress(BudgetExceeded),
    ):
        spin()
    assert stopped.value.kind == "swallowed"
    assert budget._raised == set()


class SlowToDie:
    def __del__(self) -> None:
        spin(0.2)  # the alarm fires in here, where Python ignores exceptions


# Python reports the exception it ignored in __del__ as unraisable; that is the point here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_alarm_inside_a_finalizer_still_stops_the_work() -> None:
    with pytest.raises(BudgetExceeded), time_budget(0.05, "finalized"):
        SlowToDie()  # dropped at once: its __del__ runs now and outlasts the budget
        spin()


@pytest.fixture
def slow_collection() -> Iterator[list[object]]:
    """A gc callback that outlasts a 0.05 s budget on every collection, as a profiler's might;
    yields what Python reports as unraisable meanwhile."""

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            spin(0.2)

    unraisable: list[object] = []
    hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    gc.callbacks.append(callback)
    try:
        yield unraisable
    finally:
        gc.callbacks.remove(callback)
        sys.unraisablehook = hook


def test_an_alarm_inside_a_gc_callback_stops_the_work_after_it(
    slow_collection: list[object],
) -> None:
    with pytest.raises(BudgetExceeded) as stopped, time_budget(0.05, "collected"):
        gc.collect()
        spin()
    assert stopped.value.kind == "collected"
    assert slow_collection == []  # nothing raised where Python would have ignored it


def test_an_alarm_inside_a_gc_callback_is_raised_when_the_block_ends_first(
    slow_collection: list[object],
) -> None:
    with pytest.raises(BudgetExceeded) as stopped, time_budget(0.05, "collected"):
        gc.collect()
    assert stopped.value.kind == "collected"
    assert slow_collection == []


class WeakrefFrame:
    """A key whose hash WeakKeyDictionary asks for from its own code, the module whose callbacks
    run when a key dies."""

    def __init__(self) -> None:
        self.frames: list[FrameType] = []

    def __hash__(self) -> int:
        self.frames.append(sys._getframe(1))
        return 0


def test_the_weakref_bookkeeping_is_where_an_alarm_is_left_to_the_retry() -> None:
    # Python ignores (and reports) what a weakref callback raises, as it does a gc callback's.
    key = WeakrefFrame()
    weakref.WeakKeyDictionary()[key] = 1
    assert any(budget._in_weakref_callback(frame) for frame in key.frames)
    assert not budget._in_weakref_callback(sys._getframe())
