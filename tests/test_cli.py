"""The command line: the lesson's document on stdout, or the problem and a non-zero exit."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import LESSON, LESSON_GRADIENTS, LESSON_VALUE, at, make_app

from service.cli import EXCERPT, main

ROOT = Path(__file__).resolve().parent.parent
# The lesson, as typed on the command line.
LESSON_ARGV = ["eval", LESSON["expression"], *(f"{k}={v}" for k, v in LESSON["bindings"].items())]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    """Exit status, stdout read as JSON, and stderr."""
    status = main(argv)
    out, err = capsys.readouterr()
    return status, json.loads(out), err


def check_lesson(document: dict[str, Any]) -> None:
    assert document["value"] == LESSON_VALUE
    assert document["gradients"] == LESSON_GRADIENTS
    steps = {step["node"]: step for step in document["backward"]}
    root = steps[document["graph"]["root"]]
    assert root["grad"] == 1.0
    assert [(s["local_grad"], s["contribution"]) for s in root["sends"]] == [(10, 10), (-1, -1)]
    assert len(document["backward"]) == len(document["graph"]["nodes"])


def test_the_lesson(capsys: pytest.CaptureFixture[str]) -> None:
    status, document, _ = run(LESSON_ARGV, capsys)
    assert status == 0
    assert document["granularity"] == "operator"
    check_lesson(document)


def test_the_lesson_in_primitives_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    status = main([*LESSON_ARGV, "--granularity", "primitive", "--indent", "0"])
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
    ("argv", "kind", "members"),
    [
        (["eval", "a +", "a=1"], "unexpected-end", {"position": at(3, 3)}),
        (["eval", "2a", "a=1"], "implicit-multiplication", {"position": at(0, 2)}),
        (["eval", "a * b", "a=1"], "unbound-variables", {"variables": ["b"]}),
        (["eval", "a", "a=1", "b=2"], "unknown-variables", {"variables": ["b"]}),
        (["eval", "a", "a=nan"], "invalid-binding", {"variables": ["a"]}),
        (
            ["eval", "b + log(a)", "a=0", "b=1"],
            "log-domain",
            {"node": 2, "position": at(4, 10)},
        ),
    ],
)
def test_a_problem_is_printed_as_the_api_answers_it(
    argv: list[str], kind: str, members: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    status, printed, err = run(argv, capsys)
    assert status != 0
    # The same document as the HTTP API's problem for the same request.
    expression, bindings = argv[1], dict(arg.split("=") for arg in argv[2:])
    body = {"expression": expression, "bindings": {k: float(v) for k, v in bindings.items()}}
    answered = make_app().test_client().post("/v1/gradients", json=body).get_json()
    # `errors` points into the HTTP request's body, which the command line has not got; a value
    # that is not a number is named as each reader spells it (`nan`, JSON's `NaN`).
    assert printed.keys() == answered.keys() - {"errors"}
    different = {"detail"} if kind == "invalid-binding" else set()
    assert all(printed[key] == answered[key] for key in printed.keys() - different)
    assert printed["type"] == f"https://autograd-service.dev/problems/{kind}"
    assert printed["title"] and printed["detail"] and printed["status"] == 422
    assert {key: printed[key] for key in members} == members
    # For people: the message, and the fault underlined under the expression.
    assert printed["detail"] in err
    if "position" in members:
        start, end = members["position"]["start"], members["position"]["end"]
        assert f"\n  {' ' * start}{'^' * max(1, end - start)}\n" in err


def test_help_names_the_console_script(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert capsys.readouterr().out.startswith("usage: autograd-service ")


_NAMES = [f"x{i}" for i in range(500)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "arguments",
    [
        ["eval", "+".join(_NAMES), *(f"{name}=1" for name in _NAMES)],
        ["eval", "+".join(_NAMES[:60]), "--format", "svg", *(f"{n}=1" for n in _NAMES[:60])],
        ["sweep", "x*x", "--vary", "x:-3:3:50"],
        ["sweep", "x*x", "--vary", "x:-3:3:50", "--format", "svg"],
    ],
    ids=["eval", "eval svg", "sweep", "sweep svg"],
)
def test_a_reader_that_stops_early_ends_it_quietly(arguments: list[str]) -> None:
    command = [sys.executable, "-m", "service", *arguments]
    # `| true`: the reader closes the pipe before reading anything.
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as cli:
        assert cli.stdout is not None and cli.stderr is not None
        cli.stdout.close()
        error = cli.stderr.read().decode()
        cli.wait(timeout=60)
    assert "Traceback" not in error
    assert "BrokenPipeError" not in error


def test_a_malformed_binding_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["eval", "a", "a"])
    assert raised.value.code != 0
    assert "NAME=NUMBER" in capsys.readouterr().err


@pytest.mark.slow
def test_python_dash_m_service() -> None:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    finished = subprocess.run(
        [sys.executable, "-m", "service", *LESSON_ARGV],
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
    # The problem document the HTTP API answers with for the same request.
    body = {"expression": "a", "bindings": {"a": 1}, "variables": ["b"]}
    answered = make_app().test_client().post("/v1/derivatives", json=body).get_json()
    assert printed == answered
    assert printed["type"].endswith("/unknown-variables")
    assert printed["variables"] == ["b"]
    assert "unknown_variables" in err


def test_derivatives_of_a_program_from_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "program.py"
    program.write_text("w = Value(0.5)\nh = tanh(w * x)\nloss = (h - 1) ** 2\n")
    status, document, _ = run(["derivatives", "-f", str(program), "x=2", "--output", "h"], capsys)
    assert status == 0
    assert document["latex"] == r"\tanh{\left(w x \right)}"
    assert [item["variable"] for item in document["derivatives"]] == ["w", "x"]
    assert document["agree"] is True


@pytest.mark.parametrize(
    "command",
    [
        ["eval"],
        ["eval", "--format", "mermaid"],
        ["derivatives"],
        ["sweep", "--vary", "x:-1:1:3"],
        ["sweep", "--vary", "x:-1:1:3", "--format", "svg"],
    ],
)
def test_an_unused_assignment_is_a_warning_on_standard_error(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "program.py"
    program.write_text("x = Value(2.0)\nu = x * 3  # not used\ny = x * x\n")
    status = main([*command, "-f", str(program)])
    out, err = capsys.readouterr()
    assert status == 0 and out
    assert err == (
        "warning (unused): u is assigned on line 2, but the output does not depend on it\n"
        "  u = x * 3  # not used\n"
        "  ^^^^^^^^^\n"
    )
    if command[-1] not in ("mermaid", "svg"):
        assert [w["name"] for w in json.loads(out)["warnings"]] == ["u"]


def refused(program: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Standard error of `eval -f` on a file holding `program`, which is refused."""
    path = tmp_path / "program.py"
    path.write_text(program)
    assert main(["eval", "-f", str(path), "a=1"]) == 2
    return capsys.readouterr().err


