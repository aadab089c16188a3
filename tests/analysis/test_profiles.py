"""Latency profiles: fitting recovers known parameters; files round-trip and fail clearly."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import pytest

import chainlat
from chainlat._core.runs import WorkflowRun
from chainlat.analysis.profiles import (
    LatencyProfile,
    ModelCall,
    ProfileFileError,
    calls_of,
    fit_profile,
    fit_profiles,
    load_profiles,
    save_profiles,
)
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans


def synthetic_runs(
    cap: Capture,
    *,
    model: str,
    base_ms: float,
    per_input_ms: float,
    decode_ms: float,
    sigma: float,
    calls: int,
    stream: bool,
    fixed_output: int | None = None,
    seed: int = 1,
) -> list[WorkflowRun]:
    """Runs of one model call each, timed by a known profile with log-normal noise."""
    rng = random.Random(seed)
    p, clock = cap.provider, cap.clock
    for _ in range(calls):
        tokens_in = rng.randint(50, 2000)
        tokens_out = fixed_output or rng.randint(5, 400)
        prefill = (base_ms + per_input_ms * tokens_in) * math.exp(rng.gauss(0, sigma))
        decode = decode_ms * (tokens_out - 1) * math.exp(rng.gauss(0, sigma))
        with (
            chainlat.workflow("w", tracer_provider=p),
            chainlat.inference(model, tracer_provider=p) as call,
        ):
            clock.advance(prefill)
            if stream:
                call.first_token()
            clock.advance(decode)
            call.record_usage(tokens_in, tokens_out)
    return runs_from_spans(cap.spans())


def test_streamed_calls_recover_ttft_line_and_decode_rate(cap: Capture) -> None:
    runs = synthetic_runs(
        cap, model="m", base_ms=300, per_input_ms=0.2, decode_ms=12, sigma=0.05, calls=400,
        stream=True,
    )  # fmt: skip
    profile = fit_profiles(runs)["m"]
    assert profile.ttft_base_ms == pytest.approx(300, rel=0.05)
    assert profile.ttft_per_input_token_ms == pytest.approx(0.2, rel=0.05)
    assert profile.decode_ms_per_token == pytest.approx(12, rel=0.02)
    assert profile.residual_sigma == pytest.approx(0.05 / math.sqrt(2), rel=0.4)
    assert (profile.calls, profile.ttft_calls) == (400, 400)
    assert profile.note == ""


def test_non_streamed_calls_with_varied_lengths_fit_one_plane(cap: Capture) -> None:
    runs = synthetic_runs(
        cap, model="m", base_ms=100, per_input_ms=0.5, decode_ms=8, sigma=0.02, calls=400,
        stream=False,
    )  # fmt: skip
    profile = fit_profiles(runs)["m"]
    assert profile.ttft_base_ms == pytest.approx(100, abs=15)
    assert profile.ttft_per_input_token_ms == pytest.approx(0.5, rel=0.05)
    assert profile.decode_ms_per_token == pytest.approx(8, rel=0.03)
    assert profile.ttft_calls == 0


def test_constant_output_length_without_ttft_folds_decode_into_the_base(cap: Capture) -> None:
    runs = synthetic_runs(
        cap, model="m", base_ms=100, per_input_ms=0.5, decode_ms=8, sigma=0.0, calls=20,
        stream=False, fixed_output=41,
    )  # fmt: skip
    profile = fit_profiles(runs)["m"]
    assert profile.decode_ms_per_token is None
    assert profile.ttft_base_ms == pytest.approx(100 + 8 * 40, abs=1e-3)
    assert profile.ttft_per_input_token_ms == pytest.approx(0.5, abs=1e-6)
    assert "includes the decode time" in profile.note
    assert profile.output_tokens_range == (41, 41)
    # Predictions at the length seen stay exact.
    assert profile.service_ms(1000, 41) == pytest.approx(100 + 500 + 320, abs=1e-3)


def test_queue_and_network_are_left_out_of_service_time_and_reported_as_shares(
    cap: Capture,
) -> None:
    p, clock = cap.provider, cap.clock
    for tokens_in in (100, 200, 300, 400):
        with (
            chainlat.workflow("w", tracer_provider=p),
            chainlat.inference("m", tracer_provider=p) as call,
        ):
            call.set_attribute("chainlat.latency.queue_ms", 30.0)
            call.set_attribute("chainlat.latency.network_ms", 10.0)
            clock.advance(40 + 100 + tokens_in)  # queue + network, then 100 + 1 ms/token
            call.first_token()
            clock.advance(2 * 9)
            call.record_usage(tokens_in, 10)
    profile = fit_profiles(runs_from_spans(cap.spans()))["m"]
    assert profile.ttft_base_ms == pytest.approx(100)
    assert profile.ttft_per_input_token_ms == pytest.approx(1)
    assert profile.decode_ms_per_token == pytest.approx(2)
    total = sum(40 + 100 + t + 18 for t in (100, 200, 300, 400))
    assert profile.queue_share == pytest.approx(4 * 30 / total, rel=1e-4)
    assert profile.network_share == pytest.approx(4 * 10 / total, rel=1e-4)


def test_cache_hits_and_failures_are_not_fitted(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    for tokens_in, hit in ((100, False), (200, False), (300, True), (400, True)):
        with (
            chainlat.workflow("w", tracer_provider=p),
            chainlat.inference("m", tracer_provider=p) as call,
        ):
            if hit:
                call.cache_hit()
                clock.advance(4 if tokens_in == 300 else 6)
            else:
                clock.advance(100 + tokens_in)
                call.first_token()
            call.record_usage(tokens_in, 1)
    with pytest.raises(RuntimeError), chainlat.workflow("w", tracer_provider=p):
        with chainlat.inference("m", tracer_provider=p) as call:
            clock.advance(5000)
            call.record_usage(150, 1)
            raise RuntimeError("boom")
    profile = fit_profiles(runs_from_spans(cap.spans()))["m"]
    assert profile.calls == 2
    assert profile.ttft_base_ms == pytest.approx(100)
    assert profile.ttft_per_input_token_ms == pytest.approx(1)
    assert profile.cache_hit_ms == pytest.approx(5)


def test_nested_inference_spans_are_one_call_with_merged_attributes(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("w", tracer_provider=p):
        with chainlat.inference("m", tracer_provider=p):
            clock.advance(1)
            with chainlat.inference("m", tracer_provider=p) as inner:
                clock.advance(50)
                inner.first_token()
                clock.advance(20)
                inner.record_usage(10, 3)
            clock.advance(1)
        with chainlat.tool("t", tracer_provider=p):
            clock.advance(5)
    [run] = runs_from_spans(cap.spans())
    [call] = calls_of(run)
    assert call.step == "chat m"
    assert call.duration_ms == 72
    assert call.ttft_ms == 51  # the inner span's first token, from the outer start
    assert (call.input_tokens, call.output_tokens) == (10, 3)


def test_profiles_round_trip_through_toml_and_json(tmp_path: Path) -> None:
    profiles = {
        "gpt-4.1": LatencyProfile(
            ttft_base_ms=300, ttft_per_input_token_ms=0.05, decode_ms_per_token=12.5
        ),
        "sim-large": LatencyProfile(
            ttft_base_ms=760.5,
            ttft_per_input_token_ms=0.25,
            residual_sigma=0.07,
            calls=24,
            input_tokens_range=(180, 260),
            output_tokens_range=(41, 41),
            note="decode folded",
        ),
    }
    for name in ("p.toml", "p.json"):
        save_profiles(tmp_path / name, profiles)
        assert load_profiles(tmp_path / name) == profiles
    assert '[models."gpt-4.1"]' in (tmp_path / "p.toml").read_text()


def test_a_hand_written_profile_needs_only_the_base(tmp_path: Path) -> None:
    file = tmp_path / "vendor.toml"
    file.write_text("[models.gpt-4o]\nttft_base_ms = 300\ndecode_ms_per_token = 12.5\n")
    profile = load_profiles(file)["gpt-4o"]
    assert profile.service_ms(input_tokens=5000, output_tokens=81) == 1300


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[models.m]\nttft_base_ms = -1\n", "models.m.ttft_base_ms: must be at least 0, got -1"),
        ("[models.m]\nttft_base_ms = 1\nqueue_ms = 4\n", "models.m.queue_ms: unknown key"),
        ("[models.m]\nttft_per_input_token_ms = 1\n", "models.m.ttft_base_ms: required key"),
        ("[models.m]\nttft_base_ms = 'fast'\n", "models.m.ttft_base_ms: "),
        ("[models.m]\nttft_base_ms = 1\nqueue_share = 2\n", "queue_share: must be at most 1"),
        ("models = 3\n", "models: "),
        ("[models.m\n", "invalid TOML"),
    ],
)
def test_a_bad_profile_file_names_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "profiles.toml"
    file.write_text(text)
    with pytest.raises(ProfileFileError) as caught:
        load_profiles(file)
    assert str(caught.value).startswith(f"{file}: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, chainlat.InputError)


def test_a_missing_profile_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileFileError, match="no such profile file"):
        load_profiles(tmp_path / "nope.toml")


# A slope of 0.18 ms/token at 2.1 standard errors: the profile drops it, the closest fit keeps it.
NOISY_SLOPE = [(100, 250.0), (200, 210.0), (300, 230.0), (400, 310.0), (500, 330.0), (600, 290.0)]


def test_in_sample_fit_keeps_the_slope_the_three_standard_error_rule_drops() -> None:
    calls = [
        ModelCall(span_id=i, step="chat m", model="m", duration_ms=ms, input_tokens=x,
                  output_tokens=11)
        for i, (x, ms) in enumerate(NOISY_SLOPE)
    ]  # fmt: skip
    line = statistics.linear_regression([x for x, _ in NOISY_SLOPE], [y for _, y in NOISY_SLOPE])
    profile = fit_profile(calls)
    closest = fit_profile(calls, in_sample=True)
    assert profile is not None and closest is not None
    assert profile.ttft_per_input_token_ms == 0
    assert profile.ttft_base_ms == pytest.approx(270)  # flat at the mean
    assert "too narrow a range" in profile.note
    assert closest.ttft_per_input_token_ms == pytest.approx(line.slope, rel=1e-5)
    assert closest.ttft_base_ms == pytest.approx(line.intercept, rel=1e-5)
    assert "too narrow" not in closest.note
