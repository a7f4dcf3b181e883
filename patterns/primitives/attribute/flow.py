"""AttributeFlow: Dex's Attribute example, with a wait so its RPC has time to run.

``status`` is searchable as ``keyword1`` and ``progress`` as ``keyword2`` (generic numbered
slots, so every Flow type shares one typed pool). ``model_api_key`` is a hard-delete Attribute:
its value lives only in the blob store, and deleting it removes the stored value for good.

AttributeStep waits on a durable Timer (``wait_seconds`` from the input), then marks the Flow
completed and deletes the short-lived key. Until then the ``update_status`` RPC can change
``status`` and ``progress/payment``.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    Context,
    Flow,
    IndexType,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Timer,
    Wait,
    graceful_complete,
    rpc,
)

STATUS_PENDING = "pending"
STATUS_COMPLETED = "completed"
PAYMENT = "payment"

DEFAULT_NOTE = "done"
DEFAULT_WAIT_SECONDS = 20.0
MAX_WAIT_SECONDS = 600.0


class AttributeInput(BaseModel):
    """What AttributeStep completes with, and how long it waits before completing."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    note: str = Field(default=DEFAULT_NOTE, max_length=200)
    wait_seconds: float = Field(default=DEFAULT_WAIT_SECONDS, ge=0, le=MAX_WAIT_SECONDS)


class AttributeStep(Step[AttributeInput]):
    """Wait ``wait_seconds``, then complete the status and delete the model API key."""

    def get_step_options(self) -> StepOptions:
        """Lock ``status`` and ``progress/payment`` while ``wait_for`` runs.

        This is Dex's WaitFor lock: an ``update_status`` arriving meanwhile gets
        RPC_LOCK_CONFLICT instead of interleaving with the Step.
        """
        return StepOptions(
            wait_for_lock_attributes=(
                self.flow.status.lock(),
                self.flow.progress.lock(PAYMENT),
            ),
        )

    def wait_for(self, context: Context, input: AttributeInput) -> Wait:
        """Wait on a durable Timer; it survives a restart of the server."""
        return Wait.until(Timer.by_duration(timedelta(seconds=input.wait_seconds)))

    def execute(self, context: Context, input: AttributeInput) -> StepDecision:
        """Set ``status`` to completed and permanently delete the model API key."""
        self.flow.status.set(context, STATUS_COMPLETED)
        # The Flow no longer needs the short-lived key, so delete it permanently.
        self.flow.model_api_key.delete(context)
        return graceful_complete(input.note)


class AttributeFlow(Flow[AttributeInput]):
    """Searchable status and payment progress, and a key that is erased once used."""

    status: Attribute[str] = Attribute(
        "primitive-attribute-status",
        str,
        index=AttributeIndex(IndexType.KEYWORD, "keyword1"),
    )
    progress: AttributeMap[str] = AttributeMap(
        "primitive-attribute-progress",
        str,
        index=AttributeIndex(IndexType.KEYWORD, "keyword2"),
    )
    model_api_key: Attribute[str] = Attribute(
        "primitive-attribute-model-api-key",
        str,
        hard_delete_on_null=True,
    )

    def get_steps(self) -> StepList[AttributeInput]:
        """Start with AttributeStep."""
        return StepList.start_step(AttributeStep())

    @rpc(lock_attributes=(status.lock(), progress.lock(PAYMENT)))
    def update_status(self, context: Context, input: str) -> RPCResult[str]:
        """Set ``status`` and ``progress/payment`` to ``input`` under both locks."""
        self.status.set(context, input)
        self.progress.set(context, PAYMENT, input)
        return RPCResult(input)
