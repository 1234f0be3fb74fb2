"""The service's settings: each one's default and meaning, and how it is read from `AUTOGRAD_*`."""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from service.api.costs import HeavySlots, RequestCosts
from service.derivatives import DEFAULT_SYMBOLIC_LIMITS, SymbolicLimits
from service.i18n import _
from service.limits import MEANING, Limits

ENVIRONMENT_PREFIX = "AUTOGRAD"

# Variables with the prefix that are not settings of the app: gunicorn.conf.py reads the first;
# docker-compose.yml and deploy/swarm/stack.yml the others (the replicas' workers, the published
# ports, the images' tag).
SERVER_VARIABLES = (
    "AUTOGRAD_WORKERS",
    "AUTOGRAD_REPLICA_WORKERS",
    "AUTOGRAD_HTTP_PORT",
    "AUTOGRAD_SCALE_HTTP_PORT",
    "AUTOGRAD_IMAGE_TAG",
    "AUTOGRAD_SWARM_HTTP_PORT",
    "AUTOGRAD_SWARM_ERRORS_PORT",
)


class ConfigurationError(RuntimeError, ValueError):
    """A setting the service cannot start with, said in one line.

    A RuntimeError because gunicorn reports one raised while it loads the app as a single
    `Error: ...` line and exits with status 1, instead of printing a traceback; a ValueError
    because it is one, for callers of `create_app` that catch those.
    """


# Where GET /v1/operations tells clients a setting's value in force: among its `limits` (the
# bounds a problem's `limit` names) or among its other `settings` a client plans requests by.
Reported = Literal["limits", "settings"]


@dataclass(frozen=True)
class Setting:
    """One setting: `AUTOGRAD_<name>` overrides its default; `meaning` says what it is for."""

    name: str
    default: Any
    meaning: str
    # None: nothing a client plans by (or, for the cache's bounds, reported on their own).
    reported: Reported | None = None

    @property
    def variable(self) -> str:
        return f"{ENVIRONMENT_PREFIX}_{self.name}"


# Every limit of the core, then the settings of the web layer. Values are read as JSON, so
# numbers need no quoting: `AUTOGRAD_MAX_NODES=5000`.
SETTINGS: dict[str, Setting] = {
    setting.name: setting
    for setting in (
        *(
            Setting(f.name.upper(), f.default, f.metadata.get(MEANING, ""), "limits")
            for f in fields(Limits)
        ),
        Setting(
            "MAX_BODY_BYTES",
            1024 * 1024,
            _("Bytes of request body; larger bodies get a 413."),
            "limits",
        ),
        # GET /v1/operations reports these two as `cache_size` and `cache_nodes`.
        Setting(
            "CACHE_SIZE",
            256,
            _("Compiled expressions each worker keeps for reuse (0 turns the cache off)."),
        ),
        Setting(
            "CACHE_NODES",
            60_000,
            _("Graph nodes of all compiled expressions a worker keeps, together."),
        ),
        Setting(
            "CORS_ORIGINS",
            "*",
            _("Origins browsers may call from: `*` or a comma-separated list."),
        ),
        Setting(
            "LOG_LEVEL",
            "info",
            _("Level of gunicorn's and the service's JSON log lines on stderr."),
        ),
        Setting(
            "REQUEST_BUDGET",
            5.0,
            _("Seconds of work one request may take (0: no budget); past it, a 503 problem."),
            "settings",
        ),
        Setting(
            "HEAVY_REQUEST_BYTES",
            16384,
            _("Bytes of request body from which a request counts as heavy."),
            "settings",
        ),
        Setting(
            "HEAVY_REQUEST_SLOTS",
            0,
            _(
                "Heavy requests one server works on at once (0: one fewer than the workers); "
                "past them, a 503 problem."
            ),
            "settings",
        ),
        Setting(
            "MAX_RESPONSE_BYTES",
            16 * 1024 * 1024,
            _("Bytes of response body; a larger response is refused as response-too-large."),
            "limits",
        ),
        Setting(
            "PICTURE_RATE",
            2.0,
            _("Plots and SVG drawings each worker renders per second, sustained (429 beyond)."),
            "settings",
        ),
        Setting(
            "PICTURE_BURST",
            10,
            _("Plots and SVG drawings a worker renders in a burst."),
            "settings",
        ),
        Setting(
            "MAX_SYMBOLIC_NODES",
            DEFAULT_SYMBOLIC_LIMITS.max_nodes,
            _("Operators of an expression differentiated symbolically (POST /v1/derivatives)."),
            "limits",
        ),
        Setting(
            "SYMBOLIC_SECONDS",
            DEFAULT_SYMBOLIC_LIMITS.seconds,
            _("Seconds of symbolic work (sympy) one request may take."),
            "settings",
        ),
    )
}
DEFAULTS: dict[str, Any] = {name: setting.default for name, setting in SETTINGS.items()}


