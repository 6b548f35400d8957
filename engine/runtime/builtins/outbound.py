"""The bounded outbound HTTP client shared by the built-in activities.

Every call made on behalf of a workflow goes through :func:`send`, which enforces:

* connect and read timeouts, and an overall bound per exchange
  (``OutboundSettings.max_duration_seconds``, checked between chunks, so an exchange
  lasts at most that plus one read timeout);
* a response size cap: the body is streamed and reading stops above
  ``max_response_bytes`` (a ``Content-Length`` above the cap is refused before reading);
  the call then fails terminally naming the size. Nothing is ever silently truncated.
  The cap counts decoded bytes, so a compressed bomb is stopped too;
* no calls to link-local or platform metadata addresses (169.254.0.0/16 - which holds
  the instance metadata service 169.254.169.254 -, fe80::/10, the Azure wire server
  168.63.129.16, and their IPv4-mapped IPv6 forms) unless ``allow_link_local``. The host
  is resolved first, every resolved address is checked, and the connection is then made
  to a checked address (the IP is *pinned*: the URL is rewritten to the IP, with the
  original ``Host`` header and, for https, the original name as SNI and for certificate
  verification). So DNS rebinding between the check and the connect cannot reach a
  blocked address. Loopback and private addresses stay allowed;
* redirects are followed by hand (at most ``max_redirects``), each hop checked the
  same way; ``Authorization`` is dropped when a redirect leaves the original origin;
* a bearer token (``authorization``) is only sent over https, or over plain http to a
  loopback address (local development and tests).

Environment proxy settings are ignored (``trust_env=False``): a proxy would connect on
our behalf and defeat the address check.

Clients are reused across calls through :class:`OutboundClients` (one per engine
process, in ``ActivityDeps``), and so are connections: a pooled connection is keyed by
the pinned address, and there is one client per TLS server name, so a connection made
(and its certificate verified) for one name never carries a request for another. A
kept-alive connection to a server that writes a response's headers and body in two
segments (Python's ``http.server`` does) would wait out the client's delayed ACK, about
40 ms per request on Linux: every connection acknowledges at once instead
(``quickack.py``). Where that cannot be switched on (not Linux), plain http connections
are closed after their response, as a fresh connection does not delay its ACKs.

Failures raise :class:`OutboundError` with ``retryable`` set the way the activities map
it to a result: connection errors and timeouts are retryable, a blocked address, an
oversized response or an invalid URL are not.
"""

from __future__ import annotations

import contextlib
import email.utils
import ipaddress
import math
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from engine.language.retry import MAX_RETRY_DELAY_SECONDS
from engine.runtime.builtins.quickack import QUICKACK, quickack_transport
from engine.runtime.builtins.results import (
    ActivityError,
    ActivityResult,
    OutboundSettings,
    ResultStatus,
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Networks never called unless ``allow_link_local``.
BLOCKED_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),  # IPv4 link-local, incl. IMDS 169.254.169.254
    ipaddress.ip_network("fe80::/10"),  # IPv6 link-local
    ipaddress.ip_network("168.63.129.16/32"),  # Azure wire server / platform DNS
)

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class OutboundError(ActivityError):
    """An outbound call that produced no usable response."""


class BlockedDestination(OutboundError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, retryable=False)


class ResponseTooLarge(OutboundError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason, retryable=False)


@dataclass(frozen=True)
class OutboundResponse:
    """A complete response: status, headers in the server's case and order, body."""

    url: str
    status_code: int
    reason_phrase: str
    headers: tuple[tuple[str, str], ...]
    content: bytes

    def header(self, name: str) -> str | None:
        lname = name.lower()
        for key, value in self.headers:
            if key.lower() == lname:
                return value
        return None

    @property
    def content_type(self) -> str:
        return self.header("content-type") or ""

    def headers_multi(self) -> dict[str, list[str]]:
        """Headers as Conductor's HTTP task reports them: name -> list of values."""
        out: dict[str, list[str]] = {}
        seen: dict[str, str] = {}
        for key, value in self.headers:
            name = seen.setdefault(key.lower(), key)
            out.setdefault(name, []).append(value)
        return out


