# syntax=docker/dockerfile:1
# One image for the engine apps and the control plane (docs/configuration.md):
#   STEPWAY_ENGINE_ROLE set   -> stepway engine   (orchestrator | activity | all)
#   STEPWAY_ENGINE_ROLE unset -> stepway serve    (the control plane, on $STEPWAY_PORT)
# or pass the command explicitly: docker run IMAGE stepway engine --role activities
#
# Build from the repository root: docker build -t stepway .

FROM python:3.11-slim AS build
COPY --from=ghcr.io/astral-sh/uv:0.13 /uv /bin/uv
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src
# Dependencies first (cached while only the source changes). Runtime dependencies
# only: no dev or infra (Pulumi) groups.
COPY pyproject.toml uv.lock ./
COPY workers/sdk/pyproject.toml workers/sdk/pyproject.toml
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-default-groups --no-install-project --no-install-workspace
COPY . .
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-default-groups --no-editable

FROM python:3.11-slim
RUN groupadd --system --gid 10001 stepway \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin stepway
COPY --from=build /app/.venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /app
# Numeric user so that Kubernetes-style runAsNonRoot checks can verify it.
USER 10001:10001
EXPOSE 8080
# exec: the process gets SIGTERM directly and stops gracefully (exit 0).
CMD ["/bin/sh", "-c", "if [ -n \"$STEPWAY_ENGINE_ROLE\" ]; then exec stepway engine; else exec stepway serve; fi"]
