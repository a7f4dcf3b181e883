"""The internals of FastAPI and Starlette that dexlite relies on, behind one small interface.

The fast path (``app/fast_path.py``) answers requests as FastAPI would, so it reads what FastAPI
resolved for each route once ``include_router`` applied: the route's effective path pattern,
methods, dependencies, parameters and response settings. FastAPI keeps these in objects it does
not document (its included routers' route contexts, ``Dependant``, ``ModelField``,
``DefaultPlaceholder``) and validates parameters with functions it does not document either
(``fastapi.dependencies.utils``, ``fastapi.utils``). The error handlers (``app/errors.py``) rely
on two more undocumented behaviours: how an included router answers for a path it has under
another method, and the words of FastAPI's 400 for a body it cannot decode.

This is the one module of ``app`` that touches any of them. It describes each route once, in
the types below, and hands out the few FastAPI callables a request takes, as they are (no
wrapper, so the fast path costs what it did). Everything else in ``app`` uses public FastAPI
and Starlette API.

``tests/unit/test_fastapi_internals.py`` exercises every name here against the installed
FastAPI and Starlette, and says which one changed: upgrading past the pins in pyproject.toml
fails that test first.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from fastapi import FastAPI, params
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import request_params_to_args
from fastapi.routing import APIRoute
from fastapi.utils import is_body_allowed_for_status_code
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match

__all__ = [
    "UNPARSEABLE_BODY",
    "CallSpec",
    "EffectiveRoute",
    "ExceptionHandlers",
    "Field",
    "RouteSpec",
    "allowed_methods",
    "body_allowed",
    "effective_routes",
    "takes_plain_str",
    "validate_params",
]


class Field(Protocol):
    """A parameter, body or response field as FastAPI resolved it (its ``ModelField``)."""

    @property
    def name(self) -> str:
        """The parameter's name in the endpoint's signature."""
        ...

    @property
    def alias(self) -> str:
        """The name the request gives it under (the path's, the query's)."""
        ...

    def validate(
        self, value: Any, values: dict[str, Any] = ..., *, loc: tuple[int | str, ...] = ...
    ) -> tuple[Any, list[Any]]:
        """Return the validated value and no errors, or FastAPI's errors located at ``loc``."""
        ...

    def serialize_json(
        self,
        value: Any,
        *,
        include: Any = ...,
        exclude: Any = ...,
        by_alias: bool = ...,
        exclude_unset: bool = ...,
        exclude_defaults: bool = ...,
        exclude_none: bool = ...,
    ) -> bytes:
        """Return a validated value as the JSON bytes of FastAPI's response."""
        ...


#: Validate ``received`` (path parameters as converted, or the request's ``QueryParams``)
#: against ``fields`` as FastAPI does: ``(values by parameter name, errors)``.
validate_params = cast(
    Callable[[Sequence[Field], Mapping[str, Any] | QueryParams], tuple[dict[str, Any], list[Any]]],
    request_params_to_args,
)

#: Whether a response with this status code has a body (not 1xx, 204, 205 or 304), as FastAPI
#: decides before it serializes one.
body_allowed: Callable[[int | str | None], bool] = is_body_allowed_for_status_code

#: The detail of the HTTPException(400) FastAPI raises for a request body it cannot decode
#: (not UTF-8, or nested too deeply for the JSON decoder); an undecodable but well-encoded one
#: is a RequestValidationError instead.
UNPARSEABLE_BODY = "There was an error parsing the body"


@dataclass(frozen=True, slots=True)
class CallSpec:
    """What FastAPI resolved one callable of a route to take: its endpoint, or a dependency."""

    call: Callable[..., Any] | None
    #: The parameter a dependency's value goes to (None: a route's or router's dependency).
    name: str | None
    path_params: tuple[Field, ...]
    query_params: tuple[Field, ...]
    body_params: tuple[Field, ...]
    #: Whether a body parameter is a form field (``Form()``, ``File()``).
    form_body: bool
    #: The parameters that take the Request, and the Response whose status and headers the
    #: answer gets.
    request_param: str | None
    response_param: str | None
    #: What else it takes, by kind: "header", "cookie", "websocket", "http_connection",
    #: "background_tasks", "security_scopes".
    others: frozenset[str]
    dependencies: tuple[CallSpec, ...]
    #: Whether a second use in the same request reuses the first one's value.
    use_cache: bool
    #: Whether calls to it are limited (``Depends(max_concurrency=...)``).
    limited: bool


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """What FastAPI resolved for one of its routes where it was included: the prefixes,
    dependencies, response class and limits of every router it was included through applied."""

    #: The APIRoute as declared (FastAPI puts it in the scope as "route").
    route: APIRoute
    #: The declared path (before the prefixes of an ``include_router``).
    path: str
    endpoint: Callable[..., Any]
    param_convertors: Mapping[str, Convertor[Any]]
    call: CallSpec | None
    #: Whether its response class is FastAPI's default (JSON), not one the route or a router
    #: chose.
    default_response_class: bool
    response_field: Field | None
    status_code: int | None
    #: The ``response_model_*`` options, as :meth:`Field.serialize_json` takes them.
    serialize: Mapping[str, Any]
    #: Whether it streams (a generator endpoint: server-sent events or JSON lines).
    streams: bool
    max_body_size: int | None
    #: Whether FastAPI reads its body as an object with one member per body parameter.
    embeds_body: bool


