"""Sweeps over HTTP and the pictures: plots that parse as SVG with their axes, PNG, the GET form,
and graphs drawn as dot, mermaid and svg in the style of micrograd's draw_dot."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from conftest import needs_dot
from flask.testing import FlaskClient
from matplotlib.figure import Figure

from service import pictures
from service import sweep as sweeps
from service.api.examples import SHIPPING_PROGRAM
from service.app import create_app
from service.evaluator import Evaluator

SVG = "{http://www.w3.org/2000/svg}"
LESSON = {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}}
LINE = {
    "expression": "x * tanh(x) - log(x)",
    "bindings": {"x": 0.5},
    "vary": [{"name": "x", "from": -1, "to": 3, "points": 200}],
}
GRID = {
    "expression": "x * y + relu(x)",
    "bindings": {"x": 0.5, "y": -0.25},
    "vary": [
        {"name": "x", "from": -2, "to": 2, "points": 30},
        {"name": "y", "from": -1, "to": 1, "points": 20},
    ],
}


@pytest.fixture(scope="module")
def client() -> FlaskClient:
    return create_app({"TESTING": True, "PICTURE_BURST": 1000}).test_client()


def texts(svg: bytes) -> list[str]:
    """Every text of an SVG document, which must parse as XML."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return ["".join(element.itertext()) for element in root.iter(f"{SVG}text")]


def test_a_line_sweep_as_json(client: FlaskClient) -> None:
    response = client.post("/v1/sweep", json=LINE)
    assert response.status_code == 200
    document = response.get_json()
    assert len(document["axes"]["x"]) == len(document["value"]) == 200
    assert len(document["gradients"]["x"]) == 200
    failed = [e["index"] for e in document["errors"]]
    assert failed == [i for i, x in enumerate(document["axes"]["x"]) if x <= 0]
    assert {e["kind"] for e in document["errors"]} == {"log_domain"}
    assert all(document["value"][i] is None for i in failed)


def test_a_line_plot_is_svg_with_its_axes_and_the_binding_marked(client: FlaskClient) -> None:
    response = client.post("/v1/sweep", json=LINE, headers={"Accept": "image/svg+xml"})
    assert response.status_code == 200
    assert response.mimetype == "image/svg+xml"
    found = texts(response.data)
    assert "x" in found  # the x axis label
    assert "f and ∂f/∂x" in found  # the y axis label
    assert {"f", "∂f/∂x"} <= set(found)  # the legend
    assert "x = 0.5" in found  # the request's binding
    assert "f = x * tanh(x) - log(x)" in found
    root = ET.fromstring(response.data)
    ids = {element.get("id") for element in root.iter()}
    assert {"axes_1", "matplotlib.axis_1", "matplotlib.axis_2"} <= ids


def test_a_grid_plot_has_contours_arrows_and_both_axes(client: FlaskClient) -> None:
    response = client.post("/v1/sweep", json=GRID, headers={"Accept": "image/svg+xml"})
    assert response.status_code == 200
    found = texts(response.data)
    assert {"x", "y", "f"} <= set(found)  # both axes and the colour bar
    assert "(0.5, -0.25)" in found  # the binding, named beside its point
    ids = {element.get("id") for element in ET.fromstring(response.data).iter()}
    assert any(i and i.startswith("QuadContourSet") for i in ids)
    assert any(i and i.startswith("Quiver") for i in ids)


@pytest.mark.parametrize(("x_points", "y_points", "along", "held"), [
    (1, 5, "y", "x = 3"), (7, 1, "x", "y = 1"), (1, 1, "x", "y = 1"),
])  # fmt: skip
def test_a_grid_one_point_wide_is_drawn_as_the_line_it_is(
    client: FlaskClient, x_points: int, y_points: int, along: str, held: str
) -> None:
    vary = [{"name": "x", "from": 3, "to": 4, "points": x_points},
            {"name": "y", "from": 1, "to": 2, "points": y_points}]  # fmt: skip
    body = {"expression": "x * x * y + y", "vary": vary}
    response = client.post("/v1/sweep", json=body, headers={"Accept": "image/svg+xml"})
    assert response.status_code == 200
    found = texts(response.data)
    assert f"{along}    ({held})" in found  # the input held, named under the axis
    assert f"∂f/∂{along}" in found
    ids = {element.get("id") for element in ET.fromstring(response.data).iter()}
    assert not any(i and i.startswith("QuadContourSet") for i in ids)