def reported(config: Mapping[str, Any], where: Reported) -> dict[str, Any]:
    """The values in force of the settings GET /v1/operations reports `where`, by the lower-case
    names clients know them by. The app has checked each one at start-up (`create_app`)."""
    return {
        setting.name.lower(): type(setting.default)(config[setting.name])
        for setting in SETTINGS.values()
        if setting.reported == where
    }


def settings_table() -> str:
    """The settings as the rows of the README's Markdown table: `python -m service.api.config`."""

    def shown(value: Any) -> str:
        return f"{value:g}" if isinstance(value, float) else str(value)

    return "".join(
        f"| `{setting.variable}` | `{shown(setting.default)}` | {setting.meaning} |\n"
        for setting in SETTINGS.values()
    )


def check_variables(environment: Mapping[str, str]) -> None:
    """Refuses an `AUTOGRAD_*` variable that is no setting: a misspelt one would be ignored."""
    prefix = f"{ENVIRONMENT_PREFIX}_"
    known = [setting.variable for setting in SETTINGS.values()] + list(SERVER_VARIABLES)
    for variable in sorted(environment):
        if not variable.startswith(prefix) or variable in known:
            continue
        # Compared without the prefix every name shares, which would make any two look alike.
        names = {name.removeprefix(prefix): name for name in known}
        close = difflib.get_close_matches(variable.removeprefix(prefix), names, n=1)
        if close:
            raise ConfigurationError(
                _(
                    "{variable} is not a setting of this service; did you mean {match}?",
                    variable=variable,
                    match=names[close[0]],
                )
            )
        raise ConfigurationError(
            _(
                "{variable} is not a setting of this service; the settings are: {known}",
                variable=variable,
                known=", ".join(known),
            )
        )


def limits_from(config: Mapping[str, Any]) -> Limits:
    """The core's limits from the configuration, refusing any that is not a positive number."""
    return Limits(
        **{f.name: _positive(config, f.name.upper(), type(f.default)) for f in fields(Limits)}
    )


def symbolic_limits(config: Mapping[str, Any]) -> SymbolicLimits:
    """The bounds of symbolic differentiation from the configuration."""
    return SymbolicLimits(
        max_nodes=int(_positive(config, "MAX_SYMBOLIC_NODES", int)),
        seconds=float(_positive(config, "SYMBOLIC_SECONDS", float, minimum=0.001)),
    )


def log_level(config: Mapping[str, Any]) -> int:
    """The logging level LOG_LEVEL names (`info`, `warning`, ...)."""
    level = config["LOG_LEVEL"]
    numeric = logging.getLevelName(str(level).upper())
    if not isinstance(numeric, int):
        raise ConfigurationError(
            _(
                "AUTOGRAD_LOG_LEVEL must be a logging level such as info, not {level}",
                level=repr(level),
            )
        )
    return numeric


def picture_rate(config: Mapping[str, Any]) -> tuple[float, int]:
    """Pictures a worker draws per second, and in a burst."""
    rate = _positive(config, "PICTURE_RATE", float, minimum=1e-6)
    return rate, int(_positive(config, "PICTURE_BURST", int))


def check_settings(config: Mapping[str, Any]) -> None:
    """Every setting read as the server reads it at start, a wrong one refused the same way:
    for the command line, which uses only some of them."""
    limits_from(config)
    symbolic_limits(config)
    body_limit(config)
    cache_size(config)
    cache_nodes(config)
    request_costs(config)
    log_level(config)
    picture_rate(config)


