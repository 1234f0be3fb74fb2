"""The command line: the lesson's document on stdout, or the problem and a non-zero exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from service.cli import main

ROOT = Path(__file__).resolve().parent.parent
LESSON = ["eval", "(a + b) * c", "a=2", "b=-3", "c=10"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    """Exit status, stdout read as JSON, and stderr."""
    status = main(argv)
    out, err = capsys.readouterr()
    return status, json.loads(out), err


def check_lesson(document: dict[str, Any]) -> None:
    assert document["value"] == -10.0
    assert document["gradients"] == {"a": 10.0, "b": 10.0, "c": -1.0}
    steps = {step["node"]: step for step in document["backward"]}
    root = steps[document["graph"]["root"]]
    assert root["grad"] == 1.0
    assert [(s["local_grad"], s["contribution"]) for s in root["sends"]] == [(10, 10), (-1, -1)]
    assert len(document["backward"]) == len(document["graph"]["nodes"])


def test_the_lesson(capsys: pytest.CaptureFixture[str]) -> None:
    status, document, _ = run(LESSON, capsys)
    assert status == 0
    assert document["granularity"] == "operator"
    check_lesson(document)


def test_the_lesson_in_primitives_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    status = main([*LESSON, "--granularity", "primitive", "--indent", "0"])
    out, _ = capsys.readouterr()
    assert status == 0
    assert out.count("\n") == 1
    document = json.loads(out)
    assert document["granularity"] == "primitive"
    check_lesson(document)


def test_an_expression_starting_with_a_minus_sign(capsys: pytest.CaptureFixture[str]) -> None:
    # `-a*b` is an expression, not an option, as far as the grammar is concerned.
    status, document, _ = run(["eval", "-a*b", "a=2", "b=3"], capsys)
    assert status == 0
    assert document["value"] == -6.0


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["eval", "a +", "a=1"], {"kind": "unexpected_end", "span": [3, 3]}),
        (["eval", "2a", "a=1"], {"kind": "implicit_multiplication", "span": [0, 2]}),
        (["eval", "a * b", "a=1"], {"kind": "unbound_variables", "variables": ["b"]}),
        (["eval", "a", "a=1", "b=2"], {"kind": "unknown_variables", "variables": ["b"]}),
        (["eval", "a", "a=nan"], {"kind": "invalid_binding", "variables": ["a"]}),
        (["eval", "b + log(a)", "a=0", "b=1"], {"kind": "log_domain", "node": 2, "span": [4, 10]}),
    ],
)
def test_a_problem_is_printed_and_fails(
    argv: list[str], problem: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    status, printed, err = run(argv, capsys)
    assert status != 0
    error = printed["error"]
    assert error["message"]
    assert {key: error[key] for key in problem} == problem
    # For people: the kind and the message, and the fault underlined under the expression.
    assert error["kind"] in err and error["message"] in err
    if "span" in problem:
        start, end = problem["span"]
        assert f"\n  {' ' * start}{'^' * max(1, end - start)}\n" in err


def test_a_malformed_binding_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["eval", "a", "a"])
    assert raised.value.code != 0
    assert "NAME=NUMBER" in capsys.readouterr().err


def test_python_dash_m_service() -> None:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    finished = subprocess.run(
        [sys.executable, "-m", "service", *LESSON],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    check_lesson(json.loads(finished.stdout))


def test_derivatives_three_ways(capsys: pytest.CaptureFixture[str]) -> None:
    status, document, _ = run(["derivatives", "(a + b) * c", "a=2", "b=-3", "c=10"], capsys)
    assert status == 0
    assert document["agree"] is True
    items = {item["variable"]: item for item in document["derivatives"]}
    assert [items[n]["reverse_mode"] for n in "abc"] == [10.0, 10.0, -1.0]
    assert items["c"]["symbolic"]["text"] == "a + b"
    assert items["c"]["numeric"]["central"] == pytest.approx(-1.0)


def test_derivatives_by_chosen_variables_with_a_step(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["derivatives", "-a*b", "--variable", "b", "--h", "0.5", "a=2", "b=3"]
    status, document, _ = run(argv, capsys)
    assert status == 0
    (item,) = document["derivatives"]
    assert item["variable"] == "b"
    assert item["numeric"]["h"] == 0.5
    assert item["symbolic"] == {"text": "-a", "latex": "- a", "value": -2.0, "operations": 1}


def test_derivatives_refused(capsys: pytest.CaptureFixture[str]) -> None:
    status, printed, err = run(["derivatives", "a", "a=1", "--variable", "b"], capsys)
    assert status != 0
    assert printed["error"]["kind"] == "unknown_variables"
    assert "unknown_variables" in err
