"""The simulator's Realtime API: speech to speech over one WebSocket, ``/v1/realtime``.

``GET /v1/realtime?model=sim-realtime`` with a WebSocket upgrade opens a session that
speaks OpenAI's Realtime protocol, framed by the ``websockets`` library (its Sans-I/O
``ServerProtocol``, driven over the simulator's own connection). The real SDK connects
to it unchanged::

    client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
    async with client.realtime.connect(model="sim-realtime") as connection:
        await connection.input_audio_buffer.append(audio=base64_pcm16)

Models: `REALTIME_PROFILES` (``sim-realtime``, ``sim-realtime-mini``) and every
``text_to_speech`` voice the server serves, each a `VoiceProfile`: a response's first
audio comes ``first_byte_ms`` after the response is created (the turn committed by the
server's VAD, or the client's ``response.create``), then audio of ``chunk_ms`` every
``chunk_ms / real_time_factor``; the answer is filler words (``max_output_tokens``
of them, 12 by default) lasting ``ms_per_character`` per character. A model the server
does not serve is a 404 before the upgrade, no ``model`` a 400, and a plain GET a 426.

Client events handled: ``session.update``, ``input_audio_buffer.append`` (base64 PCM16,
24 kHz mono), ``input_audio_buffer.commit`` and ``.clear``, ``conversation.item.create``
(a message or a ``function_call_output``), ``conversation.item.truncate``,
``response.create`` and ``response.cancel``. Anything else, or a malformed event, is
answered with an ``error`` event naming it (``param``), and the session goes on.

Server VAD (``turn_detection`` ``server_vad``, the default; ``semantic_vad`` is served as
``server_vad``): a 10 ms frame is speech when its RMS is at least ``threshold`` x 3,277
(0.5: about -26 dBFS). The first speech frame sends ``input_audio_buffer.speech_started``
(``audio_start_ms``: its start less ``prefix_padding_ms``); ``silence_duration_ms`` of
frames without speech then send ``speech_stopped`` with ``audio_end_ms`` at the end of
that silence (so it includes the silence, as OpenAI's does), ``committed``, the user
item, and a response (``create_response``). Both are milliseconds of audio since the
session's first append: the session's audio clock. Speech that starts while a response
is being made cancels it (``interrupt_response``): ``response.done`` with status
``cancelled`` (reason ``turn_detected``); the client then truncates the item it played
(``conversation.item.truncate``, answered ``conversation.item.truncated``). With
``turn_detection`` null the client commits (at least 100 ms of audio) and asks for a
response itself.

A response: ``response.created``, ``response.output_item.added`` (and
``conversation.item.added``: the item joins the conversation),
``response.content_part.added``, the audio as ``response.output_audio.delta`` events of
silent PCM16 (with ``response.output_audio_transcript.delta``), their ``.done`` events
(``response.output_item.done``, then ``conversation.item.done``), and ``response.done``
with ``usage``: input text tokens (``ceil(characters / 4)`` of the instructions and the
text items), input audio tokens (one per 100 ms heard), output text tokens (the
transcript) and output audio tokens (one per 50 ms spoken). A client of the
beta protocol (header ``OpenAI-Beta: realtime=v1``, as the SDK's ``client.beta.realtime``
sends) gets the beta names: ``response.audio.delta``, ``response.audio_transcript.delta``,
``response.text.delta``, ``conversation.item.created``.

Tools (``session.tools``, or the response's own): unless ``tool_choice`` is ``none``, or
the current turn already holds a ``function_call_output``, a response is a call to the
first tool (a named ``tool_choice``: that one), its arguments made from the tool's
schema as chat completions' are: ``response.function_call_arguments.delta`` and
``.done`` at the first-audio deadline, then ``response.done``. The client answers with
``conversation.item.create`` (``function_call_output`` with the ``call_id``) and a new
``response.create``, which speaks.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
import logging
import math
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from chainlat.sim._audio import PCM_RATE, VoiceProfile
from chainlat.sim._engine import sleep_until
from chainlat.sim._formats import ApiError, count_tokens, generate_tokens, load_json, openai_error
from chainlat.sim._http import Handler, Request, Responder
from chainlat.sim._schema import schema_example

REALTIME_PATH: Final = "/v1/realtime"
REALTIME_PROFILES: Final = (
    VoiceProfile(
        "sim-realtime", "text_to_speech", first_byte_ms=300.0, real_time_factor=4.0, chunk_ms=100.0
    ),
    VoiceProfile(
        "sim-realtime-mini",
        "text_to_speech",
        first_byte_ms=180.0,
        real_time_factor=6.0,
        chunk_ms=100.0,
    ),
)
"""The realtime models every simulator serves, beside its ``text_to_speech`` voices."""
DEFAULT_OUTPUT_TOKENS: Final = 12
"""Words of an answer when the client sets no ``max_output_tokens``."""
MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The largest client event read (OpenAI's limit is 15 MB); a larger one closes with 1009."""

