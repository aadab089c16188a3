"""Wrapping a live connection: the openai SDK's realtime connection or a raw WebSocket.

The connection object is kept and instrumented in place (its own ``send``, ``recv`` or
``recv_bytes`` and ``close`` are replaced on the instance, not on the class), because the
SDK's resources (``connection.session.update(...)``) and iterators (``async for event in
connection``) call the connection's own methods: a proxy around it would miss them.
Each event is handed to `RealtimeTurns` after it was sent or as soon as it was read;
whatever goes wrong in the tracing is logged and swallowed, never raised into the
connection.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Final, TypeVar

import msgspec

from chainlat._core.errors import internal_errors
from chainlat.realtime._turns import RealtimeTurns

C = TypeVar("C")

_MARK: Final = "_chainlat_realtime_turns"


def instrument(connection: C, turns: RealtimeTurns) -> C:
    """Instrument ``connection`` in place for ``turns``; a second call is a no-op."""
    if getattr(connection, _MARK, None) is not None:
        return connection
    sdk = callable(getattr(connection, "recv_bytes", None)) and callable(
        getattr(connection, "parse_event", None)
    )
    receive_name = "recv_bytes" if sdk else "recv"
    send = getattr(connection, "send")  # noqa: B009  # the instance's, bound
    receive = getattr(connection, receive_name)
    close = getattr(connection, "close", None)
    if inspect.iscoroutinefunction(send):
        _patch_async(connection, turns, send, receive, receive_name, close, sdk=sdk)
    else:
        _patch_sync(connection, turns, send, receive, receive_name, close, sdk=sdk)
    setattr(connection, _MARK, turns)
    return connection


def model_of(connection: object) -> str | None:
    """The ``model`` query parameter of a ``websockets`` connection's handshake, if any."""
    from urllib.parse import parse_qs, urlsplit

    path = getattr(getattr(connection, "request", None), "path", None)
    if not isinstance(path, str):
        return None
    models = parse_qs(urlsplit(path).query).get("model")
    return models[0] if models else None


def turns_of(connection: object) -> RealtimeTurns | None:
    """The `RealtimeTurns` a connection was instrumented with, if any."""
    turns = getattr(connection, _MARK, None)
    return turns if isinstance(turns, RealtimeTurns) else None


def _decoded(message: object) -> object:
    """A wire message (str or bytes of JSON) as a mapping; None when it is not one.

    Decoded by msgspec: the application decodes every message too, so this is paid twice
    per event; an audio delta of 32 KB took 28 µs through ``json.loads``, 12.5 µs here.
    """
    if isinstance(message, bytes | bytearray | memoryview):
        message = bytes(message).decode("utf-8", "replace")
    if not isinstance(message, str):
        return None
    try:
        return msgspec.json.decode(message)
    # msgspec.DecodeError is a ValueError only from msgspec 0.21 on; the floor is 0.20.
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None


def _outgoing(event: object, *, sdk: bool) -> object:
    return event if sdk else _decoded(event)


def _observe(turns: RealtimeTurns, observe: Callable[[object], None], event: object) -> None:
    with internal_errors("reading a realtime event"):
        if event is not None:
            observe(event)


def _patch_async(
    connection: Any,
    turns: RealtimeTurns,
    send: Any,
    receive: Any,
    receive_name: str,
    close: Any,
    *,
    sdk: bool,
) -> None:
    @functools.wraps(send)
    async def traced_send(event: Any, *args: Any, **kwargs: Any) -> Any:
        asked_ns = turns.now()  # the instant the client sent it, before the SDK's work
        result = await send(event, *args, **kwargs)
        _observe(turns, lambda e: turns.sent(e, asked_ns), _outgoing(event, sdk=sdk))
        return result

    @functools.wraps(receive)
    async def traced_receive(*args: Any, **kwargs: Any) -> Any:
        try:
            message = await receive(*args, **kwargs)
        except Exception as exc:
            if _is_close(exc):
                turns.closed()
            raise
        _observe(turns, turns.received, _decoded(message))
        return message

    connection.send = traced_send
    setattr(connection, receive_name, traced_receive)
    if close is not None and inspect.iscoroutinefunction(close):

        @functools.wraps(close)
        async def traced_close(*args: Any, **kwargs: Any) -> Any:
            try:
                return await close(*args, **kwargs)
            finally:
                turns.closed()

        connection.close = traced_close


def _patch_sync(
    connection: Any,
    turns: RealtimeTurns,
    send: Any,
    receive: Any,
    receive_name: str,
    close: Any,
    *,
    sdk: bool,
) -> None:
    @functools.wraps(send)
    def traced_send(event: Any, *args: Any, **kwargs: Any) -> Any:
        asked_ns = turns.now()  # the instant the client sent it, before the SDK's work
        result = send(event, *args, **kwargs)
        _observe(turns, lambda e: turns.sent(e, asked_ns), _outgoing(event, sdk=sdk))
        return result

    @functools.wraps(receive)
    def traced_receive(*args: Any, **kwargs: Any) -> Any:
        try:
            message = receive(*args, **kwargs)
        except Exception as exc:
            if _is_close(exc):
                turns.closed()
            raise
        _observe(turns, turns.received, _decoded(message))
        return message

    connection.send = traced_send
    setattr(connection, receive_name, traced_receive)
    if close is not None and callable(close):

        @functools.wraps(close)
        def traced_close(*args: Any, **kwargs: Any) -> Any:
            try:
                return close(*args, **kwargs)
            finally:
                turns.closed()

        connection.close = traced_close


def _is_close(error: Exception) -> bool:
    """Whether a receive failed because the WebSocket closed (websockets' exception)."""
    import sys

    closed = getattr(sys.modules.get("websockets.exceptions"), "ConnectionClosed", None)
    return isinstance(closed, type) and isinstance(error, closed)
