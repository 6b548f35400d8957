"""engine/app/telemetry.py: which exporters the environment names, the errors (each names
its variable), and the two exporters really exporting: OTLP/gRPC to a collector served
here, Application Insights to an HTTPS ingestion endpoint served here, with the Entra
token of the process credential (the Pulumi program's component accepts nothing else)."""

from __future__ import annotations

import datetime
import gzip
import ipaddress
import json
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from azure.core.credentials import AccessToken
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from control_plane.cli.serve import ServeConfig
from engine.app.config import ConfigError, EngineConfig, EnvReader
from engine.app.telemetry import TelemetryConfig, build_tracer_provider

IKEY = "00000000-0000-0000-0000-0000000000cc"


def local_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"STEPWAY_ENGINE_ROLE": "all", "STEPWAY_DATA_DIR": str(tmp_path / "data"), **extra}


# -- off unless an exporter is named --------------------------------------------------------


def test_no_exporter_configured_means_no_tracer_provider(tmp_path: Path) -> None:
    config = EngineConfig.from_env(local_env(tmp_path))
    assert not config.telemetry.enabled
    assert build_tracer_provider(config.telemetry) is None


def test_otel_sdk_disabled_switches_every_exporter_off(tmp_path: Path) -> None:
    env = local_env(
        tmp_path,
        APPLICATIONINSIGHTS_CONNECTION_STRING=f"InstrumentationKey={IKEY}",
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4317",
        OTEL_SDK_DISABLED="true",
    )
    assert build_tracer_provider(EngineConfig.from_env(env).telemetry) is None


def test_service_name_defaults_per_process_and_otel_service_name_wins(tmp_path: Path) -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}
    orchestrator = EngineConfig.from_env(local_env(tmp_path, **endpoint), role="orchestrator")
    assert orchestrator.telemetry.service_name == "stepway-engine-orchestrator"
    activities = EngineConfig.from_env(local_env(tmp_path, **endpoint), role="activities")
    assert activities.telemetry.service_name == "stepway-engine-activity"
    named = EngineConfig.from_env(local_env(tmp_path, OTEL_SERVICE_NAME="mine", **endpoint))
    assert named.telemetry.service_name == "mine"
    serve = ServeConfig.from_env(
        {"STEPWAY_DATA_DIR": str(tmp_path / "data"), "STEPWAY_AUTH_MODE": "none", **endpoint},
        host="127.0.0.1",
    )
    assert serve.telemetry.service_name == "stepway-control-plane"
    assert serve.telemetry.otlp_endpoint == "http://127.0.0.1:4317"


def test_bad_telemetry_variables_are_each_named(tmp_path: Path) -> None:
    env = local_env(
        tmp_path,
        APPLICATIONINSIGHTS_CONNECTION_STRING="not-a-connection-string",
        OTEL_EXPORTER_OTLP_ENDPOINT="collector:4317",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
    )
    with pytest.raises(ConfigError) as excinfo:
        EngineConfig.from_env(env)
    assert set(excinfo.value.variables) == {
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    }
    assert "grpc" in str(excinfo.value)


def test_the_traces_endpoint_variable_is_read_too() -> None:
    env = EnvReader({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://otel.example:4317"})
    config = TelemetryConfig.read(env, "svc")
    assert env.problems == [] and config.otlp_endpoint == "https://otel.example:4317"


# -- OTLP -------------------------------------------------------------------------------------


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.requests: list[Any] = []

    def Export(self, request: Any, context: Any) -> Any:
        self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def collector() -> Iterator[tuple[_Collector, int]]:
    servicer = _Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, port
    finally:
        server.stop(None)


def test_spans_go_to_the_otlp_collector(tmp_path: Path, collector: tuple[_Collector, int]) -> None:
    servicer, port = collector
    env = local_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    provider = build_tracer_provider(EngineConfig.from_env(env, role="activities").telemetry)
    assert provider is not None
    with provider.get_tracer("test").start_as_current_span("exported-span"):
        pass
    provider.shutdown()  # flushes the batch
    spans = [
        (span.name, resource.resource)
        for request in servicer.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert [name for name, _ in spans] == ["exported-span"]
    service = {a.key: a.value.string_value for a in spans[0][1].attributes}["service.name"]
    assert service == "stepway-engine-activity"


# -- Application Insights -----------------------------------------------------------------------


class _Ingestion(BaseHTTPRequestHandler):
    received: list[tuple[str, str | None, list[Any]]]

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        self.received.append((self.path, self.headers.get("Authorization"), json.loads(raw)))
        body = json.dumps({"itemsReceived": 1, "itemsAccepted": 1, "errors": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def ingestion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[list[tuple[str, str | None, list[Any]]], int]]:
    """An HTTPS Application Insights ingestion endpoint (its certificate trusted through
    REQUESTS_CA_BUNDLE, which azure-core's transport honours)."""
    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    # the exporter's statistics about itself (to Microsoft, and to this endpoint at exit)
    monkeypatch.setenv("APPLICATIONINSIGHTS_STATSBEAT_DISABLED_ALL", "true")
    monkeypatch.setenv("APPLICATIONINSIGHTS_SDKSTATS_DISABLED", "true")
    # the exporter keeps telemetry it could not send under the temporary directory
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    received: list[tuple[str, str | None, list[Any]]] = []
    handler = type("Handler", (_Ingestion,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received, server.server_port
    finally:
        server.shutdown()
        server.server_close()


class _Credential:
    """An azure-identity credential stand-in: the token the managed identity would get."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken("entra-token", int(time.time()) + 3600)


def test_spans_go_to_application_insights_with_an_entra_token(
    tmp_path: Path, ingestion: tuple[list[tuple[str, str | None, list[Any]]], int]
) -> None:
    received, port = ingestion
    env = local_env(
        tmp_path,
        APPLICATIONINSIGHTS_CONNECTION_STRING=(
            f"InstrumentationKey={IKEY};IngestionEndpoint=https://127.0.0.1:{port}/"
        ),
        OTEL_SERVICE_NAME="stepway-engine-activity",
    )
    credential = _Credential()
    provider = build_tracer_provider(EngineConfig.from_env(env).telemetry, credential)
    assert provider is not None
    with provider.get_tracer("test").start_as_current_span("exported-span"):
        pass
    provider.shutdown()
    assert credential.scopes == [("https://monitor.azure.com//.default",)]
    assert received and all(auth == "Bearer entra-token" for _, auth, _ in received)
    envelopes = [item for _, _, items in received for item in items]
    requests = [e for e in envelopes if e["data"]["baseType"] == "RequestData"] + [
        e for e in envelopes if e["data"]["baseType"] == "RemoteDependencyData"
    ]
    assert [e["data"]["baseData"]["name"] for e in requests] == ["exported-span"]
    assert requests[0]["iKey"] == IKEY
    assert requests[0]["tags"]["ai.cloud.role"] == "stepway-engine-activity"
