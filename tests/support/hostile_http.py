"""HTTP servers on 127.0.0.1 that misbehave on purpose: they drip, flood or bomb."""

from __future__ import annotations

import contextlib
import socketserver
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO, cast

Respond = Callable[[BinaryIO], None]
"""Writes raw bytes (status line, headers, body) to the client."""


class _Handler(socketserver.StreamRequestHandler):
    respond: Respond

    def handle(self) -> None:
        # Read the request line and headers, and the body if it says how long it is.
        length = 0
        while (line := self.rfile.readline(65537)) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        self.rfile.read(length)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            type(self).respond(cast(BinaryIO, self.wfile))


@contextlib.contextmanager
def hostile_server(respond: Respond) -> Iterator[str]:
    """Serve ``respond`` to every request; yields the base URL."""
    handler = type("Handler", (_Handler,), {"respond": staticmethod(respond)})
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def drip_headers(out: BinaryIO, seconds: float = 60.0) -> None:
    """A status line, then headers a byte a second that never end."""
    out.write(b"HTTP/1.1 200 OK\r\n")
    out.flush()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out.write(b"X")
        out.flush()
        time.sleep(1.0)


def drip_body(out: BinaryIO, seconds: float = 60.0) -> None:
    """Headers, then a body a byte a second."""
    out.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
    out.flush()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out.write(b" ")
        out.flush()
        time.sleep(1.0)


def flood(out: BinaryIO, mib: int = 300) -> None:
    """A plain body of ``mib`` MiB, without a length."""
    out.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
    block = b" " * (1024 * 1024)
    for _ in range(mib):
        out.write(block)


def gzip_bomb(mib: int = 1024, prefix: bytes = b'{"status": "success", "data": "') -> bytes:
    """A gzip of ``mib`` MiB of zeros, built fast: after a full flush, deflate writes the same
    bytes for every MiB of zeros, so one block is compressed and repeated."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    chunk = b"\0" * (1024 * 1024)
    head = packer.compress(prefix) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(prefix)
    for _ in range(mib):
        crc = zlib.crc32(chunk, crc)
    size = (len(prefix) + mib * len(chunk)) % 2**32
    trailer = crc.to_bytes(4, "little") + size.to_bytes(4, "little")
    return b"\x1f\x8b\x08\0\0\0\0\0\0\xff" + head + block * mib + packer.flush() + trailer


def send_gzip(body: bytes) -> Respond:
    """An answer of ``body`` sent gzip-encoded."""

    def respond(out: BinaryIO) -> None:
        out.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    return respond
