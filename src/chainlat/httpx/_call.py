"""One traced model call over httpx: its span, from the request to the last byte of the answer.

`begin` decides whether a request is a model call and starts the ``chainlat.inference``
span (not made current: it outlives the transport call, and a stream may be read in
another thread or task). The transport then feeds the call httpcore's trace events and
the response; the response's byte stream is replaced by a thin wrapper that passes every
chunk on the moment it arrives and only looks at it afterwards, while the next one is on
its way. The span ends at the end of the body, when the stream is closed, or on error.

Works the same for ``httpx`` and ``httpx2`` objects: nothing here imports either; the
stream wrappers (:mod:`chainlat.httpx._streams`) subclass the byte-stream classes of the
module the response came from.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from itertools import compress, repeat
from operator import itemgetter
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from chainlat._core import attributes as attr
from chainlat._core.errors import internal_errors
from chainlat._core.redact import is_secret_header, scrub
from chainlat._runtime.interface import (
    InferenceHandle,
    finish_step,
    record_output_chunks,
    start_detached_step,
    step_clock,
)
from chainlat._runtime.span_attributes import set_attributes
from chainlat.httpx._decoders import (
    STREAM_EVENTS_SKIPPED,
    NdjsonDecoder,
    SseDecoder,
    decompressor,
    identity,
)
from chainlat.httpx._httpx_compat import header_triples
from chainlat.httpx._propagation import inject
from chainlat.httpx._routes import (
    MAX_BODY_BYTES,
    Matcher,
    RequestInfo,
    Route,
    loads,
    match,
    provider_for,
    sniff_model,
)
from chainlat.httpx._timing import Timeline, breakdown, server_time_ms
from chainlat.httpx._wire import Reader, Truncator, WireFormat, request_model
from chainlat.httpx.providers import wire_format

HTTPX_MODULES: Final = ("httpx", "httpx2")

NEVER_RECORDED: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "ocp-apim-subscription-key",
    }
)
_NEVER_RECORDED_PARTS: Final = (
    "auth",
    "api-key",
    "apikey",
    "secret",
    "cookie",
    "password",
    "credential",
    "session",
    "subscription-key",
)

DEFAULT_REQUEST_HEADERS: Final = frozenset(
    {"x-stainless-retry-count", "openai-beta", "anthropic-version", "anthropic-beta"}
)
DEFAULT_RESPONSE_HEADERS: Final = frozenset(
    {
        "x-request-id",
        "request-id",
        "openai-processing-ms",
        "openai-version",
        "retry-after",
        "retry-after-ms",
        "x-ratelimit-limit-requests",
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
    }
)


def recordable(name: str) -> bool:
    """Whether a header may ever be recorded: never a credential, whatever the allow-list.

    Denied by name alone: the fixed list above, and any name the scrubber's rule calls a
    credential (``x-access-token``, ``x-amz-security-token``, ``x-goog-signature``, ...).
    """
    name = name.strip().lower()
    return (
        name not in NEVER_RECORDED
        and not any(p in name for p in _NEVER_RECORDED_PARTS)
        and not is_secret_header(name)
    )


@dataclass(frozen=True)
class Options:
    """Settings shared by every call through one transport."""

    matchers: tuple[Matcher, ...]
    capture_content: bool = False
    max_content_length: int = 2048
    request_headers: frozenset[str] = DEFAULT_REQUEST_HEADERS
    response_headers: frozenset[str] = DEFAULT_RESPONSE_HEADERS
    tracer_provider: trace.TracerProvider | None = None

    def __post_init__(self) -> None:
        # Credentials leave the allow-lists once here, not on every header of every call.
        for name in ("request_headers", "response_headers"):
            names = frozenset(h.lower() for h in getattr(self, name) if recordable(h))
            object.__setattr__(self, name, names)


_modules: dict[tuple[type[Any], tuple[str, ...]], Any] = {}
"""(type, class names) -> the module `module_of` found: asked once per response."""


def module_of(obj: object, *class_names: str) -> Any:
    """The loaded ``httpx`` or ``httpx2`` module of which ``obj`` is a ``class_names`` instance."""
    key = (type(obj), class_names)
    found = _modules.get(key)
    if found is not None:
        return found
    for name in HTTPX_MODULES:
        module = sys.modules.get(name)
        if module is not None and isinstance(obj, tuple(getattr(module, c) for c in class_names)):
            _modules[key] = module
            return module
    return None  # not cached: the module may be imported later


_TIMING_HEADERS: Final = frozenset(
    {
        "content-encoding",
        "content-type",
        "openai-processing-ms",
        "server-timing",
        "x-envoy-upstream-service-time",
    }
)
"""The response headers chainlat reads for itself (they are recorded only if allowed)."""


_timing_keys: dict[str, str] = {}
"""Each ``Server-Timing`` metric name seen -> its attribute key (built once, hashed once)."""
_MAX_TIMING_KEYS: Final = 256

_with_timing: dict[frozenset[str], frozenset[str]] = {}
"""An allow-list with `_TIMING_HEADERS` added: one entry per transport's list."""


