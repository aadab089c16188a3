"""Automatic model-call tracing for ``httpx`` and ``httpx2`` clients.

Every request that a matcher recognises as a model call (OpenAI-compatible, Anthropic
and Ollama routes by default) becomes a ``chainlat.inference`` span, from the moment the
transport gets the request to the last byte of the answer, with the GenAI attributes of
the request and the response and a latency breakdown (``chainlat.latency.*``: queue,
connect, send, wait, receive; server and network; time to first token, generation and
time per output token). See ``docs/httpx.md`` for the definitions.

Example::

    import chainlat, openai
    chainlat.instrument_httpx()            # every client created from now on
    client = openai.OpenAI()               # its default httpx2 client is traced

Or one client, or a transport of your own::

    client = chainlat.instrument_httpx(httpx.Client())
    client = chainlat.instrument_httpx(openai.OpenAI())   # its inner httpx2 client
    client = httpx.Client(transport=TracingTransport(httpx.HTTPTransport()))

Works with both ``httpx`` and ``httpx2`` (the fork the current ``openai`` and ``anthropic``
SDKs use); neither is imported by ``import chainlat``.
"""

from __future__ import annotations

import functools
import importlib
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from opentelemetry import context as otel_context

from chainlat._core.errors import internal_errors
from chainlat.httpx._call import (
    DEFAULT_REQUEST_HEADERS,
    DEFAULT_RESPONSE_HEADERS,
    HTTPX_MODULES,
    ModelCall,
    Options,
    begin,
    detach,
    failed,
    module_of,
)
from chainlat.httpx._httpx_compat import held_client, set_transports, transports
from chainlat.httpx._routes import DEFAULT_ROUTES, Format, Matcher, RequestInfo, Route
from chainlat.httpx._streams import wrap_stream

if TYPE_CHECKING:
    import httpx
    import httpx2
    from opentelemetry.trace import TracerProvider

    class _SyncBase(httpx.BaseTransport, httpx2.BaseTransport):
        def handle_request(self, request: Any) -> Any: ...

    class _AsyncBase(httpx.AsyncBaseTransport, httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: Any) -> Any: ...

    AnyClient = httpx.Client | httpx.AsyncClient | httpx2.Client | httpx2.AsyncClient
else:
    _SyncBase = object
    _AsyncBase = object

__all__ = [
    "DEFAULT_ROUTES",
    "AsyncTracingTransport",
    "Format",
    "Matcher",
    "RequestInfo",
    "Route",
    "TracingTransport",
    "instrument_httpx",
    "uninstrument_httpx",
]

C = TypeVar("C", bound="AnyClient")


class _SDKClient(Protocol):
    """A model SDK's client that holds its httpx/httpx2 client as ``_client``: ``openai.OpenAI``,
    ``anthropic.Anthropic`` and their async, Azure and Bedrock twins."""

    @property
    def _client(self) -> Any: ...


S = TypeVar("S", bound=_SDKClient)

_MARK = "chainlat.traced"
"""Request extension set while a call is traced, so that nested transports trace it once."""


def _options(
    capture_content: bool,
    max_content_length: int,
    matchers: Sequence[Matcher],
    record_headers: Iterable[str],
    tracer_provider: TracerProvider | None,
) -> Options:
    if isinstance(max_content_length, bool) or not isinstance(max_content_length, int):
        raise TypeError(f"max_content_length: expected an int, got {max_content_length!r}")
    if max_content_length < 0:
        raise ValueError(f"max_content_length: expected >= 0, got {max_content_length}")
    extra = frozenset(name.lower() for name in record_headers)
    return Options(
        matchers=(*matchers, *DEFAULT_ROUTES),
        capture_content=capture_content,
        max_content_length=max_content_length,
        request_headers=DEFAULT_REQUEST_HEADERS | extra,
        response_headers=DEFAULT_RESPONSE_HEADERS | extra,
        tracer_provider=tracer_provider,
    )


