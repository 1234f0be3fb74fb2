# nginx in front of the API (docker-compose.yml), built on the service's own base image: no other
# image is pulled.
FROM python:3.11-slim

# Debian's nginx for this release, unpinned: its updates within a release are security fixes.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx \
    && rm -rf /var/lib/apt/lists/*

COPY nginx.conf /etc/nginx/nginx.conf
# The client limits and the problem+json error pages, includable by any other nginx set-up.
COPY nginx/ /etc/nginx/autograd/

# www-data, as numbers so a runtime can tell it is not root without reading /etc/passwd.
USER 33:33
EXPOSE 8080

# The image's Python asks nginx for /healthz, which also proves a replica answers behind it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]

# -e stderr: the error log goes to the container's log from the very first line.
CMD ["nginx", "-e", "stderr", "-g", "daemon off;"]
