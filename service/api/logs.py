"""The service's own log: one JSON object per line on stderr, carrying the request id."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

LOGGER = logging.getLogger("service.api")
_CONTEXT = ("request_id", "method", "path")  # request fields a record may carry as `extra`


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line, so a traceback's newlines cannot split it."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **{key: getattr(record, key) for key in _CONTEXT if hasattr(record, key)},
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: int) -> None:
    """Log at `level` (see `config.log_level`); every app of the process shares the one handler."""
    if not LOGGER.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        LOGGER.addHandler(handler)
    LOGGER.setLevel(level)
