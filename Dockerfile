# syntax=docker/dockerfile:1
#
# One image for every role of tickwork; the chart picks the role by its arguments:
#   tickwork operator | tickwork worker --app MODULE:APP | tickwork migrate
#
#   docker build -t tickwork:0.2.0.dev0 .
#   docker run --rm -e TICKWORK_DATABASE_URL=postgresql://... tickwork:0.2.0.dev0 migrate
#
# Your own task code goes into an image built FROM this one (docs/deployment.md):
#   FROM ghcr.io/tickwork/tickwork:0.2.0.dev0
#   COPY --chown=10001:10001 myapp/ /app/myapp/       # /app is the working directory
#   # or: USER root, RUN pip install --no-cache-dir your-package, USER 10001:10001
#   CMD ["worker", "--app", "myapp.tasks:app"]
#
# Python is pinned by full version and Debian release; pin the digest too when you build
# releases (python:3.11.11-slim-bookworm@sha256:...).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# --- builder: wheels of tickwork and of every dependency, installed into a virtualenv ----
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps everything else out).
COPY pyproject.toml README.md ./
COPY src/ ./src/
# Every dependency has binary wheels for this platform, so no compiler is needed; the
# install compiles the bytecode, so the read-only image never writes .pyc files.
RUN python -m pip wheel --wheel-dir /wheels . \
 && python -m venv /opt/tickwork \
 && /opt/tickwork/bin/python -m pip install --no-index --find-links /wheels tickwork \
 && /opt/tickwork/bin/tickwork --help > /dev/null

# --- runtime: the virtualenv and nothing else from the builder ---------------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="tickwork" \
      org.opencontainers.image.description="Recurring and one-off jobs on PostgreSQL: operator, workers, migrations" \
      org.opencontainers.image.source="https://github.com/tickwork/tickwork" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/tickwork/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# A numeric, non-root user (Kubernetes' runAsNonRoot can only verify a numeric USER).
RUN groupadd --system --gid 10001 tickwork \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin tickwork \
 && mkdir /app \
 && chown 10001:10001 /app
COPY --from=builder /opt/tickwork /opt/tickwork
# The worker imports --app modules from its working directory.
WORKDIR /app
USER 10001:10001
# /metrics, /healthz, /readyz (--http-port); the operator's webhook listens on 9443.
EXPOSE 9090
ENTRYPOINT ["tickwork"]
CMD ["--help"]
