"""``dexlite serve``: uvicorn, with a stop on SIGTERM or SIGINT that ends in exit status 0.

On either signal the server stops accepting connections, gives in-flight requests (RPCs and
their commits) ``DEXLITE_SHUTDOWN_TIMEOUT_SECONDS`` to finish, then closes the engine: running
Step attempts are canceled before they commit and resume on the next start, as after a crash,
so nothing that committed runs again. Imported only by ``serve``, so client commands start
without uvicorn.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

import uvicorn

from app.settings import Settings

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulServer(uvicorn.Server):
    """uvicorn's server, but the signal that stopped it is not raised again afterwards.

    uvicorn re-raises it once it has stopped, so the process would die of it (status 143 for
    SIGTERM) although every request finished and the engine closed cleanly.
    """

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


def run_server(
    settings: Settings, host: str, port: int, *, log_level: str, access_log: bool
) -> None:
    """Serve the app until a stop signal, stop gracefully, and exit."""
    config = uvicorn.Config(
        "app.main:create_app",
        factory=True,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        # Then open long polls and SSE followers are cut.
        timeout_graceful_shutdown=max(1, round(settings.shutdown_timeout_seconds)),
    )
    GracefulServer(config).run()
    _exit_past_stuck_step_threads()


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
