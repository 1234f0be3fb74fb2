"""The service's own log: one JSON object per line on stderr, carrying the request id."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from service.api.config import ConfigurationError
from service.i18n import _

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


def configure(level: str) -> None:
    """Log at `level` (a name such as `info`); every app of the process shares the one handler."""
    if not LOGGER.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        LOGGER.addHandler(handler)
    numeric = logging.getLevelName(str(level).upper())
    if not isinstance(numeric, int):
        raise ConfigurationError(
            _(
                "AUTOGRAD_LOG_LEVEL must be a logging level such as info, not {level}",
                level=repr(level),
            )
        )
    LOGGER.setLevel(numeric)
