"""Pictures: plots of a sweep (matplotlib, Agg) and drawings of a graph (Graphviz, Mermaid).

A drawing follows micrograd's `draw_dot`: every value is a record `name | data | grad`, and every
operation is its own small node between its operands and its result. Nothing here knows about
HTTP; a missing Graphviz is a typed refusal the web layer answers with a 501 problem.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import graphviz  # type: ignore[import-untyped]
import numpy as np


def writable_config(
    environ: MutableMapping[str, str], access: Callable[[str, int], bool] = os.access
) -> None:
    """Point matplotlib at a writable copy of its prebuilt font cache when it has to.

    The image builds the cache into MPLCONFIGDIR, but matplotlib ignores a directory it cannot
    write to and rebuilds the cache (about 2 s) in a fresh temporary one; a container run with a
    read-only filesystem can write only to /tmp. There, the prebuilt cache is copied first.
    """
    prebuilt = environ.get("MPLCONFIGDIR")
    if not prebuilt or not os.path.isdir(prebuilt) or access(prebuilt, os.W_OK):
        return
    copy = Path(tempfile.gettempdir(), "autograd-matplotlib")
    shutil.copytree(prebuilt, copy, dirs_exist_ok=True)
    environ["MPLCONFIGDIR"] = str(copy)


writable_config(os.environ)  # before matplotlib reads its configuration directory

import matplotlib  # noqa: E402  (after its configuration directory is settled)

matplotlib.use("Agg")  # no display: render to files only; set before anything draws

from matplotlib import font_manager  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from service.budget import time_budget  # noqa: E402
from service.errors import AutogradError, RequestTooLarge  # noqa: E402
from service.i18n import DEFAULT_LOCALE, _  # noqa: E402
from service.limits import Limits  # noqa: E402

PLOT_FORMATS = {"svg": "image/svg+xml", "png": "image/png"}
GRAPH_FORMATS = {
    "dot": "text/vnd.graphviz",
    "mermaid": "text/vnd.mermaid",
    "svg": "image/svg+xml",
}
# Text stays text in the SVG (searchable, small, and testable); ids and dates are fixed, so the
# same request draws the same bytes.
STYLE: dict[str, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "autograd-service",
    "font.size": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
_TITLE = 60  # characters of the expression shown above a plot: the figure's width
_BOTTOM = 0.11  # the figure's share under the axes: the x axis's ticks and label
_LEGEND_ROW = 0.06  # and more for each row of a legend under them
_ARROWS = 20  # gradient arrows along each side of a grid plot
# Graphviz is stopped past this, below a request's default budget (5 s), so a drawing that takes
# it long is refused as such; `draw`'s limits keep drawings within about a second.
_DRAWING_SECONDS = 3.0


def warm_up() -> None:
    """Load the font list now (from its cache), so the first plot of a process is not slow."""
    font_manager.findfont("DejaVu Sans")


def graphviz_available() -> bool:
    return shutil.which("dot") is not None


# -- plots of a sweep ---------------------------------------------------------------------------


def plot(
    sweep: Mapping[str, Any],
    bindings: Mapping[str, float],
    marked: Mapping[str, Any] | None,
    image: str = "svg",
    explicit: bool = False,
    title: str | None = None,
    locale: str = DEFAULT_LOCALE,
) -> bytes:
    """A sweep drawn: a line as f and its derivatives, a grid as contours of f with the gradient
    field as arrows, explicit points against their index. `marked` is the sweep's document at
    the request's own bindings, when they give every input, to mark that point; `explicit` says
    the sweep was of explicit points rather than along `vary`. `title` says what f is (see
    `service.sweep.caption`; by default the expression), and the labels are in `locale`."""
    value = np.asarray(sweep["value"], dtype=float)
    axes = {name: np.asarray(values, dtype=float) for name, values in sweep["axes"].items()}
    gradients = {name: np.asarray(g, dtype=float) for name, g in sweep["gradients"].items()}
    _check_plottable([value, *axes.values(), *gradients.values()], bindings, marked)
    with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]
        # Fixed margins rather than a layout engine, which draws the figure twice to fit it.
        figure = Figure(figsize=(6.4, 4.4))
        figure.subplots_adjust(left=0.12, right=0.96, bottom=_BOTTOM, top=0.92)
        ax = figure.add_subplot()
        # One line: a title that wraps grows upwards, off the top of the figure.
        title = " ".join((sweep["expression"] if title is None else title).split())
        # over the whole figure, not the axes, which a grid's colour bar pushes left
        shown = title if len(title) <= _TITLE else title[: _TITLE - 1] + "…"
        figure.suptitle(f"f = {shown}", y=0.985)
        if value.ndim == 2 and any(np.ptp(axis) == 0 for axis in axes.values()):
            # A grid that does not move along one side (one point, or from = to) is the line it
            # is, contours needing two values each way: f along the other input, the one held
            # named under the axis.
            (first, x), (second, y) = axes.items()
            if np.ptp(y) == 0:  # value[i][j] is at x[i], y[j]: the line is the first column
                along, held, at = first, second, y[0]
                f, slope = value[:, 0], gradients[first][:, 0]
            else:
                along, held, at = second, first, x[0]
                f, slope = value[0], gradients[second][0]
            _line(ax, {along: axes[along]}, f, {along: slope}, bindings, marked, locale)
            ax.set_xlabel(f"{along}    ({held} = {at:g})")
        elif value.ndim == 2:
            _grid(ax, figure, axes, value, gradients, bindings)
        elif not explicit and len(axes) == 1:
            _line(ax, axes, value, gradients, bindings, marked, locale)
        else:
            _points(ax, value, gradients, locale)
        if not np.isfinite(value).any():  # an empty plot must not look like a flat one
            note = _("f is not defined at any point of this sweep").translate(locale)
            ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center")
        buffer = io.BytesIO()
        figure.savefig(buffer, format=image, dpi=100, metadata=_metadata(image))
    return buffer.getvalue()


# The largest magnitude a plot shows: its axes' ticks and margins are differences of the numbers
# plotted, which overflow near the largest double. It is the largest constant's default.
PLOTTABLE = 1e300


def _check_plottable(
    arrays: list[np.ndarray], bindings: Mapping[str, float], marked: Mapping[str, Any] | None
) -> None:
    """Refuse a plot of numbers too large for its axes; the JSON sweep carries them."""
    numbers = [
        *(np.abs(array[np.isfinite(array)]).max(initial=0.0) for array in arrays),
        *(abs(x) for x in bindings.values()),
        *(abs(x) for x in (marked or {}).get("gradients", {}).values() if x is not None),
        abs((marked or {}).get("value") or 0.0),
    ]
    largest = float(max(numbers, default=0.0))
    if largest > PLOTTABLE:
        raise AutogradError(
            "plot_out_of_range",
            _(
                "the plot would show numbers as large as {largest}; a plot shows magnitudes up "
                "to {bound}: ask for the sweep as JSON, or sweep a smaller range",
                largest=format(largest, ".3g"),
                bound=format(PLOTTABLE, "g"),
            ),
        )


def _metadata(image: str) -> dict[str, Any]:
    return {"Date": None} if image == "svg" else {"Software": None}


def _line(
    ax: Any,
    axes: dict[str, np.ndarray],
    value: np.ndarray,
    gradients: dict[str, np.ndarray],
    bindings: Mapping[str, float],
    marked: Mapping[str, Any] | None,
    locale: str,
) -> None:
    ((name, x),) = axes.items()
    # A point defined between undefined ones is no segment of a line, nor is a line that does
    # not move (from = to): it is marked.
    marker = "o" if np.isfinite(value).sum() <= 1 or len(x) <= 2 or np.ptp(x) == 0 else None
    ax.plot(x, value, label="f", color="tab:blue", linewidth=2, marker=marker, clip_on=False)
    ax.plot(x, gradients[name], label=f"∂f/∂{name}", color="tab:orange", linestyle="--",
            marker=marker, clip_on=False)  # fmt: skip
    ax.set_xlabel(name)
    ax.set_ylabel(_("f and ∂f/∂{name}", name=name).translate(locale))
    _span(ax.set_xlim, x)
    at = bindings.get(name)
    if at is not None and _within(at, x):  # a binding far outside would squeeze the range
        ax.axvline(at, color="grey", linewidth=1, linestyle=":")
        if marked is not None and marked["value"] is not None:
            ax.plot([at], [marked["value"]], "o", color="tab:blue")
            ax.plot([at], [marked["gradients"][name]], "o", color="tab:orange")
            right = at > (x.min() + x.max()) / 2  # the text toward the middle, over the plot
            ax.annotate(f"{name} = {at:g}", (at, marked["value"]), textcoords="offset points",
                        xytext=(-6 if right else 6, 6),
                        ha="right" if right else "left")  # fmt: skip
    _legend_below(ax)


def _grid(
    ax: Any,
    figure: Figure,
    axes: dict[str, np.ndarray],
    value: np.ndarray,
    gradients: dict[str, np.ndarray],
    bindings: Mapping[str, float],
) -> None:
    (first, x), (second, y) = axes.items()
    # value[i][j] is at x[i], y[j]; matplotlib wants rows along y, so the arrays are transposed.
    z = np.ma.masked_invalid(value.T)
    if z.count() >= 1 and len(x) > 1 and len(y) > 1:
        filled = ax.contourf(x, y, z, levels=20, cmap="viridis")
        figure.colorbar(filled, ax=ax, label="f")
        step_x, step_y = max(1, len(x) // _ARROWS), max(1, len(y) // _ARROWS)
        u = np.ma.masked_invalid(gradients[first].T[::step_y, ::step_x])
        v = np.ma.masked_invalid(gradients[second].T[::step_y, ::step_x])
        ax.quiver(x[::step_x], y[::step_y], u, v, color="white", alpha=0.8, pivot="mid")
    ax.set_xlabel(first)
    ax.set_ylabel(second)
    _span(ax.set_xlim, x)
    _span(ax.set_ylim, y)
    if (
        first in bindings
        and second in bindings
        and _within(bindings[first], x)
        and _within(bindings[second], y)
    ):
        at = f"({bindings[first]:g}, {bindings[second]:g})"  # the axes' labels name them
        ax.plot([bindings[first]], [bindings[second]], "o", color="tab:red")
        # named beside the point, on a patch of its own: a legend in a corner could hide it
        patch = {"boxstyle": "round", "fc": "white", "alpha": 0.8}
        # on the side of the point toward the middle, so that it stays over the plot
        right = bindings[first] > (x.min() + x.max()) / 2
        above = bindings[second] > (y.min() + y.max()) / 2
        ax.annotate(at, (bindings[first], bindings[second]), textcoords="offset points",
                    xytext=(-6 if right else 6, -6 if above else 6), bbox=patch,
                    ha="right" if right else "left", va="top" if above else "bottom")  # fmt: skip


def _span(set_limits: Callable[[float, float], Any], axis: np.ndarray) -> None:
    """The axis shows the range swept, whatever is defined in it."""
    if len(axis) > 1 and axis.min() < axis.max():
        set_limits(float(axis.min()), float(axis.max()))


def _within(at: float, axis: np.ndarray) -> bool:
    return len(axis) > 0 and bool(axis.min() <= at <= axis.max())


def _points(ax: Any, value: np.ndarray, gradients: dict[str, np.ndarray], locale: str) -> None:
    index = np.arange(len(value))
    ax.set_xlim(-0.5, len(value) - 0.5)  # every point's place, defined or not
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.plot(index, value, "o-", label="f", linewidth=2)
    for name, gradient in gradients.items():
        ax.plot(index, gradient, ".--", label=f"∂f/∂{name}")
    ax.set_xlabel(_("point").translate(locale))
    ax.set_ylabel(_("f and its gradients").translate(locale))
    _legend_below(ax)


_LEGEND_COLUMNS = 4


def _legend_below(ax: Any) -> None:
    """The legend under the axes, where it hides none of the curves (placing it "best" inside
    them would test every point of every curve); the axes shrink by its rows."""
    handles, labels = ax.get_legend_handles_labels()
    columns = min(len(labels), _LEGEND_COLUMNS)
    rows = -(-len(labels) // columns)
    figure = ax.get_figure()
    figure.subplots_adjust(bottom=_BOTTOM + _LEGEND_ROW * rows)
    figure.legend(handles, labels, loc="lower center", ncols=columns, frameon=False)


# -- drawings of a graph ------------------------------------------------------------------------


def draw(document: Mapping[str, Any], kind: str, limits: Limits) -> bytes:
    """The graph of an evaluation or structure document as `dot`, `mermaid` or `svg`. Graphviz's
    time grows faster than the graph, so an SVG drawing is bounded by its nodes, and by the
    columns its edges pass through (`max_drawn_edge_ranks`), refused before Graphviz starts."""
    if kind == "mermaid":
        return mermaid(document).encode()
    source = dot(document)
    if kind == "dot":
        return source.encode()
    nodes = len(document["graph"]["nodes"])
    if nodes > limits.max_drawn_nodes:
        message = _(
            "the graph has {nodes} nodes; at most {maximum} are drawn as SVG here: ask for "
            "format dot or mermaid and lay it out yourself",
            nodes=nodes,
            maximum=limits.max_drawn_nodes,
        )
        raise RequestTooLarge(
            "graph_too_large_to_draw", message, "max_drawn_nodes", limits.max_drawn_nodes
        )
    ranks = edge_ranks(document)
    if ranks > limits.max_drawn_edge_ranks:
        message = _(
            "the graph uses values far from where they are computed: its edges pass through "
            "{ranks} columns, and at most {maximum} are drawn as SVG here: ask for format dot "
            "or mermaid and lay it out yourself",
            ranks=ranks,
            maximum=limits.max_drawn_edge_ranks,
        )
        raise RequestTooLarge(
            "graph_too_large_to_draw", message, "max_drawn_edge_ranks", limits.max_drawn_edge_ranks
        )
    return render_svg(source)


def edge_ranks(document: Mapping[str, Any]) -> int:
    """The columns (Graphviz's ranks) the edges of the drawing pass through, in all: each is a
    point Graphviz places and routes, and its layout's time grows with them, faster than with
    the nodes (a sum of `a * b` terms is quadratic in them: every term reads a and b).

    Each value is placed as late as its users allow, as Graphviz places it to keep edges short:
    an operation takes two columns (its circle, then its record), so a value's record stands
    two columns before its nearest user's."""
    graph = document["graph"]
    nodes = graph["nodes"]
    column: dict[int, int] = {graph["root"]: 0}
    for node in reversed(nodes):  # users before the values they use
        here = column.setdefault(node["id"], 0)  # a value no one uses stands with the output
        for child in node["children"]:
            column[child] = max(column.get(child, 0), here + 2)
    return sum(
        column[child] - column[node["id"]] - 2 for node in nodes for child in node["children"]
    )


def _name(node: Mapping[str, Any]) -> str:
    """What a value's record is called: its name where it has one (a variable, an assigned or
    declared value), a constant's number; blank for an unnamed result, as in draw_dot."""
    name = node.get("name")
    if name:
        return str(name)
    return "" if node["kind"] == "operation" else str(node["label"])


def _number(x: Any) -> str:
    if x is None:
        return "—"
    return f"{x:.4f}" if (math.isfinite(x) and 1e-4 <= abs(x) < 1e6) or x == 0 else f"{x:.4g}"


def _op_label(node: Mapping[str, Any]) -> str:
    return str(node["label"])


def dot(document: Mapping[str, Any]) -> str:
    """Graphviz text in the style of micrograd's draw_dot, left to right."""
    # Graphviz's network simplex may run for seconds on a graph whose shared nodes cross many
    # edges (a program that reuses each value twice); a bound on its iterations, as a multiple
    # of the nodes, makes such a layout two to three times faster and leaves the usual graphs
    # as they were (`draw` refuses the slowest before Graphviz starts).
    layout = {"rankdir": "LR", "nslimit": "1", "nslimit1": "1"}
    graph = graphviz.Digraph(graph_attr=layout, node_attr={"fontname": "Helvetica"})
    for node in document["graph"]["nodes"]:
        i = node["id"]
        fields = [_name(node), f"data {_number(node.get('value'))}",
                  f"grad {_number(node.get('grad'))}"]  # fmt: skip
        graph.node(f"n{i}", "{ " + " | ".join(map(_record_text, fields)) + " }", shape="record")
        if node["kind"] == "operation":
            graph.node(f"n{i}op", _op_label(node), shape="circle", fontsize="10", margin="0")
            graph.edge(f"n{i}op", f"n{i}")
            for child in node["children"]:
                graph.edge(f"n{child}", f"n{i}op")
    return str(graph.source)


def _record_text(text: str) -> str:
    # Braces, bars and angle brackets structure a record; a backslash escapes them.
    for special in '\\{}|<>"':
        text = text.replace(special, "\\" + special)
    return text


def mermaid(document: Mapping[str, Any]) -> str:
    """A Mermaid flowchart of the same drawing, for Markdown pages."""
    lines = ["flowchart LR"]
    for node in document["graph"]["nodes"]:
        i = node["id"]
        fields = [_name(node) or " ", f"data {_number(node.get('value'))}",
                  f"grad {_number(node.get('grad'))}"]  # fmt: skip
        lines.append(f'    n{i}["{_mermaid_text(" | ".join(fields))}"]')
        if node["kind"] == "operation":
            lines.append(f'    n{i}op(("{_mermaid_text(_op_label(node))}"))')
            lines.append(f"    n{i}op --> n{i}")
            lines.extend(f"    n{child} --> n{i}op" for child in node["children"])
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    # Inside a quoted label Mermaid reads entity codes; a quote would end the label.
    return (
        text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    )


def render_svg(source: str) -> bytes:
    """Graphviz's SVG of a dot text; a typed refusal when Graphviz is not installed."""
    if not graphviz_available():
        raise AutogradError(
            "graphviz_unavailable",
            _(
                "drawing the graph as SVG needs Graphviz's dot program, which this server "
                "does not have; ask for format dot or mermaid, or install Graphviz (Debian and "
                "Ubuntu: {debian}; macOS: {macos})",
                debian="apt-get install graphviz",
                macos="brew install graphviz",
            ),
        )
    try:
        # Past the budget `dot` is interrupted. `graphviz.pipe` runs it through
        # `subprocess.run`, which kills it on the way out (`Source.pipe` feeds it line by line
        # through a bare Popen, which would leave it running).
        with time_budget(_DRAWING_SECONDS, "drawing_too_slow"):
            return bytes(graphviz.pipe("dot", "svg", source.encode()))
    except graphviz.ExecutableNotFound:  # removed since the check above
        raise AutogradError(
            "graphviz_unavailable", _("Graphviz's dot program is missing")
        ) from None