def _text(value: bytes) -> str:
    # As httpx decodes header values: ASCII, else UTF-8, else Latin-1.
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.decode("latin-1")


def headers_named(headers: Any, names: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """The values of the headers in ``names`` (lower case) that ``headers`` holds.

    Reads the raw pairs and decodes only what is kept: ``Headers.multi_items()`` decodes
    every name and value, and works out their encoding again on each call.
    """
    wanted = _as_bytes.get(names)
    if wanted is None:
        wanted = _as_bytes[names] = frozenset(n.encode("latin-1") for n in names)
    # Read as httpx keeps them, rather than through ``raw``, which builds a list of pairs on
    # every call.
    triples = header_triples(headers)
    if triples is not None:
        lowered = list(map(_second, triples))
        values = map(_third, triples)
    else:
        raw = headers.raw
        lowered = list(map(bytes.lower, map(_first, raw)))
        values = map(_second, raw)
    # Matched and decoded in C: a header kept costs no bytecode of its own.
    if wanted.isdisjoint(lowered):
        return {}
    kept = list(compress(zip(lowered, values, strict=True), map(wanted.__contains__, lowered)))
    texts = list(map(_second, kept))
    if b"".join(texts).isascii():
        decoded = list(map(bytes.decode, texts))
    else:
        decoded = list(map(_text, texts))
    keys = list(map(bytes.decode, map(_first, kept), repeat("latin-1")))
    if len(set(keys)) == len(keys):
        return dict(zip(keys, zip(decoded), strict=True))
    found: dict[str, list[str]] = {}
    for key, text in zip(keys, decoded, strict=True):
        found.setdefault(key, []).append(text)
    return {key: tuple(texts) for key, texts in found.items()}


_first: Final = itemgetter(0)
_second: Final = itemgetter(1)
_third: Final = itemgetter(2)


_as_bytes: dict[frozenset[str], frozenset[bytes]] = {}
"""Header-name sets as bytes, for comparing raw names: one entry per transport's lists."""


def allowed_headers(headers: Any, allowed: frozenset[str], *, request: bool) -> dict[str, Any]:
    """``http.{request,response}.header.*`` for the allowed headers present, never a credential."""
    prefix = attr.HTTP_REQUEST_HEADER_PREFIX if request else attr.HTTP_RESPONSE_HEADER_PREFIX
    found = headers_named(headers, allowed)
    return {prefix + key: values for key, values in found.items() if recordable(key)}


def failed(what: str) -> None:
    """In an ``except`` block: log the exception once and swallow it (re-raise in tests).

    Hot paths use try/except and call this, rather than the ``internal_errors`` context
    manager, which costs a generator per use even when nothing fails.
    """
    with internal_errors(what):
        raise


def _trace_failed() -> None:
    failed("reading an httpcore trace event")


def _request_body(request: Any) -> bytes | None:
    try:
        content = request.content
    except Exception:  # RequestNotRead: a streamed body, which is not ours to consume
        return None
    return content if isinstance(content, bytes) else None


def _port(url: Any) -> int:
    port = url.port
    if isinstance(port, int):
        return port
    return 443 if url.scheme in ("https", "wss") else 80


def begin(request: Any, options: Options, *, pooled: bool) -> ModelCall | None:
    """Start tracing ``request`` if it is a model call; None leaves it alone.

    Args:
        request: An ``httpx`` or ``httpx2`` request.
        options: The transport's settings.
        pooled: The inner transport is httpcore's connection pool (see `Timeline`).
    """
    url = request.url
    host = str(url.host).lower()
    port = _port(url)
    info = RequestInfo(
        str(request.method),
        str(url.scheme),
        host,
        port,
        str(url.path),
        partial(_request_body, request),
    )
    route = match(options.matchers, info)
    if route is None:
        return None
    provider = provider_for(route, host)
    capture = Truncator(options.max_content_length) if options.capture_content else None
    wire = wire_format(route.format)
    body: Any
    if wire.read_form is not None:
        # A multipart form: its text fields, read without its files.
        raw, body = None, wire.read_form(request)
    else:
        raw = info.raw_body if info.too_large else None
        body = None if raw is not None else info.body
    model = request_model(body) if raw is None else sniff_model(raw)
    attributes: dict[str, Any] = {
        attr.GEN_AI_OPERATION_NAME: route.operation,
        attr.GEN_AI_PROVIDER_NAME: provider,
        attr.STEP_KIND: "inference",
        attr.SERVER_ADDRESS: host,
        attr.SERVER_PORT: port,
        attr.HTTP_REQUEST_METHOD: info.method,
    }
    if model is not None:
        attributes[attr.GEN_AI_REQUEST_MODEL] = model
    if wire.content_never_recorded:
        # The audio and the text to speak are never recorded, whatever ``capture`` says.
        attributes.update(wire.request(body or {}, None))
    elif raw is None:
        if isinstance(body, dict):
            attributes.update(wire.request(body, capture))
    else:
        attributes[attr.REQUEST_BODY_UNREAD] = True
        if capture is not None:
            capture.truncated = True  # the prompt was there, and none of it is kept
    attributes.update(allowed_headers(request.headers, options.request_headers, request=True))
    name = route.operation if model is None else attr.inference_span_name(route.operation, model)
    handle = start_detached_step(name, attributes, options.tracer_provider)
    span_context = handle.span.get_span_context()
    context = trace.set_span_in_context(handle.span)
    if span_context.is_valid:
        # The server joins the trace as a child of this span.
        inject(request.headers, span_context, context)
    if not handle.span.is_recording():
        return None
    return ModelCall(handle, route, wire, options, capture, context, pooled=pooled)


class ModelCall:
    """The state of one traced call; every method is safe to call from the transport."""

    def __init__(
        self,
        handle: InferenceHandle,
        route: Route,
        wire: WireFormat,
        options: Options,
        capture: Truncator | None,
        context: otel_context.Context,
        *,
        pooled: bool,
    ) -> None:
        self.handle = handle
        self.context = context
        """A context with this call's span current, for the inner transport."""
        self.pooled = pooled
        self.route = route
        self._options = options
        self._capture = capture
        # The handle's clock without its method call: read once per chunk of a stream.
        self.clock: Callable[[], int] = step_clock(handle)
        self.timeline = Timeline(handle.start_ns)
        capture_chars = options.max_content_length if capture else None
        self.reader: Reader = wire.reader(capture_chars)
        self._raw_output = wire.raw_output
        self._decode: Callable[[bytes], bytes] | None = None
        self._events: SseDecoder | NdjsonDecoder | None = None
        self._body: list[bytes] | None = None
        self._body_bytes = 0
        self._audio: Reader | None = None
        """Set while the body is audio bytes (a raw output): counted and timed, never kept."""
        self._pending: tuple[bytes, int] | None = None
        self._error_status: int | None = None
        self._server_ms: float | None = None
        self._found: dict[str, Any] = {}
        """Response attributes seen before the end, set with the others by `finish`."""
        self.ended = False

    # -- while the request goes out ----------------------------------------------------
    def trace_sync(self, previous: Any) -> Callable[[str, dict[str, Any]], None]:
        """The request ``trace`` extension for a sync transport (chains ``previous``)."""
        record = self.timeline.recorder(self.clock, _trace_failed)
        if previous is None:
            return record

        def on_event(event: str, info: dict[str, Any]) -> None:
            record(event, info)
            previous(event, info)

        return on_event

    def trace_async(self, previous: Any) -> Callable[[str, dict[str, Any]], Awaitable[None]]:
        """The request ``trace`` extension for an async transport (chains ``previous``)."""
        record = self.timeline.recorder(self.clock, _trace_failed)

        async def on_event(event: str, info: dict[str, Any]) -> None:
            record(event, info)
            if previous is not None:
                await previous(event, info)

        return on_event

    def on_response(self, response: Any) -> None:
        """The inner transport returned ``response`` (its headers are in)."""
        try:
            self._on_response(response)
        except Exception:
            failed("reading response headers")

    def _on_response(self, response: Any) -> None:
        self.timeline.on_headers(self.clock())
        # Set on the span with the rest at the end: the SDK validates and locks per call.
        found = self._found
        status = int(response.status_code)
        found[attr.HTTP_RESPONSE_STATUS_CODE] = status
        if status >= 400:
            self._error_status = status
        # One pass over the headers: a lookup by name scans them all each time.
        allowed = self._options.response_headers  # credentials are out already
        read = _with_timing.get(allowed)
        if read is None:
            read = _with_timing[allowed] = allowed | _TIMING_HEADERS
        seen = headers_named(response.headers, read)
        headers = dict(zip(seen, map(", ".join, seen.values()), strict=True))
        prefix = attr.HTTP_RESPONSE_HEADER_PREFIX
        for key in filter(allowed.__contains__, seen):
            found[prefix + key] = seen[key]
        self._server_ms, timing = server_time_ms(headers)
        for metric, ms in timing.items():
            timing_key = _timing_keys.get(metric)
            if timing_key is None:
                timing_key = f"{attr.SERVER_TIMING_PREFIX}{metric}_ms"
                if len(_timing_keys) < _MAX_TIMING_KEYS:  # a server's own names: bounded
                    _timing_keys[metric] = timing_key
            found[timing_key] = ms
        if status < 400:  # an error body has nothing to read
            self._expect_body(headers)

    def _expect_body(self, headers: dict[str, str]) -> None:
        decode = decompressor(headers.get("content-encoding", ""))
        if decode is None:
            return
        self._decode = decode
        content_type = headers.get("content-type", "").lower()
        if "text/event-stream" in content_type:
            self._events = SseDecoder()
        elif "ndjson" in content_type:
            self._events = NdjsonDecoder()
        elif self._raw_output and "json" not in content_type:
            self._audio = self.reader
        else:
            self._body = []

    # -- while the answer comes in -----------------------------------------------------------
    def arrived(self, chunk: bytes) -> None:
        """A chunk of the body arrived; it is read later, by `digest`, after it was passed on."""
        if self.ended or (self._events is None and self._body is None and self._audio is None):
            return
        if self._pending is not None:
            self.digest()
        self._pending = (chunk, self.clock())

    def read_whole(self, content: bytes) -> None:
        """The body, read and decoded before the transport returned it."""
        if self._decode is not None:
            self._decode = identity
            self._pending = (content, self.clock())
            self.digest()

    def digest(self) -> None:
        """Read the chunk that arrived last, at its arrival time."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            self._read(*pending)
        except Exception:
            failed("reading a response chunk")

    def _read(self, chunk: bytes, at_ns: int) -> None:
        decode = self._decode
        assert decode is not None
        data = chunk if decode is identity else decode(chunk)
        if self._events is not None:
            events = self._events.feed_raw(data)
            if not events:
                return
            read = self.reader.raw_event
            times = self.timeline.chunk_times
            for name, event in events:
                if read(name, event):
                    if not times:
                        self.handle.first_token(at_ns=at_ns)
                    times.append(at_ns)
        elif self._audio is not None:
            if data:
                # Each chunk of audio is output: the first is the time to first audio byte.
                times = self.timeline.chunk_times
                if not times:
                    self.handle.first_token(at_ns=at_ns)
                times.append(at_ns)
                self._audio.output_bytes(len(data))
        elif self._body is not None:
            self._body_bytes += len(data)
            if self._body_bytes > MAX_BODY_BYTES:
                self._body = None  # too large to parse; the span keeps its timing
            else:
                self._body.append(data)

    # -- the end -------------------------------------------------------------------------------
    def finish(self, exc: BaseException | None) -> None:
        """End the span now (idempotent): the body was read, the stream closed, or ``exc``."""
        if self.ended:
            return
        self.ended = True
        end_ns = self.clock()
        try:
            self.digest()
            self._set_response_attributes(end_ns)
        except Exception:
            failed("finishing a model call")
        finish_step(self.handle, exc if isinstance(exc, Exception) else None, end_ns=end_ns)
        if self._events is None and self._audio is None:
            return  # chunk metrics are for streams
        try:
            gaps = self.timeline.chunk_gaps_s()
            if gaps:
                record_output_chunks(self.handle, gaps)
        except Exception:
            failed("recording chunk metrics")

    def _set_response_attributes(self, end_ns: int) -> None:
        span = self.handle.span
        reader = self.reader
        if self._body:
            data = loads(self._body[0] if len(self._body) == 1 else b"".join(self._body))
            if data is not None:  # not JSON (JSON's null says nothing either)
                reader.body(data)
        facts = reader.facts
        # One set_attributes call: the SDK validates and locks per call.
        found = self._found
        found.update(facts.attributes(self._capture))
        if self._capture is not None and self._capture.truncated:
            found[attr.CONTENT_TRUNCATED] = True
        if self._events is not None or self._audio is not None:
            found[attr.STREAM_CHUNKS] = len(self.timeline.chunk_times)
        if self._events is not None and self._events.skipped:
            found[STREAM_EVENTS_SKIPPED] = self._events.skipped
        found.update(
            breakdown(
                self.timeline,
                end_ns,
                pooled=self.pooled,
                server_ms=self._server_ms,
                output_tokens=facts.output_tokens,
            )
        )
        # A stream's error event is the provider's text: scrubbed like an exception's.
        error = (
            str(self._error_status)
            if self._error_status is not None
            else (scrub(facts.error_type) if facts.error_type is not None else None)
        )
        if error is not None:
            found[attr.ERROR_TYPE] = error
        set_attributes(span, found)
        if error is not None:
            span.set_status(
                Status(StatusCode.ERROR, f"HTTP {error}" if self._error_status else error)
            )


def detach(token: object) -> None:
    try:
        otel_context.detach(token)  # type: ignore[arg-type]
    except Exception:
        failed("restoring the context")
