"""Command line: `python -m service eval "(a + b) * c" a=2 b=-3 c=10` prints the document.

A program can be read from a file: `python -m service eval -f program.py [name=value ...]`, where
`-f -` reads standard input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from service.errors import AutogradError
from service.evaluator import DEFAULT_GRANULARITY, GRANULARITIES, Evaluator


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
        prog="python -m service", description="Forward pass, gradients and backward schedule."
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
    try:
        document = Evaluator().evaluate(
            args.expression, dict(args.bindings), args.granularity, args.output
        )
    except AutogradError as error:
        # The problem as JSON for scripts, and for people the text with the fault underlined.
        print(json.dumps({"error": error.as_dict()}, indent=args.indent or None))
        print(f"error ({error.kind}): {error.message}", file=sys.stderr)
        span = getattr(error, "span", None)
        if span:
            # the line at fault, for a program of several lines
            start, end = span
            line_start = args.expression.rfind("\n", 0, start) + 1
            line_end = args.expression.find("\n", start)
            line = args.expression[line_start : None if line_end < 0 else line_end]
            width = min(end, line_start + len(line)) - start
            underline = " " * (start - line_start) + "^" * max(1, width)
            print(f"  {line}\n  {underline}", file=sys.stderr)
        return 2
    print(json.dumps(document, indent=args.indent or None, allow_nan=False))
    return 0
