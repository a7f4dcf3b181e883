"""The travel points of ``dexlite flows time-travel`` and ``time-travel-all``: the ``--to``
kinds, the options that name a point, and the point they make (the API's form, and the
engine's as the server reads it)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

import engine
from app.cli.errors import CommandError, ExitCode
from app.travel_schemas import TravelPointBody


class PointKind(StrEnum):
    """The points ``flows time-travel`` takes a run back to."""

    BEGINNING = "beginning"
    EVENT = "event"
    TIME = "time"
    STEP_TYPE = "step-type"
    STEP_EXECUTION = "step-execution"

    @property
    def api(self) -> str:
        """Return the API's spelling of the kind (``STEP_TYPE``)."""
        return self.value.upper().replace("-", "_")


class BulkPointKind(StrEnum):
    """The points ``flows time-travel-all`` takes runs back to."""

    BEGINNING = "beginning"
    STEP_TYPE = "step-type"


class Method(StrEnum):
    """Which side of a Step execution's wait a STEP_EXECUTION point is."""

    WAIT_FOR = "wait-for"
    EXECUTE = "execute"


#: The option each kind of point needs.
NEEDED = {
    PointKind.EVENT: "--event-id",
    PointKind.TIME: "--at",
    PointKind.STEP_TYPE: "--step-type",
    PointKind.STEP_EXECUTION: "--step-execution-id",
}


def travel_point(
    kind: PointKind,
    *,
    event_id: int | None = None,
    at: str | None = None,
    step_type: str | None = None,
    step_execution_id: str | None = None,
    method: Method | None = None,
) -> dict[str, Any]:
    """Return the API's form of a point, from the options that name it.

    Args:
        kind: What ``--to`` chose.
        event_id: ``--event-id``, for an EVENT point.
        at: ``--at``, an ISO 8601 instant with a time zone, for a TIME point.
        step_type: ``--step-type``, for a STEP_TYPE point.
        step_execution_id: ``--step-execution-id``, for a STEP_EXECUTION point.
        method: ``--method``, for a STEP_EXECUTION point (the server's default: WAIT_FOR).

    Returns:
        The ``to`` object of a time-travel request, e.g. ``{"kind": "EVENT", "eventId": 3}``.

    Raises:
        CommandError: Bad input (exit 2): the option the kind needs is missing, an option
            that does not apply to the kind is given, or ``--at`` is not an instant.
    """
    given = {
        "--event-id": event_id,
        "--at": at,
        "--step-type": step_type,
        "--step-execution-id": step_execution_id,
        "--method": method,
    }
    needed = NEEDED.get(kind)
    applies = {needed, "--method"} if kind == PointKind.STEP_EXECUTION else {needed}
    for option, value in given.items():
        if value is not None and option not in applies:
            used = "step-execution" if option == "--method" else _kind_of(option)
            raise bad_input(f"{option} applies only to --to {used}, not --to {kind.value}")
    if needed is not None and given[needed] is None:
        raise bad_input(f"--to {kind.value} needs {needed}")
    point: dict[str, Any] = {"kind": kind.api}
    if event_id is not None:
        point["eventId"] = event_id
    if at is not None:
        point["at"] = _instant(at)
    if step_type is not None:
        point["stepType"] = step_type
    if step_execution_id is not None:
        point["stepExecutionId"] = step_execution_id
    if method is not None:
        point["method"] = method.value.upper().replace("-", "_")
    return point


def _kind_of(option: str) -> str:
    """Return the ``--to`` kind an option of the point belongs to."""
    return next(kind.value for kind, needed in NEEDED.items() if needed == option)


def _instant(text: str) -> str:
    """Return ``--at`` as the API's ISO 8601 form; a time without a zone is bad input."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise bad_input(
            f"--at {text!r} is not an ISO 8601 date and time (e.g. 2026-01-31T09:30:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise bad_input(f"--at {text!r} needs a time zone, e.g. {text}Z or {text}+02:00")
    return moment.isoformat()


def shown_point(point: dict[str, Any]) -> str:
    """Return a point for a sentence: ``BEGINNING``, ``EVENT eventId=3``."""
    fields = " ".join(f"{name}={value}" for name, value in point.items() if name != "kind")
    return f"{point['kind']} {fields}".rstrip()


def bad_input(detail: str) -> CommandError:
    """Return a failure of bad input (exit 2)."""
    return CommandError("INVALID_ARGUMENT", detail, ExitCode.BAD_INPUT)


def engine_point(point: dict[str, Any]) -> engine.TravelPoint:
    """Return the engine's point of the API's form, read as the server reads it (and refused
    as it refuses it: a VALIDATION_ERROR naming the field)."""
    try:
        return TravelPointBody.model_validate(point).to_point()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in ("body", "to", *first.get("loc", ())))
        raise CommandError(
            "VALIDATION_ERROR", f"{where}: {first['msg']}", ExitCode.BAD_INPUT
        ) from None
