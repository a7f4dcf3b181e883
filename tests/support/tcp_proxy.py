"""A TCP proxy between the engine and PostgreSQL that a test can make fail on purpose.

The proxy runs its own event loop in a daemon thread, so a test (async or not) drives it with
plain calls that return once done::

    with CuttingProxy("127.0.0.1", 5432) as proxy:
        url = f"postgresql+asyncpg://postgres@127.0.0.1:{proxy.port}/db"
        ...
        proxy.cut_all()  # every open connection breaks now, as in a network failure
        proxy.refuse(True)  # new connections fail at once, as when the server is down
        proxy.cut_after_commit()  # the next COMMIT happens, but its client never learns it

To see COMMITs the proxy reads the client's side of the PostgreSQL protocol, which it can only do
in clear: a connection that negotiates TLS (the server answered 'S' to an SSLRequest) is relayed
without being read, so ``cut_after_commit`` never fires on it. A throwaway cluster
(``tests.support.pg_cluster``) has ssl off; against a server with ssl on, connect with
``ssl=False`` (asyncpg) or ``?ssl=disable`` in the URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

#: The codes of the untyped requests a client may send before its StartupMessage.
SSL_REQUEST_CODE = 80877103
GSSENC_REQUEST_CODE = 80877104
CANCEL_REQUEST_CODE = 80877102
# The server's own bound on a startup packet (MAX_STARTUP_PACKET_LENGTH): anything longer is not
# the PostgreSQL protocol (TLS sent without an SSLRequest, say), so it is relayed unread.
_MAX_STARTUP_LENGTH = 10_000
# How long a call from the test thread waits for the proxy's loop, in seconds.
_CALL_TIMEOUT = 10.0
# How long a commit cut waits for the server to answer the COMMIT before cutting anyway.
_COMMIT_ANSWER_TIMEOUT = 10.0
#: The type :class:`_MessageStream` gives the StartupMessage, which has no type byte.
STARTUP = b"startup"


def _cstring(payload: bytes, start: int) -> tuple[bytes, int]:
    """Return the NUL-terminated string at ``start`` of ``payload`` and the offset after it."""
    end = payload.find(b"\0", start)
    if end < 0:
        return payload[start:], len(payload)
    return payload[start:end], end + 1


def _starts(sql: bytes, prefixes: tuple[str, ...]) -> bool:
    text = sql.decode("utf-8", "replace").strip().upper()
    return any(text.startswith(prefix) for prefix in prefixes)


def _abort(transport: asyncio.Transport) -> None:
    """Close ``transport`` with a TCP reset, dropping whatever is still buffered.

    ``abort()`` alone only discards asyncio's buffer: the kernel would still close politely
    with a FIN, which the peer reads as a clean end of stream. A zero linger time makes the
    close a reset, which is what a broken network or a killed process looks like.
    """
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # OSError: the socket is closed already, and abort() below is all that is left to do.
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _MessageStream:
    """Split one direction of a PostgreSQL connection into whole messages.

    A message may arrive split across reads, and several may arrive in one; only whole messages
    come out, so the proxy never forwards a part of a message that follows a cut. The client's
    direction (``startup=True``) begins with untyped messages; the server's is typed throughout
    (its one-byte answer to an SSLRequest is taken off before it is fed here).
    """

    def __init__(self, *, startup: bool) -> None:
        """Expect untyped startup messages first when ``startup`` (the client's direction)."""
        self._buffer = bytearray()
        # The client's first messages have no type byte: SSLRequest, GSSENCRequest,
        # CancelRequest, and the StartupMessage, after which every message is typed.
        self._startup = startup
        # After encryption was negotiated (or on bytes that are not the protocol) the stream is
        # relayed as it comes, unread.
        self.opaque = False
        # An SSLRequest or GSSENCRequest was sent: the server's one-byte answer says whether
        # encryption follows.
        self.awaiting_answer = False

    def server_answered(self, answer: bytes) -> None:
        """Take the server's answer to an SSLRequest or GSSENCRequest ('S'/'G': encrypted)."""
        self.awaiting_answer = False
        if answer in (b"S", b"G"):
            self.opaque = True

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        """Return the whole messages completed by ``data``, each as (type byte, message).

        The type is :data:`STARTUP` for the StartupMessage, and b"" for the other untyped
        messages (SSLRequest, GSSENCRequest, CancelRequest) and for opaque bytes.
        """
        buffer = self._buffer
        buffer += data
        messages: list[tuple[bytes, bytes]] = []
        while buffer:
            if self.opaque:
                messages.append((b"", bytes(buffer)))
                buffer.clear()
                break
            if self._startup:
                # int32 length (counting itself), then int32 code or protocol version.
                if len(buffer) < 4:
                    break
                length = int.from_bytes(buffer[:4], "big")
                if not 8 <= length <= _MAX_STARTUP_LENGTH:
                    self.opaque = True
                    continue
                if len(buffer) < length:
                    break
                message = bytes(buffer[:length])
                del buffer[:length]
                code = int.from_bytes(message[4:8], "big")
                if code in (SSL_REQUEST_CODE, GSSENC_REQUEST_CODE):
                    self.awaiting_answer = True
                    messages.append((b"", message))
                elif code == CANCEL_REQUEST_CODE:
                    messages.append((b"", message))
                else:
                    self._startup = False
                    messages.append((STARTUP, message))
            else:
                # Type byte, then int32 length counting itself but not the type byte.
                if len(buffer) < 5:
                    break
                length = int.from_bytes(buffer[1:5], "big")
                if length < 4:
                    self.opaque = True
                    continue
                if len(buffer) < 1 + length:
                    break
                message = bytes(buffer[: 1 + length])
                del buffer[: 1 + length]
                messages.append((message[:1], message))
        return messages


#: Frontend messages after which a client reads the server's answer before going on: a simple
#: Query, a Sync (the end of an extended-protocol batch) and a Flush (asyncpg's prepare).
ROUND_TRIP_ENDS = (b"Q", b"S", b"H")


class _Link:
    """One client connection and its upstream connection to the target."""

    def __init__(self, proxy: CuttingProxy, client: asyncio.Transport) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream: asyncio.Transport | None = None
        self.closed = False
        self.stream = _MessageStream(startup=True)
        self._replies = _MessageStream(startup=False)
        # Each StartupMessage, Query, Sync and FunctionCall is answered by one ReadyForQuery:
        # counting both tells which ReadyForQuery answers the COMMIT (a client may pipeline).
        self._answers_due = 0
        self._answers_received = 0
        # A COMMIT was forwarded and the connection is to be cut once the server answers it.
        self._cutting = False
        self._cut_timer: asyncio.TimerHandle | None = None
        # Client bytes that arrived before the upstream connection was made.
        self._pending: list[bytes] = []
        # The extended protocol runs a COMMIT as Parse (statement) + Bind (portal) + Execute
        # + Sync, and asyncpg may Parse a statement once and execute it later by name: follow
        # the names, so that the cut comes after the COMMIT is executed, not merely prepared.
        # Every prepared statement's text by name: the texts to cut at may be armed after a
        # statement was prepared (a pooled connection reuses it without a new Parse).
        self._statements: dict[bytes, bytes] = {}
        self._commit_executed = False
        # The statements run since this connection's last COMMIT or ROLLBACK (what a COMMIT
        # commits), when the armed cut looks at them (``within``).
        self._transaction: list[bytes] = []
        # The portal bound to each statement text (so Execute knows which ran).
        self._portal_texts: dict[bytes, bytes] = {}

    # From the client.

    def from_client(self, data: bytes) -> None:
        """Forward the whole messages in ``data``; cut after a COMMIT when one is due."""
        if self.closed or self._cutting:
            return  # after the COMMIT, what the client sends is dropped with the connection
        chunks: list[bytes] = []
        for kind, message in self.stream.feed(data):
            chunks.append(message)
            if kind in (STARTUP, b"Q", b"S", b"F"):
                self._answers_due += 1
            if kind in ROUND_TRIP_ENDS:
                self.proxy.round_trips += 1
            if kind and self._cut_after(kind, message):
                self._send_upstream(b"".join(chunks))
                self._begin_commit_cut()
                return
        if chunks:
            self._send_upstream(b"".join(chunks))

    def _cut_after(self, kind: bytes, message: bytes) -> bool:
        """Follow ``message``; return True when the connection is to be cut after it."""
        payload = message[5:]
        if kind == b"Q":  # Query: the simple protocol
            sql, _ = _cstring(payload, 0)
            return self._cuts(sql) and self.proxy._take_commit_cut()
        if kind == b"P":  # Parse: statement name, query, parameter types
            name, offset = _cstring(payload, 0)
            sql, _ = _cstring(payload, offset)
            self._statements[name] = sql  # the name now means this query
        elif kind == b"B":  # Bind: portal name, statement name, ...
            portal, offset = _cstring(payload, 0)
            statement, _ = _cstring(payload, offset)
            sql = self._statements.get(statement, b"")
            self._portal_texts[portal] = sql
        elif kind == b"E":  # Execute: portal name, row limit
            portal, _ = _cstring(payload, 0)
            if self._cuts(self._portal_texts.get(portal, b"")):
                self._commit_executed = True
        elif kind == b"C":  # Close: 'S' statement or 'P' portal, then its name
            name, _ = _cstring(payload, 1)
            if payload[:1] == b"S":
                self._statements.pop(name, None)
            else:
                self._portal_texts.pop(name, None)
        elif kind == b"S":  # Sync: the server runs what came before and answers
            executed, self._commit_executed = self._commit_executed, False
            return executed and self.proxy._take_commit_cut()
        return False

    def _cuts(self, sql: bytes) -> bool:
        """Note that ``sql`` runs; return True when it is a statement the armed cut comes
        after: a COMMIT (of a transaction that ran one of the ``within`` statements, when
        given) or one of the ``also`` statements."""
        proxy = self.proxy
        if _starts(sql, ("COMMIT", "ROLLBACK", "END", "ABORT")):
            ran, self._transaction = self._transaction, []
            if not _starts(sql, ("COMMIT", "END")):
                return False
            within = proxy._commit_within
            return within is None or any(_starts(text, within) for text in ran)
        if proxy._commit_within is not None:
            self._transaction.append(sql)
        return _starts(sql, proxy._commit_texts)

    def _send_upstream(self, data: bytes) -> None:
        if self.upstream is None:
            self._pending.append(data)
        else:
            self.upstream.write(data)

    def client_eof(self) -> None:
        """The client closed its side: close the upstream side after what is buffered."""
        self.close()

    # From the server.

    def upstream_made(self, transport: asyncio.Transport) -> None:
        """The upstream connection is up: send it what the client sent meanwhile."""
        if self.closed:
            _abort(transport)  # cut or closed while connecting
            return
        self.upstream = transport
        if self._pending:
            transport.write(b"".join(self._pending))
            self._pending.clear()

    def from_server(self, data: bytes) -> None:
        """Relay ``data`` to the client; nothing once a COMMIT to cut after was forwarded."""
        if self.closed:
            return
        replies = data
        if self.stream.awaiting_answer and data:
            self.stream.server_answered(data[:1])
            replies = data[1:]  # the answer is a lone untyped byte
        if not self.stream.opaque:
            kinds = [kind for kind, _ in self._replies.feed(replies)]
            self._answers_received += kinds.count(b"Z")  # ReadyForQuery
        if self._cutting:
            if self._answers_received >= self._answers_due:
                self._finish_commit_cut()
            return
        self.client.write(data)

    # Ending.

    def _forget(self) -> bool:
        """Mark the link closed and drop it from the proxy; return False if it already was."""
        if self.closed:
            return False
        self.closed = True
        self.proxy._links.discard(self)
        return True

    def close(self) -> None:
        """End both connections politely, after what is buffered (one side went away)."""
        if self._cutting:
            self._finish_commit_cut()  # the client is reset all the same, never closed politely
        elif self._forget():
            self.client.close()
            if self.upstream is not None:
                self.upstream.close()

    def abort(self) -> None:
        """End both connections at once with a reset, dropping what is buffered."""
        if self._cut_timer is not None:
            self._cut_timer.cancel()
        if self._forget():
            _abort(self.client)
            if self.upstream is not None:
                _abort(self.upstream)

    def _begin_commit_cut(self) -> None:
        """A COMMIT was just forwarded: relay nothing more, and cut once the server answered.

        Cutting at once would be a race: the client would see its error while the server may
        not have run the COMMIT yet, so a test reading the row right after could miss it. The
        server's ReadyForQuery after the COMMIT means it is done (committed, or failed); a
        server that never answers is cut after _COMMIT_ANSWER_TIMEOUT all the same.
        """
        self._cutting = True
        self._cut_timer = asyncio.get_running_loop().call_later(
            _COMMIT_ANSWER_TIMEOUT, self._finish_commit_cut
        )

    def _finish_commit_cut(self) -> None:
        """Reset the client's connection; close the upstream one (the COMMIT is answered)."""
        if self._cut_timer is not None:
            self._cut_timer.cancel()
        if self._forget():
            _abort(self.client)
            if self.upstream is not None:
                # Not abort(): on the timeout, asyncio may still buffer the COMMIT itself, and
                # abort() would drop it. close() sends what is buffered, then a FIN.
                self.upstream.close()


class _ClientSide(asyncio.Protocol):
    """The protocol of a connection accepted from a client."""

    def __init__(self, proxy: CuttingProxy) -> None:
        self._proxy = proxy
        self._link: _Link | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Refuse the connection, or open its upstream connection."""
        assert isinstance(transport, asyncio.Transport)
        self._link = self._proxy._accept(transport)

    def data_received(self, data: bytes) -> None:
        """Hand the client's bytes to the link."""
        if self._link is not None:
            self._link.from_client(data)

    def eof_received(self) -> bool:
        """The client half-closed: close both sides (PostgreSQL has no use for half-open)."""
        if self._link is not None:
            self._link.client_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """The client's connection ended: end the upstream one too."""
        if self._link is not None:
            self._link.close()

    def pause_writing(self) -> None:
        """The client reads slower than the server sends: stop reading the server."""
        if self._link is not None and self._link.upstream is not None:
            self._link.upstream.pause_reading()

    def resume_writing(self) -> None:
        """The client caught up: read the server again."""
        if self._link is not None and self._link.upstream is not None:
            self._link.upstream.resume_reading()


class _ServerSide(asyncio.Protocol):
    """The protocol of a link's connection to the target server."""

    def __init__(self, link: _Link) -> None:
        self._link = link

    def data_received(self, data: bytes) -> None:
        """Hand the server's bytes to the link."""
        self._link.from_server(data)

    def eof_received(self) -> bool:
        """The server closed its side: close the client's after what is buffered."""
        self._link.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """The server's connection ended: end the client's too."""
        self._link.close()

    def pause_writing(self) -> None:
        """The server reads slower than the client sends: stop reading the client."""
        self._link.client.pause_reading()

    def resume_writing(self) -> None:
        """The server caught up: read the client again."""
        self._link.client.resume_reading()


class CuttingProxy:
    """Relay TCP connections from 127.0.0.1:``port`` to ``target_host``:``target_port``, and
    break them on demand.

    The listening port is bound at construction (so :attr:`port` is known before
    :meth:`start`); connections made before :meth:`start` wait in the backlog. Every public
    method is called from the test's thread and returns once the proxy's loop has done it.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        """Bind the listening socket on a free port of 127.0.0.1; nothing is relayed yet."""
        self.target_host = target_host
        self.target_port = target_port
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        #: The port clients connect to, on 127.0.0.1.
        self.port: int = self._listener.getsockname()[1]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._closed = False  # close() began: no new connections
        self._stopped = False  # close() ended: the loop is gone
        # Touched on the proxy's loop only (the test thread goes through _call).
        self._links: set[_Link] = set()
        self._connecting: set[asyncio.Task[None]] = set()
        self._refusing = False
        self._commit_cuts_armed = 0
        self._commits_cut = 0
        self._commit_texts: tuple[str, ...] = ()
        self._commit_within: tuple[str, ...] | None = None
        #: How many times a client waited for the server: the Query, Sync and Flush messages
        #: it sent (each ends what it sends before reading an answer); the caller may reset it.
        self.round_trips = 0

    # Running.

    def start(self) -> None:
        """Start the proxy's thread and return once it accepts connections."""
        if self._loop is not None or self._closed:
            raise RuntimeError("a CuttingProxy starts once")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=self._run, args=(loop,), name=f"cutting-proxy-{self.port}", daemon=True
        )
        self._thread.start()
        self._call(self._listen())

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _ClientSide(self), sock=self._listener)

    def close(self) -> None:
        """Stop listening, reset every connection and stop the thread (more calls: no-ops)."""
        if self._closed:
            return
        self._closed = True
        if self._loop is None or self._thread is None:
            self._listener.close()  # never started: the socket is still ours
            return
        try:
            self._call(self._shutdown())
        finally:
            self._stopped = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=_CALL_TIMEOUT)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._abort_all()
        connecting = list(self._connecting)
        for task in connecting:
            task.cancel()
        # Let the cancelled connects end here, not be destroyed pending with the loop.
        await asyncio.gather(*connecting, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        # One turn of the loop, so the aborted transports' connection_lost callbacks run.
        await asyncio.sleep(0)

    def __enter__(self) -> CuttingProxy:
        """Start the proxy."""
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the proxy."""
        self.close()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the proxy's loop and return its result, from another thread."""
        if self._loop is None or self._stopped:
            coroutine.close()  # never awaited: close it, or Python warns about it
            raise RuntimeError("the CuttingProxy is not running (start() it; not after close())")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_CALL_TIMEOUT)

    # Breaking connections.

    def cut_all(self) -> int:
        """Reset every open client connection and its upstream connection now; return how many
        client connections were cut."""

        async def cut() -> int:
            return self._abort_all()

        return self._call(cut())

    def _abort_all(self) -> int:
        links = list(self._links)
        for link in links:
            link.abort()
        return len(links)

    def refuse(self, on: bool) -> None:
        """While ``on``, reset each new connection as soon as it is accepted (as a pool sees a
        server that is down); open connections are left alone."""

        async def set_refusing() -> None:
            self._refusing = on

        self._call(set_refusing())

    def cut_after_commit(
        self, count: int = 1, *, also: tuple[str, ...] = (), within: tuple[str, ...] | None = None
    ) -> None:
        """Arm the proxy: each of the next ``count`` COMMITs a client sends reaches the server,
        and that client's connection is reset without the server's answer being relayed (the
        commit happens; the client cannot know). ``count=0`` disarms it. ``also``: the starts
        of statements that commit on their own (run outside a transaction), cut likewise.

        A COMMIT is a simple Query whose text starts with COMMIT (what asyncpg, and SQLAlchemy
        over it, send), or an extended-protocol Execute of a statement whose Parse text starts
        with COMMIT, cut after the Sync that follows (a COMMIT only prepared is not cut). The
        reset comes once the server has answered the COMMIT (its ReadyForQuery), so that when
        the client sees its error the commit is visible to every other connection.

        ``within``: only a COMMIT of a transaction that ran a statement starting with one of
        these is cut (``()``: no COMMIT, only the ``also`` statements), so that what else the
        client process commits meanwhile (a lease renewal, a poll) is not cut instead.
        """
        if count < 0:
            raise ValueError(f"count must not be negative, not {count}")

        texts = tuple(text.strip().upper() for text in also)
        chosen = None if within is None else tuple(text.strip().upper() for text in within)

        async def arm() -> None:
            self._commit_cuts_armed = count
            self._commit_texts = texts
            self._commit_within = chosen

        self._call(arm())

    def _take_commit_cut(self) -> bool:
        """Use up one armed commit cut if any is left (on the proxy's loop)."""
        if self._commit_cuts_armed <= 0:
            return False
        self._commit_cuts_armed -= 1
        self._commits_cut += 1
        return True

    @property
    def commits_cut(self) -> int:
        """How many connections :meth:`cut_after_commit` has cut so far.

        It is counted before the client's connection is reset, so a client that has seen its
        error already finds it counted.
        """
        return self._commits_cut

    def connections(self) -> int:
        """Return how many client connections are open now (cut ones are not)."""

        async def count() -> int:
            return len(self._links)

        return self._call(count())

    # Accepting (on the proxy's loop).

    def _accept(self, client: asyncio.Transport) -> _Link | None:
        if self._refusing or self._closed:
            _abort(client)
            return None
        link = _Link(self, client)
        self._links.add(link)
        task = asyncio.get_running_loop().create_task(self._connect(link))
        self._connecting.add(task)  # held, so the task is not collected while it runs
        task.add_done_callback(self._connecting.discard)
        return link

    async def _connect(self, link: _Link) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.create_connection(
                lambda: _ServerSide(link), self.target_host, self.target_port
            )
        except OSError:
            link.abort()  # the target is down: so is the client's connection
            return
        link.upstream_made(transport)
