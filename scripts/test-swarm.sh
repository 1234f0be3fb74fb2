#!/usr/bin/env bash
# Docker swarm test: deploy the stack (docker-compose.yml + deploy/swarm/stack.yml) on a
# single-node swarm, smoke-test it through its proxy, roll the api service to a new image while
# 16 clients send lesson requests (tests/docker/rolling.py: zero failed requests, every replica
# replaced), check what swarm reports, and always tear everything down again.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/docker-common.sh
. scripts/docker-common.sh
PYTHON=${PYTHON:-python3}
# Its own names (SWARM_STACK, SWARM_TAG let it run beside another run): teardown removes only
# what this run made.
STACK=${SWARM_STACK:-autograd-swarm}
PORT=${AUTOGRAD_SWARM_HTTP_PORT:-18880}
TAG=${SWARM_TAG:-swarm-test}
OLD=$TAG-1
NEW=$TAG-2
BROKEN=$TAG-broken
ERRORS_PORT=${AUTOGRAD_SWARM_ERRORS_PORT:-18881}
export COMPOSE_PROJECT_NAME=$STACK
scratch=$(mktemp -d)
say() { echo "test-swarm: $*"; }

started_swarm=false
teardown() {
  local status=$?
  if docker info >/dev/null 2>&1; then
    if [ "$status" -ne 0 ]; then
      say "failed; the services' tasks and last log lines:" >&2
      docker stack ps "$STACK" --no-trunc >&2 || true
      # `service logs` can wait for ever on a task that is gone: a bounded wait
      timeout 30 docker service logs --tail 40 "${STACK}_api" >&2 || true
      timeout 30 docker service logs --tail 20 "${STACK}_proxy" >&2 || true
    fi
    docker rm --force "$STACK-errors" >/dev/null 2>&1 || true
    docker stack rm "$STACK" >/dev/null 2>&1 || true
    # `stack rm` returns at once; its containers and networks go in the background.
    for _ in $(seq 1 60); do
      [ -z "$(docker ps -aq --filter "label=com.docker.stack.namespace=$STACK")" ] &&
        [ -z "$(docker network ls -q --filter "label=com.docker.stack.namespace=$STACK")" ] && break
      sleep 1
    done
    if "$started_swarm"; then docker swarm leave --force >/dev/null || true; fi
    docker image rm "autograd-service:$OLD" "autograd-service:$NEW" "autograd-service:$BROKEN" \
      "autograd-service-nginx:$OLD" >/dev/null 2>&1 || true
  fi
  if "$started_engine"; then bash "$ENGINE" down || true; fi
  rm -rf "$scratch"
  exit "$status"
}
trap teardown EXIT

need_docker

if [ "$(docker info --format '{{.Swarm.LocalNodeState}}')" = inactive ]; then
  started_swarm=true
  docker swarm init --advertise-addr 127.0.0.1 >/dev/null
  say "single-node swarm started"
else
  say "this daemon is already part of a swarm; deploying into it"
fi

# The images, under a tag of this run's own. The stack overlay names the same builds.
build_images "$OLD"

# compose renders the two files into one (applying `!reset`, `!override` and the variables);
# sed turns that into the stack format (no project name; a published port is a number).
render() {
  AUTOGRAD_IMAGE_TAG=$1 AUTOGRAD_SWARM_HTTP_PORT=$PORT docker compose -f docker-compose.yml \
    -f deploy/swarm/stack.yml config api proxy |
    sed -E -e '/^name: /d' -e 's/published: "([0-9]+)"/published: \1/'
}
render "$OLD" | docker stack deploy --resolve-image never --compose-file - "$STACK"

# Swarm starts the tasks in the background: wait until every replica passes its health check.
for _ in $(seq 1 90); do
  ready=$(docker service ls --filter "label=com.docker.stack.namespace=$STACK" --format '{{.Replicas}}')
  [ "$(echo "$ready" | sort | tr '\n' ' ')" = "1/1 3/3 " ] && break
  sleep 2
done
say "deployed: $(docker service ls --filter "label=com.docker.stack.namespace=$STACK" \
  --format '{{.Name}} {{.Replicas}}' | tr '\n' ' ')"

# The smoke test checks the API through the proxy. (Its strict round-robin check does not apply:
# this proxy picks a random replica per request; rolling.py checks that all three answer.)
"$PYTHON" tests/docker/smoke.py "http://127.0.0.1:$PORT"

