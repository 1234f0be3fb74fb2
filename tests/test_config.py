"""Configuration: defaults, `AUTOGRAD_*` variables, and a refusal to start on a bad one."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import make_app
from flask.testing import FlaskClient

from service.api.config import (
    DEFAULTS,
    SERVER_VARIABLES,
    SETTINGS,
    ConfigurationError,
    settings_table,
)
from service.app import create_app
from service.limits import DEFAULT_LIMITS, Limits


def test_configuration_comes_from_autograd_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    environment = {
        "AUTOGRAD_MAX_EXPRESSION_LENGTH": "500",
        "AUTOGRAD_MAX_DEPTH": "20",
        "AUTOGRAD_MAX_NODES": "100",
        "AUTOGRAD_MAX_IDENTIFIER_LENGTH": "8",
        "AUTOGRAD_MAX_CONSTANT_MAGNITUDE": "1e6",
        "AUTOGRAD_MAX_BINDINGS": "5",
        "AUTOGRAD_MAX_BODY_BYTES": "2048",
        "AUTOGRAD_CACHE_SIZE": "3",
        "AUTOGRAD_LOG_LEVEL": "warning",
    }
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    app = create_app()
    evaluator = app.extensions["autograd"]
    assert evaluator.limits == Limits(
        max_expression_length=500,
        max_depth=20,
        max_nodes=100,
        max_identifier_length=8,
        max_constant_magnitude=1e6,
        max_bindings=5,
    )
    assert evaluator.cache_size == 3
    assert app.config["MAX_CONTENT_LENGTH"] == 2048
    # The test configuration overrides the environment.
    assert create_app({"MAX_NODES": 7}).extensions["autograd"].limits.max_nodes == 7


def test_each_limit_is_described_once_and_everything_else_derives_from_it(
    client: FlaskClient,
) -> None:
    # A setting for every limit, with the limit's own default and meaning.
    for field in fields(Limits):
        assert Limits.meaning(field.name), f"declare {field.name} with limit(default, meaning)"
        setting = SETTINGS[field.name.upper()]
        assert setting.default == field.default == DEFAULTS[setting.name]
        assert setting.meaning == Limits.meaning(field.name)
        assert setting.variable == f"AUTOGRAD_{field.name.upper()}"
    assert all(str(setting.meaning).strip() for setting in SETTINGS.values())
    # GET /v1/operations reports each limit in force; the spec describes it with its meaning.
    reported = client.get("/v1/operations").get_json()["limits"]
    assert DEFAULT_LIMITS.as_dict().items() <= reported.items()
    described = client.get("/openapi.json").get_json()["components"]["schemas"]["Limits"]
    for name in Limits.names():
        assert described["properties"][name]["description"] == Limits.meaning(name)


def test_operations_reports_what_a_client_plans_by_in_force_and_described_once() -> None:
    configured = {
        "REQUEST_BUDGET": 2,
        "HEAVY_REQUEST_SLOTS": 3,
        "PICTURE_RATE": 0.5,
        "MAX_SYMBOLIC_NODES": 40,
        "MAX_RESPONSE_BYTES": 10**6,
        "MAX_NODES": 50,
    }
    client = make_app(**configured).test_client()
    document = client.get("/v1/operations").get_json()
    spec = client.get("/openapi.json").get_json()["components"]["schemas"]
    for where, schema in (("limits", "Limits"), ("settings", "Settings")):
        told = [setting for setting in SETTINGS.values() if setting.reported == where]
        expected = {s.name.lower(): configured.get(s.name, s.default) for s in told}
        assert document[where] == expected
        for setting in told:  # the value's type is the default's: 2 s of budget is 2.0
            assert type(document[where][setting.name.lower()]) is type(setting.default)
            described = spec[schema]["properties"][setting.name.lower()]["description"]
            assert described == setting.meaning
    # Every limit a problem's `limit` names is among the limits (ProblemSchema points there).
    names = {*Limits.names(), "max_response_bytes", "max_symbolic_nodes"}
    assert names <= document["limits"].keys()
    # The settings a client plans by, and nothing of the server's own (origins, logs, workers).
    assert document["settings"].keys() == {
        "request_budget", "heavy_request_bytes", "heavy_request_slots", "picture_rate",
        "picture_burst", "symbolic_seconds",
    }  # fmt: skip
    told = {*document["limits"], *document["settings"], "cache_size", "cache_nodes"}
    assert not {"cors_origins", "log_level", "workers"} & told


def test_the_readme_lists_every_setting_with_its_default_and_meaning() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = settings_table()
    assert all(f"`{setting.variable}`" in table for setting in SETTINGS.values())
    assert table in readme, "README.md's settings are out of date: `python -m service.api.config`"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AUTOGRAD_MAX_NODES", "lots"),
        ("AUTOGRAD_MAX_NODES", "0"),
        ("AUTOGRAD_MAX_DEPTH", "2.5"),
        ("AUTOGRAD_MAX_BODY_BYTES", "true"),
        ("AUTOGRAD_CACHE_SIZE", "-1"),
        ("AUTOGRAD_LOG_LEVEL", "chatty"),
        ("AUTOGRAD_MAX_DEPTH", "abc"),
        ("AUTOGRAD_MAX_CONSTANT_MAGNITUDE", "1e400"),  # infinity: no limit at all
        ("AUTOGRAD_MAX_NODES", "1e400"),
        ("AUTOGRAD_REQUEST_BUDGET", "NaN"),
    ],
)
def test_a_mistyped_setting_stops_the_start_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=name) as refused:
        create_app()
    assert "\n" not in str(refused.value)
    assert value.lower() in str(refused.value).lower()


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("AUTOGRAD_MAX_DEPHT", "AUTOGRAD_MAX_DEPTH"),
        ("AUTOGRAD_MAX_NODE", "AUTOGRAD_MAX_NODES"),
        ("AUTOGRAD_CORS_ORIGIN", "AUTOGRAD_CORS_ORIGINS"),
        ("AUTOGRAD_WORKER", "AUTOGRAD_WORKERS"),
    ],
)
def test_a_misspelt_variable_is_refused_naming_the_close_match(
    monkeypatch: pytest.MonkeyPatch, name: str, match: str
) -> None:
    monkeypatch.setenv(name, "5")
    with pytest.raises(ConfigurationError) as refused:
        create_app()
    assert str(refused.value) == f"{name} is not a setting of this service; did you mean {match}?"


def test_an_unknown_variable_is_refused_listing_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AUTOGRAD_COLOUR", "blue")
    with pytest.raises(ConfigurationError, match="AUTOGRAD_COLOUR is not a setting") as refused:
        create_app()
    assert all(setting.variable in str(refused.value) for setting in SETTINGS.values())


def test_variables_for_the_server_are_not_the_apps_concern(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AUTOGRAD_WORKERS", "3")  # gunicorn.conf.py reads it
    monkeypatch.setenv("AUTOGRAD_REPLICA_WORKERS", "2")  # docker-compose.yml reads it
    assert create_app({"TESTING": True}).extensions["autograd"]


def test_every_variable_the_deployment_files_name_is_known() -> None:
    # Compose and test-docker.sh export these into the environment the app may start in.
    root = Path(__file__).resolve().parent.parent
    files = ("docker-compose.yml", "gunicorn.conf.py", "scripts/test-docker.sh",
             "scripts/docker-common.sh", "Makefile")  # fmt: skip
    named = {
        variable
        for name in files
        for variable in re.findall(r"AUTOGRAD_[A-Z_]*[A-Z]", (root / name).read_text())
    }
    known = {setting.variable for setting in SETTINGS.values()} | set(SERVER_VARIABLES)
    assert named, "no AUTOGRAD_ variable found: the pattern or the files changed"
    assert named <= known


def test_the_served_spec_states_the_configured_bounds_of_every_request_field() -> None:
    client = make_app(
        MAX_EXPRESSION_LENGTH=500, MAX_IDENTIFIER_LENGTH=8, MAX_BINDINGS=3, MAX_SWEEP_POINTS=10
    ).test_client()
    spec = client.get("/openapi.json").get_json()
    schemas = spec["components"]["schemas"]
    body = schemas["GradientsRequest"]["properties"]
    assert body["expression"]["maxLength"] == 500
    assert body["output"]["maxLength"] == 8
    assert body["bindings"]["propertyNames"]["maxLength"] == 8
    parameters = spec["paths"]["/v1/sweep"]["get"]["parameters"]
    query = {p["name"]: p["schema"] for p in parameters if p.get("in") == "query"}
    assert (query["output"]["maxLength"], query["expression"]["maxLength"]) == (8, 500)
    # a sweep's explicit points are bindings each, and as many as a sweep may have
    points = schemas["SweepRequest"]["properties"]["points"]
    assert points["maxItems"] == 10
    assert points["items"]["maxProperties"] == 3
    assert points["items"]["propertyNames"]["maxLength"] == 8
    assert points["items"]["additionalProperties"] == {"type": "number"}
    assert schemas["Axis"]["properties"]["points"]["maximum"] == 200  # a grid's side may have
    # and the bounds of one request are not written into another's
    assert schemas["GraphRequest"]["properties"]["expression"]["maxLength"] == 500
    default = make_app().test_client().get("/openapi.json").get_json()["components"]["schemas"]
    assert default["SweepRequest"]["properties"]["points"]["items"]["maxProperties"] == 10_000
    # a response's fields of the same names state no bound
    response = spec["components"]["schemas"]["Evaluation"]["properties"]
    assert "maxLength" not in response["expression"]
