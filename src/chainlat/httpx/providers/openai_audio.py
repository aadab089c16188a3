"""The OpenAI-compatible audio routes, read: speech to text and text to speech.

Pure and stdlib-only, like every wire format. ``/audio/transcriptions`` and
``/audio/translations`` take a multipart form (the audio file and a few text fields:
only the text fields are read, never the file); their answer is JSON, plain text, or a
stream of ``transcript.text.delta`` / ``transcript.text.done`` events. ``/audio/speech``
takes JSON and answers with audio bytes (streamed as they are made) or, with
``stream_format="sse"``, ``speech.audio.delta`` / ``speech.audio.done`` events.

Neither the audio nor the text to speak is ever recorded: a speech call records counts
(characters, bytes, seconds, tokens), the voice and the language.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat.httpx._wire import (
    AttributeDict,
    DefaultRoute,
    Facts,
    Reader,
    Truncator,
    WireFormat,
    as_str,
)

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


def transcription_request(values: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    """A transcription's request attributes, from its form fields (never its audio)."""
    out: AttributeDict = {}
    stream = values.get("stream")
    out[attr.GEN_AI_REQUEST_STREAM] = stream is True or stream == "true"
    language = as_str(values.get("language"))
    if language is not None:
        out[attr.GEN_AI_SPEECH_INPUT_LANGUAGE] = language
    return out


def speech_request(values: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    """A speech request's attributes, from its JSON body: counts, never the text to speak."""
    out: AttributeDict = {}
    out[attr.GEN_AI_OUTPUT_TYPE] = "speech"
    out[attr.GEN_AI_REQUEST_STREAM] = values.get("stream_format") == "sse"
    voice = values.get("voice")
    if isinstance(voice, dict):  # a custom voice, given by id
        voice = voice.get("id")
    voice = as_str(voice)
    if voice is not None:
        out[attr.GEN_AI_SPEECH_VOICE] = voice
    out[attr.AUDIO_FORMAT] = as_str(values.get("response_format")) or _DEFAULT_SPEECH_FORMAT
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


def _count(value: object) -> int | None:
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
        facts.input_tokens = _count(usage.get("input_tokens"))
        facts.output_tokens = _count(usage.get("output_tokens"))
        details = usage.get("input_token_details")
        if isinstance(details, dict):
            facts.audio_input_tokens = _count(details.get("audio_tokens"))
        details = usage.get("output_token_details")
        if isinstance(details, dict):
            facts.audio_output_tokens = _count(details.get("audio_tokens"))


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
            self.facts.error_type = as_str(data.get("code")) or "error"
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
            self.facts.error_type = as_str(data.get("code")) or "error"
        return False

    def output_bytes(self, count: int) -> None:
        """``count`` more bytes of audio arrived as the raw body."""
        self.facts.audio_bytes = (self.facts.audio_bytes or 0) + count


def _speech_reader(capture_chars: int | None) -> SpeechReader:
    return SpeechReader(None)  # nothing of the audio is ever kept


FORMATS: Final = (
    # A multipart form, which is not decoded as JSON: the path alone recognises the call.
    WireFormat(
        "openai_transcriptions",
        "openai",
        transcription_request,
        TranscriptionReader,
        (
            DefaultRoute("/audio/transcriptions", "speech_to_text"),
            DefaultRoute("/audio/translations", "speech_to_text"),
        ),
        content_never_recorded=True,
        read_form=form_fields,
    ),
    WireFormat(
        "openai_speech",
        "openai",
        speech_request,
        _speech_reader,
        (DefaultRoute("/audio/speech", "text_to_speech", ("input",)),),
        content_never_recorded=True,
        raw_output=True,
    ),
)
