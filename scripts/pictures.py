"""Draw the README's pictures through the service's own API: `python scripts/pictures.py DIR`.

`make pictures` runs it. Each picture is the answer to one request, shown beside it in the README,
so what the page shows is what a client gets.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from service.app import create_app

NEURON = "tanh(x1*w1 + x2*w2 + b)"
BINDINGS = {"x1": 2.0, "x2": 0.0, "w1": -3.0, "w2": 1.0, "b": 6.8813735870195432}
PICTURES: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
    # f and df/dw1 of micrograd's neuron as one weight moves; the lesson's w1 = -3 is marked.
    "neuron-line.svg": (
        "/v1/sweep",
        {"expression": NEURON, "bindings": BINDINGS,
         "vary": [{"name": "w1", "from": -4, "to": 2, "points": 200}]},
        {"Accept": "image/svg+xml"},
    ),
    # the neuron over an input and its weight: contours of f, the gradient field as arrows.
    "neuron-grid.svg": (
        "/v1/sweep",
        {"expression": NEURON, "bindings": BINDINGS,
         "vary": [{"name": "x1", "from": -4, "to": 4, "points": 60},
                  {"name": "w1", "from": -4, "to": 4, "points": 60}]},
        {"Accept": "image/svg+xml"},
    ),
    # the lesson's graph, micrograd's draw_dot style: records name | data | grad.
    "lesson-graph.svg": (
        "/v1/gradients",
        {"expression": "(a + b) * c", "bindings": {"a": 2, "b": -3, "c": 10}, "format": "svg"},
        {},
    ),
}  # fmt: skip


def main(argv: list[str]) -> int:
    target = Path(argv[0] if argv else "docs/pictures")
    target.mkdir(parents=True, exist_ok=True)
    client = create_app({"PICTURE_BURST": len(PICTURES)}).test_client()
    for name, (path, body, headers) in PICTURES.items():
        response = client.post(path, json=body, headers=headers)
        if response.status_code != 200:
            print(f"{name}: {response.status_code} {response.get_data(as_text=True)}")
            return 1
        (target / name).write_bytes(response.data)
        print(f"{target / name}: {len(response.data):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