def test_a_sweep_that_does_not_move_is_drawn_as_what_it_is(client: FlaskClient) -> None:
    svg = {"Accept": "image/svg+xml"}
    held = [{"name": "x", "from": 1, "to": 1, "points": 5},
            {"name": "y", "from": 0, "to": 2, "points": 5}]  # fmt: skip
    found = texts(client.post("/v1/sweep", json={"expression": "tanh(x) * y", "vary": held},
                              headers=svg).data)  # fmt: skip
    assert "y    (x = 1)" in found
    # a line of no length: the one point it is, marked
    ax = Figure().add_subplot()
    x = np.ones(5)
    pictures._line(ax, {"x": x}, 2 * x, {"x": 2 * x}, {}, None, "en")
    assert all(line.get_marker() == "o" for line in ax.get_lines())


def test_a_grid_as_json_has_rows_for_the_first_name(client: FlaskClient) -> None:
    document = client.post("/v1/sweep", json=GRID).get_json()
    assert len(document["value"]) == 30 and {len(row) for row in document["value"]} == {20}
    x, y = document["axes"]["x"][3], document["axes"]["y"][7]
    assert document["value"][3][7] == pytest.approx(x * y + max(x, 0), rel=1e-12)
    assert document["gradients"]["y"][3][7] == pytest.approx(x, rel=1e-12)


@pytest.mark.slow
def test_png_and_the_get_form(client: FlaskClient) -> None:
    png = client.post("/v1/sweep", json=LINE, headers={"Accept": "image/png"})
    assert png.mimetype == "image/png" and png.data.startswith(b"\x89PNG\r\n\x1a\n")
    url = "/v1/sweep?expression=x*y&vary=x:-2:2:50&bind=y:3&bind=x:1"
    svg = client.get(url)
    assert svg.status_code == 200 and svg.mimetype == "image/svg+xml"
    assert "x = 1" in texts(svg.data)
    assert client.get(url + "&format=png").data.startswith(b"\x89PNG")
    document = client.get(url + "&format=json").get_json()
    assert document["value"][0] == -6.0 and document["gradients"]["y"][-1] == 2.0
    grid = client.get("/v1/sweep?expression=x*y&vary=x:-2:2:5&vary=y:0:1:3&format=json")
    assert len(grid.get_json()["value"]) == 5


# A program whose output, by default its last statement w, can be chosen: q = x*y + x.
PROGRAM = "z = x * y\nq = z + x\nw = q * z"
PROGRAM_URL = "/v1/sweep?expression=z%3Dx*y%3Bq%3Dz%2Bx%3Bw%3Dq*z&vary=x:-1:1:5&bind=y:2"


def test_the_get_form_takes_a_programs_output_as_post_does(client: FlaskClient) -> None:
    line = [{"name": "x", "from": -1, "to": 1, "points": 5}]
    body = {"expression": PROGRAM, "bindings": {"y": 2}, "vary": line, "output": "q"}
    posted = client.post("/v1/sweep", json=body).get_json()
    got = client.get(PROGRAM_URL + "&output=q&format=json").get_json()
    assert got["value"] == posted["value"] == [-3.0, -1.5, 0.0, 1.5, 3.0]
    assert got["gradients"] == posted["gradients"]
    assert client.get(PROGRAM_URL + "&format=json").get_json()["value"][0] == 6.0  # w
    plot = client.get(PROGRAM_URL + "&output=q")
    assert plot.status_code == 200 and plot.mimetype == "image/svg+xml"


@pytest.mark.parametrize(
    ("query", "kind", "pointer"),
    [
        ("&bogus=1", "validation-error", "/bogus"),
        ("&outptu=q", "validation-error", "/outptu"),  # misspelt: refused, not ignored
        ("&output=q&Output=w", "validation-error", "/Output"),
        ("&output=", "validation-error", "/output"),
        ("&output=1q", "validation-error", "/output"),
        ("&output=nowhere", "unknown-output", None),
    ],
)
def test_the_get_form_refuses_what_post_refuses(
    client: FlaskClient, query: str, kind: str, pointer: str | None
) -> None:
    response = client.get(PROGRAM_URL + query)
    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    problem = response.get_json()
    assert problem["type"].endswith("/" + kind)
    if pointer is not None:
        assert [error["pointer"] for error in problem["errors"]] == [pointer]


