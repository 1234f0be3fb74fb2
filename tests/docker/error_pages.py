"""The Kubernetes Ingress's error pages, live: `python tests/docker/error_pages.py BASE_URL`.

Standard library only; scripts/test-swarm.sh runs the autograd-errors nginx of
deploy/kubernetes/errors.yaml in a container (the nginx image with deploy/nginx/'s snippets) and
points this at it. ingress-nginx sends that backend each refusal it takes over, the status in
X-Code: every status ingress.yaml lists must come back as that status with a problem document of
the service's own types, in the language asked for; a request without X-Code (which the controller
sends when no pod of the API is ready) is a 503; /metrics from outside is not found.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request

TYPE_BASE = "https://autograd-service.dev/problems/"
# What ingress.yaml's custom-http-errors lists, and 503 (the controller's answer when no pod is
# ready), with the problem type each must carry.
EXPECTED = {
    413: "body-too-large",
    429: "too-many-requests",
    502: "bad-gateway",
    503: "service-busy",
    504: "gateway-timeout",
}


def fetch(base: str, path: str, code: int | None, language: str = "en") -> tuple[int, str, dict]:
    request = urllib.request.Request(base.rstrip("/") + path)
    request.add_header("Accept-Language", language)
    if code is not None:
        request.add_header("X-Code", str(code))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, headers, body = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, headers, body = error.code, error.headers, error.read()
    return status, headers.get("Content-Type", ""), json.loads(body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    args = parser.parse_args()
    cases = [(code, code, "/v1/gradients", kind) for code, kind in EXPECTED.items()]
    cases += [(None, 503, "/v1/gradients", "service-busy"), (None, 404, "/metrics", "not-found")]
    failed = 0
    for code, want, path, kind in cases:
        status, content_type, problem = fetch(args.base_url, path, code)
        ok = (
            status == want
            and content_type.startswith("application/problem+json")
            and problem.get("type") == TYPE_BASE + kind
            and problem.get("status") == want
        )
        failed += not ok
        label = f"X-Code {code}" if code else "no X-Code"
        print(f"error pages: {'ok' if ok else 'FAILED'}  {label} {path}: {status} {problem}")
    # In the language asked for, as the compose proxy's are (service/proxy.py).
    status, _, problem = fetch(args.base_url, "/v1/gradients", 429, "et-EE,et;q=0.9")
    ok = status == 429 and problem.get("title") == "Liiga palju päringuid"
    failed += not ok
    print(f"error pages: {'ok' if ok else 'FAILED'}  X-Code 429 in Estonian: {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
