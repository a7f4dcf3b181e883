"""A process that has already imported the server, and forks a server process on request.

Starting a server process the ordinary way spends most of its second of CPU importing FastAPI,
SQLAlchemy, pydantic and the engine; a test suite that starts a few hundred servers spends
minutes on that. This process imports all of it once (one per test worker) and answers each
request with ``os.fork()``: the child sets up its environment, working directory and output
as ``subprocess.Popen`` would, and runs uvicorn's command line; it is a real server process,
which a test reaches over TCP and may kill. The parent stays single-threaded (a fork of a
threaded process can inherit a held lock) and opens no database.

Its protocol is one JSON object per line on stdin, each answered by one line on stdout:

- ``{"spawn": {"argv": [...], "env": {...}, "cwd": "...", "log": "...", "new_session": b}}``
  answers ``{"pid": N}``; with ``"program": "dexlite"`` the child runs the ``dexlite`` command
  line instead of uvicorn's, and ``"stdout"`` and ``"stderr"`` name the files its output goes
  to (a CLI test reads them once it has exited);
- ``{"reap": N}`` (once process N has exited) answers ``{"returncode": R}``, negative for a
  signal, as ``Popen.returncode``.

End of input ends it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
from typing import Any

#: Imported before the first fork, so that a child finds them loaded: the server, the test
#: Flows' server, uvicorn's command line and what it loads while it starts.
PRELOADED = (
    "app.main",
    "app.cli",
    "tests.support.flow_server",
    "uvicorn.main",
    "uvicorn.lifespan.on",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.auto",
    "alembic.command",
    "aiosqlite",
    "asyncpg",
)


def _preload() -> None:
    for name in PRELOADED:
        try:
            __import__(name)
        except ImportError:
            # An optional protocol implementation that is not installed: uvicorn will not load it.
            continue


def _run_child(request: dict[str, Any]) -> None:
    """In the forked child: become the requested process, run uvicorn (or the ``dexlite``
    command line), and exit."""
    code = 1
    try:
        if request.get("new_session"):
            os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in (
            (1, request.get("stdout", request.get("log"))),
            (2, request.get("stderr", request.get("log"))),
        ):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(out, fd)
            os.close(out)
        # The signals as a freshly started interpreter has them.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        if request.get("program") == "dexlite":
            from app.cli import main as dexlite

            code = dexlite(sys.argv[1:])
        else:
            from uvicorn.main import main

            try:
                main.main(args=sys.argv[1:], prog_name="uvicorn")
                code = 0
            except SystemExit as exit_:
                code = (
                    exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                )
    except BaseException:
        # Whatever it was, say so in the log before exiting.
        import traceback

        traceback.print_exc()
    finally:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def _returncode(status: int) -> int:
    return os.waitstatus_to_exitcode(status)


def serve() -> None:
    """Answer requests on stdin until it ends."""
    _preload()
    # Nothing imported may have started a thread: the fork below would copy its held locks.
    assert threading.active_count() == 1, threading.enumerate()
    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        if "spawn" in request:
            out.flush()
            pid = os.fork()
            if pid == 0:
                _run_child(request["spawn"])
            answer: dict[str, Any] = {"pid": pid}
        else:
            _, status = os.waitpid(int(request["reap"]), 0)
            answer = {"returncode": _returncode(status)}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()
