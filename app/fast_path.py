"""A shorter way through FastAPI for requests that need none of its general machinery.

FastAPI (0.165) spends more per request than the engine does on an RPC: it matches the path
against every route of every included router (twice), builds two exit stacks, and its general
dependency solver resolves each parameter and dependency of the route through several layers.
For a route whose parameters are plain path and query parameters, at most one JSON body model,
and dependencies that only take the Request (every route of the engine API and the examples),
:class:`FastPath` does the same work directly:

- it finds the route with one regular-expression match per candidate, in FastAPI's own order;
- it validates the path, query and body parameters with FastAPI's own functions
  (``request_params_to_args``, ``request_body_to_args``) against the route's own fields;
- it calls the route's dependencies and endpoint, and serializes the result with the route's
  response field, as FastAPI does (``serialize_json``);
- it answers an exception with the handler the app registered for it.

Anything else goes to FastAPI untouched, with the body it read replayed: a parameter or body
that fails validation, a body that is not ``application/json``, a HEAD request, a route this
module cannot compile, an app with dependency overrides. So every error answer that validation
produces is FastAPI's own, and a request that passes is answered as FastAPI answers it. Nothing
is done before the endpoint that FastAPI would not do (the dependencies here are pure).

What the routes look like after ``include_router`` (their effective dependencies, paths and
response fields), and the FastAPI functions used above, are not public API: this module reads
and calls them only through ``app/fastapi_internals.py``, whose contract test names what a new
FastAPI changed; the version is pinned in pyproject.toml, and a test fails if the hot routes
stop compiling.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import ResponseValidationError
from fastapi.routing import APIRoute
from starlette.convertors import Convertor, StringConvertor
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.fastapi_internals import (
    CallSpec,
    EffectiveRoute,
    ExceptionHandlers,
    Field,
    body_allowed,
    effective_routes,
    takes_plain_str,
    validate_params,
)

#: The methods served here; HEAD (which answers without a body) is left to FastAPI.
_METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH"})


class _Fallback(Exception):
    """This request goes to FastAPI."""


@dataclass(frozen=True)
class _Dependency:
    """A dependency that takes only the Request (or nothing), called once per request."""

    name: str | None
    call: Callable[..., Awaitable[Any]]
    request_param: str | None


@dataclass(frozen=True)
class _Candidate:
    """A route in FastAPI's matching order; ``compiled`` when this module can serve it.
    ``methods`` None: any method (a mount)."""

    path_regex: Any
    methods: frozenset[str] | None
    compiled: _CompiledRoute | None
    #: What every path it matches starts with (its template up to the first parameter): a
    #: cheap test before the regular expression.
    prefix: str = ""


@dataclass(frozen=True)
class _CompiledRoute:
    """What answering one route takes, read from its effective FastAPI route."""

    route: APIRoute
    path: str
    endpoint: Callable[..., Any]
    param_convertors: dict[str, Convertor[Any]]
    spec: CallSpec
    call: Callable[..., Awaitable[Any]]
    dependencies: tuple[_Dependency, ...]
    #: (parameter, path name) of each path parameter when all are plain ``str`` (taken as they
    #: are, which is all FastAPI's validation does to them); None otherwise.
    plain_path: tuple[tuple[str, str], ...] | None
    #: The body parameter's field (one, not embedded), or None.
    body_field: Field | None
    status_code: int | None
    response_field: Field
    serialize: Mapping[str, Any]


class FastPath:
    """ASGI middleware answering the requests of simple routes without FastAPI's machinery.

    It sits inside the app's other middleware (which still see every request) and in front of
    FastAPI's exception middleware and router.
    """

    def __init__(self, app: ASGIApp, fastapi_app: FastAPI, enabled: bool = True) -> None:
        self.app = app
        self._fastapi = fastapi_app
        self._enabled = enabled
        self._candidates: list[_Candidate] | None = None
        self._handlers: ExceptionHandlers | None = None

    def compiled_paths(self) -> list[tuple[str, frozenset[str]]]:
        """Return the path and methods of every route served here (for tests)."""
        return [
            (c.compiled.path, c.methods or frozenset())
            for c in self._routes()
            if c.compiled is not None
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            not self._enabled
            or scope["type"] != "http"
            or scope["method"] not in _METHODS
            or self._fastapi.dependency_overrides
        ):
            await self.app(scope, receive, send)
            return
        compiled, match = self._match(scope)
        if compiled is None:
            await self.app(scope, receive, send)
            return
        received: list[Message] = []
        try:
            await self._serve(compiled, match, scope, receive, send, received)
        except _Fallback:
            await self.app(scope, _replaying(received, receive), send)

    def _match(self, scope: Scope) -> tuple[_CompiledRoute | None, Any]:
        """Return the route FastAPI would choose, if it is compiled, with its path match."""
        path = scope["path"]
        method = scope["method"]
        for candidate in self._routes():
            if not path.startswith(candidate.prefix):
                continue
            match = candidate.path_regex.match(path)
            if match is not None and (candidate.methods is None or method in candidate.methods):
                return candidate.compiled, match
        return None, None

    async def _serve(
        self,
        compiled: _CompiledRoute,
        match: Any,
        scope: Scope,
        receive: Receive,
        send: Send,
        received: list[Message],
    ) -> None:
        spec = compiled.spec
        path_params = {
            key: compiled.param_convertors[key].convert(value)
            for key, value in match.groupdict().items()
        }
        if compiled.plain_path is not None:
            values = {name: path_params[alias] for name, alias in compiled.plain_path}
        else:
            values, errors = validate_params(spec.path_params, path_params)
            if errors:
                raise _Fallback
        if spec.query_params:
            query, errors = validate_params(spec.query_params, QueryParams(scope["query_string"]))
            if errors:
                raise _Fallback
            values.update(query)
        field = compiled.body_field
        if field is not None:
            body = await _json_body(scope, receive, received)
            # What request_body_to_args does for one body parameter that is not embedded.
            value, errors = field.validate(body, {}, loc=("body",))
            if errors:
                raise _Fallback
            values[field.name] = value
        # The route is chosen: from here on, the request is answered here.
        route = compiled.route
        scope["path_params"] = {**scope.get("path_params", {}), **path_params}
        scope["endpoint"] = compiled.endpoint
        scope["route"] = route
        request = Request(scope, _replaying(received, receive), send)
        try:
            response = await self._respond(compiled, request, values)
        except Exception as exc:
            response = await self._handle(request, exc)
        await response(scope, request.receive, send)

    async def _respond(
        self, compiled: _CompiledRoute, request: Request, values: dict[str, Any]
    ) -> Response:
        spec = compiled.spec
        solved: dict[Callable[..., Any], Any] = {}
        for dependency in compiled.dependencies:
            if dependency.call in solved:
                result = solved[dependency.call]
            else:
                args = {dependency.request_param: request} if dependency.request_param else {}
                result = solved[dependency.call] = await dependency.call(**args)
            if dependency.name is not None:
                values[dependency.name] = result
        if spec.request_param:
            values[spec.request_param] = request
        sub_response: Response | None = None
        if spec.response_param:
            sub_response = Response()
            del sub_response.headers["content-length"]
            sub_response.status_code = None  # type: ignore[assignment]
            values[spec.response_param] = sub_response
        raw = await compiled.call(**values)
        if isinstance(raw, Response):
            return raw
        field = compiled.response_field
        value, errors = field.validate(raw, {}, loc=("response",))
        if errors:
            raise ResponseValidationError(errors=errors, body=raw)
        content = field.serialize_json(value, **compiled.serialize)
        status = compiled.status_code
        if sub_response is not None and sub_response.status_code:
            status = sub_response.status_code
        kwargs: dict[str, Any] = {} if status is None else {"status_code": status}
        response = Response(content=content, media_type="application/json", **kwargs)
        if not body_allowed(response.status_code):
            response.body = b""
        if sub_response is not None:
            response.headers.raw.extend(sub_response.headers.raw)
        return response

    async def _handle(self, request: Request, exc: Exception) -> Response:
        """Answer ``exc`` with the handler the app's exception middleware would use."""
        if self._handlers is None:
            self._handlers = ExceptionHandlers(self._fastapi)
        return await self._handlers.answer(request, exc)

    def _routes(self) -> list[_Candidate]:
        if self._candidates is None:
            self._candidates = [
                _Candidate(
                    path_regex=route.path_regex,
                    methods=route.methods,
                    compiled=_compile(route),
                    prefix=_literal_prefix(route),
                )
                for route in effective_routes(self._fastapi)
            ]
        return self._candidates


