"""deploy/kubernetes: valid for the Kubernetes version stated, hardened, and true to the service.

Every manifest is validated against the schemas of KUBERNETES_VERSION shipped inside the
kubernetes-validate package (no network), strictly: an unknown field is an error. checkov scans
the whole folder; a check may only be skipped with a reason (`checkov.io/skipN` annotations).
`make test` installs checkov into a virtual environment of its own (.venv/checkov): its pinned
dependencies would otherwise replace versions the service's tests use.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from service.api.config import SERVER_VARIABLES, SETTINGS
from service.app import create_app

pytestmark = pytest.mark.deploy

KUBERNETES_VERSION = "1.33.0"  # the oldest minor release still supported upstream
ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "deploy" / "kubernetes"
MANIFESTS = sorted(BASE.rglob("*.yaml"))


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


RESOURCES = [
    document
    for path in MANIFESTS
    if path.name != "kustomization.yaml"
    for document in documents(path)
]


def resource(kind: str, name: str) -> dict[str, Any]:
    (found,) = [r for r in RESOURCES if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


def base() -> list[dict[str, Any]]:
    """The resources the kustomization puts together."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    return [doc for name in kustomization["resources"] for doc in documents(BASE / name)]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(BASE)))
def test_every_manifest_validates_against_the_stated_version(path: Path) -> None:
    for document in documents(path):
        if document["kind"] == "Kustomization":
            continue  # kustomize's own file, not a Kubernetes resource: checked below
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_base_lists_every_manifest_of_its_folder() -> None:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    names = [(r["kind"], r["metadata"]["name"]) for r in base()]
    assert len(names) == len(set(names))
    assert {r["metadata"].get("namespace") for r in base() if r["kind"] != "Namespace"} == {
        resource("Namespace", "autograd")["metadata"]["name"]
    }


def test_an_invalid_manifest_is_refused() -> None:
    """The validator is not a formality: an unknown field and a wrong type both fail."""
    deployment = resource("Deployment", "autograd-api")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {**deployment, "spec": {**deployment["spec"], "replica": 3}}, KUBERNETES_VERSION, True
        )
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {**deployment, "spec": {**deployment["spec"], "replicas": "three"}},
            KUBERNETES_VERSION,
            True,
        )


def test_the_settings_are_the_services_own_and_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = resource("ConfigMap", "autograd-settings")["data"]
    known = {setting.variable for setting in SETTINGS.values()} | set(SERVER_VARIABLES)
    assert set(settings) <= known, set(settings) - known
    assert all(isinstance(value, str) for value in settings.values())
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    app = create_app()  # refuses, naming it, any setting it cannot use
    assert app.config["MAX_BODY_BYTES"] == int(settings["AUTOGRAD_MAX_BODY_BYTES"])
    assert int(settings["AUTOGRAD_WORKERS"]) >= 2


def _pod(name: str) -> dict[str, Any]:
    return resource("Deployment", name)["spec"]["template"]["spec"]


@pytest.mark.parametrize("name", ["autograd-api", "autograd-errors"])
def test_pods_are_locked_down(name: str) -> None:
    pod = _pod(name)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] >= 10000
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"] and container["resources"]["limits"]
        assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {c["topologyKey"] for c in pod["topologySpreadConstraints"]} >= {
        "kubernetes.io/hostname"
    }


def test_the_api_finishes_in_flight_requests_before_it_stops() -> None:
    pod = _pod("autograd-api")
    (container,) = pod["containers"]
    pause = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pause[0] == "sleep"
    graceful = re.search(
        r"^graceful_timeout = (\d+)", (ROOT / "gunicorn.conf.py").read_text(), re.M
    )
    assert graceful is not None
    assert pod["terminationGracePeriodSeconds"] > int(pause[1]) + int(graceful.group(1))
    strategy = resource("Deployment", "autograd-api")["spec"]["strategy"]["rollingUpdate"]
    assert strategy["maxUnavailable"] == 0


