#!/usr/bin/env bash
# Container test: lint the Dockerfiles and compose file, build each image once, start the default
# stack (nginx in front of gunicorn, :8000) and the `scale` profile (three replicas behind nginx,
# :8080), and check them from outside:
#   - tests/docker/smoke.py against both (the API, the spec, the docs, the round robin);
#   - gunicorn is published on no host port, and its log lines are JSON;
#   - tests/docker/proxy_problems.py: the time budget, nginx's own 413 and 429, and a worker
#     killed mid-request, each answered with a problem document;
#   - tests/docker/slow_clients.py: 200 slow connections while lessons keep succeeding;
#   - `docker compose --profile scale down` leaves no container behind.
# Everything is torn down at the end, pass or fail.
#
# COMPOSE_PROJECT_NAME (default autograd-test), AUTOGRAD_HTTP_PORT (8000) and
# AUTOGRAD_SCALE_HTTP_PORT (8080) and AUTOGRAD_IMAGE_TAG (latest) let it run beside another stack
# on the same engine.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/docker-common.sh
. scripts/docker-common.sh
PYTHON=${PYTHON:-python3}
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-autograd-test} # `down` removes only its own
export AUTOGRAD_HTTP_PORT=${AUTOGRAD_HTTP_PORT:-8000}
export AUTOGRAD_SCALE_HTTP_PORT=${AUTOGRAD_SCALE_HTTP_PORT:-8080}
export AUTOGRAD_IMAGE_TAG=${AUTOGRAD_IMAGE_TAG:-latest}
compose() { docker compose --profile scale "$@"; }
say() { echo "test-docker: $*"; }

teardown() {
  local status=$?
  if [ "$status" -ne 0 ] && docker info >/dev/null 2>&1; then
    say "failed; the containers' last log lines:" >&2
    compose logs --no-color --tail 40 >&2 || true
  fi
  compose down -v --remove-orphans >/dev/null 2>&1 || true
  if "$started_engine"; then bash "$ENGINE" down || true; fi
  exit "$status"
}
trap teardown EXIT

need_docker

if [ -f "$ENGINE" ]; then
  bash "$ENGINE" lint
else
  docker compose config -q
fi

build_images "$AUTOGRAD_IMAGE_TAG"
# nginx's configuration, with its includes, as the image holds it (`api` resolved to anything).
docker run --rm --add-host api:127.0.0.1 "autograd-service-nginx:$AUTOGRAD_IMAGE_TAG" nginx -t -q

compose up -d --wait --wait-timeout 180
base=http://127.0.0.1:$AUTOGRAD_HTTP_PORT
scale=http://127.0.0.1:$AUTOGRAD_SCALE_HTTP_PORT
"$PYTHON" tests/docker/smoke.py "$base"
"$PYTHON" tests/docker/smoke.py "$scale" --replicas 3

published=$(docker compose ps --format '{{.Service}} {{.Publishers}}' | grep '^api' | grep -c -- '8000}' || true)
if docker compose port api 8000 >/dev/null 2>&1 || [ "$published" -ne 0 ]; then
  say "gunicorn is published on the host" >&2
  exit 1
fi
say "ok      gunicorn is published on no host port"

if ! compose logs --no-log-prefix --no-color api api-replica | grep -v '^$' |
  "$PYTHON" -c 'import json, sys; [json.loads(line) for line in sys.stdin]'; then
  say "a gunicorn log line is not JSON" >&2
  exit 1
fi
say "ok      every gunicorn log line is JSON"

# The dead-worker check kills the default stack's gunicorn workers from inside its api container.
"$PYTHON" tests/docker/proxy_problems.py "$base" --server-exec "docker compose exec -T api"
compose up -d --wait --wait-timeout 120 # the killed workers were replaced; wait for health anyway
"$PYTHON" tests/docker/slow_clients.py "$base" --connections 200 --duration 25

compose down -v --remove-orphans
left=$(docker ps -aq --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME")
if [ -n "$left" ]; then
  say "containers left after \`docker compose --profile scale down\`: $left" >&2
  exit 1
fi
say "ok      \`docker compose --profile scale down\` stops everything"
say "passed"
