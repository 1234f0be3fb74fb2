"""`python -m service.api.spec [FILE]` writes the OpenAPI document; `make openapi` runs it."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from service.api.config import DEFAULTS
from service.api.docs import spec_yaml
from service.app import create_app


def generate() -> str:
    """The spec as YAML with the default limits, whatever the configuration in force."""
    return spec_yaml(create_app(DEFAULTS))


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    text = generate()
    if not args:
        sys.stdout.write(text)
        return 0
    # Replace the file in one step, so a failed run never leaves it half written.
    target = Path(args[0])
    with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, suffix=".tmp") as tmp:
        tmp.write(text)
    os.replace(tmp.name, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
