"""A throwaway PostgreSQL cluster that a test initialises, starts, crashes and removes itself.

The shared server at 127.0.0.1:5432 (``tests.support.backends``) must stay up for every other
test, so a test that stops or crashes PostgreSQL gets a cluster of its own instead::

    def test_survives_a_crash(tmp_path: Path) -> None:
        require_cluster()
        with PostgresCluster(tmp_path) as cluster:
            cluster.create_database("app")
            ...  # use cluster.url("app")
            cluster.stop("immediate")  # a crash: no shutdown checkpoint
            cluster.start()  # crash recovery replays the WAL

The binaries come from ``pg_config --bindir`` (else /usr/lib/postgresql/15/bin). initdb and
pg_ctl refuse to run as root, and the suite runs as root in CI, so as root they run as the
``postgres`` OS user through ``runuser``, on a directory that user owns.

Outside CI a machine without the binaries skips such tests with the reason; with
``DEXLITE_REQUIRE_POSTGRES=1`` (set by ``.ci/run``) it fails them.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information
import pytest

from tests.server import free_port
from tests.support.backends import REQUIRED, run_blocking
from tests.support.waiting import wait_until

#: Where Debian's postgresql-15 package puts the server binaries, when pg_config is missing.
FALLBACK_BINDIR = Path("/usr/lib/postgresql/15/bin")
#: The OS user initdb and pg_ctl run as when the tests run as root.
OS_USER = "postgres"
#: How long ``start`` waits for the server to accept connections, in seconds.
START_TIMEOUT = 60
# A Unix socket's path must fit sockaddr_un.sun_path (108 bytes with the NUL on Linux).
_SOCKET_PATH_MAX = 107


def bindir() -> Path:
    """Return the directory of initdb, pg_ctl and postgres: ``pg_config --bindir`` when that
    names a directory holding initdb, else :data:`FALLBACK_BINDIR`."""
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        try:
            found = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            found = ""
        # Debian's /usr/bin/pg_config belongs to libpq-dev and may name a directory without a
        # server in it; only a directory with initdb will do.
        if found and (Path(found) / "initdb").is_file():
            return Path(found)
    return FALLBACK_BINDIR


def _as_root() -> bool:
    return os.geteuid() == 0


def cluster_available() -> str | None:
    """Return None when a throwaway cluster can be made here, else why not (for a skip)."""
    directory = bindir()
    for program in ("initdb", "pg_ctl", "postgres"):
        if not os.access(directory / program, os.X_OK):
            return f"PostgreSQL's {program} is not in {directory} (nor named by pg_config)"
    if _as_root():
        if shutil.which("runuser") is None:
            return "running as root needs runuser to run initdb as another user; it is missing"
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            return f"running as root needs an OS user {OS_USER!r} to run initdb as; none exists"
    return None


def require_cluster() -> None:
    """Skip (or, under DEXLITE_REQUIRE_POSTGRES=1, fail) the test when no cluster can be made."""
    reason = cluster_available()
    if reason is not None:
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)


def _quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _make_traversable(directory: Path) -> None:
    """Let the ``postgres`` OS user reach ``directory`` through every directory above it.

    pytest makes its temporary directories (``/tmp/pytest-of-root/pytest-N/test_x0``) with mode
    0o700, so a server running as another user could not even reach its data directory. Only
    the search bit for others is added (not read: the names in them stay unlistable), and only
    on directories inside the system's temporary directory (never on it, nor on anything like
    /root); pytest removes the bit again from ``pytest-of-<user>`` when its next session starts.
    """
    directory = directory.resolve()
    temporary = Path(tempfile.gettempdir()).resolve()
    for current in (directory, *directory.parents):
        mode = current.stat().st_mode
        if mode & stat.S_IXOTH:
            continue
        if temporary not in current.parents:
            raise PermissionError(
                f"the {OS_USER} OS user cannot traverse {current}; give PostgresCluster a "
                f"base directory it can reach (under {temporary}, say)"
            )
        current.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


class PostgresCluster:
    """A PostgreSQL cluster in a new directory under ``base_dir``, listening on 127.0.0.1.

    Authentication is trust for the superuser ``postgres``. Durability is a real server's
    (fsync and synchronous_commit on), because the tests that need a cluster of their own are
    the ones that crash it and count on what was committed. As a context manager it is
    initialised and started on entry, and crashed and removed on exit.
    """

    def __init__(self, base_dir: Path) -> None:
        """Choose the cluster's directory and port; nothing runs until :meth:`init`."""
        self.bindir = bindir()
        #: The free TCP port on 127.0.0.1 the server listens on, chosen now.
        self.port = free_port()
        base_dir.mkdir(parents=True, exist_ok=True)
        #: The directory that holds the data directory and the server log; removed on exit.
        self.directory = Path(tempfile.mkdtemp(prefix="pg-", dir=base_dir))
        #: The data directory (PGDATA); the Unix socket lives here too.
        self.data_dir = self.directory / "data"
        #: The server's log (pg_ctl's -l): stdout and stderr of the postmaster.
        self.log_file = self.directory / "postgres.log"
        self._running = False

    @property
    def running(self) -> bool:
        """Whether :meth:`start` succeeded and no :meth:`stop` followed."""
        return self._running

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self.bindir / program), *args]
        if _as_root():
            # initdb and pg_ctl exit at once when run as root ("cannot be run as root").
            return ["runuser", "-u", OS_USER, "--", *command]
        return command

    def _run(self, program: str, *args: str, timeout: float = 120) -> None:
        command = self._command(program, *args)
        # The working directory must be one the postgres user can enter: the caller's (often
        # /root) is not, and initdb and postgres complain about it.
        result = subprocess.run(
            command,
            cwd=self.directory,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} exited with {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}\n"
                f"server log:\n{self.log_text()}"
            )

    def init(self) -> None:
        """Create the cluster (initdb) and write its configuration."""
        if _as_root():
            # mkdtemp made the directory 0o700 and root's; the server's user must be able to
            # reach it and to create the data directory and the log file in it.
            self.directory.chmod(0o755)
            _make_traversable(self.directory)
            user = pwd.getpwnam(OS_USER)
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        # initdb creates the data directory itself (with the 0o700 mode the server insists
        # on); --no-sync only skips initdb's own flush of the new files, not the server's.
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
        )
        socket_dir = str(self.data_dir)
        if len(f"{socket_dir}/.s.PGSQL.{self.port}") > _SOCKET_PATH_MAX:
            # A deep tmp_path would make the socket path too long, and a server that can
            # create none of its Unix sockets refuses to start; the tests connect over TCP and
            # pg_ctl -w reads postmaster.pid, so no socket is needed at all.
            socket_dir = ""
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": "'" + socket_dir.replace("'", "''") + "'",
            # What the cluster exists for is crashing it and finding the commits: keep the
            # server's durability (fsync off would let a crash lose acknowledged commits).
            "fsync": "on",
            "synchronous_commit": "on",
            "max_connections": "100",
            "shared_buffers": "32MB",
        }
        # Appended: the last setting of a name in postgresql.conf wins over initdb's.
        with (self.data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# tests.support.pg_cluster\n")
            for name, value in settings.items():
                conf.write(f"{name} = {value}\n")

    def start(self) -> None:
        """Start the server and return once it accepts connections on :attr:`port`."""
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-w",
            "-t",
            str(START_TIMEOUT),
            "start",
            timeout=START_TIMEOUT + 30,
        )
        self._running = True
        # pg_ctl -w returns when postmaster.pid says "ready"; connecting is what the tests will
        # do, so wait for that too (after crash recovery it is the same moment, but cheap).
        wait_until(
            self._accepts_connections,
            within=START_TIMEOUT,
            interval=0.05,
            what=f"the PostgreSQL cluster on port {self.port} to accept connections",
        )

    def _accepts_connections(self) -> bool:
        async def probe() -> None:
            conn = await asyncpg.connect(self.url("postgres", driver="postgresql"), timeout=5)
            await conn.close()

        try:
            run_blocking(probe())
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            return False
        return True

    def stop(self, mode: str = "fast") -> None:
        """Stop the server with pg_ctl's shutdown ``mode``: ``smart``, ``fast`` (roll back the
        sessions, checkpoint) or ``immediate`` (a crash: no checkpoint; the next start
        recovers from the WAL)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop")
        self._running = False

    def create_database(self, name: str) -> None:
        """Create database ``name`` (works from inside a running event loop too)."""

        async def create() -> None:
            conn = await asyncpg.connect(self.url("postgres", driver="postgresql"), timeout=10)
            try:
                await conn.execute(f"CREATE DATABASE {_quote_identifier(name)}")
            finally:
                await conn.close()

        run_blocking(create())

    def url(self, database: str, driver: str = "postgresql+asyncpg") -> str:
        """Return the URL of ``database`` on this cluster; ``driver="postgresql"`` gives the
        form asyncpg itself takes."""
        return f"{driver}://postgres@127.0.0.1:{self.port}/{database}"

    def log_text(self) -> str:
        """Return the server log so far ("" before the first start)."""
        try:
            return self.log_file.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def remove(self) -> None:
        """Crash the server if it runs and delete the cluster's directory."""
        try:
            if self._running:
                self.stop("immediate")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        """Initialise and start the cluster; remove it if either fails."""
        try:
            self.init()
            self.start()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Crash the server if it runs (nothing to flush for a throwaway) and remove it."""
        self.remove()