# -- helpers ---------------------------------------------------------------------------


def redact_url(url: str | httpx.URL) -> str:
    """The URL without user info, query and fragment: safe for reasons and logs (Logic
    Apps trigger URLs, for one, carry their signature in the query)."""
    try:
        u = httpx.URL(str(url))
    except Exception:
        return "<invalid url>"
    port = f":{u.port}" if u.port is not None else ""
    host = f"[{u.host}]" if ":" in u.host else u.host
    suffix = "?..." if u.query else ""
    return f"{u.scheme}://{host}{port}{u.path}{suffix}"


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: delay-seconds or an HTTP date (RFC 9110 10.2.3); ``None``
    if absent or unreadable, negative, infinite or NaN. A date already past is 0; the
    result is at most :data:`MAX_RETRY_DELAY_SECONDS` (the cap of every retry delay), so
    that a server cannot park a run for years or overflow its timer."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds) or seconds < 0:
            return None
        return min(seconds, float(MAX_RETRY_DELAY_SECONDS))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return min(max(0.0, (when - current).total_seconds()), float(MAX_RETRY_DELAY_SECONDS))


def classify_status(status_code: int) -> ResultStatus:
    """2xx completes; 408, 429 and 5xx are retryable; every other status is terminal."""
    if 200 <= status_code < 300:
        return "COMPLETED"
    if status_code in (408, 429) or 500 <= status_code < 600:
        return "FAILED"
    return "FAILED_WITH_TERMINAL_ERROR"


def status_reason(response: OutboundResponse, method: str) -> str:
    phrase = f" {response.reason_phrase}" if response.reason_phrase else ""
    return f"HTTP {response.status_code}{phrase} from {method} {redact_url(response.url)}"


def result_for_response(
    response: OutboundResponse, method: str, output: dict[str, Any]
) -> ActivityResult:
    """The envelope for a response by status (see :func:`classify_status`)."""
    status = classify_status(response.status_code)
    if status == "COMPLETED":
        return ActivityResult.completed(output)
    reason = status_reason(response, method)
    if status == "FAILED":
        return ActivityResult.failed(
            reason,
            output=output,
            retry_after_seconds=parse_retry_after(response.header("retry-after")),
        )
    return ActivityResult.terminal(reason, output=output)