LABELS = {
    "en": ("f and ∂f/∂x", "f and its gradients", "point"),
    "ru": ("f и ∂f/∂x", "f и её градиенты", "точка"),
    "et": ("f ja ∂f/∂x", "f ja selle gradiendid", "punkt"),
}


@pytest.mark.parametrize("locale", ["en", "ru", "et"])
def test_a_plot_speaks_the_language_asked_for(client: FlaskClient, locale: str) -> None:
    headers = {"Accept": "image/svg+xml", "Accept-Language": locale}
    along, gradients, point = LABELS[locale]
    line = texts(client.post("/v1/sweep", json=LINE, headers=headers).data)
    assert along in line and "f = x * tanh(x) - log(x)" in line
    points = {"expression": "x * y", "points": [{"x": 1, "y": 2}, {"x": 2, "y": 3}]}
    found = texts(client.post("/v1/sweep", json=points, headers=headers).data)
    assert {gradients, point, "∂f/∂x", "∂f/∂y"} <= set(found)


def test_the_cli_plots_in_english() -> None:
    document = sweeps.sweep(Evaluator(), "x * x", {}, [sweeps.Axis("x", -1, 1, 5)])
    assert "f and ∂f/∂x" in texts(pictures.plot(document, {}, None))


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("", "f = cost"),
        ("&output=raw_cost", "f = raw_cost"),
        ("&output=weight", "f = weight"),
    ],
)
def test_a_programs_plot_is_titled_by_its_output(
    client: FlaskClient, query: str, title: str
) -> None:
    url = f"/v1/sweep?expression={quote(SHIPPING_PROGRAM)}&vary=weight:0:2:3{query}"
    found = texts(client.get(url, headers={"Accept-Language": "ru"}).data)
    assert title in found
    assert not [text for text in found if "#" in text or "\n" in text or "Value" in text]


def test_a_long_expression_is_one_shortened_line() -> None:
    expression = "".join(f"x * {i} +  # term {i}\n" for i in range(40)) + "x"
    document = sweeps.sweep(Evaluator(), expression, {}, [sweeps.Axis("x", -1, 1, 3)])
    title = sweeps.caption(Evaluator(), expression)
    (shown,) = [t for t in texts(pictures.plot(document, {}, None, title=title)) if "f =" in t]
    assert shown.startswith("f = x * 0 + x * 1 + ") and shown.endswith("…")
    assert "#" not in shown and "\n" not in shown and len(shown) <= 75


def test_plots_of_points_and_of_failing_sweeps(client: FlaskClient) -> None:
    points = {"expression": "a / b", "bindings": {"a": 1}, "points": [{"b": 1}, {"b": 0}, {"b": 2}]}
    response = client.post("/v1/sweep", json=points, headers={"Accept": "image/svg+xml"})
    assert response.status_code == 200 and "point" in texts(response.data)
    nowhere = {"expression": "log(x)", "vary": [{"name": "x", "from": -2, "to": -1, "points": 9}]}
    response = client.post("/v1/sweep", json=nowhere, headers={"Accept": "image/svg+xml"})
    assert response.status_code == 200
    found = texts(response.data)
    assert "f is not defined at any point of this sweep" in found  # not an empty, flat plot
    assert {"\N{MINUS SIGN}2.0", "\N{MINUS SIGN}1.0"} <= set(found)  # the axis spans the range
    sides = [{"name": "x", "from": -2, "to": -1, "points": 3},
             {"name": "y", "from": 1, "to": 2, "points": 3}]  # fmt: skip
    grid = {"expression": "log(x*y)", "vary": sides}
    response = client.post("/v1/sweep", json=grid, headers={"Accept": "image/png"})
    assert response.status_code == 200


def test_json_is_the_default_answer(client: FlaskClient) -> None:
    for accept in ("*/*", "application/json", "text/html", "application/json, image/svg+xml;q=0.5"):
        response = client.post("/v1/sweep", json=LINE, headers={"Accept": accept})
        assert response.mimetype == "application/json", accept


