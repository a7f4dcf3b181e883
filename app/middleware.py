"""ASGI middleware: request size limit and bearer-token authentication."""

from __future__ import annotations

import hmac
import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import PROBLEM_JSON
from app.problems import TITLES, type_uri

PROTECTED_PREFIXES = ("/api/", "/patterns/", "/primitives/")


async def _send_problem(
    send: Send,
    status: int,
    code: str,
    detail: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps(
        {
            "type": type_uri(code),
            "title": TITLES.get(status, "Error"),
            "status": status,
            "detail": detail,
            "code": code,
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM_JSON.encode()),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """Refuse bodies over ``limit`` bytes with 413: from Content-Length alone when present,
    otherwise while the body streams in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    await _send_problem(send, 400, "INVALID_ARGUMENT", "bad Content-Length")
                    return
                if length > self.limit:
                    await _send_problem(
                        send,
                        413,
                        "PAYLOAD_TOO_LARGE",
                        f"request body of {length} bytes exceeds the limit of {self.limit} bytes",
                    )
                    return
        seen = 0
        responded = False

        async def limited_receive() -> Message:
            nonlocal seen, responded
            message = await receive()
            if message["type"] == "http.request" and not responded:
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    # Answer now and tell the app the client left, so it stops reading.
                    responded = True
                    await _send_problem(
                        send,
                        413,
                        "PAYLOAD_TOO_LARGE",
                        f"request body exceeds the limit of {self.limit} bytes",
                    )
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not responded:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)


class BearerAuthMiddleware:
    """Require ``Authorization: Bearer <token>`` on API, pattern and primitive routes."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PROTECTED_PREFIXES):
            given: Any = dict(scope.get("headers", [])).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await _send_problem(
                    send,
                    401,
                    "UNAUTHENTICATED",
                    "missing or wrong bearer token",
                    [(b"www-authenticate", b"Bearer")],
                )
                return
        await self.app(scope, receive, send)
