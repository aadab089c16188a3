"""chainlat.sim latency profiles: the defaults, loading TOML and JSON files (a fitted
profile file too), and bad files or arguments named in one message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chainlat.sim import DEFAULT_PROFILES, ModelProfile, ProfileError, SimServer, load_profiles


def test_default_profiles_reproduce_the_classic_example() -> None:
    large, small, _ = DEFAULT_PROFILES
    assert large.latency_ms(input_tokens=200) == pytest.approx(800.0)
    assert small.latency_ms(input_tokens=200) == pytest.approx(250.0)
    assert large.ttft_ms(200) == pytest.approx(400.0)


def test_load_profiles_from_toml_table_and_json_array(tmp_path: Path) -> None:
    toml_file = tmp_path / "sim.toml"
    toml_file.write_text(
        '[models.fast]\nttft_base_ms = 120\nslots = 2\n\n[models."b"]\nttft_base_ms = 100\n'
    )
    assert load_profiles(toml_file) == [
        ModelProfile("fast", ttft_base_ms=120, slots=2, decode_ms_per_token=0.0),
        ModelProfile("b", decode_ms_per_token=0.0),
    ]
    json_file = tmp_path / "sim.json"
    json_file.write_text(
        json.dumps({"models": [{"name": "x", "ttft_base_ms": 100, "decode_ms_per_token": 2.5}]})
    )
    assert load_profiles(json_file) == [ModelProfile("x", decode_ms_per_token=2.5)]


def test_a_fitted_profile_file_serves_as_a_simulator_file(tmp_path: Path) -> None:
    """What ``chainlat profile -o`` writes, ``chainlat sim --profiles`` reads."""
    from chainlat.analysis.profiles import LatencyProfile, save_profiles

    fitted = LatencyProfile(
        ttft_base_ms=300,
        ttft_per_input_token_ms=0.25,
        decode_ms_per_token=12.5,
        residual_sigma=0.08,
        queue_share=0.01,
        calls=40,
        ttft_calls=40,
        input_tokens_range=(100, 900),
        output_tokens_range=(20, 60),
        note="fitted",
    )
    path = tmp_path / "fitted.toml"
    save_profiles(path, {"gpt-4o": fitted})
    assert load_profiles(path) == [
        ModelProfile(
            "gpt-4o",
            ttft_base_ms=300,
            ttft_per_input_token_ms=0.25,
            decode_ms_per_token=12.5,
            output_tokens=60,
            jitter=0.08,
        )
    ]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "p.toml",
            "[models.fast]\nttft_base_ms = 1\nslots = 0\n",
            "p.toml: models.fast.slots: must be at least 1, got 0",
        ),
        (
            "p.toml",
            "[models.fast]\nttft_base_ms = 1\nttft_ms = 1\n",
            "p.toml: models.fast.ttft_ms: unknown key",
        ),
        (
            "p.toml",
            '[models.fast]\nttft_base_ms = 1\njitter = "a"\n',
            "p.toml: models.fast.jitter: input should be a valid number",
        ),
        ("p.toml", "[models\n", "p.toml: invalid TOML"),
        ("p.toml", "[other]\n", "p.toml: models: required key missing"),
        (
            "p.json",
            '{"models": [{"name": "a"}, {"name": "a"}]}',
            "p.json: models[1].name: duplicate",
        ),
        (
            "p.json",
            '{"models": [{"slots": 1}]}',
            "p.json: models[0]: expected a table with a 'name'",
        ),
        ("p.yaml", "models: {}", "p.yaml: unknown format"),
    ],
)
def test_bad_profiles_file_names_the_file_and_key(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profiles(path)
    assert str(caught.value).startswith(str(tmp_path / message.split(":")[0]) + ":")
    assert message.split(": ", 1)[1] in str(caught.value)


def test_invalid_profile_and_server_arguments_raise() -> None:
    with pytest.raises(ProfileError, match="slots"):
        ModelProfile("x", slots=0)
    with pytest.raises(ProfileError, match="duplicate"):
        SimServer([ModelProfile("x"), ModelProfile("x")])
    with pytest.raises(ValueError, match="network_delay_ms"):
        SimServer(network_delay_ms=-1)
    # Not a URL, a bracket left open, a port that is not a number: refused before serving.
    for endpoint in ("localhost:4318", "http://[::1", "http://h:port"):
        with pytest.raises(ValueError, match="otlp_endpoint: expected an http"):
            SimServer(otlp_endpoint=endpoint)
