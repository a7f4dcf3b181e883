"""Hard-delete values are one per Flow ID and key, shared by every run of the Flow ID (seed 002:
"Flows that reuse a Flow ID share the stored value")."""

from __future__ import annotations

from engine import (
    Attribute,
    AttributeMap,
    Context,
    EngineConfig,
    Flow,
    RPCInvokeOptions,
    RPCResult,
    StartFlowOptions,
    StepList,
    rpc,
)
from tests.conftest import running_engine


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

    @rpc
    def forget(self, context: Context) -> RPCResult[None]:
        self.secret.set(context, None)
        return RPCResult(None)


async def test_a_new_run_of_the_flow_id_reads_the_value_an_earlier_run_stored(
    engine_config: EngineConfig,
) -> None:
    flow = VaultFlow()
    async with running_engine([flow], engine_config) as eng:
        initial = {"secret": "s1", "keys/api": "k1"}
        first = await eng.start_flow(
            VaultFlow, "v", options=StartFlowOptions(initial_attributes=initial)
        )
        await eng.stop_flow("v")
        second = await eng.start_flow(VaultFlow, "v")  # writes nothing itself
        revealed = await eng.invoke_rpc("reveal", "v")
        key = await eng.invoke_rpc(
            flow.reveal_key,
            "v",
            "api",
            options=RPCInvokeOptions(load_attribute_map_instances=(flow.keys.load("api"),)),
        )
        read = await eng.get_attributes("v", ["secret", "keys/api"])
        # The second run deletes the one stored value: the first run reads it as absent too.
        await eng.invoke_rpc("forget", "v")
        after_second = await eng.get_attributes("v", ["secret"])
        after_first = await eng.get_attributes("v", ["secret"], run_id=first.run_id)
    assert second.run_id != first.run_id
    assert (revealed, key) == ("s1", "k1")
    assert read.values == {"secret": "s1", "keys/api": "k1"}
    assert after_second.values == {} and after_first.values == {}
