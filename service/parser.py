"""Our own grammar for untrusted program text: tokens, statements, an operator-precedence parser.

A program is statements separated by newlines or `;`: assignments (`name = expr`, `name += expr`,
`a, b = x, y`), input declarations (`name = Value(2.0)`), `name.backward()`, and bare expressions.
A plain expression is a one-statement program. Names are shared: a later use of an assigned name
is the same tree node, so the tree is a DAG, exactly as Python's objects are.

Nothing here evaluates user text as code. The parser is iterative (an explicit operator stack, as in
Dijkstra's shunting-yard), so no input can exhaust Python's recursion limit, and every bound in
`Limits` is checked while reading, before any graph is built. The work is linear in the text.
"""

from __future__ import annotations

import bisect
import keyword
import math
import operator
import re
import unicodedata
from collections.abc import Callable, Collection, Iterator
from functools import cached_property
from typing import TYPE_CHECKING

from service.errors import (
    DomainError,
    ExpressionError,
    LimitExceeded,
    Span,
    line_column,
    line_feeds,
)
from service.i18n import Message, _
from service.limits import DEFAULT_LIMITS, Limits
from service.operations import (
    BY_NAME,
    FUNCTIONS,
    INFIX,
    PREFIX,
    PREFIX_PRECEDENCE,
)

if TYPE_CHECKING:
    import sympy

# -- the syntax tree ------------------------------------------------------------------------


class Node:
    """One node of the syntax tree: a variable, a constant, or an operation on `args`."""

    __slots__ = ("args", "assigned", "exact", "exponent", "kind", "name", "op", "span", "value")

    def __init__(
        self,
        kind: str,
        span: Span,
        *,
        op: str = "",
        args: tuple[Node, ...] = (),
        name: str = "",
        value: float = 0.0,
        exact: int | None = None,
        exponent: float | None = None,
    ) -> None:
        self.kind = kind  # "variable", "constant" or "operation"
        self.span = span  # [start, end) in the source text
        self.op = op  # for operations: a name in service.operations.BY_NAME
        self.args = args  # operands in the order written (the exponent of `**` is not one)
        self.name = name  # for variables: the input's name
        self.value = value  # for constants: the folded value
        # For constants Python keeps as integers (`10**17 + 1`): the exact value, which folds
        # exactly, as Python's integers do; `value` is the float every later use sees.
        self.exact = exact
        self.exponent = exponent  # for `**`: the constant exponent
        self.assigned: str | None = None  # the name the assignment that produced it gave it

    @property
    def is_constant(self) -> bool:
        return self.kind == "constant"

    def __repr__(self) -> str:
        if self.kind == "variable":
            return self.name
        if self.kind == "constant":
            return repr(self.value)
        return f"{self.op}{list(self.args)}"


def postorder(root: Node) -> list[Node]:
    """Every node below `root` once, operands before the operation that uses them, left to right."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded or not node.args:
            if id(node) not in seen:
                seen.add(id(node))
                order.append(node)
        elif id(node) not in seen:
            stack.append((node, True))
            stack.extend((arg, False) for arg in reversed(node.args))
    return order


class ParsedExpression:
    """A parsed program: the output's syntax tree (a DAG), its inputs, the sympy form on demand."""

    def __init__(
        self,
        text: str,
        root: Node,
        variables: tuple[str, ...],
        node_count: int,
        *,
        defaults: dict[str, float] | None = None,
        output: str | None = None,
        unused: tuple[tuple[str | None, Span], ...] = (),
        statements: int = 1,
        mentioned: tuple[str, ...] = (),
        assigned: tuple[str, ...] = (),
        bound: dict[str, Node] | None = None,
    ) -> None:
        self.text = text
        self.root = root  # the output's node
        self.variables = variables  # the inputs the output depends on, in order of first use
        self.node_count = node_count  # nodes in the primitive graph micrograd would build
        self.defaults = defaults or {}  # declared inputs (`x = Value(2.0)`) and their values
        self.output = output  # the output's name, when it has one
        # (name, statement span) of the statements the output does not use, in the order
        # written: assignments, and expressions written as statements (their name None)
        self.unused = unused
        self.statements = statements
        # Every input of the program, used by the output or not, in the order it first mentions
        # them: the names it reads without assigning them, and those it declares.
        self.mentioned = mentioned or variables
        self.assigned = frozenset(assigned)  # names the program assigns: never inputs
        # What each assigned name refers to once the program has run: its last assignment, as
        # in Python. Earlier nodes given the same name still carry it as their `Node.assigned`.
        self.bound = bound or {}

    def postorder(self) -> list[Node]:
        """Every tree node once, operands before the operation that uses them, left to right."""
        return self._postorder

    @cached_property
    def _postorder(self) -> list[Node]:
        return postorder(self.root)

    def first_use(self, names: Collection[str]) -> Span | None:
        """Where the output first reads any of the inputs `names` in the text, in one pass over
        the tree: the name itself, not the brackets a read's span takes in (`(b)`)."""
        reads = [(node.span, node.name) for node in self.postorder() if node.name in names]
        if not reads:
            return None
        (start, end), name = min(reads)
        written = re.search(rf"(?<![A-Za-z0-9_]){name}(?![A-Za-z0-9_])", self.text[start:end])
        return (start + written.start(), start + written.end()) if written else (start, end)

    @cached_property
    def variable_set(self) -> frozenset[str]:
        """The inputs, for membership tests in time independent of their number."""
        return frozenset(self.variables)

    @cached_property
    def inputs(self) -> tuple[str, ...]:
        """Every input: the output's, in order of first use, then the program's others (declared,
        or read only by statements the output does not use), whose gradient is 0."""
        return self.variables + tuple(n for n in self.mentioned if n not in self.variable_set)

    @cached_property
    def input_set(self) -> frozenset[str]:
        """Every name a binding may give, for membership tests."""
        return frozenset(self.inputs)

    @cached_property
    def sympy(self) -> sympy.Expr:
        """The output in sympy, built from the tree (never from text)."""
        from service import symbolic

        return symbolic.from_tree(self.postorder(), self.root)


class Lines:
    """Line and column of many positions of one text, each in time independent of the text."""

    def __init__(self, text: str) -> None:
        self.newlines = [match.start() for match in re.finditer("\n", line_feeds(text))]

    def __call__(self, position: int) -> tuple[int, int]:
        before = bisect.bisect_left(self.newlines, position)
        line_start = self.newlines[before - 1] + 1 if before else 0
        return before + 1, position - line_start + 1


# -- tokens ---------------------------------------------------------------------------------


class Token:
    __slots__ = ("end", "kind", "span", "start", "text")

    def __init__(self, kind: str, text: str, span: Span) -> None:
        # "number", "name", "op", "augmented", "=", "(", ")", ",", ".", ";", "newline", "end"
        self.kind = kind
        self.text = text
        self.span = span  # [start, end) in the text: most tokens end up as a node's span
        self.start, self.end = span

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.text!r}, {self.start}, {self.end})"


# One match is one token and the space before it. The pattern finds where each token is, not
# what it is, so that one scan in C finds them all; `_KINDS` then names each by its text. The
# alternatives are tried in order: the commonest first, and where two begin alike (`*=` and `*`,
# `.5` and `.`) the longer first.
_TOKEN = re.compile(
    r"""
    ([ \t\r]*+)  # the space before a token, all of it
    (
        [A-Za-z_][A-Za-z0-9_]*  # a name
      | \*\*=|[-+*/]=  # an augmented assignment
      | \*\*|//|==  # operators of two characters
      | (?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?  # a number
      | \#[^\n]*  # a comment
      | \\\r?\n  # a backslash that ends a line continues it, as in Python
      | .|\n  # any other character: an operator, punctuation, or one no token takes
      | \Z  # the end, after the space there: else the scan would go over that space again
    )
    """,
    re.VERBOSE | re.ASCII,
)
# The kind of each token the language has but names and numbers, by its text.
_KINDS = {
    **dict.fromkeys(("+", "-", "*", "/", "^", "**"), "op"),
    **dict.fromkeys(("+=", "-=", "*=", "/=", "**="), "augmented"),
    **{punctuation: punctuation for punctuation in ("=", "==", "(", ")", ",", ";", ".")},
    "\n": "newline",
    "//": "floor division",
    "": "end",
    **dict.fromkeys(("\\\n", "\\\r\n"), "continuation"),
}
# The kind of every other token, by its first character: what is not here no token takes.
_KINDS_BY_FIRST = {
    **dict.fromkeys("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_", "name"),
    **dict.fromkeys("0123456789.", "number"),
    "#": "comment",
}

# Characters people reach for from Python or maths, with what to tell them.
_UNSUPPORTED: dict[str, Message] = {
    "'": _("strings are not part of the expression language"),
    '"': _("strings are not part of the expression language"),
    "[": _("subscripts and lists are not part of the expression language"),
    "]": _("subscripts and lists are not part of the expression language"),
    "{": _("braces are not part of the expression language"),
    "}": _("braces are not part of the expression language"),
    "<": _("comparisons are not part of the expression language"),
    ">": _("comparisons are not part of the expression language"),
    "!": _("'!' is not part of the expression language: no factorials, and no comparisons (!=)"),
    "%": _("the remainder operator {operator} is not supported", operator="%"),
    "@": _("matrix multiplication @ is not supported: every value is a scalar"),
    "&": _("bitwise operators are not supported"),
    "|": _("bitwise operators are not supported"),
    "~": _("bitwise operators are not supported"),
    ":": _("':' is not part of the expression language (no lambdas, slices or annotations)"),
    "\\": _("backslashes are not part of the expression language"),
    "`": _("backquotes are not part of the expression language"),
    "$": _("'$' is not part of the expression language"),
    "?": _("'?' is not part of the expression language"),
}


