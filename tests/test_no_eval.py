"""No code in service/ hands text to Python's or sympy's evaluators: the grammar reads it all."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parent.parent / "service"

# Python's own: forbidden as bare names (`eval(...)`) and on the builtins module; a method of the
# same name on another object (`re.compile`, `Evaluator.compile`) is something else.
BUILTINS = {"eval", "exec", "compile", "__import__"}
# sympy's string readers run `eval` underneath: forbidden under any name or object.
STRING_READERS = {"sympify", "parse_expr"}


def findings(source: str) -> list[str]:
    """Each call or import of an evaluator in `source`, as `line: what`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in BUILTINS | STRING_READERS:
                found.append(f"{node.lineno}: {func.id}()")
            if isinstance(func, ast.Attribute):
                on_builtins = isinstance(func.value, ast.Name) and func.value.id in (
                    "builtins",
                    "__builtins__",
                )
                if func.attr in STRING_READERS or (on_builtins and func.attr in BUILTINS):
                    found.append(f"{node.lineno}: .{func.attr}()")
            # getattr(builtins, "eval") and friends
            if isinstance(func, ast.Name) and func.id == "getattr":
                for arg in node.args[1:2]:
                    if isinstance(arg, ast.Constant) and arg.value in BUILTINS | STRING_READERS:
                        found.append(f"{node.lineno}: getattr(..., {arg.value!r})")
        if isinstance(node, ast.ImportFrom) and node.module == "builtins":
            for alias in node.names:
                if alias.name in BUILTINS:
                    found.append(f"{node.lineno}: from builtins import {alias.name}")
    # Any mention of sympy's readers as code (an import, an attribute, an alias), not in prose.
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME and token.string in STRING_READERS:
            found.append(f"{token.start[0]}: {token.string}")
    return sorted(set(found))


def service_files() -> list[Path]:
    return sorted(SERVICE.rglob("*.py"))


def test_the_scan_sees_the_core() -> None:
    names = {path.name for path in service_files()}
    assert {"parser.py", "evaluator.py", "engine.py", "symbolic.py", "cli.py"} <= names


@pytest.mark.parametrize("path", service_files(), ids=lambda p: str(p.relative_to(SERVICE)))
def test_no_evaluator_is_called(path: Path) -> None:
    assert findings(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "eval(text)",
        "exec(text)",
        "compile(text, '<x>', 'eval')",
        "__import__('os')",
        "import builtins\nbuiltins.eval(text)",
        "getattr(builtins, 'exec')(text)",
        "from builtins import eval as read",
        "import sympy\nsympy.sympify(text)",
        "from sympy import sympify",
        "from sympy.parsing.sympy_parser import parse_expr as p",
        "read = sympy.parsing.sympy_parser.parse_expr",
    ],
)
def test_the_scan_finds_evaluators(source: str) -> None:
    assert findings(source)


@pytest.mark.parametrize(
    "source",
    [
        "import re\nPATTERN = re.compile('a+')",
        "class Evaluator:\n    def compile(self): ...\nEvaluator().compile()",
        "class relu:\n    @classmethod\n    def eval(cls, x): ...",
        "relu.eval(2)",
        "# we never call sympify on user text\nx = 1",
        '"""Built from the tree, never with parse_expr."""',
    ],
)
def test_the_scan_lets_lookalikes_pass(source: str) -> None:
    assert findings(source) == []