def _literal_prefix(route: EffectiveRoute) -> str:
    """Return the route's path template up to its first parameter ("" when unknown)."""
    if route.path_format is None:
        return ""
    return route.path_format.partition("{")[0]


def _compile(entry: EffectiveRoute) -> _CompiledRoute | None:
    """Return what serving the route takes, or None when it needs FastAPI's machinery."""
    route = entry.spec
    spec = None if route is None else route.call
    if (
        route is None
        or spec is None
        or spec.call is None
        or not inspect.iscoroutinefunction(spec.call)
        or spec.others
        or not route.default_response_class
        or route.response_field is None
        or route.streams
        or route.max_body_size is not None
        or route.embeds_body
        or len(spec.body_params) > 1
        or spec.form_body
    ):
        return None
    dependencies = _dependencies(spec.dependencies)
    if dependencies is None:
        return None
    convertors = dict(route.param_convertors)
    return _CompiledRoute(
        route=route.route,
        path=route.path,
        endpoint=route.endpoint,
        param_convertors=convertors,
        spec=spec,
        call=spec.call,
        dependencies=dependencies,
        plain_path=_plain_path(spec.path_params, convertors),
        body_field=spec.body_params[0] if spec.body_params else None,
        status_code=route.status_code,
        response_field=route.response_field,
        serialize=route.serialize,
    )


