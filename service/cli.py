"""Command line: `autograd-service eval "(a + b) * c" a=2 b=-3 c=10` prints the document;
`autograd-service derivatives "(a + b) * c" a=2 b=-3 c=10` each derivative three ways.

`python -m service` is the same program. A program can be read from a file:
`autograd-service eval -f program.py [name=value ...]`, where `-f -` (or `-` in the
expression's place) reads standard input. A
refusal prints the problem document the HTTP API answers with, so a script handles both the same
way.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from flask import Config

from service.api.config import (
    DEFAULTS,
    ENVIRONMENT_PREFIX,
    ConfigurationError,
    check_settings,
    check_variables,
    limits_from,
    symbolic_limits,
)
from service.api.schemas import IDENTIFIER_PATTERN
from service.derivatives import Differentiator, SymbolicLimits
from service.errors import AutogradError, line_feeds
from service.evaluator import DEFAULT_GRANULARITY, GRANULARITIES, Evaluator
from service.i18n import _
from service.kinds import core_problem
from service.limits import Limits
from service.numbers import NonFiniteNumber
from service.pictures import GRAPH_FORMATS, PLOT_FORMATS, draw, plot
from service.sweep import Axis, at_bindings, caption, sweep, to_json

PROGRAM = "autograd-service"  # the console script pyproject.toml installs
MAX_INDENT = 16  # json.dumps writes the indent on every line: a huge one would run for long

# A number as the HTTP API's JSON and the language write it: ASCII digits, a sign, a point, an
# exponent; not float()'s `1_000` or other scripts' digits. NaN and infinity are read, to be
# refused by the core by the binding's name as the HTTP API refuses JSON's `NaN` and `Infinity`.
_NUMBER = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?|inf|infinity|nan)",
    re.ASCII | re.IGNORECASE,
)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_JSON_WHITESPACE = " \t\n\r"


def _written(form: re.Pattern[str], text: str) -> str:
    """`text` without the space around it, when it has the number `form`; else a ValueError."""
    number = text.strip(_JSON_WHITESPACE)
    if not form.fullmatch(number):
        raise ValueError(text)
    return number


def _number(text: str) -> float:
    """`text` as a number; a ValueError for anything but the forms of `_NUMBER`."""
    return float(_written(_NUMBER, text))


def _integer(text: str) -> int:
    """`text` as a whole number in ASCII digits; a ValueError for anything else."""
    return int(_written(_INTEGER, text))


def _binding(text: str) -> tuple[str, float | NonFiniteNumber | str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, got {text!r}")
    try:
        number = _number(value)
    except ValueError:  # `a=abc`: the core refuses it, as the HTTP API refuses the string
        return name.strip(), value
    if math.isinf(number) and "inf" not in value.lower():
        # `1e400`: refused by the core as the HTTP API refuses the JSON number, saying why
        return name.strip(), NonFiniteNumber(value.strip(_JSON_WHITESPACE))
    return name.strip(), number


def _name(text: str) -> str:
    """`--output`: a name, as the HTTP API's `output` is one."""
    if not re.fullmatch(IDENTIFIER_PATTERN, text):
        raise argparse.ArgumentTypeError(
            f"expected a name (a letter or _, then letters, digits or _), got {text!r}"
        )
    return text


def _bindings(texts: Sequence[str]) -> dict[str, float | NonFiniteNumber | str]:
    """Each NAME=NUMBER read; a name bound twice is refused, as the HTTP API refuses a key given
    twice, rather than one of its values silently kept."""
    bindings: dict[str, float | NonFiniteNumber | str] = {}
    for text in texts:
        name, value = _binding(text)
        if name in bindings:
            raise argparse.ArgumentTypeError(
                _("{name} is bound more than once; bind it once", name=name)
            )
        bindings[name] = value
    return bindings


