"""The load and fuzz drivers themselves: they must not report failures that did not happen."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "loadtest"))

import fuzz
import run

from service.limits import DEFAULT_LIMITS
from service.parser import parse


def test_a_worker_change_names_the_dead_and_their_replacements() -> None:
    message = fuzz.worker_changes({1, 2, 3}, {1, 2, 4}, None)
    assert "[3] died" in message and "[4] replaced" in message
    assert "status 1" in fuzz.worker_changes({1}, set(), 1)


@pytest.mark.slow
def test_the_worst_expression_fills_the_limits_and_is_accepted() -> None:
    text = run.worst_expression(DEFAULT_LIMITS.max_expression_length, DEFAULT_LIMITS.max_nodes)
    assert (
        DEFAULT_LIMITS.max_expression_length - 4 < len(text) <= DEFAULT_LIMITS.max_expression_length
    )
    assert text.count("/") > 9_000
    parse(text, DEFAULT_LIMITS)  # within every limit


def test_the_load_mix_sends_the_worst_shapes_and_accepts_their_refusal() -> None:
    mix = run.Mix(1 << 20, DEFAULT_LIMITS.max_nodes)
    assert {"worst", "worst-graph"} <= mix.weights.keys()
    rng = random.Random(1)
    drawn = {}
    while len(drawn) < len(mix.weights):
        request = mix.draw(rng)
        drawn[request.name] = request
    for name in ("worst", "worst-graph", "max-nodes"):
        assert (503, "service-busy") in drawn[name].alternatives
        assert (503, "request-too-expensive") in drawn[name].alternatives
    assert len(json.loads(drawn["worst"].body)["expression"]) > 99_000
    assert drawn["lesson"].alternatives == ()
