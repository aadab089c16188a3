"""Model profiles for the simulator: the latency model's parameters and the files they come from.

Public names are re-exported by `chainlat.sim`, which documents the latency model.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from chainlat._core.errors import InputError


class ProfileError(InputError, ValueError):
    """A model profile, or a profiles file, that cannot be used; the message names where.

    An `InputError` (the CLI's exit code 2) and a `ValueError` (a bad argument).
    """


@dataclass(frozen=True)
class ModelProfile:
    """How long one simulated model takes.

    Example:
        >>> p = ModelProfile("fast", ttft_base_ms=100, decode_ms_per_token=10, output_tokens=5)
        >>> p.latency_ms(input_tokens=0)
        140.0

    Attributes:
        name: Model name clients ask for (``"model"`` in the request).
        ttft_base_ms: Prefill time for an empty prompt.
        ttft_per_input_token_ms: Extra prefill time per input token.
        decode_ms_per_token: Time per output token after the first.
        output_tokens: Tokens in every answer, unless the request's ``max_tokens`` is lower.
        slots: Requests the model works on at once; more wait in a FIFO queue.
        jitter: Sigma of the log-normal factor on prefill and decode; 0 for none.
    """

    name: str
    ttft_base_ms: float = 100.0
    ttft_per_input_token_ms: float = 0.0
    decode_ms_per_token: float = 10.0
    output_tokens: int = 16
    slots: int = 4
    jitter: float = 0.0

    def __post_init__(self) -> None:
        for key, problem in _profile_problems(vars(self)):
            raise ProfileError(f"ModelProfile {self.name!r}: {key}: {problem}")

    def ttft_ms(self, input_tokens: int) -> float:
        """Nominal time to first token (prefill), without queueing, network or jitter."""
        return self.ttft_base_ms + self.ttft_per_input_token_ms * input_tokens

    def latency_ms(self, input_tokens: int, output_tokens: int | None = None) -> float:
        """Nominal time to the last token, without queueing, network or jitter."""
        n = self.output_tokens if output_tokens is None else min(output_tokens, self.output_tokens)
        return self.ttft_ms(input_tokens) + self.decode_ms_per_token * max(n - 1, 0)


def _profile_problems(values: Mapping[str, object]) -> Iterable[tuple[str, str]]:
    """(key, problem) for each bad value of a profile's fields."""
    name = values["name"]
    if not isinstance(name, str) or not name or "/" in name:
        yield "name", f"expected a non-empty string without '/', got {name!r}"
    for key, value in values.items():
        if key == "name":
            continue
        if key in ("output_tokens", "slots"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                yield key, f"expected an integer >= 1, got {value!r}"
        elif (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            yield key, f"expected a number >= 0, got {value!r}"


DEFAULT_PROFILES: tuple[ModelProfile, ...] = (
    ModelProfile(
        "sim-large",
        ttft_base_ms=350.0,
        ttft_per_input_token_ms=0.25,
        decode_ms_per_token=10.0,
        output_tokens=41,
        slots=4,
        jitter=0.1,
    ),
    ModelProfile(
        "sim-small",
        ttft_base_ms=90.0,
        ttft_per_input_token_ms=0.1,
        decode_ms_per_token=3.5,
        output_tokens=41,
        slots=16,
        jitter=0.1,
    ),
    ModelProfile(
        "sim-embed",
        ttft_base_ms=15.0,
        ttft_per_input_token_ms=0.02,
        decode_ms_per_token=0.0,
        output_tokens=1,
        slots=32,
        jitter=0.1,
    ),
)
"""``sim-large`` (~800 ms), ``sim-small`` (~250 ms), ``sim-embed`` (~19 ms) at 200 input tokens."""


def load_profiles(path: str | os.PathLike[str]) -> list[ModelProfile]:
    """Read model profiles from a TOML or JSON file.

    The file holds a ``models`` table keyed by name (or an array of tables with ``name``);
    keys left out take the `ModelProfile` defaults.

    Example:
        >>> # sim.toml:  [models.fast]
        >>> #            ttft_base_ms = 120
        >>> profiles = load_profiles("sim.toml")  # doctest: +SKIP

    Args:
        path: A ``.toml`` or ``.json`` file.

    Returns:
        The profiles, in file order.

    Raises:
        ProfileError: The file cannot be read or parsed, or a value is wrong; the message
            names the file and the key, e.g. ``sim.toml: models.fast.slots: expected an
            integer >= 1, got 0``.
    """
    where = os.fspath(path)
    suffix = Path(where).suffix.lower()
    try:
        text = Path(where).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ProfileError(f"{where}: cannot read: {reason}") from None
    data: object
    if suffix == ".toml":
        data = _parse_toml(where, text)
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProfileError(f"{where}: invalid JSON: {exc}") from None
    else:
        raise ProfileError(f"{where}: unknown format {suffix or '(none)'!r}; use .toml or .json")
    return _profiles_from(where, data)


def _parse_toml(where: str, text: str) -> object:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{where}: invalid TOML: {exc}") from None


def _profiles_from(where: str, data: object) -> list[ModelProfile]:
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: expected a table with a 'models' key")
    for key in data:
        if key != "models":
            raise ProfileError(f"{where}: {key}: unknown key (expected only 'models')")
    models = data.get("models")
    entries: list[tuple[str, dict[str, Any]]] = []
    if isinstance(models, dict):
        for name, table in models.items():
            if not isinstance(table, dict):
                raise ProfileError(f"{where}: models.{name}: expected a table")
            if "name" in table and table["name"] != name:
                raise ProfileError(f"{where}: models.{name}.name: differs from the table name")
            entries.append((f"models.{name}", {**table, "name": name}))
    elif isinstance(models, list):
        for index, table in enumerate(models):
            if not isinstance(table, dict) or "name" not in table:
                raise ProfileError(f"{where}: models[{index}]: expected a table with a 'name'")
            entries.append((f"models[{index}]", table))
    else:
        raise ProfileError(f"{where}: models: expected a table of models or an array of them")
    if not entries:
        raise ProfileError(f"{where}: models: no model defined")
    known = {f.name for f in fields(ModelProfile)}
    profiles: list[ModelProfile] = []
    for location, table in entries:
        for key in table:
            if key not in known:
                raise ProfileError(
                    f"{where}: {location}.{key}: unknown key (expected {', '.join(sorted(known))})"
                )
        # Checked here first so that a bad value is reported with its place in the file.
        values = {f.name: table.get(f.name, f.default) for f in fields(ModelProfile)}
        for key, problem in _profile_problems(values):
            raise ProfileError(f"{where}: {location}.{key}: {problem}")
        profile = ModelProfile(**table)
        if any(p.name == profile.name for p in profiles):
            raise ProfileError(f"{where}: {location}.name: duplicate model {profile.name!r}")
        profiles.append(profile)
    return profiles