def _is_pool(transport: object) -> bool:
    return module_of(transport, "HTTPTransport", "AsyncHTTPTransport") is not None


def _start(request: Any, options: Options, pooled: bool) -> ModelCall | None:
    if request.extensions.get(_MARK):
        return None  # an outer chainlat transport already traces this request
    try:
        return begin(request, options, pooled=pooled)
    except Exception:
        failed("starting a model-call span")
        return None


def _finish_response(call: ModelCall, response: Any, *, is_async: bool) -> None:
    call.on_response(response)
    if response.is_closed:
        # Read already (a body given as bytes is read when the response is made): the
        # stream will never be iterated nor closed again, so the call ends here.
        call.read_whole(response.content)
        call.finish(None)
        return
    wrapped = False
    try:
        module = module_of(response, "Response")
        if module is not None:
            response.stream = wrap_stream(module, response.stream, call, is_async=is_async)
            wrapped = True
    except Exception:
        failed("wrapping a response stream")
    if not wrapped:
        call.finish(None)


class _Settings:
    """What both transports take."""

    def __init__(
        self,
        transport: Any,
        *,
        capture_content: bool = False,
        max_content_length: int = 2048,
        matchers: Sequence[Matcher] = (),
        record_headers: Iterable[str] = (),
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.transport = transport
        """The wrapped transport."""
        self._options = _options(
            capture_content, max_content_length, matchers, record_headers, tracer_provider
        )
        self._pooled = _is_pool(transport)

    @classmethod
    def _wrapping(cls, transport: Any, options: Options) -> Any:
        self = cls.__new__(cls)
        self.transport = transport
        self._options = options
        self._pooled = _is_pool(transport)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.transport!r})"


class TracingTransport(_Settings, _SyncBase):
    """A transport that traces the model calls going through ``transport``.

    Example::

        client = httpx.Client(transport=TracingTransport(httpx.HTTPTransport()))
        openai.OpenAI(http_client=httpx2.Client(transport=TracingTransport(httpx2.HTTPTransport())))

    Args:
        transport: The transport to wrap, from ``httpx`` or ``httpx2``; httpcore's own
            (``HTTPTransport``) gives the full breakdown, any other the wait and receive parts.
        capture_content: Record prompts and completions (``gen_ai.input.messages``,
            ``gen_ai.output.messages``, ``gen_ai.system_instructions``).
        max_content_length: With ``capture_content``, keep at most this many characters
            of each text (``chainlat.content.truncated`` says when one was cut).
        matchers: Routes or functions that recognise model calls, tried before the
            built-in `DEFAULT_ROUTES`.
        record_headers: Header names to record as ``http.{request,response}.header.*`` on
            top of a short allow-list; credentials (``Authorization``, ``api-key``,
            ``x-api-key``, cookies, ...) are never recorded, even if named here.
        tracer_provider: Where the spans go; the global provider when None.
    """

    def handle_request(self, request: Any) -> Any:
        call = _start(request, self._options, self._pooled)
        if call is None:
            return self.transport.handle_request(request)
        extensions = request.extensions
        previous = extensions.get("trace")
        extensions["trace"] = call.trace_sync(previous)
        extensions[_MARK] = True
        token = _attach(call)
        try:
            response = self.transport.handle_request(request)
        except BaseException as exc:
            call.finish(exc)
            raise
        finally:
            detach(token)
            _restore(extensions, previous)
        _finish_response(call, response, is_async=False)
        return response

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> TracingTransport:
        self.transport.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self.transport.__exit__(exc_type, exc_value, traceback)


