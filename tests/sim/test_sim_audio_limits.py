"""chainlat.sim's audio routes in bounded memory: speech ``input`` over 4,096 characters,
an upload over 25 MB, a wav header that lies about its byte rate or its data, and a
recording over 1,500 seconds are refused with one line in OpenAI's error shape, the
server's peak memory (traced in this process, where the server thread runs) stays within
a stated bound, and the server keeps answering.

Client timeouts here only stop a test that would hang; they are no pass mark.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import tracemalloc
from collections.abc import Iterator

import httpx
import pytest

from chainlat.sim import SimServer

MB = 1024 * 1024
BOUND_S = 30.0
"""How long a request may take before the test stops waiting (before the fixes, these hung)."""


@contextlib.contextmanager
def peak_bytes() -> Iterator[list[int]]:
    """The peak of memory traced in this process (every thread) while inside, in bytes."""
    peak: list[int] = []
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield peak
    finally:
        peak.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


def wav(*, rate: int = 16_000, channels: int = 1, bits: int = 16, byte_rate: int | None = None,
        data_bytes: int, declared: int | None = None) -> bytes:  # fmt: skip
    """A PCM wav file of ``data_bytes`` of silence whose header says what it is told."""
    byte_rate = rate * channels * bits // 8 if byte_rate is None else byte_rate
    declared = data_bytes if declared is None else declared
    fmt = struct.pack("<HHIIHH", 1, channels, rate, byte_rate, channels * bits // 8, bits)
    return (
        b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVE"
        + b"fmt " + struct.pack("<I", 16) + fmt
        + b"data" + struct.pack("<I", declared) + bytes(data_bytes)
    )  # fmt: skip


def error_of(response: httpx.Response) -> dict[str, object]:
    """The OpenAI error object of a response, checked for its shape and its one line."""
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert isinstance(error["message"], str) and "\n" not in error["message"]
    return dict(error)


def still_answers(sim: SimServer) -> None:
    response = httpx.get(sim.base_url + "/v1/models", timeout=BOUND_S)
    assert response.status_code == 200


def transcribe(sim: SimServer, audio: bytes, path: str = "transcriptions") -> httpx.Response:
    return httpx.post(
        f"{sim.base_url}/v1/audio/{path}",
        data={"model": "fast-stt"},
        files={"file": ("turn.wav", audio, "audio/wav")},
        timeout=BOUND_S,
    )


# --- text to speech --------------------------------------------------------------------------


def test_speech_input_over_4096_characters_is_refused_in_bounded_memory(
    fast_sim: SimServer,
) -> None:
    """100,000 characters once grew the server to 2.9 GB; now a 400 naming the limit."""
    text = "Hello there. " * (100_000 // 13)
    with peak_bytes() as peak:
        response = httpx.post(
            fast_sim.base_url + "/v1/audio/speech",
            json={"model": "fast-tts", "voice": "alloy", "input": text},
            timeout=BOUND_S,
        )
    assert response.status_code == 400
    error = error_of(response)
    assert error["param"] == "input"
    assert error["message"] == f"'input' is {len(text)} characters long, at most 4096"
    assert peak[0] < 16 * MB
    still_answers(fast_sim)


def test_speech_input_of_4096_characters_streams_a_chunk_at_a_time(fast_sim: SimServer) -> None:
    """At the limit the answer is 4.4 minutes of wav (12.8 MB), made and sent piece by piece."""
    received = 0
    with (
        peak_bytes() as peak,
        httpx.stream(
            "POST",
            fast_sim.base_url + "/v1/audio/speech",
            json={"model": "fast-tts", "voice": "a", "input": "x" * 4096, "response_format": "wav"},
            timeout=BOUND_S,
        ) as response,
    ):
        assert response.status_code == 200
        for piece in response.iter_raw():
            received += len(piece)
    assert received == 44 + 2 * round(4096 * 65.0 * 24)  # header + 16-bit samples at 24 kHz
    assert peak[0] < 8 * MB


# --- speech to text: the upload ------------------------------------------------------------


@pytest.mark.parametrize("path", ["transcriptions", "translations"])
def test_a_wav_header_with_byte_rate_1_is_refused_in_bounded_memory(
    fast_sim: SimServer, path: str
) -> None:
    """A 1 MB upload that says 1 byte a second once took 250 MB and never answered."""
    audio = wav(byte_rate=1, data_bytes=MB)
    with peak_bytes() as peak:
        response = transcribe(fast_sim, audio, path)
    assert response.status_code == 400
    error = error_of(response)
    assert error["param"] == "file"
    assert error["message"] == (
        "malformed wav file: a byte rate of 1, but 16000 Hz x 1 channels x 16 bits / 8 is 32000"
    )
    assert peak[0] < 8 * len(audio)
    still_answers(fast_sim)


def test_an_upload_over_25_mb_is_a_413_in_bounded_memory(fast_sim: SimServer) -> None:
    """30 MB once reached 800 MB. The server holds the body it read (twice, for a moment,
    as asyncio hands it over), never more: the bound is three times the upload."""
    size = 30 * MB
    boundary = "chainlat-test-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nfast-stt\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
        "Content-Type: audio/wav\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    with peak_bytes() as peak:
        # Sent a megabyte at a time from one buffer, so the client adds little to the peak.
        status_line, body = _post_raw(
            fast_sim,
            "/v1/audio/transcriptions",
            f"multipart/form-data; boundary={boundary}",
            [head, *([bytes(MB)] * (size // MB)), tail],
        )
    assert status_line.startswith(b"HTTP/1.1 413 ")
    message = f"'file' is {size} bytes, over the 25 MB limit (26214400 bytes)"
    assert message.encode() in body
    assert peak[0] < 3 * size
    still_answers(fast_sim)


def _post_raw(
    sim: SimServer, path: str, content_type: str, pieces: list[bytes]
) -> tuple[bytes, bytes]:
    """POST a body given in pieces over a raw socket; (status line, response body)."""
    length = sum(map(len, pieces))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", sim.port), timeout=BOUND_S) as conn:
        conn.sendall(head)
        for piece in pieces:
            conn.sendall(piece)
        answer = bytearray()
        while chunk := conn.recv(65536):
            answer += chunk
    status_line, _, rest = bytes(answer).partition(b"\r\n")
    return status_line, rest.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize(
    ("audio", "says"),
    [
        pytest.param(wav(data_bytes=1000, declared=MB),
                     "its data chunk says 1048576 bytes, the file holds 1000", id="data-past-end"),
        pytest.param(wav(rate=0, byte_rate=0, data_bytes=10),
                     "a sample rate of 0 Hz, expected 1000 to 384000", id="rate-0"),
        pytest.param(wav(rate=10**6, data_bytes=10),
                     "a sample rate of 1000000 Hz, expected 1000 to 384000", id="rate-1MHz"),
        pytest.param(wav(channels=0, data_bytes=10), "0 channels, expected 1 to 16",
                     id="channels-0"),
        pytest.param(wav(channels=300, data_bytes=10), "300 channels, expected 1 to 16",
                     id="channels-300"),
        pytest.param(wav(bits=12, data_bytes=10),
                     "12 bits a sample, expected one of 8, 16, 24, 32, 64", id="bits-12"),
        pytest.param(wav(data_bytes=10)[:36], "no data chunk", id="no-data"),
        pytest.param(wav(data_bytes=10)[:20], "its fmt chunk is shorter than 16 bytes",
                     id="short-fmt"),
    ],
)  # fmt: skip
def test_a_wav_header_that_disagrees_with_itself_or_the_file_is_refused(
    fast_sim: SimServer, audio: bytes, says: str
) -> None:
    response = transcribe(fast_sim, audio)
    assert response.status_code == 400
    assert error_of(response)["message"] == f"malformed wav file: {says}"


def test_a_recording_over_1500_seconds_is_refused(fast_sim: SimServer) -> None:
    """A valid header at 1 kHz 8-bit mono: 1,600,000 bytes are 1,600 seconds."""
    response = transcribe(fast_sim, wav(rate=1000, bits=8, data_bytes=1_600_000))
    assert response.status_code == 400
    error = error_of(response)
    assert (error["message"], error["code"]) == (
        "audio is 1600 seconds long, at most 1500",
        "audio_too_long",
    )


def test_a_recording_at_the_limits_is_transcribed(fast_sim: SimServer) -> None:
    """1,500 seconds at 1 kHz, and a data size of 0xFFFFFFFF ("to the end", as streaming
    writers leave it), are answered."""
    for audio in (
        wav(rate=1000, bits=8, data_bytes=1_500_000),
        wav(data_bytes=32_000, declared=0xFFFF_FFFF),
    ):
        response = transcribe(fast_sim, audio)
        assert response.status_code == 200, response.text
        assert response.json()["text"]
