"""Settings, read from ``DEXLITE_*`` environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Server settings; every field can be set as ``DEXLITE_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="DEXLITE_", extra="ignore")

    database_url: str = Field(
        "sqlite+aiosqlite:///./data/dexlite.db",
        description="SQLAlchemy URL: sqlite+aiosqlite:///path or postgresql+asyncpg://...",
    )
    blob_dir: str = Field("./data/blobs", description="Object storage for hard-delete values.")
    host: str = Field("127.0.0.1", description="Address `dexlite serve` binds to.")
    port: int = Field(8000, ge=0, le=65535, description="Port `dexlite serve` listens on.")
    api_token: str | None = Field(
        None, description="When set, /api, /patterns and /primitives need 'Authorization: Bearer'."
    )
    max_request_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="Request bodies over this size get 413."
    )
    cors_origins: list[str] = Field(default_factory=list, description="Allowed CORS origins.")
    sqlite_synchronous: Literal["NORMAL", "FULL", "EXTRA"] = Field(
        "FULL", description="SQLite synchronous mode; FULL survives power loss."
    )
    step_threads: int = Field(32, ge=1, description="Threads for `def` Step handlers.")
    rpc_threads: int = Field(32, ge=1, description="Threads for `def` RPC handlers.")
    registry: str | None = Field(
        None,
        description="Serve this Registry ('module:attribute', a Registry or a function returning "
        "one) instead of the bundled examples.",
    )
    lock_retry_seconds: float = Field(
        10.0, ge=0, description="How long example routes retry an RPC lock conflict."
    )
