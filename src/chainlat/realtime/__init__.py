"""Realtime (speech-to-speech) sessions traced turn by turn: OpenAI's Realtime API.

A speech-to-speech agent talks to one model over one WebSocket, so there is no HTTP
request per step to time: `traced` reads the session's events as they pass and makes one
chainlat workflow per turn, from where the caller stopped speaking (the server VAD's
``speech_stopped``) to the end of the answer, with the model's response as an inference
step (operation ``realtime``) whose first token, and the turn's first output, is the
first audio delta received, and each function call as a tool step. The first output splits
into the end of turn (to the audio the server's detection fired on), the round trip
(overhead), the model and the tools; a caller cutting the answer off, also after its
``response.done`` while the client plays it, ends the turn ``interrupted``
(docs/voice.md)::

    client = openai.AsyncOpenAI()
    async with client.realtime.connect(model="gpt-realtime") as connection:
        chainlat.realtime.traced(connection)
        async for event in connection: ...

Works on the openai SDK's realtime connection (``client.realtime.connect()``, or
``client.beta.realtime.connect()`` in older SDKs, sync or async) and on a raw WebSocket
of the same protocol (``websockets``' client connection, sync or async). Never records the
audio or the text; a failure of the tracing is logged and swallowed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from chainlat.realtime._connection import instrument, model_of, turns_of
from chainlat.realtime._turns import RealtimeResponseFailed, RealtimeTurns

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from chainlat.realtime._turns import Clock

__all__ = ["RealtimeResponseFailed", "RealtimeTurns", "traced", "turns_of"]

C = TypeVar("C")

# Defined in private modules; report them where users import them from (as httpx does).
RealtimeTurns.__module__ = RealtimeResponseFailed.__module__ = __name__
turns_of.__module__ = __name__


def traced(
    connection: C,
    *,
    workflow: str = "realtime-turn",
    variant: str | None = None,
    model: str | None = None,
    tracer_provider: TracerProvider | None = None,
    clock: Clock | None = None,
) -> C:
    """Trace a realtime connection's turns; returns the same connection, instrumented.

    Example:
        >>> async with client.realtime.connect(model="gpt-realtime") as connection:
        ...     chainlat.realtime.traced(connection)  # doctest: +SKIP
        ...     await connection.session.update(session={...})  # doctest: +SKIP

    Args:
        connection: The openai SDK's realtime connection (sync or async) or a
            ``websockets`` client connection speaking the Realtime protocol.
        workflow: The turns' workflow name (budgets key on it).
        variant: A configuration label (``chainlat.variant``).
        model: The model's name, when the session's events do not give it.
        tracer_provider: Default: the one ``configure()`` set up.
        clock: The spans' clock, if ``configure(clock=...)`` was given one.

    Returns:
        ``connection`` itself; a connection traced already is left as it is.
    """
    turns = RealtimeTurns(
        workflow=workflow,
        variant=variant,
        model=model or model_of(connection),
        tracer_provider=tracer_provider,
        clock=clock,
    )
    return instrument(connection, turns)
