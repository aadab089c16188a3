"""The response stream wrappers: each chunk of a model call's answer passed on the moment it
arrives, and shown to its `ModelCall` afterwards, while the next one is on its way.

httpx checks ``isinstance(response.stream, SyncByteStream)`` with its own class, so a
wrapper subclasses the byte-stream class of the module the response came from (``httpx``
or ``httpx2``): nothing here imports either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlat.httpx._call import ModelCall


class _TracedSyncStream:
    """Passes a sync byte stream through, chunk by chunk, telling the call what it saw."""

    def __init__(self, stream: Any, call: ModelCall) -> None:
        self._stream = stream
        self._call = call

    def __iter__(self) -> Iterator[bytes]:
        # The call ends when the stream ends, fails (with the error) or is left early
        # (GeneratorExit, KeyboardInterrupt, task cancellation: `ModelCall.finish` records
        # no error for those). Written out, not a context manager: that costs four calls.
        call = self._call
        try:
            for chunk in self._stream:
                call.arrived(chunk)
                yield chunk
                call.digest()
        except BaseException as exc:  # only an Exception marks the call failed
            call.finish(exc)
            raise
        call.finish(None)

    def close(self) -> None:
        try:
            self._call.finish(None)
        finally:
            self._stream.close()


class _TracedAsyncStream:
    """Passes an async byte stream through, chunk by chunk, telling the call what it saw."""

    def __init__(self, stream: Any, call: ModelCall) -> None:
        self._stream = stream
        self._call = call

    async def __aiter__(self) -> AsyncIterator[bytes]:
        call = self._call  # the call's end as in `_TracedSyncStream.__iter__`
        try:
            async for chunk in self._stream:
                call.arrived(chunk)
                yield chunk
                call.digest()
        except BaseException as exc:  # only an Exception marks the call failed
            call.finish(exc)
            raise
        call.finish(None)

    async def aclose(self) -> None:
        try:
            self._call.finish(None)
        finally:
            await self._stream.aclose()


_stream_types: dict[tuple[str, bool], type[Any]] = {}


def wrap_stream(module: Any, stream: Any, call: ModelCall, *, is_async: bool) -> Any:
    """``stream`` wrapped for ``call``, an instance of ``module``'s byte-stream class.

    httpx checks ``isinstance(response.stream, SyncByteStream)`` with its own class, so
    the wrapper subclasses the one of the module the response came from.
    """
    key = (module.__name__, is_async)
    cls = _stream_types.get(key)
    if cls is None:
        if is_async:
            cls = type("TracedAsyncStream", (_TracedAsyncStream, module.AsyncByteStream), {})
        else:
            cls = type("TracedSyncStream", (_TracedSyncStream, module.SyncByteStream), {})
        _stream_types[key] = cls
    return cls(stream, call)
