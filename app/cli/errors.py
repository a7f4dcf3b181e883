"""The exit statuses of the client commands and the failures that end them."""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """The exit statuses of the ``dexlite`` client commands."""

    OK = 0
    ERROR = 1
    BAD_INPUT = 2
    NOT_FOUND = 3
    CONFLICT = 4
    UNAUTHENTICATED = 5


class CommandError(Exception):
    """A failure a command reports as ``error: CODE: detail`` and ends with ``exit_code``."""

    def __init__(self, code: str, detail: str, exit_code: ExitCode = ExitCode.ERROR) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self._exit_code = exit_code

    @property
    def exit_code(self) -> ExitCode:
        """Return the exit status this failure ends the command with."""
        return self._exit_code


class APIError(CommandError):
    """An error answer of the API, or a server that could not be reached (``status`` None)."""

    def __init__(self, code: str, detail: str, status: int | None = None, body: Any = None) -> None:
        super().__init__(code, detail)
        self.status = status
        self.body = body

    @property
    def exit_code(self) -> ExitCode:
        """Return the exit status the answer's HTTP status stands for."""
        if self.status == 401:
            return ExitCode.UNAUTHENTICATED
        if self.status == 404:
            return ExitCode.NOT_FOUND
        if self.status == 409:
            return ExitCode.CONFLICT
        if self.status in (400, 413, 422):
            return ExitCode.BAD_INPUT
        return ExitCode.ERROR
