"""The simulator's audio endpoints: speech to text and text to speech, with voice profiles.

``POST /v1/audio/transcriptions`` and ``/v1/audio/translations`` read a multipart form
(``model``, ``file``, ``stream``, ``response_format``) and answer with a transcript of
filler words: JSON, plain text, or a stream of ``transcript.text.delta`` events and a
``transcript.text.done``. ``POST /v1/audio/speech`` reads JSON (``model``, ``input``,
``voice``, ``response_format``, ``stream_format``) and streams valid silent audio in
real time as the profile says: wav, pcm (24 kHz, 16-bit mono) or mp3 (48 kHz mono), as
chunked bytes, or as ``speech.audio.delta`` events with ``stream_format="sse"``.

Both keep to OpenAI's limits, so that no request can grow the server without bound:
``input`` is at most `MAX_SPEECH_CHARACTERS` (4,096) characters and the audio is made a
chunk at a time; an upload is read as ``_upload`` says (a file of at most 25 MB, a wav
header that agrees with itself and the file, at most 1,500 seconds of audio).

The latency model of a `VoiceProfile`:

- text to speech: the first audio byte ``first_byte_ms`` (plus
  ``first_byte_ms_per_character`` per character of input) after the request (plus the
  network delay), then a chunk of ``chunk_ms`` of audio every ``chunk_ms /
  real_time_factor``; the audio lasts ``ms_per_character`` per character of input.
- speech to text: the first transcript word ``first_byte_ms + ms_per_audio_second x
  seconds of audio`` after the request, then a word every ``ms_per_word``.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from chainlat._core.errors import ProfileError
from chainlat.sim._formats import (
    ApiError,
    count_tokens,
    generate_tokens,
    invalid_type,
    load_json,
)
from chainlat.sim._http import Headers, Request, Responder
from chainlat.sim._upload import audio_seconds, parse_form

AUDIO_PATHS: Final = frozenset(
    {"/v1/audio/transcriptions", "/v1/audio/translations", "/v1/audio/speech"}
)
AUDIO_FORMATS: Final = ("wav", "pcm", "mp3")
"""The audio formats the simulator speaks."""
MAX_SPEECH_CHARACTERS: Final = 4096
"""The longest ``input`` text to speech takes, OpenAI's limit."""
PCM_RATE: Final = 24_000
"""Samples per second of wav and pcm output (16-bit mono), as OpenAI's ``pcm`` format."""
_MP3_FRAME: Final = bytes([0xFF, 0xFB, 0x94, 0xC0]) + bytes(380)
"""One MPEG-1 Layer III frame, 128 kbit/s, 48 kHz, mono: 384 bytes, 24 ms of silence
(side information all zero: no coded samples)."""
_MP3_FRAME_MS: Final = 24.0

VoiceOperation = Literal["speech_to_text", "text_to_speech"]


@dataclass(frozen=True)
class VoiceProfile:
    """How long one simulated speech model takes.

    Example:
        >>> VoiceProfile("tts-fast", "text_to_speech", first_byte_ms=100).audio_ms("Hello")
        325.0

    Attributes:
        name: Model name clients ask for.
        operation: ``speech_to_text`` or ``text_to_speech``.
        first_byte_ms: Text to speech: time to the first audio byte. Speech to text:
            time to the first transcript word for an empty recording.
        real_time_factor: Text to speech: seconds of audio made per second (> 1 is faster
            than real time).
        ms_per_character: Text to speech: length of the audio per character spoken.
        chunk_ms: Text to speech: audio per streamed chunk.
        ms_per_audio_second: Speech to text: added time to the first word per second of
            audio.
        ms_per_word: Speech to text: time between two transcript words.
        words_per_second: Speech to text: words in the transcript per second of audio.
        first_byte_ms_per_character: Text to speech: added time to the first audio byte
            per character of input.
    """

    name: str
    operation: VoiceOperation
    first_byte_ms: float = 200.0
    real_time_factor: float = 4.0
    ms_per_character: float = 65.0
    chunk_ms: float = 96.0
    ms_per_audio_second: float = 20.0
    ms_per_word: float = 15.0
    words_per_second: float = 2.5
    first_byte_ms_per_character: float = 0.0

    def __post_init__(self) -> None:
        if self.operation not in ("speech_to_text", "text_to_speech"):
            raise ProfileError(f"VoiceProfile {self.name!r}: operation: {self.operation!r}")
        for key in (
            "first_byte_ms",
            "ms_per_character",
            "ms_per_audio_second",
            "ms_per_word",
            "first_byte_ms_per_character",
        ):
            value = getattr(self, key)
            if not math.isfinite(value) or value < 0:
                raise ProfileError(f"VoiceProfile {self.name!r}: {key}: expected a number >= 0")
        for key in ("real_time_factor", "chunk_ms", "words_per_second"):
            value = getattr(self, key)
            if not math.isfinite(value) or value <= 0:
                raise ProfileError(f"VoiceProfile {self.name!r}: {key}: expected a number > 0")

    def audio_ms(self, text: str) -> float:
        """Text to speech: how long the audio of ``text`` lasts."""
        return max(len(text) * self.ms_per_character, self.chunk_ms)

    def chunk_offsets_ms(self, text: str) -> list[float]:
        """Text to speech: when each chunk of audio is sent, from the request's start."""
        count = max(1, math.ceil(self.audio_ms(text) / self.chunk_ms))
        step = self.chunk_ms / self.real_time_factor
        first = self.first_byte_ms + self.first_byte_ms_per_character * len(text)
        return [first + i * step for i in range(count)]

    def first_word_ms(self, audio_seconds: float) -> float:
        """Speech to text: time to the first transcript word."""
        return self.first_byte_ms + self.ms_per_audio_second * audio_seconds

    def words(self, audio_seconds: float) -> int:
        """Speech to text: words in the transcript of ``audio_seconds`` of audio."""
        return max(1, round(audio_seconds * self.words_per_second))


