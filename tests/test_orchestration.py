"""The swarm stack and the Kubernetes Ingress against the proxy they stand in for, without Docker.

The compose proxy's client limits and error pages are written once, in deploy/nginx/limits.conf
and errors.conf; the swarm proxy includes those files, and the Ingress restates them as
ingress-nginx annotations. These tests hold the restatement to the original.
`make test-docker` runs the stack itself (scripts/test-swarm.sh).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parent.parent
NGINX = ROOT / "deploy" / "nginx"
LIMITS = (NGINX / "limits.conf").read_text()
ERRORS = (NGINX / "errors.conf").read_text()
COMPOSE_PROXY = (ROOT / "deploy" / "nginx.conf").read_text()
SWARM_PROXY = (ROOT / "deploy" / "swarm" / "nginx.conf").read_text()


class ComposeLoader(yaml.SafeLoader):
    """YAML with compose's merge tags: `!reset` drops a value, `!override` replaces it."""


for _tag in ("!reset", "!override"):
    ComposeLoader.add_constructor(
        _tag,
        lambda loader, node: (
            loader.construct_sequence(node)
            if isinstance(node, yaml.SequenceNode)
            else loader.construct_mapping(node)
            if isinstance(node, yaml.MappingNode)
            else loader.construct_scalar(node)
        ),
    )
STACK = yaml.load((ROOT / "deploy" / "swarm" / "stack.yml").read_text(), Loader=ComposeLoader)
KUBERNETES = ROOT / "deploy" / "kubernetes"


def _k8s(name: str, kind: str) -> dict[str, Any]:
    for path in KUBERNETES.rglob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document["kind"] == kind and document["metadata"]["name"] == name:
                return document
    raise LookupError(name)


def _directive(text: str, pattern: str) -> re.Match[str]:
    lines = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    found = re.search(pattern, lines, re.MULTILINE)
    assert found is not None, pattern
    return found


def _seconds(value: str) -> int:
    return int(value.removesuffix("s"))


def test_the_swarm_proxy_uses_the_shared_limits_and_error_pages() -> None:
    for snippet in ("limits.conf", "errors.conf", "private.conf", "plots.conf"):
        assert f"include /etc/nginx/autograd/{snippet};" in SWARM_PROXY
        assert f"include /etc/nginx/autograd/{snippet};" in COMPOSE_PROXY


def test_both_proxies_keep_plots_and_only_what_the_app_says_may_be_kept() -> None:
    plots = (NGINX / "plots.conf").read_text()
    for proxy in (SWARM_PROXY, COMPOSE_PROXY):
        assert re.search(r"proxy_cache_path /tmp/\S+ .*keys_zone=plots:", proxy)
    # No `proxy_cache_valid`: nginx then keeps only answers whose Cache-Control allows it (the
    # GET plots), and the request id is never a kept answer's.
    assert "proxy_cache plots;" in plots and "proxy_cache_valid" not in plots
    assert "proxy_hide_header X-Request-ID;" in plots
    assert "proxy_cache_methods" not in plots  # GET and HEAD only, nginx's default


def test_the_swarm_proxy_follows_replicas_through_dns() -> None:
    # Resolved per request (a variable in proxy_pass) through Docker's DNS, kept one second.
    resolver = _directive(SWARM_PROXY, r"^\s*resolver 127\.0\.0\.11 valid=(\d+)s")
    assert int(resolver.group(1)) <= 5
    variable = _directive(SWARM_PROXY, r"^\s*set \$(\w+) tasks\.api;")
    assert f"proxy_pass http://${variable.group(1)}:8000;" in SWARM_PROXY
    # An upstream block would resolve the name once, at start.
    assert not re.search(r"^\s*upstream\s", SWARM_PROXY, re.MULTILINE)


def test_the_stack_updates_without_losing_a_replica() -> None:
    api = STACK["services"]["api"]["deploy"]
    assert api["endpoint_mode"] == "dnsrr"
    assert api["replicas"] == 3
    update = api["update_config"]
    assert update["order"] == "start-first"
    assert update["failure_action"] == "rollback"
    assert update["parallelism"] == 1
    assert api["rollback_config"]["order"] == "start-first"
    (port,) = STACK["services"]["proxy"]["ports"]
    assert port["mode"] == "host"
    assert port["target"] == 8080


def test_the_ingress_enforces_the_proxys_limits() -> None:
    annotations = _k8s("autograd", "Ingress")["metadata"]["annotations"]

    def annotation(name: str) -> str:
        return annotations[f"nginx.ingress.kubernetes.io/{name}"]

    rate = _directive(LIMITS, r"^\s*limit_req_zone .* rate=(\d+)r/s;")
    burst = _directive(LIMITS, r"^\s*limit_req zone=\S+ burst=(\d+)")
    connections = _directive(LIMITS, r"^\s*limit_conn \S+ (\d+);")
    assert int(annotation("limit-rps")) == int(rate.group(1))
    assert int(annotation("limit-rps")) * int(annotation("limit-burst-multiplier")) == int(
        burst.group(1)
    )
    assert int(annotation("limit-connections")) == int(connections.group(1))
    body = _directive(LIMITS, r"^\s*client_max_body_size (\S+);")
    assert annotation("proxy-body-size") == body.group(1)
    buffer = _directive(LIMITS, r"^\s*client_body_buffer_size (\S+);")
    assert annotation("client-body-buffer-size") == buffer.group(1)
    for name in ("proxy_connect_timeout", "proxy_send_timeout", "proxy_read_timeout"):
        timeout = _directive(COMPOSE_PROXY, rf"^\s*{name} (\S+);")
        assert int(annotation(name.replace("_", "-"))) == _seconds(timeout.group(1))
    # The client timeouts are the controller's own settings.
    controller = _k8s("ingress-nginx-controller", "ConfigMap")["data"]
    for name in ("client_header_timeout", "client_body_timeout"):
        timeout = _directive(LIMITS, rf"^\s*{name} (\S+);")
        assert int(controller[name.replace("_", "-")]) == _seconds(timeout.group(1))
    status = _directive(LIMITS, r"^\s*limit_req_status (\d+);")
    assert controller["limit-req-status-code"] == status.group(1)
    assert controller["limit-conn-status-code"] == status.group(1)


def test_every_error_the_ingress_takes_over_has_its_problem_page() -> None:
    annotations = _k8s("autograd", "Ingress")["metadata"]["annotations"]
    codes = annotations["nginx.ingress.kubernetes.io/custom-http-errors"].split(",")
    assert annotations["nginx.ingress.kubernetes.io/default-backend"] == "autograd-errors"
    backend = _k8s("autograd-errors-nginx", "ConfigMap")["data"]["nginx.conf"]
    assert "include /etc/nginx/autograd/errors.conf;" in backend
    pages = {int(code) for line in re.findall(r"^error_page (\d+) ", ERRORS, re.M)
             for code in line.split()}  # fmt: skip
    for code in codes:
        assert int(code) in pages, code
        assert f"if ($http_x_code = {code}) {{ return {code}; }}" in backend
    # The app's own problems pass through with their details: never taken over.
    assert not {"400", "422", "500", "503"} & set(codes)
