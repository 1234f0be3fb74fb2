"""How large an expression this service takes; every bound is checked before the expensive work.

Each limit is described once, here: its name, its default and what it bounds. The configuration
(`AUTOGRAD_<NAME>`), the request schema's bounds, GET /v1/operations and the README's table of
settings are all derived from these fields. A new limit is one more `limit(default, meaning)`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from service.i18n import _

MEANING = "meaning"  # the metadata key of a limit's description


def limit(default: Any, meaning: str) -> Any:
    """A field of `Limits`: its default and, in a sentence, what it bounds."""
    return field(default=default, metadata={MEANING: meaning})


@dataclass(frozen=True)
class Limits:
    """The bounds in force. Defaults suit an interactive lesson; every one can be configured."""

    max_expression_length: int = limit(100_000, _("Characters of expression text."))
    max_depth: int = limit(200, _("Nesting of parentheses, calls, unary signs and `**`."))
    max_nodes: int = limit(20_000, _("Nodes of the primitive graph micrograd would build."))
    max_identifier_length: int = limit(64, _("Characters in one variable name."))
    max_constant_magnitude: float = limit(
        1e300, _("Largest absolute value of a literal or folded constant.")
    )
    max_bindings: int = limit(10_000, _("Entries in one request's bindings."))
    max_statements: int = limit(1_000, _("Statements of one program."))
    max_sweep_points: int = limit(10_000, _("Points of one sweep: a line, or explicit points."))
    max_sweep_grid: int = limit(200, _("Points along each side of a sweep's grid."))
    max_sweep_cells: int = limit(10_000_000, _("Graph nodes times points of one sweep."))
    # Graphviz lays out about 1,000 nodes in a second; 2,000 took 3 to 5 s, past a request's budget.
    max_drawn_nodes: int = limit(1_000, _("Graph nodes Graphviz lays out for one SVG drawing."))
    max_drawn_edge_ranks: int = limit(
        10_000,
        _(
            "Columns the edges of one SVG drawing pass through, in all: a value used far from "
            "where it is computed makes Graphviz's layout slow."
        ),
    )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def meaning(cls, name: str) -> str:
        """What the limit `name` bounds, in a sentence."""
        # A limit declared without `limit()` has none: tests/test_config.py says which.
        return str(next(f.metadata.get(MEANING, "") for f in fields(cls) if f.name == name))


DEFAULT_LIMITS = Limits()
