"""The OpenAI-compatible audio routes, read: speech to text and text to speech.

Pure and stdlib-only, like `chainlat.httpx._formats`. ``/audio/transcriptions`` and
``/audio/translations`` take a multipart form (the audio file and a few text fields:
only the text fields are read, never the file); their answer is JSON, plain text, or a
stream of ``transcript.text.delta`` / ``transcript.text.done`` events. ``/audio/speech``
takes JSON and answers with audio bytes (streamed as they are made) or, with
``stream_format="sse"``, ``speech.audio.delta`` / ``speech.audio.done`` events.

Neither the audio nor the text to speak is ever recorded: a speech call records counts
(characters, bytes, seconds, tokens), the voice and the language.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat.httpx._formats import AttributeDict, Facts, Reader, Truncator
from chainlat.httpx._routes import Format

AUDIO_FORMATS: Final = frozenset({"openai_transcriptions", "openai_speech"})
"""The wire formats of the audio routes."""

MAX_FIELD_CHARS: Final = 256
"""Longer form fields are not read (a prompt to the transcriber is not a setting)."""

_DEFAULT_SPEECH_FORMAT: Final = "mp3"


def form_fields(request: Any) -> dict[str, str]:
    """The short text fields of a multipart request; files are never touched.

    httpx and httpx2 keep a form's fields on the request's ``MultipartStream`` until it is
    sent: the text fields are read there, without encoding (or reading) the audio file.
    """
    found: dict[str, str] = {}
    for field in getattr(request.stream, "fields", ()) or ():
        if hasattr(field, "file"):
            continue  # the audio: never read
        name = getattr(field, "name", None)
        value = getattr(field, "value", None)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(name, str) and isinstance(value, str) and len(value) <= MAX_FIELD_CHARS:
            found[name] = value
    return found


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def audio_request_attributes(fmt: Format, values: Mapping[str, object]) -> AttributeDict:
    """The request attributes of a speech call, from its form fields or JSON body."""
    out: AttributeDict = {}
    if fmt == "openai_transcriptions":
        stream = values.get("stream")
        out[attr.GEN_AI_REQUEST_STREAM] = stream is True or stream == "true"
        language = _text(values.get("language"))
        if language is not None:
            out[attr.GEN_AI_SPEECH_INPUT_LANGUAGE] = language
        return out
    out[attr.GEN_AI_OUTPUT_TYPE] = "speech"
    out[attr.GEN_AI_REQUEST_STREAM] = values.get("stream_format") == "sse"
    voice = values.get("voice")
    if isinstance(voice, dict):  # a custom voice, given by id
        voice = voice.get("id")
    voice = _text(voice)
    if voice is not None:
        out[attr.GEN_AI_SPEECH_VOICE] = voice
    out[attr.AUDIO_FORMAT] = _text(values.get("response_format")) or _DEFAULT_SPEECH_FORMAT
    text = values.get("input")
    if isinstance(text, str):
        out[attr.SPEECH_INPUT_CHARACTERS] = len(text)
    return out


@dataclass
class AudioFacts(Facts):
    """What a speech call's response said of itself, beyond a chat call's facts."""

    audio_input_tokens: int | None = None
    audio_output_tokens: int | None = None
    audio_bytes: int | None = None
    input_seconds: float | None = None
    transcript_chars: int | None = None

    def attributes(self, capture: Truncator | None) -> AttributeDict:
        out = super().attributes(capture)
        for key, value in (
            (attr.GEN_AI_USAGE_AUDIO_INPUT_TOKENS, self.audio_input_tokens),
            (attr.GEN_AI_USAGE_AUDIO_OUTPUT_TOKENS, self.audio_output_tokens),
            (attr.AUDIO_OUTPUT_BYTES, self.audio_bytes),
            (attr.AUDIO_INPUT_SECONDS, self.input_seconds),
            (attr.TRANSCRIPT_CHARACTERS, self.transcript_chars),
        ):
            if value is not None:
                out[key] = value
        return out


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return float(value)


class _AudioReader(Reader):
    def __init__(self, capture_chars: int | None) -> None:
        super().__init__(capture_chars)
        self.facts: AudioFacts = AudioFacts()

    def _usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        facts = self.facts
        if usage.get("type") == "duration":  # whisper-1 bills by the second
            facts.input_seconds = _seconds(usage.get("seconds"))
            return
        facts.input_tokens = _int(usage.get("input_tokens"))
        facts.output_tokens = _int(usage.get("output_tokens"))
        details = usage.get("input_token_details")
        if isinstance(details, dict):
            facts.audio_input_tokens = _int(details.get("audio_tokens"))
        details = usage.get("output_token_details")
        if isinstance(details, dict):
            facts.audio_output_tokens = _int(details.get("audio_tokens"))


class TranscriptionReader(_AudioReader):
    """``/audio/transcriptions`` and ``/audio/translations``: JSON, or a transcript stream."""

    def _transcript(self, text: object) -> None:
        if isinstance(text, str):
            self.facts.transcript_chars = len(text)
            if not self.facts.text:
                self._keep_text(text)

    def body(self, data: object) -> None:
        if not isinstance(data, dict):
            return
        self._transcript(data.get("text"))
        self.facts.finish_reasons[0] = "stop"
        duration = _seconds(data.get("duration"))
        if duration is not None:
            self.facts.input_seconds = duration
        self._usage(data.get("usage"))

    def event(self, name: str | None, data: object) -> bool:
        if not isinstance(data, dict):
            return False
        kind = data.get("type") or name
        if kind == "transcript.text.delta":
            delta = data.get("delta")
            if isinstance(delta, str) and delta:
                self._keep_text(delta)
                return True
            return False
        if kind == "transcript.text.done":
            self.facts.text.clear()
            self.facts.text_chars = 0
            self.body(data)
        elif kind == "error":
            self.facts.error_type = _text(data.get("code")) or "error"
        return False


class SpeechReader(_AudioReader):
    """``/audio/speech`` with ``stream_format="sse"``: audio in base64 events."""

    def event(self, name: str | None, data: object) -> bool:
        if not isinstance(data, dict):
            return False
        kind = data.get("type") or name
        if kind == "speech.audio.delta":
            audio = data.get("audio")
            if isinstance(audio, str) and audio:
                size = len(audio) * 3 // 4 - audio.count("=", len(audio) - 2)
                self.facts.audio_bytes = (self.facts.audio_bytes or 0) + size
                return True
            return False
        if kind == "speech.audio.done":
            self.facts.finish_reasons[0] = "stop"
            self._usage(data.get("usage"))
        elif kind == "error":
            self.facts.error_type = _text(data.get("code")) or "error"
        return False

    def audio_bytes(self, count: int) -> None:
        """``count`` more bytes of audio arrived as the raw body."""
        self.facts.audio_bytes = (self.facts.audio_bytes or 0) + count


def audio_reader_for(fmt: Format, capture_chars: int | None) -> Reader | None:
    """A fresh reader for one speech call's response; None for the other formats."""
    if fmt == "openai_transcriptions":
        return TranscriptionReader(capture_chars)
    if fmt == "openai_speech":
        return SpeechReader(None)  # nothing of the audio is ever kept
    return None
