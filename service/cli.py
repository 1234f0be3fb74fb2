"""Command line: `autograd-service eval "(a + b) * c" a=2 b=-3 c=10` prints the document;
`autograd-service derivatives "(a + b) * c" a=2 b=-3 c=10` each derivative three ways.

`python -m service` is the same program. A program can be read from a file:
`autograd-service eval -f program.py [name=value ...]`, where `-f -` reads standard input. A
refusal prints the problem document the HTTP API answers with, so a script handles both the same
way.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from service.derivatives import Differentiator
from service.errors import AutogradError, line_feeds
from service.evaluator import DEFAULT_GRANULARITY, GRANULARITIES, Evaluator
from service.kinds import core_problem
from service.limits import DEFAULT_LIMITS
from service.pictures import GRAPH_FORMATS, PLOT_FORMATS, draw, plot
from service.sweep import Axis, at_bindings, caption, sweep, to_json

PROGRAM = "autograd-service"  # the console script pyproject.toml installs


def _binding(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, got {text!r}")
    try:
        return name.strip(), float(value)
    except ValueError:
        message = f"{name} must be bound to a number, got {value!r}"
        raise argparse.ArgumentTypeError(message) from None


def _step(text: str) -> float:
    """The step of the difference quotients: a positive finite number, as the API takes."""
    try:
        step = float(text)
    except ValueError:
        step = math.nan
    if not (math.isfinite(step) and step > 0):
        raise argparse.ArgumentTypeError(
            f"the step must be a positive finite number, got {text.strip()!r}"
        )
    return step


def _add_source_arguments(
    command: argparse.ArgumentParser, example: str, bindings_help: str | None = None
) -> None:
    """What every command reads: the expression or a program (given, or read from a file), the
    values of its inputs, and which name is the output."""
    command.add_argument(
        "expression", nargs="?", help=f'for example "{example}"; leave out with --file'
    )
    command.add_argument(
        "bindings", nargs="*", type=_binding, metavar="NAME=NUMBER", help=bindings_help
    )
    command.add_argument(
        "-f",
        "--file",
        type=argparse.FileType("rb"),  # bytes, decoded below: `-` is then standard input's too
        help="read the expression or program from this file (- for standard input)",
    )
    command.add_argument("--output", help="the program's name whose value is the output")


def _add_indent_argument(command: argparse.ArgumentParser, default: int) -> None:
    command.add_argument("--indent", type=int, default=default, help="JSON indent (0: one line)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Forward pass, gradients and backward schedule."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    evaluate = commands.add_parser("eval", help="evaluate an expression and print the document")
    _add_source_arguments(evaluate, "(a + b) * c")
    evaluate.add_argument("--granularity", choices=GRANULARITIES, default=DEFAULT_GRANULARITY)
    _add_indent_argument(evaluate, 2)
    evaluate.add_argument("--format", choices=("json", *GRAPH_FORMATS), default="json",
                          help="the document, or its graph drawn (svg needs Graphviz)")  # fmt: skip
    differentiate = commands.add_parser(
        "derivatives", help="each derivative three ways: reverse mode, symbolic and numeric"
    )
    _add_source_arguments(differentiate, "(a + b) * c")
    differentiate.add_argument(
        "--variable",
        dest="variables",
        action="append",
        metavar="NAME",
        help="differentiate by NAME only (repeat for more); all variables by default",
    )
    differentiate.add_argument(
        "--h", type=_step, default=None, help="step of the difference quotients"
    )
    _add_indent_argument(differentiate, 2)
    add_sweep_command(commands)
    return parser


def _run(args: argparse.Namespace) -> dict[str, Any]:
    bindings = dict(args.bindings)
    if args.command == "derivatives":
        return Differentiator().differentiate(
            args.expression, bindings, args.variables, args.h, args.output
        )
    return Evaluator().evaluate(args.expression, bindings, args.granularity, args.output)


def _parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    # `-a*b` would be taken for an option. argparse reads any argument containing a space as a
    # value, so such an expression gets a leading space while parsing, taken off afterwards.
    protected = []
    for i, arg in enumerate(argv):
        is_option = arg in ("-h", "-f") or (i > 0 and argv[i - 1] == "-f")  # `-f -` is stdin
        keep = is_option or not arg.startswith("-") or arg.startswith("--")
        protected.append(arg if keep else f" {arg}")
    parser = build_parser()
    # Bindings may also follow an option (`eval "a*b" --granularity primitive a=2 b=3`), which
    # argparse leaves over once the positional list has ended.
    args, rest = parser.parse_known_args(protected)
    try:
        args.bindings += [_binding(arg) for arg in rest]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    if getattr(args, "expression", None) is not None and args.expression not in argv:
        args.expression = args.expression[1:]
    if getattr(args, "command", None) in ("eval", "sweep", "derivatives"):
        if args.file is not None:
            # With a file, every positional argument is a binding.
            if args.expression is not None:
                try:
                    args.bindings.insert(0, _binding(args.expression))
                except argparse.ArgumentTypeError as error:
                    parser.error(str(error))
            args.expression = _read(args.file, parser)
        elif args.expression is None:
            parser.error("give an expression, or a program with --file")
    return args


def _read(file: BinaryIO, parser: argparse.ArgumentParser) -> str:
    """A file's text as UTF-8, without the byte-order mark some editors write first."""
    with file:
        source = file.read()
    try:
        return source.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        where = "standard input" if file is sys.stdin.buffer else file.name
        parser.error(
            f"{where} is not UTF-8 text: byte 0x{source[error.start]:02x} at byte {error.start}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_arguments(sys.argv[1:] if argv is None else list(argv))
    indent = args.indent or None
    try:
        if args.command == "sweep":
            return run_sweep(args)
        document = _run(args)
        _tell_warnings(document, args.expression)
        if args.command == "eval" and args.format != "json":
            return write(draw(document, args.format, DEFAULT_LIMITS.max_drawn_nodes), None)
    except AutogradError as error:
        # The problem as JSON for scripts, and for people the text with the fault underlined.
        problem = core_problem(error)
        status = _print(json.dumps(problem, indent=indent))
        position = problem.get("position")
        span = (position["start"], position["end"]) if position else None
        _tell("error", error.kind, error.message, args.expression, span)
        return status or 2
    return _print(json.dumps(document, indent=indent, allow_nan=False))


def _tell_warnings(document: dict[str, Any], source: str) -> None:
    for warning in document["warnings"]:  # for people; the document carries them too
        _tell("warning", warning["kind"], warning["message"], source, warning["span"])


def _tell(what: str, kind: str, message: str, source: str, span: Sequence[int] | None) -> None:
    """On standard error: what and where, with the line of the program at `span` underlined."""
    print(f"{what} ({kind}): {message}", file=sys.stderr)
    if span is None:
        return
    start, end = span
    text = line_feeds(source)
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line = text[line_start : None if line_end < 0 else line_end].rstrip("\r")
    width = min(end, line_start + len(line)) - start
    # A tab before the fault stays a tab, so the marks line up however wide the terminal's tabs are.
    indent = "".join(char if char == "\t" else " " for char in line[: start - line_start])
    underline = indent + "^" * max(1, width)
    print(f"  {line}\n  {underline}", file=sys.stderr)


def _print(text: str) -> int:
    """Prints `text`; a reader that stopped early (`| head`) ends the program quietly."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would report the pipe again when it flushes stdout at exit: point stdout at
        # /dev/null first. 141 is what a shell reports for a program ended by SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return 0


# -- python -m service sweep ------------------------------------------------------------------


def _axis(text: str) -> Axis:
    parts = text.split(":")
    try:
        name, start, stop, points = parts
        return Axis(name, float(start), float(stop), int(points))
    except ValueError:
        message = f"expected NAME:FROM:TO:POINTS, such as x:-3:3:200, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def _point(text: str) -> dict[str, float]:
    return dict(_binding(part) for part in text.split(",") if part.strip())


def add_sweep_command(commands: Any) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="value and gradients over a line, a grid or points; or their plot",
        description='For example: sweep "x * tanh(x)" --vary x:-3:3:200 --format svg > plot.svg',
    )
    _add_source_arguments(sweep, "x * tanh(x)", "values of the inputs that are not varied")
    sweep.add_argument("--vary", action="append", type=_axis, metavar="NAME:FROM:TO:POINTS",
                       help="an input to vary: once for a line, twice for a grid")  # fmt: skip
    sweep.add_argument("--point", action="append", type=_point, metavar="NAME=NUMBER,...",
                       help="an explicit point instead of --vary (repeat for more)")  # fmt: skip
    sweep.add_argument("--format", choices=("json", *PLOT_FORMATS), default="json")
    sweep.add_argument("--save", type=Path, metavar="FILE",
                       help="write the answer here instead of to standard output")  # fmt: skip
    _add_indent_argument(sweep, 0)


def run_sweep(args: argparse.Namespace) -> int:
    if (args.vary is None) == (args.point is None):
        build_parser().error("sweep takes either --vary (once or twice) or --point")
    evaluator = Evaluator()
    bindings = dict(args.bindings)
    document = sweep(evaluator, args.expression, bindings, args.vary, args.point, args.output)
    _tell_warnings(document, args.expression)
    if args.format == "json":
        if args.indent:
            text = json.dumps(json.loads(to_json(document)), indent=args.indent)
            return write(text.encode() + b"\n", args.save)
        return write(to_json(document) + b"\n", args.save)
    marked = at_bindings(evaluator, args.expression, bindings, args.output)
    title = caption(evaluator, args.expression, args.output)
    picture = plot(document, bindings, marked, args.format, args.point is not None, title)
    return write(picture, args.save)


def write(data: bytes, output: Path | None) -> int:
    if output is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        try:
            output.write_bytes(data)
        except OSError as error:
            print(f"error: cannot write {output}: {error.strerror}", file=sys.stderr)
            return 2
    return 0