DEFAULT_VOICE_PROFILES: Final = (
    VoiceProfile("sim-stt", "speech_to_text", first_byte_ms=120.0, ms_per_audio_second=15.0),
    VoiceProfile("sim-stt-slow", "speech_to_text", first_byte_ms=300.0, ms_per_audio_second=40.0),
    VoiceProfile("sim-tts", "text_to_speech", first_byte_ms=150.0, real_time_factor=6.0),
    VoiceProfile("sim-tts-hd", "text_to_speech", first_byte_ms=400.0, real_time_factor=2.0),
)
"""The speech models ``chainlat sim`` serves when given none."""


# --- silent audio --------------------------------------------------------------------------
def _wav_header(data_bytes: int) -> bytes:
    return (
        b"RIFF"
        + struct.pack("<I", 36 + data_bytes)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, PCM_RATE, PCM_RATE * 2, 2, 16)
        + b"data"
        + struct.pack("<I", data_bytes)
    )


def silent_chunks(fmt: str, audio_ms: float, chunks: int) -> Iterator[bytes]:
    """``audio_ms`` of valid silence in ``fmt``, cut into ``chunks`` pieces (the wav header,
    when there is one, at the front of the first); every piece holds whole frames. Made one
    piece at a time, so a long recording never sits in memory whole."""
    if fmt == "mp3":
        frames = max(1, math.ceil(audio_ms / _MP3_FRAME_MS))
        for i in range(chunks):
            yield _MP3_FRAME * (frames // chunks + (1 if i < frames % chunks else 0))
        return
    samples = max(1, round(audio_ms * PCM_RATE / 1000))
    for i in range(chunks):
        piece = bytes(2 * (samples // chunks + (1 if i < samples % chunks else 0)))
        yield _wav_header(2 * samples) + piece if fmt == "wav" and i == 0 else piece


# --- requests ------------------------------------------------------------------------------
def _field(fields: dict[str, memoryview], name: str) -> str | None:
    value = fields.get(name)
    return bytes(value).decode("utf-8", "replace") if value is not None else None


Sleep = Callable[[int], Awaitable[None]]


class AudioRoutes:
    """Serves the audio endpoints for the simulator's engine."""

    def __init__(self, profiles: Iterable[VoiceProfile], seed: int) -> None:
        self._profiles = {p.name: p for p in profiles}
        self._seed = seed

    @property
    def names(self) -> Sequence[str]:
        return tuple(self._profiles)

    def _profile(self, model: object, operation: VoiceOperation) -> VoiceProfile:
        if model is None or model == "":
            raise ApiError(400, "missing required parameter: 'model'", param="model")
        if not isinstance(model, str):
            raise invalid_type("model", "a string", model)
        profile = self._profiles.get(model)
        if profile is None or profile.operation != operation:
            message = f"The model `{model}` does not exist or you do not have access to it."
            raise ApiError(404, message, "model_not_found")
        return profile

    async def serve(
        self,
        request: Request,
        responder: Responder,
        start_ns: int,
        sleep_until: Sleep,
        headers: Callable[[], Headers],
        finish: Callable[[int], None],
    ) -> None:
        """Answer one audio request whose processing started at ``start_ns`` (perf_counter)."""
        if request.method != "POST":
            raise ApiError(405, "use POST")
        if request.path == "/v1/audio/speech":
            await self._speech(request, responder, start_ns, sleep_until, headers, finish)
        else:
            await self._transcribe(request, responder, start_ns, sleep_until, headers, finish)

    def _speech_request(self, body: object) -> tuple[VoiceProfile, str, str, bool]:
        """(voice, input, response_format, streamed as SSE) of a speech request."""
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        profile = self._profile(body.get("model"), "text_to_speech")
        text = body.get("input")
        if text is None or text == "":
            raise ApiError(400, "missing required parameter: 'input'", param="input")
        if not isinstance(text, str):
            raise invalid_type("input", "a string", text)
        if len(text) > MAX_SPEECH_CHARACTERS:
            message = f"'input' is {len(text)} characters long, at most {MAX_SPEECH_CHARACTERS}"
            raise ApiError(400, message, "string_above_max_length", "input")
        fmt = body.get("response_format", "mp3")
        if not isinstance(fmt, str) or fmt not in AUDIO_FORMATS:
            message = f"response_format {fmt!r}: the simulator speaks wav, pcm, mp3"
            raise ApiError(400, message, param="response_format")
        stream_format = body.get("stream_format")
        if not isinstance(stream_format, str) and stream_format is not None:
            raise invalid_type("stream_format", "a string", stream_format)
        return profile, text, fmt, stream_format == "sse"

    async def _speech(
        self,
        request: Request,
        responder: Responder,
        start_ns: int,
        sleep_until: Sleep,
        headers: Callable[[], Headers],
        finish: Callable[[int], None],
    ) -> None:
        profile, text, fmt, sse = self._speech_request(load_json(request.body))
        offsets = profile.chunk_offsets_ms(text)
        chunks = silent_chunks(fmt, profile.audio_ms(text), len(offsets))
        content_type = "text/event-stream" if sse else _MIME[fmt]
        await responder.start_chunked(200, [("content-type", content_type), *headers()])
        for offset_ms, chunk in zip(offsets, chunks, strict=True):
            await sleep_until(start_ns + round(offset_ms * 1e6))
            if sse:
                event = {"type": "speech.audio.delta", "audio": base64.b64encode(chunk).decode()}
                await responder.chunk(_sse(event))
            else:
                await responder.chunk(chunk)
        if sse:
            tokens_in = count_tokens(text)
            tokens_out = round(profile.audio_ms(text) / 1000 * 20)
            usage = {
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            }
            finish(200)
            await responder.chunk(_sse({"type": "speech.audio.done", "usage": usage}))
        else:
            finish(200)
        await responder.end_chunked()

    async def _transcribe(
        self,
        request: Request,
        responder: Responder,
        start_ns: int,
        sleep_until: Sleep,
        headers: Callable[[], Headers],
        finish: Callable[[int], None],
    ) -> None:
        fields = parse_form(request.headers.get("content-type", ""), request.body)
        profile = self._profile(_field(fields, "model"), "speech_to_text")
        audio = fields.get("file")
        if audio is None:
            raise ApiError(400, "missing required parameter: 'file'", param="file")
        seconds = audio_seconds(audio)
        words = generate_tokens(self._seed, profile.name, str(len(audio)), profile.words(seconds))
        text = "".join(words)
        fmt = _field(fields, "response_format") or "json"
        stream = _field(fields, "stream") == "true"
        usage: dict[str, Any] = {
            "type": "tokens",
            "input_tokens": round(seconds * 10),
            "input_token_details": {"text_tokens": 0, "audio_tokens": round(seconds * 10)},
            "output_tokens": len(words),
            "total_tokens": round(seconds * 10) + len(words),
        }
        first_ns = start_ns + round(profile.first_word_ms(seconds) * 1e6)
        step_ns = profile.ms_per_word * 1e6
        if stream:
            sse_headers = [("content-type", "text/event-stream; charset=utf-8"), *headers()]
            await responder.start_chunked(200, sse_headers)
            for index, word in enumerate(words):
                await sleep_until(first_ns + round(index * step_ns))
                await responder.chunk(_sse({"type": "transcript.text.delta", "delta": word}))
            finish(200)
            done = {"type": "transcript.text.done", "text": text, "usage": usage}
            await responder.chunk(_sse(done))
            await responder.end_chunked()
            return
        await sleep_until(first_ns + round((len(words) - 1) * step_ns))
        if fmt == "text":
            payload, content_type = text.encode(), "text/plain; charset=utf-8"
        else:
            answer: dict[str, Any] = {"text": text, "usage": usage}
            if fmt == "verbose_json":
                answer.update(task="transcribe", language="english", duration=seconds)
            payload, content_type = json.dumps(answer).encode(), "application/json"
        response_headers = [("content-type", content_type), *headers()]
        finish(200)
        await responder.send(200, response_headers, payload)


_MIME: Final = {"wav": "audio/wav", "pcm": "audio/pcm", "mp3": "audio/mpeg"}


def _sse(value: object) -> bytes:
    return b"data: " + json.dumps(value, separators=(",", ":")).encode() + b"\n\n"
