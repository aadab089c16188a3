"""Byte streams of provider responses cut into events: server-sent events and NDJSON lines,
without waiting for more than one event's bytes, and the decompressors in front of them.

Pure and stdlib-only, like the wire formats they serve (``_formats``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat.httpx._wire import loads

Event = tuple["str | None", Any]
"""(SSE event name or None, decoded JSON data)."""
RawEvent = tuple["str | None", bytes]
"""(SSE event name or None, the event's data as sent): decoded by its reader, which may
read what it needs of it without decoding it all (``Reader.raw_event``)."""


MAX_EVENT_BYTES: Final = 16 * 1024 * 1024
"""The most bytes kept for one stream event (an SSE event's data, an NDJSON line).

A larger event is skipped, not read: it is counted (``chainlat.stream.events_skipped``
on the span) and the stream goes on, passed to the application untouched."""
STREAM_EVENTS_SKIPPED: Final = attr.STREAM_EVENTS_SKIPPED


class _LineDecoder:
    """Lines out of arbitrary byte chunks, in time linear in the bytes fed.

    The bytes not yet cut into lines are kept in one ``bytearray`` (appending and
    dropping its head cost what was appended or dropped), and each byte is searched for
    a line end once: the search resumes where the last one stopped. A line that would
    hold more than ``max_bytes`` is dropped as it arrives, and the event it belongs to
    skipped and counted in ``skipped``.
    """

    def __init__(self, max_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_bytes = max_bytes
        self.skipped = 0
        """Events skipped because they were larger than ``max_bytes``."""
        self._buffer = bytearray()
        self._dropping = False
        """Inside a line that passed the cap: its bytes are dropped until its end."""

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for the event being read: never more than ``max_bytes``."""
        return len(self._buffer) + self._event_bytes()

    def _event_bytes(self) -> int:
        return 0

    def _lines(self, chunk: bytes) -> list[bytes | None]:
        """The lines that ``chunk`` completes; None where an over-long line starts being dropped."""
        lines: list[bytes | None] = []
        if self._dropping:
            end = chunk.find(b"\n")
            if end < 0:
                return lines
            self._dropping = False  # the over-long line ends here; its event was skipped
            chunk = chunk[end + 1 :]
        buffer = self._buffer
        if not buffer:
            # The usual case, a chunk of whole lines: cut in one call, nothing copied twice.
            end = chunk.rfind(b"\n")
            if end >= 0:
                lines.extend(chunk[:end].split(b"\n"))
                chunk = chunk[end + 1 :]
        search = len(buffer)  # what is buffered holds no line end: it was searched
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", search)) >= 0:
            lines.append(bytes(buffer[start:end]))
            start = search = end + 1
        if start:
            del buffer[:start]
        if len(buffer) + self._event_bytes() > self.max_bytes:
            buffer.clear()
            self._dropping = True
            lines.append(None)  # the event is skipped now, so that no more of it is kept
        return lines


class SseDecoder(_LineDecoder):
    """Server-sent events out of arbitrary byte chunks; each event once complete."""

    def __init__(self, max_bytes: int = MAX_EVENT_BYTES) -> None:
        super().__init__(max_bytes)
        self._name: str | None = None
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._skipping = False
        self._clean = True
        """Nothing is pending: no line and no event begun (see `feed_raw`)."""

    def _event_bytes(self) -> int:
        return self._data_bytes

    def feed(self, chunk: bytes) -> list[Event]:
        """The events that ``chunk`` completes, decoded (data that is not JSON is no event)."""
        return _decoded(self.feed_raw(chunk))

    def feed_raw(self, chunk: bytes) -> list[RawEvent]:
        """The events that ``chunk`` completes, their data as sent (undecoded)."""
        if (
            self._clean
            and chunk[-2:] == b"\n\n"
            and b"\r" not in chunk
            and len(chunk) <= self.max_bytes
        ):
            # The usual chunk: whole events of one data line each, nothing pending before
            # it. Cut in one split, and read as the lines below would read it; a chunk
            # with any other line (an event name, a comment, several data lines) is read
            # line by line, from the start.
            if chunk.find(b"\n") == len(chunk) - 2:  # one line, one event: the most usual
                if chunk[:5] == b"data:":
                    return [(None, chunk[5:-2].lstrip(b" "))]
                return self._read_lines(chunk)
            blocks = chunk[:-2].split(b"\n\n")
            if chunk.count(b"\n") == 2 * len(blocks):  # each block is one line
                events: list[RawEvent] = []
                for block in blocks:
                    if block[:5] != b"data:":
                        break
                    events.append((None, block[5:].lstrip(b" ")))
                else:
                    return events
        return self._read_lines(chunk)

    def _read_lines(self, chunk: bytes) -> list[RawEvent]:
        """`feed_raw`, line by line: any chunk, any state."""
        events: list[RawEvent] = []
        for raw in self._lines(chunk):
            if raw is None:
                self._skip()
                continue
            line = raw.rstrip(b"\r")
            if not line:
                if self._skipping:
                    self.skipped += 1
                elif self._data:
                    data = self._data
                    events.append((self._name, data[0] if len(data) == 1 else b"\n".join(data)))
                self._name, self._data, self._data_bytes = None, [], 0
                self._skipping = False
            elif line[:5] == b"data:":
                if self._skipping:
                    continue
                value = line[5:].lstrip(b" ")
                self._data_bytes += len(value) + 1
                if self._data_bytes > self.max_bytes:
                    self._skip()
                else:
                    self._data.append(value)
            elif line.startswith(b"event:"):
                self._name = line[6:].strip().decode("utf-8", "replace")
        # A chunk that ends with a blank line leaves nothing pending: no line begun, no
        # event begun (whatever was pending before it, and even an event being skipped).
        self._clean = chunk[-2:] == b"\n\n"
        return events

    def _skip(self) -> None:
        self._skipping = True
        self._data, self._data_bytes = [], 0


class NdjsonDecoder(_LineDecoder):
    """One JSON value per line (Ollama's streams)."""

    def feed(self, chunk: bytes) -> list[Event]:
        """The events that ``chunk`` completes, decoded (a line that is not JSON is no event)."""
        return _decoded(self.feed_raw(chunk))

    def feed_raw(self, chunk: bytes) -> list[RawEvent]:
        """The events that ``chunk`` completes: each line that is not blank, as sent."""
        events: list[RawEvent] = []
        for raw in self._lines(chunk):
            if raw is None:
                self.skipped += 1
                continue
            line = raw.strip()
            if line:
                events.append((None, line))
        return events


def _decoded(events: list[RawEvent]) -> list[Event]:
    found: list[Event] = []
    for name, raw in events:
        data = _loads(raw)
        if data is not None:
            found.append((name, data))
    return found


_loads: Final = loads


def decompressor(content_encoding: str) -> Callable[[bytes], bytes] | None:
    """A function that undoes ``content_encoding`` chunk by chunk; None if unsupported.

    The transport sees the bytes as sent; httpx decodes them later, for the application,
    so the copy chainlat reads is decoded here (gzip and deflate; others are not read).
    """
    encodings = [e.strip().lower() for e in content_encoding.split(",") if e.strip()]
    steps: list[Callable[[bytes], bytes]] = []
    for encoding in reversed(encodings):
        if encoding == "identity":
            continue
        if encoding in ("gzip", "x-gzip"):
            steps.append(zlib.decompressobj(zlib.MAX_WBITS | 16).decompress)
        elif encoding == "deflate":
            steps.append(_Deflate().decompress)
        else:
            return None
    if not steps:
        return identity

    def run(chunk: bytes) -> bytes:
        for step in steps:
            chunk = step(chunk)
        return chunk

    return run


def identity(chunk: bytes) -> bytes:
    return chunk


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or (wrongly, but often) raw."""

    def __init__(self) -> None:
        self._first = True
        self._inner = zlib.decompressobj()

    def decompress(self, chunk: bytes) -> bytes:
        if self._first and chunk:
            self._first = False
            try:
                return self._inner.decompress(chunk)
            except zlib.error:
                self._inner = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._inner.decompress(chunk)
