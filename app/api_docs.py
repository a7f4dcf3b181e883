"""/docs (Swagger UI) and /redoc (ReDoc) without a CDN.

FastAPI's own pages load their scripts, styles and fonts from the internet, so on a machine
without it they stay blank. The scripts ship with the fastapi-offline package; this module
serves them from the app itself and builds both pages on them (without Google Fonts).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: Where the Swagger UI and ReDoc files are served from.
ASSETS_PATH = "/api-docs-assets"


def assets_dir() -> Path:
    """Return the directory of the packaged Swagger UI and ReDoc files."""
    return Path(str(files("fastapi_offline") / "static"))


def install_api_docs(app: FastAPI, title: str) -> None:
    """Serve /docs and /redoc on ``app`` (created with ``docs_url=None, redoc_url=None``),
    reading the app's OpenAPI document and scripts served by the app."""
    app.mount(ASSETS_PATH, StaticFiles(directory=assets_dir()), name="api-docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title}: API",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{title}: API reference",
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
