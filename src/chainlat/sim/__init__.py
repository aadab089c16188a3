"""A local OpenAI- and Anthropic-compatible server whose latency follows per-model profiles.

Use it to test latency budgets offline: point the real SDKs at it and every call takes
the time its `ModelProfile` says, reproducibly for a given ``seed``::

    with SimServer() as sim:
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
        client.chat.completions.create(model="sim-small", messages=[...])  # ~250 ms

Endpoints:
    ``POST /v1/chat/completions`` and ``POST /v1/completions`` (OpenAI, streaming or not),
    ``POST /v1/embeddings`` (prefill only), ``POST /v1/messages`` (Anthropic, streaming or
    not), ``GET /v1/models``, ``GET /v1/models/{id}`` and ``GET /health``. An unknown model
    is a 404 and a body that is not JSON a 400, in the provider's error format; so is a
    field of the wrong type (named in ``param``), JSON nested over 128 levels, speech
    ``input`` over 4,096 characters, an upload over 25 MB (413), a wav header that does
    not add up or over 1,500 seconds of audio (``docs/operating.md``). The
    Responses API (``/v1/responses``) is not served: point the OpenAI Agents SDK at
    chat completions (``OpenAIChatCompletionsModel``).

Timeline of one request (all deadlines measured with ``time.perf_counter_ns``):
    1. network: ``network_delay_ms`` (+ Gaussian ``network_jitter_ms``), simulated transit
       before the server sees the request; not part of the reported processing time.
    2. queue: wait, first in first out, for one of the model's ``slots``.
    3. prefill: ``ttft_base_ms + ttft_per_input_token_ms * input_tokens``; it ends with the
       first token (time to first token).
    4. decode: ``decode_ms_per_token`` for each output token after the first.

    Token deadlines count from the slot, so a first token that is late (a busy machine)
    shortens the decode phase by as much and the last token stays on time; the error
    is typically a fraction of a millisecond, a few when the process is busy (a client
    in the same process as the server thread competes with it for the GIL: run
    ``chainlat sim`` in its own process for the tightest timing).

    A non-streaming response is sent when decode ends. A stream sends its headers when a
    slot is acquired, the first content chunk when prefill ends, then one chunk per token
    at the decode pace, each flushed at once.

Token rule:
    input tokens = ``ceil(characters / 4)`` over the text of all messages (OpenAI: every
    message's string content or text parts, and an assistant message's tool-call names
    and arguments; Anthropic: ``system`` plus the messages, ``tool_use`` blocks as name
    and input JSON, ``tool_result`` blocks as their content; embeddings: each input,
    token arrays counted by length), plus the compact JSON of the request's ``tools``.
    Output tokens = the profile's ``output_tokens`` for a text answer, the tokens of the
    arguments JSON for a tool-call answer (below), capped by
    ``max_completion_tokens``/``max_tokens`` (then ``finish_reason`` is ``length``,
    ``stop_reason`` ``max_tokens``). The text is filler words, deterministic for a seed,
    model and prompt, and counts back to the same number of tokens under the rule above.

Tool calls (``/v1/chat/completions`` and ``/v1/messages``):
    So that agent loops (the SDKs' tool loops, LangGraph, pydantic-ai, LiteLLM, the
    OpenAI Agents SDK with its chat-completions model) run offline. Function tools
    (OpenAI ``{"type": "function", ...}``, Anthropic custom tools) are called; hosted
    tools are ignored::

        weather = {"type": "function", "function": {"name": "weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
        reply = client.chat.completions.create(model="sim-small", messages=m, tools=[weather])
        reply.choices[0].message.tool_calls[0].function.arguments  # '{"city":"the"}'

    Which answer a request gets:

    - no tools, or ``tool_choice`` ``"none"`` (Anthropic ``{"type": "none"}``): text.
    - a named tool (``{"type": "function", "function": {"name": ...}}``, Anthropic
      ``{"type": "tool", "name": ...}``): a call to it, always. A name not in ``tools``
      is a 400.
    - ``"auto"`` (the default with tools; Anthropic ``auto``): a call to the first tool,
      unless the current turn already holds a tool result (OpenAI: a ``tool`` message
      after the last ``user`` message; Anthropic: the last user message carries a
      ``tool_result`` block), then text. So the classic loop, call -> result -> text,
      ends after one round.
    - ``"required"`` (Anthropic ``any``): a call, to tool number ``k`` (modulo the number
      of tools), where ``k`` counts the tool results of the current turn: each round moves
      on one tool, so a loop that forces tool use and ends on an output tool (pydantic-ai's
      ``final_result`` comes after the function tools) finishes.

    A call's arguments are made from the tool's JSON schema (``parameters``,
    ``input_schema``): the required properties only; a string is a short word (or a
    fixed value for ``format`` date, date-time, time, email, uri, uuid), an integer
    1-9 and a number 1.0-9.9 (both kept within ``minimum``/``maximum``), a boolean,
    ``enum`` its first value, ``const`` its value, an array one item (or ``minItems``),
    an object recursed into; local ``$ref`` and the first non-null ``anyOf``/``oneOf``
    option are followed, and past depth 6 objects and arrays are empty. Values and call
    ids (``call_...``, ``toolu_...``) are deterministic for a seed, model and prompt, so
    the same request gives the same calls.

    OpenAI answers ``message.tool_calls`` (``content`` null, ``finish_reason``
    ``tool_calls``); a stream sends each call's index, id and name with empty
    arguments, then the arguments in fragments of one token (four characters) each.
    Anthropic answers one ``tool_use`` block per call (``stop_reason`` ``tool_use``);
    a stream sends ``content_block_start`` (``tool_use``), one ``input_json_delta`` per
    token and ``content_block_stop`` for each call. The latency is the same formula with
    the arguments' tokens as output tokens; ``max_tokens`` below them cuts the last
    arguments short (``length``/``max_tokens``, an Anthropic block then has input
    ``{}`` when not streamed), as the real APIs do.

    One call per answer, unless the request header ``x-sim-tool-calls: N`` (1-64) asks
    for N parallel calls: the chosen tool and the ones after it in turn (a named tool N
    times). ``parallel_tool_calls: false`` (Anthropic ``disable_parallel_tool_use``)
    keeps it to one. The header does nothing to a text answer.

Jitter:
    A profile's ``jitter`` is the sigma of a log-normal factor on prefill and on decode
    (drawn separately; the median stays the nominal value, so 0.1 is about +/-10 %). The
    n-th request to a model draws the same factors for the same ``seed``.

Response headers:
    ``x-request-id`` (and ``request-id`` on ``/v1/messages``); ``openai-processing-ms``,
    whole milliseconds of server time up to the headers (queue + prefill + decode when not
    streaming, queue when streaming); ``Server-Timing`` with the measured ``stall``,
    ``queue``, ``prefill`` and ``decode`` durations known when the headers are sent;
    ``x-sim-plan``, the drawn ``network``, ``prefill`` and ``decode`` durations in the same
    syntax.

Fault injection (request headers; a malformed value is a 400):
    - ``x-sim-status: 429|500|503``: answer with that error in the provider's format,
      without taking a slot. A 429 carries ``retry-after`` (seconds, rounded up) and
      ``retry-after-ms``: 1000 ms unless ``x-sim-retry-after-ms: N`` says otherwise.
    - ``x-sim-cut-after: N``: drop the connection, with no clean end, after N SSE events
      of a stream (0: right after the headers). A non-streaming request gets no
      response at all: the connection drops when the answer would have been sent.
    - ``x-sim-delay-ms: X``: stall X ms before anything else (after the network delay).
      It delays the headers and counts as processing time (``stall`` in Server-Timing).

Other request headers: ``x-sim-tool-calls: N``, parallel tool calls (see Tool calls).

Tracing:
    With a ``tracer_provider`` or an ``otlp_endpoint``, each request gets a SERVER span
    (``POST /v1/chat/completions``, tracer scope ``chainlat.sim``), a child of the caller's
    ``traceparent``, with children ``queue``, ``prefill`` and ``decode`` stamped with the
    real sleeps; the network delay lies before the server span. Spans end just before
    the last bytes of the response are written, so a client that has read a response
    finds them ended (and exported, with a synchronous span processor). Without either,
    nothing is traced: no propagation, no spans, no cost.

Capacity:
    One event loop serves every connection. On one free core it keeps the timing for
    a few hundred concurrent streams at tens of tokens per second each (about 10-15
    thousand chunks per second in all); past that, deadlines slip. Simultaneous
    deadlines are served one after another, so a burst of identical requests spreads
    by about a tenth of a millisecond per request.

Default profiles (`DEFAULT_PROFILES`), for a typical prompt of 200 input tokens
(800 characters)::

    name       ttft_base  +per input tok  decode/tok  output  slots  jitter  total
    sim-large  350 ms     0.25 ms         10 ms       41      4      0.1     400 + 40 x 10 = 800 ms
    sim-small  90 ms      0.1 ms          3.5 ms      41      16     0.1     110 + 40 x 3.5 = 250 ms
    sim-embed  15 ms      0.02 ms         0           1       32     0.1     19 ms (embeddings)

Speech (`VoiceProfile`, `DEFAULT_VOICE_PROFILES`): ``POST /v1/audio/speech`` streams
silent wav, pcm or mp3 in real time (or ``speech.audio.delta`` events with
``stream_format="sse"``); ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``
answer with a transcript (streamed with ``stream=true``). The latency model is in
``chainlat.sim._audio``::

    name          operation       first byte  real-time factor  per audio second
    sim-stt       speech_to_text  120 ms      -                 +15 ms
    sim-stt-slow  speech_to_text  300 ms      -                 +40 ms
    sim-tts       text_to_speech  150 ms      6x                -
    sim-tts-hd    text_to_speech  400 ms      2x                -

Profiles files (``--profiles FILE``, `load_profiles`), TOML or JSON::

    [models.fast]            # {"models": {"fast": {"ttft_base_ms": 120, ...}}}
    ttft_base_ms = 120       # or "models" as an array of tables with a "name"
    decode_ms_per_token = 15
    output_tokens = 20
    slots = 2

A speech model's profile in the file (``speech_input``, as ``chainlat profile -o``
writes for speech calls) is served as a voice, not as a chat model.

Errors::

    InputError (chainlat._core.errors), ValueError
     └── ProfileError    a profiles file (or a profile) that cannot be used
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from chainlat._core.errors import ProfileError
from chainlat._runtime.scrubbing import install_log_scrubber
from chainlat.sim._audio import DEFAULT_VOICE_PROFILES, VoiceProfile
from chainlat.sim._cli import serve
from chainlat.sim._engine import Engine
from chainlat.sim._http import MAX_HEAD_BYTES, serve_connection
from chainlat.sim._profiles import DEFAULT_PROFILES, ModelProfile, load_profiles
from chainlat.sim._realtime import realtime_route

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = [
    "DEFAULT_PROFILES",
    "DEFAULT_VOICE_PROFILES",
    "ModelProfile",
    "ProfileError",
    "SimServer",
    "VoiceProfile",
    "load_profiles",
    "main",
]

# Defined in a private module; report them where users import them from (as httpx does).
ModelProfile.__module__ = load_profiles.__module__ = VoiceProfile.__module__ = __name__

logger = logging.getLogger("chainlat.sim")
install_log_scrubber(logger)  # a logger's filters do not apply to its children's records

_TRACER_SCOPE = "chainlat.sim"


class SimServer:
    """The simulator server, run in a background thread or in your event loop.

    ``with SimServer()`` (or `start`/`stop`) serves from a daemon thread with its own
    event loop; ``async with SimServer()`` or `serve` use the running loop. In a thread
    the server shares the GIL with the code under test, which can add a few ms when that
    code is busy; ``chainlat sim`` in its own process gives the tightest timing.

    Example:
        >>> with SimServer(seed=1) as sim:  # doctest: +SKIP
        ...     client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
        ...     client.chat.completions.create(model="sim-small", messages=[...])

    Args:
        profiles: The models served; `DEFAULT_PROFILES` when None.
        voices: The speech models served; `DEFAULT_VOICE_PROFILES` when None.
        host: Interface to listen on.
        port: Port to listen on; 0 picks a free one (see `port` once started).
        network_delay_ms: Simulated transit before each request is processed.
        network_jitter_ms: Standard deviation added to ``network_delay_ms`` (never below 0).
        seed: Seed for every random draw (jitter, text, embeddings).
        tracer_provider: Emit server spans to this provider (use a batching processor
            there, as span export otherwise runs on the server's event loop).
        otlp_endpoint: Emit server spans over OTLP/HTTP to this collector URL (a bare
            ``http://host:4318`` gets ``/v1/traces``), from a provider of the server's
            own with ``service.name`` ``chainlat-sim``.

    Raises:
        ValueError: Bad arguments (``ProfileError`` for duplicate or invalid profiles).
    """

    def __init__(
        self,
        profiles: Iterable[ModelProfile] | None = None,
        *,
        voices: Iterable[VoiceProfile] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        network_delay_ms: float = 0.0,
        network_jitter_ms: float = 0.0,
        seed: int = 0,
        tracer_provider: TracerProvider | None = None,
        otlp_endpoint: str | None = None,
    ) -> None:
        self._profiles = tuple(DEFAULT_PROFILES if profiles is None else profiles)
        if not self._profiles:
            raise ProfileError("SimServer: no model profiles given")
        self._voices = tuple(DEFAULT_VOICE_PROFILES if voices is None else voices)
        names = [p.name for p in self._profiles] + [v.name for v in self._voices]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ProfileError(f"SimServer: duplicate model names: {', '.join(duplicates)}")
        for label, delay in (
            ("network_delay_ms", network_delay_ms),
            ("network_jitter_ms", network_jitter_ms),
        ):
            if not math.isfinite(delay) or delay < 0:
                raise ValueError(f"SimServer: {label}: expected a number >= 0, got {delay!r}")
        if not 0 <= port <= 65535:
            raise ValueError(f"SimServer: port: expected 0..65535, got {port!r}")
        if tracer_provider is not None and otlp_endpoint is not None:
            raise ValueError("SimServer: give tracer_provider or otlp_endpoint, not both")
        self._traces_url = None if otlp_endpoint is None else _traces_url(otlp_endpoint)
        self._host = host
        self._requested_port = port
        self._network_delay_ms = float(network_delay_ms)
        self._network_jitter_ms = float(network_jitter_ms)
        self._seed = seed
        self._tracer_provider = tracer_provider
        self._own_provider: SdkTracerProvider | None = None
        self._server: asyncio.Server | None = None
        self._engine: Engine | None = None
        self._port: int | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._transports: set[asyncio.Transport] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None

    @property
    def profiles(self) -> tuple[ModelProfile, ...]:
        """The models served."""
        return self._profiles

    @property
    def voices(self) -> tuple[VoiceProfile, ...]:
        """The speech models served."""
        return self._voices

    @property
    def port(self) -> int:
        """The port listened on; raises RuntimeError when not running."""
        if self._port is None:
            raise RuntimeError("SimServer is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://host:port``, without ``/v1`` (the Anthropic SDK wants it so)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    # -- in your event loop ------------------------------------------------------------

    async def serve(self) -> None:
        """Listen and serve in the running event loop until cancelled.

        Example:
            >>> task = asyncio.create_task(SimServer(port=8000).serve())  # doctest: +SKIP
            >>> ...
            >>> task.cancel()  # doctest: +SKIP
        """
        await self._open()
        try:
            await asyncio.Event().wait()
        finally:
            await self._close()

    async def __aenter__(self) -> SimServer:
        await self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close()

    # -- in a background thread --------------------------------------------------------

    def start(self, timeout: float = 10.0) -> SimServer:
        """Serve from a background thread with its own event loop; returns once listening.

        Example:
            >>> sim = SimServer().start()  # doctest: +SKIP
            >>> sim.base_url  # doctest: +SKIP
            >>> sim.stop()  # doctest: +SKIP

        Raises:
            OSError: The address cannot be bound.
            RuntimeError: Already running, or not listening within ``timeout`` seconds.
        """
        if self._thread is not None or self._server is not None:
            raise RuntimeError("SimServer is already running")
        ready = threading.Event()
        failure: list[BaseException] = []
        thread = threading.Thread(
            target=self._thread_main, args=(ready, failure), name="chainlat-sim", daemon=True
        )
        self._thread = thread
        thread.start()
        if not ready.wait(timeout):
            self.stop()
            raise RuntimeError(f"SimServer did not start within {timeout} s")
        if failure:
            thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving: open streams are cut, the thread is joined, own spans flushed."""
        thread, loop, stop_requested = self._thread, self._loop, self._stop_requested
        if thread is None:
            return
        if loop is not None and stop_requested is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop_requested.set)
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("chainlat.sim: server thread still running after %s s", timeout)
        self._thread = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _thread_main(self, ready: threading.Event, failure: list[BaseException]) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop_requested = asyncio.Event()
            try:
                await self._open()
            except BaseException as exc:
                failure.append(exc)
                return
            finally:
                ready.set()
            try:
                await self._stop_requested.wait()
            finally:
                await self._close()

        try:
            asyncio.run(run())
        finally:
            self._loop = None
            self._stop_requested = None
            ready.set()

    # -- shared ------------------------------------------------------------------------

    async def _open(self) -> None:
        if self._server is not None:
            raise RuntimeError("SimServer is already running")
        self._engine = Engine(
            self._profiles,
            network_delay_ms=self._network_delay_ms,
            network_jitter_ms=self._network_jitter_ms,
            seed=self._seed,
            tracer=self._make_tracer(),
            voices=self._voices,
        )
        try:
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(
                lambda: _TrackedProtocol(self._on_connection, self._transports),
                self._host,
                self._requested_port,
                backlog=1024,
            )
        except BaseException:
            await self._shutdown_own_provider()
            raise
        self._port = int(self._server.sockets[0].getsockname()[1])

    async def _close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        # Abort every accepted connection, including any whose handler task has not
        # started yet: cancelling tasks alone would leave those sockets open, and their
        # clients waiting, until garbage collection.
        for transport in list(self._transports):
            transport.abort()
        connections = list(self._connections)
        for task in connections:
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 2.0)
        self._port = None
        self._engine = None
        await self._shutdown_own_provider()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        engine = self._engine
        task = asyncio.current_task()
        if engine is None or task is None or self._server is None:
            writer.transport.abort()
            return
        self._connections.add(task)
        try:
            handle = realtime_route(engine.handle, reader, writer, self._voices, self._seed)
            await serve_connection(reader, writer, handle, engine.render_error)
        except asyncio.CancelledError:
            # Only _close() cancels these tasks, and it does not need the cancellation
            # to propagate; ending quietly spares Python 3.11's stream callback, which
            # logs a spurious error for a cancelled connection task.
            pass
        finally:
            self._connections.discard(task)

    def _make_tracer(self) -> Tracer | None:
        if self._tracer_provider is not None:
            return self._tracer_provider.get_tracer(_TRACER_SCOPE)
        if self._traces_url is None:
            return None
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = SdkTracerProvider(resource=Resource.create({"service.name": "chainlat-sim"}))
        # A short export timeout keeps stop() quick when no collector is listening.
        exporter = OTLPSpanExporter(endpoint=self._traces_url, timeout=5)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        self._own_provider = provider
        return provider.get_tracer(_TRACER_SCOPE)

    async def _shutdown_own_provider(self) -> None:
        provider, self._own_provider = self._own_provider, None
        if provider is not None:
            # Flushing exports over HTTP; off the loop so it cannot stall other servers.
            await asyncio.to_thread(provider.shutdown)


