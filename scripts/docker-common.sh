# shellcheck shell=bash disable=SC2034  # started_engine is read by the caller's teardown
# What scripts/test-docker.sh and scripts/test-swarm.sh share, sourced from the project's root: a
# Docker daemon to test against, and the images docker-compose.yml builds. The caller defines
# `say`, and its EXIT trap stops the engine again when `started_engine` is true.

ENGINE=../shared/tools/container-engine
started_engine=false

# A reachable Docker daemon: the one running, else one started with $ENGINE.
need_docker() {
  if docker info >/dev/null 2>&1; then
    return 0
  fi
  if [ ! -f "$ENGINE" ]; then
    say "no Docker daemon reachable and no $ENGINE to start one" >&2
    exit 1
  fi
  say "no Docker daemon reachable; starting one with $ENGINE"
  started_engine=true # set first: a half-finished start is stopped again too
  bash "$ENGINE" up
}

# The service's image and the proxy's, both tagged $1 (docker-compose.yml names them by
# AUTOGRAD_IMAGE_TAG); says how long the build took and how large the service's image is.
build_images() {
  local tag=$1 started size
  started=$(date +%s)
  AUTOGRAD_IMAGE_TAG=$tag docker compose -f docker-compose.yml build api proxy
  size=$(docker image inspect "autograd-service:$tag" --format '{{.Size}}' |
    awk '{printf "%.0f MB", $1 / 1e6}')
  say "built in $(($(date +%s) - started)) s; image autograd-service:$tag is $size"
}
