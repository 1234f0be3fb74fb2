"""How large an expression this service takes; every bound is checked before the expensive work."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Limits:
    """The bounds in force. Defaults suit an interactive lesson; every one can be configured."""

    max_expression_length: int = 100_000  # characters of expression text
    max_depth: int = 200  # nesting of parentheses, calls, unary signs and `**`
    max_nodes: int = 20_000  # nodes of the primitive graph micrograd would build
    max_identifier_length: int = 64  # characters in one variable name
    max_constant_magnitude: float = 1e300  # |c| for every literal and folded constant
    max_bindings: int = 10_000  # entries in one request's bindings
    max_statements: int = 1_000  # statements of one program

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


DEFAULT_LIMITS = Limits()