# -- graphs as pictures -----------------------------------------------------------------------


def test_dot_is_micrograd_draw_dot(client: FlaskClient) -> None:
    response = client.post("/v1/gradients", json={**LESSON, "format": "dot"})
    assert response.status_code == 200 and response.mimetype == "text/vnd.graphviz"
    text = response.get_data(as_text=True)
    assert text.startswith("digraph {")
    # every value a record name | data | grad, every operation its own node between them
    assert 'n0 [label="{ a | data 2.0000 | grad 10.0000 }" shape=record]' in text
    assert 'n3 [label="{ c | data 10.0000 | grad -1.0000 }" shape=record]' in text
    assert 'n4op [label="*"' in text and "n4op -> n4" in text
    assert "n2 -> n4op" in text and "n3 -> n4op" in text
    assert text.count("shape=record") == 5 and text.count("shape=circle") == 2


def test_mermaid(client: FlaskClient) -> None:
    response = client.post("/v1/gradients", json={**LESSON, "format": "mermaid"})
    text = response.get_data(as_text=True)
    assert text.startswith("flowchart LR\n")
    assert 'n0["a | data 2.0000 | grad 10.0000"]' in text
    assert 'n4op(("*"))' in text and "n4op --> n4" in text


def test_the_graph_without_numbers(client: FlaskClient) -> None:
    response = client.post("/v1/graph", json={"expression": "a - b", "format": "dot"})
    text = response.get_data(as_text=True)
    assert 'label="{ a | data — | grad — }"' in text
    primitive = client.post(
        "/v1/graph", json={"expression": "a - b", "format": "dot", "granularity": "primitive"}
    )
    assert primitive.get_data(as_text=True).count("shape=circle") == 2  # `*` by -1, then `+`


@needs_dot
def test_svg_is_rendered_by_graphviz(client: FlaskClient) -> None:
    response = client.post("/v1/gradients", json={**LESSON, "format": "svg"})
    assert response.status_code == 200 and response.mimetype == "image/svg+xml"
    found = texts(response.data)
    assert {"a", "data 2.0000", "grad 10.0000", "*", "+"} <= set(found)


def test_a_record_escapes_what_structures_it() -> None:
    document = {"graph": {"nodes": [{"id": 0, "kind": "variable", "label": "a", "children": [],
                                     "name": "{x|<y>}", "value": 1.0, "grad": None}]}}  # fmt: skip
    assert r"\{x\|\<y\>\}" in pictures.dot(document)
    assert "#lt;" in pictures.mermaid(document)


def test_numbers_in_records() -> None:
    assert pictures._number(2.0) == "2.0000"
    assert pictures._number(0.0) == "0.0000"
    assert pictures._number(1e-300) == "1e-300"
    assert pictures._number(123456789.0) == "1.235e+08"
    assert pictures._number(None) == "—"


def test_program_names_label_the_records(client: FlaskClient) -> None:
    from tests.test_sweep import SHIPPING

    response = client.post("/v1/gradients", json={"expression": SHIPPING, "format": "dot"})
    text = response.get_data(as_text=True)
    assert '"{ weight_fee | data 45.0000 | grad 1.0000 }"' in text
    assert '"{ cost | data 111.0000 | grad 1.0000 }"' in text
    assert "label=relu" in text
    line = {"expression": SHIPPING, "vary": [{"name": "weight", "from": 0, "to": 5, "points": 6}]}
    document = client.post("/v1/sweep", json=line).get_json()
    assert document["value"] == [66.0 + 15 * w for w in range(6)]
    output = client.post("/v1/sweep", json={**line, "output": "weight_fee"}).get_json()
    assert output["value"] == [15.0 * w for w in range(6)]


