"""Exporting a worker's spans, for ``python -m stepway_worker``: optional, built from
the environment by the process entry point (never at import).

Needs the ``telemetry`` extra (``pip install "stepway-worker[telemetry]"``: the
OpenTelemetry SDK and its Application Insights and OTLP exporters). Exporters:

* ``APPLICATIONINSIGHTS_CONNECTION_STRING``: Application Insights; with
  ``AZURE_CLIENT_ID`` (and the ``azure`` extra) the exporter authenticates with that
  managed identity, as the Pulumi program's component requires;
* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``): an
  OpenTelemetry collector over OTLP/gRPC;
* neither, or ``OTEL_SDK_DISABLED=true``: no provider, nothing exported.

``OTEL_SERVICE_NAME`` (default ``stepway-worker``) and ``OTEL_RESOURCE_ATTRIBUTES`` name
the service. An application that configures OpenTelemetry itself needs none of this:
the SDK's spans go to its global tracer provider.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["tracer_provider_from_env"]

log = logging.getLogger("stepway_worker")

CONNECTION_STRING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def _text(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def tracer_provider_from_env(env: Mapping[str, str] | None = None) -> Any:
    """An OpenTelemetry SDK ``TracerProvider`` exporting where the environment says, or
    None (no exporter configured, tracing disabled, or the ``telemetry`` extra is not
    installed: then a warning says so). Shut it down at exit to flush its spans."""
    env = os.environ if env is None else env
    if (_text(env, "OTEL_SDK_DISABLED") or "").lower() == "true":
        return None
    connection = _text(env, CONNECTION_STRING)
    endpoint = next((v for v in (_text(env, n) for n in OTLP_ENDPOINTS) if v), None)
    if connection is None and endpoint is None:
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "telemetry is configured but the OpenTelemetry SDK is not installed "
            '(pip install "stepway-worker[telemetry]"): no spans are exported'
        )
        return None
    service = _text(env, "OTEL_SERVICE_NAME") or "stepway-worker"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    if connection is not None:
        try:
            from azure.monitor.opentelemetry.exporter import AzureMonitorTraceExporter
        except ImportError:
            log.warning(
                "%s is set but azure-monitor-opentelemetry-exporter is not installed",
                CONNECTION_STRING,
            )
        else:
            options: dict[str, Any] = {"connection_string": connection, "tracer_provider": provider}
            credential = _managed_identity(env)
            if credential is not None:
                options["credential"] = credential
            provider.add_span_processor(BatchSpanProcessor(AzureMonitorTraceExporter(**options)))
    if endpoint is not None:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError:
            log.warning("an OTLP endpoint is set but the OTLP exporter is not installed")
        else:
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def _managed_identity(env: Mapping[str, str]) -> Any:
    client_id = _text(env, "AZURE_CLIENT_ID")
    if client_id is None:
        return None
    try:
        from azure.identity import ManagedIdentityCredential
    except ImportError:
        log.warning("AZURE_CLIENT_ID is set but azure-identity is not installed")
        return None
    return ManagedIdentityCredential(client_id=client_id)
