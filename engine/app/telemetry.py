"""Where a process's traces go: read from the environment, built by the process's entry
point (``stepway engine``, ``stepway serve``, ``stepway dev``), never at import.

* ``APPLICATIONINSIGHTS_CONNECTION_STRING``: Application Insights, through the Azure
  Monitor exporter. With a credential (the process's managed identity) the exporter
  sends Entra tokens: the Pulumi program's component accepts nothing else.
* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``): any
  OpenTelemetry collector, over OTLP/gRPC.
* neither (or ``OTEL_SDK_DISABLED=true``): no tracer provider; the code's spans are
  OpenTelemetry's no-op ones and no trace context is written into runs or messages.

``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES`` and the sampler variables
(``OTEL_TRACES_SAMPLER``) are OpenTelemetry's own and read by its SDK. The provider is
handed to the services (``EngineServices.tracer_provider``, ``Deps.tracer_provider``);
nothing here sets OpenTelemetry's global provider.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from engine.app.config import EnvReader

__all__ = ["TelemetryConfig", "build_tracer_provider"]

log = logging.getLogger(__name__)

CONNECTION_STRING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
OTLP_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")

_IKEY = re.compile(
    r"(^|;)\s*InstrumentationKey\s*=\s*[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
    r"[0-9a-f]{12}\s*(;|$)",
    re.IGNORECASE,
)


class TelemetryConfig(BaseModel):
    """The exporters of a process (none: tracing is off)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Application Insights connection string (an address and key, not a credential)
    connection_string: str | None = None
    #: OTLP/gRPC collector endpoint
    otlp_endpoint: str | None = None
    #: ``OTEL_SERVICE_NAME``, else the process's default
    service_name: str = "stepway"

    @property
    def enabled(self) -> bool:
        return bool(self.connection_string or self.otlp_endpoint)

    @classmethod
    def read(cls, env: EnvReader, default_service: str) -> TelemetryConfig:
        """Reads the telemetry variables; problems go to ``env``."""
        service = env.text("OTEL_SERVICE_NAME") or default_service
        if env.flag("OTEL_SDK_DISABLED", False):
            return cls(service_name=service)
        connection = env.text(CONNECTION_STRING)
        if connection is not None and not _IKEY.search(connection):
            env.error(
                CONNECTION_STRING,
                "expected an Application Insights connection string "
                "(InstrumentationKey=<guid>;IngestionEndpoint=https://...)",
            )
            connection = None
        endpoint = None
        for name in OTLP_ENDPOINTS:
            value = env.text(name)
            if value is None:
                continue
            if not re.match(r"^https?://[^/\s]+", value):
                env.error(name, f"expected an http:// or https:// URL, got {value!r}")
            else:
                endpoint = endpoint or value
        for name in OTLP_PROTOCOLS:
            protocol = env.text(name)
            if protocol is not None and protocol != "grpc":
                env.error(name, f"only grpc is supported (OTLP/gRPC), got {protocol!r}")
        return cls(connection_string=connection, otlp_endpoint=endpoint, service_name=service)


def build_tracer_provider(config: TelemetryConfig, credential: Any = None) -> TracerProvider | None:
    """The tracer provider exporting to what ``config`` names, or None when tracing is
    off. ``credential`` (an azure-identity credential) authenticates the Application
    Insights exporter; without one it sends the connection string's key only. Shut it
    down at exit (``provider.shutdown()``): that flushes the spans still batched."""
    if not config.enabled:
        return None
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: config.service_name}))
    if config.connection_string:
        from azure.monitor.opentelemetry.exporter import AzureMonitorTraceExporter

        # the exporter reads the service's resource from the provider it is given
        options: dict[str, Any] = {
            "connection_string": config.connection_string,
            "tracer_provider": provider,
        }
        if credential is not None:
            options["credential"] = credential
        provider.add_span_processor(BatchSpanProcessor(AzureMonitorTraceExporter(**options)))
    if config.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        # headers, TLS and timeout come from the exporter's own OTEL_EXPORTER_OTLP_* variables
        exporter = OTLPSpanExporter(endpoint=config.otlp_endpoint)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    log.warning(
        "tracing on: service %s, exporting to %s",
        config.service_name,
        " and ".join(
            n
            for n, on in (
                ("Application Insights", config.connection_string),
                (f"OTLP {config.otlp_endpoint}", config.otlp_endpoint),
            )
            if on
        ),
    )
    return provider
