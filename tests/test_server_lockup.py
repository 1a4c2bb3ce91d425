"""`stiva serve` cannot be locked up without a token (issue 40, part 5): clients that pipeline
hundreds of requests and never read a reply, run against the real `stiva serve` in its own process,
while a client with the token is still answered."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from test_server import TOKEN, USER, ServeProcess

from tests.support.fakeprovider import Reply

# What a client without a token can ask for: 401s (a GET and a POST whose body is never read) and
# the public OpenAPI document (about 9 KB a reply, so the server's writes fill up quickly).
UNAUTHENTICATED = [
    b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 2\r\n\r\n{}",
    b"GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
]


class Pipeliners:
    """`connections` connections that each pipeline `requests` requests without a token and never
    read a reply. Their receive buffers are small, so the server's send buffers fill quickly."""

    def __init__(self, port: int, connections: int, requests: int = 400, kinds: list[bytes] = UNAUTHENTICATED):
        payload = b"".join(kinds[i % len(kinds)] for i in range(requests))
        self.socks: list[socket.socket] = []
        deadline = time.monotonic() + 20  # bounded in time as in count
        try:
            for _ in range(connections):
                sock = socket.socket()
                self.socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting
                sock.settimeout(2)
                try:
                    sock.connect(("127.0.0.1", port))  # the kernel completes it, accepted or not
                    sock.sendall(payload)
                except OSError:
                    pass  # refused, or the server stopped reading: it is full either way
                if time.monotonic() > deadline:
                    break
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for sock in self.socks:
            sock.close()
        self.socks = []

    def __enter__(self) -> "Pipeliners":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _drain(sock: socket.socket, within_s: float) -> tuple[bytes, bool]:
    """Read what the server sends for at most `within_s`: the bytes, and whether the server closed
    the connection (EOF or a reset) in that time."""
    data = b""
    deadline = time.monotonic() + within_s
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(min(left, 1.0))
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def _assert_calm(log: str) -> None:
    """No traceback: a connection closed for want of reading is routine (the access log may be long)."""
    assert "Traceback" not in log and "Exception" not in log, log[-3000:]


def _timed(call) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


@pytest.fixture
def serve_process(tmp_path, fake):
    started: list[ServeProcess] = []

    def start_process(**serve) -> ServeProcess:
        started.append(ServeProcess(tmp_path, fake, 4096, **serve))
        return started[-1]

    yield start_process
    for served in started:
        served.stop()


def _real_client_is_answered(served: ServeProcess, bound_s: float = 3.0) -> list[float]:
    """A chat completion (the openai client) and the model list (httpx), with the token: how long
    each took. A request that times out counts as its timeout."""
    took = []
    client = served.client().with_options(timeout=bound_s + 5)
    try:
        took.append(_timed(lambda: client.chat.completions.create(model="w1", messages=USER)))
    except Exception:  # a timeout is the lock-up this test is about
        took.append(bound_s + 5)
    try:
        took.append(
            _timed(
                lambda: httpx.get(
                    served.url + "/v1/models", headers={"authorization": f"Bearer {TOKEN}"}, timeout=bound_s + 5
                ).raise_for_status()
            )
        )
    except Exception:
        took.append(bound_s + 5)
    return took


def test_pipelining_clients_at_the_connection_cap_do_not_lock_out_a_real_client(serve_process, fake):
    # The attack: with max_connections = 50, 60 connections that pipeline requests and read
    # nothing held every client with the token off for as long as they stayed. Here each asks for
    # the OpenAPI document 1,000 times (9 MB of replies: more than a socket's send buffer takes in,
    # 4 MB at most on Linux), so the server's writes block for good.
    served = serve_process(max_connections=50)
    fake.default("w1", Reply("still here"))
    with Pipeliners(served.port, 60, requests=1000, kinds=UNAUTHENTICATED[2:]):
        time.sleep(1.0)  # the server is deep in them
        for _ in range(3):
            took = _real_client_is_answered(served)
            assert max(took) < 3.0, f"a real client waited {took} s while 60 pipelining clients were connected"
            time.sleep(0.3)
    assert _real_client_is_answered(served)[0] < 3.0
    _assert_calm(served.stop())


def test_a_few_pipelining_clients_do_not_hold_off_a_real_client(serve_process, fake):
    served = serve_process()
    fake.default("w1", Reply("still here"))
    with Pipeliners(served.port, 4):
        time.sleep(0.5)
        for _ in range(3):
            took = _real_client_is_answered(served)
            assert max(took) < 3.0, f"a real client waited {took} s while 4 pipelining clients were connected"
    _assert_calm(served.stop())


def test_a_connection_that_reads_none_of_its_replies_is_closed_after_the_write_timeout(serve_process):
    served = serve_process(write_timeout_s=1.0)
    with Pipeliners(served.port, 1) as attack:
        time.sleep(3.0)  # its writes have made no progress for longer than the write timeout
        data, closed = _drain(attack.socks[0], within_s=4.0)
    replies = data.count(b"HTTP/1.1 ")
    assert closed and replies < 400, f"still open after {replies} of 400 replies"
    assert "write_timeout_s" in served.log()
    _assert_calm(served.stop())


def test_a_client_that_pipelines_gets_only_a_few_replies_ahead_of_what_it_reads(serve_process):
    # The server answers a few pipelined requests ahead of what the client has read, then reads no
    # more from it until it catches up: a client that reads nothing costs a few answers, not 400.
    served = serve_process(max_pipelined_requests=8)
    with Pipeliners(served.port, 1, kinds=UNAUTHENTICATED[:1]) as attack:
        time.sleep(1.5)
        answered = served.log().count('" 401')
        assert answered < 100, f"{answered} of 400 pipelined requests answered with no reply read"
        # A client that does read gets every reply, in order.
        data, _ = _drain(attack.socks[0], within_s=1.0)
        while data.count(b"HTTP/1.1 401") < 400:
            more, closed = _drain(attack.socks[0], within_s=1.0)
            assert more and not closed, f"stuck after {data.count(b'HTTP/1.1 401')} of 400 replies"
            data += more
    assert data.count(b"HTTP/1.1 ") == 400
    _assert_calm(served.stop())


@pytest.mark.parametrize(
    "key, value",
    [("write_timeout_s", 0), ("write_timeout_s", "5"), ("max_pipelined_requests", 0), ("max_pipelined_requests", 2.5)],
)
def test_write_limits_in_the_config_are_checked(key, value):
    from stiva_tui.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match=f"serve.{key}"):
        parse_config({"serve": {key: value}})
    assert parse_config({}).serve.write_timeout_s == 30.0 and parse_config({}).serve.max_pipelined_requests == 8
