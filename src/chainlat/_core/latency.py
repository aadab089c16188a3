"""The latency model of one model, and the profile files that hold it.

One model for both sides of chainlat: ``chainlat profile`` fits it from traces
(:mod:`chainlat.analysis.profiles`), ``chainlat whatif`` predicts with it, and
``chainlat sim`` serves with it (:class:`chainlat.sim.ModelProfile` is its
simulator view), so a fitted file is a simulator file and the other way round::

    service time = ttft_base_ms + ttft_per_input_token_ms * input tokens      (prefill)
                 + decode_ms_per_token * (output tokens - 1)                   (decode)

A profile fitted from streamed calls and calls not streamed also holds
``unstreamed_base_ms`` and ``unstreamed_decode_ms_per_token``: the second kind
in place of ``ttft_base_ms`` and ``decode_ms_per_token`` (the client does not
read a chunk per token), the same prefill slope.

A speech model's profile (``speech_input`` set) is fitted on the characters it speaks or
the seconds of audio it hears in place of tokens (:mod:`chainlat.analysis.speech`):
``speech_ttft_ms`` and ``speech_service_ms`` predict it.

A profile file holds one table per model under ``models`` (TOML or JSON); an
array of tables with a ``name`` is read too::

    [models.gpt-4o]            # a vendor's figures: 300 ms to first token, 80 tokens/s
    ttft_base_ms = 300
    decode_ms_per_token = 12.5
    slots = 8                  # simulator only: concurrency, answer length, jitter
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chainlat._core.errors import ProfileError, reading, undecodable

__all__ = [
    "LatencyProfile",
    "dumps_profiles",
    "load_profiles",
    "parse_profiles",
    "save_profiles",
]


class LatencyProfile(BaseModel):
    """How one model's latency depends on the work, in milliseconds.

    Example::

        gpt4o = LatencyProfile(ttft_base_ms=300, ttft_per_input_token_ms=0.05,
                               decode_ms_per_token=12.5)
        gpt4o.service_ms(input_tokens=1000, output_tokens=81)   # 350 + 1000 = 1350.0
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_base_ms: float = Field(ge=0, allow_inf_nan=False)
    """Time to first token of an empty prompt (or the whole service time, see ``note``)."""
    ttft_per_input_token_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Extra time to first token per input token."""
    decode_ms_per_token: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Time per output token after the first; None when it could not be fitted."""
    unstreamed_base_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """For calls not streamed, when they were fitted apart from streamed ones: the service
    time of an empty prompt and a one-token answer (``ttft_base_ms`` is the streamed one)."""
    unstreamed_decode_ms_per_token: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """For calls not streamed, fitted apart: time per output token after the first. A
    streamed call pays for every chunk the client reads; one not streamed does not."""
    cache_hit_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Duration of a call answered from a cache."""
    residual_sigma: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Standard deviation of log(observed / predicted) over the fitted calls."""
    queue_share: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    """Share of the calls' time spent waiting for a connection."""
    network_share: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    """Share of the calls' time spent in network transit."""
    calls: int = Field(default=0, ge=0)
    """Model calls the profile was fitted from (0: written by hand)."""
    ttft_calls: int = Field(default=0, ge=0)
    """Of those, calls with a time to first token."""
    input_tokens_range: tuple[int, int] | None = None
    """Smallest and largest input token counts fitted: outside it the line is extrapolated."""
    output_tokens_range: tuple[int, int] | None = None
    """Smallest and largest output token counts fitted."""
    note: str = ""
    """Why a coefficient was left out or set to 0, when it was."""
    speech_input: Literal["characters", "audio_seconds"] | None = None
    """A speech model's profile: what its time is fitted against, in place of tokens (the
    characters spoken for text to speech, the seconds of audio heard for speech to text)."""
    ttft_per_speech_input_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """A speech model: extra time to the first audio byte or transcript word per character
    or second of audio (``ttft_base_ms`` is the time at none)."""
    ms_per_speech_input: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """A speech model: time after the first audio byte or transcript word per character or
    second of audio (text to speech: the audio's length per character over the real-time
    factor); None when its calls did not stream."""
    speech_input_range: tuple[float, float] | None = None
    """Smallest and largest speech input fitted: outside it the line is extrapolated."""
    output_tokens: int | None = Field(default=None, ge=1)
    """For the simulator: tokens in every answer (default 16, or the fitted range's top)."""
    slots: int | None = Field(default=None, ge=1)
    """For the simulator: requests the model works on at once; more wait in a FIFO queue."""
    jitter: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """For the simulator: sigma of the log-normal factor on prefill and decode (default:
    ``residual_sigma``, else 0)."""

    def ttft_ms(self, input_tokens: int) -> float:
        """Predicted time to first token, without queue and network."""
        return self.ttft_base_ms + self.ttft_per_input_token_ms * input_tokens

    def service_ms(
        self, input_tokens: int, output_tokens: int, *, streamed: bool | None = None
    ) -> float:
        """Predicted duration of a call without queue and network.

        ``streamed=False`` predicts with the ``unstreamed_*`` coefficients when the
        profile has them; otherwise every call is predicted alike.
        """
        if streamed is False and self.unstreamed_base_ms is not None:
            per_token = self.unstreamed_decode_ms_per_token or 0.0
            return (
                self.unstreamed_base_ms
                + self.ttft_per_input_token_ms * input_tokens
                + per_token * max(output_tokens - 1, 0)
            )
        decode = self.decode_ms_per_token or 0.0
        return self.ttft_ms(input_tokens) + decode * max(output_tokens - 1, 0)

    def speech_ttft_ms(self, amount: float) -> float:
        """A speech model: predicted time to the first audio byte or transcript word for
        ``amount`` characters or seconds of audio, without queue and network."""
        return self.ttft_base_ms + self.ttft_per_speech_input_ms * amount

    def speech_service_ms(self, amount: float) -> float:
        """A speech model: predicted duration of a call, without queue and network."""
        return self.speech_ttft_ms(amount) + (self.ms_per_speech_input or 0.0) * amount


