"""The response reader of stepway_worker/keepalive.py against a scripted server over a
real socket: each way a body can be delimited (Content-Length, chunked, the end of the
connection), interim responses, when a connection is kept or replaced, and malformed or
cut-off answers (errors the client reports as transient)."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from stepway_worker import StaticToken, TransientError
from stepway_worker.client import TaskClient
from stepway_worker.keepalive import KeepAlivePool

#: one answer: the pieces sent one after the other (paced apart, so that the client
#: reads them separately), and whether the server then closes the connection
Answer = tuple[list[bytes], bool]


class _Scripted:
    """Answers the requests it receives with ``answers`` in order, recording each
    request's bytes and how many connections it accepted."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = list(answers)
        self.requests: list[bytes] = []
        self.accepted = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _read_request(self, conn: socket.socket, buf: bytearray) -> bytes | None:
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return None
            buf += data
        end = buf.index(b"\r\n\r\n") + 4
        length = 0
        for line in bytes(buf[:end]).split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(buf) < end + length:
            buf += conn.recv(65536)
        request = bytes(buf[: end + length])
        del buf[: end + length]
        return request

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            buf = bytearray()
            with conn:
                while True:
                    request = self._read_request(conn, buf)
                    if request is None or not self.answers:
                        break
                    self.requests.append(request)
                    pieces, close = self.answers.pop(0)
                    for i, piece in enumerate(pieces):
                        if i:
                            time.sleep(0.02)
                        conn.sendall(piece)
                    if close:
                        break

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def scripted() -> Iterator[list[_Scripted]]:
    made: list[_Scripted] = []
    yield made
    for server in made:
        server.close()


def _serve(made: list[_Scripted], *answers: Answer) -> _Scripted:
    server = _Scripted(list(answers))
    made.append(server)
    return server


def _ok(body: bytes = b"[]", extra: bytes = b"") -> Answer:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % len(body) + extra + b"\r\n"
    return [head + body], False


def _get(pool: KeepAlivePool, target: str = "/api/x") -> tuple[int, bytes]:
    reply = pool.request("GET", target, body=None, headers={}, timeout=5.0)
    return reply.status_code, reply.content


def test_a_chunked_body_in_pieces_with_extensions_and_trailers(
    scripted: list[_Scripted],
) -> None:
    server = _serve(
        scripted,
        (
            [
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n",
                b'Content-Type: application/json\r\n\r\n5;ext=1\r\n[{"a',
                b'"\r\n5\r\n: 1}]\r\n',
                b"0\r\nX-Trailer: yes\r\n\r\n",
            ],
            False,
        ),
        _ok(b"{}"),
    )
    pool = KeepAlivePool(server.url)
    try:
        assert _get(pool) == (200, b'[{"a": 1}]')
        assert _get(pool) == (200, b"{}")
    finally:
        pool.close()
    assert server.accepted == 1


def test_a_head_and_body_sent_byte_by_byte(scripted: list[_Scripted]) -> None:
    whole = b'HTTP/1.1 201 Created\r\nContent-Length: 7\r\n\r\n{"k":1}'
    server = _serve(scripted, ([whole[i : i + 1] for i in range(len(whole))], False))
    pool = KeepAlivePool(server.url)
    try:
        assert _get(pool) == (201, b'{"k":1}')
    finally:
        pool.close()


def test_a_body_delimited_by_the_end_of_the_connection(scripted: list[_Scripted]) -> None:
    server = _serve(scripted, ([b"HTTP/1.1 200 OK\r\n\r\n", b"all of", b" it"], True), _ok(b"next"))
    pool = KeepAlivePool(server.url)
    try:
        assert _get(pool) == (200, b"all of it")
        assert _get(pool) == (200, b"next")
    finally:
        pool.close()
    assert server.accepted == 2


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n",
    ],
    ids=["connection-close", "http-1.0"],
)
def test_a_connection_the_server_will_close_is_not_reused(
    scripted: list[_Scripted], head: bytes
) -> None:
    server = _serve(scripted, ([head + b"[]"], True), _ok(b"{}"))
    pool = KeepAlivePool(server.url)
    try:
        assert _get(pool) == (200, b"[]")
        assert _get(pool) == (200, b"{}")
    finally:
        pool.close()
    assert server.accepted == 2


