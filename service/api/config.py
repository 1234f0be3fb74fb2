"""The service's settings: their defaults, and how each is read from an `AUTOGRAD_` variable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.api.costs import HeavySlots, RequestCosts
from service.limits import DEFAULT_LIMITS, Limits

ENVIRONMENT_PREFIX = "AUTOGRAD"

# Each setting, its default and what it bounds; `AUTOGRAD_<NAME>` overrides it, e.g.
# `AUTOGRAD_MAX_NODES=5000`. Values are read as JSON, so numbers need no quoting.
SETTINGS: dict[str, tuple[Any, str]] = {
    "MAX_EXPRESSION_LENGTH": (DEFAULT_LIMITS.max_expression_length, "characters of expression"),
    "MAX_DEPTH": (DEFAULT_LIMITS.max_depth, "nesting of parentheses, calls, signs and powers"),
    "MAX_NODES": (DEFAULT_LIMITS.max_nodes, "nodes of the primitive graph"),
    "MAX_IDENTIFIER_LENGTH": (DEFAULT_LIMITS.max_identifier_length, "characters in a name"),
    "MAX_CONSTANT_MAGNITUDE": (DEFAULT_LIMITS.max_constant_magnitude, "|c| of every constant"),
    "MAX_BINDINGS": (DEFAULT_LIMITS.max_bindings, "entries in one request's bindings"),
    "MAX_BODY_BYTES": (1024 * 1024, "bytes of request body; larger bodies get a 413"),
    "CACHE_SIZE": (256, "compiled expressions kept per worker (0 turns the cache off)"),
    "CACHE_NODES": (60_000, "graph nodes of all cached expressions together, per worker"),
    "CORS_ORIGINS": ("*", "origins browsers may call from: `*` or a comma-separated list"),
    "LOG_LEVEL": ("info", "level of the service's JSON log lines on stderr"),
    "REQUEST_BUDGET": (5.0, "seconds of work per request (0: none); past it a 503"),
    "HEAVY_REQUEST_BYTES": (16384, "body bytes from which a request counts as heavy"),
    "HEAVY_REQUEST_SLOTS": (0, "heavy requests at once per server; 0: one fewer than workers"),
    "MAX_RESPONSE_BYTES": (16 * 1024 * 1024, "bytes of response body; larger: response-too-large"),
}
DEFAULTS: dict[str, Any] = {name: default for name, (default, _) in SETTINGS.items()}


def limits_from(config: Mapping[str, Any]) -> Limits:
    """The core's limits from the configuration, refusing any that is not a positive number."""
    return Limits(
        **{
            name: _positive(config, name.upper(), type(getattr(DEFAULT_LIMITS, name)))
            for name in Limits.names()
        }
    )


def body_limit(config: Mapping[str, Any]) -> int:
    return _positive(config, "MAX_BODY_BYTES", int)


def cache_size(config: Mapping[str, Any]) -> int:
    return _positive(config, "CACHE_SIZE", int, minimum=0)


def cache_nodes(config: Mapping[str, Any]) -> int:
    return _positive(config, "CACHE_NODES", int, minimum=0)


def request_costs(config: Mapping[str, Any]) -> RequestCosts:
    return RequestCosts(
        budget_s=_positive(config, "REQUEST_BUDGET", float, minimum=0),
        heavy_bytes=_positive(config, "HEAVY_REQUEST_BYTES", int),
        max_response_bytes=_positive(config, "MAX_RESPONSE_BYTES", int),
        slots=HeavySlots(_positive(config, "HEAVY_REQUEST_SLOTS", int, minimum=0)),
    )


def cors_origins(config: Mapping[str, Any]) -> str | list[str]:
    origins = config["CORS_ORIGINS"]
    if isinstance(origins, list | tuple):
        return [str(origin) for origin in origins]
    origins = str(origins).strip()
    return "*" if origins == "*" else [o.strip() for o in origins.split(",") if o.strip()]


def _positive(config: Mapping[str, Any], key: str, kind: type, minimum: float = 1) -> Any:
    # A mistyped variable stops the service at start-up, naming it, rather than at the first
    # request; booleans are ints to Python but never a sensible size.
    value = config[key]
    number = kind(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None or number != value or number < minimum:
        raise ValueError(
            f"{ENVIRONMENT_PREFIX}_{key} must be a {'positive' if minimum else 'non-negative'} "
            f"{'whole ' if kind is int else ''}number, not {value!r}"
        )
    return number
