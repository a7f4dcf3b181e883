"""Registry validation: every bad declaration fails when the Registry is built."""

from __future__ import annotations

import enum
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any, Literal, NewType, Optional

import pytest

from engine import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    Context,
    DefinitionError,
    Flow,
    IndexType,
    Registry,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    dead_end,
    rpc,
)


class Noop(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return dead_end()


class GoodFlow(Flow[str]):
    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    progress = AttributeMap("progress", str, index=AttributeIndex(IndexType.KEYWORD, "keyword2"))
    secret = Attribute("secret", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Noop())

    @rpc(lock_attributes=(status.lock(), progress.lock("payment")))
    def update(self, context: Context, input: str) -> RPCResult[str]:
        return RPCResult(input)

    @rpc
    def bare(self, context: Context) -> int:
        return 1

    @rpc()
    def empty_parens(self, context: Context, input: None) -> None:
        return None


def test_valid_flow_registers_and_steps_know_their_flow() -> None:
    flow = GoodFlow()
    registry = Registry([flow])
    spec = registry.spec("GoodFlow")
    assert spec.start_step == "Noop"
    assert spec.steps["Noop"].step.flow is flow
    assert set(spec.rpcs) == {"update", "bare", "empty_parens"}
    assert spec.rpcs["bare"].takes_input is False
    assert spec.rpcs["empty_parens"].input_type is None
    assert spec.rpcs["update"].timeout == timedelta(seconds=60)
    assert registry.index_type("keyword1") is IndexType.KEYWORD


def _registry_error(*flows: Flow[Any]) -> str:
    with pytest.raises(DefinitionError) as info:
        Registry(list(flows))
    return str(info.value)


def test_duplicate_state_names_are_rejected() -> None:
    class Dup(Flow[None]):
        a = Attribute("same", str)
        b = AttributeMap("same", str)

    assert "'same' is declared twice" in _registry_error(Dup())


def test_state_names_must_be_non_blank_and_slash_free() -> None:
    with pytest.raises(DefinitionError, match="non-blank"):
        Attribute("  ", str)
    with pytest.raises(DefinitionError, match="must not contain '/'"):
        AttributeMap("a/b", str)


def test_indexed_attribute_map_needs_an_explicit_key() -> None:
    class NoKey(Flow[None]):
        m = AttributeMap("m", str, index=AttributeIndex(IndexType.KEYWORD))

    assert "must name its index key explicitly" in _registry_error(NoKey())


def test_one_index_key_with_two_types_across_flow_types_is_rejected() -> None:
    class A(Flow[None]):
        x = Attribute("x", str, index=AttributeIndex(IndexType.KEYWORD, "slot1"))

    class B(Flow[None]):
        y = Attribute("y", int, index=AttributeIndex(IndexType.INT, "slot1"))

    assert "a shared key needs one index type" in _registry_error(A(), B())


def test_shared_index_key_with_the_same_type_is_allowed() -> None:
    class A(Flow[None]):
        x = Attribute("x", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))

    class B(Flow[None]):
        y = Attribute("y", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))

    Registry([A(), B()])


def test_two_indexed_fields_of_one_flow_need_different_keys() -> None:
    class Same(Flow[None]):
        x = Attribute("x", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
        y = Attribute("y", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))

    assert "need different keys" in _registry_error(Same())


def test_hard_delete_attribute_cannot_be_numeric_bool_or_indexed() -> None:
    class Numeric(Flow[None]):
        n = Attribute("n", int, hard_delete_on_null=True)

    class Flag(Flow[None]):
        b = Attribute("b", bool, hard_delete_on_null=True)

    class Indexed(Flow[None]):
        s = Attribute(
            "s", str, hard_delete_on_null=True, index=AttributeIndex(IndexType.KEYWORD, "keyword9")
        )

    assert "not numbers or booleans" in _registry_error(Numeric())
    assert "not numbers or booleans" in _registry_error(Flag())
    assert "cannot be indexed" in _registry_error(Indexed())


Meters = NewType("Meters", float)


class Level(enum.IntEnum):
    LOW = 1


@pytest.mark.parametrize(
    "value_type",
    [
        int | None,
        Optional[float],  # noqa: UP045 (the spelling under test)
        Literal[1, 2],
        Literal["a", True],
        Annotated[int, "meters"],
        Meters,
        Decimal,
        Fraction,
        complex,
        Level,
        int | str,
    ],
    ids=repr,
)
def test_a_hard_delete_attribute_refuses_every_numeric_or_boolean_type(value_type: Any) -> None:
    class Numeric(Flow[None]):
        n = Attribute("n", value_type, hard_delete_on_null=True)

    assert "not numbers or booleans" in _registry_error(Numeric())


