"""Hard-delete values are one per Flow ID and key, shared by every run of the Flow ID (seed 002:
"Flows that reuse a Flow ID share the stored value")."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import (
    Attribute,
    AttributeMap,
    Context,
    EngineConfig,
    Flow,
    FlowNotActiveOrNotFoundError,
    RPCInvokeOptions,
    RPCResult,
    StartFlowOptions,
    StepList,
    rpc,
)
from tests.conftest import running_engine
from tests.support.flow_clients import ServeFlows


class VaultFlow(Flow[None]):
    secret = Attribute("secret", str, hard_delete_on_null=True)
    keys = AttributeMap("keys", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def reveal(self, context: Context) -> str | None:
        return self.secret.get(context)

    @rpc
    def reveal_key(self, context: Context, input: str) -> str | None:
        return self.keys.get(context, input)

    @rpc(load_attribute_maps=(keys,))
    def all_keys(self, context: Context) -> dict[str, str]:
        return self.keys.items(context)

    @rpc
    def forget(self, context: Context) -> RPCResult[None]:
        self.secret.set(context, None)
        return RPCResult(None)


async def test_a_new_run_of_the_flow_id_reads_the_value_an_earlier_run_stored(
    serve_flows: ServeFlows,
) -> None:
    flow = VaultFlow()
    async with serve_flows([flow]) as flows:
        initial = {"secret": "s1", "keys/api": "k1"}
        first = await flows.start_flow(
            VaultFlow, "v", options=StartFlowOptions(initial_attributes=initial)
        )
        await flows.stop_flow("v")
        second = await flows.start_flow(VaultFlow, "v")  # writes nothing itself
        revealed = await flows.invoke_rpc("reveal", "v")
        key = await flows.invoke_rpc(
            flow.reveal_key,
            "v",
            "api",
            options=RPCInvokeOptions(load_attribute_map_instances=(flow.keys.load("api"),)),
        )
        read = await flows.get_attributes("v", ["secret", "keys/api"])
        every = await flows.invoke_rpc("all_keys", "v")  # a whole-map load sees them too
        # The second run deletes the one stored value: the first run reads it as absent too.
        await flows.invoke_rpc("forget", "v")
        after_second = await flows.get_attributes("v", ["secret"])
        after_first = await flows.get_attributes("v", ["secret"], run_id=first.run_id)
    assert second.run_id != first.run_id
    assert (revealed, key) == ("s1", "k1")
    assert read.values == {"secret": "s1", "keys/api": "k1"}
    assert every == {"api": "k1"}
    assert after_second.values == {} and after_first.values == {}


class KeyringFlow(Flow[None]):
    keys = AttributeMap("keys", str, hard_delete_on_null=True)
    secret = Attribute("secret", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def drop_key(self, context: Context, input: str) -> RPCResult[None]:
        self.keys.delete(context, input)
        return RPCResult(None)

    @rpc
    def overwrite(self, context: Context, input: str) -> RPCResult[None]:
        self.secret.set(context, input)
        return RPCResult(None)


async def test_deleting_a_hard_delete_map_instance_deletes_its_stored_value(
    engine_config: EngineConfig,
) -> None:
    initial = {"keys/a": "A", "keys/b": "B"}
    async with running_engine([KeyringFlow()], engine_config) as eng:
        await eng.start_flow(KeyringFlow, "k", options=StartFlowOptions(initial_attributes=initial))
        await eng.invoke_rpc("drop_key", "k", "a")
        read = await eng.get_attributes("k", ["keys/a", "keys/b"])
    assert read.values == {"keys/b": "B"}
    stored = _stored_texts(Path(engine_config.blob_dir))
    assert not any('"A"' in text for text in stored) and any('"B"' in text for text in stored)


async def test_a_refused_commit_has_still_overwritten_the_stored_value(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([KeyringFlow()]) as flows:
        options = StartFlowOptions(initial_attributes={"secret": "before"})
        first = await flows.start_flow(KeyringFlow, "k", options=options)
        await flows.stop_flow("k")
        # The RPC's handler ran on the closed run and wrote the value; its commit is refused.
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await flows.invoke_rpc("overwrite", "k", "after", run_id=first.run_id)
        read = await flows.get_attributes("k", ["secret"], run_id=first.run_id)
    assert read.values == {"secret": "after"}  # the seed: written before the commit


def _stored_texts(root: Path) -> list[str]:
    """Return the contents of every file the blob store holds under ``root``."""
    return [p.read_text() for p in root.rglob("*") if p.is_file()]