def _step(text: str) -> float:
    """The step of the difference quotients: a positive finite number, as the API takes."""
    try:
        step = _number(text)
    except ValueError:
        step = math.nan
    if not (math.isfinite(step) and step > 0):
        raise argparse.ArgumentTypeError(f"the step must be a positive finite number, got {text!r}")
    return step


def _indent(text: str) -> int:
    try:
        indent = _integer(text)
    except ValueError:
        indent = -1
    if not 0 <= indent <= MAX_INDENT:
        raise argparse.ArgumentTypeError(
            _(
                "the indent must be a whole number from 0 to {maximum}, got {text}",
                maximum=MAX_INDENT,
                text=repr(text),
            )
        )
    return indent


def _file_name(text: str) -> Path:
    if not text:  # Path("") is the current directory
        raise argparse.ArgumentTypeError(_("the file name is empty"))
    return Path(text)


def _add_source_arguments(
    command: argparse.ArgumentParser, example: str, bindings_help: str | None = None
) -> None:
    """What every command reads: the expression or a program (given, or read from a file), the
    values of its inputs, and which name is the output."""
    # The positional arguments are read by _parse_arguments, not argparse; they are declared for
    # the usage and the help.
    command.add_argument(
        "expression",
        nargs="?",
        help=f'for example "{example}"; - reads it from standard input; leave out with --file',
    )
    command.add_argument("bindings", nargs="*", metavar="NAME=NUMBER", help=bindings_help)
    command.add_argument(
        "-f",
        "--file",
        type=argparse.FileType("rb"),  # bytes, decoded below: `-` is then standard input's too
        help="read the expression or program from this file (- for standard input)",
    )
    command.add_argument(
        "--output", type=_name, help="the program's name whose value is the output"
    )


def _add_indent_argument(command: argparse.ArgumentParser, default: int) -> None:
    command.add_argument(
        "--indent",
        type=_indent,
        default=default,
        help=f"JSON indent (0: one line; at most {MAX_INDENT})",
    )


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The program's parser, and each command's by its name."""
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
    return parser, commands.choices


def _settings() -> tuple[Limits, SymbolicLimits]:
    """The limits the server applies: its defaults, then the `AUTOGRAD_*` variables, so what the
    service would refuse is refused here too."""
    config = Config(os.getcwd(), DEFAULTS)
    check_variables(os.environ)
    config.from_prefixed_env(ENVIRONMENT_PREFIX)
    check_settings(config)  # those only the server uses too: one refused there is refused here
    return limits_from(config), symbolic_limits(config)


def _run(args: argparse.Namespace, limits: Limits, symbolic: SymbolicLimits) -> dict[str, Any]:
    evaluator = Evaluator(limits)
    if args.command == "derivatives":
        return Differentiator(evaluator, symbolic).differentiate(
            args.expression, args.bindings, args.variables, args.h, args.output
        )
    return evaluator.evaluate(args.expression, args.bindings, args.granularity, args.output)


def _parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The command's options as argparse reads them; the expression or file, and the bindings."""
    parser, commands = build_parser()
    if not argv or argv[0] not in commands:
        parser.parse_args(argv)  # the help, or argparse's error naming the commands: it exits
    command = commands[argv[0]]
    options, positionals = _split(command, argv[1:])
    args, unknown = command.parse_known_args(options)
    # argparse reads an unknown option like a negative number (`-1`) as a positional argument.
    unknown += [arg for arg in (args.expression, *(args.bindings or ())) if arg is not None]
    if unknown:
        command.error(_unrecognized(unknown, command))
    args.command = argv[0]
    if args.file is not None:  # with a file, every positional argument is a binding
        args.expression = _read(args.file, command)
    elif positionals and positionals[0] == "-":  # standard input, as `-f -` reads it
        positionals.pop(0)
        args.expression = _read(sys.stdin.buffer, command)
    elif positionals:
        args.expression = _argument_text(positionals.pop(0), "the expression", command)
    else:
        command.error("give an expression, or a program with --file")
    try:
        args.bindings = _bindings(positionals)
    except argparse.ArgumentTypeError as error:
        command.error(str(error))
    if args.command == "sweep" and (args.vary is None) == (args.point is None):
        command.error("sweep takes either --vary (once or twice) or --point")
    return args


