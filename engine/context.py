"""The Context a handler receives: who is running, and whether to stop.

State is read and staged through the declarations themselves (``self.status.get(context)``,
``self.progress.set(context, key, value)``, ``self.updates.write(context, value)``), which is
why the Context shows so little: it is the handler's ticket to one invocation's snapshot and
staged effects. Reads come from one committed snapshot taken before the handler ran, overlaid
with the invocation's own staged writes; writes commit atomically with the handler's result.
"""

from __future__ import annotations

from typing import Any, Protocol

from engine.outputs import Heartbeat


class Context(Protocol):
    """What a Step, RPC or Flow timeout handler sees of its invocation."""

    @property
    def flow_id(self) -> str:
        """The Flow ID of the run."""
        ...

    @property
    def run_id(self) -> str:
        """The run the invocation belongs to."""
        ...

    @property
    def flow_type(self) -> str:
        """The Flow type name."""
        ...

    @property
    def step_execution_id(self) -> str | None:
        """The Step execution (None for RPCs and the timeout handler)."""
        ...

    @property
    def step_type(self) -> str | None:
        """The Step type (None for RPCs and the timeout handler)."""
        ...

    @property
    def attempt(self) -> int:
        """The attempt number of a Step method, from 1."""
        ...

    @property
    def rpc_name(self) -> str | None:
        """The RPC being invoked (None for Steps and the timeout handler)."""
        ...

    def is_cancellation_requested(self) -> bool:
        """Return True once the engine asked this invocation to stop (poll it in sync Steps)."""
        ...

    def heartbeat(self, details: Any = None) -> Heartbeat:
        """Record an explicit heartbeat of this Step invocation with ``details``.

        It is recorded at once; a sync generator Step may also yield the returned value.
        Stream writes are implicit heartbeats that keep the last explicit ``details``.
        """
        ...
