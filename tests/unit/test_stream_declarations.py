"""Stream declarations: collected per Flow like state, names unique, checked when registered."""

from __future__ import annotations

from typing import Any

import pytest

import engine
from engine import (
    Attribute,
    DefinitionError,
    EngineConfig,
    Flow,
    Registry,
    Stream,
    StreamStoreConfig,
)


class ProgressFlow(Flow[None]):
    status = Attribute("status", str)
    progress = Stream("progress", str, stream_capacity_bytes=4096)


class DerivedFlow(ProgressFlow):
    extra = Stream("extra", int)


def test_registry_collects_streams_declared_on_the_flow_and_its_bases() -> None:
    registry = Registry([DerivedFlow()])
    streams = registry.spec("DerivedFlow").streams
    assert set(streams) == {"progress", "extra"}
    assert streams["progress"] is ProgressFlow.progress


def test_streams_from_get_persistence_schema_are_collected() -> None:
    extra = Stream("late", dict)

    class SchemaFlow(Flow[None]):
        def get_persistence_schema(self) -> tuple[Any, ...]:
            return (extra,)

    assert Registry([SchemaFlow()]).spec("SchemaFlow").streams == {"late": extra}


def test_two_streams_with_one_name_are_a_definition_error() -> None:
    class Twice(Flow[None]):
        a = Stream("progress", str)
        b = Stream("progress", int)

    with pytest.raises(DefinitionError, match="'progress' is declared twice"):
        Registry([Twice()])


def test_a_stream_named_like_an_attribute_is_a_definition_error() -> None:
    class Clash(Flow[None]):
        status = Attribute("status", str)
        status_stream = Stream("status", str)

    with pytest.raises(DefinitionError, match="'status' is declared twice"):
        Registry([Clash()])


@pytest.mark.parametrize("name", ["", "  ", "a/b"])
def test_stream_names_are_non_blank_without_slash(name: str) -> None:
    with pytest.raises(DefinitionError):
        Stream(name, str)


@pytest.mark.parametrize("capacity", [0, -5, True, 1.5])
def test_stream_capacity_must_be_a_positive_int(capacity: Any) -> None:
    with pytest.raises(DefinitionError, match="stream_capacity_bytes"):
        Stream("s", str, stream_capacity_bytes=capacity)


def test_buffered_text_needs_a_text_stream() -> None:
    numbers = Stream("numbers", int)
    with pytest.raises(DefinitionError, match="Stream\\[str\\]"):
        numbers.buffered_text(object())  # type: ignore[arg-type]


def test_writing_through_something_that_is_not_a_handler_context_is_a_clear_error() -> None:
    with pytest.raises(DefinitionError, match="not a Context the engine passed to a handler"):
        ProgressFlow.progress.write(object(), "x")  # type: ignore[arg-type]


def test_list_flow_types_describes_streams() -> None:
    described = Registry([ProgressFlow()]).describe()
    assert described[0].streams == [
        engine.StreamDescription(
            name="progress", schema={"type": "string"}, stream_capacity_bytes=4096
        )
    ]


def test_engine_config_carries_stream_store_defaults() -> None:
    config = EngineConfig().streams
    assert config == StreamStoreConfig()
    assert (config.backend, config.max_read_messages) == ("memory", 1000)
    assert (config.trim_trigger_ratio, config.trim_target_ratio) == (0.9, 0.7)


def test_app_settings_stream_defaults_match_the_engine_defaults() -> None:
    from app.main import config_from_settings
    from app.settings import Settings

    assert config_from_settings(Settings()).streams == StreamStoreConfig()