def _split(command: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """`argv`'s options, for argparse, and its positional arguments, in order.

    The expression may start with `-` (`-a*b`, `-a`), which argparse would take for an option, so
    the positional arguments are told apart here: an argument naming none of the command's options
    is the expression when it comes first, with no --file; otherwise one starting with `-` is an
    unknown option, left to argparse to report. An option's value starting with `-` is attached
    to it (`--file=-`, `-f-`), where argparse reads it as the value rather than as an option."""
    known = command._option_string_actions  # every option string of the command's, and --help
    options: list[str] = []
    positionals: list[str] = []
    leading_dash = False  # the first positional argument starts with `-`
    reads_file = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":  # what follows is positional, `-f*x` too
            positionals += argv[i:]
            break
        found = _option(arg, known)
        if found is None:
            if arg.startswith("-") and len(arg) > 1 and (positionals or arg.startswith("--")):
                options.append(arg)
            else:
                leading_dash |= not positionals and arg.startswith("-")
                positionals.append(arg)
            continue
        action, attached = found
        reads_file |= action.dest == "file"
        if action.nargs == 0 or attached or i == len(argv) or _option(argv[i], known) is not None:
            options.append(arg)  # without a value, argparse says it is missing
            continue
        value = argv[i]
        i += 1
        if value.startswith("-"):
            options.append(f"{arg}={value}" if arg.startswith("--") else f"{arg}{value}")
        else:
            options += [arg, value]
    if leading_dash and reads_file:
        options.append(positionals.pop(0))  # not a binding either: an unknown option
    return options, positionals


def _option(arg: str, known: dict[str, argparse.Action]) -> tuple[argparse.Action, bool] | None:
    """The option `arg` names as argparse reads it, and whether its value is attached: exactly,
    by a unique abbreviation of a long option, or with `=VALUE`. None for anything else, as
    `-a*b`."""
    if arg.startswith("--"):
        name, equals, _value = arg.partition("=")
        if name in known:
            return known[name], bool(equals)
        matches = {known[o] for o in known if o.startswith("--") and o.startswith(name)}
        return (matches.pop(), bool(equals)) if len(matches) == 1 else None
    # A short option is only ever itself (`-f FILE`): `-fee*2` and `-hx` are expressions, as a
    # negative expression may start with any letter.
    return (known[arg], False) if arg in known else None


def _unrecognized(unknown: list[str], command: argparse.ArgumentParser) -> str:
    """argparse's report of unknown options, with the option most like the first one."""
    arguments = " ".join(unknown)
    options = [o for o in command._option_string_actions if o.startswith("--")]
    close = difflib.get_close_matches(unknown[0].partition("=")[0], options, n=1)
    if close:
        return _(
            "unrecognized arguments: {arguments}; did you mean {option}?",
            arguments=arguments,
            option=close[0],
        )
    return _("unrecognized arguments: {arguments}", arguments=arguments)


def _argument_text(arg: str, what: str, parser: argparse.ArgumentParser) -> str:
    """An argument as given, or a usage error for one that is not UTF-8: Python hands such bytes
    over as lone surrogates (U+DC80 to U+DCFF), which would otherwise be reported as characters."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        try:
            data = os.fsencode(arg)  # the bytes given
        except UnicodeEncodeError:  # a surrogate no byte stands for: the core refuses it
            return arg
        return _utf8(data, what, parser)
    return arg


def _read(file: BinaryIO, parser: argparse.ArgumentParser) -> str:
    """A file's text as UTF-8, without the byte-order mark some editors write first."""
    with file:
        source = file.read()
    return _utf8(source, "standard input" if file is sys.stdin.buffer else file.name, parser)


def _utf8(source: bytes, where: str, parser: argparse.ArgumentParser) -> str:
    try:
        return source.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        parser.error(
            f"{where} is not UTF-8 text: byte 0x{source[error.start]:02x} at byte {error.start}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_arguments(sys.argv[1:] if argv is None else list(argv))
    indent = args.indent or None
    try:
        limits, symbolic = _settings()
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        if args.command == "sweep":
            return run_sweep(args, limits)
        document = _run(args, limits, symbolic)
        _tell_warnings(document, args.expression)
        if args.command == "eval" and args.format != "json":
            return write(draw(document, args.format, limits), None)
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


# Characters of a long line shown around its fault: a 20 MB line would otherwise be echoed whole.
EXCERPT = 100


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
    column = start - line_start
    width = min(end, line_start + len(line)) - start
    if len(line) > EXCERPT:  # a window on the fault, with an ellipsis where the line goes on
        first = max(0, min(column - EXCERPT // 3, len(line) - EXCERPT))
        before = "…" if first else ""
        after = "…" if first + EXCERPT < len(line) else ""
        column = column - first + len(before)
        line = before + line[first : first + EXCERPT] + after
        width = min(width, len(line) - len(after) - column)
    # The message names an invisible character; shown as one, the mark would point at nothing.
    line = "".join(char if char.isprintable() or char == "\t" else "\N{REPLACEMENT CHARACTER}"
                   for char in line)  # fmt: skip
    # A tab before the fault stays a tab, so the marks line up however wide the terminal's tabs are.
    indent = "".join(char if char == "\t" else " " for char in line[:column])
    underline = indent + "^" * max(1, width)
    print(f"  {line}\n  {underline}", file=sys.stderr)


def _print(text: str) -> int:
    return _stdout(f"{text}\n".encode())


def _stdout(data: bytes) -> int:
    """Writes `data` to standard output; a reader that stopped early (`| head`, `| true`) ends
    the program quietly."""
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        # Python would report the pipe again when it flushes stdout at exit: point stdout at
        # /dev/null first. 141 is what a shell reports for a program ended by SIGPIPE.
        _discard_stdout()
        return 141
    except OSError as error:  # a full disk, a closed descriptor
        _discard_stdout()
        print(f"error: cannot write standard output: {error.strerror}", file=sys.stderr)
        return 2
    return 0


def _discard_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


# -- python -m service sweep ------------------------------------------------------------------


def _axis(text: str) -> Axis:
    parts = text.split(":")
    try:
        name, start, stop, points = parts
        return Axis(name, _number(start), _number(stop), _integer(points))
    except ValueError:
        message = f"expected NAME:FROM:TO:POINTS, such as x:-3:3:200, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def _point(text: str) -> dict[str, float | NonFiniteNumber | str]:
    return _bindings([part for part in text.split(",") if part.strip()])


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
    sweep.add_argument("--save", type=_file_name, metavar="FILE",
                       help="write the answer here instead of to standard output")  # fmt: skip
    _add_indent_argument(sweep, 0)


def run_sweep(args: argparse.Namespace, limits: Limits) -> int:
    evaluator = Evaluator(limits)
    bindings = args.bindings
    document = sweep(evaluator, args.expression, bindings, args.vary, args.point, args.output)
    _tell_warnings(document, args.expression)
    if args.format == "json":
        if args.indent:
            text = json.dumps(json.loads(to_json(document)), indent=args.indent)
            return write(text.encode() + b"\n", args.save)
        return write(to_json(document) + b"\n", args.save)
    at, marked = at_bindings(evaluator, args.expression, bindings, args.output)
    title = caption(evaluator, args.expression, args.output)
    picture = plot(document, at, marked, args.format, args.point is not None, title)
    return write(picture, args.save)


def write(data: bytes, output: Path | None) -> int:
    if output is None:
        return _stdout(data)
    try:
        output.write_bytes(data)
    except OSError as error:
        print(f"error: cannot write {output}: {error.strerror}", file=sys.stderr)
        return 2
    return 0
