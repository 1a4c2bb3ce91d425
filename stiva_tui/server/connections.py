"""The connections of `stiva serve`: a deadline for every phase of a request, a cap on connections
and on idle keep-alives, and calm behaviour when file descriptors run out.

uvicorn's h11 protocol waits for a request head forever: a client that sends half a request, or
nothing, keeps its file descriptor until it gives up itself, and the keep-alive timer, armed only
after a response, is stopped for good by one byte of the next request. So about 1,100 idle
connections took every descriptor of a 1,024 limit and real clients timed out. `GuardedH11Protocol`
gives each connection one deadline, for the phase it is in:

- head: the request line and headers, counted from the connection (or from the first byte of the
  next request on a kept-alive one): `[serve] header_timeout_s`. A partial head gets a 408, a
  connection that sent nothing is closed.
- body: the rest of the body once the head is in: `body_timeout_s`; a 408 (the app sees the client
  gone, so no run starts).
- idle: between requests on a kept-alive connection: `keepalive_timeout_s`; closed.
- busy: the request is in and the app answers. No deadline: a run may stream for minutes, and the
  run slots (`max_concurrent_runs`, `max_queue`) bound how many there are.
- write: the client is not reading its replies, so the server has replies it cannot send: its
  writes are paused (a full send buffer), or it answered `max_pipelined_requests` pipelined
  requests ahead of what the client has read and holds the next ones (reading nothing more from the
  connection until the client catches up), or it closed the connection and the last reply is still
  unsent. A connection whose writes make no progress for `write_timeout_s` is closed (reset).
  Without this, clients that pipelined hundreds of requests without a token and read none of the
  replies kept their connections busy for good: 60 of them locked out every client at a cap of 50.

A deadline counts from the start of its phase, never from the last byte, so a client that drips
one byte a second cannot stretch it (slowloris).

`Acceptor` accepts on the listening socket itself (uvicorn makes no server of it), so that the cap
holds where descriptors are taken: on asyncio's selector loop and on uvloop's alike (both watch a
descriptor with `add_reader`; on Windows' proactor loop, which cannot, uvicorn accepts unguarded).
At most `max_connections` are open at once, fewer when the file limit (`ulimit -n`) has no room for them beside the server's own files and upstream calls. At the cap, the connection
that has waited longest for its head is closed to make room (once it has waited `GRACE_S`: a burst
of real clients never evicts itself), else the oldest idle keep-alive one, else the one stuck
writing longest (once its writes have made no progress for `STUCK_GRACE_S`); when there is none,
accepting pauses and new clients wait in the listen backlog until a connection ends or goes idle.
At most `max_idle_connections` wait idle; beyond that the oldest is closed.

Out of descriptors all the same (other files of the process), asyncio logged a traceback for every
failed accept, up to the listen backlog (2,048) in one loop pass, and tried again a second later:
tens of thousands of tracebacks a minute. Here it is one log line a minute; accepting pauses for a
second, and idle and stalled connections are closed to give descriptors back.

uvicorn's own `limit_concurrency` is not used: it counts stalled connections too, and answers
real clients 503 once they are many, which is the lock-up turned into an error.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("stiva.server")

HEAD, BODY, IDLE, BUSY, WRITE = "head", "body", "idle", "busy", "write"
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# Descriptors kept free beside the connections: the history database, logs, the event loop and
# imports (the base), and per concurrent run its upstream calls and their kept-alive connections.
RESERVED_FDS = 64
RESERVED_FDS_PER_RUN = 8
NOTE_EVERY_S = 60.0  # one log line per kind of trouble at most this often
# A connection waiting for its head is closed to make room only once it has waited this long. A
# real client sends its head right after connecting (it is in by the first read, as a rule), so a
# burst of them never evicts itself; stalled ones ahead in the listen backlog go at cap / GRACE_S a
# second.
GRACE_S = 0.25
# At the cap, a connection stuck writing is closed to make room once its writes have made no progress
# for this long: a client that reads acknowledges some of a reply every round trip.
STUCK_GRACE_S = 0.5
# How often a connection stuck writing is looked at (whether its client read some, so that held
# pipelined requests may go on): first after the shortest, then twice as long each time, up to the
# longest; back to the shortest after progress.
WRITE_CHECK_S = (0.02, 0.5)
ACCEPT_BATCH = 128  # accepts in one loop pass at most, so that the loop serves the others too
RETRY_ACCEPT_S = 1.0  # after running out of descriptors (asyncio's own delay)


@dataclass(frozen=True)
class Limits:
    header_timeout_s: float
    body_timeout_s: float
    keepalive_timeout_s: float
    max_connections: int
    max_idle_connections: int
    write_timeout_s: float = 30.0
    max_pipelined_requests: int = 8


class Notes:
    """One log line per kind of trouble, then at most one every `every_s`, saying how often it
    happened since: a flood of stalled clients or failed accepts never floods the log."""

    def __init__(self, every_s: float = NOTE_EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.every_s = every_s
        self.clock = clock
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def note(self, kind: str, message: str, *args: Any) -> None:
        self._count[kind] = self._count.get(kind, 0) + 1
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.every_s:
            return
        count = self._count.pop(kind)
        self._last[kind] = now
        since = f" ({count} times in the last {now - last:.0f} s)" if last is not None and count > 1 else ""
        log.warning("stiva serve: " + message + since, *args)


class Connections:
    """What all connections of one server share: the count against the cap, the idle and the
    stalled connections (oldest first, to close first), and the log notes."""

    def __init__(self, limits: Limits, notes: Notes | None = None):
        self.limits = limits
        self.notes = notes or Notes()
        self.open: set[GuardedH11Protocol] = set()
        self.pending = 0  # accepted, their protocol not made yet
        # Oldest first (dicts keep insertion order); the value is when the phase began.
        self.waiting: dict[GuardedH11Protocol, float] = {}  # for their request head
        self.idle: dict[GuardedH11Protocol, float] = {}
        self.stuck: dict[GuardedH11Protocol, float] = {}  # writing, since their last progress
        self.on_room: Callable[[], None] = lambda: None  # the acceptor, when it is paused

    @property
    def count(self) -> int:
        return len(self.open) + self.pending

    def make_room(self, now: float) -> float | None:
        """At the cap: close the connection that has waited longest for its head (once past
        `GRACE_S`), else the oldest idle one, else the one stuck writing longest (once past
        `STUCK_GRACE_S`). 0 when one was closed, else how long until one may be (None: until some
        connection ends, goes idle or gets stuck writing)."""
        oldest = next(iter(self.waiting.items()), None)
        if oldest is not None and now - oldest[1] >= GRACE_S:
            self.notes.note(
                "evicted",
                "%d connections are open ([serve] max_connections): closing those that "
                "have waited longest for their request, to serve new ones",
                self.count,
            )
            oldest[0].close_quietly()
            return 0.0
        idle = next(iter(self.idle), None)
        if idle is not None:  # a client that has its answer: it only pays a new handshake
            idle.close_quietly()
            return 0.0
        stuck = next(iter(self.stuck.items()), None)
        if stuck is not None and now - stuck[1] >= STUCK_GRACE_S:
            self.notes.note(
                "evicted-writing",
                "%d connections are open ([serve] max_connections): closing those "
                "whose clients read none of their replies, to serve new ones",
                self.count,
            )
            stuck[0].close_quietly(reset=True)
            return 0.0
        waits = [GRACE_S - (now - oldest[1])] if oldest is not None else []
        waits += [STUCK_GRACE_S - (now - stuck[1])] if stuck is not None else []
        return min(waits) if waits else None

    def made(self, conn: GuardedH11Protocol) -> None:
        self.pending = max(0, self.pending - 1)
        self.open.add(conn)

    def enter(self, conn: GuardedH11Protocol, old: str | None, new: str, now: float) -> None:
        if old == HEAD:
            self.waiting.pop(conn, None)
        elif old == IDLE:
            self.idle.pop(conn, None)
        elif old == WRITE:
            self.stuck.pop(conn, None)
        if new == HEAD:
            self.waiting[conn] = now
        elif new == IDLE:
            self.idle[conn] = now
            if len(self.idle) > self.limits.max_idle_connections:
                next(iter(self.idle)).close_quietly()
        elif new == WRITE:
            self.stuck[conn] = now
        if new in (HEAD, IDLE, WRITE):
            self.on_room()  # one that may be closed for a new one (an idle one now, the others soon)

    def progressed(self, conn: GuardedH11Protocol, now: float) -> None:
        """A connection stuck writing sent some: it is the last to be closed to make room."""
        if conn in self.stuck:
            del self.stuck[conn]
            self.stuck[conn] = now

    def forget(self, conn: GuardedH11Protocol) -> None:
        if conn in self.open:
            self.open.discard(conn)
            self.on_room()
        self.waiting.pop(conn, None)
        self.idle.pop(conn, None)
        self.stuck.pop(conn, None)

    def timed_out(self, phase: str) -> None:
        if phase == HEAD:
            self.notes.note(
                "head",
                "closed a connection that sent no complete request head within %g s ([serve] header_timeout_s)",
                self.limits.header_timeout_s,
            )
        elif phase == BODY:
            self.notes.note(
                "body",
                "closed a connection that did not send its request body within %g s ([serve] body_timeout_s)",
                self.limits.body_timeout_s,
            )
        elif phase == WRITE:
            self.notes.note(
                "write",
                "closed a connection whose client read none of its replies for %g s ([serve] write_timeout_s)",
                self.limits.write_timeout_s,
            )

    def out_of_descriptors(self, exc: OSError, now: float) -> None:
        """accept() failed for want of descriptors: give back those of idle connections and of
        connections stalled for over `GRACE_S`."""
        self.notes.note(
            "fds",
            "out of file descriptors (%s; %d connections open): new connections wait, accepting again in %g s",
            exc.strerror or exc,
            self.count,
            RETRY_ACCEPT_S,
        )
        stalled = [conn for conn, since in self.waiting.items() if now - since > GRACE_S]
        stuck = [conn for conn, since in self.stuck.items() if now - since > STUCK_GRACE_S]
        for conn in [*self.idle, *stalled]:
            conn.close_quietly()
        for conn in stuck:
            conn.close_quietly(reset=True)


class Acceptor:
    """Accepts the connections of one listening socket, keeping the cap: at the cap it makes room
    or pauses (the clients wait in the listen backlog), and out of descriptors it pauses a second."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, factory: Callable[[], Any], guard: Connections
    ):
        self.loop = loop
        self.sock = sock
        self.factory = factory
        self.guard = guard
        self.paused = True
        self._resume: asyncio.TimerHandle | None = None
        self._backoff_until = float("-inf")  # out of descriptors: no accepting before this

    def start(self) -> "Acceptor":
        self.guard.on_room = self.wake
        self._listen()
        return self

    def close(self) -> None:
        """The server shuts down: accept no more, and close the listening socket."""
        self._pause(None)
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        self.sock.close()

    def _listen(self) -> None:
        if self.paused and self.sock.fileno() != -1:  # -1: closed, the server is shutting down
            self.paused = False
            self.loop.add_reader(self.sock.fileno(), self._ready)

    def wake(self) -> None:
        """A connection ended or went idle: accept again, unless backing off."""
        if self.paused and self.loop.time() >= self._backoff_until:
            self._listen()

    def _pause(self, for_s: float | None) -> None:
        if not self.paused:
            self.paused = True
            if self.sock.fileno() != -1:
                self.loop.remove_reader(self.sock.fileno())
        if for_s is not None and self._resume is None:
            self._resume = self.loop.call_later(for_s, self._resumed)

    def _resumed(self) -> None:
        self._resume = None
        self._listen()

    def _ready(self) -> None:
        guard = self.guard
        for _ in range(ACCEPT_BATCH):
            if guard.count >= guard.limits.max_connections:
                wait = guard.make_room(self.loop.time())
                if wait != 0.0:
                    self._pause(wait)
                # else: the closed connection's descriptor is free in the loop's next pass
                return
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno not in OUT_OF_RESOURCES:
                    guard.notes.note(
                        "accept", "accepting a connection failed: %s; trying again in %g s", exc, RETRY_ACCEPT_S
                    )
                else:
                    guard.out_of_descriptors(exc, self.loop.time())
                self._backoff_until = self.loop.time() + RETRY_ACCEPT_S
                self._pause(RETRY_ACCEPT_S)
                return
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                # asyncio sets this only for sockets whose proto is IPPROTO_TCP, and a socket that
                # uvicorn binds has proto 0: without it, a kept-alive connection's response waits
                # out the client's delayed ACK (40 ms on Linux) between its head and its body.
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            guard.pending += 1
            self.loop.create_task(self._connect(conn))

    async def _connect(self, conn: socket.socket) -> None:
        try:
            await self.loop.connect_accepted_socket(self.factory, conn)
        except Exception:  # the client left, or no transport could be made: nothing to serve
            self.guard.pending = max(0, self.guard.pending - 1)
            conn.close()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each phase of a connection (module docstring).
    `guarded_server()` makes a subclass bound to one server's `Connections`, as `guard`
    (`connections` is uvicorn's name for its set of all of them)."""

    guard: Connections

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase: str | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._answered = False  # a response was sent: the next wait is a keep-alive, not a head
        self._gone = False  # closed here, or lost
        self._sock: Any = None
        # Replies completed while earlier ones were still unread (reset once the client has read
        # them all), and whether the next request is held back for it.
        self._unread = 0
        self._held = False
        # In the write phase: what was left to send at the last look, since when nothing was sent,
        # and how long until the next look.
        self._left = 0
        self._stuck_since = 0.0
        self._check_s = WRITE_CHECK_S[0]

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._sock = transport.get_extra_info("socket")
        self.guard.made(self)
        self._update()

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone = True
        self._cancel_deadline()
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._update()

    def handle_events(self) -> None:
        # Before a new request is read: hold it while the client has not read the replies so far.
        conn = self.conn
        if conn.their_state is h11.IDLE and conn.our_state is h11.IDLE and self._backlogged():
            self._held = True
            self.flow.pause_reading()
            return
        super().handle_events()

    def on_response_complete(self) -> None:
        self._answered = True
        if not self._gone:
            self._unread = self._unread + 1 if self._unsent() else 0
        super().on_response_complete()
        self._update()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._update()

    def resume_writing(self) -> None:
        super().resume_writing()
        if not self._release():
            self._update()

    def close_quietly(self, reset: bool = False) -> None:
        """Close now, without a response (to make room, or after a 408). With `reset`, or with
        replies still waiting to be sent, the connection is reset: a client that reads nothing
        would keep it open for good."""
        self._gone = True
        self._cancel_deadline()
        self.guard.forget(self)
        transport = self.transport
        if transport is None:
            return
        if reset or transport.get_write_buffer_size():
            transport.abort()
        elif not transport.is_closing():
            transport.close()

    # --- replies the client has not read -------------------------------------------------------

    def _unsent(self) -> int:
        """Bytes of replies the client has not taken yet: those waiting in the transport, and those
        the kernel holds unacknowledged (data a client's kernel accepted counts as read)."""
        return self.transport.get_write_buffer_size() + _unacknowledged(self._sock)

    def _backlogged(self) -> bool:
        """Should the next request wait? While writes are paused, or while the client has
        `max_pipelined_requests` replies unread."""
        if self._gone:
            return False
        if self.flow.write_paused:
            return True
        if self._unread < self.guard.limits.max_pipelined_requests:
            return False
        if self._unsent() == 0:
            self._unread = 0
            return False
        return True

    def _release(self) -> bool:
        """Let the held requests go on once the client has caught up (they may be held again)."""
        if not self._held or self._backlogged():
            return False
        self._held = False
        self.flow.resume_reading()
        self.handle_events()
        self._update()
        return True

    def _check_writes(self) -> None:
        """In the write phase: note progress, let held requests go on once the client has caught
        up, and close the connection once its writes have made no progress for `write_timeout_s`."""
        self._deadline = None
        if self._gone or self.transport is None:
            return
        now = self.loop.time()
        left = self._unsent()
        if left < self._left:
            self._left = left
            self._stuck_since = now
            self._check_s = WRITE_CHECK_S[0]
            self.guard.progressed(self, now)
        if self._release():
            return
        stuck_s = now - self._stuck_since
        timeout = self.guard.limits.write_timeout_s
        if stuck_s >= timeout:
            self.guard.timed_out(WRITE)
            self.close_quietly(reset=True)
            return
        self._check_s = min(self._check_s * 2, WRITE_CHECK_S[1])
        self._deadline = self.loop.call_later(min(self._check_s, timeout - stuck_s), self._check_writes)

    # --- the phases ------------------------------------------------------------------------------

    def _current_phase(self) -> str:
        if self._held or self.flow.write_paused or self.transport.is_closing():
            return WRITE  # closing: uvicorn closed it after a reply that may still be unsent
        conn = self.conn
        if conn.their_state is h11.SEND_BODY:
            return BODY
        if conn.their_state is h11.IDLE and conn.our_state is h11.IDLE:
            return IDLE if self._answered and not conn.trailing_data[0] else HEAD
        return BUSY

    def _update(self) -> None:
        transport = self.transport
        if transport is None or self._gone:
            return
        # This protocol keeps the time between requests itself (uvicorn's timer would stop at the
        # first byte of the next request and never start again).
        self._unset_keepalive_if_required()
        phase = self._current_phase()
        if phase == self._phase:
            return  # the deadline runs from the start of the phase, not from the last byte
        now = self.loop.time()
        self.guard.enter(self, self._phase, phase, now)
        self._phase = phase
        self._cancel_deadline()
        if phase == WRITE:
            self._left = self._unsent()
            self._stuck_since = now
            self._check_s = WRITE_CHECK_S[0]
            self._deadline = self.loop.call_at(now + self._check_s, self._check_writes)
            return
        limits = self.guard.limits
        timeout = (
            limits.header_timeout_s
            if phase == HEAD
            else limits.body_timeout_s
            if phase == BODY
            else limits.keepalive_timeout_s
            if phase == IDLE
            else None
        )
        if timeout is not None:
            self._deadline = self.loop.call_at(now + timeout, self._expired, phase)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, phase: str) -> None:
        self._deadline = None
        if self._gone or self.transport.is_closing():
            return
        limits = self.guard.limits
        if phase == HEAD and self.conn.trailing_data[0]:
            self._send_408(
                "the request head did not arrive within {} s ([serve] header_timeout_s)", limits.header_timeout_s
            )
        elif phase == BODY and self.cycle is not None and not self.cycle.response_started:
            # The app is waiting for the body: it sees the client gone, and whatever it sends after
            # this is dropped (uvicorn's cycle sends nothing once disconnected).
            self.cycle.disconnected = True
            self.cycle.message_event.set()
            self._send_408(
                "the request body did not arrive within {} s ([serve] body_timeout_s)", limits.body_timeout_s
            )
        self.guard.timed_out(phase)
        self.close_quietly()

    def _send_408(self, message: str, seconds: float) -> None:
        body = json.dumps(
            {
                "error": {
                    "message": message.format(f"{seconds:g}"),
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "request_timeout",
                }
            }
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            data = self.conn.send(h11.Response(status_code=408, headers=headers, reason=b"Request Timeout"))
            data += self.conn.send(h11.Data(data=body)) or b""
            data += self.conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:  # h11 cannot answer in this state: just close
            return
        self.transport.write(data)


def limits_for(serve: Any) -> Limits:
    """The `[serve]` limits, with `max_connections` cut to what the file limit has room for."""
    return Limits(
        header_timeout_s=serve.header_timeout_s,
        body_timeout_s=serve.body_timeout_s,
        keepalive_timeout_s=serve.keepalive_timeout_s,
        max_connections=connection_budget(serve.max_connections, serve.max_concurrent_runs),
        max_idle_connections=serve.max_idle_connections,
        write_timeout_s=serve.write_timeout_s,
        max_pipelined_requests=serve.max_pipelined_requests,
    )


def _unacknowledged(sock: Any) -> int:
    """Bytes the kernel holds for the peer that it has not acknowledged yet: SIOCOUTQ on Linux,
    SO_NWRITE on macOS; 0 where neither is known (then only the transport's own buffer counts)."""
    if sock is None:
        return 0
    try:
        if _SIOCOUTQ is not None:
            return int.from_bytes(fcntl.ioctl(sock.fileno(), _SIOCOUTQ, bytes(4)), sys.byteorder, signed=True)
        if sys.platform == "darwin":
            return sock.getsockopt(socket.SOL_SOCKET, _SO_NWRITE)
    except (OSError, ValueError):  # closed meanwhile, or not a TCP socket (a Unix one, say)
        pass
    return 0


_SO_NWRITE = 0x1024  # macOS <sys/socket.h>
if sys.platform.startswith("linux"):
    import fcntl
    import termios

    _SIOCOUTQ: int | None = termios.TIOCOUTQ  # the same request for a socket
else:
    _SIOCOUTQ = None


def connection_budget(wanted: int, max_runs: int) -> int:
    """How many client connections fit in the file limit beside what is open now and a reserve for
    the runs; the soft limit is raised toward the hard one first when that makes room."""
    try:
        import resource
    except ImportError:  # Windows: no such limit
        return wanted
    in_use = _open_fds()
    reserve = RESERVED_FDS + RESERVED_FDS_PER_RUN * max_runs
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = in_use + reserve + wanted
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):  # e.g. macOS refuses more than OPEN_MAX
            pass
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return wanted
    budget = max(1, soft - in_use - reserve)
    log.warning(
        "stiva serve: at most %d connections at once ([serve] max_connections = %d): the file limit (ulimit -n) is %d",
        budget,
        wanted,
        soft,
    )
    return budget


