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
response fields) is read from FastAPI's included-router objects, which are not public API:
the version is pinned in pyproject.toml, and a test fails if the hot routes stop compiling.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, params
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import request_params_to_args
from fastapi.exceptions import ResponseValidationError
from fastapi.routing import APIRoute
from fastapi.utils import is_body_allowed_for_status_code
from starlette.concurrency import run_in_threadpool
from starlette.convertors import StringConvertor
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
    param_convertors: dict[str, Any]
    dependant: Dependant
    dependencies: tuple[_Dependency, ...]
    #: (parameter, path name) of each path parameter when all are plain ``str`` (taken as they
    #: are, which is all FastAPI's validation does to them); None otherwise.
    plain_path: tuple[tuple[str, str], ...] | None
    #: The body parameter's field (one, not embedded), or None.
    body_field: Any
    status_code: int | None
    response_field: Any
    serialize: dict[str, Any]


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
        self._handlers: tuple[dict[Any, Any], dict[int, Any]] | None = None

    def compiled_paths(self) -> list[tuple[str, frozenset[str]]]:
        """Return the path and methods of every route served here (for tests)."""
        return [
            (c.compiled.route.path, c.methods or frozenset())
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
        dependant = compiled.dependant
        path_params = {
            key: compiled.param_convertors[key].convert(value)
            for key, value in match.groupdict().items()
        }
        if compiled.plain_path is not None:
            values = {name: path_params[alias] for name, alias in compiled.plain_path}
        else:
            values, errors = request_params_to_args(dependant.path_params, path_params)
            if errors:
                raise _Fallback
        if dependant.query_params:
            query, errors = request_params_to_args(
                dependant.query_params, QueryParams(scope["query_string"])
            )
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
        scope["endpoint"] = route.endpoint
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
        dependant = compiled.dependant
        solved: dict[Callable[..., Any], Any] = {}
        for dependency in compiled.dependencies:
            if dependency.call in solved:
                result = solved[dependency.call]
            else:
                args = {dependency.request_param: request} if dependency.request_param else {}
                result = solved[dependency.call] = await dependency.call(**args)
            if dependency.name is not None:
                values[dependency.name] = result
        if dependant.request_param_name:
            values[dependant.request_param_name] = request
        sub_response: Response | None = None
        if dependant.response_param_name:
            sub_response = Response()
            del sub_response.headers["content-length"]
            sub_response.status_code = None  # type: ignore[assignment]
            values[dependant.response_param_name] = sub_response
        assert dependant.call is not None
        raw = await dependant.call(**values)
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
        if not is_body_allowed_for_status_code(response.status_code):
            response.body = b""
        if sub_response is not None:
            response.headers.raw.extend(sub_response.headers.raw)
        return response

    async def _handle(self, request: Request, exc: Exception) -> Response:
        """Answer ``exc`` with the handler the app's exception middleware would use."""
        by_class, by_status = self._exception_handlers()
        handler = None
        if isinstance(exc, StarletteHTTPException):
            handler = by_status.get(exc.status_code)
        if handler is None:
            handler = next((by_class[c] for c in type(exc).__mro__ if c in by_class), None)
        if handler is None:
            raise exc
        if inspect.iscoroutinefunction(handler):
            response: Response = await handler(request, exc)
        else:
            response = await run_in_threadpool(handler, request, exc)
        return response

    def _exception_handlers(self) -> tuple[dict[Any, Any], dict[int, Any]]:
        if self._handlers is None:
            # As Starlette builds its exception middleware: 500 and Exception go to the
            # server-error middleware outside, which answers and re-raises for the server log.
            handlers = {
                key: handler
                for key, handler in self._fastapi.exception_handlers.items()
                if key not in (500, Exception)
            }
            self._handlers = (
                {k: v for k, v in handlers.items() if not isinstance(k, int)},
                {k: v for k, v in handlers.items() if isinstance(k, int)},
            )
        return self._handlers

    def _routes(self) -> list[_Candidate]:
        if self._candidates is None:
            self._candidates = [
                _Candidate(
                    path_regex=context.path_regex,
                    methods=None if context.methods is None else frozenset(context.methods),
                    compiled=_compile(context),
                    prefix=_literal_prefix(context),
                )
                for context in _effective_routes(self._fastapi)
            ]
        return self._candidates


def _effective_routes(app: FastAPI) -> Iterator[Any]:
    """Yield every route as FastAPI matches it, in its order, with what its inclusion added
    (the app's dependencies, above all); stop at the first route of a kind not known here, so
    that no route after it is served ahead of it."""
    for route in app.router.routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if contexts is not None:
            for context in contexts():
                if not isinstance(getattr(context, "original_route", None), APIRoute):
                    return
                yield context
        elif isinstance(route, APIRoute):
            yield route
        elif getattr(route, "path_regex", None) is None:
            return  # a host route: what it matches is not a path
        else:
            yield _Plain(route)


@dataclass(frozen=True)
class _Plain:
    """A route that is not an APIRoute (the docs pages, a mount): matched, never served here."""

    route: Any

    @property
    def path_regex(self) -> Any:
        return self.route.path_regex

    @property
    def methods(self) -> Any:
        # A mount takes every method of every path under it.
        return getattr(self.route, "methods", None)

    @property
    def path_format(self) -> Any:
        return getattr(self.route, "path_format", None)


def _literal_prefix(context: Any) -> str:
    """Return the route's path template up to its first parameter ("" when unknown)."""
    template = getattr(context, "path_format", None)
    if not isinstance(template, str):
        return ""
    return template.partition("{")[0]


def _compile(context: Any) -> _CompiledRoute | None:
    """Return what serving the route takes, or None when it needs FastAPI's machinery."""
    route = context if isinstance(context, APIRoute) else getattr(context, "original_route", None)
    if not isinstance(route, APIRoute):
        return None
    dependant: Dependant | None = context.dependant
    if (
        dependant is None
        or dependant.call is None
        or not inspect.iscoroutinefunction(dependant.call)
        or dependant.header_params
        or dependant.cookie_params
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
        or not isinstance(context.response_class, DefaultPlaceholder)
        or context.response_field is None
        or getattr(context, "is_sse_stream", False)
        or getattr(context, "is_json_stream", False)
        or getattr(context, "max_body_size", None) is not None
        or context._embed_body_fields
        or len(dependant.body_params) > 1
        or any(isinstance(f.field_info, params.Form) for f in dependant.body_params)
    ):
        return None
    dependencies = _dependencies(dependant.dependencies)
    if dependencies is None:
        return None
    convertors = dict(context.param_convertors)
    return _CompiledRoute(
        route=route,
        param_convertors=convertors,
        dependant=dependant,
        dependencies=dependencies,
        plain_path=_plain_path(dependant.path_params, convertors),
        body_field=dependant.body_params[0] if dependant.body_params else None,
        status_code=context.status_code,
        response_field=context.response_field,
        serialize={
            "include": context.response_model_include,
            "exclude": context.response_model_exclude,
            "by_alias": context.response_model_by_alias,
            "exclude_unset": context.response_model_exclude_unset,
            "exclude_defaults": context.response_model_exclude_defaults,
            "exclude_none": context.response_model_exclude_none,
        },
    )


def _plain_path(fields: Sequence[Any], convertors: dict[str, Any]) -> Any:
    """Return (parameter, path name) of each path parameter if every one is a plain ``str``
    (no constraint, no other name to validate under, a string in the path); else None."""
    plain = []
    for field in fields:
        info = field.field_info
        alias = field.alias
        if (
            info.annotation is not str
            or info.metadata
            or info.validation_alias is not None
            or not isinstance(convertors.get(alias), StringConvertor)
        ):
            return None
        plain.append((field.name, alias))
    return tuple(plain)


def _dependencies(subs: Sequence[Dependant]) -> tuple[_Dependency, ...] | None:
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
            or sub.header_params
            or sub.cookie_params
            or sub.body_params
            or sub.response_param_name
            or sub.background_tasks_param_name
            or sub.security_scopes_param_name
            or sub.websocket_param_name
            or sub.http_connection_param_name
            or sub.concurrency is not None
            or not sub.use_cache
        ):
            return None
        found.append(_Dependency(sub.name, sub.call, sub.request_param_name))
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