@pytest.mark.parametrize(
    "value_type",
    [str, str | None, bytes, Optional[bytes], Literal["a", "b"], dict[str, int], list[int], Any],  # noqa: UP045
    ids=repr,
)
def test_a_hard_delete_attribute_accepts_string_and_object_types(value_type: Any) -> None:
    class Secret(Flow[None]):
        s = Attribute("s", value_type, hard_delete_on_null=True)

        def get_steps(self) -> StepList[None]:
            return StepList.empty()

    assert Registry([Secret()]).flow_types == ["Secret"]


def test_index_type_must_fit_the_value_type() -> None:
    class Wrong(Flow[None]):
        when = Attribute("when", str, index=AttributeIndex(IndexType.DATETIME, "datetime1"))

    class Right(Flow[None]):
        when = Attribute("when", datetime, index=AttributeIndex(IndexType.DATETIME, "datetime1"))

    assert "cannot have a DATETIME index" in _registry_error(Wrong())
    Registry([Right()])


def test_locks_on_undeclared_state_are_rejected() -> None:
    other = Attribute("other", str)

    class LocksForeign(Flow[None]):
        @rpc(lock_attributes=(other.lock(),))
        def r(self, context: Context) -> None:
            return None

    assert "lock on undeclared state 'other'" in _registry_error(LocksForeign())


def test_step_options_locks_and_loads_are_checked() -> None:
    class BadStep(Step[None]):
        def get_step_options(self) -> StepOptions:
            return StepOptions(execute_lock_attributes=(Attribute("ghost", str).lock(),))

        def execute(self, context: Context, input: None) -> StepDecision:
            return dead_end()

    class F(Flow[None]):
        def get_steps(self) -> StepList[None]:
            return StepList.start_step(BadStep())

    assert "F.BadStep: lock on undeclared state 'ghost'" in _registry_error(F())


def test_load_of_a_plain_attribute_is_rejected() -> None:
    class F(Flow[None]):
        a = Attribute("a", str)

        @rpc(load_attribute_maps=(a,))  # type: ignore[arg-type]
        def r(self, context: Context) -> None:
            return None

    assert "not an AttributeMap of this Flow" in _registry_error(F())


def test_bad_handler_signatures_are_rejected() -> None:
    with pytest.raises(DefinitionError, match=r"must take \(self, context\)"):

        class F(Flow[None]):
            @rpc
            def r(self) -> None:
                return None

    class NoExecute(Step[None]):
        pass

    class G(Flow[None]):
        def get_steps(self) -> StepList[None]:
            return StepList.start_step(NoExecute())

    assert "must override execute" in _registry_error(G())


def test_duplicate_flow_types_and_step_types_are_rejected() -> None:
    class H(Flow[str]):
        def get_steps(self) -> StepList[str]:
            return StepList.start_step(Noop()).other_steps(Noop())

    assert "Flow type GoodFlow is registered twice" in _registry_error(GoodFlow(), GoodFlow())
    assert "Step type Noop is listed twice" in _registry_error(H())


def test_rpc_timeout_must_be_positive() -> None:
    with pytest.raises(DefinitionError, match="timeout must be a positive timedelta"):

        class F(Flow[None]):
            @rpc(timeout=timedelta(0))
            def r(self, context: Context) -> None:
                return None


def test_async_generator_step_handlers_are_rejected_at_registration() -> None:
    class Generates(Step[None]):
        async def execute(self, context: Context, input: None):  # type: ignore[no-untyped-def]
            yield 1

    class F(Flow[None]):
        def get_steps(self) -> StepList[None]:
            return StepList.start_step(Generates())

    assert "is an async generator" in _registry_error(F())


def test_index_keys_cannot_shadow_search_system_fields() -> None:
    class Shadow(Flow[None]):
        s = Attribute("s", str, index=AttributeIndex(IndexType.KEYWORD, "Status"))

    assert "reserved system field" in _registry_error(Shadow())


def test_a_subclass_may_override_an_rpc_of_its_base_flow() -> None:
    class Base(Flow[None]):
        @rpc
        def answer(self, context: Context) -> int:
            return 1

    class Derived(Base):
        @rpc
        def answer(self, context: Context) -> int:
            return 2

    spec = Registry([Derived()]).spec("Derived")
    assert list(spec.rpcs) == ["answer"]
    assert spec.rpcs["answer"].function is vars(Derived)["answer"]


def test_two_methods_registering_one_rpc_name_are_rejected() -> None:
    class Twice(Flow[None]):
        @rpc(name="same")
        def one(self, context: Context) -> None:
            return None

        @rpc(name="same")
        def two(self, context: Context) -> None:
            return None

    assert "RPC name 'same' is used twice" in _registry_error(Twice())


def test_handle_timeout_must_take_only_a_context() -> None:
    class Wrong(Flow[None]):
        def handle_timeout(self, context: Context, extra: int) -> None:
            return None

    assert "handle_timeout must take (self, context)" in _registry_error(Wrong())