def is_blocked_address(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in BLOCKED_NETWORKS)


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (an IP literal is itself)."""
    literal = _ip_literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise OutboundError(f"could not resolve host {host!r}: {exc}", retryable=True) from exc
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = _ip_literal(str(sockaddr[0]))
        if ip is not None and ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise OutboundError(f"host {host!r} resolved to no address", retryable=True)
    return addresses


def check_destination(url: httpx.URL, settings: OutboundSettings) -> list[IPAddress]:
    """Resolve the URL's host and refuse it if any address is blocked; returns the
    addresses to connect to."""
    if url.scheme not in ("http", "https"):
        raise OutboundError(f"unsupported URL scheme {url.scheme!r}", retryable=False)
    host = url.raw_host.decode("ascii")
    if not host:
        raise OutboundError(f"URL has no host: {redact_url(url)}", retryable=False)
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = resolve(host, port)
    if not settings.allow_link_local:
        blocked = [str(ip) for ip in addresses if is_blocked_address(ip)]
        if blocked:
            raise BlockedDestination(
                f"refusing to call {redact_url(url)}: {host} resolves to link-local or "
                f"platform metadata address(es) {', '.join(blocked)}"
            )
    return addresses


def _origin(url: httpx.URL) -> tuple[str, bytes, int | None]:
    return (url.scheme, url.raw_host.lower(), url.port)


_ssl_lock = threading.Lock()
_ssl_context: ssl.SSLContext | None = None


def _verify_context() -> ssl.SSLContext:
    """One shared TLS context (building one per call costs milliseconds)."""
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            _ssl_context = httpx.create_ssl_context()
        return _ssl_context


class OutboundClients:
    """The reusable HTTP clients of an engine process (see the module docstring): one
    per TLS server name, at most ``max_clients`` (the least recently used goes; its
    connections close when it is collected), each keeping at most ``max_connections``
    connections, ``max_keepalive`` of them idle; and one for plain http, which keeps
    as many idle where connections acknowledge at once (``quickack.QUICKACK``), else
    none."""

    def __init__(
        self, *, max_clients: int = 32, max_connections: int = 64, max_keepalive: int = 16
    ) -> None:
        self._clients: dict[str, httpx.Client] = {}
        self._lock = threading.Lock()
        self.max_clients = max_clients
        self._limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_keepalive
        )
        self._plain = _new_client(
            httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_keepalive if QUICKACK else 0,
            )
        )

    def for_url(self, url: httpx.URL) -> httpx.Client:
        if url.scheme != "https":
            return self._plain
        name = url.raw_host.decode("ascii").lower()
        with self._lock:
            client = self._clients.pop(name, None)
            if client is None:
                client = _new_client(self._limits)
            self._clients[name] = client  # most recently used last
            while len(self._clients) > self.max_clients:
                del self._clients[next(iter(self._clients))]
            return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = [*self._clients.values(), self._plain], {}
        for client in clients:
            client.close()


def _new_client(limits: httpx.Limits | None = None) -> httpx.Client:
    transport = httpx.HTTPTransport(
        verify=_verify_context(), trust_env=False, limits=limits or httpx.Limits()
    )
    return httpx.Client(
        follow_redirects=False, trust_env=False, transport=quickack_transport(transport)
    )


@dataclass
class _Deadline:
    at: float

    def remaining(self) -> float:
        return self.at - time.monotonic()


# -- the call --------------------------------------------------------------------------


def send(
    settings: OutboundSettings,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    authorization: str | None = None,
    connect_timeout_seconds: float | None = None,
    read_timeout_seconds: float | None = None,
    clients: OutboundClients | None = None,
) -> OutboundResponse:
    """One bounded HTTP exchange (see the module docstring). Raises :class:`OutboundError`.

    ``clients``: the process's reusable clients; without, the call has a client of its
    own.

    ``connect_timeout_seconds``/``read_timeout_seconds`` override the settings' timeouts
    for this call (bounded by ``max_duration_seconds``); ``authorization`` is the value
    of the ``Authorization`` header, sent only to the original origin.
    """
    method = method.upper()
    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise OutboundError(f"invalid URL: {exc}", retryable=False) from exc
    bound = settings.max_duration_seconds
    connect_timeout = min(connect_timeout_seconds or settings.connect_timeout_seconds, bound)
    read_timeout = min(read_timeout_seconds or settings.read_timeout_seconds, bound)
    timeout = httpx.Timeout(
        connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
    )
    deadline = _Deadline(time.monotonic() + bound)
    original_origin = _origin(current)
    request_headers = {k: v for k, v in (headers or {}).items() if k.lower() != "host"}
    body = content

    with contextlib.ExitStack() as own:
        single = None if clients is not None else own.enter_context(_new_client())
        for _hop in range(settings.max_redirects + 1):
            hop_headers = dict(request_headers)
            if authorization is not None and _origin(current) == original_origin:
                hop_headers["Authorization"] = authorization
            response = _exchange(
                single or clients.for_url(current),  # type: ignore[union-attr]
                timeout,
                settings,
                method,
                current,
                hop_headers,
                body,
                deadline,
                with_auth="Authorization" in hop_headers,
            )
            location = response.header("location")
            if response.status_code not in _REDIRECT_STATUSES or not location:
                return response
            try:
                current = current.join(location)
            except httpx.InvalidURL as exc:
                raise OutboundError(
                    f"invalid redirect location from {redact_url(response.url)}: {exc}",
                    retryable=False,
                ) from exc
            if response.status_code == 303 or (
                response.status_code in (301, 302) and method not in ("GET", "HEAD")
            ):
                method = "GET" if method != "HEAD" else "HEAD"
                body = None
                request_headers = {
                    k: v
                    for k, v in request_headers.items()
                    if k.lower() not in ("content-type", "content-length")
                }
    raise OutboundError(
        f"too many redirects (more than {settings.max_redirects}) from {method} {redact_url(url)}",
        retryable=False,
    )


def _exchange(
    client: httpx.Client,
    timeout: httpx.Timeout,
    settings: OutboundSettings,
    method: str,
    url: httpx.URL,
    headers: dict[str, str],
    content: bytes | None,
    deadline: _Deadline,
    *,
    with_auth: bool,
) -> OutboundResponse:
    addresses = check_destination(url, settings)
    if with_auth and url.scheme != "https" and not all(ip.is_loopback for ip in addresses):
        raise BlockedDestination(
            f"refusing to send a bearer token over plain http to {redact_url(url)} (use https)"
        )
    host_header = url.netloc.decode("ascii")
    sni = url.raw_host.decode("ascii")
    last_error: OutboundError | None = None
    for ip in addresses:
        if deadline.remaining() <= 0:
            break
        pinned = url.copy_with(host=str(ip))
        extensions: dict[str, Any] = {}
        if url.scheme == "https" and _ip_literal(sni) is None:
            extensions["sni_hostname"] = sni
        try:
            return _read(
                client,
                timeout,
                settings,
                method,
                url,
                pinned,
                {**headers, "Host": host_header},
                content,
                extensions,
                deadline,
            )
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # nothing was sent: the next address may work
            last_error = _map_transport_error(exc, method, url)
            continue
        except httpx.HTTPError as exc:
            raise _map_transport_error(exc, method, url) from exc
    if last_error is not None:
        raise last_error
    raise OutboundError(
        f"{method} {redact_url(url)}: gave up after {settings.max_duration_seconds:g}s",
        retryable=True,
    )


def _read(
    client: httpx.Client,
    timeout: httpx.Timeout,
    settings: OutboundSettings,
    method: str,
    url: httpx.URL,
    pinned: httpx.URL,
    headers: dict[str, str],
    content: bytes | None,
    extensions: dict[str, Any],
    deadline: _Deadline,
) -> OutboundResponse:
    cap = settings.max_response_bytes
    request = client.build_request(
        method, pinned, headers=headers, content=content, extensions=extensions, timeout=timeout
    )
    response = client.send(request, stream=True)
    try:
        raw_headers = tuple(
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw
        )
        if response.status_code in _REDIRECT_STATUSES and response.headers.get("location"):
            data = b""  # the body of a redirect is never used
        else:
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > cap:
                raise ResponseTooLarge(
                    f"response of {method} {redact_url(url)} is {int(declared)} bytes, "
                    f"over the cap of {cap} bytes"
                )
            buf = bytearray()
            for chunk in response.iter_bytes():
                buf += chunk
                if len(buf) > cap:
                    raise ResponseTooLarge(
                        f"response of {method} {redact_url(url)} exceeds the cap of {cap} "
                        f"bytes (read {len(buf)} bytes, stopped)"
                    )
                if deadline.remaining() <= 0:
                    raise OutboundError(
                        f"{method} {redact_url(url)}: response not complete after "
                        f"{settings.max_duration_seconds:g}s",
                        retryable=True,
                    )
            data = bytes(buf)
    finally:
        response.close()
    return OutboundResponse(
        url=str(url),
        status_code=response.status_code,
        reason_phrase=response.reason_phrase,
        headers=raw_headers,
        content=data,
    )


def _map_transport_error(exc: httpx.HTTPError, method: str, url: httpx.URL) -> OutboundError:
    target = f"{method} {redact_url(url)}"
    if isinstance(exc, httpx.ConnectTimeout):
        return OutboundError(f"connect timeout: {target}", retryable=True)
    if isinstance(exc, httpx.ReadTimeout):
        return OutboundError(
            f"read timeout: {target} (no data within the read timeout)", retryable=True
        )
    if isinstance(exc, httpx.TimeoutException):
        return OutboundError(f"timeout ({type(exc).__name__}): {target}", retryable=True)
    if isinstance(exc, httpx.ConnectError):
        return OutboundError(f"connection failed: {target}: {exc}", retryable=True)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return OutboundError(f"invalid request: {target}: {exc}", retryable=False)
    if isinstance(exc, httpx.TransportError):
        return OutboundError(
            f"transport error ({type(exc).__name__}): {target}: {exc}", retryable=True
        )
    return OutboundError(f"{type(exc).__name__}: {target}: {exc}", retryable=True)
