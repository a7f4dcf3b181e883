"""API routers."""
