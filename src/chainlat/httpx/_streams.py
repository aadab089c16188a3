"""The response stream wrappers: each chunk of a model call's answer passed on the moment it
arrives, and shown to its `ModelCall` afterwards, while the next one is on its way.

httpx checks ``isinstance(response.stream, SyncByteStream)`` with its own class, so a
wrapper subclasses the byte-stream class of the module the response came from (``httpx``
or ``httpx2``): nothing here imports either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlat.httpx._call import ModelCall


@contextmanager
def _finishing(call: ModelCall) -> Iterator[None]:
    """Finish ``call`` when the stream ends, fails (with the error) or is left early."""
    try:
        yield
    except Exception as exc:
        call.finish(exc)
        raise
    except BaseException:  # GeneratorExit (the reader stopped early), KeyboardInterrupt,
        call.finish(None)  # task cancellation
        raise
    call.finish(None)


class _TracedSyncStream:
    """Passes a sync byte stream through, chunk by chunk, telling the call what it saw."""

    def __init__(self, stream: Any, call: ModelCall) -> None:
        self._stream = stream
        self._call = call

    def __iter__(self) -> Iterator[bytes]:
        call = self._call
        with _finishing(call):
            for chunk in self._stream:
                call.arrived(chunk)
                yield chunk
                call.digest()

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
        call = self._call
        with _finishing(call):
            async for chunk in self._stream:
                call.arrived(chunk)
                yield chunk
                call.digest()

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