class AsyncTracingTransport(_Settings, _AsyncBase):
    """The async twin of `TracingTransport`, for ``AsyncClient``.

    Example::

        client = httpx.AsyncClient(transport=AsyncTracingTransport(httpx.AsyncHTTPTransport()))
        anthropic.AsyncAnthropic(http_client=httpx2.AsyncClient(
            transport=AsyncTracingTransport(httpx2.AsyncHTTPTransport())))

    Takes the same arguments as `TracingTransport`.
    """

    async def handle_async_request(self, request: Any) -> Any:
        call = _start(request, self._options, self._pooled)
        if call is None:
            return await self.transport.handle_async_request(request)
        extensions = request.extensions
        previous = extensions.get("trace")
        extensions["trace"] = call.trace_async(previous)
        extensions[_MARK] = True
        token = _attach(call)
        try:
            response = await self.transport.handle_async_request(request)
        except BaseException as exc:
            call.finish(exc)
            raise
        finally:
            detach(token)
            _restore(extensions, previous)
        _finish_response(call, response, is_async=True)
        return response

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self) -> AsyncTracingTransport:
        await self.transport.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.transport.__aexit__(exc_type, exc_value, traceback)


def _attach(call: ModelCall) -> object:
    # Current only during the inner transport call, so that an HTTP-level
    # instrumentation below nests its span under the model call.
    return otel_context.attach(call.context)


def _restore(extensions: dict[str, Any], previous: object) -> None:
    extensions.pop(_MARK, None)
    if previous is None:
        extensions.pop("trace", None)
    else:
        extensions["trace"] = previous


# --- instrumenting clients --------------------------------------------------------------------
_lock = threading.RLock()
_clients: weakref.WeakKeyDictionary[Any, tuple[Any, dict[Any, Any]]] = weakref.WeakKeyDictionary()
"""Each instrumented client -> its transport and mounts as they were."""
_patched: dict[type[Any], Callable[..., None]] = {}
"""Each client class whose ``__init__`` chainlat replaced -> the original."""
_global_options: Options | None = None
"""The settings for clients created from now on; None when not instrumenting globally."""


def _wrap(transport: Any, options: Options, is_async: bool) -> Any:
    if transport is None or isinstance(transport, (TracingTransport, AsyncTracingTransport)):
        return transport
    cls = AsyncTracingTransport if is_async else TracingTransport
    return cls._wrapping(transport, options)


def _http_client(client: Any) -> Any:
    """The httpx/httpx2 client of ``client``: itself, or the one a model SDK's client holds."""
    if module_of(client, "Client", "AsyncClient") is not None:
        return client
    inner = held_client(client)
    if inner is not None and module_of(inner, "Client", "AsyncClient") is not None:
        return inner
    raise TypeError(
        "instrument_httpx: expected an httpx or httpx2 Client or AsyncClient, or a model "
        f"SDK's client holding one (openai.OpenAI, anthropic.Anthropic), got "
        f"{type(client).__module__}.{type(client).__qualname__}"
    )


def _instrument_client(client: Any, options: Options) -> None:
    client = _http_client(client)
    module = module_of(client, "Client", "AsyncClient")
    is_async = isinstance(client, module.AsyncClient)
    with _lock:
        _restore_client(client)
        transport, mounts = transports(client)
        _clients[client] = (transport, mounts)
        set_transports(
            client,
            _wrap(transport, options, is_async),
            {key: _wrap(value, options, is_async) for key, value in mounts.items()},
        )


def _restore_client(client: Any) -> None:
    if module_of(client, "Client", "AsyncClient") is None:
        held = held_client(client)
        client = client if held is None else held
    with _lock:
        saved = _clients.pop(client, None)
        if saved is None:
            return
        transport, mounts = saved
        current, current_mounts = transports(client)
        if not isinstance(current, (TracingTransport, AsyncTracingTransport)):
            transport = current  # replaced since it was wrapped: left as it is
        set_transports(
            client,
            transport,
            {
                key: mounts.get(key, value)
                if isinstance(value, (TracingTransport, AsyncTracingTransport))
                else value
                for key, value in current_mounts.items()
            },
        )