class _ProfileFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, LatencyProfile]


def _by_name(data: object, source: str) -> object:
    """``models`` as an array of tables with a ``name`` (the simulator's older form) as a table."""
    if not isinstance(data, dict) or not isinstance(data.get("models"), (list, dict)):
        return data
    models = data["models"]
    tables: dict[str, object] = {}
    if isinstance(models, list):
        for index, table in enumerate(models):
            if not isinstance(table, dict) or not isinstance(table.get("name"), str):
                raise ProfileError(f"{source}: models[{index}]: expected a table with a 'name'")
            name = table["name"]
            if name in tables:
                raise ProfileError(f"{source}: models[{index}].name: duplicate model {name!r}")
            tables[name] = {k: v for k, v in table.items() if k != "name"}
    else:
        for name, table in models.items():
            if isinstance(table, dict) and "name" in table:
                if table["name"] != name:
                    raise ProfileError(
                        f"{source}: models.{_toml_key(str(name))}.name: differs from the table name"
                    )
                table = {k: v for k, v in table.items() if k != "name"}
            tables[name] = table
    if not tables:
        raise ProfileError(f"{source}: models: no model defined")
    return {**data, "models": tables}


# -- files -------------------------------------------------------------------------------

_BARE_KEY: Final = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def dumps_profiles(profiles: Mapping[str, LatencyProfile], *, fmt: str = "toml") -> str:
    """The text of a profile file (``toml`` or ``json``)."""
    tables = {
        name: profile.model_dump(exclude_none=True, exclude_defaults=False)
        for name, profile in profiles.items()
    }
    for table in tables.values():
        if not table.get("note"):
            table.pop("note", None)
    if fmt == "json":
        return json.dumps({"models": tables}, indent=2, ensure_ascii=False) + "\n"
    lines = [
        "# chainlat latency profiles: service time (ms) = ttft_base_ms",
        "#   + ttft_per_input_token_ms * input tokens + decode_ms_per_token * (output tokens - 1)",
    ]
    for name, table in tables.items():
        lines.append("")
        lines.append(f"[models.{_toml_key(name)}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in table.items())
    return "\n".join(lines) + "\n"


def save_profiles(path: str | os.PathLike[str], profiles: Mapping[str, LatencyProfile]) -> None:
    """Write profiles to a ``.toml`` or ``.json`` file (by its suffix; TOML otherwise).

    Example::

        save_profiles("profiles.toml", fit_profiles(runs))
    """
    file = Path(path)
    text = dumps_profiles(profiles, fmt="json" if file.suffix.lower() == ".json" else "toml")
    try:
        file.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{file}: cannot write: {exc.strerror or exc}") from None


def load_profiles(path: str | os.PathLike[str]) -> dict[str, LatencyProfile]:
    """Read and validate a profile file (TOML or JSON), written by hand or by ``chainlat profile``.

    The file has one table per model under ``models``::

        [models.gpt-4o]            # a vendor's figures: 300 ms to first token, 80 tokens/s
        ttft_base_ms = 300
        decode_ms_per_token = 12.5

    Raises:
        ProfileError: the file is missing or malformed; the message names the
            file and the key path (``profiles.toml: models.gpt-4o.ttft_base_ms: ...``).
    """
    file = Path(path)
    try:
        with reading(file, ProfileError, "no such profile file"):
            text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        line, why = undecodable(exc)
        raise ProfileError(f"{file}:{line}: {why}") from None
    data: object
    suffix = file.suffix.lower()
    if suffix not in (".toml", ".json", ""):
        raise ProfileError(f"{file}: unknown format {suffix!r}; use .toml or .json")
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProfileError(f"{file}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    else:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ProfileError(f"{file}: invalid TOML: {exc}") from None
    return parse_profiles(data, source=str(file))


def parse_profiles(data: object, *, source: str = "<inline>") -> dict[str, LatencyProfile]:
    """Validate profiles already parsed into Python objects (``{"models": {...}}``)."""
    try:
        parsed = _ProfileFile.model_validate(_by_name(data, source))
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        where = ".".join(_toml_key(str(p)) for p in first["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ProfileError(
            f"{source}: {where + ': ' if where else ''}{_message(first)}{more}"
        ) from None
    return dict(parsed.models)


def _message(error: Any) -> str:
    kind = error["type"]
    value = error.get("input")
    shown = (
        json.dumps(value) if isinstance(value, (int, float, str, bool)) else type(value).__name__
    )
    if kind == "extra_forbidden":
        known = ", ".join(LatencyProfile.model_fields)
        return f"unknown key (expected one of: {known})"
    if kind == "missing":
        return "required key missing"
    if kind in ("greater_than_equal", "less_than_equal"):
        ctx = error.get("ctx", {})
        bound = ctx.get("ge", ctx.get("le"))
        word = "at least" if kind == "greater_than_equal" else "at most"
        return f"must be {word} {bound:g}, got {shown}"
    return f"{error['msg'].lower()}, got {shown}"
