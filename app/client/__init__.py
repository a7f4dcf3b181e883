"""An async client of dexlite's REST API with the calls of ``engine.FlowClient``."""

from app.client.client import Client

__all__ = ["Client"]