def test_metrics_are_scraped_from_the_pod_and_not_routed_outside() -> None:
    template = resource("Deployment", "autograd-api")["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    (container,) = template["spec"]["containers"]
    (port,) = container["ports"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert int(annotations["prometheus.io/port"]) == port["containerPort"]
    ingress = resource("Ingress", "autograd")
    paths = {p["path"]: p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]}
    assert paths["/metrics"]["pathType"] == "Exact"
    assert paths["/metrics"]["backend"]["service"]["name"] == "autograd-errors"


def test_only_the_ingress_controller_reaches_the_pods() -> None:
    policy = resource("NetworkPolicy", "autograd-from-ingress-only")["spec"]
    assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "autograd-service"}
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    (peer,) = rule["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "ingress-nginx"
    }
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "ingress-nginx"}


def test_the_autoscaler_and_disruption_budget_fit_the_deployment() -> None:
    hpa = resource("HorizontalPodAutoscaler", "autograd-api")["spec"]
    assert hpa["scaleTargetRef"]["name"] == "autograd-api"
    (metric,) = hpa["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert 0 < metric["resource"]["target"]["averageUtilization"] < 100
    assert hpa["minReplicas"] >= 2
    pdb = resource("PodDisruptionBudget", "autograd-api")["spec"]
    pod_labels = resource("Deployment", "autograd-api")["spec"]["template"]["metadata"]["labels"]
    assert pdb["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["maxUnavailable"] < hpa["minReplicas"]


# -- checkov ------------------------------------------------------------------------------------


def _checkov() -> str | None:
    found = os.environ.get("CHECKOV") or shutil.which("checkov")
    local = ROOT / ".venv" / "checkov" / "bin" / "checkov"
    return found or (str(local) if local.exists() else None)


@pytest.mark.slow  # checkov runs as its own process for seconds
def test_checkov_finds_nothing_unjustified() -> None:
    checkov = _checkov()
    if checkov is None:
        pytest.skip("checkov is not installed; `make test` installs it into .venv/checkov")
    # --skip-download: the checks ship with checkov; nothing is fetched.
    run = subprocess.run(
        [checkov, "--directory", str(BASE), "--framework", "kubernetes", "--skip-download",
         "--output", "json"],
        capture_output=True, text=True, timeout=240,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )  # fmt: skip
    report = json.loads(run.stdout)
    failed = [
        (c["check_id"], c["resource"], c["file_path"]) for c in report["results"]["failed_checks"]
    ]
    assert not failed, failed
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["resource_count"] >= len(RESOURCES)  # every manifest was read
    # Every skip says why, in the manifest next to what it excuses.
    for skipped in report["results"]["skipped_checks"]:
        assert len(skipped["check_result"].get("suppress_comment", "")) > 20, skipped["check_id"]


# -- sized from measurements --------------------------------------------------------------------


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_the_resources_cover_what_deploy_md_measured() -> None:
    """docs/DEPLOY.md states the pod's memory as `make capacity` measured it; the pod fits it."""
    doc = (ROOT / "docs" / "DEPLOY.md").read_text()
    assert "make capacity" in doc
    assert "capacity" in (ROOT / "Makefile").read_text()
    steady = re.search(r"\*\*pod steady state\*\*.*\| \*\*([\d.]+)\*\* \|", doc)
    worst = re.search(r"\*\*pod worst case\*\*.*\| \*\*([\d.]+)\*\* \|", doc)
    assert steady is not None and worst is not None
    (container,) = _pod("autograd-api")["containers"]
    resources = container["resources"]
    assert _mebibytes(resources["requests"]["memory"]) >= float(steady.group(1))
    assert _mebibytes(resources["limits"]["memory"]) >= float(worst.group(1))
    workers = resource("ConfigMap", "autograd-settings")["data"]["AUTOGRAD_WORKERS"]
    assert f"AUTOGRAD_WORKERS={workers}" in doc
