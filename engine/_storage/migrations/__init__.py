"""The schema's versioned migrations (Alembic); ``engine._storage.schema`` applies them."""
