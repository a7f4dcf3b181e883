"""``dexlite serve``: uvicorn, with a stop on SIGTERM or SIGINT that ends in exit status 0.

A server that cannot start (bad settings, a registry that does not import, a port in use, a
SQLite file another process serves, a database that does not answer) says so in one line on
stderr, ``dexlite: cannot start: ...``, and exits with status 1; the playground's URL is
printed only once the server answers.

On either signal the server stops accepting connections, gives in-flight requests (RPCs and
their commits) ``DEXLITE_SHUTDOWN_TIMEOUT_SECONDS`` to finish, then closes the engine: running
Step attempts are canceled before they commit and resume on the next start, as after a crash,
so nothing that committed runs again. Imported only by ``serve``, so client commands start
without uvicorn.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import uvicorn
from pydantic import ValidationError

from app.settings import Settings, variable_of
from engine import EngineError

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def cannot_start(why: str) -> NoReturn:
    """Say why the server cannot start, in one line on stderr, and exit with status 1."""
    sys.stdout.flush()
    print(f"dexlite: cannot start: {why}", file=sys.stderr, flush=True)
    raise SystemExit(1)


#: Exceptions a start meets for a reason outside the program (a file, a socket, a server).
_OS_ERRORS: tuple[type[OSError], ...] = (
    OSError,
    *OSError.__subclasses__(),
    *ConnectionError.__subclasses__(),
)
_KNOWN_OS_ERRORS = frozenset(cls.__name__ for cls in _OS_ERRORS)


class _StartupFailure(logging.Filter):
    """Turns uvicorn's report of a lifespan that failed for a known reason (the database,
    the engine's configuration) into the one line of :func:`cannot_start`, instead of a
    traceback; a failure of any other kind keeps its traceback (it is a bug)."""

    def __init__(self) -> None:
        super().__init__()
        self.reason: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, EngineError | OSError):
            self.reason = str(error)
            return False
        message = record.getMessage()
        if message.startswith("Traceback (most recent call last):"):
            # The framework reports a failed lifespan as its formatted traceback: the last line
            # names the exception.
            kind, _, text = message.rstrip().rsplit("\n", 1)[-1].partition(": ")
            # Engine errors print as engine.<Name> (their public module), once engine.errors.
            engine_error = kind.startswith("engine.") and kind.endswith("Error")
            if engine_error or kind in _KNOWN_OS_ERRORS:
                self.reason = text
                return False
        return not (self.reason and message == "Application startup failed. Exiting.")


class GracefulServer(uvicorn.Server):
    """uvicorn's server, but the signal that stopped it is not raised again afterwards.

    uvicorn re-raises it once it has stopped, so the process would die of it (status 143 for
    SIGTERM) although every request finished and the engine closed cleanly. ``on_started``
    is called once it answers.
    """

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start as uvicorn does, then tell ``on_started`` (unless the start failed)."""
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            self._on_started()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Stop gracefully on SIGINT and SIGTERM, without re-raising them afterwards."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def run_server(host: str | None, port: int | None, *, log_level: str, access_log: bool) -> None:
    """Check what can be checked before serving, serve the app until a stop signal, stop
    gracefully, and exit (status 1, with one line saying why, when it cannot start)."""
    from app.main import RegistryLoadError, create_app, load_registry

    try:
        settings = Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = variable_of(first["loc"]) if first["loc"] else "a setting"
        cannot_start(f"{name}: {first['msg']}")
    host = host or settings.host
    port = port if port is not None else settings.port
    registry = None
    if settings.registry:
        try:
            registry = load_registry(settings.registry)
        except RegistryLoadError as exc:
            cannot_start(str(exc))
    _check_port(host, port)

    def started() -> None:
        print(f"dexlite: playground at http://{host}:{port}/playground/", flush=True)
        print(f"dexlite: database {settings.database_url}", flush=True)

    def app() -> Any:
        return create_app(settings, registry)

    config = uvicorn.Config(
        app,
        factory=True,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        # Then open long polls and SSE followers are cut.
        timeout_graceful_shutdown=max(1, round(settings.shutdown_timeout_seconds)),
    )
    # After the Config: it sets up uvicorn's logging.
    failure = _StartupFailure()
    logging.getLogger("uvicorn.error").addFilter(failure)
    server = GracefulServer(config, started)
    with contextlib.suppress(SystemExit):  # uvicorn exits with status 3 when it did not start
        server.run()
    if not server.started:
        cannot_start(failure.reason or "the server did not start (see the log above)")
    _exit_past_stuck_step_threads()


def _check_port(host: str, port: int) -> None:
    """Fail now, in one line, when the address cannot be bound (another server has it)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        cannot_start(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def _exit_past_stuck_step_threads() -> None:
    """Exit now when a ``def`` Step still runs in a worker thread after the engine closed.

    Its attempt did not commit and resumes on the next start, but the interpreter would wait
    for the thread at exit, perhaps for ever.
    """
    stuck = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    if stuck:
        print(
            f"dexlite: stopped; {len(stuck)} Step thread(s) abandoned, resumed on the next start",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        os._exit(0)
