"""A failing Step or RPC handler can be debugged: each failed attempt is logged with its
traceback and the IDs to find it by, and the traceback (bounded in size) is kept with the
attempt in the run's history."""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta

import pytest

from engine import (
    Context,
    EngineConfig,
    Flow,
    ManualClock,
    RetryPolicy,
    RPCHandlerError,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    graceful_complete,
    rpc,
)
from engine._runtime.failures import MAX_TRACEBACK_CHARS
from engine.testing import settle
from tests.conftest import running_engine


def charge(card: str) -> None:
    """The line every traceback below must point at."""
    raise RuntimeError(f"payment gateway down for {card}")


class Pay(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(max_attempts=3, initial_interval=timedelta(seconds=10))
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        charge(input)
        return graceful_complete("paid")


class PaymentFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Pay())

    @rpc
    def refund(self, context: Context, input: str) -> str:
        charge(input)
        return "refunded"


class Verbose(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        raise ValueError("x" * (5 * MAX_TRACEBACK_CHARS))


class VerboseFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Verbose())


def _points_at_the_raise(trace: str) -> None:
    assert trace.startswith("Traceback (most recent call last):"), trace
    assert f'{__file__}", line' in trace and "in charge" in trace, trace
    assert 'raise RuntimeError(f"payment gateway down for {card}")' in trace, trace
    assert trace.endswith("RuntimeError: payment gateway down for card-1"), trace


async def test_each_failed_attempt_is_logged_and_kept_in_history_with_its_traceback(
    engine_config: EngineConfig, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    caplog.set_level(logging.WARNING, logger="dexlite.failures")
    async with running_engine([PaymentFlow()], config) as eng:
        started = await eng.start_flow(PaymentFlow, "order-1", "card-1")
        await settle(eng)
        await clock.advance_when_idle(3600)  # both retries
        result = await eng.wait_for_flow("order-1")
        events = (await eng.get_flow_history("order-1")).events
    assert (result.status, result.error_type) == ("FAILED", "RuntimeError")
    failed = [e.details for e in events if e.event_type == "STEP_ATTEMPT_FAILED"]
    assert [d["attempt"] for d in failed] == [1, 2]
    closed = [e.details for e in events if e.event_type == "STEP_CLOSED"]
    assert [d["decision"] for d in closed] == ["FAILED"]
    for trace in [d["traceback"] for d in failed] + [closed[0]["traceback"]]:
        _points_at_the_raise(trace)
    records = [r for r in caplog.records if r.name == "dexlite.failures"]
    assert [(r.levelname, getattr(r, "attempt", None)) for r in records] == [
        ("WARNING", 1),
        ("WARNING", 2),
        ("ERROR", 3),
    ]
    for record in records:
        assert (record.flowId, record.runId) == ("order-1", started.run_id)  # type: ignore[attr-defined]
        assert record.stepExecutionId == "Pay-1"  # type: ignore[attr-defined]
        assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
    assert records[0].retryAt == failed[0]["retryAt"]  # type: ignore[attr-defined]
    # The first retry is due 10 s after the clock's start (2027-01-15T08:00:00Z).
    assert failed[0]["retryAt"] == "2027-01-15T08:00:10Z"


async def test_a_huge_traceback_is_kept_by_its_end(engine_config: EngineConfig) -> None:
    async with running_engine([VerboseFlow()], engine_config) as eng:
        await eng.start_flow(VerboseFlow, "verbose", None)
        await settle(eng)
        events = (await eng.get_flow_history("verbose")).events
    trace = next(e.details["traceback"] for e in events if e.event_type == "STEP_CLOSED")
    assert len(trace) <= MAX_TRACEBACK_CHARS + 40
    assert trace.startswith("... (") and " characters cut)\n" in trace
    assert trace.endswith("x" * 100)


async def test_an_rpc_handler_error_is_logged_with_its_traceback(
    engine_config: EngineConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="dexlite.failures")
    async with running_engine([PaymentFlow()], engine_config) as eng:
        started = await eng.start_flow(PaymentFlow, "order-2", "card-2")
        with pytest.raises(RPCHandlerError):
            await eng.invoke_rpc(PaymentFlow().refund, "order-2", "card-1")
    (record,) = [r for r in caplog.records if getattr(r, "rpcName", None) == "refund"]
    assert (record.flowId, record.runId) == ("order-2", started.run_id)  # type: ignore[attr-defined]
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
