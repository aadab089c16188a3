"""What a transcription upload holds: its form fields and its recording's length.

Read in memory and time bounded by the upload's size: the form is cut at its boundaries
over one view of the body (no copy of the file), a wav header is checked against itself
and the file before its length is believed, and the recording may last at most
`MAX_AUDIO_SECONDS`. Anything else is an `ApiError` with a one-line reason, 400 or, for
a file over OpenAI's 25 MB, 413.
"""

from __future__ import annotations

import re
import struct
from typing import Final

from chainlat.sim._formats import ApiError

MAX_UPLOAD_BYTES: Final = 25 * 1024 * 1024
"""The largest audio file, OpenAI's limit (26,214,400 bytes)."""
MAX_AUDIO_SECONDS: Final = 1500.0
"""The longest recording (25 minutes), as OpenAI's gpt-4o transcription models allow."""
MAX_FIELD_BYTES: Final = 64 * 1024
"""The largest form field other than the file (``model``, ``prompt``, ...)."""
MAX_FORM_PARTS: Final = 64
"""The most fields a form may have; OpenAI's transcription form has about a dozen."""
MAX_PART_HEAD_BYTES: Final = 16 * 1024
"""The most header bytes one form field may have."""
MAX_WAV_CHUNKS: Final = 64
"""The most RIFF chunks read before the ``data`` chunk (``fmt ``, ``LIST``, ``fact``...)."""
WAV_CHANNELS: Final = range(1, 17)
WAV_SAMPLE_RATES: Final = range(1_000, 384_001)
"""Sample rates a recording may have, in Hz: telephone audio to studio masters."""
RAW_BYTES_PER_SECOND: Final = 32_000
"""How a file that is not wav is read: 16 kHz 16-bit mono."""

# Encodings whose byte rate follows from the header's other fields: PCM, IEEE float,
# A-law, mu-law and WAVE_FORMAT_EXTENSIBLE (which holds one of them).
_FIXED_RATE_ENCODINGS: Final = frozenset({1, 3, 6, 7, 0xFFFE})
_SAMPLE_BITS: Final = frozenset({8, 16, 24, 32, 64})
_MIN_CODED_BYTE_RATE: Final = 500
"""A compressed encoding's least byte rate (4 kbit/s, below any speech codec)."""
_UNKNOWN_SIZE: Final = 0xFFFF_FFFF
"""A ``data`` size that means "to the end of the file", as streaming writers put it."""
_BOUNDARY: Final = re.compile(r'(?i)(?:^|;)\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^;\s"]{1,70}))')
_NAME: Final = re.compile(r'(?i)(?:^|;)\s*name\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s"]+))')


def parse_form(content_type: str, body: bytes) -> dict[str, memoryview]:
    """The fields of a ``multipart/form-data`` body by name, each a view of the body.

    Content-Transfer-Encoding is not read (RFC 7578 retired it; clients send raw bytes).
    The file may be at most `MAX_UPLOAD_BYTES`, other fields `MAX_FIELD_BYTES`.
    """
    if not content_type.lower().startswith("multipart/form-data"):
        raise ApiError(400, "expected a multipart/form-data body")
    found = _BOUNDARY.search(content_type)
    if found is None:
        raise ApiError(400, "malformed multipart body: no boundary in the content type")
    delimiter = b"--" + (found[1] or found[2]).encode("latin-1")
    view = memoryview(body)
    fields: dict[str, memoryview] = {}
    pos = body.find(delimiter)
    if pos < 0:
        raise ApiError(400, "malformed multipart body: no boundary in the body")
    pos += len(delimiter)
    while not body.startswith(b"--", pos):
        if len(fields) >= MAX_FORM_PARTS:
            raise ApiError(400, f"malformed multipart body: over {MAX_FORM_PARTS} fields")
        head_end = body.find(b"\r\n\r\n", pos, pos + MAX_PART_HEAD_BYTES)
        end = body.find(b"\r\n" + delimiter, max(head_end, pos))
        if head_end < 0 or end < 0:
            raise ApiError(400, "malformed multipart body: a field without an end")
        name = _field_name(body[pos:head_end])
        if name is not None:
            fields[name] = _checked(name, view[head_end + 4 : end])
        pos = end + 2 + len(delimiter)
    return fields


