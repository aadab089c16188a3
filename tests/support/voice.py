"""A voice turn on an injected clock, as the voice tests and budgets tests play it."""

from __future__ import annotations

import contextvars

import chainlat
from chainlat._core.rollup import Rollup
from chainlat.testing import Capture


def voice_turn(
    cap: Capture, *, end_reason: str | None = None, stt_ms: float = 120, variant: str | None = None
) -> Rollup:
    """End of speech at t=0; the turn opens 20 ms later, when end of turn is detected.

    STT 20-140, retrieval 140-180, the model streams 180-600 (first token at 330, first
    sentence at 400), TTS of sentence 1 400-900 (first audio byte at 520, the user
    hears it), TTS of sentence 2 600-1100; a longer ``stt_ms`` moves all that later.
    ``variant``: the turn's ``chainlat.variant``.
    """
    p = cap.provider
    t0 = cap.clock()
    cap.clock.advance(20)
    with chainlat.workflow(
        "voice-turn", started_at_ns=t0, variant=variant, tracer_provider=p
    ) as turn:
        with chainlat.inference("stt-1", operation="speech_to_text", tracer_provider=p):
            cap.clock.advance(stt_ms)
        with chainlat.data_stage("kb", tracer_provider=p):
            cap.clock.advance(40)
        # Three branches run at once, as tasks would: each in its own copy of the context.
        chat = chainlat.inference("llm-1", step="answer", tracer_provider=p)
        tts1 = chainlat.inference(
            "tts-1", operation="text_to_speech", user_facing=True, tracer_provider=p
        )
        tts2 = chainlat.inference("tts-1", operation="text_to_speech", tracer_provider=p)
        branches = [contextvars.copy_context() for _ in range(3)]
        call = branches[0].run(chat.__enter__)
        cap.clock.advance(150)
        call.first_token()
        cap.clock.advance(70)  # 400: the first sentence is written
        speech = branches[1].run(tts1.__enter__)
        cap.clock.advance(120)
        speech.first_token()  # 520: the first audio byte
        cap.clock.advance(80)  # 600: the model is done; sentence 2 goes to TTS
        branches[0].run(chat.__exit__, None, None, None)
        branches[2].run(tts2.__enter__)
        cap.clock.advance(300)
        branches[1].run(tts1.__exit__, None, None, None)  # 900
        cap.clock.advance(200)
        branches[2].run(tts2.__exit__, None, None, None)  # 1100
        if end_reason is not None:
            turn.end_reason(end_reason)
    assert turn.rollup is not None
    return turn.rollup
