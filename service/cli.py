"""Command line: `autograd-service eval "(a + b) * c" a=2 b=-3 c=10` prints the document.

`python -m service` is the same program. A program can be read from a file:
`autograd-service eval -f program.py [name=value ...]`, where `-f -` reads standard input. A
refusal prints the problem document the HTTP API answers with, so a script handles both the same
way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from service.errors import AutogradError
from service.evaluator import DEFAULT_GRANULARITY, GRANULARITIES, Evaluator
from service.kinds import core_problem

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Forward pass, gradients and backward schedule."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    evaluate = commands.add_parser("eval", help="evaluate an expression and print the document")
    evaluate.add_argument(
        "expression", nargs="?", help='for example "(a + b) * c"; leave out with --file'
    )
    evaluate.add_argument("bindings", nargs="*", type=_binding, metavar="NAME=NUMBER")
    evaluate.add_argument(
        "-f",
        "--file",
        type=argparse.FileType("r", encoding="utf-8"),
        help="read the expression or program from this file (- for standard input)",
    )
    evaluate.add_argument("--output", help="the program's name whose value is the output")
    evaluate.add_argument("--granularity", choices=GRANULARITIES, default=DEFAULT_GRANULARITY)
    evaluate.add_argument("--indent", type=int, default=2, help="JSON indent (0: one line)")
    return parser


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
    if getattr(args, "command", None) == "eval":
        if args.file is not None:
            # With a file, every positional argument is a binding.
            if args.expression is not None:
                try:
                    args.bindings.insert(0, _binding(args.expression))
                except argparse.ArgumentTypeError as error:
                    parser.error(str(error))
            args.expression = args.file.read()
            args.file.close()
        elif args.expression is None:
            parser.error("give an expression, or a program with --file")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_arguments(sys.argv[1:] if argv is None else list(argv))
    indent = args.indent or None
    try:
        document = Evaluator().evaluate(
            args.expression, dict(args.bindings), args.granularity, args.output
        )
    except AutogradError as error:
        # The problem as JSON for scripts, and for people the text with the fault underlined.
        problem = core_problem(error)
        status = _print(json.dumps(problem, indent=indent))
        print(f"error ({error.kind}): {error.message}", file=sys.stderr)
        position = problem.get("position")
        if position:
            # the line at fault, for a program of several lines
            start, end = position["start"], position["end"]
            line_start = args.expression.rfind("\n", 0, start) + 1
            line_end = args.expression.find("\n", start)
            line = args.expression[line_start : None if line_end < 0 else line_end]
            width = min(end, line_start + len(line)) - start
            underline = " " * (start - line_start) + "^" * max(1, width)
            print(f"  {line}\n  {underline}", file=sys.stderr)
        return status or 2
    return _print(json.dumps(document, indent=indent, allow_nan=False))


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