def _field_name(head: bytes) -> str | None:
    for line in head.decode("latin-1").split("\r\n"):
        key, _, value = line.partition(":")
        if key.strip().lower() == "content-disposition" and (found := _NAME.search(value)):
            return found[1] if found[1] is not None else found[2]
    return None


def _checked(name: str, payload: memoryview) -> memoryview:
    size = len(payload)
    if name == "file" and size > MAX_UPLOAD_BYTES:
        message = f"'file' is {size} bytes, over the 25 MB limit ({MAX_UPLOAD_BYTES} bytes)"
        raise ApiError(413, message, param="file")
    if name != "file" and size > MAX_FIELD_BYTES:
        message = f"form field {name[:40]!r} is {size} bytes, at most {MAX_FIELD_BYTES}"
        raise ApiError(400, message, param=name[:40])
    return payload


def audio_seconds(data: bytes | memoryview) -> float:
    """The length of an uploaded recording: from its header when it is wav (checked), else
    read as 16 kHz 16-bit mono; at most `MAX_AUDIO_SECONDS`."""
    if bytes(data[:4]) == b"RIFF" and bytes(data[8:12]) == b"WAVE":
        seconds = _wav_seconds(data)
    else:
        seconds = len(data) / RAW_BYTES_PER_SECOND
    if seconds > MAX_AUDIO_SECONDS:
        message = f"audio is {seconds:.0f} seconds long, at most {MAX_AUDIO_SECONDS:.0f}"
        raise ApiError(400, message, "audio_too_long", "file")
    return seconds


def _wav_seconds(data: bytes | memoryview) -> float:
    byte_rate = 0
    pos = 12
    for _ in range(MAX_WAV_CHUNKS):
        if pos + 8 > len(data):
            break
        chunk = bytes(data[pos : pos + 4])
        size: int = struct.unpack_from("<I", data, pos + 4)[0]
        start = pos + 8
        if chunk == b"fmt ":
            byte_rate = _wav_byte_rate(data, start, size)
        elif chunk == b"data":
            if not byte_rate:
                raise _bad_wav("the data chunk comes before the fmt chunk")
            held = len(data) - start
            if size == _UNKNOWN_SIZE:
                size = held
            elif size > held:
                raise _bad_wav(f"its data chunk says {size} bytes, the file holds {held}")
            return size / byte_rate
        pos = start + size + (size & 1)  # chunks are padded to an even length
    raise _bad_wav("no data chunk")


def _wav_byte_rate(data: bytes | memoryview, start: int, size: int) -> int:
    if size < 16 or start + 16 > len(data):
        raise _bad_wav("its fmt chunk is shorter than 16 bytes")
    encoding, channels, rate, byte_rate, _, bits = struct.unpack_from("<HHIIHH", data, start)
    if channels not in WAV_CHANNELS:
        raise _bad_wav(f"{channels} channels, expected 1 to {WAV_CHANNELS[-1]}")
    if rate not in WAV_SAMPLE_RATES:
        first, last = WAV_SAMPLE_RATES[0], WAV_SAMPLE_RATES[-1]
        raise _bad_wav(f"a sample rate of {rate} Hz, expected {first} to {last}")
    if encoding in _FIXED_RATE_ENCODINGS:
        if bits not in _SAMPLE_BITS:
            raise _bad_wav(f"{bits} bits a sample, expected one of 8, 16, 24, 32, 64")
        expected = rate * channels * bits // 8
        if byte_rate != expected:
            raise _bad_wav(
                f"a byte rate of {byte_rate}, but {rate} Hz x {channels} channels"
                f" x {bits} bits / 8 is {expected}"
            )
    elif byte_rate < _MIN_CODED_BYTE_RATE:
        raise _bad_wav(f"a byte rate of {byte_rate}, expected at least {_MIN_CODED_BYTE_RATE}")
    return int(byte_rate)


def _bad_wav(reason: str) -> ApiError:
    return ApiError(400, f"malformed wav file: {reason}", "invalid_audio", "file")