def _plain_path(
    fields: Sequence[Field], convertors: Mapping[str, Convertor[Any]]
) -> tuple[tuple[str, str], ...] | None:
    """Return (parameter, path name) of each path parameter if every one is a plain ``str``
    (no constraint, no other name to validate under, a string in the path); else None."""
    plain = []
    for field in fields:
        alias = field.alias
        if not takes_plain_str(field) or not isinstance(convertors.get(alias), StringConvertor):
            return None
        plain.append((field.name, alias))
    return tuple(plain)


def _dependencies(subs: Sequence[CallSpec]) -> tuple[_Dependency, ...] | None:
    """Return the route's dependencies if each takes at most the Request and is a coroutine
    function without a yield; None otherwise."""
    found = []
    for sub in subs:
        if (
            sub.call is None
            or not inspect.iscoroutinefunction(sub.call)
            or sub.dependencies
            or sub.path_params
            or sub.query_params
            or sub.body_params
            or sub.response_param
            or sub.others
            or sub.limited
            or not sub.use_cache
        ):
            return None
        found.append(_Dependency(sub.name, sub.call, sub.request_param))
    return tuple(found)


async def _json_body(scope: Scope, receive: Receive, received: list[Message]) -> Any:
    """Read the whole body and decode it as JSON; raise _Fallback unless it is a non-empty
    ``application/json`` body that decodes (FastAPI answers every other case its own way)."""
    content_type = None
    for name, value in scope["headers"]:
        if name == b"content-type":
            content_type = value
            break
    if content_type is None or content_type.split(b";")[0].strip().lower() != b"application/json":
        raise _Fallback
    chunks = []
    while True:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request":
            raise _Fallback  # the client left: FastAPI reports it as it does
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    if not body:
        raise _Fallback
    try:
        return json.loads(body)
    except Exception:  # FastAPI answers undecodable bodies (422, or 400 for bad UTF-8)
        raise _Fallback from None


def _replaying(received: list[Message], receive: Receive) -> Receive:
    """A receive that first gives back the messages already read, then reads on."""
    if not received:
        return receive
    pending = list(received)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