def _tokens(text: str, limits: Limits) -> tuple[list[Token], ExpressionError | None]:
    """The tokens of `text` in one scan, ending with an `end` token; and the first error in the
    text, if there is one, in place of the tokens after it.

    The parser raises that error only when it reaches it (see `_Stream`), so the first error
    reported is the first in the text, whether the parser or this scan finds it.
    """
    tokens: list[Token] = []
    append = tokens.append
    longest = limits.max_identifier_length
    error: ExpressionError | None = None
    # A byte order mark first, as an editor may save a file: Python reads past it, so do we.
    end = 1 if text.startswith("\ufeff") else 0
    for space, written in _TOKEN.findall(text, end):
        start = end + len(space)
        end = start + len(written)
        kind = _KINDS.get(written) or _KINDS_BY_FIRST.get(written[0], "bad")
        if kind == "name":
            if end - start > longest:
                error = _too_long(text, start, end, limits)
                break
        elif kind == "comment" or kind == "continuation":
            continue  # space, like the space before a token
        elif kind == "end":
            break
        elif kind == "floor division":
            message = _("floor division // is not supported; use /")
            error = ExpressionError("unsupported_syntax", message, (start, end))
            break
        elif kind == "bad":
            # First on its line: not after another token, nor inside brackets.
            depth = sum((token.kind == "(") - (token.kind == ")") for token in tokens)
            first = (not tokens or tokens[-1].kind == "newline") and depth <= 0
            error = _bad_character(text, start, first)
            break
        append(Token(kind, written, (start, end)))
    # The `end` token stands where the text ends, or where its error starts.
    stop = len(text) if error is None else error.span[0]
    append(Token("end", "", (stop, stop)))
    return tokens, error


def _too_long(text: str, start: int, end: int, limits: Limits) -> LimitExceeded:
    return LimitExceeded(
        "identifier_too_long",
        _(
            "the name starting '{start}' is {length} characters long; names have at most {maximum}",
            start=text[start : min(end, start + 16)],
            length=end - start,
            maximum=limits.max_identifier_length,
        ),
        (start, end),
        "max_identifier_length",
        limits.max_identifier_length,
    )


# Operator look-alikes from word processors and maths fonts, and what to type instead.
OPERATOR_LOOKALIKES = {"×": "*", "·": "*", "⋅": "*", "∗": "*", "÷": "/", "−": "-", "–": "-",
                       "—": "-", "‒": "-", "∕": "/"}  # fmt: skip

# Letters that look like ASCII but are not, and that NFKC does not map: the usual homoglyphs.
_LOOKALIKES = {
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y", "і": "i",  # Cyrillic
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
    "С": "C", "Т": "T", "Х": "X",
    "α": "a", "ο": "o", "ν": "v", "Α": "A", "Β": "B", "Ε": "E", "Ο": "O",  # Greek
}  # fmt: skip


def _closing_bracket(text: str, start: int) -> int:
    """Where the bracket open at `start` closes, past nested brackets and quoted strings (which
    the language has not, but micrograd's `Value(2.0, label='a')` has); never closed, the end of
    the line. Only for pointing at a refusal: the tokens read the text otherwise."""
    depth, quote = 0, ""
    for position in range(start, len(text)):
        char = text[position]
        if quote:
            quote = "" if char in (quote, "\n") else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            if not depth:
                return position
            depth -= 1
    line_end = text.find("\n", start)
    return len(text) if line_end < 0 else line_end


def _bad_character(text: str, pos: int, first: bool = False) -> ExpressionError:
    """The refusal of the character at `pos`; `first`: it starts a statement."""
    char = text[pos]
    span = (pos, pos + 1)
    if char == "\\":
        line_end = text.find("\n", pos)
        rest = text[pos + 1 : len(text) if line_end < 0 else line_end].strip(" \t\r")
        if not rest or rest.startswith("#"):
            # `\` then spaces or a comment: meant to continue the line, as in Python
            if line_end < 0:
                message = _("a backslash continues a line, but the text ends here")
            else:
                message = _(
                    "nothing may follow a backslash that continues a line, not even a space or "
                    "a comment"
                )
            return ExpressionError("unsupported_syntax", message, span)
    if char == "@" and first:  # a decorator, as over a function pasted whole
        decorator_end = _LOGICAL_LINE_END.search(text, pos)
        message = _("decorators are not supported: paste the function's body without them")
        span = (pos, decorator_end.start() if decorator_end else len(text))
        return ExpressionError("unsupported_syntax", message, span)
    following = text[pos + 1 : pos + 2]
    if char in "<>" and following == char:  # `<<`, `>>`: shifts, not comparisons
        return ExpressionError("unsupported_syntax", _UNSUPPORTED["&"], (pos, pos + 2))
    if char in "<>!" and following == "=":  # `<=`, `>=`, `!=`: both characters
        return ExpressionError("unsupported_syntax", _UNSUPPORTED["<"], (pos, pos + 2))
    if char in _UNSUPPORTED:
        return ExpressionError("unsupported_syntax", _UNSUPPORTED[char], span)
    code = f"U+{ord(char):04X}"
    unicode_name = unicodedata.name(char, "")
    # TRANSLATORS: a character's code point and its Unicode name. Unicode names exist in English
    # only: another language gives the code point alone, "{code}".
    named = _("{code} {unicode_name}", code=code, unicode_name=unicode_name)
    described = named if unicode_name else code
    if char in OPERATOR_LOOKALIKES:
        message = _(
            "'{char}' ({described}) is not an operator of the language; did you mean '{ascii}'?",
            char=char,
            described=described,
            ascii=OPERATOR_LOOKALIKES[char],
        )
        return ExpressionError("invalid_character", message, span)
    ascii_twin = unicodedata.normalize("NFKC", char)
    if not ascii_twin.isascii() or not ascii_twin.strip():
        ascii_twin = _LOOKALIKES.get(char, "")
    if char.isdigit() or char.isalpha():
        if "SUPERSCRIPT" in described and ascii_twin.isdigit():  # `x²`
            message = _(
                "'{char}' ({described}) is not allowed: write a power as x ** {ascii}",
                char=char,
                described=described,
                ascii=ascii_twin,
            )
        elif ascii_twin.isascii() and ascii_twin:
            message = _(
                "'{char}' ({described}) is not allowed: expressions use ASCII letters and "
                "digits; did you mean '{ascii}'?",
                char=char,
                described=described,
                ascii=ascii_twin,
            )
        else:
            message = _(
                "'{char}' ({described}) is not allowed: expressions use ASCII letters and digits",
                char=char,
                described=described,
            )
    elif unicodedata.category(char) == "Cs":  # a JSON escape (`"\ud800"`) without its pair
        message = _(
            "{code} is half of a surrogate pair, not a character: the text was cut in the "
            "middle of a character, or encoded wrongly",
            code=code,
        )
    elif not char.isprintable() or char.isspace():
        message = _(
            "the invisible character {described} is not allowed in an expression",
            described=described,
        )
    else:
        message = _(
            "'{char}' ({described}) is not part of the expression language",
            char=char,
            described=described,
        )
    return ExpressionError("invalid_character", message, span)


class _Stream:
    """The tokens by position, with look-ahead: past the last, the `end` token for ever, or the
    text's first lexical error, raised when the parser reaches where it is."""

    def __init__(self, text: str, limits: Limits) -> None:
        self.tokens, self.error = _tokens(text, limits)
        self.last = len(self.tokens) - 1  # the `end` token, or the error's place
        self.position = 0

    def next(self) -> Token:
        position = self.position
        if position < self.last:
            self.position = position + 1
            return self.tokens[position]
        return self.final()

    def peek(self, ahead: int = 0) -> Token:
        position = self.position + ahead
        if position < self.last:
            return self.tokens[position]
        return self.final()

    def final(self) -> Token:
        if self.error is not None:
            raise self.error
        return self.tokens[self.last]

    def peek_past_newlines(self) -> Token:
        position, tokens = self.position, self.tokens
        while position < self.last and tokens[position].kind == "newline":
            position += 1
        return tokens[position] if position < self.last else self.final()


# Nodes micrograd builds for each operation, by which operands are constants.
_NODES = {
    (op.name, tuple(kind == "c" for kind in form)): count
    for op in BY_NAME.values()
    for form, count in op.nodes.items()
}

# -- statements -----------------------------------------------------------------------------

