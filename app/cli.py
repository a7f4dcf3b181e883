"""The ``dexlite`` command: ``dexlite serve`` and ``dexlite openapi``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.settings import Settings

    settings = Settings()
    host = args.host or settings.host
    port = args.port if args.port is not None else settings.port
    print(f"dexlite: playground at http://{host}:{port}/playground/", flush=True)
    print(f"dexlite: database {settings.database_url}", flush=True)
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=host,
        port=port,
        log_level=args.log_level,
        access_log=args.access_log,
        # Open SSE followers must not hold a shutdown for long.
        timeout_graceful_shutdown=5,
    )
    return 0


def openapi_document() -> str:
    """Return the app's OpenAPI document as stable, pretty JSON."""
    from app.main import create_app

    return json.dumps(create_app().openapi(), indent=2, sort_keys=True) + "\n"


def _openapi(args: argparse.Namespace) -> int:
    text = openapi_document()
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the dexlite command line."""
    parser = argparse.ArgumentParser(prog="dexlite", description="dexlite durable flow engine")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the API and playground (settings: DEXLITE_*)")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=False)
    serve.set_defaults(func=_serve)
    spec = sub.add_parser("openapi", help="write the OpenAPI document")
    spec.add_argument("--output", "-o", default="openapi.json")
    spec.set_defaults(func=_openapi)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
