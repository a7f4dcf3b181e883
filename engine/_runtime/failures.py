"""What a failed Step attempt or RPC handler leaves behind for whoever debugs it: a log line
with its traceback and the IDs to find it by, and a traceback of bounded size to keep in the
run's history.

A traceback holds the code's file names, lines and source text, never a local variable's value,
so nothing a handler read (a hard-delete value, say) reaches the history or the log through it.
"""

from __future__ import annotations

import logging
import traceback

from engine._ids import to_rfc3339
from engine._storage.records import QueuedStep

#: The most of a traceback history keeps: its end, where the error was raised, when longer.
MAX_TRACEBACK_CHARS = 8_000

log = logging.getLogger("dexlite.failures")


def traceback_text(exc: BaseException) -> str:
    """Return ``exc``'s traceback as text, cut to its last MAX_TRACEBACK_CHARS characters."""
    text = "".join(traceback.format_exception(exc)).rstrip("\n")
    if len(text) <= MAX_TRACEBACK_CHARS:
        return text
    kept = text[-MAX_TRACEBACK_CHARS:]
    return f"... ({len(text) - len(kept)} characters cut)\n{kept[kept.find(chr(10)) + 1 :]}"


def log_step_failure(exc: BaseException, step: QueuedStep, *, retry_at: int | None) -> None:
    """Log the failure of ``step``'s attempt with its traceback: a warning when it will be
    retried (at ``retry_at``, microseconds since the epoch; logged as RFC 3339), an error
    when it was the last."""
    fields: dict[str, object] = {
        "flowId": step.flow_id,
        "runId": step.run_id,
        "stepType": step.step_type,
        "stepExecutionId": step.execution_id,
        "attempt": step.attempt,
    }
    if retry_at is not None:
        fields["retryAt"] = to_rfc3339(retry_at)
    log.log(
        logging.ERROR if retry_at is None else logging.WARNING,
        "Step %s (%s, attempt %d) of Flow %s run %s failed%s: %s: %s",
        step.step_type,
        step.execution_id,
        step.attempt,
        step.flow_id,
        step.run_id,
        " for good" if retry_at is None else ", to be retried",
        type(exc).__name__,
        exc,
        exc_info=exc,
        extra=fields,
    )


def log_rpc_failure(exc: BaseException, *, flow_id: str, run_id: str, rpc_name: str) -> None:
    """Log an RPC handler's failure with its traceback (its caller gets RPC_HANDLER_ERROR)."""
    log.warning(
        "RPC %s of Flow %s run %s raised %s: %s",
        rpc_name,
        flow_id,
        run_id,
        type(exc).__name__,
        exc,
        exc_info=exc,
        extra={"flowId": flow_id, "runId": run_id, "rpcName": rpc_name},
    )