def test_http_1_0_keep_alive_and_a_204_keep_the_connection(
    scripted: list[_Scripted],
) -> None:
    server = _serve(
        scripted,
        ([b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n1"], False),
        ([b"HTTP/1.1 204 No Content\r\n\r\n"], False),
        _ok(b"3"),
    )
    pool = KeepAlivePool(server.url)
    try:
        assert _get(pool) == (200, b"1")
        assert _get(pool) == (204, b"")
        assert _get(pool) == (200, b"3")
    finally:
        pool.close()
    assert server.accepted == 1


def test_interim_responses_are_skipped(scripted: list[_Scripted]) -> None:
    server = _serve(
        scripted,
        (
            [
                b"HTTP/1.1 100 Continue\r\n\r\n",
                b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Folded: a\r\n b\r\n\r\n[]",
            ],
            False,
        ),
    )
    pool = KeepAlivePool(server.url)
    try:
        assert _get(pool) == (200, b"[]")
    finally:
        pool.close()


def test_the_request_bytes(scripted: list[_Scripted]) -> None:
    server = _serve(scripted, _ok(), _ok())
    pool = KeepAlivePool(server.url + "/base/")
    try:
        pool.request(
            "POST",
            "/api/tasks?x=1",
            body=b'{"a":1}',
            headers={"Content-Type": "application/json", "Authorization": "Bearer t"},
            timeout=5.0,
        )
        pool.request("POST", "/api/empty", body=None, headers={}, timeout=5.0)
    finally:
        pool.close()
    port = server.url.rsplit(":", 1)[1]
    assert server.requests == [
        b"POST /base/api/tasks?x=1 HTTP/1.1\r\nHost: 127.0.0.1:" + port.encode() + b"\r\n"
        b"Content-Type: application/json\r\nAuthorization: Bearer t\r\n"
        b'Content-Length: 7\r\n\r\n{"a":1}',
        b"POST /base/api/empty HTTP/1.1\r\nHost: 127.0.0.1:" + port.encode() + b"\r\n"
        b"Content-Length: 0\r\n\r\n",
    ]


@pytest.mark.parametrize(
    ("header", "target"),
    [({"X-Evil": "a\r\nInjected: 1"}, "/ok"), ({"X\r\nY": "1"}, "/ok"), ({}, "/a b")],
)
def test_a_header_or_target_that_would_split_the_request_is_refused(
    scripted: list[_Scripted], header: dict[str, str], target: str
) -> None:
    server = _serve(scripted, _ok())
    pool = KeepAlivePool(server.url)
    try:
        with pytest.raises(ValueError, match="invalid"):
            pool.request("GET", target, body=None, headers=header, timeout=5.0)
    finally:
        pool.close()
    assert server.requests == []


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd"], True), "IncompleteRead"),
        (([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"], True), "Incomplete"),
        (([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"], True), "chunk size"),
        (([b"SSH-2.0-OpenSSH_9.6\r\n\r\n"], True), "BadStatusLine"),
        (([b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n1"], True), "Content-Length"),
        (([b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n"], True), "malformed response header"),
        (([b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000], True), "LineTooLong"),
        (([], True), "RemoteDisconnected"),
    ],
    ids=[
        "short-body",
        "short-chunk",
        "bad-chunk-size",
        "not-http",
        "two-lengths",
        "bad-header",
        "huge-head",
        "no-answer",
    ],
)
def test_a_broken_answer_is_a_transient_error(
    scripted: list[_Scripted], answer: Answer, error: str
) -> None:
    server = _serve(scripted, answer, _ok(b"[]"))
    client = TaskClient(server.url)
    try:
        with pytest.raises(TransientError, match=error):
            client.poll("x", worker_id="w", count=1, timeout_ms=0)
        # the broken connection is not reused: the next call works on a new one
        assert client.poll("x", worker_id="w", count=1, timeout_ms=0) == []
    finally:
        client.close()
    assert server.accepted == 2


def test_a_server_that_does_not_answer_in_time_is_a_timeout(scripted: list[_Scripted]) -> None:
    server = _serve(scripted, ([b"HTTP/1.1 200 OK\r\n"], False))  # never finishes
    pool = KeepAlivePool(server.url)
    try:
        with pytest.raises(TimeoutError):
            pool.request("GET", "/x", body=None, headers={}, timeout=0.3)
    finally:
        pool.close()


def test_http_client_errors_are_what_the_pool_raises() -> None:
    """The client maps these (and OSError) to TransientError."""
    for name in ("IncompleteRead", "BadStatusLine", "LineTooLong", "RemoteDisconnected"):
        assert issubclass(getattr(http.client, name), http.client.HTTPException)


def test_a_kept_connection_takes_the_timeout_of_each_call(scripted: list[_Scripted]) -> None:
    """A long poll's long timeout does not stay on the connection for the next call."""
    server = _serve(scripted, _ok(), ([b"HTTP/1.1 200 OK\r\n"], False))  # 2nd never ends
    pool = KeepAlivePool(server.url)
    raised: list[BaseException] = []

    def calls() -> None:
        pool.request("GET", "/long", body=None, headers={}, timeout=3600.0)
        try:
            pool.request("GET", "/short", body=None, headers={}, timeout=0.3)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=calls, daemon=True)
    thread.start()
    thread.join(60)  # a bound on a hang, not a measurement
    pool.close()
    assert not thread.is_alive()
    assert [type(e) for e in raised] == [TimeoutError]
    assert server.accepted == 1


def test_a_token_that_would_split_the_request_is_a_transient_error_as_with_httpx(
    scripted: list[_Scripted],
) -> None:
    server = _serve(scripted, _ok())
    client = TaskClient(server.url, tokens=StaticToken("abc\r\nX-Injected: 1"))
    try:
        with pytest.raises(TransientError, match="invalid header"):
            client.poll("x", worker_id="w", count=1, timeout_ms=0)
    finally:
        client.close()
    assert server.requests == []
