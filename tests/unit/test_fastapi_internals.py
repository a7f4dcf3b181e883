"""The contract of ``app/fastapi_internals.py`` with the installed FastAPI and Starlette.

That module is the only one in ``app`` that reads FastAPI's undocumented objects and calls its
undocumented functions. Each test here builds small apps and checks that what the adapter
reads or decides is what FastAPI itself does with the same app: the route FastAPI dispatches
to, the dependencies it calls, the bytes it answers, the handler it picks. A FastAPI or
Starlette release that changes one of them fails here, and the message names what changed and
what relies on it, before the fast path's own tests fail less plainly.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path as FilePath
from typing import Annotated, Any

import fastapi
import httpx
import pytest
import starlette
from fastapi import (
    APIRouter,
    BackgroundTasks,
    Body,
    Cookie,
    Depends,
    FastAPI,
    Form,
    Header,
    HTTPException,
    Path,
    Query,
    Request,
    Response,
)
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.security import SecurityScopes
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, ConfigDict
from pydantic import Field as ModelField
from starlette.convertors import IntegerConvertor, StringConvertor
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import HTTPConnection
from starlette.routing import Host

from app.fastapi_internals import (
    UNPARSEABLE_BODY,
    EffectiveRoute,
    ExceptionHandlers,
    RouteSpec,
    allowed_methods,
    body_allowed,
    effective_routes,
    takes_plain_str,
    validate_params,
)

ROOT = FilePath(__file__).resolve().parents[2]
VERSIONS = f"FastAPI {fastapi.__version__}, Starlette {starlette.__version__}"


def changed(what: str, relies: str) -> str:
    """The failure message: what the installed FastAPI or Starlette does differently, and
    what in dexlite relies on it."""
    return f"{VERSIONS}: {what}. app/fastapi_internals.py relies on it for {relies}."


def bare_app(**options: Any) -> FastAPI:
    """An app without FastAPI's documentation routes (they would come first)."""
    return FastAPI(openapi_url=None, docs_url=None, redoc_url=None, **options)


def client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://test")


def described(app: FastAPI, path_format: str) -> RouteSpec:
    """The adapter's description of the route of ``app`` with this effective template."""
    found = [r for r in effective_routes(app) if r.path_format == path_format]
    assert found, changed(
        f"no route of the app is described with the template {path_format!r} "
        f"(found {[r.path_format for r in effective_routes(app)]})",
        "the routes the fast path knows (effective_route_contexts, path_format)",
    )
    spec = found[0].spec
    assert spec is not None, changed(
        f"the route {path_format!r} is not described as one of FastAPI's routes",
        "telling FastAPI's routes (APIRoute, original_route) from others",
    )
    return spec


def first_match(routes: list[EffectiveRoute], method: str, path: str) -> EffectiveRoute | None:
    for route in routes:
        if route.path_regex.match(path) and (route.methods is None or method in route.methods):
            return route
    return None


