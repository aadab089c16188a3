"""Speech calls at the wire: the real openai SDK against chainlat.sim on 127.0.0.1.

Timing is checked as floors (a client-side duration spanning an injected delay is never
shorter than it, less `EARLY_MS`); counts, sizes and attributes exactly.
"""

from __future__ import annotations

import io
import json
import wave
from collections.abc import Iterator, Mapping

import httpx2
import openai
import pytest

from chainlat._core import attributes as attr
from chainlat.httpx import TracingTransport
from chainlat.sim import ModelProfile, SimServer, VoiceProfile
from chainlat.testing import Capture
from support import SimOptions

EARLY_MS = 2.0
"""Clock reads on both sides of a loopback socket."""
NETWORK_MS = 20.0
TTS = VoiceProfile("tts-test", "text_to_speech", first_byte_ms=80.0, real_time_factor=4.0)
STT = VoiceProfile("stt-test", "speech_to_text", first_byte_ms=60.0, ms_per_audio_second=10.0)
TEXT = "Your table for two is booked at eight."  # 38 characters: 2470 ms of audio
SECRET_TEXT = "my card number is 4111"


@pytest.fixture
def sim_options() -> SimOptions:
    return SimOptions(
        profiles=[ModelProfile("sim-chat")], voices=[TTS, STT], network_delay_ms=NETWORK_MS
    )


@pytest.fixture
def client(sim: SimServer, live: Capture) -> Iterator[openai.OpenAI]:
    transport = TracingTransport(httpx2.HTTPTransport(), tracer_provider=live.provider)
    with openai.OpenAI(
        base_url=sim.base_url + "/v1",
        api_key="sk-test",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    ) as client:
        yield client


