"""The settings' flat names: what each grouped setting was called before the groups.

The settings of the SQLite database, the PostgreSQL database, the Stream Store and the request
limits are groups (``DEXLITE_STREAM__BACKEND``, ``DEXLITE_POSTGRES__POOL_SIZE``, ...). They were
flat settings once (``DEXLITE_STREAM_STORE_BACKEND``, ``DEXLITE_DATABASE_POOL_SIZE``), and every
flat name still sets its setting: :class:`FlatNamesSource` reads them. Where both names of one
setting are set, the grouped name wins.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import PydanticBaseSettingsSource

#: Flat name -> (group, field): ``DEXLITE_<FLAT NAME>`` sets ``<group>.<field>``. Only the
#: settings that were flat have one: a setting added to a group since has its grouped name alone.
FLAT_NAMES: dict[str, tuple[str, str]] = {
    "sqlite_synchronous": ("sqlite", "synchronous"),
    "state_cache_bytes": ("sqlite", "state_cache_bytes"),
    "database_pool_size": ("postgres", "pool_size"),
    "database_connect_timeout": ("postgres", "connect_timeout"),
    "database_pool_timeout": ("postgres", "pool_timeout"),
    "database_statement_timeout": ("postgres", "statement_timeout"),
    "database_lock_timeout": ("postgres", "lock_timeout"),
    "lease_seconds": ("postgres", "lease_seconds"),
    "poll_seconds": ("postgres", "poll_seconds"),
    "stream_store_backend": ("stream", "backend"),
    "stream_redis_url": ("stream", "redis_url"),
    "stream_postgres_url": ("stream", "postgres_url"),
    "stream_namespace": ("stream", "namespace"),
    "stream_default_capacity_bytes": ("stream", "default_capacity_bytes"),
    "stream_max_capacity_bytes": ("stream", "max_capacity_bytes"),
    "stream_max_message_bytes": ("stream", "max_message_bytes"),
    "stream_max_total_bytes": ("stream", "max_total_bytes"),
    "stream_message_overhead_bytes": ("stream", "message_overhead_bytes"),
    "stream_trim_trigger_ratio": ("stream", "trim_trigger_ratio"),
    "stream_trim_target_ratio": ("stream", "trim_target_ratio"),
    "stream_trim_workers": ("stream", "trim_workers"),
    "stream_max_read_messages": ("stream", "max_read_messages"),
    "stream_events_max_seconds": ("stream", "events_max_seconds"),
    "max_request_bytes": ("limits", "max_request_bytes"),
    "max_id_length": ("limits", "max_id_length"),
    "max_value_bytes": ("limits", "max_value_bytes"),
    "max_query_length": ("limits", "max_query_length"),
    "max_query_depth": ("limits", "max_query_depth"),
    "max_names_per_read": ("limits", "max_names_per_read"),
    "max_page_size": ("limits", "max_page_size"),
    "max_wait_seconds": ("limits", "max_wait_seconds"),
}
#: (group, field) -> flat name.
FLAT_NAME_OF = {path: flat for flat, path in FLAT_NAMES.items()}


class FlatNamesSource(PydanticBaseSettingsSource):
    """Reads the flat names from the environment, each into its group.

    Place it after the environment's own source: what that one read (the grouped names) wins.
    """

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` reads the environment by the flat names, not by field."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        case_sensitive = bool(self.config.get("case_sensitive", False))
        environ = _environment(case_sensitive)
        prefix = self.config.get("env_prefix", "")
        found: dict[str, Any] = {}
        for flat, (group, field) in FLAT_NAMES.items():
            name = prefix + flat
            value = environ.get(name if case_sensitive else name.lower())
            if value is not None:
                found.setdefault(group, {})[field] = value
        return found


def _environment(case_sensitive: bool) -> dict[str, str]:
    """Return the environment, its names in lower case unless ``case_sensitive``."""
    if case_sensitive:
        return dict(os.environ)
    return {name.lower(): value for name, value in os.environ.items()}