_AUGMENTED = {"+=": "+", "-=": "-", "*=": "*", "/=": "/"}
# A number with its thousands grouped by commas, as English writes it (`12,345,678.5`).
_THOUSANDS = re.compile(r"[1-9][0-9]{0,2}(,[0-9]{3})+(\.[0-9]+)?([eE][+-]?[0-9]+)?(?![0-9,.])")
# A number with its thousands grouped by spaces, as Russian and Estonian write it (`12 345,5`,
# read with a decimal point by then: `/v1/check` reads a learner's decimal comma as one).
_SPACED_THOUSANDS = re.compile(
    r"[1-9][0-9]{0,2}( [0-9]{3})+(\.[0-9]+)?([eE][+-]?[0-9]+)?(?! ?[0-9.])"
)
# A line end that no backslash continues (`\` then LF or CR LF, as the tokens read it).
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+")
_NONZERO_DIGIT = re.compile(r"[1-9]")
_LOGICAL_LINE_END = re.compile(r"(?<!\\)\r?\n(?<!\\\r\n)")
# What Python computes exactly on integers; `/` and the functions give floats.
_EXACTLY: dict[str, Callable[..., int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "neg": operator.neg,
}  # fmt: skip
_STATEMENT_ENDS = ("newline", ";", "end")
_ENDS_OR_COMMA = frozenset((*_STATEMENT_ENDS, ","))
_DECLARE = "Value"  # `name = Value(number)` declares an input
_STEP = "Heaviside"  # relu's derivative in an answer, which sympy writes Heaviside(x, 0)
_METHODS = (*FUNCTIONS, "backward")
# Modules whose functions share our functions' names: `math.exp(x)` is left after its import.
_MODULES = frozenset(("math", "cmath", "numpy", "np", "torch", "F", "jax", "jnp", "sympy", "sp"))
# Names that are not variables: one test, in the common case, for what `name` refuses.
_NOT_VARIABLES = frozenset((*FUNCTIONS, _DECLARE, *keyword.kwlist))
# Python statements that are not part of the language, with what to tell the learner.
_KEYWORD_STATEMENTS: dict[str, Message] = {
    "import": _("remove the import line: Value is built in"),
    "from": _("remove the import line: Value is built in"),
    "def": _("functions cannot be defined: paste the function's body without its def line"),
    "class": _("classes cannot be defined here: write each step as an assignment"),
    "for": _("loops are not supported: write each step as its own statement"),
    "while": _("loops are not supported: write each step as its own statement"),
    "if": _("conditions are not supported: use relu() for a value that switches at 0"),
    "assert": _("remove the assert line: the response already carries every value and gradient"),
    "return": _("return is not needed: the last statement, or name.backward(), is the output"),
    "with": _("'with' is not part of the language"),
    "try": _("'try' is not part of the language"),
    "del": _("'del' is not part of the language"),
    "global": _("'global' is not part of the language"),
    "nonlocal": _("'nonlocal' is not part of the language"),
    "pass": _("'pass' is not needed: remove it"),
    "raise": _("'raise' is not part of the language"),
}


class _Program:
    """Reads statements one after another, binding names to shared tree nodes."""

    def __init__(self, text: str, limits: Limits, functions: Collection[str] = ()) -> None:
        self.text = text
        self.limits = limits
        self.functions = functions  # calls beyond the language's own: an answer's `Heaviside`
        self.stream = _Stream(text, limits)
        self.reader = _Expression(self)  # one for every expression: each starts it afresh
        self.bound: dict[str, Node] = {}  # what each assigned name refers to at this point
        self.read_as_input: dict[str, Span] = {}  # names read before any assignment: inputs
        self.defaults: dict[str, float] = {}
        self.declared_at: dict[str, Span] = {}
        # Each assignment: (name, node, statement span, the earlier assignments it reads).
        self.assignments: list[tuple[str, Node, Span, tuple[int, ...]]] = []
        self.bound_by: dict[str, int] = {}  # the assignment each bound name comes from
        self.reading: list[int] = []  # the assignments the expression being read reads
        self.statements = 0
        # Graph nodes over every statement. Only the output's graph is held to the node limit;
        # the text's length bounds the parser's own work.
        self.node_count = 0
        self.made = 0  # tree nodes made: when the output's tree has them all, none is unused
        self.last: Node | None = None
        self.last_name: str | None = None
        self.last_reads: tuple[int, ...] = ()  # the assignments the last statement's value reads
        self.backward: tuple[str, Node, Span] | None = None
        self.backward_reads: tuple[int, ...] = ()
        # Expressions written as statements (a bare `a * 3`): the value and the statement's span.
        # The output's graph may hold none but the last: the others are computed and dropped.
        self.bare: list[tuple[Node, Span]] = []
        self.terminator: Token | None = None  # what ended the last expression
        self.previous_end = 0  # where the last expression ended
        self.starts: list[int] = []  # where each statement starts
        self.indentation: int | None = None  # of the line the last statement starts on
        self.measured = 0  # the statements `indentation` has seen

    def parse(self, output: str | None) -> ParsedExpression:
        stream = self.stream
        while True:
            token = stream.peek()
            if token.kind in ("newline", ";"):
                stream.next()
                continue
            if token.kind == "end":
                break
            self.statement(token)
        if self.last is None:
            raise ExpressionError(
                "empty_expression", _("the expression is empty"), stream.peek().span
            )
        root, name, reads = self.output(output)
        return self.result(root, name, reads)

    # -- one statement ---------------------------------------------------------------------

    def statement(self, first: Token) -> None:
        """The statement that starts at `first`, the stream's next token."""
        stream = self.stream
        self.statements += 1
        if self.statements > self.limits.max_statements:
            raise LimitExceeded(
                "too_many_statements",
                _(
                    "the program has more than {maximum} statements",
                    maximum=self.limits.max_statements,
                ),
                first.span,
                "max_statements",
                self.limits.max_statements,
            )
        self.starts.append(first.start)
        if first.kind == "op":
            self.check_indentation(first)
        if first.kind == "name":
            if first.text in _KEYWORD_STATEMENTS:
                # the whole line, and the lines a backslash at its end continues it onto
                end = _LOGICAL_LINE_END.search(self.text, first.start)
                span = (first.start, end.start() if end else len(self.text))
                raise ExpressionError("unsupported_syntax", _KEYWORD_STATEMENTS[first.text], span)
            second = stream.peek(1)
            if second.kind == "=":
                return self.assignment(stream.next())
            if second.kind == ",":
                targets = self.targets()
                if targets is not None:
                    return self.tuple_assignment(targets)
            if second.kind == "augmented":
                return self.augmented(stream.next(), stream.next())
            if second.kind == "." and self.is_backward():
                return self.backward_statement()
        root = self.expression(None)
        # A name alone as the last statement of a program names the output (`y` after
        # `y = ...`, or an input); a plain expression's output has no name, `a` alone too.
        alone = first.kind == "name" and self.previous_end == first.end and self.statements > 1
        self.last, self.last_name = root, first.text if alone else None
        self.last_reads = tuple(self.reading)
        self.bare.append((root, (first.start, self.previous_end)))

    def check_indentation(self, first: Token) -> None:
        """Refuse a line indented more than the statement before it that starts with a sign:
        Python refuses it (`unexpected indent`), and read as a statement of its own it would
        silently leave the sign's term out of the expression it was meant to go on.

        Only such a statement needs the indentation of those before it, so it is measured here,
        for the statements since the last time, and not as each statement is read."""
        *before, start = self.starts[self.measured :]
        for earlier in before:
            self.measure_indentation(earlier)
        self.measured = len(self.starts)
        above = self.indentation
        width = self.measure_indentation(start)
        if width is not None and above is not None and width > above:
            message = _(
                "this indented line starts a statement of its own with '{sign}', so it does not "
                "go on with the line above: to write an expression over several lines, put it "
                "in brackets",
                sign=first.text,
            )
            raise ExpressionError("unsupported_syntax", message, first.span)

    def measure_indentation(self, start: int) -> int | None:
        """The indentation of the statement at `start`, kept as the latest when it starts its
        line; None after a `;`, as its line's first statement has been measured."""
        line_start = self.text.rfind("\n", 0, start) + 1
        indent = self.text[line_start:start]
        if indent.strip(" \t"):
            return None
        self.indentation = len(indent.expandtabs())
        return self.indentation

    def targets(self) -> list[Token] | None:
        """`a, b, c =`: the names, when the statement is a tuple assignment; None when it is
        not one (`a, b` alone is refused as an expression)."""
        peek = self.stream.peek
        ahead = 0
        while True:
            target = peek(ahead)
            if target.kind != "name" or keyword.iskeyword(target.text):
                if target.kind == "=" and ahead >= 4:  # `a, b, = 1, 2`: a trailing comma
                    break
                if target.kind == "=":  # `a, = x,`, a tuple of one
                    message = _(
                        "one name is assigned without a comma: {name} = value",
                        name=peek(0).text,
                    )
                    raise ExpressionError("unsupported_syntax", message, peek(1).span)
                self.refuse_targets(target)
                return None
            following = peek(ahead + 1)
            if following.kind == "=":
                ahead += 1
                break
            if following.kind != ",":
                self.refuse_targets(following)
                return None
            ahead += 2
        # the names with the comma after each, the last perhaps without
        return [self.stream.next() for _ in range(ahead)][::2]

    def refuse_targets(self, token: Token) -> None:
        """Where `a, b, ...` stops being names and commas: refused at `token` if an `=` or `+=`
        further on makes the statement an assignment (`a, b.c = 1, 2`, `a, b += 1, 2`); else
        the statement is an expression, and its reader says what is wrong with it."""
        ahead, depth = 0, 0
        while (kind := self.stream.peek(ahead).kind) not in _STATEMENT_ENDS:
            depth += (kind == "(") - (kind == ")")
            if kind in ("=", "augmented") and depth <= 0:  # not a keyword argument's `=`
                if token.kind == "name" and keyword.iskeyword(token.text):
                    raise _python_keyword(token)
                if token.kind == "augmented":
                    message = _("{operator} assigns one name at a time", operator=token.text)
                else:
                    message = _("only names separated by commas can be assigned: a, b = x, y")
                raise ExpressionError("unsupported_syntax", message, token.span)
            ahead += 1

    def check_target(self, target: Token) -> None:
        name = target.text
        if keyword.iskeyword(name):
            message = _("Python's '{word}' is not part of the expression language", word=name)
            raise ExpressionError("unsupported_syntax", message, target.span)
        if name in FUNCTIONS or name == _DECLARE:
            raise ExpressionError(
                "function_name",
                _(
                    "{name} is a function: assigning to it would hide it; choose another name",
                    name=name,
                ),
                target.span,
            )
        if name in self.read_as_input:
            raise self.read_before_assignment(name, target)

    def read_before_assignment(self, name: str, target: Token) -> ExpressionError:
        line, _column = line_column(self.text, target.start)
        return ExpressionError(
            "used_before_assignment",
            _(
                "{name} is read here before the statement on line {line} assigns it; "
                "assign it first, or use another name for the input",
                name=name,
                line=line,
            ),
            self.read_as_input[name],
        )

    def assignment(self, target: Token) -> None:
        """`name = expression`, or `name = Value(number)` declaring an input."""
        name = target.text
        if name in _NOT_VARIABLES or name in self.read_as_input:
            self.check_target(target)  # a keyword, a function, or a name read as an input
        stream = self.stream
        equals = stream.next()
        node = self.expression(equals, declaring=name if self.declares() else None)
        if name in self.read_as_input:  # `x = x + 1` reads x before any statement assigns it
            raise self.read_before_assignment(name, target)
        self.bind(name, node, (target.start, self.previous_end), self.reading)
        self.last, self.last_name = node, name

    def declares(self) -> bool:
        """Whether the value that starts at the next token is `Value(...)`."""
        return self.stream.peek().text == _DECLARE and self.stream.peek(1).kind == "("

    def tuple_assignment(self, targets: list[Token]) -> None:
        """`a, b = x, y`: every value is read before any name is bound."""
        for target in targets:
            self.check_target(target)
        equals = self.stream.next()
        start = targets[0].start
        values, reads = [], []
        for i in range(len(targets)):
            declaring = targets[i].text if self.declares() else None  # `a, b = Value(1), ...`
            values.append(self.expression(equals, declaring=declaring, in_tuple=True))
            reads.append(self.reading)
            terminator = self.terminator
            assert terminator is not None
            last = i == len(targets) - 1
            if last and terminator.kind == "," and self.stream.peek().kind in _STATEMENT_ENDS:
                break  # `a, b = 1, 2,`: a trailing comma
            # After a comma the line ends the values, as in Python: `a, b = 1,` then `2`.
            ended = terminator.kind == "," and self.stream.peek().kind == "newline"
            if (terminator.kind == ",") == last or ended:
                raise ExpressionError(
                    "unsupported_syntax",
                    _(
                        "{count} names are assigned, so give {count} values separated by commas",
                        count=len(targets),
                    ),
                    (start, terminator.end),
                )
        span = (start, self.previous_end)
        for target in targets:  # `a, b = b, a` reads them before any statement assigns them
            if target.text in self.read_as_input:
                raise self.read_before_assignment(target.text, target)
        for target, node, read in zip(targets, values, reads, strict=True):
            self.bind(target.text, node, span, read)
        self.last, self.last_name = values[-1], targets[-1].text

    def bind(self, name: str, node: Node, span: Span, reads: list[int]) -> None:
        """`name` refers to `node` from here on; `span` is the statement that says so, and
        `reads` the earlier assignments its value reads."""
        if node.kind == "operation" and node.assigned is None:
            node.assigned = name
        index = len(self.assignments)
        self.bound[name] = node
        self.bound_by[name] = index
        self.last_reads = (index,)
        self.assignments.append((name, node, span, tuple(reads)))

    def augmented(self, target: Token, operator: Token) -> None:
        name = target.text
        if operator.text == "**=":
            raise ExpressionError(
                "unsupported_syntax",
                _("**= is not supported: write {name} = {name} ** k", name=name),
                operator.span,
            )
        self.check_target(target)
        bound = self.bound.get(name)
        if bound is None:
            raise ExpressionError(
                "used_before_assignment",
                _(
                    "{name} {operator} ... reads {name}, which no earlier statement assigns",
                    name=name,
                    operator=operator.text,
                ),
                target.span,
            )
        right = self.expression(operator)
        span = (target.start, self.previous_end)
        node = self.make(_AUGMENTED[operator.text], (bound, right), span)
        # a new node, which reads the name's earlier value: the name it is assigned to is its own
        self.bind(name, node, span, [*self.reading, self.bound_by[name]])
        self.last, self.last_name = node, name

    def is_backward(self) -> bool:
        """Whether the statement is `name.backward()`; inside its brackets a newline is space."""
        peek = self.stream.peek
        if peek(2).text != "backward" or peek(3).kind != "(":
            return False
        ahead = 4
        while peek(ahead).kind == "newline":
            ahead += 1
        return peek(ahead).kind == ")" and peek(ahead + 1).kind in _STATEMENT_ENDS

    def backward_statement(self) -> None:
        target = self.stream.next()
        while (closing := self.stream.next()).kind != ")":
            pass
        span = (target.start, closing.end)
        name = target.text
        if keyword.iskeyword(name):
            raise _python_keyword(target)
        if name in FUNCTIONS or name == _DECLARE:
            message = _("{name} is a function: call backward() on a value's name", name=name)
            raise ExpressionError("function_name", message, target.span)
        named = self.named(name)  # an input too: micrograd's backward() from a leaf
        if named is None:
            raise ExpressionError(
                "used_before_assignment",
                _(
                    "{name}.backward() needs {name} to be assigned by an earlier statement",
                    name=name,
                ),
                target.span,
            )
        if named[0].kind == "constant":  # `k = 3` then `k.backward()`
            message = _(
                "{name} is a plain number, computed from constants only, and has no backward() "
                "(a Python number has none): make it an input with {name} = Value(...), or call "
                "backward() on a value computed from inputs",
                name=name,
            )
            raise ExpressionError("unsupported_syntax", message, span)
        if self.backward is not None:
            line = line_column(self.text, self.backward[2][0])[0]
            raise ExpressionError(
                "unsupported_syntax",
                _(
                    "backward() is already called on line {line}: a program has one output",
                    line=line,
                ),
                span,
            )
        self.backward = (name, named[0], span)
        self.backward_reads = named[1]
        self.end_statement()

    def end_statement(self) -> None:
        token = self.stream.next()
        if token.kind not in _STATEMENT_ENDS:  # pragma: no cover - `is_backward` looked ahead
            raise ExpressionError(
                "unexpected_token", _("unexpected '{text}'", text=token.text), token.span
            )

    # -- one expression --------------------------------------------------------------------

    def expression(
        self, after: Token | None, *, declaring: str | None = None, in_tuple: bool = False
    ) -> Node:
        """The expression that starts at the next token; `after` is the token before it."""
        self.reading = []
        reader = self.reader
        root = reader.parse(after, declaring, in_tuple)
        self.previous_end = reader.end
        return root

    def make(
        self,
        op: str,
        args: tuple[Node, ...],
        span: Span,
        exponent: float | None = None,
        exact_exponent: int | None = None,
    ) -> Node:
        """An operation node, or the constant it folds to when every operand is one.
        `exact_exponent` is the exponent of `**` where Python has it as an integer."""
        node = Node("operation", span, op=op, args=args, exponent=exponent)
        constants = tuple([arg.kind == "constant" for arg in args])
        self.made += 1
        if all(constants):
            integers = self.fold_integers(node, exact_exponent)
            if integers is not None:
                value, exact = integers
                return Node("constant", span, value=value, exact=exact)
            return Node("constant", span, value=self.fold(node))
        self.node_count += _NODES[op, constants]
        return node

    def check_nodes(self, order: list[Node], count: int) -> None:
        """Refuse an output whose graph of `count` nodes passes the node limit, pointing at the
        operation where it does, reading the program from the top."""
        maximum = self.limits.max_nodes
        if count <= maximum:
            return
        # The order written: each node ends where its last operand ends or later, and encloses
        # the operands written inside it; a node an earlier statement made comes with that one.
        written = sorted(order, key=lambda node: (node.span[1], -node.span[0]))
        # At an operation, not an input: the part written so far is what is too large.
        crossing = next(
            (n for n, built in _graph_sizes(written) if built > maximum and n.kind == "operation"),
            order[-1],
        )
        raise LimitExceeded(
            "too_many_nodes",
            _("the expression would build more than {maximum} graph nodes", maximum=maximum),
            crossing.span,
            "max_nodes",
            maximum,
        )

    def fold_integers(
        self, node: Node, exact_exponent: int | None
    ) -> tuple[float, int | None] | None:
        """A constant subexpression of integers as Python computes it on its integers, within
        bounds: exactly for `+`, `-`, `*`, a sign and `**` to a whole power (the value and the
        integer), and `/` rounded once from the exact quotient (a float). None for the rest,
        folded on floats by `fold`: a float operand, a negative power, a function."""
        exacts = [arg.exact for arg in node.args]
        if None in exacts:
            return None
        integers = [exact for exact in exacts if exact is not None]  # all of them
        if node.op == "/":
            if integers[1] == 0:
                return None  # `fold` says it divides by zero
            return integers[0] / integers[1], None
        if node.op == "**":
            if exact_exponent is None or exact_exponent < 0:
                return None  # a float exponent, or a negative power: a float in Python too
            self.check_power(node)
            exact: int = integers[0] ** exact_exponent
        elif node.op in _EXACTLY:
            exact = _EXACTLY[node.op](*integers)
        else:
            return None
        self.check_magnitude(exact, node.span, "constant")  # before float(), which could overflow
        return float(exact), exact

    def check_power(self, node: Node) -> None:
        """Refuse a constant power past the largest constant before computing it: the log10 of
        the result is known first, so `9 ** 9 ** 9` is refused at once."""
        base = node.args[0].value
        assert node.exponent is not None
        if base != 0 and node.exponent * math.log10(abs(base)) > math.log10(
            self.limits.max_constant_magnitude
        ):
            self.check_magnitude(math.inf, node.span, "power")

    def fold(self, node: Node) -> float:
        """A constant subexpression's value, computed once as Python would, within bounds."""
        if node.op == "**":
            self.check_power(node)
        try:
            value = BY_NAME[node.op].fold(node.exponent, *(arg.value for arg in node.args))
        except DomainError as error:
            raise error.located(None, node.span) from None
        self.check_magnitude(value, node.span, "constant")
        return value

    def check_magnitude(self, value: float, span: Span, what: str, number: str = "") -> None:
        bound = self.limits.max_constant_magnitude
        if abs(value) <= bound:
            return
        if what == "number":
            shown = number if len(number) <= 24 else number[:16] + "…"  # as long names are
            message = _(
                "the number {number} is larger in magnitude than the largest constant allowed "
                "({bound})",
                number=shown,
                bound=format(bound, "g"),
            )
        elif what == "power":
            message = _(
                "this power is larger in magnitude than the largest constant allowed ({bound})",
                bound=format(bound, "g"),
            )
        else:
            message = _(
                "this constant is larger in magnitude than the largest constant allowed ({bound})",
                bound=format(bound, "g"),
            )
        raise LimitExceeded("constant_too_large", message, span, "max_constant_magnitude", bound)

    def read(self, token: Token) -> Node:
        """The node a name refers to: what it was bound to, or an input."""
        name = token.text
        bound = self.bound.get(name)
        if bound is not None:
            self.reading.append(self.bound_by[name])
            return bound
        if name not in self.read_as_input:
            self.read_as_input[name] = token.span
            self.node_count += 1
        self.made += 1
        return Node("variable", token.span, name=name)

    def declare(self, name: str, value: Node, written: Span, span: Span) -> Node:
        """`name = Value(value)`: `written` is where the value is, `span` the whole call."""
        if not value.is_constant:
            raise ExpressionError(
                "unsupported_syntax",
                _("Value() takes a number: the input's default value, as in Value(2.0)"),
                written,
            )
        if name in self.defaults:
            line = line_column(self.text, self.declared_at[name][0])[0]
            raise ExpressionError(
                "unsupported_syntax",
                _(
                    "the input {name} is already declared on line {line}; give this input "
                    "its own name",
                    name=name,
                    line=line,
                ),
                span,
            )
        self.defaults[name] = value.value
        self.declared_at[name] = span
        self.node_count += 1
        if value.span != written:  # a constant from an earlier statement: still its own node
            self.made += 1
        # else the number written in the call gives way to the input's node
        node = Node("variable", span, name=name)
        node.assigned = name
        return node

    # -- the output ------------------------------------------------------------------------

    def named(self, name: str) -> tuple[Node, tuple[int, ...]] | None:
        """What `name` refers to as the output, and the assignments it reads: what it was last
        bound to, or the input the program reads by that name (a node of its own); None when
        the program has no such name."""
        bound = self.bound.get(name)
        if bound is not None:
            return bound, (self.bound_by[name],)
        if name in self.read_as_input:
            self.made += 1
            return Node("variable", self.read_as_input[name], name=name), ()
        return None

    def output(self, requested: str | None) -> tuple[Node, str | None, tuple[int, ...]]:
        """The output's node, its name if it has one, and the assignments it reads."""
        if requested is not None:
            named = self.named(requested)
            if named is not None:
                return named[0], requested, named[1]
            from service.errors import BindingError

            raise BindingError(
                "unknown_output",
                _(
                    "the output {name} is not a name of the program; name one it assigns or reads",
                    name=requested,
                ),
                [requested],
            )
        if self.backward is not None:
            return self.backward[1], self.backward[0], self.backward_reads
        assert self.last is not None
        return self.last, self.last_name, self.last_reads

    def result(self, root: Node, name: str | None, reads: tuple[int, ...]) -> ParsedExpression:
        """The parsed program whose output is `root`, which reads the assignments `reads`."""
        if self.statements == 1 and not self.assignments and name is None:
            # A plain expression: its inputs and nodes are all the parser counted.
            parsed = ParsedExpression(
                self.text, root, tuple(self.read_as_input), max(self.node_count, 1)
            )
            if self.node_count > self.limits.max_nodes:
                self.check_nodes(parsed.postorder(), self.node_count)
            return parsed
        order = postorder(root)
        variables = dict.fromkeys(node.name for node in order if node.kind == "variable")
        bound = self.bound
        if len(order) == self.made:
            # The output uses every node the statements made (the common case), so it builds
            # all the parser counted.
            count = self.node_count
        else:
            *_, (_node, count) = _graph_sizes(order)
            # A compiled program is cached with its tree: names of statements the output does
            # not use must not keep those statements' nodes alive.
            reachable = {id(node) for node in order}
            bound = {name: node for name, node in bound.items() if id(node) in reachable}
        self.check_nodes(order, count)
        if root.kind == "constant" and variables:  # pragma: no cover - folding invariant
            raise AssertionError("a constant output has no inputs")
        # Every input, read or declared, where the program first mentions it.
        first_mentions = sorted(
            [*self.read_as_input.items(), *self.declared_at.items()], key=lambda item: item[1][0]
        )
        parsed = ParsedExpression(
            self.text,
            root,
            tuple(variables),
            max(count, 1),
            defaults=self.defaults,
            output=name,
            unused=self.unused(root, reads, order),
            statements=self.statements,
            mentioned=tuple(input_name for input_name, _span in first_mentions),
            assigned=tuple(name for name in self.bound if name not in self.defaults),
            bound=bound,
        )
        parsed._postorder = order  # computed already
        return parsed

    def unused(
        self, root: Node, reads: tuple[int, ...], order: list[Node]
    ) -> tuple[tuple[str | None, Span], ...]:
        """(name, statement span) of every assignment the output (`root`) reads neither directly
        nor through another, and whose value is not in the output's graph (`order`) either; and
        (None, span) of every expression written as a statement whose value is neither the
        output nor in its graph (a bare `a * 3` between assignments is computed and dropped).

        Assignments by the names read first: a name bound to a number is used even though each
        use of it is a leaf of its own. Then by the nodes: `xmg, ymg = x, y`, pasted from
        micrograd's tests after the output, names values the output already holds, and adds
        nothing it could use."""
        bare = [(node, span) for node, span in self.bare if node is not root]
        used: set[int] = set()
        pending = list(reads)
        while pending:
            index = pending.pop()
            if index not in used:
                used.add(index)
                pending.extend(self.assignments[index][3])
        if len(used) == len(self.assignments) and not bare:
            return ()
        in_graph = {id(node) for node in order}
        # An input read without a declaration is a tree node of its own at each read, and one
        # graph node for all of them: found by its name.
        inputs = {node.name for node in order if node.kind == "variable"}

        def dropped(node: Node) -> bool:
            return id(node) not in in_graph and not (
                node.kind == "variable" and node.name in inputs
            )

        statements: list[tuple[str | None, Span]] = [
            (name, span)
            for index, (name, node, span, _reads) in enumerate(self.assignments)
            if index not in used and dropped(node)
        ]
        statements += [(None, span) for node, span in bare if dropped(node)]
        return tuple(sorted(statements, key=lambda statement: statement[1]))


def _graph_sizes(order: list[Node]) -> Iterator[tuple[Node, int]]:
    """Each node of `order` (operands before the operations that use them), with the nodes of the
    primitive graph built so far: an input once however often it is read, an operation as many
    as micrograd makes for it."""
    inputs: set[str] = set()
    built = 0
    for node in order:
        if node.kind == "variable":
            if node.name not in inputs:
                inputs.add(node.name)
                built += 1
        elif node.kind == "operation":
            built += _NODES[node.op, tuple([arg.kind == "constant" for arg in node.args])]
        yield node, built


# -- the expression parser ------------------------------------------------------------------


class _Pending:
    """An entry of the operator stack: an operator waiting for operands, or an open bracket."""

    __slots__ = ("arguments", "kind", "op", "opening", "power", "start", "token")

    def __init__(self, kind: str, op: str, power: int, token: Token) -> None:
        self.kind = kind  # "binary", "prefix", "paren" or "call"
        self.op = op
        self.power = power
        self.token = token
        self.start = token.start
        self.arguments = 0  # for calls: arguments completed so far
        self.opening = token.span  # where the bracket opened, for "never closed"


class _Expression:
    """Reads an expression, from the stream's next token to the end of its statement."""

    __slots__ = (
        "brackets", "declared", "declaring", "end", "in_tuple", "limits", "operands", "pending",
        "plain", "program", "spans", "stream", "text",
    )  # fmt: skip

    def __init__(self, program: _Program) -> None:
        self.program = program
        self.text = program.text
        self.stream = program.stream
        self.limits = program.limits
        # Of the expression being read: one read whole leaves the stacks empty and `declared`
        # None, as they are here, for the next.
        self.declaring: str | None = None  # the target of `name = Value(...)`
        self.declared: Node | None = None
        self.in_tuple = False  # `,` ends this expression: a value of `a, b = x, y`
        self.operands: list[Node] = []
        # Where each operand is written here. A name's node may be shared with the statement that
        # assigned it, whose span it keeps, so an operation's span comes from these, not from
        # its operands' own spans.
        self.spans: list[Span] = []
        self.pending: list[_Pending] = []
        self.brackets = 0  # open parentheses and calls among `pending`
        self.end = 0
        self.plain = False  # a bare first statement: perhaps a plain expression over lines

    def parse(self, after: Token | None, declaring: str | None, in_tuple: bool) -> Node:
        """The expression; `after` is the token before it, `declaring` the name it declares if
        it is `Value(...)`, and `in_tuple` whether it is one of several values."""
        self.declaring, self.in_tuple = declaring, in_tuple
        self.plain = after is None and self.program.statements == 1
        expect_operand = True
        previous = after
        next_token = self.stream.next
        while True:
            token = next_token()
            if token.kind == "newline" and self.continues(expect_operand, previous):
                continue
            # Where the expression ends so far: set before the token is handled, as `.relu()`
            # reads on to its `)` and sets it there.
            if expect_operand:
                self.end = token.end
                expect_operand = self.operand_position(token, previous)
            elif token.kind in _ENDS_OR_COMMA and self.ends(token):
                break
            else:
                self.end = token.end
                expect_operand = self.operator_position(token, previous)
            previous = token
        root = self.operands.pop()
        self.spans.pop()
        declared, self.declared = self.declared, None
        if declared is not None and root is not declared:
            raise ExpressionError(
                "unsupported_syntax",
                _(
                    "Value(...) declares an input on a line of its own: {name} = Value(number)",
                    name=self.declaring,
                ),
                declared.span,
            )
        return root

    def continues(self, expect_operand: bool, previous: Token | None) -> bool:
        """Whether a newline is only space: inside brackets, after an operator, or before a
        line that starts with a binary operator (an expression written over several lines).
        A line that starts with a sign starts a statement of its own, as in Python (`-x` may be
        the output), except in a plain expression, which has always gone on over such lines.

        After an operator, a line that assigns (`y = a *` and then `z = 3`) is the next
        statement, and the line before it ended too soon: said where it ends, after the
        operator."""
        if self.brackets:
            return True
        if expect_operand:
            if previous is not None and self.statement_follows():
                raise ExpressionError(
                    "unexpected_end",
                    _(
                        "the line ends after '{text}', where an operand was expected: the next "
                        "line is a statement of its own",
                        text=previous.text,
                    ),
                    (previous.end, previous.end),
                )
            return True
        following = self.stream.peek_past_newlines()
        if following.kind != "op" or (following.text in ("+", "-") and not self.plain):
            return False
        while self.stream.peek().kind == "newline":  # each blank line is looked at once
            self.stream.next()
        return True

    def statement_follows(self) -> bool:
        """Whether the next line that is not blank assigns names (`z = `, `z += `, `a, b = `)
        or names the output (`z.backward()`)."""
        peek = self.stream.peek
        ahead = 0
        while peek(ahead).kind == "newline":
            ahead += 1
        if peek(ahead).kind == "name" and peek(ahead + 1).kind == ".":
            return peek(ahead + 2).text == "backward"
        while peek(ahead).kind == "name":  # names separated by commas, then `=`
            following = peek(ahead + 1).kind
            if following in ("=", "augmented"):
                return True
            if following != ",":
                return False
            ahead += 2
        return False

    def ends(self, token: Token) -> bool:
        """At an operator position: whether `token` ends the expression (and its statement)."""
        if token.kind == ",":
            if not self.in_tuple or self.brackets:
                return False
        elif token.kind not in _STATEMENT_ENDS:
            return False
        while self.pending and self.pending[-1].kind in ("binary", "prefix"):
            self.reduce()
        if self.pending:
            opener = self.pending[-1]
            if token.kind == ";" and not self.never_closed():  # `exp(a;)`: closed after the `;`
                message = _("';' ends a statement, but a bracket is still open here")
                raise ExpressionError("unexpected_token", message, token.span)
            raise _never_closed(opener.opening)
        self.program.terminator = token
        return True

    # A token where an operand must start: a number, a name, a call, '(' or a sign.
    def operand_position(self, token: Token, previous: Token | None) -> bool:
        if token.kind == "number":
            node = self.constant(token)
            self.operands.append(node)
            self.spans.append(node.span)
            return False
        if token.kind == "name":
            return self.name(token)
        if token.kind == "(":
            self.push(_Pending("paren", "(", 0, token))
            return True
        if token.kind == "op" and token.text in ("+", *PREFIX):
            op = PREFIX[token.text].name if token.text in PREFIX else "pos"
            self.push(_Pending("prefix", op, PREFIX_PRECEDENCE, token))
            return True
        raise self.missing_operand(token, previous)

    def missing_operand(self, token: Token, previous: Token | None) -> ExpressionError:
        opened_call = (
            bool(self.pending)
            and self.pending[-1].kind == "call"
            and self.pending[-1].token is previous
        )
        if token.kind in ("end", ";", ","):
            if token.kind == "," and (not self.pending or self.pending[-1].kind != "call"):
                return _no_call(token)
            if previous is None:
                return ExpressionError("empty_expression", _("the expression is empty"), token.span)
            if token.kind != ",":
                last = previous.text + "(" if opened_call else previous.text  # `exp(`
                return ExpressionError(
                    "unexpected_end",
                    _(
                        "the expression ends after '{text}', where an operand was expected",
                        text=last,
                    ),
                    (token.start, token.start),
                )
        if token.kind == ")" and previous is not None and (previous.kind == "(" or opened_call):
            opener = self.pending[-1]
            if opener.kind == "call":
                return _arity(opener, 0, (opener.start, token.end))
            return ExpressionError(
                "unexpected_token", _("empty parentheses: '()'"), (previous.start, token.end)
            )
        if token.kind == ")" and not any(p.kind in ("paren", "call") for p in self.pending):
            return ExpressionError(
                "unbalanced_parenthesis", _("')' has no matching '('"), token.span
            )
        if previous is None:
            message = _(
                "unexpected '{text}' at the start: expected a number, a variable, a function "
                "call or '('",
                text=token.text,
            )
        else:
            message = _(
                "unexpected '{text}' after '{previous}': expected a number, a variable, a "
                "function call or '('",
                text=token.text,
                previous=previous.text,
            )
        return ExpressionError("unexpected_token", message, token.span)

    def name(self, token: Token) -> bool:
        """A name at an operand position: a call, a declaration or a variable. Returns whether
        an operand is still expected (after the opening of a call)."""
        following = self.stream.peek()
        if following.kind == "newline" and (token.text in FUNCTIONS or self.brackets):
            # `exp` then `(` on the next line: one call, written over two lines
            following = self.stream.peek_past_newlines()
            if following.kind == "(":
                while self.stream.peek().kind == "newline":
                    self.stream.next()
        if following.kind == "(":
            self.call(token, self.stream.next())
            return True
        if token.text in _NOT_VARIABLES:
            if token.text in FUNCTIONS or token.text == _DECLARE:
                raise self.function_as_variable(token, following)
            if following.kind in ("name", "number"):
                # `lambda x`, `not a`: the juxtaposition names the keyword
                raise self.juxtaposition(following, token)
            raise _python_keyword(token)
        self.operands.append(self.program.read(token))
        self.spans.append(token.span)
        return False

    def function_as_variable(self, token: Token, following: Token) -> ExpressionError:
        name = token.text
        if following.kind in ("name", "number") and following.start > token.end:
            message = _(
                "{name} is a function: write {name}({argument})",
                name=name,
                argument=following.text,
            )
            return ExpressionError("function_name", message, (token.start, following.end))
        message = _("{name} is a function: write {name}(x)", name=name)
        return ExpressionError("function_name", message, token.span)

    def call(self, token: Token, opening: Token) -> None:
        name = token.text
        if name not in FUNCTIONS and name != _DECLARE and name not in self.program.functions:
            raise _unknown_function(token, opening)
        if name == _DECLARE and self.declaring is None:
            raise ExpressionError(
                "unsupported_syntax",
                _("Value(...) declares an input on a line of its own: name = Value(number)"),
                (token.start, opening.end),
            )
        call = _Pending("call", name, 0, token)
        call.opening = opening.span
        self.push(call)

    # A token after a complete operand: a binary operator, ')', ',', '.' or the end.
    def operator_position(self, token: Token, previous: Token | None) -> bool:
        if token.kind == "op":
            self.binary(token)
            return True
        if token.kind == ")":
            self.close(token)
            return False
        if token.kind == ",":
            return self.comma(token)
        if token.kind == ".":
            self.method(token)
            return False
        if token.kind in ("number", "name", "("):
            raise self.juxtaposition(token, previous)
        if token.kind == "=" and self.brackets:
            opener = self.innermost_bracket()
            if self.never_closed():  # `b = exp(` and the next statement: `out = b`
                raise _never_closed(opener.opening)
            if opener.kind == "call" and opener.op == _DECLARE:
                if previous is not None and previous.text == "data":  # `Value(data=2.0)`
                    message = _("write the number alone: Value(2.0), not Value(data=2.0)")
                    span = (previous.start, token.end)
                    raise ExpressionError("unsupported_syntax", message, span)
                # `Value(2.0, label='a')`, as micrograd's own examples write it
                message = _(
                    "Value() takes only the number: the name it is assigned to is its label, as "
                    "in a = Value(2.0)"
                )
                raise ExpressionError("unsupported_syntax", message, token.span)
            if opener.kind == "call":
                message = _(
                    "keyword arguments are not supported: write {function}(x)",
                    function=opener.op,
                )
                raise ExpressionError("unsupported_syntax", message, token.span)
            # `x = (a +` and then `y = 2` on the next line
            raise _never_closed(opener.opening)
        raise _misplaced(token)

    def binary(self, token: Token) -> None:
        operation = INFIX[token.text]
        power, right = operation.precedence, operation.grammar == "power"
        while (
            self.pending
            and self.pending[-1].kind in ("binary", "prefix")
            and (self.pending[-1].power > power or (self.pending[-1].power == power and not right))
        ):
            self.reduce()
        self.push(_Pending("binary", operation.name, power, token))

    def close(self, token: Token) -> None:
        while self.pending and self.pending[-1].kind in ("binary", "prefix"):
            self.reduce()
        if not self.pending:
            raise ExpressionError(
                "unbalanced_parenthesis", _("')' has no matching '('"), token.span
            )
        opener = self.pending.pop()
        self.brackets -= 1
        if opener.kind == "call":
            self.finish_call(opener, token)
        else:
            self.grow(opener.start, token.end)

    def comma(self, token: Token) -> bool:
        """A comma between a call's arguments; returns whether an operand follows (not after a
        trailing comma, `exp(x,)`, which Python allows)."""
        try:
            following: Token | None = self.stream.peek()
        except ExpressionError:  # a lexical error next: raised when it is read, unless Value's
            following = None
        before = self.operands[-1]
        if (
            following is not None
            and before.kind == "constant"
            and self.spans[-1][1] == token.start
            and self.text[self.spans[-1][0] : token.start].isdigit()
            and following.kind == "number"
            and following.start == token.end
            # `Heaviside(a - 1,0)`: the comma between its two arguments
            and (self.brackets == 0 or self.innermost_bracket().op != _STEP)
        ):  # `0,5`: a decimal comma, as Russian and Estonian write decimals
            start = self.spans[-1][0]
            whole = self.text[start : token.start]
            written = whole + "." + following.text
            span = (start, following.end)
            grouped = _THOUSANDS.match(self.text, start)
            if grouped and grouped[0] == whole + "," + following.text and following.text.isdigit():
                # `1,000`: a thousand, or one
                message = _(
                    "numbers are written without separators and with a decimal point: "
                    "{whole_number} or {decimal}",
                    whole_number=whole + following.text,
                    decimal=written,
                )
            elif grouped:  # `12,345,678`, `1,000.5`: thousands, in English
                number = grouped[0].replace(",", "")
                message = _("numbers are written without separators: {number}", number=number)
                span = grouped.span()
            else:
                message = _("decimals are written with a point: {number}", number=written)
            raise ExpressionError("unsupported_syntax", message, span)
        while self.pending and self.pending[-1].kind in ("binary", "prefix"):
            self.reduce()
        if self.pending and self.pending[-1].kind == "paren":  # `(1, 2)`, `a, b = (x, y)`
            message = _(
                "brackets hold one expression, not a tuple: assign several names without them, "
                "as in a, b = x, y"
            )
            raise ExpressionError("unsupported_syntax", message, token.span)
        if not self.pending or self.pending[-1].kind != "call":
            raise _no_call(token)
        declaring = self.pending[-1].op == _DECLARE
        try:
            if self.stream.peek_past_newlines().kind == ")":
                return False
        except ExpressionError:  # a string next, `Value(2.0, 'a')`: said below for Value
            if not declaring:
                raise
        if declaring:
            raise self.value_parameters(token)
        self.pending[-1].arguments += 1
        return True

    def value_parameters(self, comma: Token) -> ExpressionError:
        """`Value(2.0, (), '+')`, `Value(2.0, label='a')`: micrograd's other parameters, from
        `comma` to the call's `)`, with what to write instead."""
        end = _closing_bracket(self.text, comma.end)
        message = _(
            "Value() takes only the number: the name it is assigned to is its label, as in "
            "a = Value(2.0)"
        )
        return ExpressionError("unsupported_syntax", message, (comma.start, end))

    def method(self, dot: Token) -> None:
        """`x.relu()`: the function form applied to the operand just read."""
        name = self.stream.next()
        operand, written = self.operands[-1], self.spans[-1]
        if name.kind != "name":
            raise ExpressionError(
                "unsupported_syntax",
                _("'.' must be followed by a method: relu(), exp(), log() or tanh()"),
                dot.span,
            )
        span = (dot.start, name.end)
        if name.text in ("data", "grad"):
            message = _(
                ".{attribute} is not needed: the response already carries every value and gradient",
                attribute=name.text,
            )
            raise ExpressionError("unsupported_syntax", message, span)
        if name.text == "label":  # `e.label = 'e'`, line after line in micrograd's notebooks
            message = _(
                ".label is not needed: the name a value is assigned to is its label (e = a * b "
                "labels it e); remove this line"
            )
            raise ExpressionError("unsupported_syntax", message, span)
        if name.text not in _METHODS:
            message = _(
                "'.{attribute}' is not supported: the methods are relu(), exp(), log() and "
                "tanh(), and name.backward() on a line of its own",
                attribute=name.text,
            )
            raise ExpressionError("unsupported_syntax", message, span)
        opening = self.stream.next()
        while self.stream.peek().kind == "newline":  # inside the brackets a newline is space
            self.stream.next()
        closing = self.stream.next()
        if opening.kind != "(":
            message = _("write .{method}() with parentheses", method=name.text)
            raise ExpressionError("unsupported_syntax", message, span)
        if closing.kind in ("end", ";"):  # `x.relu(` and nothing more
            raise _never_closed(opening.span)
        if name.text == "backward":
            if closing.kind != ")":
                message = _("backward() takes no arguments: write name.backward()")
            else:
                message = _(
                    "backward() names the output on a line of its own: write name.backward()"
                )
            end = self.text.find(")", closing.start)
            span = (dot.start, closing.end if end < 0 else end + 1)
            raise ExpressionError("unsupported_syntax", message, span)
        if closing.kind != ")" and self.never_closed():
            # `y = x.tanh(` (or `x.tanh(x`) and the next statement on the next line
            raise _never_closed(opening.span)
        if closing.kind != ")":
            kind, start, receiver = "wrong_arity", dot.start, self.text[written[0] : written[1]]
            if receiver in _MODULES and receiver not in self.program.bound:
                kind, start = "unsupported_syntax", written[0]
                message = _(
                    "{module}.{function}(...) is a module's function: write {function}(...), "
                    "which is built in",
                    module=receiver,
                    function=name.text,
                )
            else:
                message = _(
                    "{function}() takes no arguments as a method: write x.{function}()",
                    function=name.text,
                )
            end = self.text.find(")", closing.start)
            raise ExpressionError(kind, message, (start, closing.end if end < 0 else end + 1))
        span = (written[0], closing.end)
        if operand.kind == "constant":  # `k = 3` then `k.relu()`: a Python int has no methods
            receiver = self.text[written[0] : written[1]]
            bracketed = receiver.startswith("(") and receiver.endswith(")")
            message = _(
                "{receiver} is a plain number, computed from constants only, and has no "
                ".{method}() (a Python number has none): write {method}({argument}), or make "
                "it an input with Value(...)",
                receiver=receiver,
                method=name.text,
                argument=receiver[1:-1] if bracketed else receiver,
            )
            raise ExpressionError("unsupported_syntax", message, span)
        self.operands.pop()
        self.spans.pop()
        self.operands.append(self.program.make(name.text, (operand,), span))
        self.spans.append(span)
        self.end = closing.end

    def innermost_bracket(self) -> _Pending:
        return next(p for p in reversed(self.pending) if p.kind in ("paren", "call"))

    def unclosed_before(self, token: Token, after: int) -> bool:
        """Whether `token`, just read inside a bracket, starts a line after position `after`,
        and no `)` further on closes that bracket: an unclosed bracket followed by the next
        statement (`y = (x * 2` and then `z = y`), which Python too reports as never closed."""
        return "\n" in self.text[after : token.start] and self.never_closed()

    def never_closed(self) -> bool:
        """Whether no `)` from the token just read on closes the bracket it is inside."""
        stream = self.stream
        depth = 0
        for following in stream.tokens[stream.position - 1 : stream.last]:
            depth += (following.kind == "(") - (following.kind == ")")
            if depth < 0:
                return False
        return stream.error is None  # past a character no token takes, the text is not read

    def juxtaposition(self, token: Token, previous: Token | None) -> ExpressionError:
        """Two operands with no operator between them: say what was probably meant."""
        assert previous is not None
        if self.brackets and self.unclosed_before(token, previous.end):
            return _never_closed(self.innermost_bracket().opening)
        left, right = previous.text, token.text
        span = (previous.start, token.end)
        touching = previous.end == token.start
        if previous.kind == "number" and touching:
            if token.kind == "number":  # `1.5.2`
                message = _("'{text}' is not a number", text=left + right)
                return ExpressionError("unexpected_token", message, span)
            if left == "0" and right[0] in "xXoObB":
                return ExpressionError(
                    "unsupported_syntax",
                    _("hexadecimal, octal and binary numbers are not supported"),
                    span,
                )
            if right[0] == "_":
                return ExpressionError(
                    "unsupported_syntax",
                    _("digit separators (_) are not supported in numbers"),
                    span,
                )
            if right[0] in "eE" and "e" not in left.lower():
                message = _(
                    "'{text}' is not a number: an exponent needs digits, like {number}e3; to "
                    "multiply, write {number}*{name}",
                    text=left + right,
                    number=left,
                    name=right,
                )
                return ExpressionError("implicit_multiplication", message, span)
        for word in (previous, token):  # `lambda x`, `a if b else c`, `a and b`
            if keyword.iskeyword(word.text):
                return _python_keyword(word)
        if left == "print" and previous.kind == "name":  # Python 2's `print x`
            message = _(
                "print is not needed: the response already carries every value and gradient"
            )
            return ExpressionError("unsupported_syntax", message, previous.span)
        if token.kind == "(":
            right = "(...)"
        if previous.kind == "number" and token.kind == "number":
            grouped = _SPACED_THOUSANDS.match(self.text, previous.start)
            if grouped and grouped.end() >= token.end:  # `1 000`: a thousand
                number = grouped[0].replace(" ", "")
                message = _("numbers are written without separators: {number}", number=number)
                return ExpressionError("unsupported_syntax", message, grouped.span())
            message = _(
                "two numbers side by side: write one number without the space, or an operator "
                "between them, as in {left}*{right}",
                left=left,
                right=right,
            )
            return ExpressionError("implicit_multiplication", message, span)
        if previous.kind == "number":
            message = _(
                "implicit multiplication is not supported: write {left}*{right}",
                left=left,
                right=right,
            )
            return ExpressionError("implicit_multiplication", message, span)
        if previous.kind == ")":
            left = "(...)"
        elif previous.kind == ".":  # `x.relu() y`: the method call, read to its `)`, is the left
            start, end = self.spans[-1]
            left = self.text[start:end] if end - start <= 24 else "(...)"
            span = (start, token.end)
        message = _(
            "two operands side by side: write {left}*{right} to multiply", left=left, right=right
        )
        return ExpressionError("implicit_multiplication", message, span)

    def finish_call(self, opener: _Pending, closer: Token) -> None:
        # `arguments` counts the commas seen; one more argument ends at ')'.
        count = opener.arguments + 1
        span = (opener.start, closer.end)
        if opener.op == _STEP and count == 2:
            self.step_at_zero(span)
        elif count != 1:
            raise _arity(opener, count, span)
        if opener.op == _DECLARE:
            value, written = self.operands.pop(), self.spans.pop()
            assert self.declaring is not None
            if self.declared is not None:
                raise ExpressionError(
                    "unsupported_syntax",
                    _("Value(...) declares an input on a line of its own: name = Value(number)"),
                    span,
                )
            self.declared = self.program.declare(self.declaring, value, written, span)
            self.operands.append(self.declared)
            self.spans.append(span)
            return
        self.apply(opener.op, 1, span)

    def step_at_zero(self, span: Span) -> None:
        """`Heaviside(x, 0)`, as sympy writes relu's derivative: its second argument is the
        value at x = 0, which is relu's derivative there, 0, and nothing else."""
        at_zero, written = self.operands.pop(), self.spans.pop()
        # Written as zero (`0`, `0.0`), not a number too small for a double (`1e-400`).
        mantissas = _EXPONENT.sub("", self.text[written[0] : written[1]])
        if at_zero.kind != "constant" or at_zero.value != 0 or _NONZERO_DIGIT.search(mantissas):
            message = _(
                "Heaviside's second argument is its value at 0, where relu's derivative is 0: "
                "write Heaviside(x) or Heaviside(x, 0)"
            )
            raise ExpressionError("wrong_arity", message, written)

    def push(self, entry: _Pending) -> None:
        self.pending.append(entry)
        if entry.kind in ("paren", "call"):
            self.brackets += 1
        if len(self.pending) > self.limits.max_depth:
            raise LimitExceeded(
                "nesting_too_deep",
                _(
                    "the expression nests deeper than {maximum} levels",
                    maximum=self.limits.max_depth,
                ),
                entry.token.span,
                "max_depth",
                self.limits.max_depth,
            )

    def reduce(self) -> None:
        entry = self.pending.pop()
        spans = self.spans
        if entry.kind == "prefix":
            if entry.op == "pos":  # unary plus changes nothing and adds no node
                self.grow(entry.start, spans[-1][1])
                return
            self.apply(entry.op, 1, (entry.start, spans[-1][1]))
            return
        span = (spans[-2][0], spans[-1][1])
        if entry.op == "**":
            right = self.operands[-1]
            if not right.is_constant:
                raise _variable_exponent(self.operands[-2], spans[-1])
            self.operands.pop()
            spans.pop()
            self.apply("**", 1, span, exponent=right.value, exact_exponent=right.exact)
            return
        self.apply(entry.op, 2, span)

    def grow(self, start: int, end: int) -> None:
        """The last operand is written from `start` to `end` (in parentheses, after a `+`)."""
        operand, written = self.operands[-1], (start, end)
        if operand.span == self.spans[-1]:
            # Made in this expression: its span takes in what was written, so errors point
            # at it. A node shared with an earlier statement keeps that statement's span.
            operand.span = written
        self.spans[-1] = written

    def apply(
        self,
        op: str,
        arity: int,
        span: Span,
        exponent: float | None = None,
        exact_exponent: int | None = None,
    ) -> None:
        args = tuple(self.operands[-arity:])
        del self.operands[-arity:]
        del self.spans[-arity:]
        self.operands.append(self.program.make(op, args, span, exponent, exact_exponent))
        self.spans.append(span)

    def constant(self, token: Token) -> Node:
        value = float(token.text)
        self.program.check_magnitude(value, token.span, "number", token.text)
        self.program.made += 1
        # An integer literal is a Python int: at most 301 digits once its leading zeros are
        # gone, by the check above (Python's int() refuses text past 4,300 digits).
        exact = int(token.text.lstrip("0") or "0") if token.text.isdigit() else None
        return Node("constant", token.span, value=value, exact=exact)


def _python_keyword(token: Token) -> ExpressionError:
    """A Python keyword in an expression: never an input's name, nor an operator."""
    if token.text in ("True", "False"):
        message = _(
            "{word} is not a number here: write {number}",
            word=token.text,
            number=int(token.text == "True"),
        )
    else:
        message = _("Python's '{word}' is not part of the expression language", word=token.text)
    return ExpressionError("unsupported_syntax", message, token.span)


def _never_closed(opening: Span) -> ExpressionError:
    return ExpressionError("unbalanced_parenthesis", _("this '(' is never closed"), opening)


def _no_call(token: Token) -> ExpressionError:
    return ExpressionError(
        "unexpected_token", _("',' separates arguments, but there is no call here"), token.span
    )


def _arity(opener: _Pending, count: int, span: Span) -> ExpressionError:
    if opener.op == _STEP:
        message = _(
            "Heaviside() takes one argument, or two: Heaviside(x) or Heaviside(x, 0) "
            "({count} given)",
            count=count,
        )
        return ExpressionError("wrong_arity", message, span)
    message = _(
        "{function}() takes exactly one argument ({count} given)",
        function=opener.op,
        count=count,
    )
    return ExpressionError("wrong_arity", message, span)


def _misplaced(token: Token) -> ExpressionError:
    if token.kind == "=":
        message = _("only a name can be assigned to, at the start of a statement: name = ...")
    elif token.kind == "==":
        message = _("comparisons are not part of the expression language")
    elif token.kind == "augmented":
        message = _(
            "{operator} assigns, so it must follow a name at the start of a statement",
            operator=token.text,
        )
    else:  # pragma: no cover - every other token kind is handled by the caller
        message = _("unexpected '{text}'", text=token.text)
    return ExpressionError("unsupported_syntax", message, token.span)


# Functions as sympy (and /v1/derivatives' `text`) or Python write them, in the language's terms.
_WRITTEN_OTHERWISE = {
    "Max": ("Max(0, x)", "relu(x)"),
    "max": ("max(0, x)", "relu(x)"),
    "Abs": ("Abs(x)", "(x**2)**0.5"),
    "abs": ("abs(x)", "(x**2)**0.5"),
    "sign": ("sign(x)", "x/(x**2)**0.5"),
    "sqrt": ("sqrt(x)", "x**0.5"),
}


def _unknown_function(token: Token, opening: Token) -> ExpressionError:
    name, span = token.text, (token.start, opening.end)
    functions = ", ".join(FUNCTIONS)
    if name == "print":
        message = _("print() is not needed: the response already carries every value and gradient")
    elif name in _WRITTEN_OTHERWISE:
        message = _(
            "'{name}' is not a supported function; {function} is written {written} (the "
            "functions are {functions})",
            name=name,
            function=_WRITTEN_OTHERWISE[name][0],
            written=_WRITTEN_OTHERWISE[name][1],
            functions=functions,
        )
    elif name.isidentifier() and not keyword.iskeyword(name):
        message = _(
            "'{name}' is not a supported function; the functions are {functions} (if {name} is "
            "a variable, write {name}*(...) to multiply)",
            name=name,
            functions=functions,
        )
    else:
        message = _(
            "'{name}' is not a supported function; the functions are {functions}",
            name=name,
            functions=functions,
        )
    return ExpressionError("unknown_function", message, span)


def _variable_exponent(left: Node, exponent: Span) -> ExpressionError:
    if left.is_constant:
        message = _(
            "the exponent must be a constant: this engine's '**' differentiates only the base, "
            "so a variable exponent would silently get a zero gradient"
        )
    else:
        message = _(
            "the exponent must be a constant: this engine's '**' differentiates only the base, "
            "so a variable exponent would silently get a zero gradient; write "
            "exp(log(base) * exponent) instead"
        )
    return ExpressionError("variable_exponent", message, exponent)


def parse(
    text: str,
    limits: Limits = DEFAULT_LIMITS,
    output: str | None = None,
    functions: Collection[str] = (),
) -> ParsedExpression:
    """Parse untrusted `text` into a syntax tree, or raise an `ExpressionError` saying where.

    `output` names the program's output, overriding `name.backward()` and the last statement.
    `functions` are calls taken besides the language's own, from `ANSWER_FUNCTIONS`.
    """
    if len(text) > limits.max_expression_length:
        raise LimitExceeded(
            "expression_too_long",
            _(
                "the expression is {length} characters long; the limit is {maximum}",
                length=len(text),
                maximum=limits.max_expression_length,
            ),
            (limits.max_expression_length, len(text)),
            "max_expression_length",
            limits.max_expression_length,
        ).at(text)
    text = line_feeds(text)  # a lone carriage return is a line break, as in Python
    try:
        return _Program(text, limits, functions).parse(output)
    except (ExpressionError, DomainError) as error:
        raise error.at(text) from None


__all__ = [
    "OPERATOR_LOOKALIKES",
    "Lines",
    "Node",
    "ParsedExpression",
    "line_column",
    "parse",
    "postorder",
]
