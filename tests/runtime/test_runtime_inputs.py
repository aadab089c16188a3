"""What the application hands the runtime is checked: prices raise ConfigError in one line;
token counts and first-output instants that cannot be true are logged and not recorded."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import chainlat
import chainlat._core.errors
from chainlat._core import attributes as attr
from chainlat._core.prices import Price
from chainlat.testing import Capture


@pytest.fixture(autouse=True)
def _fresh_warnings(fresh_warnings: None) -> Iterator[None]:
    yield
    chainlat.shutdown()


@pytest.mark.parametrize(
    ("prices", "says"),
    [
        ([("gpt-4o", 2.5, 10.0)], "expected a mapping of model names to prices"),
        ({"m": {"input_per_mtok": 10**400, "output_per_mtok": 1}}, "input_per_mtok=1000"),
        ({"m": {"input_per_mtok": True, "output_per_mtok": 1}}, "input_per_mtok=True"),
        ({"m": {"input_per_mtok": 1, "output_per_mtok": False}}, "output_per_mtok=False"),
        ({"m": Price(-5, 0)}, "input_per_mtok=-5"),
        ({"m": Price(1, 2, float("inf"))}, "cache_read_per_mtok=inf"),
        ({"m": 3}, "expected input_per_mtok and output_per_mtok"),
        ({7: Price(1, 2)}, "not a model name"),
    ],
)
def test_bad_prices_raise_config_error_in_one_line(prices: object, says: str) -> None:
    with pytest.raises(chainlat.ConfigError) as raised:
        chainlat.configure(exporter="none", set_global=False, prices=prices)  # type: ignore[arg-type]
    message = str(raised.value)
    assert says in message and "\n" not in message and len(message) < 300


def test_good_prices_are_kept_as_floats() -> None:
    from chainlat._runtime.processor import processor_for

    provider = chainlat.configure(
        exporter="none",
        set_global=False,
        prices={"a": Price(1, 2), "b": {"input_per_mtok": 3, "output_per_mtok": 4.5}},
    )
    processor = processor_for(provider, install=False)
    assert processor is not None and processor.prices == {
        "a": Price(1.0, 2.0, None),
        "b": Price(3.0, 4.5, None),
    }


def test_a_token_count_beyond_64_bits_is_logged_and_not_recorded(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    with chainlat.inference("m", tracer_provider=cap.provider) as call:
        call.record_usage(10, 10**30)
    attributes = dict(cap.span("chat m").attributes or {})
    assert attributes[attr.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert attr.GEN_AI_USAGE_OUTPUT_TOKENS not in attributes
    lines = [r.getMessage() for r in caplog.records if r.name == "chainlat"]
    assert len(lines) == 1 and "record_usage(output_tokens=" in lines[0]
    encode_spans(cap.spans())  # the exporter's encoder takes the span whole


@pytest.mark.parametrize("bad", [-5, 2**63, "-3", 1.5])
def test_a_token_count_set_as_an_attribute_is_checked_too(
    bad: object, cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    """A negative input count would be read as 0 and make the cost come out low."""
    with chainlat.inference("m", tracer_provider=cap.provider) as call:
        call.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, bad)  # type: ignore[arg-type]
        call.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, 7)
    attributes = dict(cap.span("chat m").attributes or {})
    assert attr.GEN_AI_USAGE_INPUT_TOKENS not in attributes
    assert attributes[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert [r.getMessage() for r in caplog.records if "not recorded" in r.getMessage()]


def test_a_first_output_from_the_monotonic_clock_is_refused_with_an_error(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    with chainlat.workflow("w", tracer_provider=cap.provider) as run:
        cap.clock.advance(40)
        run.first_output(at_ns=time.monotonic_ns())
        cap.clock.advance(10)
    attributes = dict(cap.span("invoke_workflow w").attributes or {})
    assert attr.WORKFLOW_FIRST_OUTPUT_MS not in attributes
    assert not [
        e for e in cap.span("invoke_workflow w").events if e.name == attr.FIRST_OUTPUT_EVENT
    ]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "time.time_ns()" in errors[0].getMessage()


def test_a_first_output_on_the_span_clock_is_kept_exactly(cap: Capture) -> None:
    with chainlat.workflow("w", tracer_provider=cap.provider) as run:
        marked = cap.clock.advance(25)
        cap.clock.advance(40)
        run.first_output(at_ns=marked)
    attributes = dict(cap.span("invoke_workflow w").attributes or {})
    assert attributes[attr.WORKFLOW_FIRST_OUTPUT_MS] == 25.0
    assert run.rollup is not None and run.rollup.first_output_ms == 25.0


def test_a_first_token_from_another_clock_is_refused_and_a_later_one_counts(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    with chainlat.inference("m", tracer_provider=cap.provider) as call:
        cap.clock.advance(30)
        call.first_token(at_ns=time.perf_counter_ns())
        cap.clock.advance(5)
        call.first_token()
    attributes = dict(cap.span("chat m").attributes or {})
    assert attributes[attr.LATENCY_TTFT_MS] == 35.0
    assert [r for r in caplog.records if r.levelno == logging.ERROR]
