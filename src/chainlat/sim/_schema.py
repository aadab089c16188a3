"""Values valid for a JSON schema: the arguments of simulated tool calls."""

from __future__ import annotations

import random
import uuid
from typing import Any, TypeGuard

from chainlat.sim._formats import WORDS

MAX_SCHEMA_DEPTH = 6
"""Deeper (or recursive) schemas get an empty object, array or a word."""
MAX_STRING_CHARS = 256
"""The longest string a ``minLength`` may ask for: a schema's length is the request's
word, not a licence to fill the server's memory."""


_FORMATS = {
    "date": "2025-01-01",
    "date-time": "2025-01-01T12:00:00Z",
    "time": "12:00:00",
    "duration": "PT1H",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
}


def schema_example(schema: object, rng: random.Random) -> object:
    """A value valid for a JSON schema: required properties only, simple values by type."""
    return _example(schema, schema, rng, 0)


def _example(schema: object, root: object, rng: random.Random, depth: int) -> object:
    if not isinstance(schema, dict):
        return rng.choice(WORDS)  # `true` or a malformed schema: anything goes
    ref = schema.get("$ref")
    if isinstance(ref, str) and depth < MAX_SCHEMA_DEPTH:
        return _example(_resolve(ref, root), root, rng, depth + 1)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            usable = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            return _example((usable or options)[0], root, rng, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        if depth >= MAX_SCHEMA_DEPTH:
            return {}
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
        return {n: _example(properties.get(n, {}), root, rng, depth + 1) for n in names}
    if kind == "array":
        if depth >= MAX_SCHEMA_DEPTH:
            return []
        least = schema.get("minItems")
        size = min(max(least, 1), 8) if is_int(least) else 1
        return [_example(schema.get("items", {}), root, rng, depth + 1) for _ in range(size)]
    if kind == "integer":
        return int(_clamp(schema, rng.randint(1, 9)))
    if kind == "number":
        return _clamp(schema, rng.randint(10, 99) / 10)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(schema, rng)


def _resolve(ref: str, root: object) -> object:
    """A local ``#/...`` reference (``#/$defs/Name``); an empty schema otherwise."""
    if not ref.startswith("#"):
        return {}
    node = root
    for part in ref.removeprefix("#").strip("/").split("/") if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node


def _clamp(schema: dict[str, Any], value: float) -> float:
    low, high = schema.get("minimum"), schema.get("maximum")
    low_x, high_x = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(low_x, (int, float)) and not isinstance(low_x, bool):
        value = max(value, low_x + 1)
    if isinstance(low, (int, float)) and not isinstance(low, bool):
        value = max(value, low)
    if isinstance(high_x, (int, float)) and not isinstance(high_x, bool):
        value = min(value, high_x - 1)
    if isinstance(high, (int, float)) and not isinstance(high, bool):
        value = min(value, high)
    return value


def _string(schema: dict[str, Any], rng: random.Random) -> str:
    word = rng.choice(WORDS)
    fmt = schema.get("format")
    if not isinstance(fmt, str):
        fmt = None  # a schema is the request's, so any JSON value may stand here
    if fmt in _FORMATS:
        return _FORMATS[fmt]
    if fmt == "email":
        return f"{word}@example.com"
    if fmt in ("uri", "url", "iri"):
        return f"https://example.com/{word}"
    if fmt == "uuid":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    least, most = schema.get("minLength"), schema.get("maxLength")
    if is_int(least) and len(word) < least:
        least = min(least, MAX_STRING_CHARS)
        word = (word * (least // len(word) + 1))[:least]
    if is_int(most) and len(word) > most:
        word = word[:most]
    return word


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
