"""A span a convention row calls untimed (``Convention.untimed``) gives no time to first
token: Pipecat's realtime ``llm_response`` carries the service's last ``metrics.ttfb``
(pipecat-ai 1.14.0, service_decorators.py 1631-1635), another response's first byte."""

from __future__ import annotations

from chainlat._core import call_readings, conventions
from chainlat._core.convention_table import CONVENTIONS, UNTIMED_KEYS

# The attributes of an llm_response of the interop case pipecat-realtime (local-vad+tool):
# the answer that called a function, handled in 0.39 ms, with the first byte of the answer
# before it.
REALTIME_RESPONSE = {
    "gen_ai.request.model": "sim-realtime",
    "gen_ai.operation.name": "llm_response",
    "service.operation": "llm_response",
    "response.status": "completed",
    "metrics.ttfb": 0.3079338073730469,
}


def test_the_pipecat_row_names_its_realtime_spans_untimed() -> None:
    (pipecat,) = [c for c in CONVENTIONS if c.name == "pipecat"]
    assert pipecat.untimed == ("service.operation",)
    assert {"service.operation"} == UNTIMED_KEYS
    assert "service.operation" in conventions.KEYS  # kept by every reader


def test_a_realtime_response_reads_its_usage_but_no_first_token() -> None:
    attributes = {**REALTIME_RESPONSE, "gen_ai.usage.input_tokens": 34}
    plan = conventions.call_plan(tuple(attributes))
    assert conventions.read_call(attributes, plan) == (34, None, None, "sim-realtime")
    assert conventions.ttft_ms_of(attributes) is None
    assert call_readings.unusable_ttft(attributes, plan) is None  # not read, not unusable


def test_pipecats_cascade_spans_keep_their_time_to_first_byte() -> None:
    cascade = {k: v for k, v in REALTIME_RESPONSE.items() if k != "service.operation"}
    plan = conventions.call_plan(tuple(cascade))
    assert conventions.read_call(cascade, plan)[2] == 307.9338073730469
    assert conventions.ttft_ms_of(cascade) == 307.9338073730469