_FRAME_MS: Final = 10
_FRAME_BYTES: Final = PCM_RATE * 2 * _FRAME_MS // 1000
_FULL_SCALE_RMS: Final = 3277.0
"""RMS of speech at ``threshold`` 1.0: a tenth of full scale."""
_MIN_COMMIT_MS: Final = 100

logger = logging.getLogger("chainlat.sim")


def realtime_profiles(voices: Sequence[VoiceProfile]) -> dict[str, VoiceProfile]:
    """The realtime models of a server: `REALTIME_PROFILES` and its TTS voices (theirs win)."""
    models = {p.name: p for p in REALTIME_PROFILES}
    models.update({v.name: v for v in voices if v.operation == "text_to_speech"})
    return models


def realtime_route(
    handle: Handler,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    voices: Sequence[VoiceProfile],
    seed: int,
) -> Handler:
    """The connection's handler: ``/v1/realtime`` here, every other path to ``handle``."""
    models = realtime_profiles(voices)

    async def route(request: Request, responder: Responder) -> None:
        if request.path.rstrip("/") != REALTIME_PATH:
            await handle(request, responder)
            return
        await _open_session(request, responder, reader, writer, models, seed)

    return route


async def _open_session(
    request: Request,
    responder: Responder,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    models: dict[str, VoiceProfile],
    seed: int,
) -> None:
    from websockets.http11 import Request as WsRequest
    from websockets.server import ServerProtocol

    async def refuse(status: int, message: str, code: str | None = None) -> None:
        responder.keep_alive = False
        headers = [("content-type", "application/json")]
        await responder.send(status, headers, openai_error(status, message, code))

    if request.headers.get("upgrade", "").lower() != "websocket":
        await refuse(426, "the Realtime API is a WebSocket: send an Upgrade request")
        return
    query = parse_qs(urlsplit(request.target).query)
    model = (query.get("model") or [""])[0]
    if not model:
        await refuse(400, "missing the model query parameter (?model=...)", "missing_model")
        return
    profile = models.get(model)
    if profile is None:
        known = ", ".join(sorted(models))
        await refuse(
            404, f"model {model!r} is not a realtime model here ({known})", "model_not_found"
        )
        return
    protocol = ServerProtocol(max_size=MAX_MESSAGE_BYTES)
    # The request was read by the simulator's HTTP layer; replay its head to the
    # protocol, whose parser reads the handshake before any frame.
    head = [f"GET {request.target} HTTP/1.1", *(f"{k}: {v}" for k, v in request.headers.items())]
    protocol.receive_data(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    handshake = [e for e in protocol.events_received() if isinstance(e, WsRequest)]
    if not handshake:
        await refuse(400, "malformed WebSocket handshake")
        return
    response = protocol.accept(handshake[0])
    protocol.send_response(response)
    responder.started = True  # the bytes below are this request's answer
    writer.write(b"".join(protocol.data_to_send()))
    await writer.drain()
    if response.status_code != 101:
        return
    beta = "realtime=v1" in request.headers.get("openai-beta", "")
    session = _Session(protocol, reader, writer, profile, seed, beta=beta)
    await session.run()


# -- the session -------------------------------------------------------------------------


@dataclass
class _Vad:
    """Server VAD settings (``turn_detection``); None on the session when it is off."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    create_response: bool = True
    interrupt_response: bool = True
    kind: str = "server_vad"

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "threshold": self.threshold,
            "prefix_padding_ms": self.prefix_padding_ms,
            "silence_duration_ms": self.silence_duration_ms,
            "create_response": self.create_response,
            "interrupt_response": self.interrupt_response,
        }


@dataclass
class _Response:
    id: str
    item_id: str
    task: asyncio.Task[None] | None = None
    audio_ms: float = 0.0
    done: bool = False
    cancelled: bool = False


@dataclass
class _Settings:
    instructions: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: object = "auto"
    max_output_tokens: int | None = None
    modalities: list[str] = field(default_factory=lambda: ["audio"])


class _BadEvent(Exception):
    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value"):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


class _Session:
    """One Realtime session: client events in, server events out, responses on a clock."""

    def __init__(
        self,
        protocol: Any,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        profile: VoiceProfile,
        seed: int,
        *,
        beta: bool,
    ) -> None:
        self._protocol = protocol
        self._reader = reader
        self._writer = writer
        self._profile = profile
        self._seed = seed
        self._beta = beta
        self._id = f"sess_{uuid.uuid4().hex[:20]}"
        self._ids = itertools.count(1)
        self._drain_lock = asyncio.Lock()
        self._settings = _Settings()
        self._vad: _Vad | None = _Vad()
        self._voice = "alloy"
        # the audio clock: ms of audio appended since the session began
        self._audio_bytes = 0
        self._pending = b""  # bytes short of a whole frame
        self._buffer_ms = 0.0  # audio in the input buffer, not committed
        self._speaking = False
        self._speech_item: str | None = None
        self._silence_ms = 0
        self._items: list[dict[str, Any]] = []
        self._heard_ms = 0.0  # committed audio in the conversation
        self._response: _Response | None = None
        self._calls: set[str] = set()

    # -- wire ------------------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}{uuid.uuid4().hex[:12]}"

    async def send(self, event: dict[str, Any]) -> None:
        from websockets.protocol import State

        if self._protocol.state is not State.OPEN:
            return
        event = {"type": event.pop("type"), "event_id": self._new_id("event"), **event}
        self._protocol.send_text(json.dumps(event, separators=(",", ":")).encode())
        await self._flush()

    async def _flush(self) -> None:
        data = self._protocol.data_to_send()
        for chunk in data:
            if chunk:
                self._writer.write(chunk)
            elif self._writer.can_write_eof():
                self._writer.write_eof()
        async with self._drain_lock:
            await self._writer.drain()

    async def _error(self, error: _BadEvent, client_event_id: object = None) -> None:
        body: dict[str, Any] = {
            "type": "invalid_request_error",
            "code": error.code,
            "message": error.message,
            "param": error.param,
            "event_id": client_event_id if isinstance(client_event_id, str) else None,
        }
        await self.send({"type": "error", "error": body})

    async def run(self) -> None:
        from websockets.frames import Opcode
        from websockets.protocol import State

        await self.send({"type": "session.created", "session": self._session_json()})
        parts: list[bytes] = []
        text = True
        try:
            while self._protocol.state is not State.CLOSED:
                data = await self._reader.read(65536)
                if data:
                    self._protocol.receive_data(data)
                else:
                    self._protocol.receive_eof()
                for frame in self._protocol.events_received():
                    if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                        parts, text = [frame.data], frame.opcode is Opcode.TEXT
                    elif frame.opcode is Opcode.CONT:
                        parts.append(frame.data)
                    else:
                        continue  # ping, pong and close: the protocol answers them
                    if frame.fin:
                        message, parts = b"".join(parts), []
                        await self._receive(message, text=text)
                await self._flush()
                if not data:
                    break
        finally:
            self._cancel_response()

    # -- client events ---------------------------------------------------------------

    async def _receive(self, message: bytes, *, text: bool) -> None:
        event_id: object = None
        try:
            if not text:
                raise _BadEvent("send events as text frames of JSON", None, "invalid_event")
            try:
                event = load_json(message)
            except ApiError as exc:
                raise _BadEvent(exc.message, None, "invalid_json") from None
            if not isinstance(event, dict):
                raise _BadEvent("an event is a JSON object", None, "invalid_event")
            event_id = event.get("event_id")
            kind = event.get("type")
            if not isinstance(kind, str):
                raise _BadEvent("missing the event's type", "type", "missing_required_parameter")
            handler = self._handlers.get(kind)
            if handler is None:
                raise _BadEvent(f"Invalid value: {kind!r}: not a client event here", "type")
            await handler(self, event)
        except _BadEvent as exc:
            await self._error(exc, event_id)

    async def _session_update(self, event: dict[str, Any]) -> None:
        session = event.get("session")
        if not isinstance(session, dict):
            raise _BadEvent("session must be an object", "session")
        audio = session.get("audio")
        audio_in = audio.get("input") if isinstance(audio, dict) else None
        if isinstance(audio_in, dict) and "turn_detection" in audio_in:
            self._vad = _parse_vad(audio_in["turn_detection"], "session.audio.input")
        elif "turn_detection" in session:
            self._vad = _parse_vad(session["turn_detection"], "session")
        formats = [session.get("input_audio_format")]
        if isinstance(audio_in, dict) and isinstance(audio_in.get("format"), dict):
            formats.append(audio_in["format"].get("type"))
        for value in formats:
            if value is not None and value not in ("pcm16", "audio/pcm"):
                raise _BadEvent("the simulator hears pcm16 (audio/pcm) only", "session.format")
        self._settings = _merge_settings(self._settings, session, "session")
        audio_out = audio.get("output") if isinstance(audio, dict) else None
        voice = session.get("voice")
        if isinstance(audio_out, dict):
            voice = audio_out.get("voice", voice)
        if isinstance(voice, str):
            self._voice = voice
        await self.send({"type": "session.updated", "session": self._session_json()})

    async def _append(self, event: dict[str, Any]) -> None:
        audio = event.get("audio")
        if not isinstance(audio, str):
            raise _BadEvent("audio must be a base64 string", "audio")
        try:
            pcm = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            raise _BadEvent("audio is not valid base64", "audio") from None
        data = self._pending + pcm
        whole = len(data) - len(data) % _FRAME_BYTES
        self._pending = data[whole:]
        for start in range(0, whole, _FRAME_BYTES):
            self._audio_bytes += _FRAME_BYTES
            self._buffer_ms += _FRAME_MS
            await self._frame(data[start : start + _FRAME_BYTES])

    async def _frame(self, frame: bytes) -> None:
        vad = self._vad
        if vad is None:
            return
        end_ms = self._audio_bytes * 1000 // (PCM_RATE * 2)
        samples = memoryview(frame).cast("h")
        rms = math.sqrt(sum(s * s for s in samples) / len(samples))
        voiced = rms >= vad.threshold * _FULL_SCALE_RMS
        if voiced and not self._speaking:
            self._speaking = True
            self._silence_ms = 0
            self._speech_item = self._new_id("item")
            start_ms = max(0, end_ms - _FRAME_MS - vad.prefix_padding_ms)
            await self.send(
                {
                    "type": "input_audio_buffer.speech_started",
                    "audio_start_ms": start_ms,
                    "item_id": self._speech_item,
                }
            )
            if vad.interrupt_response:
                await self._cancel("turn_detected")
        elif self._speaking:
            self._silence_ms = 0 if voiced else self._silence_ms + _FRAME_MS
            if self._silence_ms >= vad.silence_duration_ms:
                self._speaking = False
                item_id = self._speech_item or self._new_id("item")
                await self.send(
                    {
                        "type": "input_audio_buffer.speech_stopped",
                        "audio_end_ms": end_ms,
                        "item_id": item_id,
                    }
                )
                await self._commit_buffer(item_id)
                if vad.create_response:
                    await self._start_response(self._settings)

    async def _commit(self, event: dict[str, Any]) -> None:
        if self._buffer_ms < _MIN_COMMIT_MS:
            raise _BadEvent(
                f"buffer too small: expected at least {_MIN_COMMIT_MS}ms of audio, "
                f"but buffer only has {self._buffer_ms:.2f}ms of audio",
                None,
                "input_audio_buffer_commit_empty",
            )
        await self._commit_buffer(self._new_id("item"))

    async def _commit_buffer(self, item_id: str) -> None:
        previous = self._items[-1]["id"] if self._items else None
        heard_ms, self._buffer_ms = self._buffer_ms, 0.0
        self._heard_ms += heard_ms
        await self.send(
            {
                "type": "input_audio_buffer.committed",
                "previous_item_id": previous,
                "item_id": item_id,
            }
        )
        item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        await self._add_item(item, previous)

    async def _clear(self, event: dict[str, Any]) -> None:
        self._buffer_ms = 0.0
        self._pending = b""
        await self.send({"type": "input_audio_buffer.cleared"})

    async def _item_create(self, event: dict[str, Any]) -> None:
        item = event.get("item")
        if not isinstance(item, dict):
            raise _BadEvent("item must be an object", "item")
        kind = item.get("type")
        if kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or call_id not in self._calls:
                raise _BadEvent(f"no function call {call_id!r} in the conversation", "item.call_id")
            if not isinstance(item.get("output"), str):
                raise _BadEvent("output must be a string", "item.output")
        elif kind == "message":
            if item.get("role") not in ("user", "assistant", "system"):
                raise _BadEvent("role must be user, assistant or system", "item.role")
        elif kind != "function_call":
            raise _BadEvent(f"Invalid value: {kind!r}", "item.type")
        stored = dict(item)
        stored.setdefault("id", self._new_id("item"))
        stored["object"] = "realtime.item"
        stored.setdefault("status", "completed")
        previous = self._items[-1]["id"] if self._items else None
        await self._add_item(stored, previous)

    async def _add_item(self, item: dict[str, Any], previous: object) -> None:
        self._items.append(item)
        if self._beta:
            await self.send(
                {"type": "conversation.item.created", "previous_item_id": previous, "item": item}
            )
            return
        await self.send(
            {"type": "conversation.item.added", "previous_item_id": previous, "item": item}
        )
        await self.send(
            {"type": "conversation.item.done", "previous_item_id": previous, "item": item}
        )

    async def _output_item(self, item: dict[str, Any], previous: object, *, done: bool) -> None:
        """A response's output item is an item of the conversation too: OpenAI sends
        ``conversation.item.added`` after ``response.output_item.added`` and
        ``conversation.item.done`` after ``.done`` (the beta protocol: ``conversation.item
        .created``, once). Pipecat's realtime service tracks a function call by its
        ``conversation.item.added`` and runs none it did not see added."""
        if self._beta:
            if not done:
                await self.send(
                    {
                        "type": "conversation.item.created",
                        "previous_item_id": previous,
                        "item": item,
                    }
                )
            return
        kind = "conversation.item.done" if done else "conversation.item.added"
        await self.send({"type": kind, "previous_item_id": previous, "item": item})

    async def _truncate(self, event: dict[str, Any]) -> None:
        item_id = event.get("item_id")
        end = event.get("audio_end_ms")
        index = event.get("content_index", 0)
        item = next((i for i in self._items if i.get("id") == item_id), None)
        if item is None or item.get("role") != "assistant":
            raise _BadEvent(f"no assistant item {item_id!r} to truncate", "item_id")
        if type(end) is not int or end < 0:
            raise _BadEvent("audio_end_ms must be an integer >= 0", "audio_end_ms")
        if type(index) is not int or index != 0:
            raise _BadEvent("content_index must be 0", "content_index")
        if end > math.ceil(item.get("audio_ms", 0.0)):
            raise _BadEvent(
                f"audio_end_ms {end} is past the item's audio ({item.get('audio_ms', 0):.0f} ms)",
                "audio_end_ms",
            )
        await self.send(
            {
                "type": "conversation.item.truncated",
                "item_id": item_id,
                "content_index": 0,
                "audio_end_ms": end,
            }
        )

    async def _response_create(self, event: dict[str, Any]) -> None:
        if self._response is not None and not self._response.done:
            raise _BadEvent(
                "Conversation already has an active response in progress",
                None,
                "conversation_already_has_active_response",
            )
        response = event.get("response", {})
        if not isinstance(response, dict):
            raise _BadEvent("response must be an object", "response")
        await self._start_response(_merge_settings(self._settings, response, "response"))

    async def _response_cancel(self, event: dict[str, Any]) -> None:
        if self._response is None or self._response.done:
            raise _BadEvent("no active response to cancel", None, "response_cancel_not_active")
        await self._cancel("client_cancelled")

    _handlers: Final[dict[str, Any]] = {
        "session.update": _session_update,
        "input_audio_buffer.append": _append,
        "input_audio_buffer.commit": _commit,
        "input_audio_buffer.clear": _clear,
        "conversation.item.create": _item_create,
        "conversation.item.truncate": _truncate,
        "response.create": _response_create,
        "response.cancel": _response_cancel,
    }

    # -- responses -------------------------------------------------------------------

    async def _start_response(self, settings: _Settings) -> None:
        if self._response is not None and not self._response.done:
            await self._cancel("turn_detected")
        created_ns = time.perf_counter_ns()
        response = _Response(id=self._new_id("resp"), item_id=self._new_id("item"))
        self._response = response
        await self.send({"type": "response.created", "response": self._response_json(response)})
        response.task = asyncio.create_task(self._respond(response, settings, created_ns))

    def _cancel_response(self) -> None:
        response = self._response
        if response is not None and response.task is not None:
            response.task.cancel()

    async def _cancel(self, reason: str) -> None:
        response = self._response
        if response is None or response.done:
            return
        response.done = response.cancelled = True
        task = response.task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        body = self._response_json(response, "cancelled", self._usage(response, ""))
        body["status_details"] = {"type": "cancelled", "reason": reason}
        await self.send({"type": "response.done", "response": body})

    def _tool_call(self, settings: _Settings) -> dict[str, Any] | None:
        tools = [t for t in settings.tools if isinstance(t, dict) and t.get("type") == "function"]
        choice = settings.tool_choice
        if not tools or choice == "none":
            return None
        named = choice.get("name") if isinstance(choice, dict) else None
        if named is None:
            turn = itertools.takewhile(lambda i: i.get("role") != "user", reversed(self._items))
            answered = any(i.get("type") == "function_call_output" for i in turn)
            if answered and choice != "required":
                return None
        tool = next((t for t in tools if t.get("name") == named), tools[0])
        return tool

    async def _respond(self, response: _Response, settings: _Settings, created_ns: int) -> None:
        profile = self._profile
        first_ns = created_ns + round(profile.first_byte_ms * 1e6)
        tool = self._tool_call(settings)
        prompt = settings.instructions + "".join(_item_text(i) for i in self._items)
        rng = random.Random(f"{self._seed}:{profile.name}:{len(self._items)}:{prompt}")
        if tool is not None:
            await self._call(response, tool, rng, first_ns)
            return
        count = settings.max_output_tokens or DEFAULT_OUTPUT_TOKENS
        words = generate_tokens(self._seed, profile.name, prompt, count)
        transcript = "".join(words)
        audio_ms = profile.audio_ms(transcript)
        item = {
            "id": response.item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
            "audio_ms": 0.0,
        }
        previous = self._items[-1]["id"] if self._items else None
        self._items.append(item)
        ids = {"response_id": response.id, "item_id": response.item_id}
        part = {"output_index": 0, "content_index": 0, **ids}
        public_item = {k: v for k, v in item.items() if k != "audio_ms"}
        part_type = "audio" if self._beta else "output_audio"
        await self.send(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "response_id": response.id,
                "item": public_item,
            }
        )
        await self._output_item(public_item, previous, done=False)
        await self.send(
            {
                "type": "response.content_part.added",
                **part,
                "part": {"type": part_type, "transcript": ""},
            }
        )
        audio_name = "response.audio" if self._beta else "response.output_audio"
        transcript_name = f"{audio_name}_transcript"
        chunk_ms = profile.chunk_ms
        chunks = max(1, math.ceil(audio_ms / chunk_ms))
        step_ns = chunk_ms / profile.real_time_factor * 1e6
        for index in range(chunks):
            await sleep_until(first_ns + round(index * step_ns))
            this_ms = min(chunk_ms, audio_ms - index * chunk_ms)
            samples = max(1, round(PCM_RATE * this_ms / 1000))
            delta = base64.b64encode(bytes(2 * samples)).decode()
            await self.send({"type": f"{audio_name}.delta", **part, "delta": delta})
            if index < len(words):
                await self.send({"type": f"{transcript_name}.delta", **part, "delta": words[index]})
            response.audio_ms = item["audio_ms"] = min(audio_ms, (index + 1) * chunk_ms)
        rest = "".join(words[chunks:])
        if rest:
            await self.send({"type": f"{transcript_name}.delta", **part, "delta": rest})
        await self.send({"type": f"{audio_name}.done", **part})
        await self.send({"type": f"{transcript_name}.done", **part, "transcript": transcript})
        await self.send(
            {
                "type": "response.content_part.done",
                **part,
                "part": {"type": part_type, "transcript": transcript},
            }
        )
        item["status"] = "completed"
        item["content"] = [{"type": part_type, "transcript": transcript}]
        public_item = {k: v for k, v in item.items() if k != "audio_ms"}
        await self.send(
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "response_id": response.id,
                "item": public_item,
            }
        )
        await self._output_item(public_item, previous, done=True)
        await self._finish(response, [public_item], transcript)

    async def _call(
        self, response: _Response, tool: dict[str, Any], rng: random.Random, first_ns: int
    ) -> None:
        name = str(tool.get("name", ""))
        arguments = json.dumps(
            schema_example(tool.get("parameters", {}), rng), separators=(",", ":")
        )
        call_id = f"call_{rng.getrandbits(64):016x}"
        item = {
            "id": response.item_id,
            "object": "realtime.item",
            "type": "function_call",
            "status": "in_progress",
            "name": name,
            "call_id": call_id,
            "arguments": "",
        }
        ids = {"response_id": response.id, "item_id": response.item_id, "output_index": 0}
        previous = self._items[-1]["id"] if self._items else None
        await self.send(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "response_id": response.id,
                "item": dict(item),
            }
        )
        await self._output_item(dict(item), previous, done=False)
        await sleep_until(first_ns)
        await self.send(
            {
                "type": "response.function_call_arguments.delta",
                **ids,
                "call_id": call_id,
                "delta": arguments,
            }
        )
        await self.send(
            {
                "type": "response.function_call_arguments.done",
                **ids,
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
            }
        )
        item.update(status="completed", arguments=arguments)
        self._items.append(item)
        self._calls.add(call_id)
        await self.send(
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "response_id": response.id,
                "item": item,
            }
        )
        await self._output_item(item, previous, done=True)
        await self._finish(response, [item], arguments)

    async def _finish(self, response: _Response, output: list[dict[str, Any]], text: str) -> None:
        response.done = True
        body = self._response_json(response, "completed", self._usage(response, text))
        body["output"] = output
        await self.send({"type": "response.done", "response": body})

    def _usage(self, response: _Response, text: str) -> dict[str, Any]:
        text_in = count_tokens(self._settings.instructions + "".join(map(_item_text, self._items)))
        audio_in = math.ceil(self._heard_ms / 100)
        text_out = count_tokens(text)
        audio_out = math.ceil(response.audio_ms / 50)
        return {
            "total_tokens": text_in + audio_in + text_out + audio_out,
            "input_tokens": text_in + audio_in,
            "output_tokens": text_out + audio_out,
            "input_token_details": {
                "text_tokens": text_in,
                "audio_tokens": audio_in,
                "cached_tokens": 0,
            },
            "output_token_details": {"text_tokens": text_out, "audio_tokens": audio_out},
        }

    # -- shapes ----------------------------------------------------------------------

    def _response_json(
        self, response: _Response, status: str = "in_progress", usage: object = None
    ) -> dict[str, Any]:
        return {
            "id": response.id,
            "object": "realtime.response",
            "status": status,
            "status_details": None,
            "output": [],
            "usage": usage,
            "conversation_id": "conv_" + self._id.removeprefix("sess_"),
        }

    def _session_json(self) -> dict[str, Any]:
        vad = None if self._vad is None else self._vad.as_json()
        settings = self._settings
        common = {
            "id": self._id,
            "object": "realtime.session",
            "model": self._profile.name,
            "instructions": settings.instructions,
            "tools": settings.tools,
            "tool_choice": settings.tool_choice,
        }
        if self._beta:
            return {
                **common,
                "modalities": ["text", "audio"],
                "voice": self._voice,
                "input_audio_format": "pcm16",
                "output_audio_format": "pcm16",
                "turn_detection": vad,
                "max_response_output_tokens": settings.max_output_tokens or "inf",
            }
        pcm = {"type": "audio/pcm", "rate": PCM_RATE}
        return {
            **common,
            "type": "realtime",
            "output_modalities": settings.modalities,
            "audio": {
                "input": {"format": pcm, "turn_detection": vad},
                "output": {"format": pcm, "voice": self._voice},
            },
            "max_output_tokens": settings.max_output_tokens or "inf",
        }


def _parse_vad(value: object, where: str) -> _Vad | None:
    if value is None:
        return None
    param = f"{where}.turn_detection"
    if not isinstance(value, dict):
        raise _BadEvent("turn_detection must be an object or null", param)
    kind = value.get("type", "server_vad")
    if kind not in ("server_vad", "semantic_vad"):
        raise _BadEvent(f"Invalid value: {kind!r}", f"{param}.type")
    vad = _Vad(kind=kind)
    for key, low, high in (
        ("threshold", 0.0, 1.0),
        ("prefix_padding_ms", 0, 10_000),
        ("silence_duration_ms", 0, 10_000),
    ):
        number = value.get(key)
        if number is None:
            continue
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise _BadEvent(f"{key} must be a number", f"{param}.{key}")
        if not low <= number <= high:
            raise _BadEvent(f"{key} must be within {low}..{high}", f"{param}.{key}")
        setattr(vad, key, float(number) if key == "threshold" else int(number))
    for key in ("create_response", "interrupt_response"):
        flag = value.get(key)
        if flag is not None:
            if not isinstance(flag, bool):
                raise _BadEvent(f"{key} must be a boolean", f"{param}.{key}")
            setattr(vad, key, flag)
    return vad


def _merge_settings(base: _Settings, body: dict[str, Any], where: str) -> _Settings:
    settings = _Settings(
        base.instructions,
        list(base.tools),
        base.tool_choice,
        base.max_output_tokens,
        list(base.modalities),
    )
    if "instructions" in body:
        if not isinstance(body["instructions"], str):
            raise _BadEvent("instructions must be a string", f"{where}.instructions")
        settings.instructions = body["instructions"]
    if "tools" in body:
        tools = body["tools"]
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise _BadEvent("tools must be a list of objects", f"{where}.tools")
        settings.tools = tools
    if "tool_choice" in body:
        settings.tool_choice = body["tool_choice"]
    for key in ("max_output_tokens", "max_response_output_tokens"):
        if key in body:
            value = body[key]
            if value == "inf":
                settings.max_output_tokens = None
            elif type(value) is int and 1 <= value <= 4096:
                settings.max_output_tokens = value
            else:
                raise _BadEvent(f"{key} must be 1..4096 or 'inf'", f"{where}.{key}")
    for key in ("output_modalities", "modalities"):
        if key in body:
            value = body[key]
            if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
                raise _BadEvent(f"{key} must be a list of strings", f"{where}.{key}")
            settings.modalities = value
    return settings


def _item_text(item: dict[str, Any]) -> str:
    if item.get("type") == "function_call_output":
        return str(item.get("output", ""))
    if item.get("type") == "function_call":
        return f"{item.get('name', '')}{item.get('arguments', '')}"
    content = item.get("content")
    if not isinstance(content, list):
        return ""
    texts = [
        part.get("text") or part.get("transcript") or ""
        for part in content
        if isinstance(part, dict)
    ]
    return "".join(t for t in texts if isinstance(t, str))