def body_limit(config: Mapping[str, Any]) -> int:
    return int(_positive(config, "MAX_BODY_BYTES", int))


def cache_size(config: Mapping[str, Any]) -> int:
    return int(_positive(config, "CACHE_SIZE", int, minimum=0))


def cache_nodes(config: Mapping[str, Any]) -> int:
    return int(_positive(config, "CACHE_NODES", int, minimum=0))


def request_costs(config: Mapping[str, Any]) -> RequestCosts:
    return RequestCosts(
        budget_s=_positive(config, "REQUEST_BUDGET", float, minimum=0),
        heavy_bytes=_positive(config, "HEAVY_REQUEST_BYTES", int),
        max_response_bytes=_positive(config, "MAX_RESPONSE_BYTES", int),
        slots=HeavySlots(_positive(config, "HEAVY_REQUEST_SLOTS", int, minimum=0)),
    )


# An origin as a browser sends it: a scheme, a host (a name, or an IPv6 address in brackets) and
# perhaps a port; no path, not even `/`, and nothing a pattern could read as more than itself.
_ORIGIN = re.compile(
    r"(?P<scheme>https?)://([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(:(?P<port>[0-9]{1,5}))?",
    re.IGNORECASE,
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _browser_sends(origin: str) -> bool:
    """Whether a browser could send `origin` as its `Origin`: it leaves a scheme's own port out."""
    written = _ORIGIN.fullmatch(origin)
    if written is None or written["port"] is None:
        return written is not None
    port = int(written["port"])
    return 0 < port < 65536 and port != _DEFAULT_PORTS[written["scheme"].lower()]


def cors_origins(config: Mapping[str, Any]) -> str | list[str]:
    """`*`, or the origins listed; a list that could never match a browser's `Origin` (empty,
    or an entry no browser sends) stops the service at start-up rather than refusing every page
    quietly."""
    setting = config["CORS_ORIGINS"]
    if isinstance(setting, list | tuple):
        listed = [str(origin).strip() for origin in setting]
    elif isinstance(setting, str):
        listed = setting.split(",")
    else:  # JSON that is no text: `null`, `true`, a number
        listed = [_as_written(SETTINGS["CORS_ORIGINS"].variable, setting)]
    origins = [origin.strip() for origin in listed if origin.strip()]
    if origins == ["*"]:
        return "*"
    for origin in origins or [""]:
        if not _browser_sends(origin):
            raise ConfigurationError(
                _(
                    "{variable} must be * or origins separated by commas, each a scheme, a host "
                    "and perhaps a port, as https://lessons.example:8443 (no path, no / at the "
                    "end), not '{value}'",
                    variable=SETTINGS["CORS_ORIGINS"].variable,
                    value=origin,
                )
            )
    return origins


def _positive(config: Mapping[str, Any], key: str, kind: type, minimum: float = 1) -> Any:
    # A mistyped value stops the service at start-up, naming it, rather than at the first
    # request; booleans are ints to Python but never a sensible size.
    value = config[key]
    number = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:  # 1e400 reads as infinity, and no limit is infinite; 10**400 is no float either
            number = kind(value) if math.isfinite(value) else None
        except OverflowError:
            number = None
    if number is None or number != value or number < minimum:
        variable = SETTINGS[key].variable
        if kind is int:
            expected = _("a positive whole number") if minimum else _("a non-negative whole number")
        else:
            expected = _("a positive number") if minimum else _("a non-negative number")
        raise ConfigurationError(
            _("{variable} must be {expected}, not {value}", variable=variable,
              expected=expected, value=_as_written(variable, value))
        )  # fmt: skip
    return number


def _as_written(variable: str, value: Any) -> str:
    """A refused value as its variable wrote it (`1e400`, which reads as infinity), when the value
    came from there; else as Python shows it."""
    written = os.environ.get(variable)
    if written is not None and repr(read_variable(written)) == repr(value):
        return written
    return repr(value)


def read_variable(written: str) -> Any:
    """A variable's value as Flask's `from_prefixed_env` reads it: JSON, else the text itself."""
    try:
        return json.loads(written)
    except ValueError:
        return written


if __name__ == "__main__":
    print(settings_table(), end="")