def recording(seconds: float) -> bytes:
    """A silent 16 kHz mono wav recording of ``seconds``."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(bytes(2 * round(16_000 * seconds)))
    return out.getvalue()


def no_content(attributes: Mapping[str, object], *texts: str) -> None:
    for key, value in attributes.items():
        for text in texts:
            assert text not in str(value), f"{key} holds request content"


def test_speech_streams_valid_wav_and_times_the_first_audio_byte(
    client: openai.OpenAI, live: Capture
) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="tts-test", voice="alloy", input=TEXT, response_format="wav"
    ) as response:
        chunks = list(response.iter_bytes())
    audio = b"".join(chunks)
    with wave.open(io.BytesIO(audio)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24_000, 1, 2)
        assert w.getnframes() == round(TTS.audio_ms(TEXT) * 24)  # 2470 ms at 24 kHz
        assert w.readframes(w.getnframes()) == bytes(2 * w.getnframes())  # silence
    span = live.span("text_to_speech tts-test")
    a = dict(span.attributes or {})
    assert a[attr.GEN_AI_OPERATION_NAME] == "text_to_speech"
    assert a[attr.GEN_AI_OUTPUT_TYPE] == "speech"
    assert a[attr.GEN_AI_SPEECH_VOICE] == "alloy"
    assert a[attr.AUDIO_FORMAT] == "wav"
    assert a[attr.SPEECH_INPUT_CHARACTERS] == len(TEXT)
    assert a[attr.AUDIO_OUTPUT_BYTES] == len(audio)
    assert a[attr.GEN_AI_REQUEST_STREAM] is False
    assert a[attr.STREAM_CHUNKS] == len(TTS.chunk_offsets_ms(TEXT))  # 26 chunks of 96 ms
    no_content(a, TEXT)
    # The first audio byte: network + first_byte_ms; the last: + 25 chunks at 96 / 4 ms.
    # (A late first chunk shortens the generation: the floor is on the last chunk's time.)
    ttft_ms = float(a[attr.LATENCY_TTFT_MS])  # type: ignore[arg-type]
    last_ms = ttft_ms + float(a[attr.LATENCY_GENERATION_MS])  # type: ignore[arg-type]
    assert ttft_ms >= NETWORK_MS + TTS.first_byte_ms - EARLY_MS
    assert last_ms >= NETWORK_MS + TTS.first_byte_ms + 25 * 24.0 - EARLY_MS
    for key in (attr.LATENCY_WAIT_MS, attr.LATENCY_RECEIVE_MS, attr.LATENCY_SEND_MS):
        assert key in a


def test_speech_as_server_sent_events_records_audio_tokens(
    client: openai.OpenAI, live: Capture
) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="tts-test", voice="verse", input=TEXT, response_format="pcm", stream_format="sse"
    ) as response:
        events = [json.loads(line[6:]) for line in response.iter_lines() if line]
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert events[-1]["type"] == "speech.audio.done"
    a = dict(live.span("text_to_speech tts-test").attributes or {})
    assert a[attr.GEN_AI_REQUEST_STREAM] is True
    assert a[attr.STREAM_CHUNKS] == len(deltas) == 26
    assert a[attr.AUDIO_OUTPUT_BYTES] == round(TTS.audio_ms(TEXT) * 24) * 2
    usage = events[-1]["usage"]
    assert a[attr.GEN_AI_USAGE_INPUT_TOKENS] == usage["input_tokens"] == 10
    assert a[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == usage["output_tokens"]
    assert float(a[attr.LATENCY_TTFT_MS]) >= NETWORK_MS + TTS.first_byte_ms - EARLY_MS  # type: ignore[arg-type]


def test_speech_mp3_is_whole_silent_frames(client: openai.OpenAI) -> None:
    audio = client.audio.speech.create(
        model="tts-test", voice="alloy", input=TEXT, response_format="mp3"
    ).read()
    frames = [audio[i : i + 384] for i in range(0, len(audio), 384)]
    assert len(frames) == 103  # ceil(2470 / 24)
    assert all(f[:4] == b"\xff\xfb\x94\xc0" and len(f) == 384 for f in frames)


def test_streamed_transcription_times_the_first_delta_and_keeps_no_audio(
    client: openai.OpenAI, live: Capture
) -> None:
    audio = recording(2.0)
    stream = client.audio.transcriptions.create(
        model="stt-test",
        file=("turn.wav", audio, "audio/wav"),
        stream=True,
        language="en",
        prompt=SECRET_TEXT,
    )
    events = list(stream)
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    done = events[-1]
    assert done.type == "transcript.text.done"
    assert len(deltas) == STT.words(2.0) == 5
    a = dict(live.span("speech_to_text stt-test").attributes or {})
    assert a[attr.GEN_AI_OPERATION_NAME] == "speech_to_text"
    assert a[attr.GEN_AI_REQUEST_STREAM] is True
    assert a[attr.GEN_AI_SPEECH_INPUT_LANGUAGE] == "en"
    assert a[attr.STREAM_CHUNKS] == 5
    assert a[attr.TRANSCRIPT_CHARACTERS] == len(done.text)
    assert a[attr.GEN_AI_USAGE_INPUT_TOKENS] == 20
    assert a[attr.GEN_AI_USAGE_AUDIO_INPUT_TOKENS] == 20
    assert a[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert attr.GEN_AI_OUTPUT_MESSAGES not in a  # content is off by default
    no_content(a, SECRET_TEXT, done.text)
    # First word: network + 60 ms + 10 ms per second of audio.
    first_ms = NETWORK_MS + STT.first_word_ms(2.0)
    ttft_ms = float(a[attr.LATENCY_TTFT_MS])  # type: ignore[arg-type]
    assert ttft_ms >= first_ms - EARLY_MS
    last_ms = ttft_ms + float(a[attr.LATENCY_GENERATION_MS])  # type: ignore[arg-type]
    assert last_ms >= first_ms + 4 * STT.ms_per_word - EARLY_MS


@pytest.mark.parametrize("path", ["transcriptions", "translations"])
def test_whole_transcription_is_a_speech_to_text_call(
    client: openai.OpenAI, live: Capture, path: str
) -> None:
    audio = ("turn.wav", recording(1.2), "audio/wav")
    if path == "transcriptions":
        text = client.audio.transcriptions.create(model="stt-test", file=audio).text
    else:
        with pytest.warns(DeprecationWarning, match="deprecated"):  # so the SDK marks it
            text = client.audio.translations.create(model="stt-test", file=audio).text
    a = dict(live.span("speech_to_text stt-test").attributes or {})
    assert a[attr.GEN_AI_REQUEST_MODEL] == "stt-test"
    assert a[attr.GEN_AI_REQUEST_STREAM] is False
    assert a[attr.TRANSCRIPT_CHARACTERS] == len(text)
    assert a[attr.GEN_AI_USAGE_AUDIO_INPUT_TOKENS] == 12
    assert attr.LATENCY_TTFT_MS not in a  # a whole answer has no first chunk
    assert float(a[attr.LATENCY_WAIT_MS]) >= NETWORK_MS + STT.first_word_ms(1.2) - EARLY_MS  # type: ignore[arg-type]


def test_an_unknown_speech_model_is_a_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.audio.speech.create(model="sim-chat", voice="alloy", input=TEXT)


@pytest.mark.parametrize(
    ("path", "body", "status", "says"),
    [
        ("/v1/audio/speech", {"model": "tts-test", "voice": "a", "input": "hi",
                              "response_format": "opus"}, 400, "wav, pcm, mp3"),
        ("/v1/audio/speech", {"model": "tts-test", "voice": "a"}, 400, "'input'"),
        ("/v1/audio/transcriptions", {"model": "stt-test"}, 400, "multipart"),
        ("/v1/audio/transcriptions", None, 400, "multipart"),
    ],
)  # fmt: skip
def test_the_simulator_answers_a_bad_audio_request_with_one_line(
    sim: SimServer, path: str, body: dict[str, str] | None, status: int, says: str
) -> None:
    with httpx2.Client(base_url=sim.base_url) as http:
        response = http.post(path, json=body) if body is not None else http.post(path)
    assert response.status_code == status
    assert says in response.json()["error"]["message"]


def test_a_transcription_without_a_file_is_refused(sim: SimServer) -> None:
    with httpx2.Client(base_url=sim.base_url) as http:
        response = http.post("/v1/audio/transcriptions", data={"model": "stt-test"}, files={})
        assert response.status_code == 400
        form = http.post(
            "/v1/audio/transcriptions",
            files={"model": (None, "stt-test"), "language": (None, "en")},
        )
    assert form.status_code == 400
    assert "'file'" in form.json()["error"]["message"]


def test_with_content_on_the_transcript_is_kept_and_the_text_to_speak_is_not(
    sim: SimServer, live: Capture
) -> None:
    transport = TracingTransport(
        httpx2.HTTPTransport(), tracer_provider=live.provider, capture_content=True
    )
    with openai.OpenAI(
        base_url=sim.base_url + "/v1",
        api_key="sk-test",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    ) as client:
        client.audio.speech.create(model="tts-test", voice="alloy", input=SECRET_TEXT).read()
        text = client.audio.transcriptions.create(
            model="stt-test", file=("t.wav", recording(0.8), "audio/wav"), prompt=SECRET_TEXT
        ).text
    speech = dict(live.span("text_to_speech tts-test").attributes or {})
    no_content(speech, SECRET_TEXT)
    transcription = dict(live.span("speech_to_text stt-test").attributes or {})
    no_content(transcription, SECRET_TEXT)
    assert text in str(transcription[attr.GEN_AI_OUTPUT_MESSAGES])