def _traced_init(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        options = _global_options
        if options is not None:
            with internal_errors("instrumenting a new httpx client"):
                _instrument_client(self, options)

    return __init__


@overload
def instrument_httpx(
    client: C,
    *,
    capture_content: bool = ...,
    max_content_length: int = ...,
    matchers: Sequence[Matcher] = ...,
    record_headers: Iterable[str] = ...,
    tracer_provider: TracerProvider | None = ...,
) -> C: ...
@overload
def instrument_httpx(
    client: S,
    *,
    capture_content: bool = ...,
    max_content_length: int = ...,
    matchers: Sequence[Matcher] = ...,
    record_headers: Iterable[str] = ...,
    tracer_provider: TracerProvider | None = ...,
) -> S: ...
@overload
def instrument_httpx(
    client: None = None,
    *,
    capture_content: bool = ...,
    max_content_length: int = ...,
    matchers: Sequence[Matcher] = ...,
    record_headers: Iterable[str] = ...,
    tracer_provider: TracerProvider | None = ...,
) -> None: ...
def instrument_httpx(
    client: C | S | None = None,
    *,
    capture_content: bool = False,
    max_content_length: int = 2048,
    matchers: Sequence[Matcher] = (),
    record_headers: Iterable[str] = (),
    tracer_provider: TracerProvider | None = None,
) -> C | S | None:
    """Trace the model calls of one client, or of every httpx/httpx2 client created from now on.

    With a client, its transports (and mounts) are wrapped in place and the client is
    returned. The client is an httpx/httpx2 ``Client`` or ``AsyncClient``, or a model
    SDK's client (``openai.OpenAI()``, ``anthropic.AsyncAnthropic()``, ...), whose inner
    httpx client (``client._client``) is the one instrumented. Without, ``Client`` and
    ``AsyncClient`` of ``httpx`` and ``httpx2`` (when installed) wrap their transports from
    now on, including the clients the ``openai`` and ``anthropic`` SDKs create for
    themselves; calling it again changes the settings for clients created afterwards.
    Clients created before are left alone.

    Example::

        chainlat.instrument_httpx()
        client = openai.OpenAI()
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)

    Or one client made already: ``client = chainlat.instrument_httpx(openai.OpenAI())``.

    Args:
        client: An ``httpx``/``httpx2`` ``Client`` or ``AsyncClient``, or a model SDK's
            client that holds one; None for all new ones.
        capture_content: Record prompts and completions (off by default: they may hold
            personal data).
        max_content_length: With ``capture_content``, keep at most this many characters
            of each text.
        matchers: Routes or functions that recognise model calls, tried before
            `DEFAULT_ROUTES`.
        record_headers: Extra header names to record; credentials never are.
        tracer_provider: Where the spans go; the global provider when None.

    Returns:
        ``client``, or None.

    Raises:
        TypeError: ``client`` is neither an httpx or httpx2 client nor holds one.
    """
    options = _options(
        capture_content, max_content_length, matchers, record_headers, tracer_provider
    )
    if client is not None:
        _instrument_client(client, options)
        return client
    global _global_options
    with _lock:
        _global_options = options
        for name in HTTPX_MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            for cls in (module.Client, module.AsyncClient):
                if cls not in _patched:
                    original = cls.__dict__["__init__"]
                    _patched[cls] = original
                    cls.__init__ = _traced_init(original)
    return None


def uninstrument_httpx(client: AnyClient | _SDKClient | None = None) -> None:
    """Undo `instrument_httpx`: for one client (or the SDK client holding it), or everywhere.

    Without a client, new clients are no longer instrumented, the client classes get
    their own ``__init__`` back, and every client chainlat instrumented gets its original
    transports back.

    Example::

        chainlat.uninstrument_httpx()
    """
    if client is not None:
        _restore_client(client)
        return
    global _global_options
    with _lock:
        _global_options = None
        for cls, original in list(_patched.items()):
            # Another library may have wrapped __init__ on top of ours; then ours stays,
            # inert, rather than undoing theirs.
            current = cls.__dict__.get("__init__")
            if getattr(current, "__wrapped__", None) is original:
                cls.__init__ = original
                del _patched[cls]
        for instrumented in list(_clients.keys()):
            _restore_client(instrumented)