# The Kubernetes Ingress's error pages (deploy/kubernetes/errors.yaml) in the same nginx image:
# its configuration is cut out of the ConfigMap, the snippets are the image's own.
awk '/^  nginx.conf: \|/ { on = 1; next } on && /^[^ ]/ { exit } on { sub(/^    /, ""); print }' \
  deploy/kubernetes/errors.yaml >"$scratch/errors-nginx.conf"
docker run --detach --name "$STACK-errors" --read-only --tmpfs /tmp --cap-drop ALL \
  --volume "$scratch/errors-nginx.conf:/etc/nginx/nginx.conf:ro" \
  --publish "127.0.0.1:$ERRORS_PORT:8080" "autograd-service-nginx:$OLD" >/dev/null
for _ in $(seq 1 30); do
  "$PYTHON" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$ERRORS_PORT/healthz')" \
    2>/dev/null && break
  sleep 0.5
done
"$PYTHON" tests/docker/error_pages.py "http://127.0.0.1:$ERRORS_PORT"
docker rm --force "$STACK-errors" >/dev/null

# A new image: the same build under a new tag with a label of its own, as a release would be.
printf 'FROM autograd-service:%s\nLABEL org.opencontainers.image.version=%s\n' "$OLD" "$NEW" |
  docker build --quiet --tag "autograd-service:$NEW" - >/dev/null
old_tasks=$(docker service ps "${STACK}_api" --filter desired-state=running -q | sort)

"$PYTHON" tests/docker/rolling.py "http://127.0.0.1:$PORT" --clients 16 --replicas 3 -- \
  docker service update --quiet --detach=false --no-resolve-image \
  --image "autograd-service:$NEW" "${STACK}_api"

# What swarm itself says: the update completed (no rollback), three tasks run the new image,
# and none of them is one that ran before.
state=$(docker service inspect "${STACK}_api" --format '{{.UpdateStatus.State}}')
images=$(docker service ps "${STACK}_api" --filter desired-state=running --format '{{.Image}}')
new_tasks=$(docker service ps "${STACK}_api" --filter desired-state=running -q | sort)
say "update state: $state; running: $(echo "$images" | tr '\n' ' ')"
# A replica's own /metrics (what a scraper inside the swarm reads) counted the learners' requests,
# summed over its workers.
replica=$(docker ps -q --filter "label=com.docker.swarm.service.name=${STACK}_api" | head -n 1)
docker exec "$replica" python -c "import urllib.request as u; \
print(u.urlopen('http://127.0.0.1:8000/metrics', timeout=5).read().decode())" >"$scratch/metrics"
served=$(sed -n 's/^autograd_requests_total{endpoint="\/v1\/gradients",method="POST",status="200"} //p' \
  "$scratch/metrics")
say "one replica's /metrics: ${served:-no} lesson requests answered"
[ -n "$served" ] && awk "BEGIN { exit !($served > 0) }" || { say "no metrics" >&2; exit 1; }
[ "$state" = completed ] || { say "the update did not complete" >&2; exit 1; }
[ "$(echo "$images" | grep -c ":$NEW\$")" -eq 3 ] || { say "not every replica runs $NEW" >&2; exit 1; }
[ -z "$(comm -12 <(echo "$old_tasks") <(echo "$new_tasks"))" ] || {
  say "a task from before the update still runs" >&2
  exit 1
}

# A release that never becomes healthy (gunicorn listens on another port than the health check
# asks): its first replica fails its check, swarm rolls the update back (rollback_config), and the
# learners notice nothing. The replicas of $NEW go on serving throughout (rolling back the one
# slot the update took, swarm may give it a fresh task of $NEW).
printf 'FROM autograd-service:%s\nENV PORT=8001\n' "$NEW" |
  docker build --quiet --tag "autograd-service:$BROKEN" - >/dev/null
"$PYTHON" tests/docker/rolling.py "http://127.0.0.1:$PORT" --clients 16 --replicas 3 \
  --expect-rollback -- docker service update --quiet --detach=false --no-resolve-image \
  --image "autograd-service:$BROKEN" "${STACK}_api"
state=$(docker service inspect "${STACK}_api" --format '{{.UpdateStatus.State}}')
image=$(docker service inspect "${STACK}_api" --format '{{.Spec.TaskTemplate.ContainerSpec.Image}}')
say "after the broken release: update state $state, service image $image"
[ "$state" = rollback_completed ] && [ "$image" = "autograd-service:$NEW" ] || {
  say "the broken release was not rolled back" >&2
  exit 1
}
say "passed"