def test_the_underline_keeps_the_tabs_before_the_fault(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = refused("a = Value(2.0)\n\tb = a +* 3\n", tmp_path, capsys)
    assert error.splitlines()[1:] == ["  \tb = a +* 3", "  \t       ^"]


def test_a_long_line_is_shown_around_its_fault(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = refused("y = " + " + ".join(["a"] * 300) + " +* 3\n", tmp_path, capsys)
    _message, line, marks = error.splitlines()
    assert len(line) <= EXCERPT + 4  # the indent and an ellipsis at each end
    assert line.startswith("  …") and line.endswith("+* 3")
    assert line[marks.index("^") :].startswith("*")  # the mark is still under the fault


def test_a_huge_line_is_not_echoed_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # past the longest expression allowed
    error = refused("# " + "c" * 300_000 + "\n", tmp_path, capsys)
    assert "expression_too_long" in error
    assert len(error) < 500


def test_an_invisible_character_is_shown_where_the_mark_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = refused("x = Value(1.0)\ny = x\u200b * 2\n", tmp_path, capsys)
    _message, line, marks = error.splitlines()
    assert (line, marks) == ("  y = x\N{REPLACEMENT CHARACTER} * 2", "       ^")


@pytest.mark.parametrize("output", ["", " ", "a b", "2y"])
def test_an_output_that_is_not_a_name_is_a_usage_error(
    output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    error = usage_error(["eval", "y = x * 2", "x=1", "--output", output], capsys)
    expected = "expected a name (a letter or _, then letters, digits or _)"
    assert f"argument --output: {expected}, got {output!r}" in error


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_standard_output_that_cannot_be_written_is_said_so() -> None:
    command = [sys.executable, "-m", "service", *LESSON_ARGV]
    with open("/dev/full", "wb") as full:
        done = subprocess.run(command, cwd=ROOT, stdout=full, stderr=subprocess.PIPE, timeout=60)
    error = done.stderr.decode()
    assert done.returncode == 2
    assert error == "error: cannot write standard output: No space left on device\n"


@pytest.mark.parametrize("step", ["0", "-1", "nan", "inf", "abc"])
def test_a_step_that_is_not_a_positive_finite_number_is_a_usage_error(
    step: str, capsys: pytest.CaptureFixture[str]
) -> None:
    error = usage_error(["derivatives", "a * a", "a=2", "--h", step], capsys)
    assert f"the step must be a positive finite number, got '{step}'" in error


def test_a_file_that_cannot_be_written_is_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / "missing" / "sweep.json"
    assert main(["sweep", "x * x", "--vary", "x:0:1:3", "--save", str(where)]) == 2
    assert capsys.readouterr().err == f"error: cannot write {where}: No such file or directory\n"


# -- reading the arguments --------------------------------------------------------------------

# Each command that reads a file, with what it needs besides, and the value it prints for x = 2.
FILE_COMMANDS = {
    "eval": ([], lambda document: document["value"]),
    "derivatives": ([], lambda document: document["value"]),
    "sweep": (["--point", "x=2"], lambda document: document["value"][0]),
}


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The message of a usage error, which exits with status 2."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "' -" not in err  # no argument shows a space the command line did not give
    return err


@pytest.mark.parametrize("command", FILE_COMMANDS)
@pytest.mark.parametrize(
    "spelling", [["-f", "{}"], ["--file", "{}"], ["--file={}"], ["--fi", "{}"]]
)
@pytest.mark.parametrize("name", ["program.py", "-program.py", "-"])
def test_a_program_file_in_every_spelling(
    command: str,
    spelling: list[str],
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    program = b"y = x * 3\n"
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(program)  # `-` is standard input rather than this file
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(program), encoding="utf-8"))
    arguments, value = FILE_COMMANDS[command]
    argv = [command, *(part.format(name) for part in spelling), *arguments]
    status, document, _ = run(argv if command == "sweep" else [*argv, "x=2"], capsys)
    assert status == 0
    assert value(document) == 6.0


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_a_dash_in_the_expressions_place_reads_standard_input(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    program = b"# read from a pipe\ny = x * 3\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(program), encoding="utf-8"))
    arguments, value = FILE_COMMANDS[command]
    argv = [command, "-", *arguments]
    status, document, _ = run(argv if command == "sweep" else [*argv, "x=2"], capsys)
    assert status == 0
    assert value(document) == 6.0


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (["-a*b", "a=1", "b=2"], -2.0),
        (["-a", "a=1"], -1.0),
        (["-1"], -1.0),
        (["--indent", "0", "-a", "a=1"], -1.0),
        (["-hx", "hx=2"], -2.0),  # -h takes no value: this is not the help
        (["--", "-f*x", "f=2", "x=3"], -6.0),  # after --, -f is an expression, not a file
        (["-f*x", "f=2", "x=3"], -6.0),  # and before it: a short option takes no attached value
        (["-fee*2", "fee=3"], -6.0),
    ],
)
def test_an_expression_starting_with_a_minus_sign_is_not_an_option(
    argv: list[str], value: float, capsys: pytest.CaptureFixture[str]
) -> None:
    status, document, _ = run(["eval", *argv], capsys)
    assert status == 0
    assert document["value"] == value


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "a*b", "a=1", "a=2", "b=3"], "error: a is bound more than once; bind it once"),
        (["derivatives", "a", "a=1", "a =2"], "error: a is bound more than once; bind it once"),
        (
            ["sweep", "x*y", "--point", "x=1,x=2,y=2"],
            "argument --point: x is bound more than once; bind it once",
        ),
    ],
)
def test_a_name_bound_twice_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # As the HTTP API refuses a key given twice, rather than keep one of the values silently.
    assert message in usage_error(argv, capsys)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "x", "x=1", "-v"], "error: unrecognized arguments: -v\n"),
        (["eval", "x", "x=1", "-1"], "error: unrecognized arguments: -1\n"),
        (["eval", "-f", "program.py", "-a"], "error: unrecognized arguments: -a\n"),
        (
            ["eval", "x", "x=1", "--outptu", "y"],
            "error: unrecognized arguments: --outptu; did you mean --output?\n",
        ),
        (["eval", "--f", "x"], "error: ambiguous option: --f could match --file,"),
    ],
)
def test_an_unknown_option_is_reported_with_the_commands_usage(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "program.py").write_text("y = x * 3\n")
    err = usage_error(argv, capsys)
    assert err.startswith(f"usage: autograd-service {argv[0]} ")
    assert message in err
    assert "NAME=NUMBER, got" not in err