def _open_fds() -> int:
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return 32


class GuardedServer(uvicorn.Server):
    """A uvicorn server whose connections are guarded (module docstring)."""

    def __init__(self, config: uvicorn.Config, connections: Connections):
        super().__init__(config)
        self.connections = connections
        self.acceptors: list[Acceptor] = []

    async def startup(self, sockets: Any = None) -> None:
        own = sockets is None
        guarded = own and can_watch_sockets(asyncio.get_running_loop())
        if own:  # bound here, uvicorn's way (it logs and exits when it cannot bind)
            sockets = [self.config.bind_socket()]
        if guarded:
            # Listening before uvicorn says `started` (create_server would listen here): a client
            # that connects once it is started waits in the backlog until the acceptors below
            # take it, never refused. Listening after it, one that came in between was refused.
            for sock in sockets:
                sock.setblocking(False)
                sock.listen(self.config.backlog)
        # Guarded, uvicorn serves no socket itself (`[]`): the acceptors below do.
        await super().startup([] if guarded else sockets)
        if guarded and self.started:

            def factory() -> asyncio.Protocol:
                return self.config.http_protocol_class(
                    config=self.config, server_state=self.server_state, app_state=self.lifespan.state
                )

            loop = asyncio.get_running_loop()
            self.acceptors = [Acceptor(loop, sock, factory, self.connections).start() for sock in sockets]

    async def shutdown(self, sockets: Any = None) -> None:
        for acceptor in self.acceptors:  # stop accepting, as uvicorn's own servers do first
            acceptor.close()
        self.acceptors = []
        await super().shutdown(sockets)


def can_watch_sockets(loop: asyncio.AbstractEventLoop) -> bool:
    """Can `loop` watch a descriptor with add_reader? asyncio's selector loop and uvloop's can;
    Windows' proactor loop cannot."""
    return isinstance(loop, asyncio.SelectorEventLoop) or type(loop).__module__.split(".")[0] == "uvloop"


def guarded_server(app: Any, serve: Any, *, host: str, port: int, **options: Any) -> GuardedServer:
    """A uvicorn server for `app` with the `[serve]` connection limits (`serve` is a ServeConfig);
    `options` go to uvicorn.Config."""
    connections = Connections(limits_for(serve))
    protocol = type("StivaH11Protocol", (GuardedH11Protocol,), {"guard": connections})
    config = uvicorn.Config(
        app, host=host, port=port, http=protocol, timeout_keep_alive=serve.keepalive_timeout_s, **options
    )
    return GuardedServer(config, connections)