class _TrackedProtocol(asyncio.StreamReaderProtocol):
    """`asyncio.start_server`'s protocol, plus a registry of live transports."""

    def __init__(
        self,
        on_connection: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
        registry: set[asyncio.Transport],
    ) -> None:
        super().__init__(asyncio.StreamReader(limit=MAX_HEAD_BYTES), on_connection)
        self._registry = registry
        self._tracked: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.Transport):
            self._tracked = transport
            self._registry.add(transport)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._tracked is not None:
            self._registry.discard(self._tracked)
        super().connection_lost(exc)


def _traces_url(endpoint: str) -> str:
    try:
        parts = urlsplit(endpoint)
        usable = parts.scheme in ("http", "https") and bool(parts.netloc)
        usable = usable and (parts.port or 0) >= 0  # a port that is not a number raises
    except ValueError:  # a bracket left open (``http://[::1``)
        usable = False
    if not usable:
        raise ValueError(f"otlp_endpoint: expected an http(s) URL, got {endpoint!r}")
    if parts.path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


def main(argv: list[str] | None = None) -> int:
    """Run ``chainlat sim`` until Ctrl-C (or SIGTERM).

    Example:
        >>> main(["--port", "8000", "--network-delay-ms", "40"])  # doctest: +SKIP
        chainlat sim: serving http://127.0.0.1:8000 (sim-large, sim-small, sim-embed)

    Args:
        argv: Arguments after ``chainlat sim``; ``sys.argv[1:]`` when None.

    Returns:
        0 after a clean stop, 2 for bad input (arguments, profiles file, address in use).
    """
    return serve(argv, SimServer)
