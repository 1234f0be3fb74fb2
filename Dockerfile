# The service image: gunicorn serving the app as an unprivileged user, configured by environment.
#
#   docker build -t autograd-service .
#   docker run --rm -p 8000:8000 autograd-service

# Build stage: the locked dependencies, then the project itself, into one relocatable venv.
FROM python:3.11-slim AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
# The lock comes first, so editing the code reuses the cached dependency layer.
COPY requirements.lock ./
RUN pip install --no-cache-dir --requirement requirements.lock
COPY pyproject.toml README.md ./
COPY service/ service/
# --no-deps: every dependency is already pinned above; `pip check` fails the build if one is missing.
# Then the installers leave the venv: nothing installs at run time, and the image is 25 MB smaller.
RUN pip install --no-cache-dir --no-deps . \
    && pip check \
    && pip uninstall --yes pip setuptools

# Runtime stage: the same base, the venv, the gunicorn settings, and nothing used only to build.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    PORT=8000

RUN groupadd --gid 10001 autograd \
    && useradd --uid 10001 --gid autograd --no-create-home --no-log-init --shell /usr/sbin/nologin autograd
# Graphviz's `dot` draws graphs as SVG (`format: svg`); without it that format is a 501 problem.
RUN apt-get update \
    && apt-get install --yes --no-install-recommends graphviz \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY gunicorn.conf.py ./
# matplotlib's font cache, built into the image: otherwise the first plot of every new container
# spends about 2 s building it. The directory is the service user's, as matplotlib requires; with
# a read-only filesystem the service copies it to /tmp first (service/pictures.py).
ENV MPLCONFIGDIR=/opt/matplotlib
RUN mkdir "$MPLCONFIGDIR" \
    && python -c "from service.pictures import warm_up; warm_up()" \
    && chown -R 10001:10001 "$MPLCONFIGDIR"

# Root owns every file, so the process can read its code but not change it. Numeric, so that
# orchestrators that check for a non-root user can tell without reading /etc/passwd.
USER 10001:10001
EXPOSE 8000

# The slim base has no curl: Python itself asks /healthz, and any error or non-2xx fails the check.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('PORT', '8000') + '/healthz', timeout=2)"]

# Exec form: gunicorn is PID 1 and receives `docker stop`'s SIGTERM itself, for a graceful shutdown.
CMD ["gunicorn", "--config", "gunicorn.conf.py", "service.app:create_app()"]