@pytest.mark.parametrize(("expression", "at_byte"), [(b"\xff", 0), (b"a + \xe9", 4)])
def test_an_expression_that_is_not_utf8_is_a_usage_error(
    expression: bytes, at_byte: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # Python hands the bytes of the command line over as lone surrogates (os.fsdecode).
    err = usage_error(["eval", os.fsdecode(expression), "a=1"], capsys)
    byte = expression[at_byte]
    assert f"error: the expression is not UTF-8 text: byte 0x{byte:02x} at byte {at_byte}\n" in err
    assert "\\udc" not in err


@pytest.mark.parametrize(
    "value", ["1_000", "\u0661", "0x10", "1e", "1.5.2", "", "--1", "1 000", "\u00b2"]
)
def test_a_binding_that_is_not_a_number_as_the_api_writes_one_is_the_cores_refusal(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The text, as the HTTP API refuses the same text given as a JSON string.
    status, printed, _ = run(["eval", "x", f"x={value}"], capsys)
    assert status == 2
    body = {"expression": "x", "bindings": {"x": value}}
    answered = make_app().test_client().post("/v1/gradients", json=body).get_json()
    assert printed == {key: answered[key] for key in printed}
    assert printed["type"].endswith("/invalid-binding")


@pytest.mark.parametrize(
    ("value", "number"),
    [
        ("2", 2.0),
        ("-1.5", -1.5),
        ("+2", 2.0),
        (".5", 0.5),
        ("2.", 2.0),
        ("1E-3", 0.001),
        (" 4 ", 4.0),
    ],
)
def test_a_binding_is_a_number_as_the_api_writes_one(
    value: str, number: float, capsys: pytest.CaptureFixture[str]
) -> None:
    status, document, _ = run(["eval", "x", f"x={value}"], capsys)
    assert status == 0
    assert document["value"] == number


@pytest.mark.parametrize("value", ["inf", "-Infinity", "NaN", "1e400"])
def test_a_binding_that_is_not_finite_is_the_cores_refusal(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, printed, _ = run(["eval", "x", f"x={value}"], capsys)
    assert status == 2
    assert printed["type"].endswith("/invalid-binding")
    if value == "1e400":  # said as the HTTP API says it of the JSON number
        assert printed["detail"].endswith("not 1e400, which overflows a 64-bit float")


@pytest.mark.parametrize("indent", ["1000", "17", "-1", "1_0", "\u0663"])
def test_an_indent_out_of_bounds_is_a_usage_error(
    indent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = usage_error(["eval", "x", "x=1", "--indent", indent], capsys)
    assert f"the indent must be a whole number from 0 to 16, got {indent!r}" in err


def test_the_largest_indent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "x", "x=1", "--indent", "16"]) == 0
    assert '\n                "expression": "x",' in capsys.readouterr().out


def test_an_empty_file_name_to_save_to_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(["sweep", "x * x", "--vary", "x:0:1:3", "--save", ""], capsys)
    assert "error: argument --save: the file name is empty\n" in err


def test_sweep_without_vary_or_point_shows_the_sweeps_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(["sweep", "x * x"], capsys)
    assert err.startswith("usage: autograd-service sweep ")
    assert "error: sweep takes either --vary (once or twice) or --point\n" in err


def test_a_file_that_is_not_utf8_shows_the_commands_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "program.py"
    program.write_bytes(b"y = x \xff 3\n")
    err = usage_error(["derivatives", "-f", str(program)], capsys)
    assert err.startswith("usage: autograd-service derivatives ")
    assert f"error: {program} is not UTF-8 text: byte 0xff at byte 6\n" in err


@pytest.mark.parametrize("command", ["eval", "derivatives", "sweep"])
def test_the_services_settings_hold_in_the_cli(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What the service would refuse under AUTOGRAD_* is refused here too.
    monkeypatch.setenv("AUTOGRAD_MAX_STATEMENTS", "2")
    argv = [command, "a = x; b = a; c = b"]
    argv += ["--vary", "x:0:1:3"] if command == "sweep" else ["x=1"]
    status, problem, _ = run(argv, capsys)
    assert status == 2
    assert (problem["limit"], problem["maximum"]) == ("max_statements", 2)


def test_a_misspelt_setting_stops_the_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AUTOGRAD_MAX_STATMENTS", "2")
    assert main(["eval", "a", "a=1"]) == 2
    assert "did you mean AUTOGRAD_MAX_STATEMENTS?" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("variable", "value"),
    [("AUTOGRAD_REQUEST_BUDGET", "NaN"), ("AUTOGRAD_LOG_LEVEL", "chatty"),
     ("AUTOGRAD_PICTURE_RATE", "0"), ("AUTOGRAD_CACHE_SIZE", "-1")],
)  # fmt: skip
def test_a_setting_the_server_refuses_stops_the_cli_too(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["eval", "a", "a=1"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {variable} must be")