@dataclass(frozen=True, slots=True)
class EffectiveRoute:
    """A route as FastAPI matches it (once included: with the prefixes of its routers)."""

    path_regex: re.Pattern[str]
    #: The effective path template ("/api/v1/flows/{flowId}"); None when it has none.
    path_format: str | None
    #: None: any method (a mount).
    methods: frozenset[str] | None
    #: None for a route that is not FastAPI's (a docs page, a mount).
    spec: RouteSpec | None


def effective_routes(app: FastAPI) -> Iterator[EffectiveRoute]:
    """Yield every route of ``app`` as FastAPI matches it, in FastAPI's order (an included
    router's routes where it was included); stop at the first route of a kind not known here,
    so that no route after it is taken ahead of it."""
    for route in app.router.routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if contexts is not None:
            for context in contexts():
                original = getattr(context, "original_route", None)
                if not isinstance(original, APIRoute):
                    return
                yield _described(context, original)
        elif isinstance(route, APIRoute):
            yield _described(route, route)
        elif getattr(route, "path_regex", None) is None:
            return  # a host route: what it matches is not a path
        else:
            methods = getattr(route, "methods", None)  # a mount has none: it takes all
            yield EffectiveRoute(
                path_regex=route.path_regex,  # type: ignore[attr-defined]
                path_format=getattr(route, "path_format", None),
                methods=None if methods is None else frozenset(methods),
                spec=None,
            )


def _described(context: Any, route: APIRoute) -> EffectiveRoute:
    """Describe ``route`` as FastAPI answers it: ``context`` is the route itself, or the
    context FastAPI made of it where it was included (which has the same attributes)."""
    dependant: Dependant | None = context.dependant
    spec = RouteSpec(
        route=route,
        path=route.path,
        endpoint=context.endpoint,
        param_convertors=dict(context.param_convertors),
        call=None if dependant is None else _call_spec(dependant),
        default_response_class=isinstance(context.response_class, DefaultPlaceholder),
        response_field=context.response_field,
        status_code=context.status_code,
        serialize={
            "include": context.response_model_include,
            "exclude": context.response_model_exclude,
            "by_alias": context.response_model_by_alias,
            "exclude_unset": context.response_model_exclude_unset,
            "exclude_defaults": context.response_model_exclude_defaults,
            "exclude_none": context.response_model_exclude_none,
        },
        streams=bool(context.is_sse_stream or context.is_json_stream),
        max_body_size=context.max_body_size,
        embeds_body=bool(context._embed_body_fields),
    )
    return EffectiveRoute(
        path_regex=context.path_regex,
        path_format=context.path_format,
        methods=None if context.methods is None else frozenset(context.methods),
        spec=spec,
    )


def _call_spec(dependant: Dependant) -> CallSpec:
    others = {
        kind
        for kind, present in (
            ("header", dependant.header_params),
            ("cookie", dependant.cookie_params),
            ("websocket", dependant.websocket_param_name),
            ("http_connection", dependant.http_connection_param_name),
            ("background_tasks", dependant.background_tasks_param_name),
            ("security_scopes", dependant.security_scopes_param_name),
        )
        if present
    }
    return CallSpec(
        call=dependant.call,
        name=dependant.name,
        path_params=tuple(dependant.path_params),
        query_params=tuple(dependant.query_params),
        body_params=tuple(dependant.body_params),
        form_body=any(isinstance(f.field_info, params.Form) for f in dependant.body_params),
        request_param=dependant.request_param_name,
        response_param=dependant.response_param_name,
        others=frozenset(others),
        dependencies=tuple(_call_spec(sub) for sub in dependant.dependencies),
        use_cache=dependant.use_cache,
        limited=dependant.concurrency is not None,
    )


def takes_plain_str(field: Field) -> bool:
    """True when FastAPI's validation of ``field`` leaves a ``str`` as it is: annotated
    ``str``, with no constraint and no other name to validate under."""
    info = cast(Any, field).field_info
    return info.annotation is str and not info.metadata and info.validation_alias is None


class ExceptionHandlers:
    """The exception handlers of an app, chosen as its exception middleware chooses them."""

    def __init__(self, app: FastAPI) -> None:
        # As Starlette builds its exception middleware: 500 and Exception go to the
        # server-error middleware outside, which answers and re-raises for the server log.
        handlers = {
            key: handler
            for key, handler in app.exception_handlers.items()
            if key not in (500, Exception)
        }
        self._by_class = {k: v for k, v in handlers.items() if not isinstance(k, int)}
        self._by_status = {k: v for k, v in handlers.items() if isinstance(k, int)}

    def handler_for(self, exc: Exception) -> Callable[..., Any] | None:
        """Return the handler the exception middleware would answer ``exc`` with, if any: an
        HTTPException's status code's, else that of the nearest class of ``exc``."""
        handler = None
        if isinstance(exc, StarletteHTTPException):
            handler = self._by_status.get(exc.status_code)
        if handler is None:
            handler = next(
                (self._by_class[c] for c in type(exc).__mro__ if c in self._by_class), None
            )
        return handler

    async def answer(self, request: Request, exc: Exception) -> Response:
        """Return the handler's answer to ``exc`` (a plain function runs in the thread pool,
        as Starlette runs it); raise ``exc`` when no handler takes it."""
        handler = self.handler_for(exc)
        if handler is None:
            raise exc
        if inspect.iscoroutinefunction(handler):
            response: Response = await handler(request, exc)
        else:
            response = await run_in_threadpool(handler, request, exc)
        return response


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Return every method some route of the app answers on the request's path (asked of the
    router itself, method by method, so included routers count too)."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes
        )
    ]
