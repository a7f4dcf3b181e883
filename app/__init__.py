"""dexlite's REST API: the FastAPI app factory, routers, wire schemas, errors, settings, CLI."""