class Item(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    name: str
    the_count: int = ModelField(default=0, alias="theCount")
    note: str | None = None


# Routes and the order FastAPI matches them in


async def test_routes_come_in_the_order_fastapi_dispatches_them_with_every_prefix_applied() -> None:
    inner = APIRouter(prefix="/items")

    @inner.get("/special")
    async def special() -> str:
        return "special"

    @inner.get("/{item_id}")
    async def by_id(item_id: str) -> str:
        return "by_id"

    outer = APIRouter()
    outer.include_router(inner, prefix="/v1")
    app = bare_app()

    @app.get("/p/v1/items/direct")
    async def direct() -> str:
        return "direct"

    app.include_router(outer, prefix="/p")

    @app.get("/p/v1/items/late")  # after the included router: its /{item_id} comes first
    async def late() -> str:
        return "late"

    routes = list(effective_routes(app))
    assert [r.path_format for r in routes] == [
        "/p/v1/items/direct",
        "/p/v1/items/special",
        "/p/v1/items/{item_id}",
        "/p/v1/items/late",
    ], changed(
        "the routes of an included router are not listed where it was included, in its order, "
        "with every include prefix applied",
        "finding the route FastAPI would (effective_route_contexts, path_format)",
    )
    endpoints = {"direct": direct, "special": special, "by_id": by_id, "late": late}
    async with client(app) as http:
        for path in (
            "/p/v1/items/direct",
            "/p/v1/items/special",
            "/p/v1/items/7",
            "/p/v1/items/late",
        ):
            answered = (await http.get(path)).json()
            ours = first_match(routes, "GET", path)
            assert ours is not None and ours.spec is not None
            assert ours.spec.endpoint is endpoints[answered], changed(
                f"FastAPI answers GET {path} with {answered}, not the first route matching "
                f"it in effective_route_contexts order ({ours.spec.endpoint.__name__})",
                "serving the route FastAPI would serve (path_regex, route order)",
            )
    spec = described(app, "/p/v1/items/{item_id}")
    assert spec.route is inner.routes[1] and spec.path == "/items/{item_id}", changed(
        "an included route's context no longer leads to the APIRoute declared "
        "(original_route), or its path is not the one declared",
        "the route put in the scope, and the fast path's list of the paths it serves",
    )
    assert spec.param_convertors.keys() == {"item_id"}
    assert isinstance(spec.param_convertors["item_id"], StringConvertor)


async def test_routes_that_are_not_fastapis_are_matched_but_not_described() -> None:
    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse("mounted")(scope, receive, send)

    async def plain(request: Request) -> PlainTextResponse:
        return PlainTextResponse("plain")

    app = bare_app()
    app.mount("/static", app=asgi)
    app.add_route("/plain", plain, methods=["GET"])

    @app.get("/api")
    async def api() -> str:
        return "api"

    mount, route, served = list(effective_routes(app))
    assert mount.spec is None and mount.methods is None, changed(
        "a mount is described as a FastAPI route or with methods", "passing mounts to FastAPI"
    )
    assert mount.path_regex.match("/static/a.css")
    assert route.spec is None and route.methods == {"GET", "HEAD"}
    assert route.path_regex.match("/plain") and route.path_format == "/plain"
    assert served.spec is not None and served.spec.endpoint is api


def test_the_routes_stop_at_a_host_route_or_a_plain_route_inside_an_included_router() -> None:
    async def plain(request: Request) -> PlainTextResponse:
        return PlainTextResponse("plain")

    router = APIRouter()

    @router.get("/before")
    async def before() -> str:
        return "before"

    router.add_route("/plain", plain)

    @router.get("/after")
    async def after() -> str:
        return "after"

    app = bare_app()
    app.include_router(router)
    assert [r.path_format for r in effective_routes(app)] == ["/before"], changed(
        "a plain Starlette route inside an included router is not where the routes stop",
        "never serving a route ahead of one FastAPI would match first",
    )

    hosted = bare_app()
    hosted.router.routes.append(Host("api.example", app=FastAPI()))

    @hosted.get("/after")
    async def after_host() -> str:
        return "after"

    assert list(effective_routes(hosted)) == []


# What an endpoint and its dependencies take


async def test_dependencies_are_those_fastapi_calls_from_the_app_and_each_router() -> None:
    called: list[str] = []

    def recorder(name: str) -> Callable[..., Any]:
        async def dependency(request: Request) -> str:
            called.append(name)
            return name

        dependency.__name__ = name
        return dependency

    app_dep, router_dep, include_dep, route_dep, named = map(
        recorder, ["app_dep", "router_dep", "include_dep", "route_dep", "named"]
    )
    router = APIRouter(dependencies=[Depends(router_dep)])

    @router.get("/d", dependencies=[Depends(route_dep)])
    async def endpoint(value: str = Depends(named)) -> str:
        return value

    app = bare_app(dependencies=[Depends(app_dep)])
    app.include_router(router, dependencies=[Depends(include_dep)])
    spec = described(app, "/d").call
    assert spec is not None
    async with client(app) as http:
        assert (await http.get("/d")).json() == "named"
    assert [d.call.__name__ for d in spec.dependencies if d.call is not None] == called, changed(
        f"FastAPI calls the dependencies in the order {called}, not the Dependant's",
        "calling a route's dependencies (Dependant.dependencies)",
    )
    assert [d.name for d in spec.dependencies] == [None, None, None, None, "value"]
    assert all(d.request_param == "request" for d in spec.dependencies)
    assert all(d.use_cache and not d.limited and not d.others for d in spec.dependencies)


def test_a_call_spec_names_each_parameter_an_endpoint_takes_by_kind() -> None:
    app = bare_app()

    @app.post("/e/{flowId}")
    async def endpoint(
        flowId: str,
        item: Item,
        request: Request,
        response: Response,
        page: int = 1,
    ) -> str:
        return ""

    spec = described(app, "/e/{flowId}").call
    assert spec is not None and spec.call is endpoint
    assert [f.name for f in spec.path_params] == ["flowId"]
    assert [f.name for f in spec.query_params] == ["page"]
    assert [f.name for f in spec.body_params] == ["item"] and not spec.form_body
    assert (spec.request_param, spec.response_param) == ("request", "response"), changed(
        "the Request and Response parameters are not named where they were",
        "passing the Request and the sub-response (request_param_name, response_param_name)",
    )
    assert spec.others == frozenset() and spec.dependencies == ()


@pytest.mark.parametrize(
    ("kind", "parameter"),
    [
        ("header", Annotated[str, Header()]),
        ("cookie", Annotated[str, Cookie()]),
        ("background_tasks", BackgroundTasks),
        ("security_scopes", SecurityScopes),
        ("http_connection", HTTPConnection),
    ],
)
def test_what_the_fast_path_does_not_pass_is_named_in_others(kind: str, parameter: Any) -> None:
    async def endpoint(value: Any) -> str:
        return ""

    endpoint.__annotations__["value"] = parameter
    app = bare_app()
    app.get("/o")(endpoint)
    spec = described(app, "/o").call
    assert spec is not None
    assert spec.others == {kind}, changed(
        f"a {kind} parameter is not found where it was on the Dependant ({spec.others})",
        "refusing routes whose parameters the fast path does not pass",
    )


def test_a_dependency_used_afresh_or_limited_says_so() -> None:
    async def dependency() -> None:
        return None

    app = bare_app()

    # FastAPI reads use_cache of a parameter's dependency only (not of a route's list).
    @app.get("/fresh")
    async def fresh(value: None = Depends(dependency, use_cache=False)) -> str:
        return ""

    @app.get("/limited", dependencies=[Depends(dependency, max_concurrency=2)])
    async def limited() -> str:
        return ""

    fresh_spec, limited_spec = described(app, "/fresh").call, described(app, "/limited").call
    assert fresh_spec is not None and limited_spec is not None
    assert not fresh_spec.dependencies[0].use_cache, changed(
        "Depends(use_cache=False) is not Dependant.use_cache False", "reusing a dependency's value"
    )
    assert limited_spec.dependencies[0].limited, changed(
        "Depends(max_concurrency=...) is not a Dependant.concurrency",
        "refusing dependencies FastAPI limits",
    )


def test_a_form_body_is_told_from_a_json_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import fastapi.dependencies.utils

    # A form needs python-multipart, which dexlite does not install: only the route is built.
    monkeypatch.setattr(fastapi.dependencies.utils, "ensure_multipart_is_installed", lambda: None)
    app = bare_app()

    @app.post("/form")
    async def form(name: Annotated[str, Form()]) -> str:
        return name

    spec = described(app, "/form").call
    assert spec is not None and spec.form_body, changed(
        "a Form() parameter's field_info is not a fastapi.params.Form",
        "leaving form bodies to FastAPI",
    )


# How a route answers


async def test_the_response_class_is_the_default_only_where_no_route_or_router_chose_one() -> None:
    router_chose = APIRouter(default_response_class=PlainTextResponse)
    included, include_chose = APIRouter(), APIRouter()

    @router_chose.get("/router-chose")
    async def by_router() -> str:
        return "text"

    @included.get("/included")
    async def by_default() -> str:
        return "json"

    @include_chose.get("/include-chose")
    async def by_include() -> str:
        return "json"

    app = bare_app()

    @app.get("/default")
    async def default() -> str:
        return "json"

    @app.get("/route-chose", response_class=HTMLResponse)
    async def route_chose() -> str:
        return "<p>html</p>"

    app.include_router(router_chose)
    app.include_router(included)
    app.include_router(include_chose, default_response_class=JSONResponse)
    expected = {
        "/default": True,
        "/included": True,
        "/route-chose": False,
        "/router-chose": False,
        # A chosen class may answer JSON too, but not as FastAPI's default does.
        "/include-chose": False,
    }
    found = {path: described(app, path).default_response_class for path in expected}
    assert found == expected, changed(
        f"the effective response_class is a DefaultPlaceholder elsewhere than it was ({found})",
        "leaving routes with a chosen response class to FastAPI",
    )
    async with client(app) as http:
        for path in ("/default", "/included"):
            answered = (await http.get(path)).headers["content-type"]
            assert answered == "application/json", changed(
                f"GET {path}, with the default response class, is answered as {answered}",
                "answering the fast path's routes as JSON",
            )


async def test_the_response_field_and_options_serialize_as_fastapi_answers() -> None:
    app = bare_app()
    stored = {"name": "a", "theCount": 2, "note": None}

    @app.get("/item", response_model=Item, response_model_exclude_none=True, status_code=201)
    async def item() -> Any:
        return stored

    @app.get("/untyped", response_model=None)
    async def untyped() -> dict[str, str]:
        return {}

    spec = described(app, "/item")
    field = spec.response_field
    assert field is not None and described(app, "/untyped").response_field is None
    assert spec.status_code == 201
    assert spec.serialize["exclude_none"] is True and spec.serialize["by_alias"] is True
    value, errors = field.validate(stored, {}, loc=("response",))
    assert errors == []
    async with client(app) as http:
        answered = await http.get("/item")
    assert answered.status_code == 201
    assert field.serialize_json(value, **spec.serialize) == answered.content, changed(
        "the response field's serialize_json with the route's response_model_* options is not "
        "the body FastAPI answers",
        "serializing the fast path's answers (ModelField.serialize_json)",
    )
    _, errors = field.validate({"name": 7}, {}, loc=("response",))
    assert errors and tuple(errors[0]["loc"][:1]) == ("response",), changed(
        "ModelField.validate does not return the errors of an invalid value",
        "raising ResponseValidationError as FastAPI does",
    )


def test_streaming_routes_are_told_apart() -> None:
    app = bare_app()

    @app.get("/lines")
    async def lines() -> AsyncIterator[Item]:
        yield Item(name="a")

    @app.get("/events", response_class=EventSourceResponse)
    async def events() -> AsyncIterator[ServerSentEvent]:
        yield ServerSentEvent(data="a")

    @app.get("/once")
    async def once() -> Item:
        return Item(name="a")

    streams = {path: described(app, path).streams for path in ("/lines", "/events", "/once")}
    assert streams == {"/lines": True, "/events": True, "/once": False}, changed(
        f"JSON lines and server-sent events routes are not is_json_stream / is_sse_stream "
        f"({streams})",
        "leaving streaming routes to FastAPI",
    )


def test_a_body_size_limit_of_the_route_or_of_a_router_is_read() -> None:
    limited = APIRouter()

    @limited.post("/by-router")
    async def by_router(item: Item) -> str:
        return ""

    app = bare_app()

    @app.post("/by-route", max_body_size=10)
    async def by_route(item: Item) -> str:
        return ""

    @app.post("/unlimited")
    async def unlimited(item: Item) -> str:
        return ""

    app.include_router(limited, max_body_size=20)
    sizes = {p: described(app, p).max_body_size for p in ("/by-route", "/by-router", "/unlimited")}
    assert sizes == {"/by-route": 10, "/by-router": 20, "/unlimited": None}, changed(
        f"the effective max_body_size is not where it was ({sizes})",
        "leaving routes with a body limit to FastAPI",
    )


async def test_an_embedded_body_is_told_from_a_lone_body_model() -> None:
    app = bare_app()

    @app.post("/lone")
    async def lone(item: Item) -> str:
        return item.name

    @app.post("/embedded")
    async def embedded(item: Annotated[Item, Body(embed=True)]) -> str:
        return item.name

    @app.post("/two")
    async def two(item: Item, other: Item) -> str:
        return item.name

    embeds = {p: described(app, p).embeds_body for p in ("/lone", "/embedded", "/two")}
    assert embeds == {"/lone": False, "/embedded": True, "/two": True}, changed(
        f"_embed_body_fields is not where it was ({embeds})",
        "validating a lone body model against the whole body",
    )
    async with client(app) as http:
        assert (await http.post("/lone", json={"name": "a"})).json() == "a"
        assert (await http.post("/embedded", json={"item": {"name": "b"}})).json() == "b"


def test_path_convertors_are_the_effective_routes() -> None:
    app = bare_app()

    @app.get("/c/{n:int}/{s}")
    async def convert(n: int, s: str) -> str:
        return s

    convertors = described(app, "/c/{n}/{s}").param_convertors
    assert isinstance(convertors["n"], IntegerConvertor)
    assert isinstance(convertors["s"], StringConvertor)


# What a request takes


async def test_parameters_validate_as_fastapi_validates_them() -> None:
    app = bare_app()

    @app.get("/v/{n}")
    async def endpoint(
        n: int,
        page: int = 1,
        tags: Annotated[list[str] | None, Query()] = None,
        flow_id: Annotated[str, Query(alias="flowId")] = "",
    ) -> dict[str, Any]:
        return {"n": n, "page": page, "tags": tags, "flow_id": flow_id}

    spec = described(app, "/v/{n}").call
    assert spec is not None
    values, errors = validate_params(
        spec.query_params, QueryParams(b"page=3&tags=a&tags=b&flowId=f")
    )
    path, path_errors = validate_params(spec.path_params, {"n": 5})
    assert errors == [] == path_errors
    async with client(app) as http:
        answered = (await http.get("/v/5", params="page=3&tags=a&tags=b&flowId=f")).json()
        refused = (await http.get("/v/5", params="page=x")).json()
    assert {**path, **values} == answered, changed(
        "request_params_to_args does not give the values FastAPI passes the endpoint",
        "validating path and query parameters (fastapi.dependencies.utils)",
    )
    _, errors = validate_params(spec.query_params, QueryParams(b"page=x"))
    assert [list(e["loc"]) for e in errors] == [e["loc"] for e in refused["detail"]], changed(
        "request_params_to_args does not report the errors FastAPI answers 422 with",
        "handing invalid parameters to FastAPI",
    )


async def test_a_body_field_validates_as_fastapi_validates_a_lone_body() -> None:
    app = bare_app()

    @app.post("/b")
    async def endpoint(item: Item) -> Item:
        return item

    spec = described(app, "/b").call
    assert spec is not None
    (field,) = spec.body_params
    value, errors = field.validate({"name": "a", "theCount": 3}, {}, loc=("body",))
    assert errors == [] and value == Item(name="a", the_count=3)
    _, errors = field.validate({"name": "a", "bogus": 1}, {}, loc=("body",))
    async with client(app) as http:
        refused = (await http.post("/b", json={"name": "a", "bogus": 1})).json()
    assert [list(e["loc"]) for e in errors] == [e["loc"] for e in refused["detail"]], changed(
        "a body field's validate does not refuse what FastAPI refuses, where it does",
        "validating a lone body model (ModelField.validate)",
    )


@pytest.mark.parametrize(
    ("annotation", "plain"),
    [
        (str, True),
        (Annotated[str, Path()], True),
        (Annotated[str, Path(min_length=2)], False),
        (Annotated[str, Path(pattern="^a")], False),
        (int, False),
    ],
)
def test_a_plain_str_path_parameter_is_one_validation_leaves_as_it_is(
    annotation: Any, plain: bool
) -> None:
    async def endpoint(x: Any) -> str:
        return ""

    endpoint.__annotations__["x"] = annotation
    app = bare_app()
    app.get("/s/{x}")(endpoint)
    spec = described(app, "/s/{x}").call
    assert spec is not None
    (field,) = spec.path_params
    samples = ["", "a", "b", "0", "ü"]
    unchanged = all(field.validate(s, {}, loc=("path", "x")) == (s, []) for s in samples)
    assert takes_plain_str(field) is plain
    assert not plain or unchanged, changed(
        f"FastAPI's validation changes or refuses a string of a path parameter typed "
        f"{annotation} that the adapter takes as it is",
        "taking plain str path parameters unvalidated (field_info)",
    )


async def test_a_body_is_allowed_for_each_status_fastapi_answers_with_one() -> None:
    app = bare_app()

    @app.get("/status/{code}")
    async def endpoint(code: int, response: Response) -> dict[str, int]:
        response.status_code = code
        return {"code": code}

    async with client(app) as http:
        for code in (200, 201, 204, 205, 304, 404):
            answered = await http.get(f"/status/{code}")
            assert answered.status_code == code
            assert body_allowed(code) == bool(answered.content), changed(
                f"FastAPI answers {code} {'with' if answered.content else 'without'} a body",
                "answering the fast path's routes (is_body_allowed_for_status_code)",
            )
    assert not body_allowed(100) and body_allowed(None)


# Errors


class Base(Exception):
    pass


class Derived(Base):
    pass


class Further(Derived):
    pass


async def test_exception_handlers_are_chosen_as_the_exception_middleware_chooses_them() -> None:
    threads: list[int] = []

    def answering(name: str) -> Callable[..., Any]:
        async def handler(request: Request, exc: Exception) -> PlainTextResponse:
            return PlainTextResponse(name, status_code=418)

        handler.__name__ = name
        return handler

    def sync_handler(request: Request, exc: Exception) -> PlainTextResponse:
        threads.append(threading.get_ident())
        return PlainTextResponse("sync_handler", status_code=418)

    handlers = {
        404: answering("by_404"),
        StarletteHTTPException: answering("by_http_class"),
        Base: answering("by_base"),
        Derived: answering("by_derived"),
        KeyError: sync_handler,
        500: answering("by_500"),
        Exception: answering("by_exception"),
    }
    raised: dict[str, Exception] = {
        "404": HTTPException(404),
        "409": HTTPException(409),
        "base": Base(),
        "derived": Derived(),
        "further": Further(),
        "key": KeyError("k"),
        "runtime": RuntimeError("boom"),
    }
    app = bare_app(exception_handlers=handlers)

    @app.get("/raise/{name}")
    async def raising(name: str) -> str:
        raise raised[name]

    chosen = ExceptionHandlers(app)
    async with client(app) as http:
        for name, exc in raised.items():
            answered = (await http.get(f"/raise/{name}")).text
            handler = chosen.handler_for(exc)
            ours = "the server-error middleware" if handler is None else handler.__name__
            fastapis = "the server-error middleware" if answered == "by_exception" else answered
            assert ours == fastapis, changed(
                f"FastAPI answers {exc!r} with {fastapis}, not {ours}",
                "answering the fast path's exceptions (Starlette's ExceptionMiddleware lookup)",
            )
        request = Request({"type": "http", "method": "GET", "path": "/", "headers": []})
        answer = await chosen.answer(request, KeyError("k"))
        assert answer.body == b"sync_handler"
        assert threads[-1] != threading.get_ident(), changed(
            "a plain-function exception handler does not run in the thread pool",
            "answering exceptions with plain-function handlers",
        )
        with pytest.raises(RuntimeError):
            await chosen.answer(request, RuntimeError("left to the server-error middleware"))


async def test_the_allowed_methods_are_every_method_any_included_router_answers_on_a_path() -> None:
    reader, writer = APIRouter(), APIRouter()

    @reader.get("/things")
    async def read() -> str:
        return ""

    @writer.post("/things")
    async def write() -> str:
        return ""

    app = bare_app()
    app.include_router(reader)
    app.include_router(writer)

    @app.exception_handler(405)
    async def not_allowed(request: Request, exc: Exception) -> PlainTextResponse:
        return PlainTextResponse(", ".join(allowed_methods(request)), status_code=405)

    async with client(app) as http:
        answered = await http.delete("/things")
    # (An APIRoute for GET does not answer HEAD.)
    assert (answered.status_code, answered.text) == (405, "GET, POST"), changed(
        f"an included router's matches() does not answer a full match for each method it "
        f"has on a path (got {answered.text!r})",
        "the Allow header of a 405 (app/errors.py)",
    )


async def test_an_undecodable_body_is_fastapis_400_with_the_detail_errors_py_knows() -> None:
    app = bare_app()

    @app.post("/b")
    async def endpoint(item: Item) -> str:
        return item.name

    @app.exception_handler(StarletteHTTPException)
    async def detail(request: Request, exc: StarletteHTTPException) -> PlainTextResponse:
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code)

    async with client(app) as http:
        answered = await http.post(
            "/b", content=b'{"name": "\xff"}', headers={"content-type": "application/json"}
        )
    assert (answered.status_code, answered.text) == (400, UNPARSEABLE_BODY), changed(
        f"a body that is not UTF-8 is answered {answered.status_code} {answered.text!r}",
        "answering it as the 422 json_invalid problem (app/errors.py)",
    )


# The one module


#: Modules of FastAPI and Starlette that are not public API, and names of FastAPI's route and
#: dependency internals.
PRIVATE_MODULES = (
    "fastapi.dependencies",
    "fastapi.datastructures",
    "fastapi.utils",
    "fastapi._compat",
    "fastapi.params",
    "starlette.concurrency",
    "starlette.routing",
    "starlette._",
)
PRIVATE_ATTRIBUTES = {
    "effective_route_contexts",
    "original_route",
    "_embed_body_fields",
    "is_sse_stream",
    "is_json_stream",
    "exception_handlers",
    "field_info",
}
#: fastapi.routing is public for these names only.
PUBLIC_ROUTING = {"APIRoute", "APIRouter"}


def test_only_the_adapter_reaches_fastapi_and_starlette_internals() -> None:
    adapter = ROOT / "app" / "fastapi_internals.py"
    found = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        if path == adapter:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            module = None
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if module == "fastapi.routing" and {a.name for a in node.names} - PUBLIC_ROUTING:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {module}")
            elif isinstance(node, ast.Import):
                module = node.names[0].name
            if module and module.startswith(PRIVATE_MODULES):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {module}")
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert found == [], f"FastAPI or Starlette internals outside app/fastapi_internals.py: {found}"
