"""OpenTelemetry's private names are reached only through ``_runtime/otel_compat.py`` (and
httpx's through ``httpx/_httpx_compat.py``), and the compatibility module answers the same
on every SDK it was checked on; ``test_sdk_floor.py`` runs it on the older ones."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import shutil
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from opentelemetry import propagate
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider, sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chainlat._runtime import otel_compat

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "chainlat"
COMPAT_MODULES = frozenset({"otel_compat.py", "_httpx_compat.py"})
OTEL_DISTRIBUTIONS = (
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-common",
    "opentelemetry-exporter-otlp-proto-grpc",
    "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry-proto",
    "opentelemetry-semantic-conventions",
)
"""What chainlat's runtime depends on (not the instrumentations the tests also install)."""
HTTPX_PRIVATE = frozenset({"_list", "_transport", "_mounts", "_client"})
"""httpx's (and the model SDKs') private names the instrumentation uses."""
_ACCESSORS = frozenset({"getattr", "hasattr", "setattr", "delattr", "attrgetter"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _members(tree: ast.AST) -> set[str]:
    """The private names a module or class defines: functions, classes, assigned names and
    attributes (``self._x = ...``)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.add(node.attr)
    return {name for name in found if _private(name)}


@cache
def otel_private_names() -> frozenset[str]:
    """Every private name the installed OpenTelemetry packages chainlat uses define."""
    names: set[str] = set()
    for distribution in OTEL_DISTRIBUTIONS:
        for file in importlib.metadata.distribution(distribution).files or ():
            if file.suffix == ".py":
                path = Path(str(file.locate()))
                names |= _members(ast.parse(path.read_text(encoding="utf-8")))
    return frozenset(names)


@cache
def _base_private_names(module: str, name: str) -> frozenset[str]:
    """The private members of an OpenTelemetry class and its OpenTelemetry bases."""
    cls = getattr(importlib.import_module(module), name, None)
    names: set[str] = set()
    for base in getattr(cls, "__mro__", ()):
        if base.__module__.startswith("opentelemetry"):
            names |= _members(ast.parse(inspect.getsource(base)))
    return frozenset(names)


@dataclass(frozen=True)
class Use:
    file: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def _is_self(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def _named_private(node: ast.AST) -> list[tuple[int, str]]:
    """Private attribute names in ``node``: ``x._name`` on another object, or a string given
    to ``getattr``/``hasattr``/``setattr``/``attrgetter``."""
    found: list[tuple[int, str]] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and _private(sub.attr) and not _is_self(sub.value):
            found.append((sub.lineno, sub.attr))
        elif isinstance(sub, ast.Call):
            func = sub.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if called in _ACCESSORS:
                found.extend(
                    (arg.lineno, arg.value)
                    for arg in sub.args
                    if isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and _private(arg.value)
                )
    return found


def _subclass_uses(tree: ast.Module, imported: dict[str, str], path: Path) -> list[Use]:
    """``self._x`` in a subclass of an OpenTelemetry class where ``_x`` is its base's."""
    found: list[Use] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        inherited: set[str] = set()
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in imported:
                inherited |= _base_private_names(imported[base.id], base.id)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and _is_self(sub.value) and sub.attr in inherited:
                found.append(Use(path, sub.lineno, f"{node.name} uses its base's {sub.attr}"))
    return found


def private_uses(package: Path = PACKAGE) -> list[Use]:
    """Every use of a private OpenTelemetry (or httpx) name outside the compat modules."""
    otel = otel_private_names()
    found: list[Use] = []
    for path in sorted(package.rglob("*.py")):
        if path.name in COMPAT_MODULES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        imported: dict[str, str] = {}  # local class name -> the opentelemetry module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("opentelemetry"):
                source = node.module or ""
                for alias in node.names:
                    if _private(alias.name) or any(map(_private, source.split("."))):
                        found.append(Use(path, node.lineno, f"imports {source}.{alias.name}"))
                    imported[alias.asname or alias.name] = source
            elif isinstance(node, ast.Import):
                found.extend(
                    Use(path, node.lineno, f"imports {alias.name}")
                    for alias in node.names
                    if alias.name.startswith("opentelemetry")
                    and any(map(_private, alias.name.split(".")))
                )
        for line, name in _named_private(tree):
            if name in otel:
                found.append(Use(path, line, f"uses OpenTelemetry's {name}"))
            elif name in HTTPX_PRIVATE:
                found.append(Use(path, line, f"uses httpx's {name}"))
        found.extend(_subclass_uses(tree, imported, path))
    return found


def test_no_private_opentelemetry_name_outside_the_compat_module() -> None:
    found = private_uses()
    assert not found, "\n".join(map(str, found))


def test_a_private_name_outside_the_compat_module_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "chainlat"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_runtime" / "sneaky.py").write_text(
        "from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "def f(span, provider, headers):\n"
        "    span._attributes._dict\n"
        "    getattr(provider, '_active_span_processor', None)\n"
        "    headers._list\n"
        "class P(SimpleSpanProcessor):\n"
        "    def on_end(self, span):\n"
        "        return self._shutdown\n"
    )
    found = {(u.line, u.what) for u in private_uses(copy) if u.file.name == "sneaky.py"}
    assert found == {
        (1, "imports opentelemetry.context._SUPPRESS_INSTRUMENTATION_KEY"),
        (4, "uses OpenTelemetry's _attributes"),
        (4, "uses OpenTelemetry's _dict"),
        (5, "uses OpenTelemetry's _active_span_processor"),
        (6, "uses httpx's _list"),
        (9, "P uses its base's _shutdown"),
    }


def test_blind_samplers_are_the_ones_this_sdk_has() -> None:
    """AlwaysRecordSampler (1.45 on) is among them exactly when the SDK has it."""
    expected = {"StaticSampler", "TraceIdRatioBased", "ParentBased", "ParentBasedTraceIdRatio"}
    if hasattr(sampling, "AlwaysRecordSampler"):
        expected.add("AlwaysRecordSampler")
    assert {kind.__name__ for kind in otel_compat.BLIND_SAMPLERS} == expected


def test_parent_based_delegates_to_its_five_samplers() -> None:
    root = sampling.TraceIdRatioBased(0.5)
    delegates = otel_compat.sampler_delegates(sampling.ParentBased(root))
    assert len(delegates) == 5
    assert delegates[0] is root
    assert otel_compat.sampler_delegates(sampling.ALWAYS_ON) == []


def test_a_providers_processors_are_read_in_order() -> None:
    provider = TracerProvider()
    first = SimpleSpanProcessor(InMemorySpanExporter())
    second = BatchSpanProcessor(InMemorySpanExporter())
    provider.add_span_processor(first)
    provider.add_span_processor(second)
    assert otel_compat.provider_processors(provider) == (first, second)
    assert otel_compat.provider_processors(object()) is None
    provider.shutdown()


def test_a_spans_attributes_lock_and_times_are_read_and_its_start_moved() -> None:
    provider = TracerProvider()
    span = provider.get_tracer("chainlat").start_span("s", attributes={"a": 1})
    assert isinstance(span, ReadableSpan)
    bounded, inner, lock = otel_compat.attribute_parts(span)
    assert inner == {"a": 1}
    assert otel_compat.attribute_dict(otel_compat.bounded_attributes(span)) is inner
    assert otel_compat.span_attribute_dict(span) is inner
    assert otel_compat.span_lock(span) is lock
    with otel_compat.attributes_lock(bounded):
        pass
    assert isinstance(otel_compat.start_time(span), int)
    with lock:
        otel_compat.move_start(span, 1_000)
    assert not otel_compat.has_ended(span)
    span.end(end_time=2_000)
    assert otel_compat.has_ended(span)
    assert span.start_time == 1_000
    context, _, name, start, end, _, events = otel_compat.span_slots(span)
    assert (context, name, start, end) == (span.context, "s", 1_000, 2_000)
    assert not otel_compat.event_count_source(events)
    provider.shutdown()


def test_anything_but_an_sdk_span_is_not_one() -> None:
    with pytest.raises(AttributeError):
        otel_compat.attribute_parts(object())
    assert otel_compat.bounded_attributes(object()) is None
    assert otel_compat.span_attribute_dict(object()) is None
    assert otel_compat.span_lock(object()) is None
    assert otel_compat.start_time(object()) is None
    assert otel_compat.attribute_dict(OrderedDict()) is None  # 1.38's dict past its limit
    assert otel_compat.exporter_endpoint(object()) is None
    assert otel_compat.composite_members(object()) == ()


def test_the_default_propagators_are_read() -> None:
    kinds = [
        type(p).__name__ for p in otel_compat.composite_members(propagate.get_global_textmap())
    ]
    assert kinds == ["TraceContextTextMapPropagator", "W3CBaggagePropagator"]


def test_meter_provider_is_passed_only_where_the_sdk_takes_it() -> None:
    for cls in (SimpleSpanProcessor, BatchSpanProcessor):
        takes = "meter_provider" in inspect.signature(cls).parameters
        assert otel_compat.accepts_meter_provider(cls) is takes


def test_the_suppression_key_is_the_sdks() -> None:
    from opentelemetry import context

    assert otel_compat.SUPPRESS_INSTRUMENTATION_KEY == context._SUPPRESS_INSTRUMENTATION_KEY
