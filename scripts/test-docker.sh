#!/usr/bin/env bash
# Container smoke test: lint the Dockerfile and compose file, build the image, start the service
# alone (:8000) and the `scale` profile (three replicas behind nginx, :8080), run
# tests/docker/smoke.py against both, and always tear everything down again.
set -euo pipefail
cd "$(dirname "$0")/.."

ENGINE=../shared/tools/container-engine
PYTHON=${PYTHON:-python3}
export COMPOSE_PROJECT_NAME=autograd-smoke # its own name: `down` removes only what this run made
compose() { docker compose --profile scale "$@"; }
say() { echo "test-docker: $*"; }

started_engine=false
teardown() {
  local status=$?
  if [ "$status" -ne 0 ] && docker info >/dev/null 2>&1; then
    say "failed; the containers' last log lines:" >&2
    compose logs --no-color --tail 60 >&2 || true
  fi
  compose down -v --remove-orphans >/dev/null 2>&1 || true
  if "$started_engine"; then bash "$ENGINE" down || true; fi
  exit "$status"
}
trap teardown EXIT

if ! docker info >/dev/null 2>&1; then
  if [ -f "$ENGINE" ]; then
    say "no Docker daemon reachable; starting one with $ENGINE"
    started_engine=true # set first: a half-finished start is stopped again too
    bash "$ENGINE" up
  else
    say "no Docker daemon reachable and no $ENGINE to start one" >&2
    exit 1
  fi
fi

if [ -f "$ENGINE" ]; then
  bash "$ENGINE" lint
else
  docker compose config -q
fi

build_started=$(date +%s)
compose build
say "built in $(($(date +%s) - build_started)) s; image autograd-service is" \
  "$(docker image inspect autograd-service:latest --format '{{.Size}}' | awk '{printf "%.0f MB", $1 / 1e6}')"

compose up -d --wait --wait-timeout 180
"$PYTHON" tests/docker/smoke.py http://127.0.0.1:8000
"$PYTHON" tests/docker/smoke.py http://127.0.0.1:8080 --replicas 3
say "passed"