def test_a_read_only_font_cache_is_copied_where_matplotlib_can_write(tmp_path: Any) -> None:
    prebuilt = tmp_path / "prebuilt"
    prebuilt.mkdir()
    (prebuilt / "fontlist-v390.json").write_text("{}")
    environ = {"MPLCONFIGDIR": str(prebuilt)}
    pictures.writable_config(environ, access=lambda path, mode: True)
    assert environ["MPLCONFIGDIR"] == str(prebuilt)  # writable: left alone
    pictures.writable_config(environ, access=lambda path, mode: False)
    copy = environ["MPLCONFIGDIR"]
    assert copy != str(prebuilt) and (Path(copy) / "fontlist-v390.json").read_text() == "{}"
    unset: dict[str, str] = {}
    pictures.writable_config(unset, access=lambda path, mode: False)
    assert unset == {}


@needs_dot
def test_a_program_that_reuses_each_value_twice_is_drawn_within_the_request_budget(
    client: FlaskClient,
) -> None:
    # 146 nodes whose shared values cross many edges: Graphviz's layout took about 10 s here,
    # past the 5 s request budget, before its iterations were bounded.
    lines = ["x = Value(1.5)", "a0 = x"]
    lines += [f"a{i} = a{i - 1}*x - a{i - 1}/(x+1)*0.001" for i in range(1, 31)]
    response = client.post("/v1/graph", json={"expression": "\n".join(lines), "format": "svg"})
    assert response.status_code == 200
    assert response.content_type.startswith("image/svg+xml")


def test_a_line_along_an_input_the_output_does_not_use_marks_its_binding(
    client: FlaskClient,
) -> None:
    # y is declared but unused: its gradient is 0 along the line, and at the marked binding
    body = {
        "expression": "x = Value(2.0)\ny = Value(1.0)\nz = x * x",
        "vary": [{"name": "y", "from": -1, "to": 1, "points": 5}],
        "bindings": {"y": 0.5},
    }
    response = client.post("/v1/sweep", json=body, headers={"Accept": "image/svg+xml"})
    assert response.status_code == 200
    assert "y = 0.5" in texts(response.data)
    at, marked = sweeps.at_bindings(Evaluator(), body["expression"], body["bindings"])
    assert at == {"x": 2.0, "y": 0.5}  # x at its declared default
    assert marked == {"value": 4.0, "gradients": {"x": 4.0, "y": 0.0}}


@pytest.mark.parametrize(
    "body",
    [
        {"expression": "x*1e300*1e8", "vary": [{"name": "x", "from": -1, "to": 1, "points": 5}]},
        {"expression": "x", "vary": [{"name": "x", "from": -1.7e308, "to": 1.7e308, "points": 5}]},
        {"expression": "a", "vary": [{"name": "a", "from": -1e308, "to": -1e308, "points": 1}]},
        {"expression": "c - a", "points": [{"a": 1e308, "c": 0}, {"a": -1, "c": 1e308}]},
        {"expression": "x * 1e154 * y", "vary": [
            {"name": "x", "from": -1e154, "to": 1e154, "points": 5},
            {"name": "y", "from": -1, "to": 1, "points": 5}]},
    ],
)  # fmt: skip
@pytest.mark.parametrize("image", ["image/svg+xml", "image/png"])
def test_numbers_past_a_plots_axes_are_refused_and_the_json_sweep_has_them(
    client: FlaskClient, body: dict[str, Any], image: str
) -> None:
    response = client.post("/v1/sweep", json=body, headers={"Accept": image})
    assert response.status_code == 422, response.data[:200]
    assert response.get_json()["type"].endswith("/plot-out-of-range")
    assert "ask for the sweep as JSON" in response.get_json()["detail"]
    assert client.post("/v1/sweep", json=body).status_code == 200


def test_numbers_up_to_the_largest_constant_are_plotted(client: FlaskClient) -> None:
    body = {"expression": "x * 1e300", "vary": [{"name": "x", "from": -1, "to": 1, "points": 5}]}
    response = client.post("/v1/sweep", json=body, headers={"Accept": "image/png"})
    assert response.status_code == 200 and response.mimetype == "image/png"


def test_a_binding_outside_the_range_is_not_marked_and_does_not_stretch_it(
    client: FlaskClient,
) -> None:
    far = {**LINE, "bindings": {"x": 1e10}}
    found = texts(client.post("/v1/sweep", json=far, headers={"Accept": "image/svg+xml"}).data)
    assert not [text for text in found if text.startswith("x = ")]
    assert "3.0" in found and not [text for text in found if "1e10" in text or text == "10"]
