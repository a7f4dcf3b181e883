"""How Alembic runs dexlite's migrations: always on a connection the engine hands it.

``engine._storage.schema`` opens the transaction (and, on PostgreSQL, takes the advisory
lock) and passes its connection in ``config.attributes["connection"]``; nothing here connects
by itself, so the migrations run exactly where the engine's schema check runs.
"""

from __future__ import annotations

from alembic import context

from engine._storage.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "dexlite's migrations run through engine._storage.schema, which passes a connection"
    )
context.configure(
    connection=connection,
    target_metadata=metadata,
    # SQLite alters a table by copying it; batch mode does that for the operations that need it.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
